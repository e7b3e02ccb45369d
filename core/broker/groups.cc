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
// The most bytes one read of a partition load takes.
constexpr size_t kLoadReadBytes = size_t{1} << 20;
// The largest decompressed batch a load accepts (the coordinator writes
// uncompressed batches; others come from a damaged or foreign partition).
constexpr size_t kLoadBatchBytesMax = size_t{64} << 20;

const std::string& offsets_topic() {
  static const std::string name(group::kOffsetsTopic);
  return name;
}

}  // namespace

// --- the coordinator's partitions -------------------------------------------------

bool Broker::partition_exists(const std::string& topic, int32_t partition) const {
  const metadata::TopicImage* t = image_.topics().topic(topic);
  return t != nullptr && t->partition(partition) != nullptr;
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
  std::shared_ptr<Partition> p = find(offsets_topic(), partition);
  if (p == nullptr || p->leader != config_.node_id || p->leader_epoch != epoch) {
    co_return Written{Error::kNotCoordinator, -1};
  }
  if (static_cast<int32_t>(p->isr.size()) < p->min_insync_replicas) co_return Written{Error::kNotEnoughReplicas, -1};
  std::shared_ptr<CoordinatorAppender>& slot = coordinator_appenders_[partition];
  if (slot == nullptr) slot = std::make_shared<CoordinatorAppender>();
  const std::shared_ptr<CoordinatorAppender> appender = slot;
  auto me = std::make_shared<CoordinatorWrite>();
  me->epoch = epoch;
  me->records = std::move(records);
  appender->queue.push_back(me);
  ++coordinator_write_stats_.writes;
  // The first writer appends for everyone queued meanwhile; the others wait.
  // A writer cancelled while appending leaves `appending` false, and a
  // waiter takes over.
  while (!me->done) {
    if (!appender->appending) {
      co_await append_coordinator_writes(partition, appender);
    } else {
      auto wait = [](io::WaitList* l) -> io::Task<void> { co_await l->wait(); };
      co_await wait(&appender->finished);
    }
  }
  if (me->error != Error::kNone) co_return Written{me->error, -1};
  const int64_t end = me->end_offset;
  // Committed once the ISR has it (acks=all).
  const io::Instant deadline = ctx_->clock().now() + config_.offsets_commit_timeout;
  while (true) {
    std::shared_ptr<Partition> now = find(offsets_topic(), partition);
    if (now != p || p->leader != config_.node_id || p->leader_epoch != epoch) {
      co_return Written{Error::kNotCoordinator, -1};
    }
    if (p->log->high_watermark() >= end) break;
    if (ctx_->clock().now() >= deadline) co_return Written{Error::kRequestTimedOut, -1};
    auto wait = [](io::WaitList* l) -> io::Task<void> { co_await l->wait(); };
    (void)co_await io::with_deadline(ctx_->clock(), deadline, wait(&appended_));
  }
  if (static_cast<int32_t>(p->isr.size()) < p->min_insync_replicas) {
    co_return Written{Error::kNotEnoughReplicasAfterAppend, -1};
  }
  co_return Written{Error::kNone, me->first_offset};
}

io::Task<void> Broker::append_coordinator_writes(int32_t partition, std::shared_ptr<CoordinatorAppender> appender) {
  appender->appending = true;
  // Also when this task is cancelled mid-append: the batch's outcome is
  // unknown, which its writers treat as failed.
  struct Release {
    CoordinatorAppender* a;
    ~Release() {
      for (const std::shared_ptr<CoordinatorWrite>& w : a->in_flight) {
        w->error = Error::kNotCoordinator;
        w->done = true;
      }
      a->in_flight.clear();
      a->appending = false;
      a->finished.notify_all();
    }
  } release{appender.get()};
  // A batch: records of up to this many bytes (a single larger write goes
  // alone).
  constexpr size_t kBatchBytes = 1 << 20;
  while (!appender->queue.empty()) {
    std::vector<std::shared_ptr<CoordinatorWrite>>& batch = appender->in_flight;
    batch.clear();
    size_t bytes = 0;
    const int32_t epoch = appender->queue.front()->epoch;
    size_t taken = 0;
    for (const std::shared_ptr<CoordinatorWrite>& w : appender->queue) {
      size_t size = 0;
      for (const group::CoordinatorRecord& r : w->records) size += r.key.size() + (r.value ? r.value->size() : 0);
      if (w->epoch != epoch || (!batch.empty() && bytes + size > kBatchBytes)) break;
      bytes += size;
      batch.push_back(w);
      ++taken;
    }
    appender->queue.erase(appender->queue.begin(), appender->queue.begin() + static_cast<ptrdiff_t>(taken));
    auto finish = [&](Error error) {
      for (const std::shared_ptr<CoordinatorWrite>& w : batch) {
        w->error = error;
        w->done = true;
      }
      batch.clear();
      appender->finished.notify_all();
    };
    std::shared_ptr<Partition> p = find(offsets_topic(), partition);
    if (p == nullptr || p->leader != config_.node_id || p->leader_epoch != epoch) {
      finish(Error::kNotCoordinator);
      continue;
    }
    const int64_t now_ms = io::to_ms(ctx_->clock().wall_now());
    net::RecordBatchBuilder builder(net::RecordBatchOptions{});
    for (const std::shared_ptr<CoordinatorWrite>& w : batch) {
      for (group::CoordinatorRecord& r : w->records) {
        net::NewRecord nr;
        nr.timestamp_ms = now_ms;
        nr.key = std::move(r.key);
        nr.value = std::move(r.value);
        builder.append(std::move(nr));
      }
    }
    absl::StatusOr<io::Buffer> built = builder.build();
    if (!built.ok()) {
      finish(Error::kUnknownServerError);
      continue;
    }
    ++coordinator_write_stats_.batches;
    absl::StatusOr<storage::AppendResult> appended =
        co_await p->log->append_as_leader(std::move(*built), epoch, storage::AppendOrigin::kCoordinator);
    if (!appended.ok()) {
      log_failed(appended.status());
      finish(Error::kNotCoordinator);
      continue;
    }
    if (!appended->ok()) {
      finish(appended->error);
      continue;
    }
    int64_t offset = appended->first_offset;
    for (const std::shared_ptr<CoordinatorWrite>& w : batch) {
      w->first_offset = offset;
      offset += static_cast<int64_t>(w->records.size());
      w->end_offset = offset;
    }
    maybe_advance_high_watermark(*p);
    appended_.notify_all();
    finish(Error::kNone);
  }
}

void Broker::sync_coordinator() {
  std::set<int32_t> led;
  for (const auto& [key, p] : partitions_) {
    if (key.first != offsets_topic() || !p->is_leader(config_.node_id)) continue;
    led.insert(key.second);
    if (groups_.loaded_epoch(key.second) == p->leader_epoch) continue;
    groups_.begin_load(key.second, p->leader_epoch);
    if (background_ != nullptr) background_->spawn(load_coordinator_partition(key.second, p->leader_epoch));
  }
  std::vector<int32_t> unloading;
  for (int32_t partition : groups_.loaded_partitions()) {
    if (!led.contains(partition)) unloading.push_back(partition);
  }
  if (unloading.empty()) return;
  ctx_->log().info("group coordinator: unloading {} partitions of {} ({})", unloading.size(), offsets_topic(),
                   fmt::join(unloading, ","));
  for (int32_t partition : unloading) groups_.unload(partition);
}

io::Task<void> Broker::load_coordinator_partition(int32_t partition, int32_t epoch) {
  std::shared_ptr<Partition> p = find(offsets_topic(), partition);
  if (p == nullptr) co_return;
  int64_t offset = p->log->log_start_offset();
  const int64_t end = p->log->log_end_offset();
  size_t records = 0;
  auto superseded = [&] { return groups_.loaded_epoch(partition) != epoch || !groups_.loading(partition); };
  auto give_up = [&](const std::string& why) {
    ctx_->log().error("group coordinator: loading {}-{} failed: {}", offsets_topic(), partition, why);
    if (!superseded()) groups_.unload(partition);
  };
  while (offset < end) {
    if (superseded()) co_return;
    absl::StatusOr<storage::ReadResult> read =
        co_await p->log->read(offset, kLoadReadBytes, storage::ReadBound::kLogEnd, true);
    if (!read.ok()) co_return give_up(read.status().ToString());
    if (read->error == Error::kOffsetOutOfRange) {
      // Retention or DeleteRecords moved the start meanwhile.
      if (offset < p->log->log_start_offset()) {
        offset = p->log->log_start_offset();
        continue;
      }
      co_return give_up(fmt::format("offset {} is out of range", offset));
    }
    if (read->records.empty()) break;
    if (superseded()) co_return;
    net::BatchIterator it(read->records);
    while (true) {
      absl::StatusOr<std::optional<net::BatchView>> next = it.next();
      if (!next.ok()) co_return give_up(next.status().ToString());
      if (!next->has_value()) break;
      const net::RecordBatchHeader& h = (*next)->header;
      offset = h.base_offset + h.last_offset_delta + 1;
      if (h.is_control()) continue;
      absl::StatusOr<std::vector<net::Record>> decoded = net::decode_records((*next)->bytes, kLoadBatchBytesMax);
      if (!decoded.ok()) co_return give_up(decoded.status().ToString());
      for (const net::Record& r : *decoded) {
        absl::Status s = groups_.replay(partition, net::record_offset(h, r), r.key, r.value);
        if (!s.ok()) co_return give_up(s.ToString());
        ++records;
      }
    }
  }
  if (superseded()) co_return;
  groups_.finish_load(partition, epoch);
  ctx_->log().info("group coordinator: {}-{} loaded {} records up to offset {}", offsets_topic(), partition, records,
                   offset);
}

io::Task<bool> Broker::ensure_offsets_topic() {
  auto ready = [&] {
    const metadata::TopicImage* t = image_.topics().topic(offsets_topic());
    if (t == nullptr) return false;
    for (const auto& [index, reg] : t->partitions) {
      if (reg.leader < 0) return false;
    }
    return true;
  };
  if (ready()) co_return true;
  if (image_.topics().topic(offsets_topic()) == nullptr) {
    net::CreateTopicsRequest create;
    create.timeout_ms = 30000;
    net::CreateTopicsRequest::CreatableTopic t;
    t.name = offsets_topic();
    t.num_partitions = config_.group.offsets_topic_partitions;
    t.replication_factor = config_.offsets_topic_replication_factor;
    for (const auto& [name, value] : {std::pair<const char*, const char*>{"cleanup.policy", "compact"},
                                      {"compression.type", "producer"},
                                      {"segment.bytes", "104857600"}}) {
      auto& c = t.configs.emplace_back();
      c.name = name;
      c.value = value;
    }
    create.topics.push_back(std::move(t));
    const io::Instant deadline = ctx_->clock().now() + 10s;
    absl::StatusOr<net::CreateTopicsResponse> created =
        co_await call_controller<net::CreateTopicsResponse>(create, 7, deadline);
    if (!created.ok()) {
      ctx_->log().warn("group coordinator: creating {} failed: {}", offsets_topic(), created.status().ToString());
      co_return false;
    }
    for (const auto& r : created->topics) {
      if (r.error_code != 0 && r.error_code != net::code(Error::kTopicAlreadyExists)) {
        ctx_->log().warn("group coordinator: creating {} failed: {} {}", offsets_topic(),
                         net::error_name(r.error_code), r.error_message.value_or(""));
        co_return false;
      }
    }
  }
  co_return co_await wait_for_topic(offsets_topic(), true, 5s) && ready();
}

// --- FindCoordinator ----------------------------------------------------------------------

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_find_coordinator(const net::RequestFrame& frame) {
  const int16_t version = frame.header.request_api_version;
  CO_ASSIGN_OR_RETURN(net::FindCoordinatorRequest request, net::decode_body<net::FindCoordinatorRequest>(frame));
  std::vector<std::string> keys = version >= 4 ? request.coordinator_keys : std::vector<std::string>{request.key};
  const int8_t key_type = version >= 1 ? request.key_type : kKeyTypeGroup;
  net::FindCoordinatorResponse response;
  bool topic_ready = false;
  if (key_type == kKeyTypeGroup) topic_ready = co_await ensure_offsets_topic();
  for (const std::string& key : keys) {
    net::FindCoordinatorResponse::Coordinator c;
    c.key = key;
    c.node_id = -1;
    c.port = -1;
    auto fail = [&](Error e, std::string message) {
      c.error_code = net::code(e);
      c.error_message = std::move(message);
    };
    if (key_type == kKeyTypeTransaction) {
      fail(Error::kCoordinatorNotAvailable, "transactions are not supported by this broker");
    } else if (key_type != kKeyTypeGroup) {
      fail(Error::kInvalidRequest, fmt::format("unknown key type {}", key_type));
    } else if (!topic_ready) {
      fail(Error::kCoordinatorNotAvailable, fmt::format("{} is not available", offsets_topic()));
    } else {
      const metadata::TopicImage* t = image_.topics().topic(offsets_topic());
      const metadata::PartitionRegistration* reg =
          t == nullptr ? nullptr : t->partition(groups_.partition_for(key));
      std::optional<io::Address> address =
          reg == nullptr || reg->leader < 0 ? std::nullopt : broker_address(reg->leader);
      if (!address.has_value()) {
        fail(Error::kCoordinatorNotAvailable, "the group's partition has no leader");
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

io::Task<absl::StatusOr<io::BufferChain>> Broker::on_group_request(const net::RequestFrame& frame) {
  const int16_t version = frame.header.request_api_version;
  switch (frame.header.request_api_key) {
    case net::JoinGroupRequest::kApiKey: {
      CO_ASSIGN_OR_RETURN(net::JoinGroupRequest r, net::decode_body<net::JoinGroupRequest>(frame));
      std::string client_id = frame.header.client_id.value_or("");
      net::JoinGroupResponse out =
          co_await groups_.join_group(std::move(r), version, std::move(client_id), std::string());
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
      co_return net::encode_response(groups_.fetch_offsets(r, version), frame.header);
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
          co_await groups_.consumer_group_heartbeat(std::move(r), version, std::move(client_id), std::string());
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
