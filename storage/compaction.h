// storage/compaction.h
//
// The pure core of log compaction (Kafka's LogCleaner.Cleaner with
// MemoryRecords.filterTo and CleanedTransactionMetadata), working on the
// record-batch bytes of segments held in memory. It reads no files and no
// clock: the log reads segment bytes, calls these functions, and writes the
// cleaned bytes out as new segments (and rebuilds their indexes from them).
//
// One cleaning round, as the log drives it:
//
//   1. OffsetMap map(budget); TxnTracker map_txns;
//      for each dirty segment in offset order (start = first dirty offset):
//        build_offset_map(segment, {start, next segment base, aborted}, map,
//                         map_txns);               // stops early when full
//      The round cleans up to map.latest_offset() + 1.
//   2. TxnTracker clean_txns;   // a fresh one, carried across the segments
//      for each segment overlapping [0, map.latest_offset() + 1):
//        clean_segment(segment, map, options, clean_txns) -> cleaned bytes,
//        plus the aborted transactions the cleaned segment's .txnindex keeps.
//
// What survives (KIP-98, KIP-534; Kafka's Cleaner.shouldRetainRecord and
// checkBatchRetention):
//   * A data record past map.latest_offset() is kept as is. Otherwise a record
//     with a null key is dropped (compacted topics reject them), and a keyed
//     record is kept iff no later offset for its key is in the map, and, when
//     it is a tombstone (null value), its batch has no delete horizon yet or
//     the horizon has not passed.
//   * Data of aborted transactions never enters the map and is removed.
//   * A commit/abort marker may be discarded once the cleaner saw no data batch
//     of its transaction in this pass; it is then first kept with a delete
//     horizon and removed by a pass that runs after the horizon. Other control
//     records (KRaft) are always kept.
//   * KIP-534: a kept batch holding a tombstone or a discardable marker and no
//     horizon is rewritten with attribute bit 6 set and baseTimestamp =
//     current_time_ms + delete_retention_ms (record timestamps re-based).
//   * A batch left without records is kept as an empty batch (header only,
//     recordsCount 0, same base and last offset, producer id/epoch/sequence)
//     when it holds the last data offset of an active producer, or, for a
//     producer whose last entry is a marker, it is a control batch of that
//     epoch (so sequence and epoch state survive a restart), or when it ends
//     the cleaning round (its next offset is round_end_offset).
//   * A batch whose records all survive and that needs no horizon is copied
//     byte for byte. Other batches are re-encoded with their base offset,
//     last offset delta, record offset deltas, timestamps, headers, producer
//     fields, leader epoch and codec (at the codec's default level).
//
// Only message format v2 exists here (net/kafka/record_batch.h rejects magic
// 0 and 1), so Kafka's legacy delete horizon (segment mtime minus
// delete.retention.ms) is not modelled.
//
// Errors: what BatchIterator and decode_records report for corrupt input
// (DataLoss; a segment ending inside a batch is OutOfRange; a batch whose
// records decompress past the cap is ResourceExhausted), DataLoss for an
// unreadable control record key, ResourceExhausted when one key alone does
// not fit an empty OffsetMap, InvalidArgument when a rebuilt batch cannot be
// represented.
//
// Everything here is a single-loop value type; no function reads time,
// randomness or files, and no output depends on hash-map iteration order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "net/kafka/record_batch.h"

namespace brook::storage {

// A record with a null value: a delete of its key.
bool is_tombstone(const net::Record& record);

// One aborted transaction of the transaction index: the data of producer
// `producer_id` in [first_offset, last_offset] is aborted; last_offset is the
// offset of the abort marker. last_stable_offset is carried through untouched
// (the .txnindex entry's LSO), -1 when the caller has none.
struct AbortedTxnRange {
  int64_t producer_id = net::kNoProducerId;
  int64_t first_offset = 0;
  int64_t last_offset = 0;
  int64_t last_stable_offset = -1;
  bool operator==(const AbortedTxnRange&) const = default;
};

// Kafka's LastRecord: what the producer state says about an active producer.
// last_data_offset is the last offset of its last data batch; it is absent
// when its last entry is a marker that bumped the epoch.
struct ProducerLastRecord {
  std::optional<int64_t> last_data_offset = std::nullopt;
  int16_t producer_epoch = net::kNoProducerEpoch;
  bool operator==(const ProducerLastRecord&) const = default;
};
// Keyed by producer id.
using ProducerLastRecords = std::map<int64_t, ProducerLastRecord>;

// Folds the batches of `log_bytes` (whole segments, in offset order) into
// `producers` as Kafka's producer state does: a new epoch forgets the last
// data offset, a data batch sets it. A log with a producer state manager
// passes its own (which also expires producers); this serves tests and logs
// rebuilt from bytes.
absl::Status scan_producer_last_records(const io::Buffer& log_bytes,
                                        ProducerLastRecords& producers);

// ---------------------------------------------------------------------------
// OffsetMap: key bytes -> the latest offset seen for the key, within a byte
// budget (log.cleaner.dedupe.buffer.size divided among cleaner threads).
// Unlike Kafka's SkimpyOffsetMap it stores whole keys, so two keys never
// collide; every entry is charged its key bytes plus kEntryOverheadBytes.
// Invariant: memory_bytes_used() <= memory_bytes_max().
class OffsetMap {
 public:
  // Charged per entry on top of the key bytes: the offset, the table slot and
  // the string header, rounded up.
  static constexpr size_t kEntryOverheadBytes = 64;

  explicit OffsetMap(size_t memory_bytes_max) : memory_bytes_max_(memory_bytes_max) {}
  OffsetMap(const OffsetMap&) = delete;
  OffsetMap& operator=(const OffsetMap&) = delete;

  // Records `offset` as the latest offset of `key` (the larger one wins if the
  // key is present) and moves latest_offset() up to it, so a map that fills
  // in the middle of a batch still accounts for the records put so far. A key
  // already present is always updated; a new key is refused (false, nothing
  // changes) when its entry would exceed the budget.
  // REQUIRES: offset >= 0.
  [[nodiscard]] bool put(std::span<const std::byte> key, int64_t offset);
  // The latest offset of `key`, if mapped.
  std::optional<int64_t> get(std::span<const std::byte> key) const;

  // The last offset the map accounts for: every keyed record of the mapped
  // range at or below it has been put. -1 when nothing was read.
  int64_t latest_offset() const { return latest_offset_; }
  // REQUIRES: offset >= -1. Moves latest_offset() forward only.
  void update_latest_offset(int64_t offset);

  size_t size() const { return entries_.size(); }
  size_t memory_bytes_used() const { return memory_bytes_used_; }
  size_t memory_bytes_max() const { return memory_bytes_max_; }
  void clear();

 private:
  // Hashes whole keys; looked up by std::string_view without a copy.
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view key) const { return std::hash<std::string_view>()(key); }
  };
  std::unordered_map<std::string, int64_t, KeyHash, std::equal_to<>> entries_;  // lookups only
  size_t memory_bytes_max_;
  size_t memory_bytes_used_ = 0;
  int64_t latest_offset_ = -1;
};

// ---------------------------------------------------------------------------
// TxnTracker: Kafka's CleanedTransactionMetadata. Walks the batches of one
// pass in offset order (across segments), knowing the aborted transactions,
// and says which data batches are aborted and which markers may go. One
// tracker serves one build_offset_map pass; another, fresh one serves one
// cleaning pass. Its sets grow with the aborted ranges and producers given.
class TxnTracker {
 public:
  // Aborted transactions overlapping the next segment(s); giving the same
  // range again (it overlaps several segments) is harmless.
  void add_aborted(std::span<const AbortedTxnRange> aborted);

  // A data batch, in offset order: true when it belongs to an aborted
  // transaction (its records are to be removed).
  bool on_data_batch(const net::RecordBatchHeader& header);

  // A control batch, in offset order, with the type of its (first) record, or
  // nullopt when it has no records: true when it may be discarded (an empty
  // control batch; a marker whose transaction had no data batch in this
  // pass). An abort marker that must stay puts its range on retained_aborted.
  bool on_control_batch(const net::RecordBatchHeader& header,
                        std::optional<net::ControlRecordType> type);

  // The aborted transactions whose markers were kept with data since the last
  // call: the entries of the cleaned segment's transaction index.
  std::vector<AbortedTxnRange> take_retained_aborted();

 private:
  struct OngoingAbort {
    AbortedTxnRange range;
    bool data_seen = false;
  };
  struct RangeOrder {
    bool operator()(const AbortedTxnRange& a, const AbortedTxnRange& b) const;
  };
  // Moves the aborted ranges starting at or before `offset` to ongoing.
  void start_aborted_up_to(int64_t offset);

  std::set<AbortedTxnRange, RangeOrder> pending_;  // by first offset
  std::map<int64_t, OngoingAbort> ongoing_aborted_;
  std::set<int64_t> ongoing_committed_;
  std::vector<AbortedTxnRange> retained_aborted_;
  // The last offset of the last batch seen: ranges ending before it are stale.
  int64_t last_offset_seen_ = -1;
};

// ---------------------------------------------------------------------------
// Building the offset map.

// Decompressed records per batch, at most (a cap on memory, not on the log).
inline constexpr size_t kUncompressedBatchBytesMaxDefault = size_t{64} << 20;

struct BuildMapOptions {
  // Records below start_offset (already clean) are not mapped.
  int64_t start_offset = 0;
  // Where this segment's offsets end: the next segment's base offset, or the
  // first uncleanable offset for the last dirty segment. Batches from it on
  // are not read; once the segment is read the map's latest offset moves to
  // end_offset - 1 (offsets may have gaps).
  int64_t end_offset = 0;
  // Aborted transactions overlapping [start_offset, end_offset).
  std::vector<AbortedTxnRange> aborted = {};
  size_t uncompressed_batch_bytes_max = kUncompressedBatchBytesMaxDefault;
};

enum class MapProgress : uint8_t {
  // The whole segment is mapped; go on with the next one.
  kSegmentDone,
  // The map is full: it accounts for offsets up to map.latest_offset() only,
  // and this round cleans up to there.
  kMapFull,
};

struct BuildMapResult {
  MapProgress progress = MapProgress::kSegmentDone;
  int64_t records_read = 0;
  size_t bytes_read = 0;
};

// Puts the keys of the non-aborted data records of one dirty segment into
// `map` (Kafka's buildOffsetMapForSegment). `txns` carries transaction state
// from the previous segment of the same pass.
// REQUIRES: options.start_offset <= options.end_offset.
absl::StatusOr<BuildMapResult> build_offset_map(const io::Buffer& segment_bytes,
                                                const BuildMapOptions& options, OffsetMap& map,
                                                TxnTracker& txns);

// ---------------------------------------------------------------------------
// Cleaning a segment.

struct CleanOptions {
  // The time of this cleaning pass (the same for every segment of it).
  int64_t current_time_ms = 0;
  // delete.retention.ms: how long tombstones and removable markers stay after
  // the pass that first finds them.
  int64_t delete_retention_ms = 0;
  // Aborted transactions overlapping this segment (from the .txnindex).
  std::vector<AbortedTxnRange> aborted = {};
  // The producer state's last records of active producers.
  ProducerLastRecords active_producers = {};
  // The upper bound of the round's offset map (Kafka's first uncleanable
  // offset): the batch ending right before it is kept even when empty.
  std::optional<int64_t> round_end_offset = std::nullopt;
  size_t uncompressed_batch_bytes_max = kUncompressedBatchBytesMaxDefault;
};

struct CleanResult {
  // The kept batches, in offset order (empty when nothing is kept).
  io::Buffer bytes;
  int64_t batches_read = 0;
  int64_t batches_kept = 0;
  // Records of the input batches, and of those the ones written out.
  int64_t records_read = 0;
  int64_t records_kept = 0;
  int64_t records_removed = 0;
  size_t bytes_read = 0;
  size_t bytes_written = 0;
  // The last offset of the last batch kept; -1 when none.
  int64_t last_offset = -1;
  // For the time index: the largest batch maxTimestamp kept and the last
  // offset of the first batch carrying it (Kafka's shallow offset of the max
  // timestamp); kNoTimestamp and -1 when no batch has a timestamp.
  int64_t max_timestamp_ms = net::kNoTimestamp;
  int64_t offset_of_max_timestamp = -1;
  // The aborted transactions whose markers this segment kept together with
  // data: its new transaction index.
  std::vector<AbortedTxnRange> aborted_retained;
};

// Cleans one segment against `map` (Kafka's cleanInto over one segment).
// `txns` is the pass's tracker, carried across the segments in offset order;
// options.aborted is added to it first.
absl::StatusOr<CleanResult> clean_segment(const io::Buffer& segment_bytes, const OffsetMap& map,
                                          const CleanOptions& options, TxnTracker& txns);

}  // namespace brook::storage
