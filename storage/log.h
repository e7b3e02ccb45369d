// storage/log.h
//
// Log: one partition replica's log in its directory (`<topic>-<partition>/`):
// an ordered run of segments (storage/segment.h), the last of which is
// active. Kafka's UnifiedLog and LocalLog in one class.
//
// Offsets. log_start_offset() <= high_watermark() <= log_end_offset().
// The log end offset (LEO) is the offset the next appended record gets; the
// high watermark (HW) is set by replication; the last stable offset (LSO)
// is the HW or the first offset of the oldest open transaction, whichever is
// lower. The recovery point is the offset below which every batch is durable.
//
// Appends. append_as_leader() validates a client's batches (Kafka's error
// codes for the client: CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE,
// INVALID_TIMESTAMP, UNSUPPORTED_FOR_MESSAGE_FORMAT, and the idempotence
// errors of storage/producer_state.h), assigns offsets (and LogAppendTime),
// checks producer state, and writes all its batches with one vectored write;
// append_as_follower() keeps the leader's offsets. Appends are serialised.
// With FlushMode::kBeforeAck an append returns only once it is durable;
// datasyncs are shared by every append waiting (group commit).
//
// Reads. read() returns whole batches as io::Buffer slices of the file bytes,
// bounded by the LEO, the HW or the LSO.
//
// Durability. Writes are durable at flush(); a roll flushes the finished
// segment; truncations and deletions are durable when they return. After a
// crash, open() trusts the segments wholly below the recovery point (their
// index files are checked, and rebuilt when wrong) and recovers every later
// one (storage/segment.h), truncating at the first bad batch and deleting
// the segments after it.
//
// Failure. Any I/O error while writing (EIO, ENOSPC, a failed datasync) takes
// the log offline: every later call fails with that error (Kafka's
// KAFKA_STORAGE_ERROR) and nothing more is written; recovery at the next open
// sorts out what was durable.
//
// Single event loop. The Log outlives every task using it; close() it
// before destroying it to keep its index files.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/clock.h"
#include "io/disk.h"
#include "io/sync.h"
#include "io/task.h"
#include "net/kafka/errors.h"
#include "storage/compaction.h"
#include "storage/index.h"
#include "storage/leader_epoch.h"
#include "storage/log_config.h"
#include "storage/producer_state.h"
#include "storage/segment.h"
#include "storage/txn_index.h"

namespace brook::storage {

struct LogOptions {
  std::string dir;  // relative to the Disk's root
  LogConfig config;
  // From the log directory's checkpoint files (0 when unknown).
  int64_t recovery_point = 0;
  int64_t log_start_offset = 0;
  int64_t high_watermark = 0;
};

struct RecordError {
  int32_t batch_index = 0;
  int32_t record_index = -1;  // -1: the batch as a whole
  std::string message;
};

struct AppendResult {
  net::Error error = net::Error::kNone;
  std::string error_message;
  std::vector<RecordError> record_errors;
  // Offsets given to the appended records (-1 when nothing was appended).
  int64_t first_offset = -1;
  int64_t last_offset = -1;
  // The stamp of LogAppendTime topics, else -1.
  int64_t log_append_time_ms = -1;
  int64_t log_start_offset = 0;
  int64_t max_timestamp_ms = -1;
  int64_t offset_of_max_timestamp = -1;
  uint32_t batches = 0;
  uint64_t records = 0;
  uint64_t bytes = 0;
  // A retry of batches already in the log (idempotent producer): the
  // offsets are those of the first append, and nothing was written. With
  // FlushMode::kBeforeAck those offsets are durable when it is returned.
  bool duplicate = false;

  bool ok() const { return error == net::Error::kNone; }
};

struct CompactionResult {
  size_t segments_cleaned = 0;
  int64_t records_removed = 0;
  uint64_t bytes_before = 0;
  uint64_t bytes_after = 0;
  // The offset the pass cleaned up to (the next pass's first dirty offset).
  int64_t cleaned_up_to = 0;
};

enum class ReadBound : uint8_t {
  kLogEnd,         // followers: everything appended
  kHighWatermark,  // read_uncommitted consumers
  kCommitted,      // read_committed consumers: the last stable offset
};

struct ReadResult {
  net::Error error = net::Error::kNone;  // OFFSET_OUT_OF_RANGE
  // Whole batches starting with the one that holds the fetch offset.
  io::Buffer records;
  int64_t log_start_offset = 0;
  int64_t high_watermark = 0;
  int64_t last_stable_offset = 0;
  int64_t log_end_offset = 0;
  // ReadBound::kCommitted only: the aborted transactions overlapping the
  // records returned, for the consumer to skip (Fetch's AbortedTransactions).
  std::vector<AbortedTxn> aborted_transactions;
};

class Log {
 public:
  // Opens (creating when missing) and recovers the log in options.dir.
  static io::Task<absl::StatusOr<std::unique_ptr<Log>>> open(io::Disk& disk,
                                                             const io::Clock& clock,
                                                             LogOptions options);
  ~Log();
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  // A client's (or a coordinator's) batches. Client-caused failures are in
  // the result; an I/O failure is the status (and the log is offline).
  io::Task<absl::StatusOr<AppendResult>> append_as_leader(io::Buffer records,
                                                          int32_t leader_epoch,
                                                          AppendOrigin origin = AppendOrigin::kClient);
  // Batches fetched from the leader, offsets as they are. With
  // FlushMode::kBeforeAck they are durable before this returns too (unless
  // `sync` is false: the caller then flushes before it reports them), so
  // the follower's next fetch offset never counts an unsynced record.
  io::Task<absl::StatusOr<AppendResult>> append_as_follower(io::Buffer records, bool sync = true);
  // A new leader's epoch starts at the log end (Kafka assigns it when the
  // replica becomes leader, before any append), so that a follower holding
  // a newer epoch's records learns where the logs diverge. No-op unless
  // `epoch` is above the latest one. Returns the log end it found: appends
  // and truncations begun before (a follower's, still under way when the
  // replica became leader) are done by then, so this, not the log end when
  // it was called, is where the replica's leadership starts.
  io::Task<absl::StatusOr<int64_t>> assign_leader_epoch(int32_t epoch);

  // Whole batches from the one holding `offset`: at most max_bytes except
  // that the first batch comes whole when min_one_batch. OFFSET_OUT_OF_RANGE
  // below the log start or past the LEO; empty at the bound.
  io::Task<absl::StatusOr<ReadResult>> read(int64_t offset, size_t max_bytes, ReadBound bound,
                                            bool min_one_batch);

  // Makes every batch below `offset` durable (at least), and advances the
  // recovery point. Concurrent callers share datasyncs.
  io::Task<absl::Status> flush(int64_t offset);
  io::Task<absl::Status> flush() { return flush(log_end_offset()); }
  // Starts a new active segment at the LEO (no-op when the active segment
  // is empty).
  io::Task<absl::Status> roll();
  // Removes every record at or after `offset` (replication's divergence
  // handling). When offset >= LEO no record goes, but a leader epoch that
  // starts at the log end (with no record) does.
  io::Task<absl::Status> truncate_to(int64_t offset);
  // Removes everything and restarts the log at `offset`.
  io::Task<absl::Status> truncate_fully_and_start_at(int64_t offset);
  // DeleteRecords: raises the log start offset (never past the HW).
  // OFFSET_OUT_OF_RANGE when offset > HW.
  io::Task<absl::StatusOr<net::Error>> delete_records_before(int64_t offset);
  // Retention: deletes whole segments past retention.ms / retention.bytes
  // or wholly below the log start offset; returns how many.
  io::Task<absl::StatusOr<size_t>> delete_old_segments();
  // cleanup.policy=compact: one cleaning pass (storage/compaction.h) over
  // the segments below the first uncleanable offset (the active segment,
  // the last stable offset, min.compaction.lag.ms), keeping the latest
  // record of every key; a no-op for logs that are not compacted. Each
  // cleaned segment replaces its original atomically (written as
  // `<base>.log.cleaned`, then renamed over `<base>.log`). Appends wait
  // while a pass runs. offset_map_bytes bounds the key map; a pass that
  // fills it cleans up to where the map reaches.
  io::Task<absl::StatusOr<CompactionResult>> compact(size_t offset_map_bytes = size_t{64} << 20);
  // Bytes past the cleaner's position over all bytes (Kafka's dirty ratio).
  double dirty_ratio() const;
  // ListOffsets by timestamp: the first record with timestamp >= ts (and
  // its timestamp); nullopt when there is none.
  io::Task<absl::StatusOr<std::optional<TimestampOffset>>> offset_for_timestamp(int64_t ts);
  // Runs the flush.ms policy: flushes when the last flush is older.
  io::Task<absl::Status> maybe_flush_by_time();
  // Starts the device write of the active segment's newest bytes
  // (Segment::start_writeback); call it every few hundred milliseconds.
  io::Task<void> start_writeback();
  // Flushes, writes the index files of every segment and closes the files;
  // yields the error that may have lost unflushed records. Every later
  // operation fails with "log ... is closed" (offline()), and a second
  // close() yields the first one's result.
  io::Task<absl::Status> close();

  int64_t log_start_offset() const { return log_start_offset_; }
  int64_t log_end_offset() const { return log_end_offset_; }
  int64_t high_watermark() const { return high_watermark_; }
  int64_t last_stable_offset() const;
  int64_t recovery_point() const { return recovery_point_; }
  // Clamped to [log start, LEO].
  void set_high_watermark(int64_t offset);
  uint64_t size_bytes() const;
  size_t segment_count() const { return segments_.size(); }
  const LogConfig& config() const { return config_; }
  void set_config(const LogConfig& config) { config_ = config; }
  const std::string& dir() const { return dir_; }
  const ProducerStateManager& producer_state() const { return producers_; }
  // The leader epochs of the log's records (`leader-epoch-checkpoint`).
  const LeaderEpochCache& leader_epochs() const { return epochs_; }
  // OffsetsForLeaderEpoch: the largest epoch <= `epoch` and where it ends.
  EpochEndOffset end_offset_for_epoch(int32_t epoch) const {
    return epochs_.end_offset_for(epoch, log_end_offset_);
  }

  // Segments by base offset (tests and the cleaner).
  const std::map<int64_t, std::shared_ptr<Segment>>& segments() const { return segments_; }

  bool offline() const { return !failure_.ok(); }
  const absl::Status& failure() const { return failure_; }

 private:
  Log(io::Disk& disk, const io::Clock& clock, LogOptions options);
  io::Task<absl::Status> load();
  io::Task<absl::Status> load_segments(const std::vector<int64_t>& bases);
  io::Task<absl::Status> remove_segments_from(std::map<int64_t, std::shared_ptr<Segment>>::iterator it);
  io::Task<absl::Status> roll_locked();
  io::Task<absl::StatusOr<AppendResult>> append_locked(io::Buffer records, int32_t leader_epoch,
                                                       AppendOrigin origin);
  io::Task<absl::Status> truncate_locked(int64_t offset);
  io::Task<absl::Status> truncate_fully_locked(int64_t offset);
  // A truncation changes the segment map with flushes held off: a flush
  // under way ends first (it may be syncing segments about to go, or look
  // for the active segment while there is none), and flushes asked for
  // meanwhile wait as for another flush. False: the log went offline while
  // it waited.
  io::Task<bool> hold_off_flushes();
  void release_flushes();
  // A full truncation's work, with flushes held off: every segment
  // removed, one empty segment at `offset`, producer state and leader
  // epochs reset. Does not fail the log.
  io::Task<absl::Status> replace_segments(int64_t offset);
  // Rebuilds producer state from the newest usable snapshot and the log;
  // the transaction indexes of segments from txn_rebuild_from on are
  // rebuilt on the way.
  io::Task<absl::Status> rebuild_producer_state(int64_t txn_rebuild_from = INT64_MAX);
  io::Task<absl::Status> replay_producer_state(int64_t from, int64_t to, int64_t txn_rebuild_from);
  io::Task<absl::Status> load_leader_epochs();
  int64_t first_uncleanable_offset() const;
  io::Task<absl::StatusOr<io::Buffer>> read_segment_bytes(Segment& segment);
  io::Task<absl::Status> replace_segment(const std::shared_ptr<Segment>& old, io::Buffer cleaned,
                                         const std::vector<AbortedTxnRange>& aborted);
  io::Task<absl::Status> write_leader_epochs();
  // Applies a batch's completed transaction: the aborted ones go to the
  // transaction index of `segment` (when given).
  void complete_transaction(const CompletedTxn& txn, Segment* segment);
  void collect_aborted(int64_t fetch_offset, int64_t upper_bound,
                       std::vector<AbortedTxn>* out) const;
  static int64_t last_offset_of(const io::Buffer& records);
  // Checks bytes read for `offset` from a batch based at first_base: CRCs,
  // the offsets in order (compaction leaves gaps, never overlaps), the
  // leader epochs against the epoch cache. DataLoss names the first fault.
  // *believable says whether the only faults are ones a correct log can
  // show, to be believed when two reads agree: a leader epoch that
  // disagrees with the cache, or a first batch that starts after `offset`
  // (a compacted gap, or a batch skipped on a corrupted header).
  absl::Status check_read(const io::Buffer& records, int64_t offset, int64_t first_base,
                          bool* believable) const;
  io::Task<absl::Status> delete_segments_before(int64_t base_offset_end);
  absl::Status fail(absl::Status status);
  Segment& active() { return *segments_.rbegin()->second; }
  const Segment& active() const { return *segments_.rbegin()->second; }
  int64_t now_ms() const;
  int64_t bound_offset(ReadBound bound) const;

  io::Disk* disk_;
  const io::Clock* clock_;
  std::string dir_;
  LogConfig config_;
  std::map<int64_t, std::shared_ptr<Segment>> segments_;
  int64_t log_start_offset_ = 0;
  int64_t log_end_offset_ = 0;
  int64_t high_watermark_ = 0;
  int64_t recovery_point_ = 0;
  int64_t unflushed_records_ = 0;
  io::Instant last_flush_{};
  bool dir_dirty_ = false;
  bool flushing_ = false;
  io::WaitList flush_done_;
  io::Mutex append_mutex_;
  ProducerStateManager producers_;
  LeaderEpochCache epochs_;
  // The first segment whose transaction index must be rebuilt at load.
  int64_t txn_rebuild_from_ = INT64_MAX;
  // The first offset the cleaner has not cleaned (Kafka's cleaner
  // checkpoint; kept in memory, so a restart cleans from the start).
  int64_t cleaner_position_ = 0;
  absl::Status failure_;
  // close() was called, and what it yielded (a second call yields it again).
  bool closed_ = false;
  absl::Status close_status_;
};

}  // namespace brook::storage
