// raft/raft_node.h
//
// RaftNode: one replica of the KRaft quorum (Kafka's KafkaRaftClient) over
// the `__cluster_metadata-0` log (storage::Log).
//
// Protocol, as Kafka defines it (KIP-595, KIP-996):
// - Roles: Unattached (no known leader), Prospective (pre-voting: asks
//   the voters whether they would vote, without raising the epoch),
//   Candidate (voted for itself in a new epoch), Leader, Follower,
//   Resigned (a leader shutting down). Observers (nodes that are not voters)
//   only follow.
// - Election. A voter that hears nothing from a leader for fetch_timeout
//   (a follower) or election_timeout plus a random backoff (otherwise)
//   becomes Prospective and sends Vote with PreVote=true. A voter grants a
//   pre-vote when the candidate's log is at least as up to date as its own
//   and it has not heard from a leader within fetch_timeout. With a
//   majority of pre-votes the node becomes Candidate at epoch + 1, persists
//   its vote for itself and asks for real votes. A voter grants at most one
//   vote per epoch, and persists it (`quorum-state`) before answering.
// - Leadership. A new leader persists its state, appends a LeaderChange
//   control batch at its epoch, and sends BeginQuorumEpoch to every voter
//   until each one answers or fetches. Followers pull with Fetch; the
//   leader checks each fetch's (offset, last fetched epoch) against its log
//   and answers DivergingEpoch when they disagree, and the follower
//   truncates. A leader that has not been fetched from by a majority within
//   1.5 fetch timeouts resigns (check quorum).
// - Commit. Every replica flushes what it appends before it reports it
//   (the leader counts its own flushed offset; a follower's fetch offset is
//   flushed). The high watermark is the largest offset a majority of voters
//   hold, and moves only once it is past the leader's epoch start offset,
//   so an entry of the leader's own epoch is committed first.
//
// Listener. Committed batches (below the high watermark) are handed to the
// listener in log order, each exactly once per incarnation of the node; a
// restarted node replays its log from the start.
//
// Single event loop: all state changes happen under one mutex, so handlers
// see the state as Kafka's single poll thread would.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/context.h"
#include "io/network.h"
#include "io/scope.h"
#include "io/sync.h"
#include "io/task.h"
#include "io/time.h"
#include "net/kafka/frame.h"
#include "net/kafka/messages/describe_quorum_response.h"
#include "net/kafka/rpc.h"
#include "net/kafka/wire.h"
#include "raft/quorum_state.h"
#include "raft/snapshot.h"
#include "raft/voter_set.h"
#include "storage/log.h"

namespace brook::raft {

inline constexpr std::string_view kMetadataTopic = "__cluster_metadata";
// Kafka's fixed topic id of the metadata topic (AAAAAAAAAAAAAAAAAAAAAQ).
net::Uuid metadata_topic_id();
inline constexpr int32_t kMetadataPartition = 0;

enum class Role : uint8_t {
  kUnattached,
  kProspective,
  kCandidate,
  kLeader,
  kFollower,
  kResigned,
};
std::string_view role_name(Role role);

struct RaftConfig {
  int32_t node_id = 0;
  // controller.quorum.voters: id -> address. A static quorum
  // (kraft.version 0). Left empty, the quorum is dynamic (KIP-853): the
  // voter set comes from the bootstrap checkpoint (format --standalone or
  // --initial-controllers) and from VotersRecords in the log, and changes
  // with AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter.
  std::map<int32_t, io::Address> voters;
  // controller.quorum.bootstrap.servers: asked for the leader by a replica
  // that knows no voter (one formatted without initial controllers).
  std::vector<io::Address> bootstrap_servers;
  // This replica's log directory id and its endpoint under `listener_name`
  // (the first of controller.listener.names), as a voter set records them.
  net::Uuid directory_id;
  std::string listener_name = "CONTROLLER";
  std::optional<io::Address> advertised;
  std::string cluster_id;
  // The log's directory relative to the Disk's root.
  std::string log_dir = "__cluster_metadata-0";
  storage::LogConfig log_config;
  // controller.quorum.election.timeout.ms / election.backoff.max.ms /
  // fetch.timeout.ms / request.timeout.ms / retry.backoff.ms.
  io::Duration election_timeout{std::chrono::milliseconds(1000)};
  io::Duration election_backoff_max{std::chrono::milliseconds(1000)};
  io::Duration fetch_timeout{std::chrono::milliseconds(2000)};
  io::Duration request_timeout{std::chrono::milliseconds(2000)};
  io::Duration retry_backoff{std::chrono::milliseconds(20)};
  // Fetch long-poll and size.
  int32_t fetch_max_wait_ms = 500;
  int32_t fetch_max_bytes = 8 << 20;
  // Mutation testing only: broken replicas the simulation's checkers must
  // catch. Grant votes without persisting them first; report (and, as
  // leader, count) appended offsets before they are flushed.
  bool unsafe_skip_vote_persist = false;
  bool unsafe_ack_before_flush = false;
  // Mutation testing only: the leader accepts a voter change while the
  // previous one is still uncommitted (two changes in flight can form
  // majorities that do not overlap).
  bool unsafe_concurrent_voter_changes = false;
};

// One committed batch, as stored (a slice of the log's bytes).
struct CommittedBatch {
  int64_t base_offset = 0;
  int64_t last_offset = 0;
  int32_t epoch = 0;
  bool control = false;
  io::Buffer bytes;
};

// Receives committed batches in order. handle_commit runs on the node's
// loop and must not block.
class RaftListener {
 public:
  virtual ~RaftListener() = default;
  virtual void handle_commit(const CommittedBatch& batch) = 0;
  // The state as of a snapshot replaces whatever the listener holds; the
  // next committed batch starts at id.end_offset. `values` are the
  // snapshot's records in order.
  virtual void handle_snapshot(SnapshotId id, const std::vector<io::Buffer>& values) = 0;
  virtual void handle_leader_change(int32_t leader_id, int32_t epoch) {
    (void)leader_id;
    (void)epoch;
  }
};

// Observations for simulation checkers; they never change behaviour.
class RaftProbe {
 public:
  virtual ~RaftProbe() = default;
  virtual void became_leader(int32_t node_id, int32_t epoch) = 0;
  virtual void vote_granted(int32_t node_id, int32_t epoch, int32_t candidate) = 0;
};

struct AppendedBatch {
  int32_t epoch = 0;
  int64_t base_offset = 0;
  int64_t last_offset = 0;
};

class RaftNode {
 public:
  // Opens (recovering) the log and the quorum state.
  static io::Task<absl::StatusOr<std::unique_ptr<RaftNode>>> open(io::Context& ctx,
                                                                  RaftConfig config);
  ~RaftNode();
  RaftNode(const RaftNode&) = delete;
  RaftNode& operator=(const RaftNode&) = delete;

  void set_listener(RaftListener* listener) { listener_ = listener; }
  void set_probe(RaftProbe* probe) { probe_ = probe; }

  // Runs the replica: serves Raft RPCs on `listener` and drives elections,
  // replication and the listener. Returns only on a fatal error (the log
  // went offline); cancel it to stop the node. Requests for other APIs go
  // to `others` when given (a controller's APIs share its listener).
  io::Task<absl::Status> run(io::Listener& listener, net::RequestHandler others = nullptr);
  // Whether handle_request answers this API.
  static bool serves(int16_t api_key);

  // Answers one request frame (Vote, BeginQuorumEpoch, EndQuorumEpoch,
  // Fetch of the metadata partition, DescribeQuorum).
  io::Task<absl::StatusOr<io::BufferChain>> handle_request(net::RequestFrame frame);

  // Leader only: appends one batch holding `values` (record values, null
  // keys) at the current epoch. It returns once the batch is in the log,
  // flushed or not (wait_committed says when it is durable). NOT_LEADER_OR_FOLLOWER (as
  // FailedPrecondition) on other replicas. With `expected_base_offset`, the
  // batch is appended only if it would start there (FailedPrecondition
  // otherwise): a writer whose records name their own offset (a broker
  // epoch) checks that it computed it right.
  io::Task<absl::StatusOr<AppendedBatch>> append(std::vector<io::Buffer> values,
                                                 std::optional<int64_t> expected_base_offset = std::nullopt);
  // The offset the next appended batch gets on the leader.
  int64_t log_end_offset() const { return log_->log_end_offset(); }
  // Waits until `offset` is committed while `epoch` lasts: Ok once the high
  // watermark is past it, Aborted when the epoch changes first (the entry
  // may or may not commit), DeadlineExceeded at `deadline`.
  io::Task<absl::Status> wait_committed(int64_t offset, int32_t epoch, io::Instant deadline);
  // Writes a snapshot of the listener's state after every record below
  // end_offset (its `values`, in order), then drops the log before it: the
  // log start offset moves to end_offset and followers behind it fetch the
  // snapshot (FetchSnapshot). end_offset must be committed, past the latest
  // snapshot, and at a batch boundary the listener has seen.
  io::Task<absl::Status> snapshot(int64_t end_offset, std::vector<io::Buffer> values);
  std::optional<SnapshotId> latest_snapshot() const { return latest_snapshot_; }
  // Graceful shutdown of a leader: resigns and tells the voters
  // (EndQuorumEpoch) so that one of them takes over at once.
  io::Task<void> resign();

  Role role() const { return role_; }
  int32_t epoch() const { return state_.epoch; }
  int32_t leader_id() const { return state_.leader_id; }
  int32_t voted_id() const { return state_.voted_id; }
  int32_t node_id() const { return config_.node_id; }
  bool is_voter() const;
  // Whether this replica stands for election: a voter, or a replica whose
  // removal it has not seen committed (the previous voters may still need
  // it to elect anyone).
  bool electable() const;
  std::vector<int32_t> voter_ids() const;
  // The voter set in effect: the latest in the log, committed or not.
  const VoterSet& voters() const { return history_.latest().voters; }
  // The finalized kraft.version (0: static voters; 1: dynamic).
  int16_t kraft_version() const { return history_.latest().kraft_version; }
  // Whether the latest voter change is committed.
  bool voter_change_committed() const { return history_.latest().offset < high_watermark_; }
  int64_t high_watermark() const { return high_watermark_; }
  storage::Log& log() { return *log_; }
  const RaftConfig& config() const { return config_; }
  // DescribeQuorum's partition answer as this replica sees it.
  net::DescribeQuorumResponse::PartitionData describe() const;

 private:
  struct Progress {
    int64_t end_offset = -1;
    std::optional<io::Instant> last_fetch;
    bool acknowledged = false;
    // The leader's log end when this replica last fetched, and when the
    // replica last reached the leader's log end (Kafka's
    // lastCaughtUpTimestamp): a replica may join the voters only when it
    // is caught up.
    int64_t leader_end_at_last_fetch = -1;
    std::optional<io::Instant> last_caught_up;
    net::Uuid directory_id;  // as its last fetch named it
  };
  // Whether this replica's fetches count as voter `id`'s: the directory id
  // they name (if any) is the voter's (a node that lost its disk comes back
  // with a new one and is not the voter it was).
  bool is_voter_key(int32_t id, const Progress& p) const;

  RaftNode(io::Context& ctx, RaftConfig config, std::unique_ptr<storage::Log> log);

  // State changes; REQUIRE the mutex. Each persists before it returns.
  io::Task<absl::Status> persist();
  io::Task<absl::Status> become_unattached(int32_t epoch, int32_t voted_id);
  io::Task<absl::Status> become_follower(int32_t epoch, int32_t leader_id);
  io::Task<absl::Status> become_prospective();
  io::Task<absl::Status> become_candidate();
  io::Task<absl::Status> become_leader();
  // An RPC answer or request names epoch/leader: follow when it is newer.
  io::Task<absl::Status> observe_leader(int32_t epoch, int32_t leader_id);
  void changed();
  void reset_election_deadline();

  // Background loops.
  io::Task<absl::Status> wait_failure();
  io::Task<void> timer_loop();
  io::Task<void> fetch_loop();
  io::Task<void> deliver_loop();
  io::Task<void> send_votes(uint64_t generation, bool pre_vote);
  io::Task<void> request_vote(uint64_t generation, int32_t voter, bool pre_vote);
  io::Task<void> send_begin_epoch(uint64_t generation, int32_t voter);
  io::Task<void> send_end_epoch(int32_t epoch, int32_t voter, std::vector<int32_t> successors);
  io::Task<void> append_leader_change(uint64_t generation);
  // Fetches from the leader `leader`, or (kNoNode) from `target`, a voter or
  // bootstrap server that may know the leader.
  io::Task<absl::Status> fetch_once(uint64_t generation, int32_t leader, net::Peer* target);
  // Leader: flushes an appended batch, then counts it for the high
  // watermark.
  io::Task<void> flush_appended(uint64_t generation, int64_t end);

  // Request handlers.
  io::Task<absl::StatusOr<io::BufferChain>> on_vote(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_begin_epoch(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_end_epoch(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_fetch(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_describe_quorum(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_fetch_snapshot(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_add_voter(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_remove_voter(const net::RequestFrame& frame);
  io::Task<absl::StatusOr<io::BufferChain>> on_update_voter(const net::RequestFrame& frame);

  // Voter changes (leader, mutex held). Why a change cannot start now, or
  // nullopt: the leader must have committed in its epoch and the previous
  // change must have committed.
  std::optional<std::pair<net::Error, std::string>> voter_change_blocked() const;
  // Appends a VotersRecord with `voters`; the offset it took.
  io::Task<absl::StatusOr<int64_t>> append_voters(VoterSet voters);
  // Appends `next` (holding the mutex, `lock`), releases the mutex and
  // waits until the change commits, the epoch ends or `deadline` passes:
  // the answer to the request that asked for it.
  io::Task<std::pair<net::Error, std::string>> change_voters(VoterSet next, io::SemaphoreUnits lock,
                                                             io::Instant deadline);
  // An AddRaftVoter / RemoveRaftVoter answer (logged when it is an error).
  template <typename Response>
  absl::StatusOr<io::BufferChain> answer_voter_change(const net::RequestFrame& frame, std::string_view what,
                                                      int32_t voter_id, net::Error e, std::string message);
  // A voter whose recorded endpoint differs from its own tells the leader
  // (UpdateRaftVoter), once per epoch.
  io::Task<void> send_update_voter(uint64_t generation, int32_t leader);
  // Reads the kraft control records of appended batches into history_.
  absl::Status scan_control_batches(const io::Buffer& records);
  // At open: the voter set from the bootstrap, the snapshot and the log.
  io::Task<absl::Status> load_voters(const std::optional<KRaftControl>& bootstrap);
  // Follower: fetches snapshot `id` from the leader and installs it (the
  // log restarts at its end). Called with the mutex released.
  io::Task<absl::Status> fetch_snapshot(uint64_t generation, int32_t leader, SnapshotId id);
  // Makes `id` (already on disk) the latest snapshot and removes older ones.
  io::Task<absl::Status> adopt_snapshot(SnapshotId id, io::Buffer bytes);

  // Leader bookkeeping.
  void update_high_watermark();
  void set_high_watermark(int64_t hw);
  bool log_up_to_date(int32_t last_epoch, int64_t last_offset) const;
  int32_t last_epoch() const;
  size_t majority() const { return voters().size() / 2 + 1; }
  // How many of `ids` are voters.
  size_t voters_among(const std::set<int32_t>& ids) const;
  bool dynamic() const { return config_.voters.empty(); }
  io::Duration random_backoff(io::Duration max);
  net::Peer* peer(int32_t id);
  absl::Status fail(absl::Status status);

  io::Context* ctx_;
  RaftConfig config_;
  std::unique_ptr<storage::Log> log_;
  io::Mutex mu_;
  ElectionState state_;
  Role role_ = Role::kUnattached;
  // Bumped by every state change; tasks of an older generation stop.
  uint64_t generation_ = 0;
  int64_t high_watermark_ = 0;
  int64_t epoch_start_offset_ = -1;  // leader: its LeaderChange batch
  io::Instant election_deadline_{};
  io::Instant fetch_deadline_{};       // follower: when the leader is presumed gone
  std::optional<io::Instant> last_leader_contact_;
  std::set<int32_t> granted_;          // prospective/candidate: votes so far
  std::set<int32_t> rejected_;
  std::map<int32_t, Progress> progress_;  // leader: every replica that fetches
  std::map<int32_t, std::unique_ptr<net::Peer>> peers_;
  // Connections replaced by one to a newer address while calls in flight
  // may still use them; freed at the next replacement once idle.
  std::vector<std::unique_ptr<net::Peer>> retired_peers_;
  std::vector<std::unique_ptr<net::Peer>> bootstrap_peers_;
  VoterHistory history_;
  // Leaders' addresses learned from answers (NodeEndpoints) and requests.
  std::map<int32_t, io::Address> learned_addresses_;
  // Where the leader of an epoch said it listens (BeginQuorumEpoch): ahead
  // of the voter set, which may still name the address the leader had
  // before it restarted (until its UpdateRaftVoter commits).
  struct LeaderAddress {
    int32_t id = -1;
    int32_t epoch = -1;
    io::Address address;
  };
  std::optional<LeaderAddress> leader_address_;
  // Where `leader_id` listens as this node knows it (for NodeEndpoints).
  std::optional<io::Address> leader_endpoint(int32_t leader_id) const;
  int32_t update_sent_epoch_ = -1;  // the epoch this voter sent UpdateRaftVoter in
  io::ChangeCount changed_;            // any state, HW or log change (changed())
  RaftListener* listener_ = nullptr;
  RaftProbe* probe_ = nullptr;
  int64_t delivered_ = 0;  // next offset for the listener
  std::optional<SnapshotId> latest_snapshot_;
  std::optional<io::Buffer> snapshot_bytes_;  // the latest snapshot's file
  int32_t delivered_leader_epoch_ = -1;
  absl::Status failure_;
  std::unique_ptr<io::TaskScope> scope_;
};

}  // namespace brook::raft
