// raft/snapshot.h
//
// KRaft snapshots (KIP-630): `<end offset, 20 digits>-<epoch, 10
// digits>.checkpoint` in the log directory. A snapshot with id (end offset
// E, epoch P) holds the state machine's state after every record below E;
// P is the leader epoch of the record at E - 1. The file is record
// batches: a control batch with a SnapshotHeaderRecord, batches of the
// state machine's records (values, null keys), a control batch with a
// SnapshotFooterRecord. Files are written whole and atomically
// (`.tmp` + rename + directory sync), so a snapshot either exists complete
// or not at all.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/disk.h"
#include "io/task.h"
#include "raft/voter_set.h"

namespace brook::raft {

struct SnapshotId {
  int64_t end_offset = 0;
  int32_t epoch = 0;
  friend auto operator<=>(const SnapshotId&, const SnapshotId&) = default;
};

std::string snapshot_file_name(SnapshotId id);
std::optional<SnapshotId> parse_snapshot_file_name(std::string_view name);

// The file's bytes for `values` (at most records_per_batch per data batch).
// With `kraft`, a control batch holding its KRaftVersionRecord and
// VotersRecord follows the header (as Kafka writes them).
absl::StatusOr<io::Buffer> encode_snapshot(const std::vector<io::Buffer>& values,
                                           int64_t last_contained_timestamp_ms,
                                           size_t records_per_batch = 1000,
                                           const KRaftControl* kraft = nullptr);
// The kraft control records of a snapshot that passed decode_snapshot.
absl::StatusOr<KRaftControl> snapshot_kraft_control(const io::Buffer& bytes);

// The bootstrap checkpoint of a dynamic quorum (`format --standalone` or
// `--initial-controllers`): snapshot 0-0 holding only kraft.version 1 and
// the initial voters. A replica reads it for its first voter set; it is
// not a snapshot of any state and is never handed to the listener.
inline constexpr SnapshotId kBootstrapSnapshotId{0, 0};
io::Task<absl::Status> write_bootstrap_checkpoint(io::Disk& disk, std::string dir, VoterSet voters);
// Checks a snapshot's bytes: whole batches with good CRCs, a header control
// batch first, a footer control batch last. Returns the record values in
// order. DataLoss otherwise.
absl::StatusOr<std::vector<io::Buffer>> decode_snapshot(const io::Buffer& bytes);

// Durable when it returns. `bytes` must pass decode_snapshot.
io::Task<absl::Status> write_snapshot(io::Disk& disk, std::string dir, SnapshotId id,
                                      io::Buffer bytes);
// The whole file, checked with decode_snapshot (a failing read is retried).
io::Task<absl::StatusOr<io::Buffer>> read_snapshot(io::Disk& disk, std::string dir, SnapshotId id);
// The snapshots in `dir`, oldest first; leftover temporary files are removed.
io::Task<absl::StatusOr<std::vector<SnapshotId>>> list_snapshots(io::Disk& disk, std::string dir);
io::Task<absl::Status> remove_snapshot(io::Disk& disk, std::string dir, SnapshotId id);

}  // namespace brook::raft
