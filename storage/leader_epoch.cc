// storage/leader_epoch.cc
#include "storage/leader_epoch.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include <fmt/format.h>

#include "io/assert.h"
#include "io/status.h"
#include "storage/checkpoint.h"

namespace brook::storage {

namespace {

absl::Status malformed(int64_t line_number, std::string_view what) {
  return absl::DataLossError(fmt::format("line {}: {}", line_number, what));
}

// "<epoch> <start_offset>" with both numbers >= 0.
absl::StatusOr<EpochEntry> decode_entry(const CheckpointLine& line) {
  const size_t space = line.text.find(' ');
  if (space == std::string_view::npos) {
    return malformed(line.line_number, "expected '<epoch> <start_offset>'");
  }
  const std::optional<int32_t> epoch = parse_decimal_int32(line.text.substr(0, space));
  const std::optional<int64_t> start = parse_decimal_int64(line.text.substr(space + 1));
  if (!epoch.has_value() || !start.has_value() || *epoch < 0 || *start < 0) {
    return malformed(line.line_number, fmt::format("expected '<epoch> <start_offset>', got '{}'",
                                                   line.text.substr(0, 80)));
  }
  return EpochEntry{*epoch, *start};
}

}  // namespace

bool LeaderEpochCache::assign(int32_t epoch, int64_t start_offset) {
  BROOK_ASSERT_GE(epoch, 0);
  BROOK_ASSERT_GE(start_offset, 0);
  // An epoch keeps the first offset it was assigned.
  if (!entries_.empty() && entries_.back().epoch == epoch &&
      entries_.back().start_offset <= start_offset) {
    return false;
  }
  while (!entries_.empty() &&
         (entries_.back().epoch >= epoch || entries_.back().start_offset >= start_offset)) {
    entries_.pop_back();
  }
  entries_.push_back(EpochEntry{epoch, start_offset});
  check_invariants();
  return true;
}

std::optional<int32_t> LeaderEpochCache::latest_epoch() const {
  if (entries_.empty()) return std::nullopt;
  return entries_.back().epoch;
}

std::optional<EpochEntry> LeaderEpochCache::latest_entry() const {
  if (entries_.empty()) return std::nullopt;
  return entries_.back();
}

std::optional<EpochEntry> LeaderEpochCache::earliest_entry() const {
  if (entries_.empty()) return std::nullopt;
  return entries_.front();
}

std::optional<int32_t> LeaderEpochCache::epoch_for_offset(int64_t offset) const {
  // The first entry starting after `offset`; the one before it covers it.
  const auto after =
      std::upper_bound(entries_.begin(), entries_.end(), offset,
                       [](int64_t o, const EpochEntry& e) { return o < e.start_offset; });
  if (after == entries_.begin()) return std::nullopt;
  return std::prev(after)->epoch;
}

EpochEndOffset LeaderEpochCache::end_offset_for(int32_t requested_epoch,
                                                int64_t log_end_offset) const {
  if (requested_epoch == kUndefinedEpoch) return EpochEndOffset{};
  if (!entries_.empty() && entries_.back().epoch == requested_epoch) {
    return EpochEndOffset{requested_epoch, log_end_offset};
  }
  // The first entry with an epoch above the requested one.
  const auto higher =
      std::upper_bound(entries_.begin(), entries_.end(), requested_epoch,
                       [](int32_t epoch, const EpochEntry& e) { return epoch < e.epoch; });
  if (higher == entries_.end()) return EpochEndOffset{};
  if (higher == entries_.begin()) return EpochEndOffset{requested_epoch, higher->start_offset};
  return EpochEndOffset{std::prev(higher)->epoch, higher->start_offset};
}

bool LeaderEpochCache::truncate_from_end(int64_t end_offset) {
  if (end_offset < 0) return false;
  const size_t before = entries_.size();
  while (!entries_.empty() && entries_.back().start_offset >= end_offset) entries_.pop_back();
  return entries_.size() != before;
}

bool LeaderEpochCache::truncate_from_start(int64_t start_offset) {
  // The entries starting at or below `start_offset`; the last of them covers it.
  const auto covered =
      std::upper_bound(entries_.begin(), entries_.end(), start_offset,
                       [](int64_t o, const EpochEntry& e) { return o < e.start_offset; });
  if (covered == entries_.begin()) return false;
  const EpochEntry kept{std::prev(covered)->epoch, start_offset};
  const bool changed = covered - entries_.begin() > 1 || entries_.front() != kept;
  entries_.erase(entries_.begin(), std::prev(covered));
  entries_.front() = kept;
  check_invariants();
  return changed;
}

void LeaderEpochCache::check_invariants() const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    BROOK_ASSERT_GE(entries_[i].epoch, 0);
    BROOK_ASSERT_GE(entries_[i].start_offset, 0);
    if (i == 0) continue;
    BROOK_ASSERT_LT(entries_[i - 1].epoch, entries_[i].epoch);
    BROOK_ASSERT_LT(entries_[i - 1].start_offset, entries_[i].start_offset);
  }
}

io::Buffer LeaderEpochCache::encode() const {
  std::string text = fmt::format("{}\n{}\n", kLeaderEpochCheckpointVersion, entries_.size());
  for (const EpochEntry& e : entries_) text += fmt::format("{} {}\n", e.epoch, e.start_offset);
  return io::Buffer::copy_of(text);
}

absl::StatusOr<LeaderEpochCache> LeaderEpochCache::decode(std::string_view text) {
  absl::StatusOr<std::vector<CheckpointLine>> lines =
      decode_checkpoint_lines(text, kLeaderEpochCheckpointVersion);
  if (!lines.ok()) return lines.status();
  LeaderEpochCache cache;
  for (const CheckpointLine& line : *lines) {
    absl::StatusOr<EpochEntry> entry = decode_entry(line);
    if (!entry.ok()) return entry.status();
    if (!cache.entries_.empty()) {
      const EpochEntry& previous = cache.entries_.back();
      if (entry->epoch <= previous.epoch || entry->start_offset <= previous.start_offset) {
        return malformed(line.line_number,
                         fmt::format("entry ({}, {}) does not follow ({}, {})", entry->epoch,
                                     entry->start_offset, previous.epoch, previous.start_offset));
      }
    }
    cache.entries_.push_back(*entry);
  }
  cache.check_invariants();
  return cache;
}

io::Task<absl::StatusOr<LeaderEpochCache>> read_leader_epoch_checkpoint(io::Disk& disk,
                                                                        std::string path) {
  CO_ASSIGN_OR_RETURN(std::optional<io::Buffer> bytes, co_await read_whole_file_agreed(disk, path));
  if (!bytes.has_value()) co_return LeaderEpochCache();
  absl::StatusOr<LeaderEpochCache> cache = LeaderEpochCache::decode(bytes->view());
  if (!cache.ok()) co_return annotate_with_path(cache.status(), path);
  co_return cache;
}

io::Task<absl::Status> write_leader_epoch_checkpoint(io::Disk& disk, std::string path,
                                                     LeaderEpochCache cache) {
  io::Buffer bytes = cache.encode();
  co_return co_await write_file_atomically(disk, std::move(path), std::move(bytes));
}

FollowerTruncation follower_truncation(const LeaderEpochCache& follower, int64_t log_end_offset,
                                       const EpochEndOffset& leader) {
  const EpochEndOffset ours = follower.end_offset_for(leader.epoch, log_end_offset);
  if (ours.end_offset < 0) return {std::min(leader.end_offset, log_end_offset), true};
  if (ours.epoch != leader.epoch) return {std::min(ours.end_offset, log_end_offset), false};
  return {std::min({ours.end_offset, leader.end_offset, log_end_offset}), true};
}

}  // namespace brook::storage
