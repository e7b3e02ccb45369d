// storage/index.cc
#include "storage/index.h"

#include <algorithm>
#include <limits>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "io/assert.h"
#include "net/codec/endian.h"

namespace brook::storage {
namespace {

using codec::load_be;
using codec::store_be;

constexpr int64_t kRelativeOffsetMax = std::numeric_limits<int32_t>::max();
// Kafka's RecordBatch.NO_TIMESTAMP.
constexpr int64_t kNoTimestampMs = -1;

int32_t relative(int64_t base_offset, int64_t offset) {
  BROOK_ASSERT(offset >= base_offset);
  BROOK_ASSERT(offset - base_offset <= kRelativeOffsetMax);
  return static_cast<int32_t>(offset - base_offset);
}

absl::Status check_entry_bytes(std::span<const std::byte> bytes, size_t entry_bytes,
                               size_t entries_max, const char* what) {
  if (bytes.size() % entry_bytes != 0) {
    return absl::DataLossError(fmt::format("{} of {} bytes is not a whole number of {}-byte entries",
                                           what, bytes.size(), entry_bytes));
  }
  if (bytes.size() / entry_bytes > entries_max) {
    return absl::DataLossError(fmt::format("{} has {} entries, more than its limit {}", what,
                                           bytes.size() / entry_bytes, entries_max));
  }
  return absl::OkStatus();
}

}  // namespace

// --- OffsetIndex ---------------------------------------------------------

OffsetIndex::OffsetIndex(int64_t base_offset, size_t entries_max)
    : base_offset_(base_offset), entries_max_(entries_max) {
  BROOK_ASSERT(entries_max > 0);
}

std::optional<OffsetPosition> OffsetIndex::last() const {
  if (entries_.empty()) return std::nullopt;
  return entries_.back();
}

void OffsetIndex::append(int64_t offset, uint32_t position) {
  BROOK_ASSERT(!full());
  (void)relative(base_offset_, offset);
  if (!entries_.empty()) {
    BROOK_ASSERT(offset > entries_.back().offset);
    BROOK_ASSERT(position > entries_.back().position);
  }
  entries_.push_back({offset, position});
}

OffsetPosition OffsetIndex::lookup(int64_t target) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), target,
                             [](int64_t t, const OffsetPosition& e) { return t < e.offset; });
  if (it == entries_.begin()) return {base_offset_, 0};
  return *std::prev(it);
}

void OffsetIndex::truncate_to(int64_t offset) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), offset,
                             [](const OffsetPosition& e, int64_t o) { return e.offset < o; });
  entries_.erase(it, entries_.end());
}

io::Buffer OffsetIndex::encode() const {
  io::Buffer out = io::Buffer::allocate(entries_.size() * kOffsetIndexEntryBytes);
  std::byte* p = out.mutable_data();
  for (const OffsetPosition& e : entries_) {
    store_be<int32_t>(p, relative(base_offset_, e.offset));
    store_be<uint32_t>(p + 4, e.position);
    p += kOffsetIndexEntryBytes;
  }
  return out;
}

absl::StatusOr<OffsetIndex> OffsetIndex::decode(int64_t base_offset, size_t entries_max,
                                                std::span<const std::byte> bytes) {
  if (absl::Status s = check_entry_bytes(bytes, kOffsetIndexEntryBytes, entries_max, "offset index");
      !s.ok()) {
    return s;
  }
  OffsetIndex index(base_offset, entries_max);
  index.entries_.reserve(bytes.size() / kOffsetIndexEntryBytes);
  for (size_t at = 0; at < bytes.size(); at += kOffsetIndexEntryBytes) {
    const int32_t rel = load_be<int32_t>(bytes, at);
    const int32_t position = load_be<int32_t>(bytes, at + 4);
    const size_t n = at / kOffsetIndexEntryBytes;
    if (rel < 0 || position < 0) {
      return absl::DataLossError(
          fmt::format("offset index entry {} is negative ({}, {})", n, rel, position));
    }
    if (!index.entries_.empty() && (base_offset + rel <= index.entries_.back().offset ||
                                    static_cast<uint32_t>(position) <= index.entries_.back().position)) {
      return absl::DataLossError(fmt::format("offset index entry {} does not increase", n));
    }
    index.entries_.push_back({base_offset + rel, static_cast<uint32_t>(position)});
  }
  return index;
}

// --- TimeIndex -----------------------------------------------------------

TimeIndex::TimeIndex(int64_t base_offset, size_t entries_max)
    : base_offset_(base_offset), entries_max_(entries_max) {
  BROOK_ASSERT(entries_max > 0);
}

std::optional<TimestampOffset> TimeIndex::last() const {
  if (entries_.empty()) return std::nullopt;
  return entries_.back();
}

void TimeIndex::maybe_append(int64_t timestamp_ms, int64_t offset) {
  BROOK_ASSERT(!full());
  if (timestamp_ms == kNoTimestampMs) return;
  (void)relative(base_offset_, offset);
  if (!entries_.empty() &&
      (timestamp_ms <= entries_.back().timestamp_ms || offset <= entries_.back().offset)) {
    return;
  }
  entries_.push_back({timestamp_ms, offset});
}

TimestampOffset TimeIndex::lookup(int64_t target_timestamp_ms) const {
  auto it = std::upper_bound(
      entries_.begin(), entries_.end(), target_timestamp_ms,
      [](int64_t t, const TimestampOffset& e) { return t < e.timestamp_ms; });
  if (it == entries_.begin()) return {-1, base_offset_};
  return *std::prev(it);
}

void TimeIndex::truncate_to(int64_t offset) {
  // Entries are increasing in offset too.
  auto it = std::lower_bound(entries_.begin(), entries_.end(), offset,
                             [](const TimestampOffset& e, int64_t o) { return e.offset < o; });
  entries_.erase(it, entries_.end());
}

io::Buffer TimeIndex::encode() const {
  io::Buffer out = io::Buffer::allocate(entries_.size() * kTimeIndexEntryBytes);
  std::byte* p = out.mutable_data();
  for (const TimestampOffset& e : entries_) {
    store_be<int64_t>(p, e.timestamp_ms);
    store_be<int32_t>(p + 8, relative(base_offset_, e.offset));
    p += kTimeIndexEntryBytes;
  }
  return out;
}

absl::StatusOr<TimeIndex> TimeIndex::decode(int64_t base_offset, size_t entries_max,
                                            std::span<const std::byte> bytes) {
  if (absl::Status s = check_entry_bytes(bytes, kTimeIndexEntryBytes, entries_max, "time index");
      !s.ok()) {
    return s;
  }
  TimeIndex index(base_offset, entries_max);
  index.entries_.reserve(bytes.size() / kTimeIndexEntryBytes);
  for (size_t at = 0; at < bytes.size(); at += kTimeIndexEntryBytes) {
    const int64_t timestamp = load_be<int64_t>(bytes, at);
    const int32_t rel = load_be<int32_t>(bytes, at + 8);
    const size_t n = at / kTimeIndexEntryBytes;
    if (rel < 0) {
      return absl::DataLossError(fmt::format("time index entry {} has a negative offset", n));
    }
    if (!index.entries_.empty() && (timestamp <= index.entries_.back().timestamp_ms ||
                                    base_offset + rel <= index.entries_.back().offset)) {
      return absl::DataLossError(fmt::format("time index entry {} does not increase", n));
    }
    index.entries_.push_back({timestamp, base_offset + rel});
  }
  return index;
}

}  // namespace brook::storage
