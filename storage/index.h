// storage/index.h
//
// The sparse indexes of one log segment, in Kafka's file formats:
//
//   .index      offset -> byte position. Entry (8 bytes, big-endian):
//                 relative offset int32 (offset - segment base offset),
//                 position int32 (of the batch's first byte in the .log).
//               The offset is the LAST offset of the indexed batch.
//   .timeindex  timestamp -> offset. Entry (12 bytes, big-endian):
//                 timestamp int64 (largest timestamp seen in the segment so
//                 far), relative offset int32 (last offset of the batch that
//                 carried that timestamp).
//
// An entry is added after every index.interval.bytes of appended batches,
// so a lookup lands at most that many bytes before the wanted batch, and the
// segment scans batch headers from there.
//
// Both indexes live in memory (a few bytes per 4 KiB of log) and are written
// out whole when their segment stops being the active one and at clean
// shutdown. They are hints, never the truth: a loaded index is checked
// (structure here, and the segment checks an entry against the log), and an
// index that fails is rebuilt by scanning the segment.
//
// Invariants: offsets (and positions, and timestamps) strictly increase
// entry to entry; every relative offset is >= 0.
// Single event loop; owned by its Segment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "io/buffer.h"

namespace brook::storage {

inline constexpr size_t kOffsetIndexEntryBytes = 4 + 4;
inline constexpr size_t kTimeIndexEntryBytes = 8 + 4;

struct OffsetPosition {
  int64_t offset = 0;
  uint32_t position = 0;
  bool operator==(const OffsetPosition&) const = default;
};

struct TimestampOffset {
  int64_t timestamp_ms = -1;
  int64_t offset = 0;
  bool operator==(const TimestampOffset&) const = default;
};

class OffsetIndex {
 public:
  // entries_max: segment.index.bytes / kOffsetIndexEntryBytes.
  OffsetIndex(int64_t base_offset, size_t entries_max);

  int64_t base_offset() const { return base_offset_; }
  size_t size() const { return entries_.size(); }
  bool full() const { return entries_.size() >= entries_max_; }
  const std::vector<OffsetPosition>& entries() const { return entries_; }
  std::optional<OffsetPosition> last() const;

  // REQUIRES: !full(); offset and position greater than the last entry's;
  // base_offset() <= offset < base_offset() + 2^31.
  void append(int64_t offset, uint32_t position);
  // The entry with the largest offset <= target; {base_offset, 0} when none.
  OffsetPosition lookup(int64_t target) const;
  // Drops every entry with offset >= offset.
  void truncate_to(int64_t offset);
  void clear() { entries_.clear(); }

  io::Buffer encode() const;
  // DataLoss when the bytes are not a whole number of entries, an offset or
  // position does not increase, or there are more than entries_max.
  static absl::StatusOr<OffsetIndex> decode(int64_t base_offset, size_t entries_max,
                                            std::span<const std::byte> bytes);

 private:
  int64_t base_offset_;
  size_t entries_max_;
  std::vector<OffsetPosition> entries_;
};

class TimeIndex {
 public:
  // entries_max: segment.index.bytes / kTimeIndexEntryBytes.
  TimeIndex(int64_t base_offset, size_t entries_max);

  int64_t base_offset() const { return base_offset_; }
  size_t size() const { return entries_.size(); }
  bool full() const { return entries_.size() >= entries_max_; }
  const std::vector<TimestampOffset>& entries() const { return entries_; }
  std::optional<TimestampOffset> last() const;

  // Adds an entry when timestamp_ms is larger than the last entry's (and the
  // offset too); otherwise does nothing. A timestamp of -1 (no record had
  // one; the offset is then -1 too) adds nothing. REQUIRES: !full().
  void maybe_append(int64_t timestamp_ms, int64_t offset);
  // The entry with the largest timestamp <= target; {-1, base_offset} when
  // none.
  TimestampOffset lookup(int64_t target_timestamp_ms) const;
  // Drops every entry with offset >= offset.
  void truncate_to(int64_t offset);
  void clear() { entries_.clear(); }

  io::Buffer encode() const;
  static absl::StatusOr<TimeIndex> decode(int64_t base_offset, size_t entries_max,
                                          std::span<const std::byte> bytes);

 private:
  int64_t base_offset_;
  size_t entries_max_;
  std::vector<TimestampOffset> entries_;
};

}  // namespace brook::storage
