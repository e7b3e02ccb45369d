// fuzz/log_recovery_fuzz.cc: fuzz_log_recovery
//
// The input becomes the files of a partition directory `t-0/` on a SimDisk
// (layout: fuzz/log_recovery_input.h): one or two segments, optionally the
// first segment's index files (garbage, or the true index with fuzzed bits
// flipped) and a producer-state snapshot. storage::Log::open then recovers
// the directory on a TestExecutor. Oracle:
//
//   * open succeeds (no faults are injected: a bad file is recovered, never
//     an error; but see trusted segments below), 0 <= log start <= HW <= LEO;
//   * the log holds exactly the batches a reference recovery keeps: every
//     segment the log must scan is read batch by batch from its start while
//     batches frame, pass their CRC, do not go back in offset and stay
//     within 2^31 offsets of the segment base; the first bad batch ends the
//     log (later segments go), and a segment overlapping the previous one is
//     dropped. A segment below the recovery point (kTrust) is taken as it is,
//     so the exact checks hold there only when its file is a valid segment;
//     otherwise only "no crash; open fails with a framing error or works,
//     and then append and reopen work" is checked.
//     Its index files are loaded when they pass the checks storage/index.h
//     and storage/segment.h describe (both decode, the last offset entry
//     names a batch); reads are checked exactly unless a loaded entry names
//     a position that is not a batch of its offset (the index then misleads
//     reads until the segment is recovered: only "no crash" is checked);
//   * reading from log_start_offset() to log_end_offset() with Log::read (in
//     large reads and in one-batch reads) returns batches that BatchIterator
//     parses, that pass verify_crc, whose offsets strictly increase, and that
//     end exactly at the LEO (or at an empty tail segment);
//   * offset_for_timestamp agrees with a scan of the records;
//   * append_as_leader of a fresh batch lands at the LEO and reads back;
//   * close and reopen (at the recovery point close left, and again scanning
//     every segment) give the same LEO and the same batches.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "fuzz/log_recovery_input.h"
#include "io/assert.h"
#include "io/buffer.h"
#include "io/random.h"
#include "io/scope.h"
#include "io/task.h"
#include "io/time.h"
#include "net/codec/crc32c.h"
#include "net/codec/endian.h"
#include "net/kafka/record_batch.h"
#include "sim/disk.h"
#include "sim/test_executor.h"
#include "storage/index.h"
#include "storage/log.h"
#include "storage/producer_state.h"
#include "storage/segment.h"

namespace brook::fuzz {
namespace {

using namespace log_recovery;  // NOLINT: the input layout's flags

constexpr const char* kDir = "t-0";
// Log::offset_for_timestamp's decompression cap (storage/log.cc).
constexpr size_t kDecompressedBytesMax = size_t{256} << 20;
constexpr int64_t kRelativeOffsetMax = std::numeric_limits<int32_t>::max();

storage::LogConfig small_config() {
  storage::LogConfig c;
  c.segment_bytes = 4096;
  c.segment_index_bytes = 512;  // 64 offset entries, 42 time entries
  c.index_interval_bytes = 256;
  return c;
}

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// Recomputes the CRC of every batch that frames, front to back.
void fix_batch_crcs(std::string& segment) {
  size_t position = 0;
  while (position < segment.size()) {
    const std::span<const std::byte> rest = bytes_of(segment).subspan(position);
    absl::StatusOr<net::RecordBatchHeader> h = net::parse_batch_header(rest);
    if (!h.ok()) break;
    const uint32_t crc = net::compute_batch_crc(rest.first(h->size_bytes()));
    codec::store_be<uint32_t>(reinterpret_cast<std::byte*>(segment.data()) + position +
                                  net::kBatchCrcOffset,
                              crc);
    position += h->size_bytes();
  }
}

void fix_snapshot_crc(std::string& snapshot) {
  if (snapshot.size() < storage::kSnapshotEntriesOffset) return;
  const uint32_t crc =
      codec::crc32c(0, bytes_of(snapshot).subspan(storage::kSnapshotCountOffset));
  codec::store_be<uint32_t>(reinterpret_cast<std::byte*>(snapshot.data()) +
                                storage::kSnapshotCrcOffset,
                            crc);
}

struct ModelBatch {
  net::RecordBatchHeader header;
  uint64_t position = 0;
  std::string bytes;
};

// What recovery keeps of one segment file.
struct SegmentScan {
  std::vector<ModelBatch> batches;
  int64_t next_offset = 0;
  bool clean = true;  // every byte belongs to a valid batch
};

// The reference recovery of one segment: batches in order while they frame,
// pass their CRC, do not go back in offset, and end within 2^31 offsets of
// the segment base (without wrapping past INT64_MAX).
SegmentScan scan_segment(const std::string& file, int64_t base) {
  SegmentScan out;
  out.next_offset = base;
  size_t position = 0;
  while (position < file.size()) {
    const std::span<const std::byte> rest = bytes_of(file).subspan(position);
    absl::StatusOr<net::RecordBatchHeader> h = net::parse_batch_header(rest);
    if (!h.ok()) break;
    const __int128 last = static_cast<__int128>(h->base_offset) + h->last_offset_delta;
    if (h->base_offset < out.next_offset || last > std::numeric_limits<int64_t>::max() ||
        last - base > kRelativeOffsetMax) {
      break;
    }
    if (!net::verify_crc(*h, rest.first(h->size_bytes())).ok()) break;
    out.batches.push_back({*h, position, file.substr(position, h->size_bytes())});
    out.next_offset = h->last_offset() + 1;
    position += h->size_bytes();
  }
  out.clean = position == file.size();
  return out;
}

// The index files a segment with these batches would have, every batch
// indexed, with `noise` XORed over (and appended past) the encoding.
std::string derived_index(const std::vector<ModelBatch>& batches, bool time,
                          std::span<const uint8_t> noise) {
  const storage::LogConfig config = small_config();
  storage::OffsetIndex offsets(0, config.offset_index_entries_max());
  storage::TimeIndex times(0, config.time_index_entries_max());
  int64_t max_timestamp = net::kNoTimestamp;
  int64_t offset_of_max = -1;
  for (const ModelBatch& b : batches) {
    if (!offsets.full()) offsets.append(b.header.last_offset(), static_cast<uint32_t>(b.position));
    if (b.header.max_timestamp > max_timestamp) {
      max_timestamp = b.header.max_timestamp;
      offset_of_max = b.header.last_offset();
    }
    if (offset_of_max >= 0 && !times.full()) times.maybe_append(max_timestamp, offset_of_max);
  }
  const io::Buffer encoded = time ? times.encode() : offsets.encode();
  std::string out(reinterpret_cast<const char*>(encoded.data()), encoded.size());
  for (size_t i = 0; i < noise.size(); ++i) {
    if (i < out.size()) {
      out[i] = static_cast<char>(static_cast<uint8_t>(out[i]) ^ noise[i]);
    } else {
      out.push_back(static_cast<char>(noise[i]));
    }
  }
  return out;
}

enum class IndexLoad : uint8_t {
  kRebuilt,     // the files fail the checks on load: rebuilt by a scan
  kAccurate,    // loaded, and every entry names a batch of its offset
  kMisleading,  // loaded, but some entry does not
};

// What loading the first segment's index files makes of them, as
// storage/segment.h describes it: both decode (storage/index.h), and the
// last offset entry names a batch header ending at that offset.
IndexLoad index_load(const std::string& segment, const SegmentScan& scan,
                     const std::string& index, const std::string& time_index) {
  const storage::LogConfig config = small_config();
  absl::StatusOr<storage::OffsetIndex> offsets =
      storage::OffsetIndex::decode(0, config.offset_index_entries_max(), bytes_of(index));
  absl::StatusOr<storage::TimeIndex> times =
      storage::TimeIndex::decode(0, config.time_index_entries_max(), bytes_of(time_index));
  if (!offsets.ok() || !times.ok()) return IndexLoad::kRebuilt;
  if (std::optional<storage::OffsetPosition> last = offsets->last()) {
    if (last->position >= segment.size()) return IndexLoad::kRebuilt;
    const std::span<const std::byte> at = bytes_of(segment).subspan(last->position);
    absl::StatusOr<net::RecordBatchHeader> h =
        net::parse_batch_header(at, net::BatchExtent::kHeaderOnly);
    if (!h.ok() || h->size_bytes() > at.size() || h->last_offset() != last->offset) {
      return IndexLoad::kRebuilt;
    }
  }
  for (const storage::OffsetPosition& e : offsets->entries()) {
    const bool names_batch = std::any_of(scan.batches.begin(), scan.batches.end(),
                                         [&](const ModelBatch& b) {
                                           return b.position == e.position &&
                                                  b.header.last_offset() == e.offset;
                                         });
    if (!names_batch) return IndexLoad::kMisleading;
  }
  return IndexLoad::kAccurate;
}

// The directory the input describes, and what recovery must make of it.
struct Scenario {
  std::vector<std::pair<std::string, std::string>> files;  // path, contents
  storage::LogOptions options;
  // The exact oracle applies (see the header comment).
  bool exact = true;
  // Reads are exact too: no loaded .index names a position that is not a
  // batch of its offset (such an index passes the checks on load and
  // misleads reads until the segment is recovered).
  bool reads_exact = true;
  // Timestamp lookups go through a loaded (possibly fuzzed) time index.
  bool time_index_fuzzed = false;
  std::vector<ModelBatch> batches;  // every batch the log keeps, in order
  int64_t log_end_offset = 0;
};

Scenario make_scenario(const Input& in) {
  Scenario s;
  std::string first(in.first.begin(), in.first.end());
  std::string second(in.second.begin(), in.second.end());
  if (in.second_appended_to_first) {
    first += second;
    second.clear();
  }
  if (in.has(kFixCrc)) {
    fix_batch_crcs(first);
    fix_batch_crcs(second);
  }
  const bool trusted = in.split() && in.has(kTrust);
  s.options.dir = kDir;
  s.options.config = small_config();
  s.options.recovery_point = trusted ? in.second_base : 0;
  if (in.has(kStartOffset)) {
    s.options.log_start_offset = in.snapshot_offset;
    s.options.high_watermark = in.snapshot_offset;
  }

  const std::string dir = std::string(kDir) + "/";
  s.files.emplace_back(dir + storage::offset_file_name(0, storage::kLogSuffix), first);
  if (in.split()) {
    s.files.emplace_back(dir + storage::offset_file_name(in.second_base, storage::kLogSuffix),
                         second);
  }
  SegmentScan scan0 = scan_segment(first, 0);
  std::string index_files[2];
  for (const auto& [flag, suffix] : {std::pair{kIndex, storage::kIndexSuffix},
                                     std::pair{kTimeIndex, storage::kTimeIndexSuffix}}) {
    if (!in.has(flag)) continue;
    const std::span<const uint8_t> given = flag == kIndex ? in.index : in.time_index;
    std::string& bytes = index_files[flag == kIndex ? 0 : 1];
    bytes = in.has(kDerived) ? derived_index(scan0.batches, flag == kTimeIndex, given)
                             : std::string(given.begin(), given.end());
    s.files.emplace_back(dir + storage::offset_file_name(0, suffix), bytes);
  }
  if (in.has(kSnapshot)) {
    std::string snapshot(in.snapshot.begin(), in.snapshot.end());
    if (in.has(kFixCrc)) fix_snapshot_crc(snapshot);
    s.files.emplace_back(dir + storage::snapshot_file_name(in.snapshot_offset), snapshot);
  }

  // The reference recovery.
  bool misleading_index = false;
  if (trusted) {
    // Taken as it is: exact only when it is what the log could have written.
    s.exact = scan0.clean && scan0.next_offset <= in.second_base;
    if (in.has(kIndex) && in.has(kTimeIndex)) {
      const IndexLoad load = index_load(first, scan0, index_files[0], index_files[1]);
      s.time_index_fuzzed = load != IndexLoad::kRebuilt;
      misleading_index = load == IndexLoad::kMisleading;
    }
    scan0.next_offset = in.second_base;
  }
  s.reads_exact = s.exact && !misleading_index;
  s.batches = scan0.batches;
  s.log_end_offset = scan0.next_offset;
  if (in.split() && (trusted || scan0.clean) && in.second_base >= scan0.next_offset) {
    SegmentScan scan1 = scan_segment(second, in.second_base);
    s.batches.insert(s.batches.end(), scan1.batches.begin(), scan1.batches.end());
    s.log_end_offset = scan1.next_offset;
  }
  return s;
}

io::Task<void> write_file(io::Disk& disk, std::string path, std::string contents) {
  absl::StatusOr<std::unique_ptr<io::File>> f = co_await disk.open(path, io::OpenMode::kCreate);
  BROOK_ASSERT_MSG(f.ok(), "{}", f.status().ToString());
  if (!contents.empty()) {
    absl::Status s = co_await (*f)->write_at(0, io::BufferChain(io::Buffer::copy_of(contents)));
    BROOK_ASSERT_MSG(s.ok(), "{}", s.ToString());
  }
  BROOK_ASSERT((co_await (*f)->datasync()).ok());
  BROOK_ASSERT((co_await (*f)->close()).ok());
}

// Opens the log; with `may_fail` (a trusted segment holding garbage, which
// the log takes as it is) a framing error (what net::parse_batch_header
// reports for bad bytes) gives nullptr.
io::Task<std::unique_ptr<storage::Log>> open_log(io::Disk& disk, const io::Clock& clock,
                                                 storage::LogOptions options, bool may_fail) {
  absl::StatusOr<std::unique_ptr<storage::Log>> log =
      co_await storage::Log::open(disk, clock, std::move(options));
  const absl::StatusCode code = log.status().code();
  if (may_fail && (code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kOutOfRange ||
                   code == absl::StatusCode::kUnimplemented)) {
    co_return nullptr;
  }
  BROOK_ASSERT_MSG(log.ok(), "open failed: {}", log.status().ToString());
  storage::Log& l = **log;
  BROOK_ASSERT_LE(0, l.log_start_offset());
  BROOK_ASSERT_LE(l.log_start_offset(), l.high_watermark());
  BROOK_ASSERT_LE(l.high_watermark(), l.log_end_offset());
  co_return std::move(*log);
}

// Every batch from the log start to the LEO, by reads of at most max_bytes
// (each returns at least one batch). With `strict`, every rule of the
// oracle is asserted; otherwise reads only must not crash.
io::Task<std::vector<net::BatchView>> read_all(storage::Log& log, size_t max_bytes, bool strict) {
  std::vector<net::BatchView> out;
  int64_t next = log.log_start_offset();
  int64_t last_seen = std::numeric_limits<int64_t>::min();
  const int64_t end = log.log_end_offset();
  while (next < end) {
    absl::StatusOr<storage::ReadResult> r =
        co_await log.read(next, max_bytes, storage::ReadBound::kLogEnd, true);
    if (!strict && (!r.ok() || r->error != net::Error::kNone)) break;
    BROOK_ASSERT_MSG(r.ok(), "read at {} failed: {}", next, r.status().ToString());
    BROOK_ASSERT_MSG(r->error == net::Error::kNone, "read at {} (log {}..{}): error {}", next,
                     log.log_start_offset(), end, static_cast<int>(r->error));
    BROOK_ASSERT_EQ(r->log_end_offset, end);
    if (r->records.empty()) {
      // Only an empty tail (e.g. an empty active segment above the last
      // batch) may stop a read before the LEO.
      if (strict) {
        for (const auto& [base, segment] : log.segments()) {
          BROOK_ASSERT_MSG(base < next || segment->empty(),
                           "read at {} is empty but segment {} holds {} bytes (LEO {})", next,
                           base, segment->size_bytes(), end);
        }
      }
      break;
    }
    net::BatchIterator it(r->records, {.crc = net::CrcCheck::kVerify,
                                       .partial = net::PartialBatch::kReject});
    bool progressed = false;
    while (true) {
      absl::StatusOr<std::optional<net::BatchView>> batch = it.next();
      if (!strict && !batch.ok()) break;
      BROOK_ASSERT_MSG(batch.ok(), "read at {}: {}", next, batch.status().ToString());
      if (!batch->has_value()) break;
      const net::RecordBatchHeader& h = (*batch)->header;
      if (strict) {
        BROOK_ASSERT(net::verify_crc(h, (*batch)->bytes.span()).ok());
        BROOK_ASSERT_MSG(h.base_offset > last_seen && h.last_offset() >= h.base_offset,
                         "batch {}..{} after offset {}", h.base_offset, h.last_offset(),
                         last_seen);
        BROOK_ASSERT_MSG(h.last_offset() >= next && h.last_offset() < end,
                         "read at {} returned batch {}..{} (LEO {})", next, h.base_offset,
                         h.last_offset(), end);
      }
      if (h.last_offset() < next || h.last_offset() <= last_seen) break;  // lenient: no loop
      last_seen = h.last_offset();
      next = h.next_offset();
      progressed = true;
      out.push_back(**batch);
    }
    if (!progressed) break;
  }
  if (strict && !out.empty() && next != end) {
    // An empty tail was checked above; anything else must end at the LEO.
    BROOK_ASSERT_LE(next, end);
  }
  co_return out;
}

// The batches read are the model's from the log start on, then (when
// appended_at >= 0) the fresh batch at that offset.
void expect_batches(const std::vector<net::BatchView>& got, const Scenario& s,
                    int64_t log_start_offset, int64_t appended_at, const char* what) {
  std::vector<const ModelBatch*> want;
  for (const ModelBatch& b : s.batches) {
    if (b.header.last_offset() >= log_start_offset) want.push_back(&b);
  }
  const size_t extra = appended_at >= 0 ? 1 : 0;
  BROOK_ASSERT_MSG(got.size() == want.size() + extra, "{}: {} batches read, the model keeps {}",
                   what, got.size(), want.size() + extra);
  if (extra == 1) {
    BROOK_ASSERT_EQ(got.back().header.base_offset, appended_at);
    BROOK_ASSERT_EQ(got.back().header.records_count, 3);
  }
  for (size_t i = 0; i < want.size(); ++i) {
    BROOK_ASSERT_MSG(got[i].header == want[i]->header, "{}: batch {} differs (offset {} vs {})",
                     what, i, got[i].header.base_offset, want[i]->header.base_offset);
    BROOK_ASSERT_MSG(got[i].bytes.view() == want[i]->bytes, "{}: batch {} bytes differ",
                     what, i);
  }
}

// The first record with a timestamp >= ts, as a scan of every kept batch
// finds it; an error where the log's lookup would hit one first.
absl::StatusOr<std::optional<storage::TimestampOffset>> reference_offset_for_timestamp(
    const Scenario& s, int64_t log_start_offset, int64_t ts) {
  for (const ModelBatch& b : s.batches) {
    if (b.header.last_offset() < log_start_offset) continue;
    if (b.header.max_timestamp < ts || b.header.is_control()) continue;
    absl::StatusOr<std::vector<net::Record>> records =
        net::decode_records(io::Buffer::copy_of(b.bytes), kDecompressedBytesMax);
    if (!records.ok()) return records.status();
    for (const net::Record& r : *records) {
      const int64_t record_ts = net::record_timestamp(b.header, r);
      const int64_t offset = net::record_offset(b.header, r);
      if (record_ts >= ts && offset >= log_start_offset) {
        return std::optional<storage::TimestampOffset>(storage::TimestampOffset{record_ts, offset});
      }
    }
  }
  return std::optional<storage::TimestampOffset>();
}

io::Task<void> check_timestamps(storage::Log& log, const Scenario& s) {
  std::vector<int64_t> targets;
  for (const ModelBatch& b : s.batches) {
    targets.push_back(b.header.max_timestamp);
    if (targets.size() >= 4) break;
  }
  if (!s.batches.empty()) targets.push_back(s.batches.back().header.max_timestamp);
  std::vector<int64_t> more;
  for (int64_t t : targets) {
    if (t < std::numeric_limits<int64_t>::max()) more.push_back(t + 1);
  }
  targets.insert(targets.end(), more.begin(), more.end());
  for (int64_t ts : targets) {
    absl::StatusOr<std::optional<storage::TimestampOffset>> got =
        co_await log.offset_for_timestamp(ts);
    if (s.time_index_fuzzed || !s.exact) {
      // A loaded time index is a hint taken on trust (and a trusted
      // segment's bytes are taken as they are): the answer need only be a
      // record at or after the log start with a timestamp >= ts. Its
      // offset is not bounded by the LEO: recovery checks batches, not
      // the offset deltas of their records.
      if (got.ok() && got->has_value()) {
        BROOK_ASSERT_GE((*got)->timestamp_ms, ts);
        BROOK_ASSERT_GE((*got)->offset, log.log_start_offset());
      }
      continue;
    }
    const auto want = reference_offset_for_timestamp(s, log.log_start_offset(), ts);
    BROOK_ASSERT_MSG(got.ok() == want.ok(), "offset_for_timestamp({}): log {}, scan {}", ts,
                     got.status().ToString(), want.status().ToString());
    if (!got.ok()) continue;
    BROOK_ASSERT_MSG(*got == *want, "offset_for_timestamp({}): log {}@{}, scan {}@{}", ts,
                     got->has_value() ? (*got)->offset : -1,
                     got->has_value() ? (*got)->timestamp_ms : -1,
                     want->has_value() ? (*want)->offset : -1,
                     want->has_value() ? (*want)->timestamp_ms : -1);
  }
}

io::Buffer fresh_batch(int64_t timestamp_ms) {
  net::RecordBatchBuilder builder(net::RecordBatchOptions{});
  for (int i = 0; i < 3; ++i) {
    net::NewRecord r;
    r.timestamp_ms = timestamp_ms + i;
    r.key = io::Buffer::copy_of(fmt::format("key-{}", i));
    r.value = io::Buffer::copy_of(fmt::format("fresh value {}", i));
    builder.append(std::move(r));
  }
  absl::StatusOr<io::Buffer> built = builder.build();
  BROOK_ASSERT(built.ok());
  return *std::move(built);
}

io::Task<void> exercise(sim::SimDisk& disk, const io::Clock& clock, Scenario s) {
  BROOK_ASSERT((co_await disk.make_dir(kDir)).ok());
  for (const auto& [path, contents] : s.files) co_await write_file(disk, path, contents);
  BROOK_ASSERT((co_await disk.sync_dir(kDir)).ok());

  std::unique_ptr<storage::Log> log = co_await open_log(disk, clock, s.options, !s.exact);
  if (log == nullptr) co_return;
  if (s.exact) {
    BROOK_ASSERT_MSG(log->log_end_offset() == s.log_end_offset,
                     "recovered LEO {}, the model's {} ({} segments)", log->log_end_offset(),
                     s.log_end_offset, log->segment_count());
  }
  for (size_t max_bytes : {size_t{1} << 20, size_t{1}}) {
    std::vector<net::BatchView> batches = co_await read_all(*log, max_bytes, s.reads_exact);
    if (s.reads_exact) expect_batches(batches, s, log->log_start_offset(), -1, "after open");
  }
  co_await check_timestamps(*log, s);

  // A fresh append lands at the LEO.
  const int64_t end = log->log_end_offset();
  absl::StatusOr<storage::AppendResult> appended =
      co_await log->append_as_leader(fresh_batch(io::to_ms(clock.wall_now())), 0);
  BROOK_ASSERT_MSG(appended.ok(), "append failed: {}", appended.status().ToString());
  BROOK_ASSERT_MSG(appended->ok(), "append rejected: {} {}", static_cast<int>(appended->error),
                   appended->error_message);
  BROOK_ASSERT_EQ(appended->first_offset, end);
  BROOK_ASSERT_EQ(appended->last_offset, end + 2);
  BROOK_ASSERT_EQ(log->log_end_offset(), end + 3);
  {
    absl::StatusOr<storage::ReadResult> r =
        co_await log->read(end, 1, storage::ReadBound::kLogEnd, true);
    BROOK_ASSERT(r.ok() && r->error == net::Error::kNone);
    net::BatchIterator it(r->records);
    absl::StatusOr<std::optional<net::BatchView>> b = it.next();
    BROOK_ASSERT_MSG(b.ok() && b->has_value() && (*b)->header.base_offset == end,
                     "the appended batch does not read back at {}", end);
  }
  const int64_t leo = log->log_end_offset();

  // Close and reopen: at the recovery point close left (the first segment
  // may load its index files again), then with every segment scanned.
  for (const bool scan_all : {false, true}) {
    if (scan_all && !s.exact) break;
    absl::Status closed = co_await log->close();
    BROOK_ASSERT_MSG(closed.ok(), "close failed: {}", closed.ToString());
    storage::LogOptions again = s.options;
    again.recovery_point = scan_all ? 0 : log->recovery_point();
    again.log_start_offset = log->log_start_offset();
    again.high_watermark = log->high_watermark();
    log.reset();
    log = co_await open_log(disk, clock, again, !s.exact);
    if (log == nullptr) co_return;
    BROOK_ASSERT_MSG(log->log_end_offset() == leo, "reopened (recovery point {}) at LEO {}, was {}",
                     again.recovery_point, log->log_end_offset(), leo);
    const bool strict = scan_all || s.reads_exact;
    std::vector<net::BatchView> after = co_await read_all(*log, size_t{1} << 20, strict);
    if (strict) {
      expect_batches(after, s, log->log_start_offset(), end,
                     scan_all ? "reopened, all scanned" : "reopened");
    }
  }
  BROOK_ASSERT((co_await log->close()).ok());
}

}  // namespace
}  // namespace brook::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brook;
  // Segments are capped by the 16-bit lengths; the rest only makes the
  // second segment longer, which adds nothing but time.
  if (size > (size_t{1} << 17)) return 0;
  fuzz::Scenario scenario = fuzz::make_scenario(fuzz::log_recovery::parse_input({data, size}));
  sim::TestExecutor ex;
  sim::TestClock clock(ex);
  sim::SimDisk disk(io::Random(1));
  {
    io::TaskScope scope(ex);
    scope.spawn(fuzz::exercise(disk, clock, std::move(scenario)));
    ex.run();
    BROOK_ASSERT_MSG(scope.empty(), "the scenario did not finish");
  }
  return 0;
}
