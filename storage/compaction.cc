// storage/compaction.cc
//
// Log compaction over in-memory segment bytes (see compaction.h for the
// rules). The record encoder here differs from net::RecordBatchBuilder in one
// way that matters: records keep the offset deltas they had, so a cleaned
// batch keeps its base offset, its last offset and every surviving offset.
#include "storage/compaction.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>
#include <tuple>
#include <utility>

#include "io/assert.h"
#include "io/status.h"
#include "net/codec/compression.h"
#include "net/codec/endian.h"
#include "net/codec/varint.h"

namespace brook::storage {
namespace {

// Attribute bits a rebuilt batch copies: codec, timestamp type, transactional,
// control. Bit 6 (delete horizon) is decided anew; higher bits are unused.
constexpr int16_t kCopiedAttributesMask = codec::kCompressionAttributeMask |
                                          net::kBatchTimestampTypeBit |
                                          net::kBatchTransactionalBit | net::kBatchControlBit;

std::string_view as_chars(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

int64_t wrapping_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}

int64_t saturating_add(int64_t a, int64_t b) {
  BROOK_ASSERT(b >= 0);
  return a > std::numeric_limits<int64_t>::max() - b ? std::numeric_limits<int64_t>::max()
                                                     : a + b;
}

// A segment is whole: a batch cut short at its end is an error, not a tail.
net::BatchIterator segment_batches(const io::Buffer& bytes) {
  return net::BatchIterator(
      bytes, net::BatchIteratorOptions{.crc = net::CrcCheck::kVerify,
                                       .partial = net::PartialBatch::kReject});
}

// The type of a control batch's record; nullopt for an empty control batch.
absl::StatusOr<std::optional<net::ControlRecordType>> control_type(
    const net::RecordBatchHeader& header, const std::vector<net::Record>& records) {
  if (records.empty()) return std::optional<net::ControlRecordType>();
  if (!records.front().key.has_value()) {
    return absl::DataLossError(
        fmt::format("control batch at offset {} has a record without a key", header.base_offset));
  }
  absl::StatusOr<net::ControlRecordKey> key =
      net::decode_control_record_key(records.front().key->span());
  if (!key.ok()) {
    return absl::DataLossError(fmt::format("control batch at offset {}: {}", header.base_offset,
                                           std::string(key.status().message())));
  }
  return std::optional<net::ControlRecordType>(key->type);
}

// Offsets must increase through a segment, and each record's offset must lie
// in its batch's range, increasing: what the cleaner writes relies on it.
absl::Status check_batch_offsets(const net::RecordBatchHeader& h, int64_t last_offset_read) {
  if (h.base_offset <= last_offset_read || h.last_offset() < h.base_offset) {
    return absl::DataLossError(fmt::format(
        "batch at offset {} (last offset {}) does not follow offset {}", h.base_offset,
        h.last_offset(), last_offset_read));
  }
  return absl::OkStatus();
}

absl::Status check_record_offsets(const net::RecordBatchHeader& h,
                                  const std::vector<net::Record>& records) {
  int32_t previous = -1;
  for (const net::Record& r : records) {
    if (r.offset_delta <= previous || r.offset_delta > h.last_offset_delta) {
      return absl::DataLossError(fmt::format(
          "batch at offset {}: record offset delta {} after {} (last offset delta {})",
          h.base_offset, r.offset_delta, previous, h.last_offset_delta));
    }
    previous = r.offset_delta;
  }
  return absl::OkStatus();
}

// The records of a whole batch, checked.
absl::StatusOr<std::vector<net::Record>> batch_records(const net::BatchView& batch,
                                                       size_t uncompressed_bytes_max) {
  ASSIGN_OR_RETURN(std::vector<net::Record> records,
                   net::decode_records(batch.bytes, uncompressed_bytes_max));
  RETURN_IF_ERROR(check_record_offsets(batch.header, records));
  return records;
}

// --- encoding ------------------------------------------------------------------

// The largest timestamp of the records (CreateTime) or the batch's log append
// time, as Kafka's builder computes maxTimestamp.
int64_t max_timestamp_of(const net::RecordBatchHeader& h,
                         std::span<const net::Record* const> records) {
  if (h.timestamp_type() == net::TimestampType::kLogAppendTime) return h.max_timestamp;
  int64_t max_ms = net::kNoTimestamp;
  for (const net::Record* r : records) max_ms = std::max(max_ms, net::record_timestamp(h, *r));
  return max_ms;
}

// A batch of `records` (a non-empty subset of the original's, in order) with
// the original's header fields, last offset and codec; baseTimestamp is the
// delete horizon when there is one (attribute bit 6), else the first record's.
absl::StatusOr<io::Buffer> rebuild_batch(const net::RecordBatchHeader& original,
                                         std::span<const net::Record* const> records,
                                         std::optional<int64_t> delete_horizon_ms) {
  BROOK_ASSERT(!records.empty());
  net::RecordBatchHeader h = original;
  h.attributes = static_cast<int16_t>((original.attributes & kCopiedAttributesMask) |
                                      (delete_horizon_ms ? net::kBatchDeleteHorizonBit : 0));
  h.base_timestamp = delete_horizon_ms.value_or(net::record_timestamp(original, *records[0]));
  h.max_timestamp = max_timestamp_of(original, records);
  // Offset deltas stay; timestamps move to the new base.
  std::vector<net::Record> rebased;
  rebased.reserve(records.size());
  for (const net::Record* r : records) {
    net::Record copy = *r;
    copy.timestamp_delta = wrapping_sub(net::record_timestamp(original, *r), h.base_timestamp);
    rebased.push_back(std::move(copy));
  }
  absl::StatusOr<io::Buffer> batch = net::encode_batch(h, rebased);
  if (!batch.ok()) {
    return absl::InvalidArgumentError(fmt::format("cleaned batch at offset {}: {}",
                                                  original.base_offset,
                                                  std::string(batch.status().message())));
  }
  return batch;
}

// Kafka's DefaultRecordBatch.writeEmptyHeader: no records, no codec, no
// delete horizon, baseTimestamp -1; everything else as the original.
io::Buffer empty_batch(const net::RecordBatchHeader& original) {
  net::RecordBatchHeader h = original;
  h.attributes = static_cast<int16_t>(original.attributes &
                                      (net::kBatchTimestampTypeBit | net::kBatchTransactionalBit |
                                       net::kBatchControlBit));
  h.base_timestamp = net::kNoTimestamp;
  absl::StatusOr<io::Buffer> batch = net::encode_batch(h, {});
  BROOK_ASSERT(batch.ok());
  return *std::move(batch);
}

// --- cleaning decisions --------------------------------------------------------

// Kafka's RecordFilter.BatchRetention.
enum class BatchRetention : uint8_t {
  kDelete,       // drop the batch without looking at its records
  kRetainEmpty,  // keep the batch even if no record survives
  kDeleteEmpty,  // drop the batch if no record survives
};

struct BatchDecision {
  BatchRetention retention = BatchRetention::kDeleteEmpty;
  // Every record goes (aborted data; a marker past its delete horizon).
  bool discard_records = false;
  // A marker that may be removed once a delete horizon is set and passed.
  bool marker_for_empty_txn = false;
};

// Whether the batch holds what the producer state needs to survive a restart:
// the producer's last data offset, or its latest epoch when its last entry is
// a marker.
bool is_last_batch_of_producer(const net::RecordBatchHeader& h,
                               const ProducerLastRecords& producers) {
  if (h.producer_id < 0) return false;  // no producer id
  const auto it = producers.find(h.producer_id);
  if (it == producers.end()) return false;
  if (it->second.last_data_offset) return h.last_offset() == *it->second.last_data_offset;
  return h.is_control() && h.producer_epoch == it->second.producer_epoch;
}

BatchDecision decide_batch(const net::RecordBatchHeader& h, bool can_discard,
                           const CleanOptions& options) {
  BatchDecision d;
  d.discard_records = h.is_control() ? can_discard && h.has_delete_horizon() &&
                                           h.base_timestamp <= options.current_time_ms
                                     : can_discard;
  d.marker_for_empty_txn = can_discard && h.is_control();
  if (is_last_batch_of_producer(h, options.active_producers) ||
      (options.round_end_offset && h.next_offset() == *options.round_end_offset)) {
    d.retention = BatchRetention::kRetainEmpty;
  } else {
    d.retention = d.discard_records ? BatchRetention::kDelete : BatchRetention::kDeleteEmpty;
  }
  return d;
}

// Kafka's Cleaner.shouldRetainRecord for a data record.
bool retain_data_record(const net::RecordBatchHeader& h, const net::Record& r,
                        const OffsetMap& map, int64_t current_time_ms) {
  const int64_t offset = net::record_offset(h, r);
  // Beyond what the map accounts for: a later round decides.
  if (offset > map.latest_offset()) return true;
  // Compacted topics reject null keys; any that got in are dropped.
  if (!r.key.has_value()) return false;
  const std::optional<int64_t> latest = map.get(r.key->span());
  if (latest && offset < *latest) return false;
  if (!is_tombstone(r)) return true;
  return !h.has_delete_horizon() || current_time_ms < h.base_timestamp;
}

// The running output of clean_segment.
struct Output {
  io::BufferChain bytes;
  CleanResult result;
  // The last offset of the last batch read, kept or not.
  int64_t last_offset_read = -1;

  void add(io::Buffer batch, int64_t last_offset, int64_t max_timestamp_ms, size_t records) {
    BROOK_ASSERT(last_offset > result.last_offset);
    result.bytes_written += batch.size();
    result.batches_kept += 1;
    result.records_kept += static_cast<int64_t>(records);
    result.last_offset = last_offset;
    // Strictly larger: the first batch carrying the maximum names it.
    if (max_timestamp_ms > result.max_timestamp_ms) {
      result.max_timestamp_ms = max_timestamp_ms;
      result.offset_of_max_timestamp = last_offset;
    }
    bytes.append(std::move(batch));
  }
};

// Writes what survives of one batch whose records are decoded.
absl::Status write_survivors(const net::BatchView& batch, const std::vector<net::Record>& records,
                             const BatchDecision& d, const OffsetMap& map,
                             const CleanOptions& options, Output& out) {
  const net::RecordBatchHeader& h = batch.header;
  std::vector<const net::Record*> kept;
  bool has_tombstone = false;
  for (const net::Record& r : records) {
    const bool keep = !d.discard_records &&
                      (h.is_control() || retain_data_record(h, r, map, options.current_time_ms));
    if (!keep) continue;
    kept.push_back(&r);
    has_tombstone = has_tombstone || is_tombstone(r);
  }
  if (kept.empty()) {
    if (d.retention == BatchRetention::kRetainEmpty) {
      out.add(empty_batch(h), h.last_offset(), h.max_timestamp, 0);
    }
    return absl::OkStatus();
  }
  // KIP-534: the first pass that keeps a tombstone or a removable marker
  // starts its delete.retention.ms clock in the batch header.
  const bool set_horizon = (has_tombstone || d.marker_for_empty_txn) && !h.has_delete_horizon();
  if (kept.size() == records.size() && !set_horizon) {
    out.add(batch.bytes, h.last_offset(), h.max_timestamp, kept.size());
    return absl::OkStatus();
  }
  std::optional<int64_t> horizon_ms;
  if (set_horizon) {
    horizon_ms = saturating_add(options.current_time_ms, options.delete_retention_ms);
  } else if (h.has_delete_horizon()) {
    horizon_ms = h.base_timestamp;
  }
  ASSIGN_OR_RETURN(io::Buffer rebuilt, rebuild_batch(h, kept, horizon_ms));
  out.add(std::move(rebuilt), h.last_offset(), max_timestamp_of(h, kept), kept.size());
  return absl::OkStatus();
}

absl::Status clean_batch(const net::BatchView& batch, const OffsetMap& map,
                         const CleanOptions& options, TxnTracker& txns, Output& out) {
  const net::RecordBatchHeader& h = batch.header;
  RETURN_IF_ERROR(check_batch_offsets(h, out.last_offset_read));
  out.last_offset_read = h.last_offset();
  out.result.batches_read += 1;
  out.result.bytes_read += batch.bytes.size();
  out.result.records_read += h.records_count;
  std::vector<net::Record> records;
  bool can_discard = false;
  if (h.is_control()) {
    ASSIGN_OR_RETURN(records, batch_records(batch, options.uncompressed_batch_bytes_max));
    ASSIGN_OR_RETURN(const std::optional<net::ControlRecordType> type, control_type(h, records));
    can_discard = txns.on_control_batch(h, type);
  } else {
    can_discard = txns.on_data_batch(h);
  }
  const BatchDecision d = decide_batch(h, can_discard, options);
  if (d.retention == BatchRetention::kDelete) return absl::OkStatus();
  if (!h.is_control() && !d.discard_records) {
    ASSIGN_OR_RETURN(records, batch_records(batch, options.uncompressed_batch_bytes_max));
  }
  return write_survivors(batch, records, d, map, options, out);
}

// Maps the keys of one non-aborted data batch. kMapFull when a new key does
// not fit.
absl::StatusOr<MapProgress> map_batch_keys(const net::BatchView& batch,
                                           const BuildMapOptions& options, OffsetMap& map,
                                           BuildMapResult& result) {
  ASSIGN_OR_RETURN(const std::vector<net::Record> records,
                   batch_records(batch, options.uncompressed_batch_bytes_max));
  for (const net::Record& r : records) {
    const int64_t offset = net::record_offset(batch.header, r);
    if (offset >= options.end_offset) break;
    result.records_read += 1;
    if (!r.key.has_value() || offset < options.start_offset) continue;
    if (map.put(r.key->span(), offset)) continue;
    if (map.size() == 0) {
      return absl::ResourceExhaustedError(fmt::format(
          "the key at offset {} ({} bytes) does not fit an empty offset map of {} bytes", offset,
          r.key->size(), map.memory_bytes_max()));
    }
    return MapProgress::kMapFull;
  }
  return MapProgress::kSegmentDone;
}

}  // namespace

bool is_tombstone(const net::Record& record) { return !record.value.has_value(); }

absl::Status scan_producer_last_records(const io::Buffer& log_bytes,
                                        ProducerLastRecords& producers) {
  net::BatchIterator it = segment_batches(log_bytes);
  while (true) {
    ASSIGN_OR_RETURN(const std::optional<net::BatchView> batch, it.next());
    if (!batch) return absl::OkStatus();
    const net::RecordBatchHeader& h = batch->header;
    if (h.producer_id < 0) continue;  // no producer id
    auto [entry, added] = producers.try_emplace(h.producer_id);
    if (added || entry->second.producer_epoch != h.producer_epoch) {
      entry->second = ProducerLastRecord{.last_data_offset = std::nullopt,
                                         .producer_epoch = h.producer_epoch};
    }
    if (!h.is_control()) entry->second.last_data_offset = h.last_offset();
  }
}

// --- OffsetMap -------------------------------------------------------------------

bool OffsetMap::put(std::span<const std::byte> key, int64_t offset) {
  BROOK_ASSERT(offset >= 0);
  const std::string_view k = as_chars(key);
  if (auto it = entries_.find(k); it != entries_.end()) {
    it->second = std::max(it->second, offset);
  } else {
    const size_t cost = key.size() + kEntryOverheadBytes;
    if (cost > memory_bytes_max_ - memory_bytes_used_) return false;
    entries_.emplace(std::string(k), offset);
    memory_bytes_used_ += cost;
    BROOK_ASSERT(memory_bytes_used_ <= memory_bytes_max_);
  }
  update_latest_offset(offset);
  return true;
}

std::optional<int64_t> OffsetMap::get(std::span<const std::byte> key) const {
  const auto it = entries_.find(as_chars(key));
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void OffsetMap::update_latest_offset(int64_t offset) {
  BROOK_ASSERT(offset >= -1);
  latest_offset_ = std::max(latest_offset_, offset);
}

void OffsetMap::clear() {
  entries_.clear();
  memory_bytes_used_ = 0;
  latest_offset_ = -1;
}

// --- TxnTracker --------------------------------------------------------------------

bool TxnTracker::RangeOrder::operator()(const AbortedTxnRange& a,
                                        const AbortedTxnRange& b) const {
  return std::tie(a.first_offset, a.producer_id, a.last_offset, a.last_stable_offset) <
         std::tie(b.first_offset, b.producer_id, b.last_offset, b.last_stable_offset);
}

void TxnTracker::add_aborted(std::span<const AbortedTxnRange> aborted) {
  for (const AbortedTxnRange& range : aborted) pending_.insert(range);
}

void TxnTracker::start_aborted_up_to(int64_t offset) {
  while (!pending_.empty() && pending_.begin()->first_offset <= offset) {
    const AbortedTxnRange range = *pending_.begin();
    pending_.erase(pending_.begin());
    // Its marker is behind us: a range given again for a later segment.
    if (range.last_offset <= last_offset_seen_) continue;
    auto [it, added] = ongoing_aborted_.try_emplace(range.producer_id, OngoingAbort{range, false});
    // An entry whose marker never came is replaced by the producer's newer
    // transaction (Kafka keeps the first; it cannot differ in a sound log).
    if (!added && it->second.range.last_offset < range.first_offset) {
      it->second = OngoingAbort{range, false};
    }
  }
}

bool TxnTracker::on_data_batch(const net::RecordBatchHeader& header) {
  start_aborted_up_to(header.last_offset());
  last_offset_seen_ = std::max(last_offset_seen_, header.last_offset());
  if (!header.is_transactional()) return false;
  if (auto it = ongoing_aborted_.find(header.producer_id); it != ongoing_aborted_.end()) {
    if (header.base_offset <= it->second.range.last_offset) {
      it->second.data_seen = true;
      return true;
    }
    ongoing_aborted_.erase(it);  // past its marker
  }
  ongoing_committed_.insert(header.producer_id);
  return false;
}

bool TxnTracker::on_control_batch(const net::RecordBatchHeader& header,
                                  std::optional<net::ControlRecordType> type) {
  start_aborted_up_to(header.last_offset());
  last_offset_seen_ = std::max(last_offset_seen_, header.last_offset());
  // An empty control batch was cleaned before: nothing in it to keep.
  if (!type) return true;
  switch (*type) {
    case net::ControlRecordType::kAbort: {
      const auto it = ongoing_aborted_.find(header.producer_id);
      if (it == ongoing_aborted_.end()) return true;
      const OngoingAbort ended = it->second;
      ongoing_aborted_.erase(it);
      // Keep the marker (and its index entry) while any of its data remains.
      if (ended.data_seen) retained_aborted_.push_back(ended.range);
      return !ended.data_seen;
    }
    case net::ControlRecordType::kCommit:
      return ongoing_committed_.erase(header.producer_id) == 0;
    default:
      return false;  // KRaft control records are never cleaned away
  }
}

std::vector<AbortedTxnRange> TxnTracker::take_retained_aborted() {
  return std::exchange(retained_aborted_, {});
}

// --- the passes -----------------------------------------------------------------------

absl::StatusOr<BuildMapResult> build_offset_map(const io::Buffer& segment_bytes,
                                                const BuildMapOptions& options, OffsetMap& map,
                                                TxnTracker& txns) {
  BROOK_ASSERT(options.start_offset <= options.end_offset);
  txns.add_aborted(options.aborted);
  BuildMapResult result;
  int64_t last_offset_read = -1;
  net::BatchIterator it = segment_batches(segment_bytes);
  while (true) {
    ASSIGN_OR_RETURN(const std::optional<net::BatchView> batch, it.next());
    if (!batch || batch->header.base_offset >= options.end_offset) break;
    const net::RecordBatchHeader& h = batch->header;
    RETURN_IF_ERROR(check_batch_offsets(h, last_offset_read));
    last_offset_read = h.last_offset();
    result.bytes_read += batch->bytes.size();
    if (h.is_control()) {
      ASSIGN_OR_RETURN(const std::vector<net::Record> records,
                       batch_records(*batch, options.uncompressed_batch_bytes_max));
      ASSIGN_OR_RETURN(const std::optional<net::ControlRecordType> type, control_type(h, records));
      (void)txns.on_control_batch(h, type);  // markers carry no keys to map
      result.records_read += h.records_count;
    } else if (txns.on_data_batch(h)) {
      result.records_read += h.records_count;  // aborted: never in the map
    } else {
      ASSIGN_OR_RETURN(result.progress, map_batch_keys(*batch, options, map, result));
      if (result.progress == MapProgress::kMapFull) return result;
    }
    if (h.last_offset() >= options.start_offset) {
      map.update_latest_offset(std::min(h.last_offset(), options.end_offset - 1));
    }
  }
  // Offsets may have gaps (removed by earlier cleaning): the map covers the
  // segment's whole range.
  map.update_latest_offset(std::max<int64_t>(options.end_offset - 1, -1));
  return result;
}

absl::StatusOr<CleanResult> clean_segment(const io::Buffer& segment_bytes, const OffsetMap& map,
                                          const CleanOptions& options, TxnTracker& txns) {
  BROOK_ASSERT(options.delete_retention_ms >= 0);
  txns.add_aborted(options.aborted);
  Output out;
  net::BatchIterator it = segment_batches(segment_bytes);
  while (true) {
    ASSIGN_OR_RETURN(const std::optional<net::BatchView> batch, it.next());
    if (!batch) break;
    RETURN_IF_ERROR(clean_batch(*batch, map, options, txns, out));
  }
  CleanResult result = std::move(out.result);
  result.records_removed = result.records_read - result.records_kept;
  result.aborted_retained = txns.take_retained_aborted();
  result.bytes = out.bytes.linearize();
  BROOK_ASSERT_EQ(result.bytes.size(), result.bytes_written);
  return result;
}

}  // namespace brook::storage
