// storage/leader_epoch.h
//
// The leader epoch cache of one partition replica (Kafka's
// LeaderEpochFileCache, KIP-101/KIP-279) and its `leader-epoch-checkpoint`
// file: for every leader epoch that wrote to the log, the offset of its first
// record. Followers use it to find where their log diverges from the leader's
// (OffsetsForLeaderEpoch), so they truncate only what the leader never had.
//
// Owned by its partition log; used only on that partition's event loop. The
// cache is memory only: the log writes the checkpoint with
// write_leader_epoch_checkpoint() after every change assign() reports, and may
// write after truncations lazily, as Kafka does, because log recovery
// re-applies them.
//
// Invariant: entries are strictly increasing in both epoch and start_offset,
// and every epoch and start offset is >= 0.
//
// Checkpoint file, Kafka's CheckpointFile layout (storage/checkpoint.h), every
// line ending in "\n":
//
//   0                        version (kLeaderEpochCheckpointVersion)
//   <count>                  number of entry lines
//   <epoch> <start_offset>   one line per entry, in order, one space
//
// decode() is DataLoss on any malformed file: another version, a count
// mismatch, a bad or negative number, a missing line end, trailing bytes, or
// entries that are not strictly increasing. (Kafka instead replays the lines
// through assign(), which silently drops non-monotonic ones.) Zero bytes
// decode as an empty cache, as Kafka creates the file empty.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/disk.h"
#include "io/task.h"

namespace brook::storage {

// OffsetsForLeaderEpoch's "unknown" answers.
inline constexpr int32_t kUndefinedEpoch = -1;
inline constexpr int64_t kUndefinedEpochOffset = -1;

inline constexpr int32_t kLeaderEpochCheckpointVersion = 0;
inline constexpr std::string_view kLeaderEpochCheckpointFileName = "leader-epoch-checkpoint";

struct EpochEntry {
  int32_t epoch = 0;
  int64_t start_offset = 0;

  bool operator==(const EpochEntry&) const = default;
};

// An OffsetsForLeaderEpoch answer: the largest known epoch <= the requested
// one and the offset where it ended.
struct EpochEndOffset {
  int32_t epoch = kUndefinedEpoch;
  int64_t end_offset = kUndefinedEpochOffset;

  bool operator==(const EpochEndOffset&) const = default;
};

class LeaderEpochCache {
 public:
  LeaderEpochCache() = default;

  // Records that `epoch` starts at `start_offset`, with Kafka's semantics:
  // - nothing happens when `epoch` is the latest epoch and `start_offset` is
  //   not below its start (the epoch keeps its first offset);
  // - otherwise every entry with epoch >= `epoch` or start offset >=
  //   `start_offset` is removed from the end (it conflicts with the new one),
  //   and the new entry becomes the latest. So an epoch older than the latest
  //   is not ignored: it truncates the newer entries.
  // Returns whether the entries changed (the checkpoint must be written).
  // REQUIRES: epoch >= 0, start_offset >= 0.
  bool assign(int32_t epoch, int64_t start_offset);

  std::optional<int32_t> latest_epoch() const;
  std::optional<EpochEntry> latest_entry() const;
  std::optional<EpochEntry> earliest_entry() const;

  // The epoch of the record at `offset`: that of the last entry with
  // start_offset <= offset; nullopt when offset precedes every entry.
  std::optional<int32_t> epoch_for_offset(int64_t offset) const;

  // OffsetsForLeaderEpoch (Kafka's endOffsetFor):
  // - requested_epoch == kUndefinedEpoch, an empty cache, or a requested
  //   epoch above every known one: {kUndefinedEpoch, kUndefinedEpochOffset};
  // - the latest epoch: {latest, log_end_offset};
  // - otherwise the end is the start offset of the first epoch above the
  //   requested one, and the epoch is the largest known epoch <= requested,
  //   or the requested epoch itself when it precedes every entry (its records
  //   are gone; the follower truncates to the first known epoch's start).
  EpochEndOffset end_offset_for(int32_t requested_epoch, int64_t log_end_offset) const;

  // Removes the entries with start_offset >= end_offset (the log was
  // truncated to end there). A negative end_offset (undefined) does nothing.
  // Returns whether the entries changed.
  bool truncate_from_end(int64_t end_offset);
  // Removes the entries wholly below `start_offset` (the log start moved up);
  // the entry covering `start_offset` is kept and starts there. Entries at or
  // above it are untouched. Returns whether the entries changed.
  bool truncate_from_start(int64_t start_offset);
  void clear() { entries_.clear(); }

  const std::vector<EpochEntry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }

  // The checkpoint file.
  io::Buffer encode() const;
  // DataLoss on a malformed file (see the header comment), naming the line.
  static absl::StatusOr<LeaderEpochCache> decode(std::string_view text);

 private:
  void check_invariants() const;

  std::vector<EpochEntry> entries_;
};

// Where a follower truncates when its leader answers a fetch with a
// diverging epoch (KIP-320; Kafka's AbstractFetcherThread
// getOffsetTruncationState), given the follower's epochs and log end:
// - the follower knows the leader's epoch: the earlier of both ends of it;
// - it holds only epochs below it: the end of the largest of those, and the
//   truncation is not complete (the next fetch names that older epoch, and
//   the leader answers for it);
// - it knows no epoch at or below it: the leader's end.
// Never past the follower's log end.
struct FollowerTruncation {
  int64_t offset = 0;
  bool complete = true;

  bool operator==(const FollowerTruncation&) const = default;
};
FollowerTruncation follower_truncation(const LeaderEpochCache& follower, int64_t log_end_offset,
                                       const EpochEndOffset& leader);

// A missing file reads as an empty cache. DataLoss names the file and line.
io::Task<absl::StatusOr<LeaderEpochCache>> read_leader_epoch_checkpoint(io::Disk& disk,
                                                                        std::string path);
// Replaces the file durably (storage/checkpoint.h, write_file_atomically).
io::Task<absl::Status> write_leader_epoch_checkpoint(io::Disk& disk, std::string path,
                                                     LeaderEpochCache cache);

}  // namespace brook::storage
