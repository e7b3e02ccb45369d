// core/metadata/image.h
//
// MetadataImage: the cluster's metadata as of one offset of the
// __cluster_metadata log, Kafka's MetadataImage. MetadataDelta: the changes
// made by replaying metadata records (core/metadata/record_serde.h) on top
// of an image, Kafka's MetadataDelta.
//
//   MetadataDelta delta(image);
//   for (...) RETURN_IF_ERROR(delta.apply(record, offset, epoch));
//   image = delta.build();
//
// Sharing. An image is immutable; its parts (features, cluster, topics,
// configs, ...) are held by std::shared_ptr<const ...>, so copying an image
// copies a few pointers, and build() reuses every part (and every topic and
// config resource) the delta did not touch.
//
// Replay semantics follow Kafka's image deltas:
//   * PartitionChangeRecord merges as PartitionRegistration.merge: a null
//     array and Leader -2 mean "unchanged"; a leader change (even to the
//     same broker, or to -1) bumps the leader epoch; every change bumps the
//     partition epoch. Directories left out of a replica change follow their
//     replicas (new replicas get the unassigned directory); a partition with
//     no directories gets the migrating directory for each replica.
//   * RemoveTopicRecord removes the topic, its partitions and its topic
//     configs. A topic name may be reused once its topic is removed.
//   * FenceBrokerRecord, UnfenceBrokerRecord and
//     BrokerRegistrationChangeRecord need the broker registered at that
//     epoch. Fenced: 1 fence, 0 unchanged, -1 unfence; InControlledShutdown:
//     1 enter, 0 unchanged. A new registration replaces the old one.
//   * FeatureLevelRecord sets metadata.version (which must be at least 1);
//     any other feature at level 0 is removed.
//   * ConfigRecord with a null value, ClientQuotaRecord with Remove, and the
//     remove records delete; a config resource, quota entity or SCRAM
//     mechanism left with nothing is dropped.
//   * NoOpRecord and the metadata transaction markers (KIP-868: Begin, End,
//     AbortTransactionRecord) change nothing but the provenance; buffering
//     transactions is the reader's job.
// Errors (NotFound, AlreadyExists, FailedPrecondition, InvalidArgument) are
// returned for records that do not fit the state: a partition of an
// unknown topic, a change to an unknown partition, a second topic with a
// name or id in use, a fence at a stale broker epoch, removing an unknown
// ACL, and out-of-range enum values. A failed apply() changes nothing.
//
// Determinism. Every container is ordered; describe() is a canonical text
// of the whole image (provenance included) and hash() a 64-bit hash of it,
// so images built from the same records compare equal and hash alike on any
// node, and any difference in content changes both.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/metadata/record_serde.h"
#include "io/buffer.h"
#include "net/kafka/scram.h"
#include "net/kafka/wire.h"

namespace brook::metadata {

// Orders Uuids by their bytes.
struct UuidLess {
  bool operator()(const net::Uuid& a, const net::Uuid& b) const { return a.bytes < b.bytes; }
};

// Reserved directory ids (Kafka's DirectoryId).
inline constexpr net::Uuid kDirectoryUnassigned{};
inline constexpr net::Uuid kDirectoryLost{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};
inline constexpr net::Uuid kDirectoryMigrating{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}};

inline constexpr int32_t kNoLeader = -1;
inline constexpr int32_t kNoLeaderChange = -2;

inline constexpr std::string_view kMetadataVersionFeature = "metadata.version";

// Kafka's ConfigResource.Type codes, as ConfigRecord carries them.
inline constexpr int8_t kConfigResourceTopic = 2;
inline constexpr int8_t kConfigResourceBroker = 4;
inline constexpr int8_t kConfigResourceBrokerLogger = 8;
inline constexpr int8_t kConfigResourceClientMetrics = 16;
inline constexpr int8_t kConfigResourceGroup = 32;

// Where an image stands in the metadata log.
struct MetadataProvenance {
  int64_t last_offset = -1;  // the last record applied
  int32_t last_epoch = -1;   // its leader epoch
  bool operator==(const MetadataProvenance&) const = default;
};

// ---------------------------------------------------------------------------
// Features.

struct FeaturesImage {
  int16_t metadata_version = 0;  // 0: not set yet
  // Finalized levels of the other features; never 0.
  std::map<std::string, int16_t, std::less<>> levels;
  int8_t zk_migration_state = 0;  // Kafka's ZkMigrationState; 0 is NONE
  bool operator==(const FeaturesImage&) const = default;
};

// ---------------------------------------------------------------------------
// Cluster.

struct Endpoint {
  std::string host;
  uint16_t port = 0;
  int16_t security_protocol = 0;
  bool operator==(const Endpoint&) const = default;
};

struct VersionRange {
  int16_t min = 0;
  int16_t max = 0;
  bool operator==(const VersionRange&) const = default;
};

struct BrokerRegistration {
  int32_t id = -1;
  int64_t epoch = -1;
  net::Uuid incarnation_id;
  std::map<std::string, Endpoint, std::less<>> listeners;  // by listener name
  std::map<std::string, VersionRange, std::less<>> supported_features;
  std::optional<std::string> rack;
  bool fenced = true;
  bool in_controlled_shutdown = false;
  bool is_migrating_zk_broker = false;
  std::vector<net::Uuid> directories;  // sorted (UuidLess)
  bool operator==(const BrokerRegistration&) const = default;
};

struct ControllerRegistration {
  int32_t id = -1;
  net::Uuid incarnation_id;
  bool zk_migration_ready = false;
  std::map<std::string, Endpoint, std::less<>> listeners;
  std::map<std::string, VersionRange, std::less<>> supported_features;
  bool operator==(const ControllerRegistration&) const = default;
};

struct ClusterImage {
  std::map<int32_t, BrokerRegistration> brokers;
  std::map<int32_t, ControllerRegistration> controllers;

  const BrokerRegistration* broker(int32_t id) const;
  const ControllerRegistration* controller(int32_t id) const;
  bool operator==(const ClusterImage&) const = default;
};

// ---------------------------------------------------------------------------
// Topics.

struct PartitionRegistration {
  std::vector<int32_t> replicas;
  std::vector<net::Uuid> directories;  // one per replica (or none without replicas)
  std::vector<int32_t> isr;
  std::vector<int32_t> removing_replicas;
  std::vector<int32_t> adding_replicas;
  std::vector<int32_t> elr;  // eligible leader replicas (KIP-966)
  std::vector<int32_t> last_known_elr;
  int32_t leader = kNoLeader;
  int8_t leader_recovery_state = 0;  // 0 recovered, 1 recovering
  int32_t leader_epoch = -1;
  int32_t partition_epoch = -1;
  bool operator==(const PartitionRegistration&) const = default;
};

struct TopicImage {
  std::string name;
  net::Uuid id;
  std::map<int32_t, PartitionRegistration> partitions;

  const PartitionRegistration* partition(int32_t id) const;
  bool operator==(const TopicImage&) const = default;
};

struct TopicsImage {
  std::map<net::Uuid, std::shared_ptr<const TopicImage>, UuidLess> by_id;
  std::map<std::string, net::Uuid, std::less<>> by_name;

  const TopicImage* topic(const net::Uuid& id) const;
  const TopicImage* topic(std::string_view name) const;
  const PartitionRegistration* partition(const net::Uuid& topic_id, int32_t partition) const;
  bool operator==(const TopicsImage& o) const;
};

// ---------------------------------------------------------------------------
// Configs, client quotas, ACLs, producer ids, SCRAM, delegation tokens.

struct ConfigResource {
  int8_t type = 0;  // kConfigResource*
  std::string name;
  bool operator==(const ConfigResource&) const = default;
  bool operator<(const ConfigResource& o) const {
    return type != o.type ? type < o.type : name < o.name;
  }
};

using ConfigMap = std::map<std::string, std::string, std::less<>>;

struct ConfigurationsImage {
  // Never holds an empty map.
  std::map<ConfigResource, std::shared_ptr<const ConfigMap>> resources;

  const ConfigMap* find(const ConfigResource& resource) const;
  bool operator==(const ConfigurationsImage& o) const;
};

// Entity type ("user", "client-id", "ip") -> name; nullopt is the default
// entity of that type.
using ClientQuotaEntity = std::map<std::string, std::optional<std::string>>;

struct ClientQuotasImage {
  // Never holds an empty quota map. Values compare bit for bit.
  std::map<ClientQuotaEntity, std::map<std::string, double>> entities;
  bool operator==(const ClientQuotasImage& o) const;
};

struct StandardAcl {
  int8_t resource_type = 0;
  std::string resource_name;
  int8_t pattern_type = 0;
  std::string principal;
  std::string host;
  int8_t operation = 0;
  int8_t permission_type = 0;
  bool operator==(const StandardAcl&) const = default;
};

struct AclsImage {
  std::map<net::Uuid, StandardAcl, UuidLess> acls;
  bool operator==(const AclsImage&) const = default;
};

struct ProducerIdsImage {
  int64_t next_producer_id = -1;  // -1: none allocated yet
  bool operator==(const ProducerIdsImage&) const = default;
};

using ScramCredential = net::ScramCredential;

struct ScramImage {
  // Mechanism (1 SCRAM-SHA-256, 2 SCRAM-SHA-512) -> user -> credential.
  // Never holds an empty user map.
  std::map<int8_t, std::map<std::string, ScramCredential>> mechanisms;
  bool operator==(const ScramImage&) const = default;
};

struct DelegationToken {
  std::string owner;
  std::string requester;
  std::vector<std::string> renewers;
  int64_t issue_timestamp = 0;
  int64_t max_timestamp = 0;
  int64_t expiration_timestamp = 0;
  bool operator==(const DelegationToken&) const = default;
};

struct DelegationTokensImage {
  std::map<std::string, DelegationToken> tokens;  // by token id
  bool operator==(const DelegationTokensImage&) const = default;
};

// ---------------------------------------------------------------------------

class MetadataImage {
 public:
  // The empty image: what the log holds before its first record.
  MetadataImage();

  const MetadataProvenance& provenance() const { return provenance_; }
  const FeaturesImage& features() const { return *features_; }
  const ClusterImage& cluster() const { return *cluster_; }
  const TopicsImage& topics() const { return *topics_; }
  const ConfigurationsImage& configs() const { return *configs_; }
  const ClientQuotasImage& client_quotas() const { return *client_quotas_; }
  const AclsImage& acls() const { return *acls_; }
  const ProducerIdsImage& producer_ids() const { return *producer_ids_; }
  const ScramImage& scram() const { return *scram_; }
  const DelegationTokensImage& delegation_tokens() const { return *delegation_tokens_; }

  // The same contents at another provenance.
  MetadataImage with_provenance(MetadataProvenance provenance) const;

  // True when no record has changed anything (provenance aside).
  bool empty() const;

  // The records a snapshot of this image holds, each at its highest
  // version: features (metadata.version first), brokers, controllers,
  // topics each followed by its partitions, configs, client quotas,
  // producer ids, ACLs, SCRAM credentials, delegation tokens. Replaying them
  // into the empty image (load_snapshot) gives this image back.
  std::vector<MetadataRecordAndVersion> to_records() const;

  // Canonical text of the whole image, provenance included: one line per
  // item, in key order, strings quoted with escapes.
  std::string describe() const;
  // A 64-bit hash of describe().
  uint64_t hash() const;

  // Compares contents and provenance.
  bool operator==(const MetadataImage& o) const;

 private:
  friend class MetadataDelta;

  MetadataProvenance provenance_;
  std::shared_ptr<const FeaturesImage> features_;
  std::shared_ptr<const ClusterImage> cluster_;
  std::shared_ptr<const TopicsImage> topics_;
  std::shared_ptr<const ConfigurationsImage> configs_;
  std::shared_ptr<const ClientQuotasImage> client_quotas_;
  std::shared_ptr<const AclsImage> acls_;
  std::shared_ptr<const ProducerIdsImage> producer_ids_;
  std::shared_ptr<const ScramImage> scram_;
  std::shared_ptr<const DelegationTokensImage> delegation_tokens_;
};

class MetadataDelta {
 public:
  explicit MetadataDelta(MetadataImage base);

  const MetadataImage& base() const { return base_; }
  // The provenance build() gives: the base's until a record is applied at
  // an offset.
  const MetadataProvenance& provenance() const { return provenance_; }
  void set_provenance(MetadataProvenance provenance) { provenance_ = provenance; }

  // Applies one record; the provenance is left alone.
  absl::Status apply(const MetadataRecord& record);
  // Applies the record found at `offset`, written in leader epoch `epoch`.
  absl::Status apply(const MetadataRecord& record, int64_t offset, int32_t epoch);
  // Applies the records of one batch, at base_offset, base_offset + 1, ...
  // Stops at the first failure: the records before it stay applied.
  absl::Status apply_batch(int64_t base_offset, int32_t epoch,
                           std::span<const MetadataRecord> records);
  absl::Status apply_batch(int64_t base_offset, int32_t epoch,
                           std::span<const MetadataRecordAndVersion> records);

  // The current state of a topic or broker, with this delta's changes.
  const TopicImage* topic(const net::Uuid& id) const;
  const BrokerRegistration* broker(int32_t id) const;

  // The base image with every change applied. The delta stays usable.
  MetadataImage build() const;

 private:
  absl::Status apply_one(const net::RegisterBrokerRecord& r);
  absl::Status apply_one(const net::UnregisterBrokerRecord& r);
  absl::Status apply_one(const net::TopicRecord& r);
  absl::Status apply_one(const net::PartitionRecord& r);
  absl::Status apply_one(const net::ConfigRecord& r);
  absl::Status apply_one(const net::PartitionChangeRecord& r);
  absl::Status apply_one(const net::FenceBrokerRecord& r);
  absl::Status apply_one(const net::UnfenceBrokerRecord& r);
  absl::Status apply_one(const net::RemoveTopicRecord& r);
  absl::Status apply_one(const net::DelegationTokenRecord& r);
  absl::Status apply_one(const net::UserScramCredentialRecord& r);
  absl::Status apply_one(const net::FeatureLevelRecord& r);
  absl::Status apply_one(const net::ClientQuotaRecord& r);
  absl::Status apply_one(const net::ProducerIdsRecord& r);
  absl::Status apply_one(const net::BrokerRegistrationChangeRecord& r);
  absl::Status apply_one(const net::AccessControlEntryRecord& r);
  absl::Status apply_one(const net::RemoveAccessControlEntryRecord& r);
  absl::Status apply_one(const net::NoOpRecord& r);
  absl::Status apply_one(const net::ZkMigrationStateRecord& r);
  absl::Status apply_one(const net::RemoveUserScramCredentialRecord& r);
  absl::Status apply_one(const net::BeginTransactionRecord& r);
  absl::Status apply_one(const net::EndTransactionRecord& r);
  absl::Status apply_one(const net::AbortTransactionRecord& r);
  absl::Status apply_one(const net::RemoveDelegationTokenRecord& r);
  absl::Status apply_one(const net::RegisterControllerRecord& r);

  // Copy-on-write access to the parts.
  FeaturesImage& features();
  ClusterImage& cluster();
  ClientQuotasImage& client_quotas();
  AclsImage& acls();
  ProducerIdsImage& producer_ids();
  ScramImage& scram();
  DelegationTokensImage& delegation_tokens();
  const ClusterImage& current_cluster() const;
  const AclsImage& current_acls() const;
  // The topic id a name belongs to now, if any.
  std::optional<net::Uuid> topic_id(std::string_view name) const;
  // The topic, copied into the delta on first use; nullptr when absent.
  TopicImage* mutable_topic(const net::Uuid& id);
  ConfigMap& mutable_config(const ConfigResource& resource);

  MetadataImage base_;
  MetadataProvenance provenance_;
  std::optional<FeaturesImage> features_;
  std::optional<ClusterImage> cluster_;
  std::optional<ClientQuotasImage> client_quotas_;
  std::optional<AclsImage> acls_;
  std::optional<ProducerIdsImage> producer_ids_;
  std::optional<ScramImage> scram_;
  std::optional<DelegationTokensImage> delegation_tokens_;
  // Topics and configs change one by one: nullopt means removed.
  std::map<net::Uuid, std::optional<TopicImage>, UuidLess> topic_changes_;
  std::map<std::string, std::optional<net::Uuid>, std::less<>> topic_name_changes_;
  std::map<ConfigResource, ConfigMap> config_changes_;  // an empty map removes
};

// The image a snapshot's records describe: the records replayed into the
// empty image, at `provenance` (the snapshot's end offset - 1 and epoch).
// The metadata loader's step (Kafka's MetadataLoader), shared by controllers
// and brokers: the image after the records of one committed batch of the
// metadata log (a record batch's bytes, records at base_offset,
// base_offset + 1, ... written in leader epoch `epoch`). An error names the
// first record that does not decode or does not replay.
absl::StatusOr<MetadataImage> replay_batch(const MetadataImage& base, const io::Buffer& batch,
                                           int64_t base_offset, int32_t epoch);

// The image of a snapshot's record values (each a serialized metadata
// record), at the snapshot's end offset and epoch.
absl::StatusOr<MetadataImage> load_snapshot_values(std::span<const io::Buffer> values, int64_t end_offset,
                                                   int32_t epoch);

absl::StatusOr<MetadataImage> load_snapshot(std::span<const MetadataRecordAndVersion> records,
                                            MetadataProvenance provenance);
absl::StatusOr<MetadataImage> load_snapshot(std::span<const MetadataRecord> records,
                                            MetadataProvenance provenance);

}  // namespace brook::metadata
