// net/client/producer.cc
#include "net/client/producer.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "io/when.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/init_producer_id_request.h"
#include "net/kafka/messages/init_producer_id_response.h"
#include "net/kafka/messages/produce_request.h"
#include "net/kafka/messages/produce_response.h"

namespace brook::client {

namespace {

constexpr int16_t kProduceVersion = 9;
constexpr int16_t kInitProducerIdVersion = 4;
// What a record adds to a batch besides its key, value and headers (its
// length, attributes, deltas and lengths as varints, at most).
constexpr size_t kRecordOverheadBytes = 21;
constexpr size_t kHeaderOverheadBytes = 10;

size_t record_bytes(const ProducerRecord& r) {
  size_t n = kRecordOverheadBytes;
  if (r.key.has_value()) n += r.key->size();
  if (r.value.has_value()) n += r.value->size();
  for (const net::RecordHeader& h : r.headers) {
    n += kHeaderOverheadBytes + h.key.size() + (h.value.has_value() ? h.value->size() : 0);
  }
  return n;
}

}  // namespace

int32_t murmur2(std::span<const std::byte> data) {
  const uint32_t length = static_cast<uint32_t>(data.size());
  constexpr uint32_t kSeed = 0x9747b28c;
  constexpr uint32_t m = 0x5bd1e995;
  constexpr int r = 24;
  uint32_t h = kSeed ^ length;
  const uint32_t length4 = length / 4;
  auto byte = [&](uint32_t i) { return static_cast<uint32_t>(std::to_integer<uint8_t>(data[i])); };
  for (uint32_t i = 0; i < length4; ++i) {
    const uint32_t i4 = i * 4;
    uint32_t k = byte(i4) | (byte(i4 + 1) << 8) | (byte(i4 + 2) << 16) | (byte(i4 + 3) << 24);
    k *= m;
    k ^= k >> r;
    k *= m;
    h *= m;
    h ^= k;
  }
  const uint32_t tail = length & ~3u;
  switch (length % 4) {
    case 3:
      h ^= byte(tail + 2) << 16;
      [[fallthrough]];
    case 2:
      h ^= byte(tail + 1) << 8;
      [[fallthrough]];
    case 1:
      h ^= byte(tail);
      h *= m;
  }
  h ^= h >> 13;
  h *= m;
  h ^= h >> 15;
  return static_cast<int32_t>(h);
}

int32_t partition_for_key(std::span<const std::byte> key, int32_t partitions) {
  return (murmur2(key) & 0x7fffffff) % partitions;
}

Producer::Producer(io::Context& ctx, ProducerConfig config)
    : ctx_(&ctx), config_(std::move(config)), cluster_(ctx, config_.client), tasks_(ctx.executor()) {
  // Kafka turns idempotence off when acks is not all.
  if (config_.acks != -1) config_.enable_idempotence = false;
  config_.max_in_flight = std::max(config_.max_in_flight, 1);
  tasks_.spawn(sender());
}

Producer::~Producer() { tasks_.cancel_all(); }

int32_t Producer::choose_partition(const ProducerRecord& record, int32_t partitions) {
  if (record.partition.has_value()) return *record.partition;
  if (record.key.has_value()) return partition_for_key(record.key->span(), partitions);
  // Sticky: stay on a partition while its open batch has room.
  auto it = sticky_.find(record.topic);
  if (it != sticky_.end() && it->second < partitions) {
    auto q = queues_.find(TopicPartition(record.topic, it->second));
    if (q != queues_.end() && !q->second.batches.empty()) {
      const Batch& b = q->second.batches.back();
      if (!b.built.has_value() && b.bytes < config_.batch_size) return it->second;
    }
  }
  int32_t p = static_cast<int32_t>(ctx_->random().uniform(static_cast<uint64_t>(partitions)));
  if (it != sticky_.end() && partitions > 1 && p == it->second) p = (p + 1) % partitions;
  sticky_[record.topic] = p;
  return p;
}

io::Task<absl::Status> Producer::await_topic(const std::string& topic) {
  const io::Instant deadline = ctx_->clock().now() + config_.max_block;
  absl::Status last = absl::OkStatus();
  while (true) {
    const TopicInfo* t = cluster_.topic(topic);
    if (t != nullptr && t->error_code == 0 && !t->partitions.empty()) co_return absl::OkStatus();
    if (t != nullptr && t->error_code != 0 && !net::error_retriable(t->error_code)) {
      co_return error_status(t->error_code, fmt::format("topic '{}'", topic));
    }
    if (ctx_->clock().now() >= deadline) {
      co_return absl::DeadlineExceededError(
          fmt::format("topic '{}' not in the metadata after max.block.ms{}{}", topic, last.ok() ? "" : ": ",
                      last.ok() ? (t != nullptr ? error_text(t->error_code) : "") : std::string(last.message())));
    }
    if (t != nullptr) co_await ctx_->clock().sleep_for(config_.client.retry_backoff);
    std::vector<std::string> topics{topic};
    last = co_await cluster_.refresh(std::move(topics));
    if (absl::IsUnauthenticated(last)) co_return last;
    if (!last.ok()) co_await ctx_->clock().sleep_for(config_.client.retry_backoff);
  }
}

io::Task<absl::Status> Producer::send(ProducerRecord record, DeliveryCallback done) {
  auto fail = [&](absl::Status why) {
    ++stats_.records_failed;
    if (done) done(why);
    return why;
  };
  const size_t bytes = record_bytes(record);
  if (bytes + net::kBatchHeaderBytes > config_.max_request_size) {
    co_return fail(absl::FailedPreconditionError(
        fmt::format("MESSAGE_TOO_LARGE: a record of {} bytes is over max.request.size ({})", bytes,
                    config_.max_request_size)));
  }
  if (absl::Status s = co_await await_topic(record.topic); !s.ok()) co_return fail(s);
  while (buffered_bytes_ > 0 && buffered_bytes_ + bytes > config_.buffer_memory) co_await progress_.wait();
  const TopicInfo* info = cluster_.topic(record.topic);
  if (info == nullptr || info->partitions.empty()) {
    co_return fail(absl::UnavailableError(fmt::format("topic '{}' left the metadata", record.topic)));
  }
  const int32_t partitions = static_cast<int32_t>(info->partitions.size());
  if (record.partition.has_value() && (*record.partition < 0 || *record.partition >= partitions)) {
    co_return fail(absl::InvalidArgumentError(
        fmt::format("partition {} of topic '{}', which has {} partitions", *record.partition, record.topic,
                    partitions)));
  }
  const int32_t partition = choose_partition(record, partitions);
  PartitionQueue& q = queues_[TopicPartition(record.topic, partition)];
  const io::Instant now = ctx_->clock().now();
  const bool fresh = q.batches.empty() || q.batches.back().built.has_value() ||
                     q.batches.back().bytes + bytes > config_.batch_size;
  if (fresh) {
    Batch b;
    b.created = now;
    q.batches.push_back(std::move(b));
  }
  Batch& batch = q.batches.back();
  Pending p;
  p.record.timestamp_ms = record.timestamp_ms.value_or(io::to_ms(ctx_->clock().wall_now()));
  p.record.key = std::move(record.key);
  p.record.value = std::move(record.value);
  p.record.headers = std::move(record.headers);
  p.done = std::move(done);
  p.bytes = bytes;
  p.id = next_record_id_++;
  outstanding_.insert(p.id);
  batch.records.push_back(std::move(p));
  batch.bytes += bytes;
  buffered_bytes_ += bytes;
  if (fresh || batch.bytes >= config_.batch_size) wake();
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<RecordMetadata>> Producer::produce(ProducerRecord record) {
  struct Outcome {
    std::optional<absl::StatusOr<RecordMetadata>> result;
    io::Event done;
  };
  auto outcome = std::make_shared<Outcome>();
  // Named, not a temporary in the co_await (g++ 12 destroys those twice).
  DeliveryCallback done = [outcome](const absl::StatusOr<RecordMetadata>& r) {
    outcome->result = r;
    outcome->done.set();
  };
  (void)co_await send(std::move(record), std::move(done));
  co_await outcome->done.wait();
  co_return std::move(*outcome->result);
}

io::Task<void> Producer::flush() {
  const uint64_t before = next_record_id_;
  ++flushing_;
  struct Done {
    int* flushing;
    ~Done() { --*flushing; }
  } guard{&flushing_};
  wake();
  while (!outstanding_.empty() && *outstanding_.begin() < before) co_await progress_.wait();
}

absl::Status Producer::prepare(const TopicPartition& tp, Batch& b) {
  PartitionQueue& q = queues_[tp];
  if (b.built.has_value()) return absl::OkStatus();
  net::RecordBatchOptions options;
  options.compression = config_.compression;
  options.compression_level = config_.compression_level;
  if (config_.enable_idempotence) {
    if (q.sequence_producer_id != producer_id_) {
      q.sequence_producer_id = producer_id_;
      q.next_sequence = 0;
    }
    b.producer_id = producer_id_;
    b.producer_epoch = producer_epoch_;
    b.base_sequence = q.next_sequence;
    q.next_sequence = static_cast<int32_t>((static_cast<int64_t>(q.next_sequence) + b.records.size()) & 0x7fffffff);
    options.producer_id = b.producer_id;
    options.producer_epoch = b.producer_epoch;
    options.base_sequence = b.base_sequence;
  }
  net::RecordBatchBuilder builder(options);
  for (const Pending& p : b.records) builder.append(p.record);
  absl::StatusOr<io::Buffer> built = builder.build();
  if (!built.ok()) return built.status();
  b.built = std::move(*built);
  // The sticky partition moves on once its batch closes.
  auto it = sticky_.find(tp.topic);
  if (it != sticky_.end() && it->second == tp.partition) sticky_.erase(it);
  return absl::OkStatus();
}

void Producer::complete(const TopicPartition& tp, absl::StatusOr<std::pair<int64_t, int64_t>> result) {
  PartitionQueue& q = queues_[tp];
  BROOK_ASSERT(!q.batches.empty());
  Batch b = std::move(q.batches.front());
  q.batches.pop_front();
  q.in_flight = false;
  if (!result.ok() && config_.enable_idempotence && b.base_sequence != net::kNoSequence) {
    // The broker may or may not hold this batch's sequence: start afresh.
    need_producer_id_ = true;
  }
  buffered_bytes_ -= b.bytes;
  for (size_t i = 0; i < b.records.size(); ++i) {
    Pending& p = b.records[i];
    outstanding_.erase(p.id);
    if (result.ok()) {
      ++stats_.records_sent;
      RecordMetadata md;
      md.topic = tp.topic;
      md.partition = tp.partition;
      md.offset = result->first < 0 ? -1 : result->first + static_cast<int64_t>(i);
      md.timestamp_ms = result->second >= 0 ? result->second : p.record.timestamp_ms;
      if (p.done) p.done(md);
    } else {
      ++stats_.records_failed;
      if (p.done) p.done(result.status());
    }
  }
  progress_.notify_all();
  wake();
}

void Producer::retry_or_fail(const TopicPartition& tp, const absl::Status& why) {
  PartitionQueue& q = queues_[tp];
  BROOK_ASSERT(!q.batches.empty());
  Batch& b = q.batches.front();
  q.in_flight = false;
  const io::Instant now = ctx_->clock().now();
  if (now + config_.client.retry_backoff >= b.created + config_.delivery_timeout) {
    complete(tp, absl::DeadlineExceededError(fmt::format(
                     "delivery.timeout.ms passed after {} attempts; last: {}", b.attempts + 1, std::string(why.message()))));
    return;
  }
  ++b.attempts;
  ++stats_.retries;
  b.retry_at = now + config_.client.retry_backoff;
  wake();
}

void Producer::expire(io::Instant now) {
  for (auto& [tp, q] : queues_) {
    while (!q.in_flight && !q.batches.empty() && now >= q.batches.front().created + config_.delivery_timeout) {
      complete(tp, absl::DeadlineExceededError(fmt::format(
                       "delivery.timeout.ms passed before the batch for {}-{} could be sent", tp.topic,
                       tp.partition)));
    }
  }
}

io::Task<void> Producer::init_producer_id() {
  while (true) {
    net::InitProducerIdRequest r;
    r.transactional_id = std::nullopt;
    r.transaction_timeout_ms = std::numeric_limits<int32_t>::max();
    net::Peer& peer = cluster_.any();
    absl::StatusOr<net::InitProducerIdResponse> resp =
        co_await peer.call<net::InitProducerIdResponse>(r, kInitProducerIdVersion, config_.client.request_timeout);
    if (resp.ok() && resp->error_code == 0) {
      producer_id_ = resp->producer_id;
      producer_epoch_ = resp->producer_epoch;
      need_producer_id_ = false;
      ++stats_.producer_ids;
      co_return;
    }
    if (!resp.ok()) {
      peer.reset();
      ctx_->log().debug("producer: InitProducerId: {}", resp.status().ToString());
    } else {
      ctx_->log().debug("producer: InitProducerId: {}", error_text(resp->error_code));
    }
    expire(ctx_->clock().now());
    co_await ctx_->clock().sleep_for(config_.client.retry_backoff);
  }
}

io::Task<void> Producer::sender() {
  while (true) {
    wake_.reset();
    if (config_.enable_idempotence && (producer_id_ == net::kNoProducerId || need_producer_id_) &&
        !outstanding_.empty()) {
      co_await init_producer_id();
    }
    io::Instant now = ctx_->clock().now();
    expire(now);
    io::Instant next = now + std::chrono::seconds(1);
    bool missing_leader = false;
    std::map<int32_t, std::vector<TopicPartition>> ready;
    for (auto& [tp, q] : queues_) {
      if (q.in_flight || q.batches.empty()) continue;
      Batch& b = q.batches.front();
      if (b.retry_at > now) {
        next = std::min(next, b.retry_at);
        continue;
      }
      const bool full = q.batches.size() > 1 || b.bytes >= config_.batch_size || b.built.has_value();
      if (!full && flushing_ == 0 && now < b.created + config_.linger) {
        next = std::min(next, b.created + config_.linger);
        continue;
      }
      const int32_t leader = cluster_.leader(tp);
      if (leader < 0 || cluster_.broker(leader) == nullptr) {
        missing_leader = true;
        continue;
      }
      ready[leader].push_back(tp);
    }
    for (auto& [broker, partitions] : ready) {
      const int32_t leader = broker;
      std::vector<TopicPartition> request;
      size_t bytes = 0;
      auto dispatch = [&] {
        ++in_flight_[leader];
        ++stats_.requests;
        tasks_.spawn(send_request(leader, std::move(request)));
        request.clear();
        bytes = 0;
      };
      for (const TopicPartition& tp : partitions) {
        if (in_flight_[leader] >= config_.max_in_flight) break;
        PartitionQueue& q = queues_[tp];
        Batch& b = q.batches.front();
        if (absl::Status s = prepare(tp, b); !s.ok()) {
          complete(tp, s);
          continue;
        }
        if (!request.empty() && bytes + b.built->size() > config_.max_request_size) {
          dispatch();
          if (in_flight_[leader] >= config_.max_in_flight) break;
        }
        q.in_flight = true;
        request.push_back(tp);
        bytes += b.built->size();
      }
      if (!request.empty()) dispatch();
    }
    if (missing_leader || metadata_wanted_) {
      metadata_wanted_ = false;
      std::set<std::string> topics;
      for (const auto& [tp, q] : queues_) {
        if (!q.batches.empty()) topics.insert(tp.topic);
      }
      if (!topics.empty()) {
        (void)co_await cluster_.refresh(std::vector<std::string>(topics.begin(), topics.end()));
        next = std::min(next, ctx_->clock().now() + config_.client.retry_backoff);
      }
    }
    if (wake_.is_set()) continue;
    (void)co_await io::with_deadline(ctx_->clock(), next, io::wait_for(&wake_));
  }
}

io::Task<void> Producer::send_request(int32_t broker, std::vector<TopicPartition> partitions) {
  struct InFlight {
    std::map<int32_t, int>* counts;
    int32_t broker;
    ~InFlight() { --(*counts)[broker]; }
  } in_flight{&in_flight_, broker};
  net::ProduceRequest r;
  r.acks = config_.acks;
  r.timeout_ms = static_cast<int32_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.client.request_timeout).count());
  for (const TopicPartition& tp : partitions) {
    if (r.topic_data.empty() || r.topic_data.back().name != tp.topic) r.topic_data.emplace_back().name = tp.topic;
    auto& pd = r.topic_data.back().partition_data.emplace_back();
    pd.index = tp.partition;
    pd.records = *queues_[tp].batches.front().built;
  }
  net::Peer* peer = cluster_.broker(broker);
  if (peer == nullptr) {
    metadata_wanted_ = true;
    for (const TopicPartition& tp : partitions) retry_or_fail(tp, absl::UnavailableError("leader unknown"));
    co_return;
  }
  if (config_.acks == 0) {
    absl::Status s = co_await peer->send(r, kProduceVersion, config_.client.request_timeout);
    for (const TopicPartition& tp : partitions) {
      if (s.ok()) {
        complete(tp, std::pair<int64_t, int64_t>(-1, -1));
      } else {
        retry_or_fail(tp, s);
      }
    }
    if (!s.ok()) {
      peer->reset();
      metadata_wanted_ = true;
    }
    co_return;
  }
  absl::StatusOr<net::ProduceResponse> resp =
      co_await peer->call<net::ProduceResponse>(r, kProduceVersion, config_.client.request_timeout);
  if (!resp.ok()) {
    peer->reset();
    metadata_wanted_ = true;
    for (const TopicPartition& tp : partitions) retry_or_fail(tp, resp.status());
    co_return;
  }
  for (const TopicPartition& tp : partitions) {
    const net::ProduceResponse::PartitionProduceResponse* answer = nullptr;
    for (const auto& t : resp->responses) {
      if (t.name != tp.topic) continue;
      for (const auto& p : t.partition_responses) {
        if (p.index == tp.partition) answer = &p;
      }
    }
    if (answer == nullptr) {
      retry_or_fail(tp, absl::UnavailableError("the Produce answer left the partition out"));
      continue;
    }
    const int16_t code = answer->error_code;
    using net::Error;
    if (code == 0) {
      complete(tp, std::pair<int64_t, int64_t>(answer->base_offset, answer->log_append_time_ms));
    } else if (code == net::code(Error::kDuplicateSequenceNumber)) {
      // Appended before; Kafka's producer counts it delivered (offset unknown).
      complete(tp, std::pair<int64_t, int64_t>(-1, -1));
    } else if (config_.enable_idempotence && (code == net::code(Error::kOutOfOrderSequenceNumber) ||
                                              code == net::code(Error::kUnknownProducerId) ||
                                              code == net::code(Error::kInvalidProducerEpoch))) {
      // The broker lost (or never had) this producer's earlier sequences:
      // send the batch again under a new producer id.
      Batch& b = queues_[tp].batches.front();
      b.built.reset();
      b.base_sequence = net::kNoSequence;
      need_producer_id_ = true;
      retry_or_fail(tp, error_status(code));
    } else if (net::error_retriable(code)) {
      if (is_stale_metadata(code)) metadata_wanted_ = true;
      retry_or_fail(tp, error_status(code));
    } else {
      std::string message = answer->error_message.value_or("");
      complete(tp, error_status(code, message.empty() ? fmt::format("{}-{}", tp.topic, tp.partition) : message));
    }
  }
}

}  // namespace brook::client
