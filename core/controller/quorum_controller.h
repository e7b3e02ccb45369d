// core/controller/quorum_controller.h
//
// QuorumController: the single writer of the metadata log (Kafka's
// QuorumController). It runs on every controller beside its RaftNode and is
// active on the Raft leader only; the others replay the log and answer
// NOT_CONTROLLER.
//
// State. `image()` is the committed image: every committed record replayed,
// on every controller alike (the same MetadataDelta code a broker runs). The
// active controller also keeps `latest`, the committed image plus the
// records it has appended and not yet seen committed, and decides every
// request on it, so requests queued behind an uncommitted write see its
// effect (Kafka's timeline data structures). Losing leadership drops
// `latest`; the next activation starts from the committed image again.
//
// Activation. A controller becomes active when its Raft node leads and the
// LeaderChange batch of its own epoch has been delivered: everything before
// it is then committed and replayed. On an empty log the first active
// controller writes the bootstrap records (metadata.version) before it
// serves anything.
//
// Requests run one at a time (a queue): each is decided on `latest`, its
// records are appended as one batch (atomically, as Kafka's atomic
// ControllerResults), and the queue moves on while the answer waits for
// the commit. A write whose epoch ends before it commits is answered
// NOT_CONTROLLER: the client retries against the new controller, which
// may or may not hold it.
//
// Brokers (Kafka's ClusterControlManager and BrokerHeartbeatManager):
// - BrokerRegistration writes a fenced RegisterBrokerRecord whose broker
//   epoch is its own offset. A live session of another incarnation under
//   the same id gets DUPLICATE_BROKER_REGISTRATION.
// - BrokerHeartbeat renews the broker's session (in memory on the active
//   controller: a new controller starts every session afresh). A fenced
//   broker that has replayed its registration and does not want to stay
//   fenced is unfenced, and leaderless partitions it can lead get it. A
//   broker that wants to shut down enters controlled shutdown: it leaves
//   every ISR and leadership moves away; once it leads nothing and has
//   replayed that, it is told to shut down and is fenced.
// - A broker whose session lapses (broker.session.timeout.ms) is fenced:
//   it leaves every ISR (the last member stays, leaderless) and its
//   partitions get new leaders, in the same batch.
//
// Topics (Kafka's ReplicationControlManager): CreateTopics (names checked
// as Kafka does, colliding '.'/'_' names refused, replicas placed by
// core/placement across unfenced brokers and racks, the ISR the unfenced
// replicas), DeleteTopics (by name or id), CreatePartitions, AlterPartition
// (the partition leader's ISR changes, checked against broker, leader and
// partition epochs), AlterPartitionReassignments and
// ListPartitionReassignments, leader election by core/controller/partition_change.h,
// ElectLeaders, and, every leader.imbalance.check.interval.seconds, the
// leadership of partitions whose preferred replica is back in the ISR
// moved back to it (auto.leader.rebalance.enable).
//
// Also: AllocateProducerIds (blocks of 1000), IncrementalAlterConfigs and
// AlterConfigs (validated by core/configs), CreateAcls and DeleteAcls
// (core/controller/acls.h), AlterClientQuotas
// (core/controller/client_quotas.h), UpdateFeatures (metadata.version
// upgrades within what every registered broker supports), Envelope
// (requests brokers forward: the forwardable APIs above), DescribeConfigs
// from the committed image (KIP-919), and periodic
// snapshots of the committed image
// (metadata.log.max.record.bytes.between.snapshots).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/configs/configs.h"
#include "core/metadata/image.h"
#include "core/metadata/record_serde.h"
#include "io/context.h"
#include "io/sync.h"
#include "io/task.h"
#include "io/time.h"
#include "net/kafka/frame.h"
#include "net/kafka/messages/allocate_producer_ids_request.h"
#include "net/kafka/messages/allocate_producer_ids_response.h"
#include "net/kafka/messages/alter_client_quotas_request.h"
#include "net/kafka/messages/alter_client_quotas_response.h"
#include "net/kafka/messages/alter_configs_request.h"
#include "net/kafka/messages/alter_configs_response.h"
#include "net/kafka/messages/alter_partition_reassignments_request.h"
#include "net/kafka/messages/alter_partition_reassignments_response.h"
#include "net/kafka/messages/alter_partition_request.h"
#include "net/kafka/messages/alter_partition_response.h"
#include "net/kafka/messages/broker_heartbeat_request.h"
#include "net/kafka/messages/broker_heartbeat_response.h"
#include "net/kafka/messages/broker_registration_request.h"
#include "net/kafka/messages/broker_registration_response.h"
#include "net/kafka/messages/alter_user_scram_credentials_request.h"
#include "net/kafka/messages/alter_user_scram_credentials_response.h"
#include "net/kafka/messages/create_acls_request.h"
#include "net/kafka/messages/create_acls_response.h"
#include "net/kafka/messages/create_partitions_request.h"
#include "net/kafka/messages/create_partitions_response.h"
#include "net/kafka/messages/create_topics_request.h"
#include "net/kafka/messages/create_topics_response.h"
#include "net/kafka/messages/delete_acls_request.h"
#include "net/kafka/messages/delete_acls_response.h"
#include "net/kafka/messages/delete_topics_request.h"
#include "net/kafka/messages/delete_topics_response.h"
#include "net/kafka/messages/elect_leaders_request.h"
#include "net/kafka/messages/elect_leaders_response.h"
#include "net/kafka/messages/envelope_request.h"
#include "net/kafka/messages/envelope_response.h"
#include "net/kafka/messages/incremental_alter_configs_request.h"
#include "net/kafka/messages/incremental_alter_configs_response.h"
#include "net/kafka/messages/list_partition_reassignments_request.h"
#include "net/kafka/messages/list_partition_reassignments_response.h"
#include "net/kafka/messages/unregister_broker_request.h"
#include "net/kafka/messages/update_features_request.h"
#include "net/kafka/messages/update_features_response.h"
#include "net/kafka/messages/unregister_broker_response.h"
#include "raft/raft_node.h"

namespace brook::controller {

// metadata.version levels (Kafka's MetadataVersion feature levels).
inline constexpr int16_t kMetadataVersionMin = 7;      // 3.3-IV3
inline constexpr int16_t kMetadataVersionLatest = 21;  // 3.9-IV0
inline constexpr int32_t kProducerIdBlockSize = 1000;
// Kafka's limit on a topic name's length.
inline constexpr size_t kTopicNameMax = 249;

struct ControllerConfig {
  int32_t node_id = 0;
  std::string cluster_id;
  // broker.session.timeout.ms
  io::Duration broker_session_timeout{std::chrono::milliseconds(9000)};
  // How often the active controller looks for lapsed sessions.
  io::Duration fence_check_interval{std::chrono::milliseconds(250)};
  // num.partitions, default.replication.factor
  int32_t num_partitions = 1;
  int16_t default_replication_factor = 1;
  // delete.topic.enable
  bool delete_topic_enable = true;
  // unclean.leader.election.enable (the default when no config sets it)
  bool unclean_leader_election = false;
  // auto.leader.rebalance.enable and leader.imbalance.check.interval.seconds:
  // this often, the active controller moves the leadership of every
  // partition whose preferred replica (the first) is in the ISR and
  // eligible, but does not lead, back to it.
  bool auto_leader_rebalance = true;
  io::Duration leader_imbalance_check_interval{std::chrono::seconds(300)};
  // The metadata.version a new cluster starts with.
  int16_t bootstrap_metadata_version = kMetadataVersionLatest;
  // Written with it in the new cluster's first batch (SCRAM credentials
  // from `brook format --add-scram`, core/bootstrap_records.h).
  std::vector<metadata::MetadataRecord> bootstrap_records;
  // The node's server.properties as DescribeConfigs shows them
  // (STATIC_BROKER_CONFIG).
  std::map<std::string, std::string> static_configs;
  // metadata.log.max.record.bytes.between.snapshots (0: never).
  int64_t snapshot_max_new_record_bytes = 20 << 20;
  // Mutation testing only: answer writes once appended, before they
  // commit. The simulation's checkers must catch it.
  bool unsafe_answer_before_commit = false;
};

// What each write did, for the simulation's checkers; never changes
// behaviour.
class ControllerProbe {
 public:
  virtual ~ControllerProbe() = default;
  // A block of producer ids was committed and handed to `broker_id`.
  virtual void producer_ids_granted(int32_t broker_id, int64_t start, int32_t length) = 0;
  // A write is answered as committed.
  virtual void write_committed(const raft::AppendedBatch& batch) = 0;
};

class QuorumController final : public raft::RaftListener {
 public:
  QuorumController(io::Context& ctx, raft::RaftNode& raft, ControllerConfig config);
  QuorumController(const QuorumController&) = delete;
  QuorumController& operator=(const QuorumController&) = delete;

  // Receives every committed batch and snapshot after the controller has
  // replayed it (a second listener: simulation checkers).
  void set_observer(raft::RaftListener* observer) { observer_ = observer; }
  void set_probe(ControllerProbe* probe) { probe_ = probe; }

  // Background work: session expiry while active, snapshots. Runs until
  // cancelled.
  io::Task<void> run();

  // Whether handle_request answers this API.
  static bool serves(int16_t api_key);
  // Answers one controller API request frame (ApiVersions too).
  io::Task<absl::StatusOr<io::BufferChain>> handle_request(net::RequestFrame frame);

  // The requests, decoded; `version` is the request's version.
  io::Task<net::BrokerRegistrationResponse> register_broker(net::BrokerRegistrationRequest request);
  io::Task<net::BrokerHeartbeatResponse> heartbeat(net::BrokerHeartbeatRequest request);
  io::Task<net::UnregisterBrokerResponse> unregister_broker(net::UnregisterBrokerRequest request);
  io::Task<net::CreateTopicsResponse> create_topics(net::CreateTopicsRequest request, int16_t version);
  io::Task<net::DeleteTopicsResponse> delete_topics(net::DeleteTopicsRequest request, int16_t version);
  io::Task<net::CreatePartitionsResponse> create_partitions(net::CreatePartitionsRequest request);
  // ElectLeaders: PREFERRED (0) moves leadership to the first replica when
  // it is in the ISR and eligible (ELECTION_NOT_NEEDED when it leads,
  // PREFERRED_LEADER_NOT_AVAILABLE when it cannot); UNCLEAN (1) elects a
  // leader for a leaderless partition, from outside the ISR when none in it
  // is eligible (ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is). Null
  // partitions means every partition, answering only those not already
  // as asked.
  io::Task<net::ElectLeadersResponse> elect_leaders(net::ElectLeadersRequest request, int16_t version);
  io::Task<net::AlterPartitionResponse> alter_partition(net::AlterPartitionRequest request, int16_t version);
  // AlterPartitionReassignments (KIP-455): a partition's new replicas (its
  // target) or, null, the cancellation of its ongoing reassignment. The
  // target's new replicas join the partition as adding replicas and the
  // ones it drops stay as removing replicas until every adding replica is
  // in the ISR (core/controller/partition_change.h completes it, on this
  // request or on the leader's AlterPartition). A new target replaces an
  // ongoing reassignment; a cancellation takes the adding replicas out
  // (INVALID_REPLICA_ASSIGNMENT when that leaves no ISR member and unclean
  // election is off; NO_REASSIGNMENT_IN_PROGRESS when there is none).
  io::Task<net::AlterPartitionReassignmentsResponse> alter_partition_reassignments(
      net::AlterPartitionReassignmentsRequest request);
  // ListPartitionReassignments: the ongoing reassignments, of every
  // partition (null topics) or of those listed.
  io::Task<net::ListPartitionReassignmentsResponse> list_partition_reassignments(
      net::ListPartitionReassignmentsRequest request);
  io::Task<net::AllocateProducerIdsResponse> allocate_producer_ids(net::AllocateProducerIdsRequest request);
  io::Task<net::IncrementalAlterConfigsResponse> incremental_alter_configs(
      net::IncrementalAlterConfigsRequest request);
  io::Task<net::AlterConfigsResponse> alter_configs(net::AlterConfigsRequest request);
  io::Task<net::CreateAclsResponse> create_acls(net::CreateAclsRequest request);
  io::Task<net::DeleteAclsResponse> delete_acls(net::DeleteAclsRequest request);
  io::Task<net::AlterClientQuotasResponse> alter_client_quotas(net::AlterClientQuotasRequest request);
  // AlterUserScramCredentials (core/controller/scram.h).
  io::Task<net::AlterUserScramCredentialsResponse> alter_user_scram_credentials(
      net::AlterUserScramCredentialsRequest request);
  io::Task<net::UpdateFeaturesResponse> update_features(net::UpdateFeaturesRequest request, int16_t version);
  // A request a broker forwards on behalf of a client: the inner request
  // (one of the forwardable controller APIs) is answered as if sent here.
  io::Task<net::EnvelopeResponse> envelope(net::EnvelopeRequest request);

  // The committed image, and the end of the log it holds.
  const metadata::MetadataImage& image() const { return committed_; }
  int64_t committed_end() const { return committed_end_; }
  bool active() const;
  int32_t node_id() const { return config_.node_id; }

  // raft::RaftListener
  void handle_commit(const raft::CommittedBatch& batch) override;
  void handle_snapshot(raft::SnapshotId id, const std::vector<io::Buffer>& values) override;
  void handle_leader_change(int32_t leader_id, int32_t epoch) override;

 private:
  struct Session {
    io::Instant last_contact{};
    // The batch that moved the broker into controlled shutdown (-1: none).
    int64_t controlled_shutdown_offset = -1;
  };

  using Records = std::vector<metadata::MetadataRecord>;

  // REQUIRES the queue. Whether this controller may write now; drops the
  // active state when Raft moved on.
  bool check_active();
  void deactivate();
  // REQUIRES the queue and check_active(). Appends `records` as one batch
  // and applies them to latest_.
  io::Task<absl::StatusOr<raft::AppendedBatch>> append(Records records,
                                                       std::optional<int64_t> expected_base = std::nullopt);
  // REQUIRES the queue (`lock`) and check_active(). Appends `records` as one
  // batch, runs `appended` on it while still holding the queue, gives the
  // queue up and waits for the commit: Ok once committed, an error when the
  // epoch ended first (the write may or may not commit).
  io::Task<absl::Status> write(Records records, io::SemaphoreUnits lock,
                               std::optional<int64_t> expected_base = std::nullopt,
                               std::function<void(const raft::AppendedBatch&)> appended = nullptr);

  // Record builders on latest_.
  bool eligible(int32_t broker_id) const;
  enum class StepDown : uint8_t { kFence, kControlledShutdown };
  // The broker fenced (or put in controlled shutdown), out of every ISR and
  // leadership.
  void step_down_records(int32_t broker_id, StepDown how, Records& out) const;
  void unfence_records(int32_t broker_id, Records& out) const;
  // Partition changes moving `broker_id` out of every ISR (leaders moved).
  void remove_from_isrs(int32_t broker_id, Records& out) const;
  bool leads_any(int32_t broker_id) const;
  // Whether `p`'s preferred replica (its first) is in its ISR and eligible.
  bool preferred_can_lead(const metadata::PartitionRegistration& p) const;
  bool unclean_allowed(const std::string& topic) const;
  // One partition's reassignment (a null target cancels it): the error to
  // answer and its message; a change is applied to `pending` and its record
  // added to `records`.
  std::pair<net::Error, std::string> reassignment_change(const std::string& topic_name, int32_t partition_id,
                                                         const std::optional<std::vector<int32_t>>& target,
                                                         metadata::MetadataDelta& pending, Records& records) const;
  // The cluster-wide broker configs topic defaults fall back on.
  configs::BrokerLayers broker_layers() const;
  net::Uuid new_topic_id();
  net::Error check_broker_epoch(int32_t broker_id, int64_t epoch) const;

  io::Task<void> bootstrap();
  io::Task<void> fence_expired();
  io::Task<void> maybe_snapshot();
  io::Task<void> balance_leaders();

  io::Context* ctx_;
  raft::RaftNode* raft_;
  ControllerConfig config_;
  raft::RaftListener* observer_ = nullptr;
  ControllerProbe* probe_ = nullptr;
  io::Mutex queue_;

  metadata::MetadataImage committed_;
  int64_t committed_end_ = 0;
  int64_t bytes_since_snapshot_ = 0;

  bool active_ = false;
  int32_t active_epoch_ = -1;
  metadata::MetadataImage latest_;
  std::map<int32_t, Session> sessions_;
  // When balance_leaders next looks (unset: one interval after this
  // controller became active).
  std::optional<io::Instant> next_balance_;
};

}  // namespace brook::controller
