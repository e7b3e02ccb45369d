// raft/quorum_state.h
//
// The `quorum-state` file of a KRaft replica: the election state that must
// survive a crash, written before the replica acts on it (a vote is
// persisted before it is granted; a new epoch before it is used). Kafka's
// JSON layout (QuorumStateData), version 0 with the static voter list:
//
//   {"clusterId":"","leaderId":1,"leaderEpoch":5,"votedId":-1,
//    "appliedOffset":0,"currentVoters":[{"voterId":1},{"voterId":2}],
//    "data_version":0}
//
// Version 1 files (no clusterId/appliedOffset/currentVoters, with
// votedDirectoryId) are read too. The file is replaced atomically
// (storage::write_file_atomically). A missing file is an empty state
// (epoch 0, nobody voted, no leader).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/disk.h"
#include "io/task.h"

namespace brook::raft {

inline constexpr int32_t kNoNode = -1;

struct ElectionState {
  int32_t epoch = 0;
  int32_t leader_id = kNoNode;
  int32_t voted_id = kNoNode;
  // The voters when the state was written (version 0 files).
  std::vector<int32_t> voters;

  bool operator==(const ElectionState&) const = default;
};

// The JSON text (version 0).
std::string encode_quorum_state(const ElectionState& state);
// DataLoss for anything that is not a quorum-state document.
absl::StatusOr<ElectionState> decode_quorum_state(std::string_view text);

// `<dir>/quorum-state`.
std::string quorum_state_path(std::string_view dir);

// Reads the file; nullopt when there is none. A file is believed only when
// two reads agree (a disk that returns a corrupted read once must not make
// a replica forget its vote); DataLoss when they never do or it does not
// parse.
io::Task<absl::StatusOr<std::optional<ElectionState>>> read_quorum_state(io::Disk& disk,
                                                                         std::string dir);
// Durable when it returns.
io::Task<absl::Status> write_quorum_state(io::Disk& disk, std::string dir, ElectionState state);

}  // namespace brook::raft
