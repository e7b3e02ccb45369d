// storage/segment.cc
#include "storage/segment.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <utility>

#include "fmt/format.h"
#include "io/assert.h"
#include "io/status.h"
#include "net/codec/endian.h"

namespace brook::storage {
namespace {

// Reads of a scan fetch this much at a time: whole-batch scans (recovery,
// replay) read big windows; header scans (lookups) small ones, since a
// lookup lands at most index.interval.bytes before its batch.
constexpr size_t kScanWindowBytes = 1 << 20;
constexpr size_t kHeaderScanWindowBytes = 16 << 10;
// A batch that fails its CRC is read again this many times before recovery
// believes the bytes on disk are bad.
constexpr int kCrcRereads = 3;
constexpr int64_t kRelativeOffsetMax = std::numeric_limits<int32_t>::max();

bool is_framing_error(const absl::Status& s) {
  return s.code() == absl::StatusCode::kOutOfRange || s.code() == absl::StatusCode::kDataLoss ||
         s.code() == absl::StatusCode::kUnimplemented;
}

}  // namespace

std::string offset_file_name(int64_t offset, std::string_view suffix) {
  BROOK_ASSERT(offset >= 0);
  return fmt::format("{:020d}{}", offset, suffix);
}

std::optional<int64_t> parse_offset_file_name(std::string_view name, std::string_view suffix) {
  if (name.size() != 20 + suffix.size() || !name.ends_with(suffix)) return std::nullopt;
  int64_t offset = 0;
  const char* first = name.data();
  auto [end, ec] = std::from_chars(first, first + 20, offset);
  if (ec != std::errc() || end != first + 20 || offset < 0) return std::nullopt;
  return offset;
}

std::string join_path(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

// --- SegmentScanner ---------------------------------------------------------

SegmentScanner::SegmentScanner(io::File& file, uint64_t position, uint64_t end, Mode mode,
                               std::optional<int64_t> expected_base, size_t window_bytes)
    : file_(&file),
      position_(position),
      end_(end),
      mode_(mode),
      expected_base_(expected_base),
      window_bytes_(window_bytes != 0                ? window_bytes
                    : mode == Mode::kHeaders ? kHeaderScanWindowBytes
                                             : kScanWindowBytes) {}

io::Task<absl::Status> SegmentScanner::ensure(uint64_t from, size_t length) {
  if (from >= window_position_ && from + length <= window_position_ + window_.size()) {
    co_return absl::OkStatus();
  }
  const size_t want = static_cast<size_t>(
      std::min<uint64_t>(std::max(length, window_bytes_), end_ - from));
  CO_ASSIGN_OR_RETURN(io::Buffer bytes, co_await file_->read_at(from, want));
  window_ = std::move(bytes);
  window_position_ = from;
  if (window_.size() < length) {
    co_return absl::OutOfRangeError(
        fmt::format("segment file ends at {} inside a batch", from + window_.size()));
  }
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<std::optional<ScannedBatch>>> SegmentScanner::next_once() {
  if (position_ >= end_) co_return std::nullopt;
  const uint64_t left = end_ - position_;
  if (left < net::kBatchHeaderBytes) {
    co_return absl::OutOfRangeError(
        fmt::format("{} bytes at position {} are less than a batch header", left, position_));
  }
  CO_RETURN_IF_ERROR(co_await ensure(position_, net::kBatchHeaderBytes));
  const size_t at = static_cast<size_t>(position_ - window_position_);
  CO_ASSIGN_OR_RETURN(
      net::RecordBatchHeader header,
      net::parse_batch_header(window_.span().subspan(at), net::BatchExtent::kHeaderOnly));
  const uint64_t size = header.size_bytes();
  if (size > left) {
    co_return absl::OutOfRangeError(fmt::format(
        "batch at position {} claims {} bytes; {} are left", position_, size, left));
  }
  ScannedBatch batch{position_, header, {}};
  if (mode_ != Mode::kHeaders) {
    CO_RETURN_IF_ERROR(co_await ensure(position_, static_cast<size_t>(size)));
    batch.bytes = window_.slice(static_cast<size_t>(position_ - window_position_),
                                static_cast<size_t>(size));
  }
  position_ += size;
  co_return batch;
}

io::Task<absl::StatusOr<std::optional<ScannedBatch>>> SegmentScanner::next() {
  absl::StatusOr<std::optional<ScannedBatch>> batch;
  for (int attempt = 0; attempt <= kCrcRereads; ++attempt) {
    if (attempt > 0) window_ = io::Buffer();  // read the extent again
    batch = co_await next_once();
    if (!batch.ok()) {
      if (!is_framing_error(batch.status())) co_return batch;
      continue;
    }
    if (!batch->has_value() || mode_ != Mode::kVerified) co_return batch;
    ScannedBatch& b = **batch;
    absl::Status crc = net::verify_crc(b.header, b.bytes.span());
    if (crc.ok()) {
      // The base offset lies outside the CRC: one that does not follow the
      // batch before (a gap left by compaction, or a corrupted read) is
      // believed only when two more reads agree on it.
      if (expected_base_.has_value() && b.header.base_offset != *expected_base_) {
        CO_ASSIGN_OR_RETURN(std::optional<int64_t> base, co_await confirmed_base_offset(b.position));
        if (!base.has_value()) {
          co_return absl::DataLossError(
              fmt::format("reads of the base offset at position {} disagree", b.position));
        }
        b.header.base_offset = *base;
      }
      expected_base_ = b.header.next_offset();
      co_return batch;
    }
    position_ = b.position;  // not consumed
    batch = crc;
  }
  co_return batch;
}

io::Task<absl::StatusOr<std::optional<int64_t>>> SegmentScanner::confirmed_base_offset(
    uint64_t position) {
  std::optional<int64_t> previous;
  for (int attempt = 0; attempt <= kCrcRereads + 1; ++attempt) {
    CO_ASSIGN_OR_RETURN(io::Buffer bytes, co_await file_->read_at(position, sizeof(int64_t)));
    if (bytes.size() != sizeof(int64_t)) co_return std::nullopt;
    const int64_t base = codec::load_be<int64_t>(bytes.span(), 0);
    if (previous == base) co_return base;
    previous = base;
  }
  co_return std::nullopt;
}

// --- Segment ----------------------------------------------------------------

Segment::Segment(io::Disk& disk, std::string dir, int64_t base_offset, const LogConfig& config,
                 std::unique_ptr<io::File> log, int64_t now_ms)
    : disk_(&disk),
      dir_(std::move(dir)),
      base_offset_(base_offset),
      index_interval_bytes_(config.index_interval_bytes),
      offset_entries_max_(config.offset_index_entries_max()),
      time_entries_max_(config.time_index_entries_max()),
      log_(std::move(log)),
      offset_index_(base_offset, config.offset_index_entries_max()),
      time_index_(base_offset, config.time_index_entries_max()),
      next_offset_(base_offset),
      created_ms_(now_ms) {}

Segment::~Segment() = default;

io::Task<absl::StatusOr<std::unique_ptr<Segment>>> Segment::create(io::Disk& disk,
                                                                  std::string dir,
                                                                  int64_t base_offset,
                                                                  const LogConfig& config,
                                                                  int64_t now_ms) {
  const std::string path = join_path(dir, offset_file_name(base_offset, kLogSuffix));
  CO_ASSIGN_OR_RETURN(std::unique_ptr<io::File> file,
                      co_await disk.open(path, io::OpenMode::kCreate));
  if (file->size() > 0) CO_RETURN_IF_ERROR(co_await file->truncate(0));
  std::unique_ptr<Segment> segment(
      new Segment(disk, std::move(dir), base_offset, config, std::move(file), now_ms));
  // Index files left by an earlier segment of the same name describe other
  // bytes.
  CO_RETURN_IF_ERROR(co_await segment->remove_index_files());
  co_return segment;
}

io::Task<absl::StatusOr<std::unique_ptr<Segment>>> Segment::open(io::Disk& disk, std::string dir,
                                                                int64_t base_offset,
                                                                const LogConfig& config,
                                                                int64_t now_ms) {
  const std::string path = join_path(dir, offset_file_name(base_offset, kLogSuffix));
  CO_ASSIGN_OR_RETURN(std::unique_ptr<io::File> file,
                      co_await disk.open(path, io::OpenMode::kReadWrite));
  std::unique_ptr<Segment> segment(
      new Segment(disk, std::move(dir), base_offset, config, std::move(file), now_ms));
  // What an earlier process wrote may still sit unsynced in the page
  // cache: nothing counts as synced until this process syncs it.
  segment->size_ = segment->log_->size();
  segment->synced_size_ = 0;
  co_return segment;
}

bool Segment::should_roll(const LogConfig& config, const RollCheck& check) const {
  if (size_ == 0) return false;
  // As Kafka's LogSegment.timeWaitedForRoll: the incoming records' largest
  // timestamp against the first batch's, when that is known; else the wall
  // clock against the segment's creation. (Records with timestamps from
  // long ago, as a copy of an old topic has, so roll by size alone.)
  // In 128 bits: timestamps come from clients and may be anything.
  const __int128 waited = rolling_base_timestamp_ms_ >= 0
                              ? static_cast<__int128>(check.max_timestamp_ms) - rolling_base_timestamp_ms_
                              : static_cast<__int128>(check.now_ms) - created_ms_;
  const bool reached_roll_ms =
      waited > static_cast<__int128>(config.segment_ms) - config.segment_jitter_ms;
  return size_ + check.incoming_bytes > config.segment_bytes || reached_roll_ms ||
         offset_index_.full() || time_index_.full() ||
         static_cast<__int128>(check.max_offset) - base_offset_ > kRelativeOffsetMax ||
         size_ + check.incoming_bytes > std::numeric_limits<int32_t>::max();
}

void Segment::index_batch(uint64_t position, const BatchSummary& batch) {
  BROOK_ASSERT(position <= std::numeric_limits<int32_t>::max());
  if (batch.max_timestamp_ms > max_timestamp_ms_) {
    max_timestamp_ms_ = batch.max_timestamp_ms;
    offset_of_max_timestamp_ = batch.last_offset;
  }
  if (rolling_base_timestamp_ms_ == net::kNoTimestamp) {
    rolling_base_timestamp_ms_ = batch.max_timestamp_ms;
  }
  if (bytes_since_index_entry_ > index_interval_bytes_ && !offset_index_.full() &&
      !time_index_.full()) {
    offset_index_.append(batch.last_offset, static_cast<uint32_t>(position));
    time_index_.maybe_append(max_timestamp_ms_, offset_of_max_timestamp_);
    bytes_since_index_entry_ = 0;
  }
  bytes_since_index_entry_ += batch.size_bytes;
  next_offset_ = batch.last_offset + 1;
}

void Segment::reset_indexes() {
  offset_index_.clear();
  time_index_.clear();
  max_timestamp_ms_ = net::kNoTimestamp;
  offset_of_max_timestamp_ = -1;
  rolling_base_timestamp_ms_ = net::kNoTimestamp;
  bytes_since_index_entry_ = 0;
  next_offset_ = base_offset_;
  indexes_persisted_ = false;
}

io::Task<absl::Status> Segment::append(std::span<const BatchSummary> batches,
                                       io::BufferChain bytes) {
  BROOK_ASSERT(!batches.empty());
  BROOK_ASSERT(batches.front().base_offset >= next_offset_);
  const uint64_t position = size_;
  CO_RETURN_IF_ERROR(co_await log_->append(std::move(bytes)));
  uint64_t at = position;
  for (const BatchSummary& batch : batches) {
    index_batch(at, batch);
    at += batch.size_bytes;
  }
  size_ = at;
  BROOK_ASSERT_EQ(size_, log_->size());
  indexes_persisted_ = false;
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<std::optional<ScannedBatch>>> Segment::find_batch(int64_t offset) {
  const OffsetPosition start = offset_index_.lookup(offset);
  absl::StatusOr<std::optional<ScannedBatch>> found = co_await find_batch_from(start.position, offset);
  if (!found.ok() && is_framing_error(found.status()) && start.position > 0) {
    // An index entry that does not land on a batch: scan from the start.
    found = co_await find_batch_from(0, offset);
  }
  co_return found;
}

io::Task<absl::StatusOr<std::optional<ScannedBatch>>> Segment::find_batch_from(uint64_t position,
                                                                              int64_t offset) {
  SegmentScanner scanner(*log_, position, size_, SegmentScanner::Mode::kHeaders);
  while (true) {
    CO_ASSIGN_OR_RETURN(std::optional<ScannedBatch> batch, co_await scanner.next());
    if (!batch.has_value()) co_return std::nullopt;
    if (batch->header.last_offset() >= offset) co_return batch;
  }
}

io::Task<absl::StatusOr<io::Buffer>> Segment::read(uint64_t position, size_t max_bytes,
                                                   int64_t max_offset_exclusive,
                                                   bool min_one_batch) {
  const uint64_t end = size_;
  if (position >= end) co_return io::Buffer();
  size_t length = static_cast<size_t>(std::min<uint64_t>(max_bytes, end - position));
  if (min_one_batch && length < net::kBatchHeaderBytes) {
    length = static_cast<size_t>(std::min<uint64_t>(net::kBatchHeaderBytes, end - position));
  }
  CO_ASSIGN_OR_RETURN(io::Buffer bytes, co_await log_->read_at(position, length));
  size_t kept = 0;
  while (kept < bytes.size()) {
    absl::StatusOr<net::RecordBatchHeader> header =
        net::parse_batch_header(bytes.span().subspan(kept), net::BatchExtent::kHeaderOnly);
    if (!header.ok()) {
      if (header.status().code() == absl::StatusCode::kOutOfRange) break;
      co_return header.status();
    }
    if (header->last_offset() >= max_offset_exclusive) break;
    const size_t size = header->size_bytes();
    if (kept + size > bytes.size()) {
      if (kept == 0 && min_one_batch && position + size <= end) {
        // The first batch is larger than max_bytes: return it whole.
        CO_ASSIGN_OR_RETURN(bytes, co_await log_->read_at(position, size));
        if (bytes.size() < size) co_return absl::DataLossError("segment shrank during a read");
        kept = size;
      }
      break;
    }
    kept += size;
  }
  co_return bytes.slice(0, kept);
}

bool Segment::batch_in_order(const net::RecordBatchHeader& h, int64_t expected_base) const {
  // In 128 bits: a base offset near INT64_MAX must not wrap (it lies outside
  // the CRC, so a file may hold anything there).
  const __int128 base = h.base_offset;
  const __int128 last = base + h.last_offset_delta;
  return base >= expected_base && base >= base_offset_ &&
         last - base_offset_ <= kRelativeOffsetMax && last < INT64_MAX;
}

io::Task<absl::StatusOr<std::optional<ScannedBatch>>> Segment::find_batch_confirmed(int64_t offset) {
  std::optional<ScannedBatch> previous;
  for (int attempt = 0; attempt <= kCrcRereads + 1; ++attempt) {
    CO_ASSIGN_OR_RETURN(std::optional<ScannedBatch> found, co_await find_batch(offset));
    const bool same = previous.has_value() == found.has_value() &&
                      (!found.has_value() || (previous->position == found->position &&
                                              previous->header == found->header));
    if (attempt > 0 && same) co_return found;
    previous = std::move(found);
  }
  co_return absl::DataLossError(
      fmt::format("segment {}: reads of the batch holding offset {} disagree", base_offset_, offset));
}

io::Task<absl::Status> Segment::remove_index_files() {
  for (std::string_view suffix : {kIndexSuffix, kTimeIndexSuffix, kTxnIndexFileSuffix}) {
    absl::Status s = co_await disk_->remove(join_path(dir_, offset_file_name(base_offset_, suffix)));
    if (!s.ok() && s.code() != absl::StatusCode::kNotFound) co_return s;
  }
  indexes_persisted_ = false;
  co_return absl::OkStatus();
}

void Segment::append_aborted(const AbortedTxn& txn) {
  txn_index_.append(txn);
  indexes_persisted_ = false;
}

void Segment::clear_txn_index() {
  txn_index_.clear();
  txn_index_lost_ = false;
  indexes_persisted_ = false;
}

io::Task<absl::Status> Segment::rewrite(uint64_t from, uint64_t to) {
  // Bytes are believed when two reads agree, so a read corruption is not
  // written back for good.
  constexpr size_t kChunkBytes = 1 << 20;
  for (uint64_t at = from; at < to;) {
    const size_t length = static_cast<size_t>(std::min<uint64_t>(kChunkBytes, to - at));
    std::optional<io::Buffer> agreed;
    CO_ASSIGN_OR_RETURN(io::Buffer previous, co_await log_->read_at(at, length));
    for (int attempt = 0; attempt <= kCrcRereads && !agreed.has_value(); ++attempt) {
      CO_ASSIGN_OR_RETURN(io::Buffer again, co_await log_->read_at(at, length));
      if (again.size() == length && again == previous) agreed = std::move(again);
      else previous = std::move(again);
    }
    if (!agreed.has_value()) {
      co_return absl::DataLossError(
          fmt::format("segment {}: reads at position {} disagree", base_offset_, at));
    }
    CO_RETURN_IF_ERROR(co_await log_->write_at(at, io::BufferChain(std::move(*agreed))));
    at += length;
  }
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<RecoverResult>> Segment::recover(const BatchVisitor& visit,
                                                         int64_t rewrite_from_offset) {
  reset_indexes();
  // Index files on disk describe bytes this recovery may change: they go
  // (durably with the log's next directory sync) and are written afresh.
  CO_RETURN_IF_ERROR(co_await remove_index_files());
  RecoverResult result;
  std::optional<uint64_t> rewrite_position;
  SegmentScanner scanner(*log_, 0, size_, SegmentScanner::Mode::kVerified, base_offset_);
  while (true) {
    const uint64_t position = scanner.position();
    absl::StatusOr<std::optional<ScannedBatch>> next = co_await scanner.next();
    if (!next.ok()) {
      if (!is_framing_error(next.status())) co_return next.status();
      break;  // torn, cut or corrupt on disk: the log ends here
    }
    if (!next->has_value()) break;
    const ScannedBatch& batch = **next;
    if (!batch_in_order(batch.header, next_offset_)) break;
    if (!rewrite_position.has_value() && batch.header.last_offset() >= rewrite_from_offset) {
      rewrite_position = position;
    }
    index_batch(position, BatchSummary{batch.header.base_offset, batch.header.last_offset(),
                                       batch.header.max_timestamp,
                                       static_cast<uint32_t>(batch.bytes.size())});
    if (visit) visit(batch);
    ++result.batches;
    result.valid_bytes = scanner.position();
  }
  if (rewrite_position.has_value()) {
    // Past the last successful flush, bytes that read back well may still
    // live only in the page cache: a failed datasync of an earlier process
    // can have dropped them from the write-back (fsyncgate), and a datasync
    // now would not write them. Rewriting makes them dirty again, so the
    // caller's sync really persists them.
    CO_RETURN_IF_ERROR(co_await rewrite(*rewrite_position, result.valid_bytes));
  }
  // Truncating even to the current size re-issues a truncation an earlier
  // process may have lost to a failed datasync; the datasync makes it hold.
  result.truncated_bytes = size_ - result.valid_bytes;
  CO_RETURN_IF_ERROR(co_await log_->truncate(result.valid_bytes));
  CO_RETURN_IF_ERROR(co_await log_->datasync());
  size_ = result.valid_bytes;
  synced_size_ = size_;
  result.next_offset = next_offset_;
  co_return result;
}

io::Task<absl::Status> Segment::check_index_entry(OffsetPosition entry) {
  if (entry.position >= size_) {
    co_return absl::DataLossError(fmt::format("index entry position {} is past the log's {} bytes",
                                              entry.position, size_));
  }
  SegmentScanner scanner(*log_, entry.position, size_, SegmentScanner::Mode::kHeaders);
  absl::StatusOr<std::optional<ScannedBatch>> batch = co_await scanner.next();
  if (!batch.ok() || !batch->has_value() || (*batch)->header.last_offset() != entry.offset) {
    co_return absl::DataLossError(
        fmt::format("index entry ({}, {}) does not name a batch", entry.offset, entry.position));
  }
  co_return absl::OkStatus();
}

io::Task<absl::Status> Segment::rebuild_indexes_by_scan() {
  reset_indexes();
  // Whole, verified batches: an index built from a corrupted read would be
  // trusted until the segment is next rewritten.
  SegmentScanner scanner(*log_, 0, size_, SegmentScanner::Mode::kVerified, base_offset_);
  while (true) {
    const uint64_t position = scanner.position();
    absl::StatusOr<std::optional<ScannedBatch>> batch = co_await scanner.next();
    if (!batch.ok()) {
      if (!is_framing_error(batch.status())) co_return batch.status();
      co_return absl::DataLossError(fmt::format("segment {}: {}", base_offset_,
                                                std::string(batch.status().message())));
    }
    if (!batch->has_value()) break;
    const net::RecordBatchHeader& h = (*batch)->header;
    if (!batch_in_order(h, next_offset_)) {
      co_return absl::DataLossError(
          fmt::format("batch at position {} of segment {} is out of order", position, base_offset_));
    }
    index_batch(position, BatchSummary{h.base_offset, h.last_offset(), h.max_timestamp,
                                       static_cast<uint32_t>(h.size_bytes())});
  }
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<io::Buffer>> Segment::read_index_file(std::string_view suffix) {
  CO_ASSIGN_OR_RETURN(std::unique_ptr<io::File> f,
                      co_await disk_->open(join_path(dir_, offset_file_name(base_offset_, suffix)),
                                           io::OpenMode::kReadOnly));
  CO_ASSIGN_OR_RETURN(io::Buffer bytes, co_await f->read_at(0, static_cast<size_t>(f->size())));
  if (bytes.size() != f->size()) co_return absl::DataLossError("short read of an index file");
  co_return bytes;
}

io::Task<absl::StatusOr<io::Buffer>> Segment::read_index_file_twice(std::string_view suffix) {
  // Index files carry no checksum: a read is believed when the next one
  // returns the same bytes.
  CO_ASSIGN_OR_RETURN(io::Buffer previous, co_await read_index_file(suffix));
  for (int attempt = 0; attempt <= kCrcRereads; ++attempt) {
    CO_ASSIGN_OR_RETURN(io::Buffer again, co_await read_index_file(suffix));
    if (again == previous) co_return again;
    previous = std::move(again);
  }
  co_return absl::DataLossError(fmt::format("reads of the {} file of segment {} disagree", suffix,
                                            base_offset_));
}

io::Task<absl::Status> Segment::load_index_files() {
  CO_ASSIGN_OR_RETURN(io::Buffer offsets, co_await read_index_file_twice(kIndexSuffix));
  CO_ASSIGN_OR_RETURN(io::Buffer times, co_await read_index_file_twice(kTimeIndexSuffix));
  CO_ASSIGN_OR_RETURN(OffsetIndex oi,
                      OffsetIndex::decode(base_offset_, offset_entries_max_, offsets.span()));
  CO_ASSIGN_OR_RETURN(TimeIndex ti, TimeIndex::decode(base_offset_, time_entries_max_, times.span()));
  if (std::optional<OffsetPosition> last = oi.last()) {
    CO_RETURN_IF_ERROR(co_await check_index_entry(*last));
  }
  offset_index_ = std::move(oi);
  time_index_ = std::move(ti);
  co_return absl::OkStatus();
}

io::Task<absl::Status> Segment::load_txn_index() {
  absl::StatusOr<io::Buffer> bytes = co_await read_index_file_twice(kTxnIndexFileSuffix);
  if (!bytes.ok()) {
    if (bytes.status().code() == absl::StatusCode::kNotFound) {
      txn_index_.clear();
      co_return absl::OkStatus();
    }
    co_return bytes.status();
  }
  absl::StatusOr<TransactionIndex> index = TransactionIndex::decode(bytes->span());
  if (!index.ok() || !index->sanity_check(base_offset_).ok()) {
    txn_index_lost_ = true;
    co_return absl::OkStatus();
  }
  txn_index_ = std::move(*index);
  co_return absl::OkStatus();
}

io::Task<absl::Status> Segment::load_indexes() {
  if (absl::Status s = co_await load_txn_index(); !s.ok()) {
    if (s.code() != absl::StatusCode::kDataLoss) co_return s;
    txn_index_lost_ = true;
  }
  absl::Status loaded = co_await load_index_files();
  if (!loaded.ok()) {
    if (loaded.code() != absl::StatusCode::kNotFound &&
        loaded.code() != absl::StatusCode::kDataLoss) {
      co_return loaded;
    }
    co_return co_await rebuild_indexes_by_scan();
  }
  if (std::optional<TimestampOffset> last = time_index_.last()) {
    max_timestamp_ms_ = last->timestamp_ms;
    offset_of_max_timestamp_ = last->offset;
    rolling_base_timestamp_ms_ = last->timestamp_ms;
  }
  bytes_since_index_entry_ = 0;
  indexes_persisted_ = true;
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<uint64_t>> Segment::truncate_to(int64_t offset) {
  // A truncation acts on what it reads: two reads must agree on where.
  CO_ASSIGN_OR_RETURN(std::optional<ScannedBatch> first_removed,
                      co_await find_batch_confirmed(offset));
  if (!first_removed.has_value()) co_return uint64_t{0};
  const uint64_t position = first_removed->position;
  const uint64_t removed = size_ - position;
  offset_index_.truncate_to(offset);
  time_index_.truncate_to(offset);
  txn_index_.truncate_to(offset);
  // The index files must never name batches past the log's end: shrink
  // them before the log.
  CO_RETURN_IF_ERROR(co_await persist_indexes());
  CO_RETURN_IF_ERROR(co_await disk_->sync_dir(dir_));
  CO_RETURN_IF_ERROR(co_await log_->truncate(position));
  CO_RETURN_IF_ERROR(co_await log_->datasync());
  size_ = position;
  synced_size_ = std::min(synced_size_, size_);
  writeback_started_ = std::min(writeback_started_, size_);
  preallocated_ = 0;  // the truncation gave the reserved blocks back
  next_offset_ = std::min(first_removed->header.base_offset, offset);
  if (position == 0) {
    reset_indexes();
  } else if (std::optional<TimestampOffset> last = time_index_.last()) {
    max_timestamp_ms_ = last->timestamp_ms;
    offset_of_max_timestamp_ = last->offset;
  } else {
    max_timestamp_ms_ = net::kNoTimestamp;
    offset_of_max_timestamp_ = -1;
  }
  bytes_since_index_entry_ = 0;
  co_return removed;
}

io::Task<absl::Status> Segment::sync() {
  if (synced_size_ == size_ && size_ == log_->size()) co_return absl::OkStatus();
  const uint64_t target = size_;
  CO_RETURN_IF_ERROR(co_await log_->datasync());
  synced_size_ = std::max(synced_size_, target);
  co_return absl::OkStatus();
}

io::Task<void> Segment::start_writeback() {
  constexpr uint64_t kPage = 4096;
  const uint64_t from = std::max(writeback_started_, synced_size_);
  const uint64_t to = size_ / kPage * kPage;
  if (to < from + kWritebackMinBytes) co_return;
  writeback_started_ = to;
  (void)co_await log_->start_writeback(from, to - from);
  // A busy segment: keep its next blocks allocated ahead of the appends, so
  // that the kernel's writeback, which otherwise allocates them while
  // holding the lock appends need, seldom has to.
  if (inactive_ || preallocated_ >= size_ + kPreallocateBytes / 2) co_return;
  const uint64_t start = std::max(preallocated_, size_);
  if (!(co_await log_->preallocate(start, kPreallocateBytes)).ok()) co_return;
  preallocated_ = start + kPreallocateBytes;
  // Rolled meanwhile: give the blocks back.
  if (inactive_) co_await release_preallocation();
}

io::Task<void> Segment::release_preallocation() {
  if (preallocated_ <= size_) co_return;
  preallocated_ = 0;
  (void)co_await log_->truncate(size_);
}

void Segment::on_become_inactive() {
  inactive_ = true;
  if (!time_index_.full()) {
    time_index_.maybe_append(max_timestamp_ms_, offset_of_max_timestamp_);
  }
}

io::Task<absl::Status> Segment::write_index_file(std::string_view suffix, io::Buffer bytes) {
  // A fresh temporary file renamed over the old one: after a crash the index
  // is the old file or the new one, never a torn mix of both.
  const std::string path = join_path(dir_, offset_file_name(base_offset_, suffix));
  const std::string temp = path + ".tmp";
  CO_ASSIGN_OR_RETURN(std::unique_ptr<io::File> f, co_await disk_->open(temp, io::OpenMode::kCreate));
  if (f->size() > 0) CO_RETURN_IF_ERROR(co_await f->truncate(0));
  if (!bytes.empty()) CO_RETURN_IF_ERROR(co_await f->write_at(0, io::BufferChain(std::move(bytes))));
  CO_RETURN_IF_ERROR(co_await f->datasync());
  CO_RETURN_IF_ERROR(co_await f->close());
  co_return co_await disk_->rename(temp, path);
}

io::Task<absl::Status> Segment::persist_indexes() {
  CO_RETURN_IF_ERROR(co_await write_index_file(kIndexSuffix, offset_index_.encode()));
  CO_RETURN_IF_ERROR(co_await write_index_file(kTimeIndexSuffix, time_index_.encode()));
  if (!txn_index_.empty()) {
    CO_RETURN_IF_ERROR(co_await write_index_file(kTxnIndexFileSuffix, txn_index_.encode()));
  } else {
    absl::Status s = co_await disk_->remove(
        join_path(dir_, offset_file_name(base_offset_, kTxnIndexFileSuffix)));
    if (!s.ok() && s.code() != absl::StatusCode::kNotFound) co_return s;
  }
  indexes_persisted_ = true;
  co_return absl::OkStatus();
}

io::Task<absl::Status> Segment::close() { co_return co_await log_->close(); }

io::Task<absl::Status> Segment::remove_files() {
  for (std::string_view suffix : {kLogSuffix, kIndexSuffix, kTimeIndexSuffix, kTxnIndexFileSuffix}) {
    absl::Status s = co_await disk_->remove(join_path(dir_, offset_file_name(base_offset_, suffix)));
    if (!s.ok() && s.code() != absl::StatusCode::kNotFound) co_return s;
  }
  co_return absl::OkStatus();
}

}  // namespace brook::storage
