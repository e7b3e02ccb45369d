// core/broker/groups.cc: the broker's side of the group coordinator: the
// __consumer_offsets partitions it leads (loading them into the
// coordinator, appending its records), FindCoordinator and the group APIs.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/broker/broker.h"
#include "io/status.h"
#include "io/when.h"
#include "net/kafka/messages/create_topics_request.h"
#include "net/kafka/messages/create_topics_response.h"
#include "net/kafka/messages/find_coordinator_request.h"
#include "net/kafka/messages/find_coordinator_response.h"
#include "net/kafka/record_batch.h"

namespace brook::broker {

namespace {

using namespace std::chrono_literals;
using net::Error;

constexpr int8_t kKeyTypeGroup = 0;
constexpr int8_t kKeyTypeTransaction = 1;

const std::string& offsets_topic() {
  static const std::string name(group::kOffsetsTopic);
  return name;
}

const std::string& txn_topic() {
  static const std::string name(txn::kTransactionStateTopic);
  return name;
}

// How long a broker waits for the coordinator's answer to an OffsetFetch it
// forwarded.
constexpr io::Duration kOffsetFetchForwardTimeout = 5s;

// OffsetFetch's error for its one group, where `version` puts it: the
// group's entry (v8+), the top level (v2-v7) or every partition (v0-v1).
Error offset_fetch_error(const net::OffsetFetchResponse& r, int16_t version) {
  if (version >= 8) return r.groups.size() == 1 ? static_cast<Error>(r.groups.front().error_code) : Error::kNone;
  if (version >= 2) return static_cast<Error>(r.error_code);
  for (const auto& t : r.topics) {
    for (const auto& p : t.partitions) {
      if (p.error_code != 0) return static_cast<Error>(p.error_code);
    }
  }
  return Error::kNone;
}

void set_offset_fetch_error(net::OffsetFetchResponse& r, int16_t version, Error e) {
  if (version >= 8) {
    for (auto& g : r.groups) g.error_code = net::code(e);
  } else if (version >= 2) {
    r.error_code = net::code(e);
  } else {
    for (auto& t : r.topics) {
      for (auto& p : t.partitions) p.error_code = net::code(e);
    }
  }
}

}  // namespace

// --- the coordinator's partitions -------------------------------------------------

const metadata::PartitionRegistration* Broker::registration(std::string_view topic, int32_t partition) const {
  const metadata::TopicImage* t = image_.topics().topic(topic);
  return t == nullptr ? nullptr : t->partition(partition);
}

bool Broker::partition_exists(const std::string& topic, int32_t partition) const {
  return registration(topic, partition) != nullptr;
}

namespace {
std::optional<group::CoordinatorLog::Topic> topic_of(const metadata::TopicImage* t) {
  if (t == nullptr) return std::nullopt;
  return group::CoordinatorLog::Topic{t->id, t->name, static_cast<int32_t>(t->partitions.size())};
}
}  // namespace

std::optional<group::CoordinatorLog::Topic> Broker::topic(const std::string& name) const {
  return topic_of(image_.topics().topic(name));
}

std::optional<group::CoordinatorLog::Topic> Broker::topic(const net::Uuid& id) const {
  return topic_of(image_.topics().topic(id));
}

std::vector<std::string> Broker::topic_names() const {
  std::vector<std::string> out;
  for (const auto& [name, id] : image_.topics().by_name) out.push_back(name);
  return out;
}

io::Task<group::CoordinatorLog::Written> Broker::write(int32_t partition, int32_t epoch,
                                                        std::vector<group::CoordinatorRecord> records) {
  co_return co_await offsets_writer_.write(partition, epoch, std::move(records));
}

io::Task<group::CoordinatorLog::Written> Broker::write_transactional(int32_t partition, int32_t epoch,
                                                                      int64_t producer_id, int16_t producer_epoch,
                                                                      uint64_t verification,
                                                                      std::vector<group::CoordinatorRecord> records) {
  // Not through offsets_writer_: a transactional batch holds one producer's
  // records only.
  if (Error e = offsets_partitions_.check_leader(partition, epoch); e != Error::kNone) co_return Written{e, -1};
  // A producer's first offsets of a transaction need the verification of
  // this request (see on_group_request), not ended by a marker since: one
  // made for a later transaction of the producer does not do.
  if (std::shared_ptr<Partition> p = offsets_partitions_.led(partition, epoch);
      p != nullptr && config_.transaction_partition_verification &&
      !p->log->producer_state().has_ongoing_transaction(producer_id)) {
    auto entry = p->txn_verifications.find(producer_id);
    if (entry == p->txn_verifications.end() || !entry->second.verified || entry->second.guard != verification) {
      co_return Written{Error::kInvalidTxnState, -1};
    }
  }
  const int64_t count = static_cast<int64_t>(records.size());
  const runtime::BatchAppender::Appended appended = co_await offsets_partitions_.append_transactional(
      partition, epoch, producer_id, producer_epoch, std::move(records));
  if (appended.error != Error::kNone) co_return Written{appended.error, -1};
  const Error committed = co_await offsets_partitions_.wait_committed(partition, epoch, appended.first_offset + count);
  if (committed != Error::kNone) co_return Written{committed, -1};
  co_return Written{Error::kNone, appended.first_offset};
}

std::shared_ptr<Partition> Broker::CoordinatorPartitions::led(int32_t partition, int32_t epoch) const {
  std::shared_ptr<Partition> p = broker_->find(topic_, partition);
  if (p == nullptr || p->leader != broker_->config_.node_id || p->leader_epoch != epoch) return nullptr;
  return p;
}

net::Error Broker::CoordinatorPartitions::check_leader(int32_t partition, int32_t epoch) {
  std::shared_ptr<Partition> p = led(partition, epoch);
  if (p == nullptr) return Error::kNotCoordinator;
  if (static_cast<int32_t>(p->isr.size()) < p->min_insync_replicas) return Error::kNotEnoughReplicas;
  return Error::kNone;
}

io::Task<runtime::BatchAppender::Appended> Broker::CoordinatorPartitions::append(
    int32_t partition, int32_t epoch, std::vector<runtime::Record> records) {
  co_return co_await append_batch(partition, epoch, net::RecordBatchOptions{}, std::move(records));
}

io::Task<runtime::BatchAppender::Appended> Broker::CoordinatorPartitions::append_transactional(
    int32_t partition, int32_t epoch, int64_t producer_id, int16_t producer_epoch,
    std::vector<runtime::Record> records) {
  net::RecordBatchOptions options;
  options.producer_id = producer_id;
  options.producer_epoch = producer_epoch;
  options.base_sequence = net::kNoSequence;
  options.transactional = true;
  co_return co_await append_batch(partition, epoch, options, std::move(records));
}

io::Task<runtime::BatchAppender::Appended> Broker::CoordinatorPartitions::append_batch(
    int32_t partition, int32_t epoch, net::RecordBatchOptions options, std::vector<runtime::Record> records) {
  std::shared_ptr<Partition> p = led(partition, epoch);
  if (p == nullptr) co_return Appended{Error::kNotCoordinator, -1};
  const int64_t now_ms = io::to_ms(broker_->ctx_->clock().wall_now());
  net::RecordBatchBuilder builder(std::move(options));
  for (runtime::Record& r : records) {
    net::NewRecord nr;
    nr.timestamp_ms = now_ms;
    nr.key = std::move(r.key);
    nr.value = std::move(r.value);
    builder.append(std::move(nr));
  }
  absl::StatusOr<io::Buffer> built = builder.build();
  if (!built.ok()) co_return Appended{Error::kUnknownServerError, -1};
  absl::StatusOr<storage::AppendResult> appended =
      co_await p->log->append_as_leader(std::move(*built), epoch, storage::AppendOrigin::kCoordinator);
  if (!appended.ok()) {
    // A partition removed meanwhile is no longer coordinated here, whatever the error.
    (void)broker_->partition_log_failed(p, appended.status());
    co_return Appended{Error::kNotCoordinator, -1};
  }
  if (!appended->ok()) co_return Appended{appended->error, -1};
  broker_->maybe_advance_high_watermark(*p);
  broker_->appended_.notify();
  co_return Appended{Error::kNone, appended->first_offset};
}

io::Task<net::Error> Broker::CoordinatorPartitions::wait_committed(int32_t partition, int32_t epoch,
                                                                   int64_t end_offset) {
  std::shared_ptr<Partition> p = led(partition, epoch);
  // Committed once the ISR has it (acks=all).
  const io::Instant deadline = broker_->ctx_->clock().now() + broker_->config_.offsets_commit_timeout;
  while (true) {
    const uint64_t seen = broker_->appended_.seen();
    if (p == nullptr || led(partition, epoch) != p) co_return Error::kNotCoordinator;
    if (p->log->high_watermark() >= end_offset) break;
    if (broker_->ctx_->clock().now() >= deadline) co_return Error::kRequestTimedOut;
    (void)co_await io::with_deadline(broker_->ctx_->clock(), deadline, broker_->appended_.changed_since(seen));
  }
  if (static_cast<int32_t>(p->isr.size()) < p->min_insync_replicas) co_return Error::kNotEnoughReplicasAfterAppend;
  co_return Error::kNone;
}

std::optional<std::pair<int64_t, int64_t>> Broker::CoordinatorPartitions::bounds(int32_t partition) {
  std::shared_ptr<Partition> p = broker_->find(topic_, partition);
  if (p == nullptr) return std::nullopt;
  return std::pair<int64_t, int64_t>{p->log->log_start_offset(), p->log->log_end_offset()};
}

io::Task<absl::StatusOr<runtime::PartitionReader::Chunk>> Broker::CoordinatorPartitions::read(int32_t partition,
                                                                                              int64_t offset,
                                                                                              size_t max_bytes) {
  std::shared_ptr<Partition> p = broker_->find(topic_, partition);
  if (p == nullptr) co_return absl::NotFoundError(fmt::format("{}-{} is not on this broker", topic_, partition));
  absl::StatusOr<storage::ReadResult> read =
      co_await p->log->read(offset, max_bytes, storage::ReadBound::kLogEnd, true);
  if (!read.ok()) co_return read.status();
  Chunk out;
  out.out_of_range = read->error == Error::kOffsetOutOfRange;
  out.records = std::move(read->records);
  co_return out;
}

void Broker::sync_coordinator() { sync_shards(groups_, offsets_partitions_, "group coordinator"); }

void Broker::sync_shards(runtime::Coordinator& coordinator, CoordinatorPartitions& partitions, std::string_view what) {
  const std::string& topic = partitions.topic();
  std::map<int32_t, int32_t> led;
  for (const auto& [key, p] : partitions_) {
    if (key.first == topic && p->is_leader(config_.node_id)) led[key.second] = p->leader_epoch;
  }
  const runtime::LeadershipChange change = runtime::sync_leadership(coordinator, led);
  if (background_ != nullptr) {
    for (int32_t partition : change.loads) {
      background_->spawn(runtime::load_partition(coordinator, partitions, ctx_->clock(), ctx_->log(), topic, partition,
                                                 led.at(partition)));
    }
  }
  if (!change.unloaded.empty()) {
    ctx_->log().info("{}: unloaded {} partitions of {} ({})", what, change.unloaded.size(), topic,
                     fmt::join(change.unloaded, ","));
  }
}

io::Task<bool> Broker::ensure_offsets_topic() {
  std::vector<std::pair<std::string, std::string>> configs;
  configs.emplace_back("cleanup.policy", "compact");
  configs.emplace_back("compression.type", "producer");
  configs.emplace_back("segment.bytes", "104857600");
  co_return co_await ensure_internal_topic(offsets_topic(), config_.group.offsets_topic_partitions,
                                           config_.offsets_topic_replication_factor, std::move(configs));
}

io::Task<bool> Broker::ensure_internal_topic(std::string name, int32_t partitions, int16_t replication_factor,
                                             std::vector<std::pair<std::string, std::string>> configs) {
  // Once the topic exists, whether the partition a key maps to has a leader
  // is the caller's to judge, for that key alone (as Kafka's): one
  // partition without a leader (its only in-sync replica gone for good)
  // must not make every group's or transaction's coordinator unavailable.
  if (image_.topics().topic(name) != nullptr) co_return true;
  net::CreateTopicsRequest create;
  create.timeout_ms = 30000;
  net::CreateTopicsRequest::CreatableTopic t;
  t.name = name;
  t.num_partitions = partitions;
  t.replication_factor = replication_factor;
  for (auto& [key, value] : configs) {
    auto& c = t.configs.emplace_back();
    c.name = key;
    c.value = value;
  }
  create.topics.push_back(std::move(t));
  const io::Instant deadline = ctx_->clock().now() + 10s;
  absl::StatusOr<net::CreateTopicsResponse> created =
      co_await call_controller<net::CreateTopicsResponse>(create, 7, deadline);
  if (!created.ok()) {
    ctx_->log().warn("broker: creating {} failed: {}", name, created.status().ToString());
    co_return false;
  }
  for (const auto& r : created->topics) {
    if (r.error_code != 0 && r.error_code != net::code(Error::kTopicAlreadyExists)) {
      ctx_->log().warn("broker: creating {} failed: {} {}", name, net::error_name(r.error_code),
                       r.error_message.value_or(""));
      co_return false;
    }
  }
  // Just created: a moment for its leaders, so that the first lookup can
  // name a coordinator.
  (void)co_await wait_for_topic(name, true, 5s);
  co_return image_.topics().topic(name) != nullptr;
}

// --- FindCoordinator ----------------------------------------------------------------------

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_find_coordinator(const net::RequestFrame& frame) {
  const int16_t version = frame.header.request_api_version;
  CO_ASSIGN_OR_RETURN(net::FindCoordinatorRequest request, net::decode_body<net::FindCoordinatorRequest>(frame));
  std::vector<std::string> keys = version >= 4 ? request.coordinator_keys : std::vector<std::string>{request.key};
  const int8_t key_type = version >= 1 ? request.key_type : kKeyTypeGroup;
  net::FindCoordinatorResponse response;
  const bool transactions = key_type == kKeyTypeTransaction;
  const std::string& topic_name = transactions ? txn_topic() : offsets_topic();
  bool topic_ready = false;
  if (key_type == kKeyTypeGroup) topic_ready = co_await ensure_offsets_topic();
  if (transactions) topic_ready = co_await ensure_txn_topic();
  for (const std::string& key : keys) {
    net::FindCoordinatorResponse::Coordinator c;
    c.key = key;
    c.node_id = -1;
    c.port = -1;
    auto fail = [&](Error e, std::string message) {
      c.error_code = net::code(e);
      c.error_message = std::move(message);
    };
    if (key_type != kKeyTypeGroup && !transactions) {
      fail(Error::kInvalidRequest, fmt::format("unknown key type {}", key_type));
    } else if (transactions && key.empty()) {
      fail(Error::kInvalidRequest, "an empty transactional id");
    } else if (!topic_ready) {
      fail(Error::kCoordinatorNotAvailable, fmt::format("{} is not available", topic_name));
    } else {
      const int32_t partition = transactions ? txns_.partition_for(key) : groups_.partition_for(key);
      const metadata::PartitionRegistration* reg = registration(topic_name, partition);
      std::optional<io::Address> address =
          reg == nullptr || reg->leader < 0 ? std::nullopt : broker_address(reg->leader, client_listener(frame));
      if (!address.has_value()) {
        fail(Error::kCoordinatorNotAvailable, fmt::format("{}-{} has no leader", topic_name, partition));
      } else {
        c.node_id = reg->leader;
        c.host = address->host;
        c.port = address->port;
        c.error_message = std::nullopt;
      }
    }
    if (version < 4) {
      response.error_code = c.error_code;
      response.error_message = c.error_message;
      response.node_id = c.node_id;
      response.host = c.host;
      response.port = c.port;
    } else {
      response.coordinators.push_back(std::move(c));
    }
  }
  co_return net::encode_response(response, frame.header);
}

// --- the group APIs ----------------------------------------------------------------------

// OffsetFetch at a broker that is not the group's coordinator. Kafka answers
// NOT_COORDINATOR, and so does this broker when it cannot tell who is; but a
// client that asks just as the coordinator moves (a new generation's
// assignment fetched from the broker that handed it out, moments before it
// resigned) may not recover from that answer: librdkafka takes a
// request-level NOT_COORDINATOR on OffsetFetch as final for the partitions
// it asked about and never starts fetching them until the next rebalance
// (its issue 5586).
// So the request goes on to the broker that leads the group's
// __consumer_offsets partition, once (a forwarded request is not forwarded
// again), and its answer is the client's. A coordinator that does not
// answer, or is not one yet either, makes the answer
// COORDINATOR_LOAD_IN_PROGRESS, which every client retries.
io::Task<net::OffsetFetchResponse> Broker::forward_offset_fetch(net::OffsetFetchRequest request, int16_t version,
                                                                net::OffsetFetchResponse local) {
  std::optional<std::string> group_id;
  if (version < 8) {
    group_id = request.group_id;
  } else if (request.groups.size() == 1) {
    group_id = request.groups.front().group_id;
  }
  if (!group_id.has_value()) co_return local;
  // The registration lives in the image, which a metadata change replaces
  // while the call is under way: only its leader is kept.
  const metadata::PartitionRegistration* reg = registration(offsets_topic(), groups_.partition_for(*group_id));
  const int32_t leader = reg == nullptr ? -1 : reg->leader;
  if (leader < 0 || leader == config_.node_id) co_return local;
  std::optional<io::Address> address = broker_address(leader);
  if (!address.has_value()) co_return local;
  net::Peer& peer = group_peers_.get(leader, *address);
  absl::StatusOr<net::OffsetFetchResponse> answer =
      co_await peer.call<net::OffsetFetchResponse>(request, version, kOffsetFetchForwardTimeout);
  if (answer.ok() && offset_fetch_error(*answer, version) != Error::kNotCoordinator) co_return *std::move(answer);
  ctx_->log().debug("broker: OffsetFetch of group {} forwarded to broker {}: {}", *group_id, leader,
                    answer.ok() ? "not the coordinator either" : answer.status().ToString());
  set_offset_fetch_error(local, version, Error::kCoordinatorLoadInProgress);
  co_return local;
}

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_group_request(const net::RequestFrame& frame) {
  const int16_t version = frame.header.request_api_version;
  switch (frame.header.request_api_key) {
    case net::JoinGroupRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::JoinGroupRequest r, net::decode_body<net::JoinGroupRequest>(frame));
      std::string client_id = frame.header.client_id.value_or("");
      net::JoinGroupResponse out =
          co_await groups_.join_group(std::move(r), version, std::move(client_id), frame.client_host);
      co_return net::encode_response(out, frame.header);
    }
    case net::SyncGroupRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::SyncGroupRequest r, net::decode_body<net::SyncGroupRequest>(frame));
      net::SyncGroupResponse out = co_await groups_.sync_group(std::move(r), version);
      co_return net::encode_response(out, frame.header);
    }
    case net::HeartbeatRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::HeartbeatRequest r, net::decode_body<net::HeartbeatRequest>(frame));
      co_return net::encode_response(groups_.heartbeat(r, version), frame.header);
    }
    case net::LeaveGroupRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::LeaveGroupRequest r, net::decode_body<net::LeaveGroupRequest>(frame));
      net::LeaveGroupResponse out = co_await groups_.leave_group(std::move(r), version);
      co_return net::encode_response(out, frame.header);
    }
    case net::OffsetCommitRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::OffsetCommitRequest r, net::decode_body<net::OffsetCommitRequest>(frame));
      net::OffsetCommitResponse out = co_await groups_.commit_offsets(std::move(r), version);
      co_return net::encode_response(out, frame.header);
    }
    case net::OffsetFetchRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::OffsetFetchRequest r, net::decode_body<net::OffsetFetchRequest>(frame));
      net::OffsetFetchResponse out = groups_.fetch_offsets(r, version);
      if (offset_fetch_error(out, version) == Error::kNotCoordinator &&
          !frame.header.client_id.value_or("").starts_with(kOffsetFetchForwardClientId)) {
        out = co_await forward_offset_fetch(std::move(r), version, std::move(out));
      }
      co_return net::encode_response(out, frame.header);
    }
    case net::OffsetDeleteRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::OffsetDeleteRequest r, net::decode_body<net::OffsetDeleteRequest>(frame));
      net::OffsetDeleteResponse out = co_await groups_.delete_offsets(std::move(r), version);
      co_return net::encode_response(out, frame.header);
    }
    case net::DescribeGroupsRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::DescribeGroupsRequest r, net::decode_body<net::DescribeGroupsRequest>(frame));
      co_return net::encode_response(groups_.describe_groups(r, version), frame.header);
    }
    case net::ListGroupsRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::ListGroupsRequest r, net::decode_body<net::ListGroupsRequest>(frame));
      co_return net::encode_response(groups_.list_groups(r, version), frame.header);
    }
    case net::DeleteGroupsRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::DeleteGroupsRequest r, net::decode_body<net::DeleteGroupsRequest>(frame));
      net::DeleteGroupsResponse out = co_await groups_.delete_groups(std::move(r), version);
      co_return net::encode_response(out, frame.header);
    }
    case net::ConsumerGroupHeartbeatRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::ConsumerGroupHeartbeatRequest r,
                          net::decode_body<net::ConsumerGroupHeartbeatRequest>(frame));
      std::string client_id = frame.header.client_id.value_or("");
      net::ConsumerGroupHeartbeatResponse out =
          co_await groups_.consumer_group_heartbeat(std::move(r), version, std::move(client_id), frame.client_host);
      co_return net::encode_response(out, frame.header);
    }
    case net::TxnOffsetCommitRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::TxnOffsetCommitRequest r, net::decode_body<net::TxnOffsetCommitRequest>(frame));
      // KIP-890: the group's __consumer_offsets partition takes a producer's
      // first offsets of a transaction only once the transaction
      // coordinator confirms that the transaction is ongoing and added it
      // (AddOffsetsToTxn); write_transactional checks that no marker came
      // since, by the check's guard.
      uint64_t verification = 0;
      std::shared_ptr<Partition> p = find(std::string(group::kOffsetsTopic), groups_.partition_for(r.group_id));
      if (config_.transaction_partition_verification && p != nullptr && p->is_leader(config_.node_id) &&
          !r.transactional_id.empty()) {
        std::vector<std::shared_ptr<Partition>> partitions{p};
        std::map<txn::TopicPartition, TxnCheck> checks =
            co_await verify_first_txn_writes(r.transactional_id, r.producer_id, r.producer_epoch, std::move(partitions));
        Error e = checks.empty() ? Error::kNone : checks.begin()->second.error;
        if (!checks.empty()) verification = checks.begin()->second.guard;
        // TxnOffsetCommit's retriable answer for a coordinator that is busy
        // or unreachable.
        if (e == Error::kNotEnoughReplicas) e = Error::kCoordinatorNotAvailable;
        if (e != Error::kNone) {
          net::TxnOffsetCommitResponse out;
          for (const auto& topic : r.topics) {
            auto& t = out.topics.emplace_back();
            t.name = topic.name;
            for (const auto& partition : topic.partitions) {
              auto& o = t.partitions.emplace_back();
              o.partition_index = partition.partition_index;
              o.error_code = net::code(e);
            }
          }
          co_return net::encode_response(out, frame.header);
        }
      }
      net::TxnOffsetCommitResponse out = co_await groups_.txn_offset_commit(std::move(r), version, verification);
      co_return net::encode_response(out, frame.header);
    }
    case net::ConsumerGroupDescribeRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::ConsumerGroupDescribeRequest r,
                          net::decode_body<net::ConsumerGroupDescribeRequest>(frame));
      co_return net::encode_response(groups_.consumer_group_describe(r, version), frame.header);
    }
    default:
      co_return absl::UnimplementedError(
          fmt::format("broker: API key {} is not a group API", frame.header.request_api_key));
  }
}

}  // namespace brook::broker
