// storage/segment.h
//
// Segment: one `.log` file of a partition log, holding whole record batches
// (the wire format, byte for byte) from its base offset on, plus its sparse
// offset and time indexes (storage/index.h). Files are named by the base
// offset, 20 digits zero-padded: 00000000000000000000.log, .index,
// .timeindex.
//
// Only the log's active (last) segment is appended to. Batches arrive
// validated, with their final offsets; the segment writes them with one
// vectored append and indexes them. Reads hand back io::Buffer slices of the
// bytes read from the file (no re-encoding).
//
// Recovery (recover()) scans the file batch by batch from the start, checks
// each batch's framing, CRC and offsets, rebuilds the indexes, and truncates
// the file at the first batch that fails (a torn or lost tail). A batch that
// fails its CRC is read again before it is judged, so a transient read
// corruption is not mistaken for a bad batch; an I/O error fails the
// recovery instead of truncating anything.
//
// Single event loop; owned by its Log. Methods that await must not run
// concurrently with append() or truncate_to() on the same segment (the Log
// serialises them); reads may run at any time and see the batches whose
// append completed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/disk.h"
#include "io/task.h"
#include "net/kafka/record_batch.h"
#include "storage/index.h"
#include "storage/log_config.h"
#include "storage/txn_index.h"

namespace brook::storage {

// "00000000000000000042" and friends.
std::string offset_file_name(int64_t offset, std::string_view suffix);
// The base offset of a name like "00000000000000000042.log"; nullopt unless
// the name is 20 digits followed by exactly `suffix`.
std::optional<int64_t> parse_offset_file_name(std::string_view name, std::string_view suffix);
std::string join_path(const std::string& dir, const std::string& name);

inline constexpr std::string_view kLogSuffix = ".log";
inline constexpr std::string_view kIndexSuffix = ".index";
inline constexpr std::string_view kTimeIndexSuffix = ".timeindex";
// A segment written by the cleaner before it replaces the original.
inline constexpr std::string_view kCleanedSuffix = ".cleaned";

// What the segment needs to index one appended batch.
struct BatchSummary {
  int64_t base_offset = 0;
  int64_t last_offset = 0;
  int64_t max_timestamp_ms = net::kNoTimestamp;
  uint32_t size_bytes = 0;
};

// A batch found in the file.
struct ScannedBatch {
  uint64_t position = 0;
  net::RecordBatchHeader header;
  io::Buffer bytes;  // the whole batch, or empty for header-only scans
};

// Reads the batches of a file one after another with large windowed reads.
class SegmentScanner {
 public:
  enum class Mode : uint8_t {
    kHeaders,   // headers only (bytes empty)
    kWhole,     // whole batches, unchecked
    kVerified,  // whole batches whose CRC holds
  };
  // expected_base: the base offset the first batch should have, when known
  // (kVerified confirms any other by reading it again).
  // window_bytes: how much one read fetches (0: by mode, 16 KiB for headers,
  // 1 MiB for whole batches).
  SegmentScanner(io::File& file, uint64_t position, uint64_t end, Mode mode,
                 std::optional<int64_t> expected_base = std::nullopt, size_t window_bytes = 0);

  // The next batch; std::nullopt at `end`. Errors: OutOfRange for a batch cut
  // by `end` (a partial tail), DataLoss / Unimplemented for bad framing (as
  // net::parse_batch_header reports it) or a CRC mismatch (kVerified),
  // others from the file. A framing or CRC failure is read again a few
  // times first, so a corruption on the read path is not taken for bad
  // bytes on disk.
  io::Task<absl::StatusOr<std::optional<ScannedBatch>>> next();
  uint64_t position() const { return position_; }

 private:
  io::Task<absl::StatusOr<std::optional<ScannedBatch>>> next_once();
  io::Task<absl::StatusOr<std::optional<int64_t>>> confirmed_base_offset(uint64_t position);
  io::Task<absl::Status> ensure(uint64_t from, size_t length);

  io::File* file_;
  uint64_t position_;
  uint64_t end_;
  Mode mode_;
  std::optional<int64_t> expected_base_;
  size_t window_bytes_;
  io::Buffer window_;
  uint64_t window_position_ = 0;
};

// Why a segment should roll before taking the next append.
struct RollCheck {
  uint64_t incoming_bytes = 0;
  int64_t max_timestamp_ms = net::kNoTimestamp;  // of the incoming batches
  int64_t max_offset = 0;                        // last offset incoming
  int64_t now_ms = 0;                            // wall clock
};

struct RecoverResult {
  uint64_t valid_bytes = 0;
  uint64_t truncated_bytes = 0;
  int64_t next_offset = 0;
  uint64_t batches = 0;
};

class Segment {
 public:
  // Creates an empty segment (truncating a stale file of the same name).
  static io::Task<absl::StatusOr<std::unique_ptr<Segment>>> create(io::Disk& disk,
                                                                   std::string dir,
                                                                   int64_t base_offset,
                                                                   const LogConfig& config,
                                                                   int64_t now_ms);
  // Opens an existing segment. Its contents are unknown until recover() or
  // load_indexes() runs.
  static io::Task<absl::StatusOr<std::unique_ptr<Segment>>> open(io::Disk& disk, std::string dir,
                                                                 int64_t base_offset,
                                                                 const LogConfig& config,
                                                                 int64_t now_ms);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  int64_t base_offset() const { return base_offset_; }
  uint64_t size_bytes() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The offset after the last batch (the base offset when empty). Exact for
  // the active segment and after recover(); for a segment loaded from its
  // indexes, the caller knows it from the next segment.
  int64_t next_offset() const { return next_offset_; }
  void set_next_offset(int64_t next) { next_offset_ = next; }
  // Largest timestamp of any batch (-1 when none), and that batch's last offset.
  int64_t max_timestamp_ms() const { return max_timestamp_ms_; }
  int64_t offset_of_max_timestamp() const { return offset_of_max_timestamp_; }
  const OffsetIndex& offset_index() const { return offset_index_; }
  const TimeIndex& time_index() const { return time_index_; }
  // Aborted transactions whose markers are in this segment (`.txnindex`).
  const TransactionIndex& txn_index() const { return txn_index_; }
  void append_aborted(const AbortedTxn& txn);
  void clear_txn_index();
  // Whether the `.txnindex` file failed to load (the log rebuilds it).
  bool txn_index_lost() const { return txn_index_lost_; }
  uint64_t synced_bytes() const { return synced_size_; }
  io::File& file() { return *log_; }
  const std::string& dir() const { return dir_; }

  bool should_roll(const LogConfig& config, const RollCheck& check) const;

  // Appends whole batches at the end. REQUIRES: batches in offset order
  // after next_offset(), `bytes` exactly their concatenation.
  io::Task<absl::Status> append(std::span<const BatchSummary> batches, io::BufferChain bytes);

  // The first batch whose last offset >= offset (header only); nullopt when
  // every batch ends before it.
  io::Task<absl::StatusOr<std::optional<ScannedBatch>>> find_batch(int64_t offset);

  // Whole batches from `position`: at most max_bytes, except that the first
  // batch is returned whole when min_one_batch; only batches whose last
  // offset is below max_offset_exclusive.
  io::Task<absl::StatusOr<io::Buffer>> read(uint64_t position, size_t max_bytes,
                                            int64_t max_offset_exclusive, bool min_one_batch);

  // Scans and validates every batch (see the header comment), calling
  // `visit` for each valid one in order.
  // Batches from rewrite_from_offset on are written again (see segment.cc):
  // pass the recovery point.
  using BatchVisitor = std::function<void(const ScannedBatch&)>;
  io::Task<absl::StatusOr<RecoverResult>> recover(const BatchVisitor& visit,
                                                  int64_t rewrite_from_offset);

  // Loads the index files, checking them against the log; rebuilds them by
  // a scan when they are missing or fail. Returns DataLoss when the scan
  // finds an invalid batch (the caller then recovers the segment).
  io::Task<absl::Status> load_indexes();

  // Removes every batch from the one containing `offset` on. Returns the
  // bytes removed. The truncation is durable when this returns.
  io::Task<absl::StatusOr<uint64_t>> truncate_to(int64_t offset);

  // Removes the index files (the caller syncs the directory).
  io::Task<absl::Status> remove_index_files();
  // Rebuilds the offset and time indexes from a verified scan (DataLoss on a
  // bad batch).
  io::Task<absl::Status> rebuild_indexes() { return rebuild_indexes_by_scan(); }

  // Makes the log file durable.
  io::Task<absl::Status> sync();
  // Starts the device write of the bytes appended since the last call (at
  // least kWritebackMinBytes of them; whole pages only), without waiting
  // for it: io::File::start_writeback. Dirty data then never piles up in
  // the page cache, so neither the kernel's writeback nor the sync at a
  // roll stalls appends for long. A segment busy enough to get here also
  // keeps kPreallocateBytes of blocks reserved past its end
  // (io::File::preallocate) until it becomes inactive. Errors are the next
  // datasync's to report.
  io::Task<void> start_writeback();
  static constexpr uint64_t kWritebackMinBytes = uint64_t{1} << 20;
  static constexpr uint64_t kPreallocateBytes = uint64_t{64} << 20;
  // Gives back the blocks reserved past the end (at a roll, at close).
  io::Task<void> release_preallocation();
  // Adds the final time index entry (Kafka's onBecomeInactiveSegment).
  void on_become_inactive();
  // Writes the index files (`.index`, `.timeindex`, and `.txnindex` when
  // there are aborted transactions) and syncs them (after roll, at clean
  // close).
  io::Task<absl::Status> persist_indexes();
  bool indexes_persisted() const { return indexes_persisted_; }

  io::Task<absl::Status> close();
  // Removes the segment's files (the caller syncs the directory). The log
  // file stays open, as an unlinked file stays readable: a read under way
  // ends with the bytes it started on, and the file closes with the last
  // holder of the segment (Kafka delays the deletion instead,
  // file.delete.delay.ms).
  io::Task<absl::Status> remove_files();

 private:
  Segment(io::Disk& disk, std::string dir, int64_t base_offset, const LogConfig& config,
          std::unique_ptr<io::File> log, int64_t now_ms);
  void index_batch(uint64_t position, const BatchSummary& batch);
  void reset_indexes();
  bool batch_in_order(const net::RecordBatchHeader& h, int64_t expected_base) const;

  io::Task<absl::Status> write_index_file(std::string_view suffix, io::Buffer bytes);
  io::Task<absl::Status> check_index_entry(OffsetPosition entry);
  io::Task<absl::Status> rebuild_indexes_by_scan();
  io::Task<absl::StatusOr<io::Buffer>> read_index_file(std::string_view suffix);
  io::Task<absl::Status> load_index_files();
  io::Task<absl::Status> load_txn_index();
  io::Task<absl::StatusOr<io::Buffer>> read_index_file_twice(std::string_view suffix);
  io::Task<absl::StatusOr<std::optional<ScannedBatch>>> find_batch_from(uint64_t position,
                                                                        int64_t offset);
  io::Task<absl::Status> rewrite(uint64_t from, uint64_t to);
  // find_batch, repeated until two scans agree.
  io::Task<absl::StatusOr<std::optional<ScannedBatch>>> find_batch_confirmed(int64_t offset);

  io::Disk* disk_;
  std::string dir_;
  int64_t base_offset_;
  uint64_t index_interval_bytes_;
  size_t offset_entries_max_;
  size_t time_entries_max_;
  std::unique_ptr<io::File> log_;
  OffsetIndex offset_index_;
  TimeIndex time_index_;
  TransactionIndex txn_index_;
  bool txn_index_lost_ = false;
  uint64_t size_ = 0;
  uint64_t synced_size_ = 0;
  uint64_t writeback_started_ = 0;  // start_writeback() covered [0, this)
  uint64_t preallocated_ = 0;       // blocks reserved up to here
  bool inactive_ = false;           // on_become_inactive() ran
  int64_t next_offset_;
  int64_t max_timestamp_ms_ = net::kNoTimestamp;
  int64_t offset_of_max_timestamp_ = -1;
  int64_t rolling_base_timestamp_ms_ = net::kNoTimestamp;
  int64_t created_ms_;
  uint64_t bytes_since_index_entry_ = 0;
  bool indexes_persisted_ = false;
};

}  // namespace brook::storage
