// raft/voter_set.h
//
// The voter set of a KRaft quorum with dynamic membership (KIP-853), and
// the control records that carry it in the log and in snapshots:
//
// - KRaftVersionRecord (control type 5): the finalized kraft.version.
//   0 is a static quorum (`controller.quorum.voters`); 1 allows changes.
// - VotersRecord (control type 6): the whole voter set: for each voter its
//   id, directory id, endpoints (listener name -> host:port) and the
//   kraft.version range it supports.
//
// A replica uses the latest voter set in its log, committed or not (Raft's
// one-change-at-a-time rule: a change takes effect when it is appended,
// and the leader allows a new change only once the previous one has
// committed). A truncated log falls back to the set before the truncation
// point, so the history of sets is kept by offset (VoterHistory).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/network.h"
#include "net/kafka/record_batch.h"
#include "net/kafka/wire.h"

namespace brook::raft {

// The kraft.version this code supports: 0 (static voters) and 1 (KIP-853).
inline constexpr int16_t kKRaftVersionMax = 1;

struct VoterEndpoint {
  std::string name;  // the listener name, e.g. CONTROLLER
  io::Address address;
  bool operator==(const VoterEndpoint&) const = default;
};

struct Voter {
  int32_t id = 0;
  net::Uuid directory_id;
  std::vector<VoterEndpoint> endpoints;
  int16_t min_kraft_version = 0;
  int16_t max_kraft_version = kKRaftVersionMax;
  bool operator==(const Voter&) const = default;

  // The endpoint of `listener`, else the first one.
  std::optional<io::Address> address(const std::string& listener) const;
};

using VoterSet = std::map<int32_t, Voter>;

// Endpoints from a message's listener list (AddRaftVoter, UpdateRaftVoter
// and VotersRecord all carry Name, Host and Port).
template <typename Listeners>
std::vector<VoterEndpoint> endpoints_of(const Listeners& listeners) {
  std::vector<VoterEndpoint> out;
  for (const auto& l : listeners) out.push_back(VoterEndpoint{l.name, io::Address(l.host, l.port)});
  return out;
}
// The reverse: a message's listener list (VotersRecord, DescribeQuorum).
template <typename Listener>
std::vector<Listener> listeners_of(const std::vector<VoterEndpoint>& endpoints) {
  std::vector<Listener> out;
  for (const VoterEndpoint& e : endpoints) {
    Listener l;
    l.name = e.name;
    l.host = e.address.host;
    l.port = e.address.port;
    out.push_back(std::move(l));
  }
  return out;
}

// A static voter set (kraft.version 0): ids and addresses, no directory
// ids, under `listener`.
VoterSet static_voters(const std::map<int32_t, io::Address>& voters, const std::string& listener);

// What the kraft control records in a batch, a snapshot or a bootstrap
// checkpoint say.
struct KRaftControl {
  std::optional<int16_t> kraft_version;
  std::optional<VoterSet> voters;
};

// Record values.
absl::StatusOr<io::Buffer> encode_kraft_version_record(int16_t kraft_version);
absl::StatusOr<io::Buffer> encode_voters_record(const VoterSet& voters);
absl::StatusOr<VoterSet> decode_voters_record(const io::Buffer& value);
// Appends the records `control` sets (KRaftVersionRecord, then
// VotersRecord) to a control batch being built: the leader's first batch,
// a voter change, a snapshot's voters.
absl::Status append_kraft_control(net::RecordBatchBuilder& builder, const KRaftControl& control,
                                  int64_t timestamp_ms);
// Reads the KRaftVersion and Voters records of one control batch (`bytes`
// is the whole batch). Other control records are skipped. DataLoss when a
// record of those types does not decode or a voter set is empty or repeats
// an id.
absl::StatusOr<KRaftControl> read_kraft_control(const io::Buffer& batch_bytes);

// The voter sets a replica's log holds, by the offset of the record that
// set them; the entry at offset -1 is the bootstrap set (static voters or a
// bootstrap checkpoint) and is never truncated away.
class VoterHistory {
 public:
  struct Entry {
    int64_t offset = -1;
    int16_t kraft_version = 0;
    VoterSet voters;
  };

  // Replaces everything with one entry.
  void reset(int64_t offset, int16_t kraft_version, VoterSet voters);
  // A change read at `offset` (offsets only grow). Fields left unset in
  // `control` keep their latest values.
  void add(int64_t offset, const KRaftControl& control);
  // Forgets the entries at or past `end` (the log was truncated to `end`);
  // the bootstrap entry stays.
  void truncate_to(int64_t end);

  bool empty() const { return entries_.empty(); }
  const Entry& latest() const { return entries_.back(); }
  // The entry before the latest, if any.
  const Entry* previous() const { return entries_.size() < 2 ? nullptr : &entries_[entries_.size() - 2]; }
  // The latest entry below `end` (the state a snapshot ending at `end`
  // holds); the first entry when none is.
  const Entry& before(int64_t end) const;

 private:
  std::vector<Entry> entries_;
};

}  // namespace brook::raft
