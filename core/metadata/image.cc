#include "core/metadata/image.h"

#include <fmt/format.h>

#include "net/kafka/record_batch.h"

#include <algorithm>
#include <bit>
#include <iterator>
#include <utility>

namespace brook::metadata {
namespace {

// Two's-complement increment, as Kafka's int arithmetic wraps.
int32_t next_epoch(int32_t epoch) {
  return static_cast<int32_t>(static_cast<uint32_t>(epoch) + 1u);
}

// Deep comparison of maps whose values are shared pointers.
template <typename Map>
bool same_shared_values(const Map& a, const Map& b) {
  if (a.size() != b.size()) return false;
  auto i = a.begin();
  auto j = b.begin();
  for (; i != a.end(); ++i, ++j) {
    if (!(i->first == j->first)) return false;
    if (i->second != j->second && !(*i->second == *j->second)) return false;
  }
  return true;
}

template <typename T>
std::shared_ptr<const T> make_part() {
  return std::make_shared<const T>();
}

// --- canonical text -------------------------------------------------------

void put(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      fmt::format_to(std::back_inserter(out), "\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  out += '"';
}

void put(std::string& out, const std::string& s) { put(out, std::string_view(s)); }

void put(std::string& out, const std::optional<std::string>& s) {
  if (s) {
    put(out, std::string_view(*s));
  } else {
    out += "null";
  }
}

void put(std::string& out, const net::Uuid& id) { out += id.to_string(); }

void put_hex(std::string& out, std::string_view bytes) {
  out += "0x";
  for (const char c : bytes) {
    fmt::format_to(std::back_inserter(out), "{:02x}", static_cast<unsigned char>(c));
  }
}

void put(std::string& out, const std::vector<int32_t>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ',';
    fmt::format_to(std::back_inserter(out), "{}", v[i]);
  }
  out += ']';
}

void put(std::string& out, const std::vector<net::Uuid>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ',';
    put(out, v[i]);
  }
  out += ']';
}

void put(std::string& out, const std::vector<std::string>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ',';
    put(out, v[i]);
  }
  out += ']';
}

// The value, and its bits so that every double (NaNs too) reads apart.
void put(std::string& out, double v) {
  fmt::format_to(std::back_inserter(out), "{}#{:016x}", v, std::bit_cast<uint64_t>(v));
}

template <typename Map>
void put_listeners(std::string& out, const Map& listeners) {
  for (const auto& [name, e] : listeners) {
    out += "  listener ";
    put(out, name);
    out += " host=";
    put(out, e.host);
    fmt::format_to(std::back_inserter(out), " port={} security_protocol={}\n", e.port,
                   e.security_protocol);
  }
}

template <typename Map>
void put_features(std::string& out, const Map& features) {
  for (const auto& [name, range] : features) {
    out += "  supported_feature ";
    put(out, name);
    fmt::format_to(std::back_inserter(out), " min={} max={}\n", range.min, range.max);
  }
}

// FNV-1a, then a splitmix64 finalizer to spread the bits.
uint64_t hash_bytes(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

// --- records --------------------------------------------------------------

template <typename Map, typename EndpointT>
void endpoints_from(const std::vector<EndpointT>& in, Map& out) {
  for (const EndpointT& e : in) {
    out[e.name] = Endpoint{e.host, e.port, e.security_protocol};
  }
}

template <typename Map, typename FeatureT>
void features_from(const std::vector<FeatureT>& in, Map& out) {
  for (const FeatureT& f : in) {
    out[f.name] = VersionRange{f.min_supported_version, f.max_supported_version};
  }
}

template <typename EndpointT, typename Map>
std::vector<EndpointT> endpoints_to(const Map& in) {
  std::vector<EndpointT> out;
  for (const auto& [name, e] : in) {
    EndpointT x;
    x.name = name;
    x.host = e.host;
    x.port = e.port;
    x.security_protocol = e.security_protocol;
    out.push_back(std::move(x));
  }
  return out;
}

template <typename FeatureT, typename Map>
std::vector<FeatureT> features_to(const Map& in) {
  std::vector<FeatureT> out;
  for (const auto& [name, range] : in) {
    FeatureT x;
    x.name = name;
    x.min_supported_version = range.min;
    x.max_supported_version = range.max;
    out.push_back(std::move(x));
  }
  return out;
}

std::vector<net::Uuid> sorted(std::vector<net::Uuid> ids) {
  std::sort(ids.begin(), ids.end(), UuidLess{});
  return ids;
}

// Kafka's DirectoryId.createDirectoriesFrom: each new replica keeps the
// directory it had, and a replica new to the partition is unassigned.
std::vector<net::Uuid> directories_from(const std::vector<int32_t>& replicas,
                                        const std::vector<net::Uuid>& directories,
                                        const std::vector<int32_t>& new_replicas) {
  std::vector<net::Uuid> out;
  out.reserve(new_replicas.size());
  for (const int32_t replica : new_replicas) {
    net::Uuid dir = kDirectoryUnassigned;
    for (size_t i = 0; i < replicas.size() && i < directories.size(); ++i) {
      if (replicas[i] == replica) {
        dir = directories[i];
        break;
      }
    }
    out.push_back(dir);
  }
  return out;
}

std::string status_text(const absl::Status& s) { return std::string(s.message()); }

absl::Status at_offset(const absl::Status& s, int64_t offset) {
  return absl::Status(s.code(), fmt::format("offset {}: {}", offset, status_text(s)));
}

absl::Status broker_check(const BrokerRegistration* broker, int32_t id, int64_t epoch,
                          std::string_view action) {
  if (broker == nullptr) {
    return absl::NotFoundError(
        fmt::format("cannot {} broker {}: it is not registered", action, id));
  }
  if (broker->epoch != epoch) {
    return absl::FailedPreconditionError(
        fmt::format("cannot {} broker {}: epoch {} is not its current epoch {}", action, id, epoch,
                    broker->epoch));
  }
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------------------------
// Lookups and comparisons.

const BrokerRegistration* ClusterImage::broker(int32_t id) const {
  auto it = brokers.find(id);
  return it == brokers.end() ? nullptr : &it->second;
}

const ControllerRegistration* ClusterImage::controller(int32_t id) const {
  auto it = controllers.find(id);
  return it == controllers.end() ? nullptr : &it->second;
}

const PartitionRegistration* TopicImage::partition(int32_t id) const {
  auto it = partitions.find(id);
  return it == partitions.end() ? nullptr : &it->second;
}

const TopicImage* TopicsImage::topic(const net::Uuid& id) const {
  auto it = by_id.find(id);
  return it == by_id.end() ? nullptr : it->second.get();
}

const TopicImage* TopicsImage::topic(std::string_view name) const {
  auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : topic(it->second);
}

const PartitionRegistration* TopicsImage::partition(const net::Uuid& topic_id,
                                                    int32_t partition) const {
  const TopicImage* t = topic(topic_id);
  return t == nullptr ? nullptr : t->partition(partition);
}

bool TopicsImage::operator==(const TopicsImage& o) const {
  return by_name == o.by_name && same_shared_values(by_id, o.by_id);
}

const ConfigMap* ConfigurationsImage::find(const ConfigResource& resource) const {
  auto it = resources.find(resource);
  return it == resources.end() ? nullptr : it->second.get();
}

bool ConfigurationsImage::operator==(const ConfigurationsImage& o) const {
  return same_shared_values(resources, o.resources);
}

bool ClientQuotasImage::operator==(const ClientQuotasImage& o) const {
  if (entities.size() != o.entities.size()) return false;
  auto i = entities.begin();
  auto j = o.entities.begin();
  for (; i != entities.end(); ++i, ++j) {
    if (i->first != j->first || i->second.size() != j->second.size()) return false;
    auto a = i->second.begin();
    auto b = j->second.begin();
    for (; a != i->second.end(); ++a, ++b) {
      if (a->first != b->first ||
          std::bit_cast<uint64_t>(a->second) != std::bit_cast<uint64_t>(b->second)) {
        return false;
      }
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// MetadataImage.

MetadataImage::MetadataImage()
    : features_(make_part<FeaturesImage>()),
      cluster_(make_part<ClusterImage>()),
      topics_(make_part<TopicsImage>()),
      configs_(make_part<ConfigurationsImage>()),
      client_quotas_(make_part<ClientQuotasImage>()),
      acls_(make_part<AclsImage>()),
      producer_ids_(make_part<ProducerIdsImage>()),
      scram_(make_part<ScramImage>()),
      delegation_tokens_(make_part<DelegationTokensImage>()) {}

MetadataImage MetadataImage::with_provenance(MetadataProvenance provenance) const {
  MetadataImage out = *this;
  out.provenance_ = provenance;
  return out;
}

bool MetadataImage::empty() const {
  return *features_ == FeaturesImage{} && *cluster_ == ClusterImage{} &&
         *topics_ == TopicsImage{} && *configs_ == ConfigurationsImage{} &&
         *client_quotas_ == ClientQuotasImage{} && *acls_ == AclsImage{} &&
         *producer_ids_ == ProducerIdsImage{} && *scram_ == ScramImage{} &&
         *delegation_tokens_ == DelegationTokensImage{};
}

bool MetadataImage::operator==(const MetadataImage& o) const {
  auto same = [](const auto& a, const auto& b) { return a == b || *a == *b; };
  return provenance_ == o.provenance_ && same(features_, o.features_) &&
         same(cluster_, o.cluster_) && same(topics_, o.topics_) && same(configs_, o.configs_) &&
         same(client_quotas_, o.client_quotas_) && same(acls_, o.acls_) &&
         same(producer_ids_, o.producer_ids_) && same(scram_, o.scram_) &&
         same(delegation_tokens_, o.delegation_tokens_);
}

std::vector<MetadataRecordAndVersion> MetadataImage::to_records() const {
  std::vector<MetadataRecordAndVersion> out;
  auto add = [&out](MetadataRecord r) { out.push_back(at_highest_version(std::move(r))); };

  const FeaturesImage& f = *features_;
  if (f.metadata_version != 0) {
    net::FeatureLevelRecord r;
    r.name = std::string(kMetadataVersionFeature);
    r.feature_level = f.metadata_version;
    add(std::move(r));
  }
  for (const auto& [name, level] : f.levels) {
    net::FeatureLevelRecord r;
    r.name = name;
    r.feature_level = level;
    add(std::move(r));
  }
  if (f.zk_migration_state != 0) {
    net::ZkMigrationStateRecord r;
    r.zk_migration_state = f.zk_migration_state;
    add(std::move(r));
  }

  for (const auto& [id, b] : cluster_->brokers) {
    net::RegisterBrokerRecord r;
    r.broker_id = id;
    r.is_migrating_zk_broker = b.is_migrating_zk_broker;
    r.incarnation_id = b.incarnation_id;
    r.broker_epoch = b.epoch;
    r.end_points = endpoints_to<net::RegisterBrokerRecord::BrokerEndpoint>(b.listeners);
    r.features = features_to<net::RegisterBrokerRecord::BrokerFeature>(b.supported_features);
    r.rack = b.rack;
    r.fenced = b.fenced;
    r.in_controlled_shutdown = b.in_controlled_shutdown;
    r.log_dirs = b.directories;
    add(std::move(r));
  }
  for (const auto& [id, c] : cluster_->controllers) {
    net::RegisterControllerRecord r;
    r.controller_id = id;
    r.incarnation_id = c.incarnation_id;
    r.zk_migration_ready = c.zk_migration_ready;
    r.end_points = endpoints_to<net::RegisterControllerRecord::ControllerEndpoint>(c.listeners);
    r.features =
        features_to<net::RegisterControllerRecord::ControllerFeature>(c.supported_features);
    add(std::move(r));
  }

  for (const auto& [id, topic] : topics_->by_id) {
    net::TopicRecord t;
    t.name = topic->name;
    t.topic_id = id;
    add(std::move(t));
    for (const auto& [partition_id, p] : topic->partitions) {
      net::PartitionRecord r;
      r.partition_id = partition_id;
      r.topic_id = id;
      r.replicas = p.replicas;
      r.isr = p.isr;
      r.removing_replicas = p.removing_replicas;
      r.adding_replicas = p.adding_replicas;
      r.leader = p.leader;
      r.leader_recovery_state = p.leader_recovery_state;
      r.leader_epoch = p.leader_epoch;
      r.partition_epoch = p.partition_epoch;
      r.directories = p.directories;
      if (!p.elr.empty()) r.eligible_leader_replicas = p.elr;
      if (!p.last_known_elr.empty()) r.last_known_elr = p.last_known_elr;
      add(std::move(r));
    }
  }

  for (const auto& [resource, configs] : configs_->resources) {
    for (const auto& [name, value] : *configs) {
      net::ConfigRecord r;
      r.resource_type = resource.type;
      r.resource_name = resource.name;
      r.name = name;
      r.value = value;
      add(std::move(r));
    }
  }

  for (const auto& [entity, quotas] : client_quotas_->entities) {
    for (const auto& [key, value] : quotas) {
      net::ClientQuotaRecord r;
      for (const auto& [type, name] : entity) {
        net::ClientQuotaRecord::EntityData d;
        d.entity_type = type;
        d.entity_name = name;
        r.entity.push_back(std::move(d));
      }
      r.key = key;
      r.value = value;
      r.remove = false;
      add(std::move(r));
    }
  }

  if (producer_ids_->next_producer_id != -1) {
    net::ProducerIdsRecord r;
    r.broker_id = -1;
    r.broker_epoch = -1;
    r.next_producer_id = producer_ids_->next_producer_id;
    add(std::move(r));
  }

  for (const auto& [id, acl] : acls_->acls) {
    net::AccessControlEntryRecord r;
    r.id = id;
    r.resource_type = acl.resource_type;
    r.resource_name = acl.resource_name;
    r.pattern_type = acl.pattern_type;
    r.principal = acl.principal;
    r.host = acl.host;
    r.operation = acl.operation;
    r.permission_type = acl.permission_type;
    add(std::move(r));
  }

  for (const auto& [mechanism, users] : scram_->mechanisms) {
    for (const auto& [name, c] : users) {
      net::UserScramCredentialRecord r;
      r.name = name;
      r.mechanism = mechanism;
      r.salt = io::Buffer::copy_of(std::string_view(c.salt));
      r.stored_key = io::Buffer::copy_of(std::string_view(c.stored_key));
      r.server_key = io::Buffer::copy_of(std::string_view(c.server_key));
      r.iterations = c.iterations;
      add(std::move(r));
    }
  }

  for (const auto& [token_id, t] : delegation_tokens_->tokens) {
    net::DelegationTokenRecord r;
    r.owner = t.owner;
    r.requester = t.requester;
    r.renewers = t.renewers;
    r.issue_timestamp = t.issue_timestamp;
    r.max_timestamp = t.max_timestamp;
    r.expiration_timestamp = t.expiration_timestamp;
    r.token_id = token_id;
    add(std::move(r));
  }
  return out;
}

std::string MetadataImage::describe() const {
  std::string out;
  auto o = std::back_inserter(out);
  fmt::format_to(o, "provenance offset={} epoch={}\n", provenance_.last_offset,
                 provenance_.last_epoch);

  const FeaturesImage& f = *features_;
  fmt::format_to(o, "features metadata.version={} zk_migration_state={}\n", f.metadata_version,
                 f.zk_migration_state);
  for (const auto& [name, level] : f.levels) {
    out += "feature ";
    put(out, name);
    fmt::format_to(o, " level={}\n", level);
  }

  for (const auto& [id, b] : cluster_->brokers) {
    fmt::format_to(o, "broker {} epoch={} incarnation=", id, b.epoch);
    put(out, b.incarnation_id);
    fmt::format_to(o, " fenced={} in_controlled_shutdown={} migrating_zk={} rack=", b.fenced,
                   b.in_controlled_shutdown, b.is_migrating_zk_broker);
    put(out, b.rack);
    out += " directories=";
    put(out, b.directories);
    out += '\n';
    put_listeners(out, b.listeners);
    put_features(out, b.supported_features);
  }
  for (const auto& [id, c] : cluster_->controllers) {
    fmt::format_to(o, "controller {} incarnation=", id);
    put(out, c.incarnation_id);
    fmt::format_to(o, " zk_migration_ready={}\n", c.zk_migration_ready);
    put_listeners(out, c.listeners);
    put_features(out, c.supported_features);
  }

  for (const auto& [id, topic] : topics_->by_id) {
    out += "topic ";
    put(out, id);
    out += ' ';
    put(out, topic->name);
    out += '\n';
    for (const auto& [partition_id, p] : topic->partitions) {
      fmt::format_to(o, "  partition {} replicas=", partition_id);
      put(out, p.replicas);
      out += " directories=";
      put(out, p.directories);
      out += " isr=";
      put(out, p.isr);
      out += " removing=";
      put(out, p.removing_replicas);
      out += " adding=";
      put(out, p.adding_replicas);
      out += " elr=";
      put(out, p.elr);
      out += " last_known_elr=";
      put(out, p.last_known_elr);
      fmt::format_to(o, " leader={} leader_recovery_state={} leader_epoch={} partition_epoch={}\n",
                     p.leader, p.leader_recovery_state, p.leader_epoch, p.partition_epoch);
    }
  }
  for (const auto& [name, id] : topics_->by_name) {
    out += "topic_name ";
    put(out, name);
    out += ' ';
    put(out, id);
    out += '\n';
  }

  for (const auto& [resource, configs] : configs_->resources) {
    for (const auto& [name, value] : *configs) {
      fmt::format_to(o, "config {} ", resource.type);
      put(out, resource.name);
      out += ' ';
      put(out, name);
      out += '=';
      put(out, value);
      out += '\n';
    }
  }

  for (const auto& [entity, quotas] : client_quotas_->entities) {
    for (const auto& [key, value] : quotas) {
      out += "quota {";
      for (const auto& [type, name] : entity) {
        put(out, type);
        out += '=';
        put(out, name);
        out += ';';
      }
      out += "} ";
      put(out, key);
      out += '=';
      put(out, value);
      out += '\n';
    }
  }

  for (const auto& [id, acl] : acls_->acls) {
    out += "acl ";
    put(out, id);
    fmt::format_to(o, " resource_type={} resource_name=", acl.resource_type);
    put(out, acl.resource_name);
    fmt::format_to(o, " pattern_type={} principal=", acl.pattern_type);
    put(out, acl.principal);
    out += " host=";
    put(out, acl.host);
    fmt::format_to(o, " operation={} permission_type={}\n", acl.operation, acl.permission_type);
  }

  fmt::format_to(o, "producer_ids next={}\n", producer_ids_->next_producer_id);

  for (const auto& [mechanism, users] : scram_->mechanisms) {
    for (const auto& [name, c] : users) {
      fmt::format_to(o, "scram {} ", mechanism);
      put(out, name);
      out += " salt=";
      put_hex(out, c.salt);
      out += " stored_key=";
      put_hex(out, c.stored_key);
      out += " server_key=";
      put_hex(out, c.server_key);
      fmt::format_to(o, " iterations={}\n", c.iterations);
    }
  }

  for (const auto& [token_id, t] : delegation_tokens_->tokens) {
    out += "token ";
    put(out, token_id);
    out += " owner=";
    put(out, t.owner);
    out += " requester=";
    put(out, t.requester);
    out += " renewers=";
    put(out, t.renewers);
    fmt::format_to(o, " issue={} max={} expiration={}\n", t.issue_timestamp, t.max_timestamp,
                   t.expiration_timestamp);
  }
  return out;
}

uint64_t MetadataImage::hash() const { return hash_bytes(describe()); }

// ---------------------------------------------------------------------------
// MetadataDelta.

MetadataDelta::MetadataDelta(MetadataImage base)
    : base_(std::move(base)), provenance_(base_.provenance()) {}

absl::Status MetadataDelta::apply(const MetadataRecord& record) {
  return std::visit([this](const auto& r) { return apply_one(r); }, record);
}

absl::Status MetadataDelta::apply(const MetadataRecord& record, int64_t offset, int32_t epoch) {
  absl::Status status = apply(record);
  if (!status.ok()) return at_offset(status, offset);
  provenance_ = MetadataProvenance{offset, epoch};
  return status;
}

absl::Status MetadataDelta::apply_batch(int64_t base_offset, int32_t epoch,
                                        std::span<const MetadataRecord> records) {
  for (size_t i = 0; i < records.size(); ++i) {
    absl::Status status = apply(records[i], base_offset + static_cast<int64_t>(i), epoch);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status MetadataDelta::apply_batch(int64_t base_offset, int32_t epoch,
                                        std::span<const MetadataRecordAndVersion> records) {
  for (size_t i = 0; i < records.size(); ++i) {
    absl::Status status = apply(records[i].record, base_offset + static_cast<int64_t>(i), epoch);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

FeaturesImage& MetadataDelta::features() {
  if (!features_) features_ = base_.features();
  return *features_;
}

ClusterImage& MetadataDelta::cluster() {
  if (!cluster_) cluster_ = base_.cluster();
  return *cluster_;
}

ClientQuotasImage& MetadataDelta::client_quotas() {
  if (!client_quotas_) client_quotas_ = base_.client_quotas();
  return *client_quotas_;
}

AclsImage& MetadataDelta::acls() {
  if (!acls_) acls_ = base_.acls();
  return *acls_;
}

ProducerIdsImage& MetadataDelta::producer_ids() {
  if (!producer_ids_) producer_ids_ = base_.producer_ids();
  return *producer_ids_;
}

ScramImage& MetadataDelta::scram() {
  if (!scram_) scram_ = base_.scram();
  return *scram_;
}

DelegationTokensImage& MetadataDelta::delegation_tokens() {
  if (!delegation_tokens_) delegation_tokens_ = base_.delegation_tokens();
  return *delegation_tokens_;
}

const ClusterImage& MetadataDelta::current_cluster() const {
  return cluster_ ? *cluster_ : base_.cluster();
}

const AclsImage& MetadataDelta::current_acls() const { return acls_ ? *acls_ : base_.acls(); }

const BrokerRegistration* MetadataDelta::broker(int32_t id) const {
  return current_cluster().broker(id);
}

const TopicImage* MetadataDelta::topic(const net::Uuid& id) const {
  auto it = topic_changes_.find(id);
  if (it != topic_changes_.end()) return it->second ? &*it->second : nullptr;
  return base_.topics().topic(id);
}

std::optional<net::Uuid> MetadataDelta::topic_id(std::string_view name) const {
  auto it = topic_name_changes_.find(name);
  if (it != topic_name_changes_.end()) return it->second;
  const auto& by_name = base_.topics().by_name;
  auto b = by_name.find(name);
  if (b == by_name.end()) return std::nullopt;
  return b->second;
}

TopicImage* MetadataDelta::mutable_topic(const net::Uuid& id) {
  auto it = topic_changes_.find(id);
  if (it != topic_changes_.end()) return it->second ? &*it->second : nullptr;
  const TopicImage* t = base_.topics().topic(id);
  if (t == nullptr) return nullptr;
  return &*topic_changes_.emplace(id, *t).first->second;
}

ConfigMap& MetadataDelta::mutable_config(const ConfigResource& resource) {
  auto it = config_changes_.find(resource);
  if (it != config_changes_.end()) return it->second;
  const ConfigMap* base = base_.configs().find(resource);
  return config_changes_.emplace(resource, base != nullptr ? *base : ConfigMap{}).first->second;
}

// --- cluster ----------------------------------------------------------------

absl::Status MetadataDelta::apply_one(const net::RegisterBrokerRecord& r) {
  BrokerRegistration b;
  b.id = r.broker_id;
  b.epoch = r.broker_epoch;
  b.incarnation_id = r.incarnation_id;
  endpoints_from(r.end_points, b.listeners);
  features_from(r.features, b.supported_features);
  b.rack = r.rack;
  b.fenced = r.fenced;
  b.in_controlled_shutdown = r.in_controlled_shutdown;
  b.is_migrating_zk_broker = r.is_migrating_zk_broker;
  b.directories = sorted(r.log_dirs);
  cluster().brokers[b.id] = std::move(b);
  return absl::OkStatus();
}

absl::Status MetadataDelta::apply_one(const net::UnregisterBrokerRecord& r) {
  if (current_cluster().broker(r.broker_id) != nullptr) cluster().brokers.erase(r.broker_id);
  return absl::OkStatus();
}

absl::Status MetadataDelta::apply_one(const net::FenceBrokerRecord& r) {
  absl::Status status = broker_check(broker(r.id), r.id, r.epoch, "fence");
  if (!status.ok()) return status;
  cluster().brokers[r.id].fenced = true;
  return status;
}

absl::Status MetadataDelta::apply_one(const net::UnfenceBrokerRecord& r) {
  absl::Status status = broker_check(broker(r.id), r.id, r.epoch, "unfence");
  if (!status.ok()) return status;
  cluster().brokers[r.id].fenced = false;
  return status;
}

absl::Status MetadataDelta::apply_one(const net::BrokerRegistrationChangeRecord& r) {
  absl::Status status = broker_check(broker(r.broker_id), r.broker_id, r.broker_epoch, "change");
  if (!status.ok()) return status;
  if (r.fenced < -1 || r.fenced > 1) {
    return absl::InvalidArgumentError(
        fmt::format("broker {}: unknown value {} of the fenced field", r.broker_id, r.fenced));
  }
  if (r.in_controlled_shutdown < 0 || r.in_controlled_shutdown > 1) {
    return absl::InvalidArgumentError(
        fmt::format("broker {}: unknown value {} of the in-controlled-shutdown field", r.broker_id,
                    r.in_controlled_shutdown));
  }
  BrokerRegistration& b = cluster().brokers[r.broker_id];
  if (r.fenced != 0) b.fenced = r.fenced == 1;
  if (r.in_controlled_shutdown == 1) b.in_controlled_shutdown = true;
  if (!r.log_dirs.empty()) b.directories = sorted(r.log_dirs);
  return status;
}

absl::Status MetadataDelta::apply_one(const net::RegisterControllerRecord& r) {
  ControllerRegistration c;
  c.id = r.controller_id;
  c.incarnation_id = r.incarnation_id;
  c.zk_migration_ready = r.zk_migration_ready;
  endpoints_from(r.end_points, c.listeners);
  features_from(r.features, c.supported_features);
  cluster().controllers[c.id] = std::move(c);
  return absl::OkStatus();
}

// --- topics -----------------------------------------------------------------

absl::Status MetadataDelta::apply_one(const net::TopicRecord& r) {
  if (const TopicImage* t = topic(r.topic_id); t != nullptr) {
    return absl::AlreadyExistsError(fmt::format("topic id {} is already the id of topic \"{}\"",
                                                r.topic_id.to_string(), t->name));
  }
  if (std::optional<net::Uuid> id = topic_id(r.name); id.has_value()) {
    return absl::AlreadyExistsError(
        fmt::format("topic \"{}\" already exists with id {}", r.name, id->to_string()));
  }
  topic_changes_[r.topic_id] = TopicImage{r.name, r.topic_id, {}};
  topic_name_changes_[r.name] = r.topic_id;
  return absl::OkStatus();
}

absl::Status MetadataDelta::apply_one(const net::PartitionRecord& r) {
  if (r.partition_id < 0) {
    return absl::InvalidArgumentError(
        fmt::format("topic {}: invalid partition id {}", r.topic_id.to_string(), r.partition_id));
  }
  if (r.leader_recovery_state != 0 && r.leader_recovery_state != 1) {
    return absl::InvalidArgumentError(
        fmt::format("topic {} partition {}: unknown leader recovery state {}",
                    r.topic_id.to_string(), r.partition_id, r.leader_recovery_state));
  }
  if (!r.directories.empty() && r.directories.size() != r.replicas.size()) {
    return absl::InvalidArgumentError(
        fmt::format("topic {} partition {}: {} directories for {} replicas", r.topic_id.to_string(),
                    r.partition_id, r.directories.size(), r.replicas.size()));
  }
  TopicImage* t = mutable_topic(r.topic_id);
  if (t == nullptr) {
    return absl::NotFoundError(
        fmt::format("partition {} of unknown topic id {}", r.partition_id, r.topic_id.to_string()));
  }
  PartitionRegistration p;
  p.replicas = r.replicas;
  p.directories = r.directories.empty()
                      ? std::vector<net::Uuid>(r.replicas.size(), kDirectoryMigrating)
                      : r.directories;
  p.isr = r.isr;
  p.removing_replicas = r.removing_replicas;
  p.adding_replicas = r.adding_replicas;
  p.elr = r.eligible_leader_replicas.value_or(std::vector<int32_t>{});
  p.last_known_elr = r.last_known_elr.value_or(std::vector<int32_t>{});
  p.leader = r.leader;
  p.leader_recovery_state = r.leader_recovery_state;
  p.leader_epoch = r.leader_epoch;
  p.partition_epoch = r.partition_epoch;
  t->partitions[r.partition_id] = std::move(p);
  return absl::OkStatus();
}

absl::Status MetadataDelta::apply_one(const net::PartitionChangeRecord& r) {
  const TopicImage* t = topic(r.topic_id);
  if (t == nullptr) {
    return absl::NotFoundError(fmt::format("change to partition {} of unknown topic id {}",
                                           r.partition_id, r.topic_id.to_string()));
  }
  const PartitionRegistration* p = t->partition(r.partition_id);
  if (p == nullptr) {
    return absl::NotFoundError(
        fmt::format("change to unknown partition {} of topic \"{}\"", r.partition_id, t->name));
  }
  if (r.leader_recovery_state < -1 || r.leader_recovery_state > 1) {
    return absl::InvalidArgumentError(
        fmt::format("topic \"{}\" partition {}: unknown leader recovery state {}", t->name,
                    r.partition_id, r.leader_recovery_state));
  }
  PartitionRegistration n = *p;
  if (r.replicas) n.replicas = *r.replicas;
  if (r.directories && !r.directories->empty()) {
    if (r.directories->size() != n.replicas.size()) {
      return absl::InvalidArgumentError(
          fmt::format("topic \"{}\" partition {}: {} directories for {} replicas", t->name,
                      r.partition_id, r.directories->size(), n.replicas.size()));
    }
    n.directories = *r.directories;
  } else if (r.replicas) {
    n.directories = directories_from(p->replicas, p->directories, *r.replicas);
  }
  if (n.directories.empty()) n.directories.assign(n.replicas.size(), kDirectoryMigrating);
  if (r.isr) n.isr = *r.isr;
  if (r.removing_replicas) n.removing_replicas = *r.removing_replicas;
  if (r.adding_replicas) n.adding_replicas = *r.adding_replicas;
  if (r.leader != kNoLeaderChange) {
    n.leader = r.leader;
    n.leader_epoch = next_epoch(p->leader_epoch);
  }
  if (r.leader_recovery_state != -1) n.leader_recovery_state = r.leader_recovery_state;
  if (r.eligible_leader_replicas) n.elr = *r.eligible_leader_replicas;
  if (r.last_known_elr) n.last_known_elr = *r.last_known_elr;
  n.partition_epoch = next_epoch(p->partition_epoch);
  mutable_topic(r.topic_id)->partitions[r.partition_id] = std::move(n);
  return absl::OkStatus();
}

absl::Status MetadataDelta::apply_one(const net::RemoveTopicRecord& r) {
  const TopicImage* t = topic(r.topic_id);
  if (t == nullptr) {
    return absl::NotFoundError(
        fmt::format("cannot remove unknown topic id {}", r.topic_id.to_string()));
  }
  const std::string name = t->name;
  topic_changes_[r.topic_id] = std::nullopt;
  topic_name_changes_[name] = std::nullopt;
  // Its configs go with it (Kafka's ConfigurationsDelta does the same).
  const ConfigResource resource{kConfigResourceTopic, name};
  auto it = config_changes_.find(resource);
  if (it != config_changes_.end()) {
    it->second.clear();
  } else if (base_.configs().find(resource) != nullptr) {
    config_changes_.emplace(resource, ConfigMap{});
  }
  return absl::OkStatus();
}

// --- configs, features, quotas ---------------------------------------------

absl::Status MetadataDelta::apply_one(const net::ConfigRecord& r) {
  const ConfigResource resource{r.resource_type, r.resource_name};
  if (r.value) {
    mutable_config(resource)[r.name] = *r.value;
  } else {
    mutable_config(resource).erase(r.name);
  }
  return absl::OkStatus();
}

absl::Status MetadataDelta::apply_one(const net::FeatureLevelRecord& r) {
  if (r.name == kMetadataVersionFeature) {
    if (r.feature_level < 1) {
      return absl::InvalidArgumentError(
          fmt::format("invalid metadata.version level {}", r.feature_level));
    }
    features().metadata_version = r.feature_level;
  } else if (r.feature_level == 0) {
    features().levels.erase(r.name);
  } else {
    features().levels[r.name] = r.feature_level;
  }
  return absl::OkStatus();
}

absl::Status MetadataDelta::apply_one(const net::ZkMigrationStateRecord& r) {
  features().zk_migration_state = r.zk_migration_state;
  return absl::OkStatus();
}

absl::Status MetadataDelta::apply_one(const net::ClientQuotaRecord& r) {
  ClientQuotaEntity entity;
  for (const auto& d : r.entity) entity[d.entity_type] = d.entity_name;
  if (!r.remove) {
    client_quotas().entities[entity][r.key] = r.value;
    return absl::OkStatus();
  }
  const auto& current = client_quotas_ ? client_quotas_->entities : base_.client_quotas().entities;
  auto it = current.find(entity);
  if (it == current.end() || !it->second.contains(r.key)) return absl::OkStatus();
  auto& entities = client_quotas().entities;
  auto e = entities.find(entity);
  e->second.erase(r.key);
  if (e->second.empty()) entities.erase(e);
  return absl::OkStatus();
}

absl::Status MetadataDelta::apply_one(const net::ProducerIdsRecord& r) {
  producer_ids().next_producer_id = r.next_producer_id;
  return absl::OkStatus();
}

// --- security ---------------------------------------------------------------

absl::Status MetadataDelta::apply_one(const net::AccessControlEntryRecord& r) {
  StandardAcl acl;
  acl.resource_type = r.resource_type;
  acl.resource_name = r.resource_name;
  acl.pattern_type = r.pattern_type;
  acl.principal = r.principal;
  acl.host = r.host;
  acl.operation = r.operation;
  acl.permission_type = r.permission_type;
  acls().acls[r.id] = std::move(acl);
  return absl::OkStatus();
}

absl::Status MetadataDelta::apply_one(const net::RemoveAccessControlEntryRecord& r) {
  if (!current_acls().acls.contains(r.id)) {
    return absl::NotFoundError(fmt::format("cannot remove unknown ACL {}", r.id.to_string()));
  }
  acls().acls.erase(r.id);
  return absl::OkStatus();
}

absl::Status MetadataDelta::apply_one(const net::UserScramCredentialRecord& r) {
  ScramCredential c;
  c.salt = std::string(r.salt.view());
  c.stored_key = std::string(r.stored_key.view());
  c.server_key = std::string(r.server_key.view());
  c.iterations = r.iterations;
  scram().mechanisms[r.mechanism][r.name] = std::move(c);
  return absl::OkStatus();
}

absl::Status MetadataDelta::apply_one(const net::RemoveUserScramCredentialRecord& r) {
  const auto& current = scram_ ? scram_->mechanisms : base_.scram().mechanisms;
  auto it = current.find(r.mechanism);
  if (it == current.end() || !it->second.contains(r.name)) return absl::OkStatus();
  auto& mechanisms = scram().mechanisms;
  auto m = mechanisms.find(r.mechanism);
  m->second.erase(r.name);
  if (m->second.empty()) mechanisms.erase(m);
  return absl::OkStatus();
}

absl::Status MetadataDelta::apply_one(const net::DelegationTokenRecord& r) {
  DelegationToken t;
  t.owner = r.owner;
  t.requester = r.requester;
  t.renewers = r.renewers;
  t.issue_timestamp = r.issue_timestamp;
  t.max_timestamp = r.max_timestamp;
  t.expiration_timestamp = r.expiration_timestamp;
  delegation_tokens().tokens[r.token_id] = std::move(t);
  return absl::OkStatus();
}

absl::Status MetadataDelta::apply_one(const net::RemoveDelegationTokenRecord& r) {
  const auto& current =
      delegation_tokens_ ? delegation_tokens_->tokens : base_.delegation_tokens().tokens;
  if (current.contains(r.token_id)) delegation_tokens().tokens.erase(r.token_id);
  return absl::OkStatus();
}

// --- records that change nothing ------------------------------------------

absl::Status MetadataDelta::apply_one(const net::NoOpRecord&) { return absl::OkStatus(); }
absl::Status MetadataDelta::apply_one(const net::BeginTransactionRecord&) {
  return absl::OkStatus();
}
absl::Status MetadataDelta::apply_one(const net::EndTransactionRecord&) { return absl::OkStatus(); }
absl::Status MetadataDelta::apply_one(const net::AbortTransactionRecord&) {
  return absl::OkStatus();
}

// --- build ------------------------------------------------------------------

MetadataImage MetadataDelta::build() const {
  MetadataImage out = base_;
  out.provenance_ = provenance_;
  if (features_) out.features_ = std::make_shared<const FeaturesImage>(*features_);
  if (cluster_) out.cluster_ = std::make_shared<const ClusterImage>(*cluster_);
  if (client_quotas_) {
    out.client_quotas_ = std::make_shared<const ClientQuotasImage>(*client_quotas_);
  }
  if (acls_) out.acls_ = std::make_shared<const AclsImage>(*acls_);
  if (producer_ids_) out.producer_ids_ = std::make_shared<const ProducerIdsImage>(*producer_ids_);
  if (scram_) out.scram_ = std::make_shared<const ScramImage>(*scram_);
  if (delegation_tokens_) {
    out.delegation_tokens_ = std::make_shared<const DelegationTokensImage>(*delegation_tokens_);
  }

  if (!topic_changes_.empty() || !topic_name_changes_.empty()) {
    auto topics = std::make_shared<TopicsImage>(base_.topics());
    for (const auto& [id, change] : topic_changes_) {
      if (change) {
        topics->by_id[id] = std::make_shared<const TopicImage>(*change);
      } else {
        topics->by_id.erase(id);
      }
    }
    for (const auto& [name, id] : topic_name_changes_) {
      if (id) {
        topics->by_name[name] = *id;
      } else {
        topics->by_name.erase(name);
      }
    }
    out.topics_ = std::move(topics);
  }

  if (!config_changes_.empty()) {
    auto configs = std::make_shared<ConfigurationsImage>(base_.configs());
    for (const auto& [resource, map] : config_changes_) {
      if (map.empty()) {
        configs->resources.erase(resource);
      } else {
        configs->resources[resource] = std::make_shared<const ConfigMap>(map);
      }
    }
    out.configs_ = std::move(configs);
  }
  return out;
}

// ---------------------------------------------------------------------------

absl::StatusOr<MetadataImage> load_snapshot(std::span<const MetadataRecordAndVersion> records,
                                            MetadataProvenance provenance) {
  MetadataDelta delta{MetadataImage()};
  for (size_t i = 0; i < records.size(); ++i) {
    absl::Status status = delta.apply(records[i].record);
    if (!status.ok()) {
      return absl::Status(status.code(),
                          fmt::format("snapshot record {}: {}", i, status_text(status)));
    }
  }
  delta.set_provenance(provenance);
  return delta.build();
}

absl::StatusOr<MetadataImage> load_snapshot(std::span<const MetadataRecord> records,
                                            MetadataProvenance provenance) {
  MetadataDelta delta{MetadataImage()};
  for (size_t i = 0; i < records.size(); ++i) {
    absl::Status status = delta.apply(records[i]);
    if (!status.ok()) {
      return absl::Status(status.code(),
                          fmt::format("snapshot record {}: {}", i, status_text(status)));
    }
  }
  delta.set_provenance(provenance);
  return delta.build();
}

absl::StatusOr<MetadataImage> replay_batch(const MetadataImage& base, const io::Buffer& batch,
                                           int64_t base_offset, int32_t epoch) {
  // A metadata batch holds at most a few thousand records; the bound stops
  // a corrupt count from allocating without limit.
  constexpr size_t kRecordsDecodedMax = 64 << 20;
  absl::StatusOr<std::vector<net::Record>> records = net::decode_records(batch, kRecordsDecodedMax);
  if (!records.ok()) {
    return absl::DataLossError(
        fmt::format("metadata batch at {} does not decode: {}", base_offset, records.status().ToString()));
  }
  MetadataDelta delta(base);
  int64_t offset = base_offset;
  for (const net::Record& record : *records) {
    if (record.value.has_value()) {
      absl::StatusOr<MetadataRecordAndVersion> decoded = decode_metadata_record(*record.value);
      absl::Status applied = decoded.ok() ? delta.apply(decoded->record, offset, epoch) : decoded.status();
      if (!applied.ok()) {
        return absl::DataLossError(fmt::format("metadata record at {} does not replay: {}", offset, applied.ToString()));
      }
    }
    ++offset;
  }
  return delta.build();
}

absl::StatusOr<MetadataImage> load_snapshot_values(std::span<const io::Buffer> values, int64_t end_offset,
                                                   int32_t epoch) {
  std::vector<MetadataRecordAndVersion> records;
  records.reserve(values.size());
  for (const io::Buffer& value : values) {
    absl::StatusOr<MetadataRecordAndVersion> decoded = decode_metadata_record(value);
    if (!decoded.ok()) return decoded.status();
    records.push_back(std::move(*decoded));
  }
  return load_snapshot(records, MetadataProvenance{.last_offset = end_offset - 1, .last_epoch = epoch});
}

}  // namespace brook::metadata
