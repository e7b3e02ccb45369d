// net/client/consumer.h
//
// A Kafka consumer on the io interfaces, with manual assignment: assign(),
// seek(), poll(), as the Java consumer's assign/seek/poll. (Group
// membership, subscribe() and committed offsets belong to the group
// coordinator.)
//
// - A partition's position is the offset of the next record poll() returns.
//   Without one (just assigned, or after seek_to_beginning/seek_to_end, or
//   after OFFSET_OUT_OF_RANGE) poll() first looks it up with ListOffsets as
//   auto.offset.reset says: earliest, latest, or none (poll() then fails
//   with the partition named). OFFSET_OUT_OF_RANGE resets only when it
//   comes twice for the same offset with a metadata refresh between, asked
//   of another broker than the one that answered (when there is one): a
//   broker that lost leadership without knowing it yet may be behind, and
//   its own metadata still names it.
// - poll() fetches from every leader of the assigned partitions at once,
//   one Fetch per broker, in an incremental fetch session per broker
//   (KIP-227): after the first request only the partitions whose fetch
//   offset changed are named, and those no longer wanted are forgotten. A
//   broker that lost the session gets a full request next.
// - Fetches carry the leader epoch known from metadata (KIP-320): a stale
//   leader answers FENCED_LEADER_EPOCH or NOT_LEADER_OR_FOLLOWER and the
//   consumer refreshes metadata and fetches from the new leader.
// - Records come out in offset order per partition; control batches
//   (transaction markers) are skipped; under read_committed, so are the
//   batches of aborted transactions (by the fetch's aborted-transaction
//   list, as Kafka's consumer does); with check.crcs every batch's CRC is
//   verified, and a corrupt batch fails poll() (the position stays before
//   it).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/context.h"
#include "io/task.h"
#include "io/time.h"
#include "net/client/admin.h"
#include "net/client/cluster.h"
#include "net/kafka/messages/fetch_response.h"
#include "net/kafka/record_batch.h"

namespace brook::client {

enum class OffsetReset { kEarliest, kLatest, kNone };

struct ConsumerConfig {
  ClientOptions client;
  // fetch.max.wait.ms / fetch.min.bytes / fetch.max.bytes /
  // max.partition.fetch.bytes
  io::Duration fetch_max_wait = std::chrono::milliseconds(500);
  int32_t fetch_min_bytes = 1;
  int32_t fetch_max_bytes = 52428800;
  int32_t max_partition_fetch_bytes = 1048576;
  // isolation.level
  IsolationLevel isolation = IsolationLevel::kReadUncommitted;
  // auto.offset.reset
  OffsetReset auto_offset_reset = OffsetReset::kLatest;
  // check.crcs
  bool check_crcs = true;
  // max.poll.records
  size_t max_poll_records = 500;
  // Incremental fetch sessions (off: every Fetch is a full sessionless one).
  bool fetch_sessions = true;
};

struct ConsumerRecord {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  int64_t timestamp_ms = -1;
  net::TimestampType timestamp_type = net::TimestampType::kCreateTime;
  int32_t leader_epoch = -1;
  std::optional<io::Buffer> key;
  std::optional<io::Buffer> value;
  std::vector<net::RecordHeader> headers;
};

struct ConsumerStats {
  uint64_t fetches = 0;
  uint64_t incremental_fetches = 0;
  uint64_t session_resets = 0;
  uint64_t records = 0;
  uint64_t bytes = 0;  // record batch bytes fetched
  uint64_t offset_resets = 0;
};

class Consumer {
 public:
  Consumer(io::Context& ctx, ConsumerConfig config);
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // Replaces the assignment. Partitions kept keep their positions.
  void assign(std::vector<TopicPartition> partitions);
  const std::vector<TopicPartition>& assignment() const { return assignment_; }
  // The next poll() returns records of `tp` from `offset` on.
  void seek(const TopicPartition& tp, int64_t offset);
  void seek_to_beginning(const std::vector<TopicPartition>& partitions);
  void seek_to_end(const std::vector<TopicPartition>& partitions);
  // The position, when known.
  std::optional<int64_t> position(const TopicPartition& tp) const;
  // The high watermark (or last stable offset under read_committed) from the
  // partition's latest fetch answer, when there was one.
  std::optional<int64_t> end_offset_seen(const TopicPartition& tp) const;

  // Records of the assigned partitions: returns once some are there or
  // `timeout` has passed (then an empty batch). Errors: OFFSET_OUT_OF_RANGE
  // with auto.offset.reset=none, corrupt batches (DataLoss).
  io::Task<absl::StatusOr<std::vector<ConsumerRecord>>> poll(io::Duration timeout);

  Cluster& cluster() { return cluster_; }
  const ConsumerStats& stats() const { return stats_; }

 private:
  struct PartitionState {
    std::optional<int64_t> position;      // next record poll() returns
    std::optional<int64_t> fetch_offset;  // next offset to fetch
    std::optional<OffsetReset> reset;     // a position lookup is due
    std::optional<int64_t> end_offset;
    std::optional<int64_t> out_of_range_at;  // OFFSET_OUT_OF_RANGE once here
    size_t buffered = 0;                     // its records in buffered_
  };
  // Removes the partition's buffered records.
  void drop_buffered(const TopicPartition& tp, PartitionState& st);
  struct SessionPartition {
    int64_t fetch_offset = 0;
    int32_t leader_epoch = -1;
  };
  struct Session {
    int32_t id = 0;
    int32_t epoch = 0;  // 0: the next request opens a session
    std::map<TopicPartition, SessionPartition> partitions;
  };

  // Forgets the positions of `partitions`: the next poll() looks them up.
  void reset_to(const std::vector<TopicPartition>& partitions, OffsetReset where);
  io::Task<absl::Status> reset_positions();
  io::Task<absl::Status> fetch_from(int32_t broker, std::vector<TopicPartition> partitions, io::Duration wait);
  // Buffers the fetched records past the fetch offset. `aborted` (the
  // fetch's aborted transactions) is given under read_committed only.
  absl::Status take_records(const TopicPartition& tp, const io::Buffer& records, int64_t high_watermark,
                            const std::vector<net::FetchResponse::AbortedTransaction>* aborted);
  std::vector<ConsumerRecord> drain();

  io::Context* ctx_;
  ConsumerConfig config_;
  Cluster cluster_;
  std::vector<TopicPartition> assignment_;
  std::map<TopicPartition, PartitionState> state_;
  std::map<int32_t, Session> sessions_;
  std::deque<ConsumerRecord> buffered_;
  bool metadata_wanted_ = true;
  // A broker that answered OFFSET_OUT_OF_RANGE as leader: the metadata
  // refresh before the second try asks another broker, since a leader that
  // lost leadership without knowing it also answers metadata that still
  // names it.
  std::optional<int32_t> metadata_not_from_;
  ConsumerStats stats_;
};

}  // namespace brook::client
