// net/client/cluster.cc
#include "net/client/cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

#include "io/assert.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/metadata_request.h"
#include "net/kafka/messages/metadata_response.h"

namespace brook::client {

namespace {
constexpr int16_t kMetadataVersion = 10;
}  // namespace

std::string error_text(int16_t code) { return fmt::format("{} ({})", net::error_name(code), code); }

absl::Status error_status(int16_t code, std::string_view context) {
  if (code == 0) return absl::OkStatus();
  std::string message = context.empty() ? error_text(code) : fmt::format("{}: {}", context, error_text(code));
  if (net::error_retriable(code)) return absl::UnavailableError(message);
  return absl::FailedPreconditionError(message);
}

bool is_stale_metadata(int16_t code) {
  using net::Error;
  switch (static_cast<Error>(code)) {
    case Error::kNotLeaderOrFollower:
    case Error::kLeaderNotAvailable:
    case Error::kUnknownTopicOrPartition:
    case Error::kFencedLeaderEpoch:
    case Error::kUnknownLeaderEpoch:
    case Error::kKafkaStorageError:
    case Error::kReplicaNotAvailable:
    case Error::kNetworkException:
      return true;
    default:
      return false;
  }
}

Cluster::Cluster(io::Context& ctx, ClientOptions options) : ctx_(&ctx), options_(std::move(options)) {}

net::Peer& Cluster::peer_for(const io::Address& address) {
  auto it = peers_.find(address);
  if (it == peers_.end()) {
    it = peers_
             .emplace(address, std::make_unique<net::Peer>(ctx_->network(), ctx_->clock(), address,
                                                           options_.client_id, options_.max_response_bytes))
             .first;
    if (options_.sasl.has_value()) it->second->set_sasl(&*options_.sasl, &ctx_->random());
    it->second->set_tls(options_.tls.get());
  }
  return *it->second;
}

net::Peer* Cluster::broker(int32_t id) {
  auto it = brokers_.find(id);
  if (it == brokers_.end()) return nullptr;
  return &peer_for(it->second.address);
}

void Cluster::reset(int32_t id) {
  if (net::Peer* p = broker(id)) p->reset();
}

net::Peer& Cluster::any(std::optional<int32_t> avoid) {
  // The known brokers first, then the bootstrap addresses not among them.
  std::vector<io::Address> candidates;
  for (const auto& [id, b] : brokers_) candidates.push_back(b.address);
  for (const io::Address& a : options_.bootstrap) {
    if (std::find(candidates.begin(), candidates.end(), a) == candidates.end()) candidates.push_back(a);
  }
  BROOK_ASSERT(!candidates.empty());
  if (auto it = avoid.has_value() ? brokers_.find(*avoid) : brokers_.end(); it != brokers_.end()) {
    std::vector<io::Address> others;
    for (const io::Address& a : candidates) {
      if (!(a == it->second.address)) others.push_back(a);
    }
    if (!others.empty()) candidates = std::move(others);
  }
  // In turn, as Kafka's clients prefer a node they can reach (the least
  // loaded node): one whose last call failed (no answer in time, refused)
  // is asked only when every other one failed too, then the one that
  // failed least recently. So a broker that is gone for good costs a call
  // its timeout only when the others fail as well, not every time its
  // turn comes.
  const size_t start = next_any_++;
  net::Peer* failed = nullptr;
  for (size_t k = 0; k < candidates.size(); ++k) {
    net::Peer& peer = peer_for(candidates[(start + k) % candidates.size()]);
    if (!peer.last_failure().has_value()) return peer;
    if (failed == nullptr || *peer.last_failure() < *failed->last_failure()) failed = &peer;
  }
  return *failed;
}

const TopicInfo* Cluster::topic(std::string_view name) const {
  auto it = topics_.find(name);
  return it == topics_.end() ? nullptr : &it->second;
}

int32_t Cluster::leader(const TopicPartition& tp) const {
  const TopicInfo* t = topic(tp.topic);
  if (t == nullptr || tp.partition < 0 || tp.partition >= static_cast<int32_t>(t->partitions.size())) return -1;
  const PartitionInfo& p = t->partitions[static_cast<size_t>(tp.partition)];
  return p.error_code == 0 || p.error_code == net::code(net::Error::kReplicaNotAvailable) ? p.leader : -1;
}

int32_t Cluster::leader_epoch(const TopicPartition& tp) const {
  const TopicInfo* t = topic(tp.topic);
  if (t == nullptr || tp.partition < 0 || tp.partition >= static_cast<int32_t>(t->partitions.size())) return -1;
  return t->partitions[static_cast<size_t>(tp.partition)].leader_epoch;
}

void Cluster::cache(const net::MetadataResponse& r, const std::optional<std::vector<std::string>>& asked) {
  if (!r.brokers.empty()) {
    brokers_.clear();
    for (const auto& b : r.brokers) {
      BrokerInfo info;
      info.id = b.node_id;
      info.address = io::Address(b.host, static_cast<uint16_t>(b.port));
      info.rack = b.rack;
      brokers_[b.node_id] = std::move(info);
    }
  }
  cluster_id_ = r.cluster_id;
  controller_id_ = r.controller_id;
  std::set<std::string, std::less<>> answered;
  for (const auto& t : r.topics) {
    if (!t.name.has_value()) continue;
    answered.insert(*t.name);
    TopicInfo info;
    info.name = *t.name;
    info.id = t.topic_id;
    info.error_code = t.error_code;
    info.internal = t.is_internal;
    int32_t count = 0;
    for (const auto& p : t.partitions) count = std::max(count, p.partition_index + 1);
    info.partitions.resize(static_cast<size_t>(count));
    for (int32_t i = 0; i < count; ++i) {
      info.partitions[static_cast<size_t>(i)].partition = i;
      info.partitions[static_cast<size_t>(i)].error_code = net::code(net::Error::kLeaderNotAvailable);
    }
    for (const auto& p : t.partitions) {
      if (p.partition_index < 0) continue;
      PartitionInfo& pi = info.partitions[static_cast<size_t>(p.partition_index)];
      pi.error_code = p.error_code;
      pi.leader = p.leader_id;
      pi.leader_epoch = p.leader_epoch;
      pi.replicas = p.replica_nodes;
      pi.isr = p.isr_nodes;
      pi.offline = p.offline_replicas;
    }
    // As Kafka's clients: a broker whose metadata is behind (it may not
    // know yet that it lost leadership) does not move a partition back to
    // an older leader epoch.
    auto old = topics_.find(info.name);
    if (old != topics_.end() && old->second.id == info.id) {
      for (size_t i = 0; i < info.partitions.size() && i < old->second.partitions.size(); ++i) {
        if (old->second.partitions[i].leader_epoch > info.partitions[i].leader_epoch) {
          info.partitions[i] = old->second.partitions[i];
        }
      }
    }
    topics_[info.name] = std::move(info);
  }
  if (asked.has_value()) {
    for (const std::string& name : *asked) {
      if (answered.contains(name)) continue;
      TopicInfo info;
      info.name = name;
      info.error_code = net::code(net::Error::kUnknownTopicOrPartition);
      topics_[name] = std::move(info);
    }
  } else {
    // A full listing: topics it leaves out are gone.
    std::erase_if(topics_, [&](const auto& kv) { return !answered.contains(kv.first); });
  }
}

io::Task<absl::StatusOr<net::MetadataResponse>> Cluster::fetch_metadata(
    std::optional<std::vector<std::string>> topics, bool allow_auto_create, std::optional<int32_t> not_from) {
  net::MetadataRequest request;
  if (topics.has_value()) {
    request.topics.emplace();
    for (const std::string& name : *topics) request.topics->emplace_back().name = name;
  } else {
    request.topics = std::nullopt;
  }
  request.allow_auto_topic_creation = allow_auto_create;
  const size_t attempts = brokers_.size() + options_.bootstrap.size();
  absl::Status last = absl::UnavailableError("no broker to ask");
  for (size_t i = 0; i < std::max<size_t>(attempts, 1); ++i) {
    // The last attempt may ask `not_from` too.
    net::Peer& peer = i + 1 < attempts ? any(not_from) : any();
    absl::StatusOr<net::MetadataResponse> response =
        co_await peer.call<net::MetadataResponse>(request, kMetadataVersion, options_.request_timeout);
    if (!response.ok()) {
      peer.reset();
      // A refused login is not retried: the credentials are wrong.
      if (absl::IsUnauthenticated(response.status())) {
        co_return absl::UnauthenticatedError(fmt::format("metadata from {}: {}", peer.address().to_string(),
                                                         std::string(response.status().message())));
      }
      last = absl::UnavailableError(
          fmt::format("metadata from {}: {}", peer.address().to_string(), std::string(response.status().message())));
      continue;
    }
    cache(*response, topics);
    co_return std::move(*response);
  }
  co_return last;
}

io::Task<absl::Status> Cluster::refresh(std::vector<std::string> topics, std::optional<int32_t> not_from) {
  absl::StatusOr<net::MetadataResponse> r =
      co_await fetch_metadata(std::move(topics), options_.allow_auto_create_topics, not_from);
  co_return r.status();
}

}  // namespace brook::client
