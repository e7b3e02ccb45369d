// net/client/producer.h
//
// A Kafka producer on the io interfaces, with the Java producer's settings
// and semantics:
//
// - Records are partitioned (an explicit partition; else murmur2 of the key,
//   as Kafka's default partitioner; else the sticky partition of KIP-480,
//   which moves on whenever its batch is sent) and appended to a batch per
//   partition. A batch is sent when it reaches batch.size, when linger.ms
//   has passed since its first record, or on flush().
// - A sender task gathers the ready batches of every partition whose leader
//   it knows into one Produce request per broker, at most
//   max.in.flight.requests.per.connection requests per broker at a time and
//   at most one batch per partition at a time: a partition's records are
//   appended in the order they were sent, retries included.
// - Retriable errors (a moved leader, NOT_ENOUGH_REPLICAS, timeouts, broken
//   connections) retry the same batch after retry.backoff.ms, refreshing
//   metadata when the leader may have moved, until delivery.timeout.ms has
//   passed since the batch's first record.
// - enable.idempotence: InitProducerId gives a producer id; each batch
//   carries a sequence number per partition, so a retried batch the broker
//   already appended is not appended twice. A batch that fails for good
//   leaves its sequence unknown to the broker: the producer then takes a
//   new producer id (and every partition starts again at sequence 0), as
//   Kafka's producer bumps its epoch.
// - acks=0 gets no answer: each record is reported delivered with offset -1
//   once its request is written.
//
// Each record's outcome is reported exactly once, through the callback
// given to send() or as the result of produce(). Destroying the producer
// cancels what is in flight without reporting; flush() first when that
// matters.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/context.h"
#include "io/scope.h"
#include "io/sync.h"
#include "io/task.h"
#include "io/time.h"
#include "net/client/cluster.h"
#include "net/codec/compression.h"
#include "net/kafka/record_batch.h"

namespace brook::client {

struct ProducerConfig {
  ClientOptions client;
  // acks: 0, 1 or -1 (all).
  int16_t acks = -1;
  // enable.idempotence (requires acks=-1, as in Kafka).
  bool enable_idempotence = true;
  // batch.size: a batch is sent once its records reach this many bytes.
  size_t batch_size = 16384;
  // linger.ms
  io::Duration linger = std::chrono::milliseconds(5);
  // compression.type
  codec::Compression compression = codec::Compression::kNone;
  int compression_level = codec::kCompressionLevelDefault;
  // delivery.timeout.ms: from a record's send() to its final outcome.
  io::Duration delivery_timeout = std::chrono::seconds(120);
  // max.in.flight.requests.per.connection (per broker here).
  int max_in_flight = 5;
  // max.request.size: the largest record (and Produce request) sent.
  size_t max_request_size = 1 << 20;
  // buffer.memory: send() waits while this many bytes are unacknowledged.
  size_t buffer_memory = 32 << 20;
  // max.block.ms: how long send() waits for a topic's metadata.
  io::Duration max_block = std::chrono::seconds(60);
};

struct ProducerRecord {
  std::string topic;
  std::optional<int32_t> partition;
  std::optional<io::Buffer> key;
  std::optional<io::Buffer> value;
  std::vector<net::RecordHeader> headers;
  // CreateTime; the producer's wall clock when not given.
  std::optional<int64_t> timestamp_ms;
};

struct RecordMetadata {
  std::string topic;
  int32_t partition = -1;
  int64_t offset = -1;        // -1 with acks=0
  int64_t timestamp_ms = -1;  // the log append time when the topic uses it
};

using DeliveryCallback = std::function<void(const absl::StatusOr<RecordMetadata>&)>;

struct ProducerStats {
  uint64_t records_sent = 0;    // reported delivered
  uint64_t records_failed = 0;  // reported failed
  uint64_t requests = 0;        // Produce requests sent
  uint64_t retries = 0;         // batches sent again
  uint64_t producer_ids = 0;    // InitProducerId answers taken
};

// Kafka's murmur2 (the Java client's Utils.murmur2) and the partition the
// default partitioner gives a key: (murmur2(key) & 0x7fffffff) % partitions.
int32_t murmur2(std::span<const std::byte> data);
int32_t partition_for_key(std::span<const std::byte> key, int32_t partitions);

class Producer {
 public:
  Producer(io::Context& ctx, ProducerConfig config);
  ~Producer();
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // Queues `record`; `done` runs once with its outcome. Waits while
  // buffer.memory is used up and while the topic's metadata is unknown (up
  // to max.block.ms). An error here (unknown topic, a record over
  // max.request.size, a partition out of range) is also reported to `done`.
  io::Task<absl::Status> send(ProducerRecord record, DeliveryCallback done);
  // send() and wait for the outcome.
  io::Task<absl::StatusOr<RecordMetadata>> produce(ProducerRecord record);
  // Sends every queued record at once and waits until all of them (and those
  // queued meanwhile before it returns) have their outcome.
  io::Task<void> flush();

  // Records queued or in flight.
  size_t pending() const { return outstanding_.size(); }
  const ProducerStats& stats() const { return stats_; }
  Cluster& cluster() { return cluster_; }

 private:
  struct Pending {
    net::NewRecord record;
    DeliveryCallback done;
    size_t bytes = 0;
    uint64_t id = 0;  // in send() order
  };
  struct Batch {
    std::vector<Pending> records;
    size_t bytes = 0;
    io::Instant created;
    io::Instant retry_at;
    int attempts = 0;
    // Set when first sent (idempotence: kept across retries).
    int64_t producer_id = net::kNoProducerId;
    int16_t producer_epoch = net::kNoProducerEpoch;
    int32_t base_sequence = net::kNoSequence;
    std::optional<io::Buffer> built;
  };
  struct PartitionQueue {
    std::deque<Batch> batches;
    bool in_flight = false;
    int64_t sequence_producer_id = net::kNoProducerId;
    int32_t next_sequence = 0;
  };

  io::Task<void> sender();
  io::Task<void> send_request(int32_t broker, std::vector<TopicPartition> partitions);
  io::Task<void> init_producer_id();
  io::Task<absl::Status> await_topic(const std::string& topic);
  absl::Status prepare(const TopicPartition& tp, Batch& batch);
  // The batch at the front of `tp`'s queue is done: report every record.
  void complete(const TopicPartition& tp, absl::StatusOr<std::pair<int64_t, int64_t>> result);
  void retry_or_fail(const TopicPartition& tp, const absl::Status& why);
  void expire(io::Instant now);
  int32_t choose_partition(const ProducerRecord& record, int32_t partitions);
  void wake() { wake_.set(); }

  io::Context* ctx_;
  ProducerConfig config_;
  Cluster cluster_;
  std::map<TopicPartition, PartitionQueue> queues_;
  std::map<std::string, int32_t, std::less<>> sticky_;
  std::map<int32_t, int> in_flight_;  // requests per broker
  uint64_t next_record_id_ = 0;
  std::set<uint64_t> outstanding_;  // ids of the records without an outcome
  size_t buffered_bytes_ = 0;
  int flushing_ = 0;
  bool metadata_wanted_ = false;
  int64_t producer_id_ = net::kNoProducerId;
  int16_t producer_epoch_ = net::kNoProducerEpoch;
  bool need_producer_id_ = false;
  ProducerStats stats_;
  io::Event wake_;
  io::WaitList progress_;  // records completed: send() and flush() re-check
  io::TaskScope tasks_;
};

}  // namespace brook::client
