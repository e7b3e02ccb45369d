// raft/raft_node.cc
#include "raft/raft_node.h"

#include <fmt/format.h>

#include <algorithm>

#include "io/assert.h"
#include "io/log.h"
#include "io/status.h"
#include "io/when.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/add_raft_voter_request.h"
#include "net/kafka/messages/add_raft_voter_response.h"
#include "net/kafka/messages/begin_quorum_epoch_request.h"
#include "net/kafka/messages/begin_quorum_epoch_response.h"
#include "net/kafka/messages/describe_quorum_request.h"
#include "net/kafka/messages/end_quorum_epoch_request.h"
#include "net/kafka/messages/end_quorum_epoch_response.h"
#include "net/kafka/messages/fetch_request.h"
#include "net/kafka/messages/fetch_response.h"
#include "net/kafka/messages/fetch_snapshot_request.h"
#include "net/kafka/messages/fetch_snapshot_response.h"
#include "net/kafka/messages/leader_change_message.h"
#include "net/kafka/messages/remove_raft_voter_request.h"
#include "net/kafka/messages/remove_raft_voter_response.h"
#include "net/kafka/messages/update_raft_voter_request.h"
#include "net/kafka/messages/update_raft_voter_response.h"
#include "net/kafka/messages/vote_request.h"
#include "net/kafka/messages/vote_response.h"
#include "net/kafka/record_batch.h"

namespace brook::raft {

namespace {

using namespace std::chrono_literals;

constexpr int16_t kVoteVersion = 2;
constexpr int16_t kBeginEpochVersion = 1;
constexpr int16_t kEndEpochVersion = 1;
constexpr int16_t kFetchVersion = 17;
constexpr int16_t kLeaderChangeVersion = 0;
constexpr int16_t kFetchSnapshotVersion = 1;
constexpr int16_t kUpdateVoterVersion = 0;
constexpr int32_t kSnapshotChunkBytes = 1 << 20;
constexpr io::Duration kResendBackoffMax = 1s;

int16_t err(net::Error e) { return net::code(e); }

bool cluster_matches(const std::optional<std::string>& theirs, const std::string& ours) {
  return !theirs.has_value() || theirs->empty() || ours.empty() || *theirs == ours;
}

// The single-topic, single-partition body every Raft RPC carries.
template <typename Topic, typename Partition>
Topic metadata_topic(Partition partition) {
  Topic topic;
  topic.topic_name = std::string(kMetadataTopic);
  topic.partitions.push_back(std::move(partition));
  return topic;
}

int64_t ms_of(io::Instant t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace

net::Uuid metadata_topic_id() {
  net::Uuid id;
  id.bytes[15] = 1;
  return id;
}

std::string_view role_name(Role role) {
  switch (role) {
    case Role::kUnattached: return "unattached";
    case Role::kProspective: return "prospective";
    case Role::kCandidate: return "candidate";
    case Role::kLeader: return "leader";
    case Role::kFollower: return "follower";
    case Role::kResigned: return "resigned";
  }
  return "?";
}

RaftNode::RaftNode(io::Context& ctx, RaftConfig config, std::unique_ptr<storage::Log> log)
    : ctx_(&ctx), config_(std::move(config)), log_(std::move(log)) {}

RaftNode::~RaftNode() { scope_.reset(); }

io::Task<absl::StatusOr<std::unique_ptr<RaftNode>>> RaftNode::open(io::Context& ctx,
                                                                   RaftConfig config) {
  storage::LogOptions options;
  options.dir = config.log_dir;
  options.config = config.log_config;
  CO_ASSIGN_OR_RETURN(std::unique_ptr<storage::Log> log,
                      co_await storage::Log::open(ctx.disk(), ctx.clock(), options));
  CO_ASSIGN_OR_RETURN(std::optional<ElectionState> saved,
                      co_await read_quorum_state(ctx.disk(), config.log_dir));
  CO_ASSIGN_OR_RETURN(std::vector<SnapshotId> snapshots,
                      co_await list_snapshots(ctx.disk(), config.log_dir));
  std::unique_ptr<RaftNode> node(new RaftNode(ctx, std::move(config), std::move(log)));
  if (saved.has_value()) node->state_ = *saved;
  // The bootstrap checkpoint (0-0) only names the first voters.
  std::optional<KRaftControl> bootstrap;
  if (!snapshots.empty() && snapshots.front() == kBootstrapSnapshotId) {
    CO_ASSIGN_OR_RETURN(io::Buffer bytes,
                        co_await read_snapshot(ctx.disk(), node->config_.log_dir, kBootstrapSnapshotId));
    CO_ASSIGN_OR_RETURN(KRaftControl control, snapshot_kraft_control(bytes));
    bootstrap = std::move(control);
    snapshots.erase(snapshots.begin());
  }
  if (!snapshots.empty()) {
    const SnapshotId latest = snapshots.back();
    CO_ASSIGN_OR_RETURN(io::Buffer bytes,
                        co_await read_snapshot(ctx.disk(), node->config_.log_dir, latest));
    CO_RETURN_IF_ERROR(co_await node->adopt_snapshot(latest, std::move(bytes)));
    // The log must reach the snapshot; otherwise it restarts at its end (a
    // crash after a fetched snapshot was written, before the log was reset).
    // As Kafka does: a log that ends before the snapshot, or whose last
    // epoch is older than the snapshot's, cannot continue it. (The epoch of
    // the record before the snapshot's end may be gone from the epoch cache
    // once the log start moved up to it, so it is not compared.)
    storage::Log& l = *node->log_;
    const int32_t log_epoch = l.leader_epochs().latest_epoch().value_or(0);
    if (latest.end_offset > l.log_end_offset() || latest.epoch > log_epoch) {
      CO_RETURN_IF_ERROR(co_await l.truncate_fully_and_start_at(latest.end_offset));
    }
    node->high_watermark_ = latest.end_offset;
    l.set_high_watermark(latest.end_offset);
    if (l.log_start_offset() < latest.end_offset) {
      CO_ASSIGN_OR_RETURN(net::Error e, co_await l.delete_records_before(latest.end_offset));
      (void)e;
    }
  }
  CO_RETURN_IF_ERROR(co_await node->load_voters(bootstrap));
  const int32_t self = node->config_.node_id;
  if (node->state_.leader_id == self) {
    // A leader that restarts has lost its in-memory view: it resigns.
    node->role_ = Role::kResigned;
  } else if (node->state_.leader_id >= 0) {
    node->role_ = Role::kFollower;
  } else {
    node->role_ = Role::kUnattached;
  }
  node->fetch_deadline_ = ctx.clock().now() + node->config_.fetch_timeout;
  node->reset_election_deadline();
  ctx.log().info("raft: opened epoch={} leader={} voted={} role={} log end={} voters={} kraft.version={}",
                 node->state_.epoch, node->state_.leader_id, node->state_.voted_id,
                 role_name(node->role_), node->log_->log_end_offset(),
                 fmt::join(node->voter_ids(), ","), node->kraft_version());
  co_return node;
}

std::vector<int32_t> RaftNode::voter_ids() const {
  std::vector<int32_t> ids;
  for (const auto& entry : voters()) ids.push_back(entry.first);
  return ids;
}

bool RaftNode::is_voter() const {
  auto it = voters().find(config_.node_id);
  if (it == voters().end()) return false;
  // A voter is a replica key (id, directory id): a node whose disk was
  // replaced is not the voter it was.
  return it->second.directory_id.is_zero() || config_.directory_id.is_zero() ||
         it->second.directory_id == config_.directory_id;
}

bool RaftNode::electable() const {
  if (is_voter()) return true;
  if (!dynamic() || history_.latest().offset < high_watermark_) return false;
  const VoterHistory::Entry* previous = history_.previous();
  return previous != nullptr && previous->voters.contains(config_.node_id);
}

bool RaftNode::is_voter_key(int32_t id, const Progress& p) const {
  auto v = voters().find(id);
  return v != voters().end() && (v->second.directory_id.is_zero() || p.directory_id.is_zero() ||
                                 v->second.directory_id == p.directory_id);
}

size_t RaftNode::voters_among(const std::set<int32_t>& ids) const {
  size_t n = 0;
  for (int32_t id : ids) n += voters().contains(id) ? 1 : 0;
  return n;
}

absl::Status RaftNode::scan_control_batches(const io::Buffer& records) {
  if (!dynamic()) return absl::OkStatus();
  net::BatchIterator it(records);
  while (true) {
    ASSIGN_OR_RETURN(std::optional<net::BatchView> next, it.next());
    if (!next.has_value()) break;
    if (!next->header.is_control()) continue;
    ASSIGN_OR_RETURN(KRaftControl control, read_kraft_control(next->bytes));
    if (control.voters.has_value() || control.kraft_version.has_value()) {
      history_.add(next->header.last_offset(), control);
      ctx_->log().info("raft: voters {} (kraft.version {}) at offset {}", fmt::join(voter_ids(), ","),
                       kraft_version(), next->header.last_offset());
    }
  }
  return absl::OkStatus();
}

io::Task<absl::Status> RaftNode::load_voters(const std::optional<KRaftControl>& bootstrap) {
  if (!dynamic()) {
    history_.reset(-1, 0, static_voters(config_.voters, config_.listener_name));
    co_return absl::OkStatus();
  }
  if (bootstrap.has_value() && bootstrap->voters.has_value()) {
    history_.reset(-1, bootstrap->kraft_version.value_or(kKRaftVersionMax), *bootstrap->voters);
  } else {
    history_.reset(-1, 0, {});  // learned from the leader's log
  }
  if (latest_snapshot_.has_value()) {
    CO_ASSIGN_OR_RETURN(KRaftControl control, snapshot_kraft_control(*snapshot_bytes_));
    if (control.voters.has_value()) {
      history_.reset(latest_snapshot_->end_offset - 1, control.kraft_version.value_or(kraft_version()),
                     *control.voters);
    }
  }
  int64_t offset = log_->log_start_offset();
  while (offset < log_->log_end_offset()) {
    CO_ASSIGN_OR_RETURN(storage::ReadResult read,
                        co_await log_->read(offset, 1 << 20, storage::ReadBound::kLogEnd, true));
    if (read.error != net::Error::kNone || read.records.empty()) {
      co_return absl::DataLossError(fmt::format("raft: reading the log at {} for its voters: {}", offset,
                                                net::error_name(net::code(read.error))));
    }
    CO_RETURN_IF_ERROR(scan_control_batches(read.records));
    net::BatchIterator it(read.records);
    while (true) {
      CO_ASSIGN_OR_RETURN(std::optional<net::BatchView> next, it.next());
      if (!next.has_value()) break;
      offset = next->header.next_offset();
    }
  }
  co_return absl::OkStatus();
}

// --- state changes -----------------------------------------------------------

absl::Status RaftNode::fail(absl::Status status) {
  if (failure_.ok()) failure_ = status;
  changed();
  return status;
}

io::Task<absl::Status> RaftNode::persist() {
  ElectionState s = state_;
  s.voters = voter_ids();
  absl::Status status = co_await write_quorum_state(ctx_->disk(), config_.log_dir, std::move(s));
  if (!status.ok()) co_return fail(std::move(status));
  co_return absl::OkStatus();
}

void RaftNode::changed() {
  changed_.notify();
  if (listener_ != nullptr) {
    const int32_t leader = role_ == Role::kLeader || role_ == Role::kFollower ? state_.leader_id
                                                                               : kNoNode;
    if (leader >= 0 && state_.epoch != delivered_leader_epoch_) {
      delivered_leader_epoch_ = state_.epoch;
      listener_->handle_leader_change(leader, state_.epoch);
    }
  }
}

io::Duration RaftNode::random_backoff(io::Duration max) {
  if (max.count() <= 0) return io::Duration(0);
  return io::Duration(static_cast<int64_t>(ctx_->random().uniform(static_cast<uint64_t>(max.count()))));
}

void RaftNode::reset_election_deadline() {
  election_deadline_ =
      ctx_->clock().now() + config_.election_timeout + random_backoff(config_.election_timeout);
}

io::Task<absl::Status> RaftNode::become_unattached(int32_t epoch, int32_t voted_id) {
  state_.epoch = epoch;
  state_.leader_id = kNoNode;
  state_.voted_id = voted_id;
  role_ = Role::kUnattached;
  ++generation_;
  reset_election_deadline();
  changed();
  co_return co_await persist();
}

io::Task<absl::Status> RaftNode::become_follower(int32_t epoch, int32_t leader_id) {
  if (epoch != state_.epoch) state_.voted_id = kNoNode;
  state_.epoch = epoch;
  state_.leader_id = leader_id;
  role_ = Role::kFollower;
  ++generation_;
  // Only a fetch answered by the leader (or its BeginQuorumEpoch) counts
  // as contact: hearing of a leader from another voter does not make it
  // alive, and must not make this voter refuse pre-votes.
  last_leader_contact_.reset();
  fetch_deadline_ = ctx_->clock().now() + config_.fetch_timeout;
  ctx_->log().info("raft: following {} in epoch {}", leader_id, epoch);
  changed();
  co_return co_await persist();
}

io::Task<absl::Status> RaftNode::become_prospective() {
  role_ = Role::kProspective;
  ++generation_;
  granted_ = {config_.node_id};
  rejected_.clear();
  reset_election_deadline();
  changed();
  if (voters_among(granted_) >= majority()) co_return co_await become_candidate();
  scope_->spawn(send_votes(generation_, /*pre_vote=*/true));
  co_return absl::OkStatus();
}

io::Task<absl::Status> RaftNode::become_candidate() {
  state_.epoch += 1;
  state_.voted_id = config_.node_id;
  state_.leader_id = kNoNode;
  role_ = Role::kCandidate;
  ++generation_;
  granted_ = {config_.node_id};
  rejected_.clear();
  reset_election_deadline();
  changed();
  CO_RETURN_IF_ERROR(co_await persist());
  ctx_->log().info("raft: candidate in epoch {}", state_.epoch);
  if (voters_among(granted_) >= majority()) co_return co_await become_leader();
  scope_->spawn(send_votes(generation_, /*pre_vote=*/false));
  co_return absl::OkStatus();
}

io::Task<absl::Status> RaftNode::become_leader() {
  state_.leader_id = config_.node_id;
  role_ = Role::kLeader;
  ++generation_;
  const uint64_t generation = generation_;
  progress_.clear();
  const io::Instant now = ctx_->clock().now();
  for (const auto& entry : voters()) {
    if (entry.first == config_.node_id) continue;
    Progress& p = progress_[entry.first];
    p.last_fetch = now;  // the check-quorum clock starts with the epoch
  }
  CO_RETURN_IF_ERROR(co_await persist());
  ctx_->log().info("raft: leader of epoch {} at offset {}", state_.epoch, log_->log_end_offset());
  if (probe_ != nullptr) probe_->became_leader(config_.node_id, state_.epoch);

  // The LeaderChange control batch opens the epoch.
  net::LeaderChangeMessage message;
  message.version_ = kLeaderChangeVersion;
  message.leader_id = config_.node_id;
  for (const auto& entry : voters()) {
    net::LeaderChangeMessage::Voter v;
    v.voter_id = entry.first;
    message.voters.push_back(v);
  }
  for (int32_t id : granted_) {
    net::LeaderChangeMessage::Voter v;
    v.voter_id = id;
    message.granting_voters.push_back(v);
  }
  io::BufferChain value_chain;
  CO_RETURN_IF_ERROR(net::encode_to(message, kLeaderChangeVersion, &value_chain));
  std::string value_bytes;
  for (const io::Buffer& part : value_chain.parts()) value_bytes.append(part.view());
  net::RecordBatchOptions options;
  options.partition_leader_epoch = state_.epoch;
  options.control = true;
  net::RecordBatchBuilder builder(options);
  net::NewRecord record;
  record.timestamp_ms = ctx_->clock().wall_now().time_since_epoch().count() / 1'000'000;
  record.key = net::encode_control_record_key({.type = net::ControlRecordType::kLeaderChange});
  record.value = io::Buffer::copy_of(value_bytes);
  builder.append(std::move(record));
  // The first leader of a dynamic quorum writes the bootstrap voters into
  // the log, so that replicas that fetch it from offset 0 learn them.
  KRaftControl kraft;
  if (dynamic() && history_.latest().offset < 0 && kraft_version() >= 1) {
    kraft.kraft_version = kraft_version();
    kraft.voters = voters();
    CO_RETURN_IF_ERROR(append_kraft_control(builder, kraft, record.timestamp_ms));
  }
  CO_ASSIGN_OR_RETURN(io::Buffer batch, builder.build());
  epoch_start_offset_ = log_->log_end_offset();
  absl::StatusOr<storage::AppendResult> appended =
      co_await log_->append_as_leader(std::move(batch), state_.epoch, storage::AppendOrigin::kCoordinator);
  if (!appended.ok()) co_return fail(appended.status());
  if (!appended->ok()) {
    co_return fail(absl::InternalError(
        fmt::format("raft: leader change batch rejected: {}", appended->error_message)));
  }
  if (kraft.voters.has_value()) history_.add(appended->last_offset, kraft);
  absl::Status flushed = co_await log_->flush();
  if (!flushed.ok()) co_return fail(std::move(flushed));
  if (generation_ != generation) co_return absl::OkStatus();
  update_high_watermark();
  changed();
  for (const auto& entry : voters()) {
    if (entry.first != config_.node_id) scope_->spawn(send_begin_epoch(generation, entry.first));
  }
  co_return absl::OkStatus();
}

io::Task<absl::Status> RaftNode::observe_leader(int32_t epoch, int32_t leader_id) {
  if (epoch > state_.epoch) {
    if (leader_id >= 0 && leader_id != config_.node_id) co_return co_await become_follower(epoch, leader_id);
    co_return co_await become_unattached(epoch, kNoNode);
  }
  if (epoch == state_.epoch && leader_id >= 0 && leader_id != config_.node_id &&
      (role_ == Role::kUnattached || role_ == Role::kProspective || role_ == Role::kCandidate)) {
    co_return co_await become_follower(epoch, leader_id);
  }
  co_return absl::OkStatus();
}

io::Task<void> RaftNode::resign() {
  auto lock = co_await mu_.lock();
  if (role_ != Role::kLeader) co_return;
  role_ = Role::kResigned;
  ++generation_;
  reset_election_deadline();
  changed();
  // Successors: the voters furthest along first.
  std::vector<std::pair<int64_t, int32_t>> order;
  for (const auto& [id, p] : progress_) {
    if (voters().contains(id)) order.push_back({-p.end_offset, id});
  }
  std::sort(order.begin(), order.end());
  std::vector<int32_t> successors;
  for (const auto& entry : order) successors.push_back(entry.second);
  for (int32_t id : successors) scope_->spawn(send_end_epoch(state_.epoch, id, successors));
}

// --- leader bookkeeping ------------------------------------------------------

// The epoch of the last record held: the log's, or the snapshot's when the
// log holds nothing past it (a follower that just installed one).
int32_t RaftNode::last_epoch() const {
  if (latest_snapshot_.has_value() && log_->log_end_offset() <= latest_snapshot_->end_offset) {
    return latest_snapshot_->epoch;
  }
  return log_->leader_epochs().latest_epoch().value_or(0);
}

bool RaftNode::log_up_to_date(int32_t their_epoch, int64_t their_end) const {
  const int32_t mine = last_epoch();
  if (their_epoch != mine) return their_epoch > mine;
  return their_end >= log_->log_end_offset();
}

void RaftNode::set_high_watermark(int64_t hw) {
  if (hw <= high_watermark_) return;
  high_watermark_ = hw;
  log_->set_high_watermark(hw);
  changed();
  if (role_ == Role::kLeader && !is_voter() && history_.latest().offset < hw && scope_ != nullptr) {
    // This leader's removal committed: it steps down, and the voters elect
    // one of their own.
    ctx_->log().info("raft: leader {} is no longer a voter; resigning", config_.node_id);
    scope_->spawn(resign());
  }
}

void RaftNode::update_high_watermark() {
  if (role_ != Role::kLeader) return;
  std::vector<int64_t> offsets;
  for (const auto& entry : voters()) {
    if (entry.first == config_.node_id) {
      offsets.push_back(config_.unsafe_ack_before_flush
                            ? log_->log_end_offset()
                            : std::min(log_->recovery_point(), log_->log_end_offset()));
    } else {
      auto it = progress_.find(entry.first);
      offsets.push_back(it == progress_.end() || !is_voter_key(entry.first, it->second) ? -1
                                                                                      : it->second.end_offset);
    }
  }
  if (offsets.empty()) return;
  std::sort(offsets.begin(), offsets.end(), std::greater<>());
  const int64_t candidate = offsets[majority() - 1];
  if (candidate > epoch_start_offset_) set_high_watermark(candidate);
}

net::Peer* RaftNode::peer(int32_t id) {
  std::optional<io::Address> address;
  if (leader_address_.has_value() && leader_address_->id == id && leader_address_->epoch == state_.epoch) {
    address = leader_address_->address;
  } else if (auto v = voters().find(id); v != voters().end()) {
    address = v->second.address(config_.listener_name);
  }
  if (!address.has_value()) {
    auto learned = learned_addresses_.find(id);
    if (learned != learned_addresses_.end()) address = learned->second;
  }
  auto it = peers_.find(id);
  if (it != peers_.end()) {
    if (!address.has_value() || it->second->address() == *address) return it->second.get();
    // The node moved (a new voter set, or its own word as leader). The old
    // connection stays until no call uses it.
    std::erase_if(retired_peers_, [](const std::unique_ptr<net::Peer>& p) { return p->in_flight() == 0; });
    retired_peers_.push_back(std::move(it->second));
    peers_.erase(it);
  }
  if (!address.has_value()) return nullptr;
  auto p = std::make_unique<net::Peer>(ctx_->network(), ctx_->clock(), *address,
                                       fmt::format("raft-{}", config_.node_id));
  net::Peer* raw = p.get();
  peers_.emplace(id, std::move(p));
  return raw;
}

std::optional<io::Address> RaftNode::leader_endpoint(int32_t leader_id) const {
  if (leader_id == config_.node_id) {
    if (config_.advertised.has_value()) return config_.advertised;
    if (auto v = voters().find(config_.node_id); v != voters().end()) return v->second.address(config_.listener_name);
    return std::nullopt;
  }
  if (leader_address_.has_value() && leader_address_->id == leader_id && leader_address_->epoch == state_.epoch) {
    return leader_address_->address;
  }
  if (auto v = voters().find(leader_id); v != voters().end()) return v->second.address(config_.listener_name);
  if (auto l = learned_addresses_.find(leader_id); l != learned_addresses_.end()) return l->second;
  return std::nullopt;
}

net::DescribeQuorumResponse::PartitionData RaftNode::describe() const {
  net::DescribeQuorumResponse::PartitionData d;
  d.partition_index = kMetadataPartition;
  d.leader_id = role_ == Role::kLeader || role_ == Role::kFollower ? state_.leader_id : kNoNode;
  d.leader_epoch = state_.epoch;
  d.high_watermark = high_watermark_;
  const int64_t now_ms = ms_of(ctx_->clock().now());
  auto replica = [&](int32_t id, const Progress* p) {
    net::DescribeQuorumResponse::ReplicaState r;
    r.replica_id = id;
    if (auto v = voters().find(id); v != voters().end()) r.replica_directory_id = v->second.directory_id;
    if (id == config_.node_id) r.replica_directory_id = config_.directory_id;
    if (id == config_.node_id) {
      r.log_end_offset = log_->log_end_offset();
      r.last_fetch_timestamp = now_ms;
      r.last_caught_up_timestamp = now_ms;
    } else if (p != nullptr) {
      r.log_end_offset = p->end_offset;
      if (p->last_fetch.has_value()) r.last_fetch_timestamp = ms_of(*p->last_fetch);
    } else {
      r.log_end_offset = -1;
    }
    return r;
  };
  for (const auto& entry : voters()) {
    auto it = progress_.find(entry.first);
    d.current_voters.push_back(replica(entry.first, it == progress_.end() ? nullptr : &it->second));
  }
  for (const auto& [id, p] : progress_) {
    if (!voters().contains(id)) d.observers.push_back(replica(id, &p));
  }
  return d;
}

// --- the loops ---------------------------------------------------------------

io::Task<absl::Status> RaftNode::run(io::Listener& listener, net::RequestHandler others) {
  scope_ = std::make_unique<io::TaskScope>(co_await io::this_executor());
  scope_->spawn(timer_loop());
  scope_->spawn(fetch_loop());
  scope_->spawn(deliver_loop());
  net::RequestHandler handler = [this, others = std::move(others)](net::RequestFrame frame) {
    if (others != nullptr && !serves(frame.header.request_api_key)) return others(std::move(frame));
    return handle_request(std::move(frame));
  };
  auto first = co_await io::when_first(net::serve(listener, std::move(handler)), wait_failure());
  scope_.reset();
  if (first.index() == 0) co_return std::get<0>(first);
  co_return std::get<1>(first);
}

io::Task<absl::Status> RaftNode::wait_failure() {
  while (failure_.ok()) co_await changed_.changed_since(changed_.seen());
  co_return failure_;
}

io::Task<void> RaftNode::timer_loop() {
  while (true) {
    const uint64_t seen = changed_.seen();
    io::Instant deadline = io::Instant::max();
    const bool voter = electable();
    switch (role_) {
      case Role::kUnattached:
      case Role::kProspective:
      case Role::kCandidate:
      case Role::kResigned:
        if (voter) deadline = election_deadline_;
        break;
      case Role::kFollower:
        if (voter) deadline = fetch_deadline_;
        break;
      case Role::kLeader:
        deadline = ctx_->clock().now() + config_.fetch_timeout / 2;
        break;
    }
    if (deadline != io::Instant::max() && ctx_->clock().now() >= deadline) {
      auto lock = co_await mu_.lock();
      const io::Instant now = ctx_->clock().now();
      absl::Status s;
      switch (role_) {
        case Role::kUnattached:
        case Role::kProspective:
        case Role::kCandidate:
        case Role::kResigned:
          if (voter && now >= election_deadline_) s = co_await become_prospective();
          break;
        case Role::kFollower:
          if (voter && now >= fetch_deadline_) {
            ctx_->log().info("raft: no word from leader {} in epoch {}", state_.leader_id, state_.epoch);
            s = co_await become_prospective();
          }
          break;
        case Role::kLeader:
          break;
      }
      (void)s;  // a failed persist took the node down (failure_)
      continue;
    }
    if (role_ == Role::kLeader) {
      co_await io::with_deadline(ctx_->clock(), deadline, changed_.changed_since(seen));
      if (role_ != Role::kLeader) continue;
      // Check quorum: a leader that a majority has not fetched from within
      // 1.5 fetch timeouts resigns.
      const io::Instant now = ctx_->clock().now();
      const io::Instant cutoff = now - config_.fetch_timeout * 3 / 2;
      size_t live = is_voter() ? 1 : 0;
      for (const auto& [id, p] : progress_) {
        if (id != config_.node_id && is_voter_key(id, p) && p.last_fetch.has_value() && *p.last_fetch >= cutoff) {
          ++live;
        }
      }
      // A leader whose own removal is not committed yet stays: it must
      // still bring the new voters the change (they may lack it, and then
      // cannot elect anyone without this node's vote); it resigns once the
      // removal commits.
      if (live < majority() && is_voter()) {
        ctx_->log().info("raft: leader of epoch {} lost its quorum; resigning", state_.epoch);
        co_await resign();
      }
      continue;
    }
    if (deadline == io::Instant::max()) {
      co_await changed_.changed_since(seen);
    } else {
      co_await io::with_deadline(ctx_->clock(), deadline, changed_.changed_since(seen));
    }
  }
}

io::Task<void> RaftNode::send_votes(uint64_t generation, bool pre_vote) {
  for (const auto& entry : voters()) {
    if (entry.first == config_.node_id) continue;
    scope_->spawn(request_vote(generation, entry.first, pre_vote));
  }
  co_return;
}

io::Task<void> RaftNode::request_vote(uint64_t generation, int32_t voter, bool pre_vote) {
  io::Duration backoff = config_.retry_backoff;
  while (generation_ == generation) {
    net::VoteRequest request;
    request.cluster_id = config_.cluster_id;
    request.voter_id = voter;
    net::VoteRequest::PartitionData p;
    p.partition_index = kMetadataPartition;
    p.candidate_epoch = pre_vote ? state_.epoch + 1 : state_.epoch;
    p.candidate_id = config_.node_id;
    p.candidate_directory_id = config_.directory_id;
    if (auto v = voters().find(voter); v != voters().end()) p.voter_directory_id = v->second.directory_id;
    p.last_offset_epoch = last_epoch();
    p.last_offset = log_->log_end_offset();
    p.pre_vote = pre_vote;
    request.topics.push_back(metadata_topic<net::VoteRequest::TopicData>(p));
    net::Peer* target = peer(voter);
    if (target == nullptr) co_return;
    absl::StatusOr<net::VoteResponse> response =
        co_await target->call<net::VoteResponse>(request, kVoteVersion, config_.request_timeout);
    if (generation_ != generation) co_return;
    if (!response.ok() || response->error_code != 0 || response->topics.size() != 1 ||
        response->topics[0].partitions.size() != 1) {
      co_await ctx_->clock().sleep_for(backoff);
      backoff = std::min(backoff * 2, kResendBackoffMax);
      continue;
    }
    const net::VoteResponse::PartitionData r = response->topics[0].partitions[0];
    auto lock = co_await mu_.lock();
    if (generation_ != generation) co_return;
    // A newer epoch ends this election. A refusal naming this epoch's
    // leader sends this node back to following it; a grant from a voter
    // that still follows the old leader counts (it has not heard from it
    // within the fetch timeout either).
    if (r.leader_epoch > state_.epoch ||
        (!r.vote_granted && r.leader_epoch == state_.epoch && r.leader_id >= 0 &&
         r.leader_id != config_.node_id)) {
      for (const net::VoteResponse::NodeEndpoint& e : response->node_endpoints) {
        if (e.node_id == r.leader_id && e.node_id >= 0 && e.port > 0) {
          leader_address_ = LeaderAddress{e.node_id, r.leader_epoch, io::Address(e.host, e.port)};
        }
      }
      (void)co_await observe_leader(r.leader_epoch, r.leader_id);
      co_return;
    }
    if (r.error_code != 0) {
      rejected_.insert(voter);
      co_return;
    }
    ctx_->log().debug("raft: {}vote from {} in epoch {}: {}", pre_vote ? "pre-" : "", voter,
                      r.leader_epoch, r.vote_granted ? "granted" : "refused");
    if (r.vote_granted) {
      granted_.insert(voter);
    } else {
      rejected_.insert(voter);
    }
    if (voters_among(granted_) >= majority()) {
      // (Not a ?: of two co_awaits: GCC 12 evaluates both operands.)
      if (pre_vote) {
        (void)co_await become_candidate();
      } else {
        (void)co_await become_leader();
      }
    }
    co_return;
  }
}

io::Task<void> RaftNode::send_begin_epoch(uint64_t generation, int32_t voter) {
  io::Duration backoff = config_.retry_backoff;
  while (generation_ == generation) {
    auto it = progress_.find(voter);
    if (it == progress_.end() || it->second.acknowledged) co_return;
    net::BeginQuorumEpochRequest request;
    request.cluster_id = config_.cluster_id;
    request.voter_id = voter;
    net::BeginQuorumEpochRequest::PartitionData p;
    p.partition_index = kMetadataPartition;
    p.leader_id = config_.node_id;
    p.leader_epoch = state_.epoch;
    if (auto v = voters().find(voter); v != voters().end()) p.voter_directory_id = v->second.directory_id;
    request.topics.push_back(metadata_topic<net::BeginQuorumEpochRequest::TopicData>(p));
    if (config_.advertised.has_value()) {
      net::BeginQuorumEpochRequest::LeaderEndpoint endpoint;
      endpoint.name = config_.listener_name;
      endpoint.host = config_.advertised->host;
      endpoint.port = config_.advertised->port;
      request.leader_endpoints.push_back(std::move(endpoint));
    }
    net::Peer* target = peer(voter);
    if (target == nullptr) co_return;
    absl::StatusOr<net::BeginQuorumEpochResponse> response =
        co_await target->call<net::BeginQuorumEpochResponse>(request, kBeginEpochVersion,
                                                            config_.request_timeout);
    if (generation_ != generation) co_return;
    if (response.ok() && response->error_code == 0 && response->topics.size() == 1 &&
        response->topics[0].partitions.size() == 1) {
      const auto r = response->topics[0].partitions[0];
      auto lock = co_await mu_.lock();
      if (generation_ != generation) co_return;
      if (r.leader_epoch > state_.epoch) {
        (void)co_await observe_leader(r.leader_epoch, r.leader_id);
        co_return;
      }
      if (r.error_code == 0) {
        progress_[voter].acknowledged = true;
        co_return;
      }
    }
    co_await ctx_->clock().sleep_for(backoff);
    backoff = std::min(backoff * 2, kResendBackoffMax);
  }
}

io::Task<void> RaftNode::send_end_epoch(int32_t epoch, int32_t voter,
                                        std::vector<int32_t> successors) {
  net::EndQuorumEpochRequest request;
  request.cluster_id = config_.cluster_id;
  net::EndQuorumEpochRequest::PartitionData p;
  p.partition_index = kMetadataPartition;
  p.leader_id = config_.node_id;
  p.leader_epoch = epoch;
  p.preferred_successors = successors;
  for (int32_t id : successors) {
    net::EndQuorumEpochRequest::ReplicaInfo candidate;
    candidate.candidate_id = id;
    p.preferred_candidates.push_back(candidate);
  }
  request.topics.push_back(metadata_topic<net::EndQuorumEpochRequest::TopicData>(p));
  net::Peer* target = peer(voter);
  if (target == nullptr) co_return;
  (void)co_await target->call<net::EndQuorumEpochResponse>(request, kEndEpochVersion,
                                                           config_.request_timeout);
}

io::Task<void> RaftNode::fetch_loop() {
  for (const io::Address& address : config_.bootstrap_servers) {
    bootstrap_peers_.push_back(std::make_unique<net::Peer>(ctx_->network(), ctx_->clock(), address,
                                                           fmt::format("raft-{}", config_.node_id)));
  }
  size_t rotation = 0;
  // An observer whose leader did not answer asks another node next: it has
  // no fetch timeout that would start an election, and the voters tell only
  // each other of a new leader (BeginQuorumEpoch), so without this it would
  // ask a leader that is gone for ever (Kafka's observers do the same).
  bool ask_another = false;
  while (true) {
    int32_t leader = kNoNode;
    net::Peer* target = nullptr;
    const bool following = role_ == Role::kFollower && state_.leader_id >= 0 && peer(state_.leader_id) != nullptr;
    if (following && !(ask_another && !is_voter())) {
      leader = state_.leader_id;
      target = peer(leader);
    } else if (!is_voter()) {
      // An observer without a leader, or whose leader did not answer, asks
      // the (other) voters and the bootstrap servers in turn; their answer
      // names the leader.
      std::vector<int32_t> ids = voter_ids();
      if (following) std::erase(ids, state_.leader_id);
      const size_t choices = ids.size() + bootstrap_peers_.size();
      if (choices > 0) {
        const size_t pick = rotation++ % choices;
        target = pick < ids.size() ? peer(ids[pick]) : bootstrap_peers_[pick - ids.size()].get();
      } else if (following) {
        leader = state_.leader_id;  // no one else to ask
        target = peer(leader);
      }
    }
    ask_another = false;
    if (target == nullptr) {
      if (role_ == Role::kFollower || !is_voter()) {
        co_await io::with_deadline(ctx_->clock(), ctx_->clock().now() + config_.retry_backoff * 5,
                                   changed_.changed_since(changed_.seen()));
      } else {
        co_await changed_.changed_since(changed_.seen());
      }
      continue;
    }
    absl::Status s = co_await fetch_once(generation_, leader, target);
    if (!failure_.ok()) co_return;
    if (!s.ok()) {
      ctx_->log().debug("raft: fetch from {}: {}", leader, s.ToString());
      ask_another = leader != kNoNode;
      co_await ctx_->clock().sleep_for(config_.retry_backoff * 5);
    }
  }
}

io::Task<absl::Status> RaftNode::fetch_once(uint64_t generation, int32_t leader, net::Peer* target) {
  net::FetchRequest request;
  request.cluster_id = config_.cluster_id;
  request.replica_state.replica_id = config_.node_id;
  // The leader holds an idle fetch this long; well inside the fetch
  // timeout, or an idle follower would think the leader gone.
  const int32_t fetch_timeout_ms = static_cast<int32_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.fetch_timeout).count());
  request.max_wait_ms = std::min(config_.fetch_max_wait_ms, fetch_timeout_ms / 4);
  request.min_bytes = 0;
  request.max_bytes = config_.fetch_max_bytes;
  net::FetchRequest::FetchPartition p;
  p.partition = kMetadataPartition;
  p.current_leader_epoch = state_.epoch;
  p.fetch_offset = log_->log_end_offset();
  p.last_fetched_epoch = last_epoch();
  p.log_start_offset = log_->log_start_offset();
  p.partition_max_bytes = config_.fetch_max_bytes;
  p.replica_directory_id = config_.directory_id;
  net::FetchRequest::FetchTopic topic;
  topic.topic_id = metadata_topic_id();
  topic.partitions.push_back(p);
  request.topics.push_back(std::move(topic));
  absl::StatusOr<net::FetchResponse> response = co_await target->call<net::FetchResponse>(
      request, kFetchVersion,
      config_.request_timeout + std::chrono::milliseconds(request.max_wait_ms));
  if (!response.ok()) co_return response.status();
  if (response->error_code != 0) {
    co_return absl::UnavailableError(fmt::format("fetch: {}", net::error_name(response->error_code)));
  }
  if (response->responses.size() != 1 || response->responses[0].partitions.size() != 1) {
    co_return absl::DataLossError("fetch: unexpected response shape");
  }
  net::FetchResponse::PartitionData r = std::move(response->responses[0].partitions[0]);
  auto lock = co_await mu_.lock();
  const auto& current = r.current_leader;
  for (const net::FetchResponse::NodeEndpoint& e : response->node_endpoints) {
    if (e.node_id < 0 || e.port <= 0 || e.port > 65535) continue;
    const io::Address at(e.host, static_cast<uint16_t>(e.port));
    if (!voters().contains(e.node_id)) learned_addresses_[e.node_id] = at;
    // Where the leader named in the answer listens (it may have moved
    // since the voter set recorded it).
    if (e.node_id == current.leader_id && current.leader_epoch >= state_.epoch) {
      leader_address_ = LeaderAddress{e.node_id, current.leader_epoch, at};
    }
  }
  if (generation_ != generation) co_return absl::OkStatus();
  if (current.leader_epoch > state_.epoch ||
      (current.leader_epoch == state_.epoch && current.leader_id >= 0 &&
       current.leader_id != state_.leader_id)) {
    co_return co_await observe_leader(current.leader_epoch, current.leader_id);
  }
  if (r.error_code != 0) {
    co_return absl::UnavailableError(fmt::format("fetch: {}", net::error_name(r.error_code)));
  }
  if (leader == kNoNode || state_.leader_id != leader || role_ != Role::kFollower) {
    // An observer asked a replica that turned out to lead: follow it from
    // the next fetch on.
    if (current.leader_id >= 0 && current.leader_id != config_.node_id) {
      CO_RETURN_IF_ERROR(co_await observe_leader(current.leader_epoch, current.leader_id));
    }
    co_return absl::OkStatus();
  }
  last_leader_contact_ = ctx_->clock().now();
  fetch_deadline_ = ctx_->clock().now() + config_.fetch_timeout;
  if (r.diverging_epoch.end_offset >= 0 || r.diverging_epoch.epoch >= 0) {
    // Truncate to where our log and the leader's agree.
    const storage::EpochEndOffset mine = log_->end_offset_for_epoch(r.diverging_epoch.epoch);
    int64_t to = mine.epoch == r.diverging_epoch.epoch
                     ? std::min(mine.end_offset, r.diverging_epoch.end_offset)
                     : mine.end_offset;
    if (to < 0) to = std::min<int64_t>(std::max<int64_t>(r.diverging_epoch.end_offset, 0),
                                       log_->log_end_offset());
    ctx_->log().info("raft: diverged from leader {} at epoch {}; truncating {} -> {}",
                     state_.leader_id, r.diverging_epoch.epoch, log_->log_end_offset(), to);
    if (to < high_watermark_) {
      ctx_->log().error("raft: truncation to {} below the high watermark {}", to, high_watermark_);
    }
    absl::Status s = co_await log_->truncate_to(to);
    if (!s.ok()) co_return fail(std::move(s));
    history_.truncate_to(log_->log_end_offset());
    changed();
    co_return absl::OkStatus();
  }
  if (r.snapshot_id.end_offset >= 0 && r.snapshot_id.epoch >= 0) {
    // Behind the leader's log start: fetch its snapshot instead.
    const SnapshotId id{r.snapshot_id.end_offset, r.snapshot_id.epoch};
    lock.release();
    co_return co_await fetch_snapshot(generation, leader, id);
  }
  if (r.records.has_value() && !r.records->empty()) {
    absl::StatusOr<storage::AppendResult> appended = co_await log_->append_as_follower(*r.records);
    if (!appended.ok()) co_return fail(appended.status());
    if (!appended->ok()) {
      co_return absl::DataLossError(
          fmt::format("fetch: records from the leader rejected: {}", appended->error_message));
    }
    absl::Status scanned = scan_control_batches(*r.records);
    if (!scanned.ok()) co_return fail(std::move(scanned));
    // A follower reports only what it has flushed: its next fetch offset.
    if (!config_.unsafe_ack_before_flush) {
      lock.release();
      absl::Status flushed = co_await log_->flush();
      if (!flushed.ok()) co_return fail(std::move(flushed));
      lock = co_await mu_.lock();
      if (generation_ != generation) co_return absl::OkStatus();
    }
    changed();
  }
  if (r.high_watermark >= 0) set_high_watermark(std::min(r.high_watermark, log_->log_end_offset()));
  if (dynamic() && kraft_version() >= 1 && is_voter() && config_.advertised.has_value() &&
      update_sent_epoch_ != state_.epoch && voter_change_committed()) {
    const Voter& me = voters().at(config_.node_id);
    if (me.address(config_.listener_name) != config_.advertised || me.max_kraft_version != kKRaftVersionMax) {
      update_sent_epoch_ = state_.epoch;
      scope_->spawn(send_update_voter(generation, leader));
    }
  }
  co_return absl::OkStatus();
}

io::Task<void> RaftNode::deliver_loop() {
  while (true) {
    if (listener_ != nullptr && latest_snapshot_.has_value() && delivered_ < latest_snapshot_->end_offset) {
      auto lock = co_await mu_.lock();
      if (!latest_snapshot_.has_value() || delivered_ >= latest_snapshot_->end_offset) continue;
      absl::StatusOr<std::vector<io::Buffer>> values = decode_snapshot(*snapshot_bytes_);
      if (!values.ok()) {
        (void)fail(values.status());
        co_return;
      }
      delivered_ = latest_snapshot_->end_offset;
      listener_->handle_snapshot(*latest_snapshot_, *values);
      continue;
    }
    if (listener_ == nullptr || delivered_ >= high_watermark_) {
      co_await changed_.changed_since(changed_.seen());
      continue;
    }
    auto lock = co_await mu_.lock();
    absl::StatusOr<storage::ReadResult> read =
        co_await log_->read(delivered_, 1 << 20, storage::ReadBound::kLogEnd, true);
    if (!read.ok()) {
      (void)fail(read.status());
      co_return;
    }
    if (read->error != net::Error::kNone) {
      (void)fail(absl::InternalError(fmt::format("raft: reading committed offset {}: {}",
                                                 delivered_, net::error_name(net::code(read->error)))));
      co_return;
    }
    net::BatchIterator it(read->records);
    bool progressed = false;
    while (true) {
      absl::StatusOr<std::optional<net::BatchView>> next = it.next();
      if (!next.ok()) {
        (void)fail(next.status());
        co_return;
      }
      if (!next->has_value()) break;
      const net::RecordBatchHeader& h = (*next)->header;
      if (h.last_offset() >= high_watermark_) break;
      if (h.last_offset() < delivered_) continue;
      CommittedBatch batch{.base_offset = h.base_offset,
                           .last_offset = h.last_offset(),
                           .epoch = h.partition_leader_epoch,
                           .control = h.is_control(),
                           .bytes = (*next)->bytes};
      delivered_ = h.next_offset();
      progressed = true;
      listener_->handle_commit(batch);
    }
    if (!progressed) {
      lock.release();
      if (read->records.empty() && delivered_ < high_watermark_) {
        // Committed offsets are in the log: a read that found none met a
        // fault; it is tried again rather than waiting for a change.
        co_await ctx_->clock().sleep_for(config_.retry_backoff);
      } else {
        co_await changed_.changed_since(changed_.seen());
      }
    }
  }
}

// --- appends -----------------------------------------------------------------

io::Task<absl::StatusOr<AppendedBatch>> RaftNode::append(std::vector<io::Buffer> values,
                                                         std::optional<int64_t> expected_base_offset) {
  auto lock = co_await mu_.lock();
  if (!failure_.ok()) co_return failure_;
  if (role_ != Role::kLeader || high_watermark_ <= epoch_start_offset_) {
    co_return absl::FailedPreconditionError(
        fmt::format("NOT_LEADER_OR_FOLLOWER: node {} is {} in epoch {}", config_.node_id,
                    role_name(role_), state_.epoch));
  }
  if (expected_base_offset.has_value() && *expected_base_offset != log_->log_end_offset()) {
    co_return absl::FailedPreconditionError(
        fmt::format("raft: the batch would start at offset {}, not {}", log_->log_end_offset(),
                    *expected_base_offset));
  }
  const uint64_t generation = generation_;
  const int32_t epoch = state_.epoch;
  net::RecordBatchOptions options;
  options.partition_leader_epoch = epoch;
  net::RecordBatchBuilder builder(options);
  const int64_t now_ms = ctx_->clock().wall_now().time_since_epoch().count() / 1'000'000;
  for (io::Buffer& v : values) {
    net::NewRecord record;
    record.timestamp_ms = now_ms;
    record.value = std::move(v);
    builder.append(std::move(record));
  }
  CO_ASSIGN_OR_RETURN(io::Buffer batch, builder.build());
  absl::StatusOr<storage::AppendResult> appended =
      co_await log_->append_as_leader(std::move(batch), epoch, storage::AppendOrigin::kCoordinator);
  if (!appended.ok()) co_return fail(appended.status());
  if (!appended->ok()) {
    co_return absl::InvalidArgumentError(
        fmt::format("{}: {}", net::error_name(net::code(appended->error)), appended->error_message));
  }
  AppendedBatch result{.epoch = epoch,
                       .base_offset = appended->first_offset,
                       .last_offset = appended->last_offset};
  changed();  // followers waiting in a fetch see the new batch
  if (config_.unsafe_ack_before_flush) {
    update_high_watermark();
    co_return result;
  }
  if (scope_ != nullptr) {
    // The flush goes on without the caller, who waits for the commit: the
    // high watermark counts only what this replica has flushed, and
    // appends made back to back share their flushes.
    scope_->spawn(flush_appended(generation, result.last_offset + 1));
    co_return result;
  }
  lock.release();
  absl::Status flushed = co_await log_->flush(result.last_offset + 1);
  if (!flushed.ok()) co_return fail(std::move(flushed));
  lock = co_await mu_.lock();
  if (generation_ == generation) update_high_watermark();
  co_return result;
}

io::Task<void> RaftNode::flush_appended(uint64_t generation, int64_t end) {
  absl::Status flushed = co_await log_->flush(end);
  if (!flushed.ok()) {
    (void)fail(std::move(flushed));
    co_return;
  }
  auto lock = co_await mu_.lock();
  if (generation_ == generation) update_high_watermark();
}

io::Task<absl::Status> RaftNode::wait_committed(int64_t offset, int32_t epoch, io::Instant deadline) {
  while (true) {
    const uint64_t seen = changed_.seen();
    if (!failure_.ok()) co_return failure_;
    // Committed in its epoch (a leader that resigned since still knows).
    if (state_.epoch == epoch && high_watermark_ > offset) co_return absl::OkStatus();
    // Once the epoch is over the entry may have been replaced, so the high
    // watermark says nothing about it any more.
    if (state_.epoch != epoch || role_ != Role::kLeader) {
      co_return absl::AbortedError(fmt::format("epoch {} ended before offset {} committed", epoch, offset));
    }
    if (high_watermark_ > offset) co_return absl::OkStatus();
    if (ctx_->clock().now() >= deadline) co_return absl::DeadlineExceededError("not committed in time");
    co_await io::with_deadline(ctx_->clock(), deadline, changed_.changed_since(seen));
  }
}

// --- request handlers --------------------------------------------------------

bool RaftNode::serves(int16_t api_key) {
  switch (api_key) {
    case net::VoteRequest::kApiKey:
    case net::BeginQuorumEpochRequest::kApiKey:
    case net::EndQuorumEpochRequest::kApiKey:
    case net::FetchRequest::kApiKey:
    case net::DescribeQuorumRequest::kApiKey:
    case net::FetchSnapshotRequest::kApiKey:
    case net::AddRaftVoterRequest::kApiKey:
    case net::RemoveRaftVoterRequest::kApiKey:
    case net::UpdateRaftVoterRequest::kApiKey:
      return true;
    default:
      return false;
  }
}

io::Task<absl::StatusOr<io::BufferChain>> RaftNode::handle_request(net::RequestFrame frame) {
  switch (frame.header.request_api_key) {
    case net::VoteRequest::kApiKey: co_return co_await on_vote(frame);
    case net::BeginQuorumEpochRequest::kApiKey: co_return co_await on_begin_epoch(frame);
    case net::EndQuorumEpochRequest::kApiKey: co_return co_await on_end_epoch(frame);
    case net::FetchRequest::kApiKey: co_return co_await on_fetch(frame);
    case net::DescribeQuorumRequest::kApiKey: co_return co_await on_describe_quorum(frame);
    case net::FetchSnapshotRequest::kApiKey: co_return co_await on_fetch_snapshot(frame);
    case net::AddRaftVoterRequest::kApiKey: co_return co_await on_add_voter(frame);
    case net::RemoveRaftVoterRequest::kApiKey: co_return co_await on_remove_voter(frame);
    case net::UpdateRaftVoterRequest::kApiKey: co_return co_await on_update_voter(frame);
    default:
      co_return absl::UnimplementedError(
          fmt::format("raft: API key {} is not served here", frame.header.request_api_key));
  }
}

io::Task<absl::StatusOr<io::BufferChain>> RaftNode::on_vote(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::VoteRequest request, net::decode_body<net::VoteRequest>(frame));
  net::VoteResponse response;
  net::VoteResponse::PartitionData out;
  out.partition_index = kMetadataPartition;
  if (request.topics.size() != 1 || request.topics[0].partitions.size() != 1 ||
      request.topics[0].topic_name != kMetadataTopic ||
      request.topics[0].partitions[0].partition_index != kMetadataPartition) {
    response.error_code = err(net::Error::kInvalidRequest);
    co_return net::encode_response(response, frame.header);
  }
  const net::VoteRequest::PartitionData& p = request.topics[0].partitions[0];
  auto lock = co_await mu_.lock();
  if (!cluster_matches(request.cluster_id, config_.cluster_id)) {
    response.error_code = err(net::Error::kInconsistentClusterId);
    co_return net::encode_response(response, frame.header);
  }
  bool granted = false;
  // A dynamic quorum's replica votes whatever its own voter set says: it
  // may not have fetched the change that made it (or the candidate) a
  // voter yet. The candidate counts only the votes of its own voter set.
  if (!dynamic() && (!is_voter() || !voters().contains(p.candidate_id))) {
    out.error_code = err(net::Error::kInconsistentVoterSet);
  } else if (!p.voter_directory_id.is_zero() && !config_.directory_id.is_zero() &&
             p.voter_directory_id != config_.directory_id) {
    out.error_code = err(net::Error::kInvalidVoterKey);
  } else if (p.candidate_epoch < state_.epoch) {
    out.error_code = err(net::Error::kFencedLeaderEpoch);
  } else if (p.pre_vote) {
    // A pre-vote changes nothing here; it is granted when this voter would
    // vote and has not heard from a leader within the fetch timeout.
    const io::Instant now = ctx_->clock().now();
    const bool leader_alive = role_ == Role::kLeader ||
                              (role_ == Role::kFollower && last_leader_contact_.has_value() &&
                               now < *last_leader_contact_ + config_.fetch_timeout);
    granted = !leader_alive && log_up_to_date(p.last_offset_epoch, p.last_offset);
  } else {
    if (p.candidate_epoch > state_.epoch) {
      CO_RETURN_IF_ERROR(co_await become_unattached(p.candidate_epoch, kNoNode));
    }
    if (state_.voted_id == p.candidate_id) {
      granted = true;
    } else if (role_ == Role::kUnattached && state_.voted_id == kNoNode &&
               log_up_to_date(p.last_offset_epoch, p.last_offset)) {
      state_.voted_id = p.candidate_id;
      if (!config_.unsafe_skip_vote_persist) CO_RETURN_IF_ERROR(co_await persist());
      reset_election_deadline();
      granted = true;
    }
    if (granted && probe_ != nullptr) probe_->vote_granted(config_.node_id, state_.epoch, p.candidate_id);
  }
  out.vote_granted = granted;
  ctx_->log().debug("raft: {}vote for {} in epoch {} (its log ends at {} in epoch {}): {} (mine: epoch {} voted {} "
                    "role {}, log ends at {} in epoch {})",
                    p.pre_vote ? "pre-" : "", p.candidate_id, p.candidate_epoch, p.last_offset, p.last_offset_epoch,
                    granted ? "granted" : "refused", state_.epoch, state_.voted_id, role_name(role_),
                    log_->log_end_offset(), last_epoch());
  out.leader_epoch = state_.epoch;
  out.leader_id = role_ == Role::kLeader || role_ == Role::kFollower ? state_.leader_id : kNoNode;
  if (out.leader_id >= 0) {
    if (std::optional<io::Address> at = leader_endpoint(out.leader_id); at.has_value()) {
      net::VoteResponse::NodeEndpoint endpoint;
      endpoint.node_id = out.leader_id;
      endpoint.host = at->host;
      endpoint.port = at->port;
      response.node_endpoints.push_back(std::move(endpoint));
    }
  }
  response.topics.push_back(metadata_topic<net::VoteResponse::TopicData>(out));
  co_return net::encode_response(response, frame.header);
}

io::Task<absl::StatusOr<io::BufferChain>> RaftNode::on_begin_epoch(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::BeginQuorumEpochRequest request,
                      net::decode_body<net::BeginQuorumEpochRequest>(frame));
  net::BeginQuorumEpochResponse response;
  if (request.topics.size() != 1 || request.topics[0].partitions.size() != 1 ||
      request.topics[0].topic_name != kMetadataTopic) {
    response.error_code = err(net::Error::kInvalidRequest);
    co_return net::encode_response(response, frame.header);
  }
  const auto& p = request.topics[0].partitions[0];
  auto lock = co_await mu_.lock();
  if (!cluster_matches(request.cluster_id, config_.cluster_id)) {
    response.error_code = err(net::Error::kInconsistentClusterId);
    co_return net::encode_response(response, frame.header);
  }
  net::BeginQuorumEpochResponse::PartitionData out;
  out.partition_index = kMetadataPartition;
  if (p.leader_epoch < state_.epoch) {
    out.error_code = err(net::Error::kFencedLeaderEpoch);
  } else if (p.leader_id == config_.node_id || (!dynamic() && !voters().contains(p.leader_id))) {
    out.error_code = err(net::Error::kInconsistentVoterSet);
  } else if (!p.voter_directory_id.is_zero() && !config_.directory_id.is_zero() &&
             p.voter_directory_id != config_.directory_id) {
    out.error_code = err(net::Error::kInvalidVoterKey);
  } else {
    for (const auto& e : request.leader_endpoints) {
      if (e.name == config_.listener_name || request.leader_endpoints.size() == 1) {
        learned_addresses_[p.leader_id] = io::Address(e.host, e.port);
        leader_address_ = LeaderAddress{p.leader_id, p.leader_epoch, io::Address(e.host, e.port)};
      }
    }
    CO_RETURN_IF_ERROR(co_await observe_leader(p.leader_epoch, p.leader_id));
    if (role_ == Role::kFollower && state_.leader_id == p.leader_id) {
      last_leader_contact_ = ctx_->clock().now();
      fetch_deadline_ = ctx_->clock().now() + config_.fetch_timeout;
    }
  }
  out.leader_epoch = state_.epoch;
  out.leader_id = role_ == Role::kLeader || role_ == Role::kFollower ? state_.leader_id : kNoNode;
  response.topics.push_back(metadata_topic<net::BeginQuorumEpochResponse::TopicData>(out));
  co_return net::encode_response(response, frame.header);
}

io::Task<absl::StatusOr<io::BufferChain>> RaftNode::on_end_epoch(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::EndQuorumEpochRequest request,
                      net::decode_body<net::EndQuorumEpochRequest>(frame));
  net::EndQuorumEpochResponse response;
  if (request.topics.size() != 1 || request.topics[0].partitions.size() != 1 ||
      request.topics[0].topic_name != kMetadataTopic) {
    response.error_code = err(net::Error::kInvalidRequest);
    co_return net::encode_response(response, frame.header);
  }
  const auto& p = request.topics[0].partitions[0];
  auto lock = co_await mu_.lock();
  net::EndQuorumEpochResponse::PartitionData out;
  out.partition_index = kMetadataPartition;
  if (p.leader_epoch < state_.epoch) {
    out.error_code = err(net::Error::kFencedLeaderEpoch);
  } else if (p.leader_epoch > state_.epoch) {
    CO_RETURN_IF_ERROR(co_await become_unattached(p.leader_epoch, kNoNode));
  } else if (role_ == Role::kFollower && state_.leader_id == p.leader_id) {
    // The leader steps down: stand for election soon, the best-placed
    // successors first.
    const auto& order = p.preferred_successors;
    const auto pos = std::find(order.begin(), order.end(), config_.node_id);
    const size_t rank = pos == order.end() ? order.size() : static_cast<size_t>(pos - order.begin());
    io::Duration backoff{0};
    if (rank > 0) {
      backoff = std::min(config_.retry_backoff * (int64_t{1} << std::min<size_t>(rank, 10)),
                         config_.election_backoff_max);
    }
    fetch_deadline_ = ctx_->clock().now() + backoff;
    changed();
  }
  out.leader_epoch = state_.epoch;
  out.leader_id = role_ == Role::kLeader || role_ == Role::kFollower ? state_.leader_id : kNoNode;
  response.topics.push_back(metadata_topic<net::EndQuorumEpochResponse::TopicData>(out));
  co_return net::encode_response(response, frame.header);
}

io::Task<absl::StatusOr<io::BufferChain>> RaftNode::on_fetch(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::FetchRequest request, net::decode_body<net::FetchRequest>(frame));
  const int16_t version = frame.header.request_api_version;
  net::FetchResponse response;
  const net::FetchRequest::FetchPartition* p = nullptr;
  if (request.topics.size() == 1 && request.topics[0].partitions.size() == 1) {
    const auto& t = request.topics[0];
    const bool topic_ok = version >= 13 ? t.topic_id == metadata_topic_id() : t.topic == kMetadataTopic;
    if (topic_ok && t.partitions[0].partition == kMetadataPartition) p = &t.partitions[0];
  }
  if (p == nullptr) {
    response.error_code = err(net::Error::kInvalidRequest);
    co_return net::encode_response(response, frame.header);
  }
  const int32_t replica = version >= 15 ? request.replica_state.replica_id : request.replica_id;
  net::FetchResponse::PartitionData out;
  out.partition_index = kMetadataPartition;
  auto respond = [&]() {
    out.current_leader.leader_id =
        role_ == Role::kLeader || role_ == Role::kFollower ? state_.leader_id : kNoNode;
    if (out.current_leader.leader_id >= 0) {
      // Where the leader is, for a replica that does not know it yet.
      if (std::optional<io::Address> at = leader_endpoint(out.current_leader.leader_id); at.has_value()) {
        net::FetchResponse::NodeEndpoint endpoint;
        endpoint.node_id = out.current_leader.leader_id;
        endpoint.host = at->host;
        endpoint.port = at->port;
        response.node_endpoints.push_back(std::move(endpoint));
      }
    }
    out.current_leader.leader_epoch = state_.epoch;
    out.log_start_offset = log_->log_start_offset();
    net::FetchResponse::FetchableTopicResponse topic;
    topic.topic = std::string(kMetadataTopic);
    topic.topic_id = metadata_topic_id();
    topic.partitions.push_back(std::move(out));
    response.responses.push_back(std::move(topic));
    return net::encode_response(response, frame.header);
  };

  auto lock = co_await mu_.lock();
  if (!cluster_matches(request.cluster_id, config_.cluster_id)) {
    response.error_code = err(net::Error::kInconsistentClusterId);
    co_return net::encode_response(response, frame.header);
  }
  if (p->current_leader_epoch > state_.epoch) {
    out.error_code = err(net::Error::kUnknownLeaderEpoch);
    co_return respond();
  }
  if (p->current_leader_epoch >= 0 && p->current_leader_epoch < state_.epoch) {
    out.error_code = err(net::Error::kFencedLeaderEpoch);
    co_return respond();
  }
  if (role_ != Role::kLeader) {
    out.error_code = err(net::Error::kNotLeaderOrFollower);
    co_return respond();
  }
  const uint64_t generation = generation_;
  auto send_snapshot_id = [&]() {
    out.snapshot_id.end_offset = latest_snapshot_->end_offset;
    out.snapshot_id.epoch = latest_snapshot_->epoch;
    out.high_watermark = high_watermark_;
    return respond();
  };
  if (p->fetch_offset < log_->log_start_offset() && latest_snapshot_.has_value()) {
    co_return send_snapshot_id();
  }
  // A follower whose last epoch is older than every epoch this log still
  // knows (the cache lost them with the log before the snapshot) cannot be
  // checked against the log: it takes the snapshot and starts over from it.
  // (A follower standing exactly at the snapshot's end and epoch agrees.)
  if (latest_snapshot_.has_value() && log_->log_start_offset() > 0 &&
      (p->fetch_offset > 0 || p->last_fetched_epoch > 0)) {
    const std::optional<storage::EpochEntry> earliest = log_->leader_epochs().earliest_entry();
    const bool at_snapshot = p->fetch_offset == latest_snapshot_->end_offset &&
                             p->last_fetched_epoch == latest_snapshot_->epoch;
    if ((!earliest.has_value() || p->last_fetched_epoch < earliest->epoch) && !at_snapshot) {
      co_return send_snapshot_id();
    }
  }
  // Does the follower's log agree with ours at its end?
  if (p->fetch_offset > 0 || p->last_fetched_epoch > 0) {
    const storage::EpochEndOffset end = log_->end_offset_for_epoch(p->last_fetched_epoch);
    if (end.epoch != p->last_fetched_epoch || end.end_offset < p->fetch_offset) {
      if (end.end_offset < log_->log_start_offset() && latest_snapshot_.has_value()) {
        co_return send_snapshot_id();
      }
      out.diverging_epoch.epoch = end.epoch;
      out.diverging_epoch.end_offset = end.end_offset;
      out.high_watermark = high_watermark_;
      co_return respond();
    }
  }
  if (p->fetch_offset < log_->log_start_offset() || p->fetch_offset > log_->log_end_offset()) {
    out.error_code = err(net::Error::kOffsetOutOfRange);
    co_return respond();
  }
  const io::Instant now = ctx_->clock().now();
  if (replica >= 0 && replica != config_.node_id) {
    Progress& progress = progress_[replica];
    // Caught up: at the log end now, or at the log end of its last fetch
    // (as of that fetch).
    if (p->fetch_offset >= log_->log_end_offset()) {
      progress.last_caught_up = now;
    } else if (progress.last_fetch.has_value() && p->fetch_offset >= progress.leader_end_at_last_fetch) {
      progress.last_caught_up = std::max(progress.last_caught_up.value_or(io::Instant{}), *progress.last_fetch);
    }
    progress.leader_end_at_last_fetch = log_->log_end_offset();
    progress.directory_id = p->replica_directory_id;
    progress.end_offset = p->fetch_offset;
    progress.last_fetch = now;
    if (is_voter_key(replica, progress)) {
      progress.acknowledged = true;
      update_high_watermark();
    }
  }
  const size_t max_bytes = static_cast<size_t>(
      std::max<int32_t>(1, std::min(request.max_bytes, p->partition_max_bytes)));
  const io::Instant deadline = now + std::chrono::milliseconds(std::max(request.max_wait_ms, 0));
  const int64_t hw_seen = high_watermark_;
  while (true) {
    const uint64_t seen = changed_.seen();
    absl::StatusOr<storage::ReadResult> read =
        co_await log_->read(p->fetch_offset, max_bytes, storage::ReadBound::kLogEnd, true);
    if (!read.ok()) co_return fail(read.status());
    if (read->error != net::Error::kNone) {
      out.error_code = err(read->error);
      co_return respond();
    }
    if (!read->records.empty() || high_watermark_ != hw_seen || ctx_->clock().now() >= deadline) {
      out.high_watermark = high_watermark_;
      out.records = std::move(read->records);
      co_return respond();
    }
    // Long poll: wait for an append or a new high watermark.
    lock.release();
    co_await io::with_deadline(ctx_->clock(), deadline, changed_.changed_since(seen));
    lock = co_await mu_.lock();
    if (generation_ != generation || role_ != Role::kLeader) {
      out.error_code = err(net::Error::kNotLeaderOrFollower);
      co_return respond();
    }
  }
}

io::Task<absl::StatusOr<io::BufferChain>> RaftNode::on_describe_quorum(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::DescribeQuorumRequest request,
                      net::decode_body<net::DescribeQuorumRequest>(frame));
  (void)request;
  net::DescribeQuorumResponse response;
  auto lock = co_await mu_.lock();
  net::DescribeQuorumResponse::PartitionData d = describe();
  if (role_ != Role::kLeader) {
    d.error_code = err(net::Error::kNotLeaderOrFollower);
    d.error_message = std::string("not the leader");
  } else {
    d.error_message = std::nullopt;
  }
  response.error_message = std::nullopt;
  response.topics.push_back(metadata_topic<net::DescribeQuorumResponse::TopicData>(d));
  for (const auto& [id, voter] : voters()) {
    net::DescribeQuorumResponse::Node node;
    node.node_id = id;
    node.listeners = listeners_of<net::DescribeQuorumResponse::Listener>(voter.endpoints);
    response.nodes.push_back(std::move(node));
  }
  co_return net::encode_response(response, frame.header);
}

// --- snapshots ---------------------------------------------------------------

io::Task<absl::Status> RaftNode::adopt_snapshot(SnapshotId id, io::Buffer bytes) {
  const std::optional<SnapshotId> previous = latest_snapshot_;
  latest_snapshot_ = id;
  snapshot_bytes_ = std::move(bytes);
  // Older snapshots are of no more use.
  CO_ASSIGN_OR_RETURN(std::vector<SnapshotId> all, co_await list_snapshots(ctx_->disk(), config_.log_dir));
  for (const SnapshotId& old : all) {
    if (old < id) CO_RETURN_IF_ERROR(co_await remove_snapshot(ctx_->disk(), config_.log_dir, old));
  }
  (void)previous;
  co_return absl::OkStatus();
}

io::Task<absl::Status> RaftNode::snapshot(int64_t end_offset, std::vector<io::Buffer> values) {
  auto lock = co_await mu_.lock();
  if (!failure_.ok()) co_return failure_;
  const int64_t latest = latest_snapshot_.has_value() ? latest_snapshot_->end_offset : 0;
  if (end_offset <= latest || end_offset > high_watermark_ || end_offset > delivered_) {
    co_return absl::FailedPreconditionError(fmt::format(
        "snapshot at {}: must lie past the latest snapshot ({}) and within what is committed ({}) "
        "and delivered ({})",
        end_offset, latest, high_watermark_, delivered_));
  }
  const std::optional<int32_t> epoch = log_->leader_epochs().epoch_for_offset(end_offset - 1);
  if (!epoch.has_value()) co_return absl::FailedPreconditionError("snapshot: no epoch for its last offset");
  const SnapshotId id{end_offset, *epoch};
  const int64_t now_ms = ctx_->clock().wall_now().time_since_epoch().count() / 1'000'000;
  // A dynamic quorum's snapshot carries the voters as of its end.
  KRaftControl kraft;
  if (dynamic()) {
    const VoterHistory::Entry& at = history_.before(end_offset);
    kraft.kraft_version = at.kraft_version;
    if (!at.voters.empty()) kraft.voters = at.voters;
  }
  CO_ASSIGN_OR_RETURN(io::Buffer bytes, encode_snapshot(values, now_ms, 1000, &kraft));
  absl::Status written = co_await write_snapshot(ctx_->disk(), config_.log_dir, id, bytes);
  if (!written.ok()) co_return fail(std::move(written));
  CO_RETURN_IF_ERROR(co_await adopt_snapshot(id, std::move(bytes)));
  // The log below the snapshot is no longer needed.
  absl::StatusOr<net::Error> moved = co_await log_->delete_records_before(end_offset);
  if (!moved.ok()) co_return fail(moved.status());
  absl::StatusOr<size_t> deleted = co_await log_->delete_old_segments();
  if (!deleted.ok()) co_return fail(deleted.status());
  ctx_->log().info("raft: snapshot {} written; log start {}", snapshot_file_name(id), log_->log_start_offset());
  co_return absl::OkStatus();
}

io::Task<absl::Status> RaftNode::fetch_snapshot(uint64_t generation, int32_t leader, SnapshotId id) {
  net::Peer* target = peer(leader);
  if (target == nullptr) co_return absl::NotFoundError("no such voter");
  io::BufferChain data;
  int64_t size = -1;
  while (size < 0 || static_cast<int64_t>(data.size()) < size) {
    net::FetchSnapshotRequest request;
    request.cluster_id = config_.cluster_id;
    request.replica_id = config_.node_id;
    request.max_bytes = kSnapshotChunkBytes;
    net::FetchSnapshotRequest::PartitionSnapshot p;
    p.partition = kMetadataPartition;
    p.current_leader_epoch = state_.epoch;
    p.snapshot_id.end_offset = id.end_offset;
    p.snapshot_id.epoch = id.epoch;
    p.position = static_cast<int64_t>(data.size());
    net::FetchSnapshotRequest::TopicSnapshot topic;
    topic.name = std::string(kMetadataTopic);
    topic.partitions.push_back(p);
    request.topics.push_back(std::move(topic));
    absl::StatusOr<net::FetchSnapshotResponse> response = co_await target->call<net::FetchSnapshotResponse>(
        request, kFetchSnapshotVersion, config_.request_timeout);
    if (generation_ != generation) co_return absl::OkStatus();
    if (!response.ok()) co_return response.status();
    if (response->error_code != 0 || response->topics.size() != 1 ||
        response->topics[0].partitions.size() != 1) {
      co_return absl::UnavailableError(fmt::format("fetch snapshot: {}", net::error_name(response->error_code)));
    }
    const auto& r = response->topics[0].partitions[0];
    if (r.error_code != 0) {
      co_return absl::UnavailableError(fmt::format("fetch snapshot: {}", net::error_name(r.error_code)));
    }
    if (r.position != static_cast<int64_t>(data.size()) || r.size < 0 ||
        (r.unaligned_records.empty() && static_cast<int64_t>(data.size()) < r.size)) {
      co_return absl::DataLossError("fetch snapshot: a chunk out of place");
    }
    size = r.size;
    data.append(r.unaligned_records);
  }
  io::Buffer bytes = io::Buffer::allocate(data.size());
  size_t at = 0;
  for (const io::Buffer& part : data.parts()) {
    std::copy(part.span().begin(), part.span().end(), bytes.mutable_data() + at);
    at += part.size();
  }
  CO_RETURN_IF_ERROR(decode_snapshot(bytes).status());
  auto lock = co_await mu_.lock();
  if (generation_ != generation) co_return absl::OkStatus();
  if (latest_snapshot_.has_value() && *latest_snapshot_ == id) {
    // The leader cannot vouch for this log past the snapshot both hold:
    // start again from the snapshot's end.
    absl::Status reset = co_await log_->truncate_fully_and_start_at(id.end_offset);
    if (!reset.ok()) co_return fail(std::move(reset));
    history_.truncate_to(id.end_offset);
    changed();
    co_return absl::OkStatus();
  }
  if (latest_snapshot_.has_value() && *latest_snapshot_ > id) {
    co_return absl::FailedPreconditionError(
        fmt::format("fetch snapshot: the leader offers {}, older than this node's {}",
                    snapshot_file_name(id), snapshot_file_name(*latest_snapshot_)));
  }
  absl::Status written = co_await write_snapshot(ctx_->disk(), config_.log_dir, id, bytes);
  if (!written.ok()) co_return fail(std::move(written));
  absl::Status reset = co_await log_->truncate_fully_and_start_at(id.end_offset);
  if (!reset.ok()) co_return fail(std::move(reset));
  if (dynamic()) {
    CO_ASSIGN_OR_RETURN(KRaftControl kraft, snapshot_kraft_control(bytes));
    if (kraft.voters.has_value()) {
      history_.reset(id.end_offset - 1, kraft.kraft_version.value_or(kraft_version()), *kraft.voters);
    } else {
      history_.truncate_to(id.end_offset);
    }
  }
  CO_RETURN_IF_ERROR(co_await adopt_snapshot(id, std::move(bytes)));
  ctx_->log().info("raft: installed snapshot {} from leader {}", snapshot_file_name(id), leader);
  high_watermark_ = std::max(high_watermark_, id.end_offset);
  log_->set_high_watermark(high_watermark_);
  last_leader_contact_ = ctx_->clock().now();
  fetch_deadline_ = ctx_->clock().now() + config_.fetch_timeout;
  changed();
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<io::BufferChain>> RaftNode::on_fetch_snapshot(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::FetchSnapshotRequest request,
                      net::decode_body<net::FetchSnapshotRequest>(frame));
  net::FetchSnapshotResponse response;
  if (request.topics.size() != 1 || request.topics[0].partitions.size() != 1 ||
      request.topics[0].name != kMetadataTopic ||
      request.topics[0].partitions[0].partition != kMetadataPartition) {
    response.error_code = err(net::Error::kInvalidRequest);
    co_return net::encode_response(response, frame.header);
  }
  const auto& p = request.topics[0].partitions[0];
  auto lock = co_await mu_.lock();
  if (!cluster_matches(request.cluster_id, config_.cluster_id)) {
    response.error_code = err(net::Error::kInconsistentClusterId);
    co_return net::encode_response(response, frame.header);
  }
  net::FetchSnapshotResponse::PartitionSnapshot out;
  out.index = kMetadataPartition;
  out.snapshot_id.end_offset = p.snapshot_id.end_offset;
  out.snapshot_id.epoch = p.snapshot_id.epoch;
  out.current_leader.leader_id = role_ == Role::kLeader || role_ == Role::kFollower ? state_.leader_id : kNoNode;
  out.current_leader.leader_epoch = state_.epoch;
  const SnapshotId wanted{p.snapshot_id.end_offset, p.snapshot_id.epoch};
  if (p.current_leader_epoch < state_.epoch) {
    out.error_code = err(net::Error::kFencedLeaderEpoch);
  } else if (p.current_leader_epoch > state_.epoch) {
    out.error_code = err(net::Error::kUnknownLeaderEpoch);
  } else if (role_ != Role::kLeader) {
    out.error_code = err(net::Error::kNotLeaderOrFollower);
  } else if (!latest_snapshot_.has_value() || *latest_snapshot_ != wanted) {
    out.error_code = err(net::Error::kSnapshotNotFound);
  } else if (p.position < 0 || p.position > static_cast<int64_t>(snapshot_bytes_->size())) {
    out.error_code = err(net::Error::kPositionOutOfRange);
  } else {
    const size_t size = snapshot_bytes_->size();
    const size_t position = static_cast<size_t>(p.position);
    const size_t length = std::min<size_t>(size - position, static_cast<size_t>(std::max(1, request.max_bytes)));
    out.size = static_cast<int64_t>(size);
    out.position = p.position;
    out.unaligned_records = snapshot_bytes_->slice(position, length);
  }
  net::FetchSnapshotResponse::TopicSnapshot topic;
  topic.name = std::string(kMetadataTopic);
  topic.partitions.push_back(std::move(out));
  response.topics.push_back(std::move(topic));
  co_return net::encode_response(response, frame.header);
}

// --- voter changes (KIP-853) -------------------------------------------------

std::optional<std::pair<net::Error, std::string>> RaftNode::voter_change_blocked() const {
  if (role_ != Role::kLeader) {
    return std::make_pair(net::Error::kNotLeaderOrFollower,
                          fmt::format("node {} is not the leader (leader {} in epoch {})", config_.node_id,
                                      state_.leader_id, state_.epoch));
  }
  if (high_watermark_ <= epoch_start_offset_) {
    return std::make_pair(net::Error::kRequestTimedOut,
                          std::string("the leader has not committed in its epoch yet"));
  }
  if (kraft_version() < 1) {
    return std::make_pair(net::Error::kUnsupportedVersion,
                          fmt::format("the voter set cannot change: kraft.version is {}", kraft_version()));
  }
  if (!config_.unsafe_concurrent_voter_changes && history_.latest().offset >= high_watermark_) {
    return std::make_pair(net::Error::kRequestTimedOut,
                          fmt::format("the voter change at offset {} is not committed yet (high watermark {})",
                                      history_.latest().offset, high_watermark_));
  }
  return std::nullopt;
}

io::Task<absl::StatusOr<int64_t>> RaftNode::append_voters(VoterSet next) {
  KRaftControl control;
  control.voters = std::move(next);
  net::RecordBatchOptions options;
  options.partition_leader_epoch = state_.epoch;
  options.control = true;
  net::RecordBatchBuilder builder(options);
  CO_RETURN_IF_ERROR(append_kraft_control(
      builder, control, ctx_->clock().wall_now().time_since_epoch().count() / 1'000'000));
  CO_ASSIGN_OR_RETURN(io::Buffer batch, builder.build());
  absl::StatusOr<storage::AppendResult> appended =
      co_await log_->append_as_leader(std::move(batch), state_.epoch, storage::AppendOrigin::kCoordinator);
  if (!appended.ok()) co_return fail(appended.status());
  if (!appended->ok()) {
    co_return absl::InternalError(fmt::format("raft: voters batch rejected: {}", appended->error_message));
  }
  history_.add(appended->last_offset, control);
  ctx_->log().info("raft: voters {} appended at offset {}", fmt::join(voter_ids(), ","), appended->last_offset);
  changed();
  if (config_.unsafe_ack_before_flush) {
    update_high_watermark();
  } else {
    scope_->spawn(flush_appended(generation_, appended->last_offset + 1));
  }
  co_return appended->last_offset;
}

io::Task<std::pair<net::Error, std::string>> RaftNode::change_voters(VoterSet next, io::SemaphoreUnits lock,
                                                                     io::Instant deadline) {
  absl::StatusOr<int64_t> offset = co_await append_voters(std::move(next));
  if (!offset.ok()) co_return std::make_pair(net::Error::kUnknownServerError, std::string(offset.status().message()));
  const int32_t epoch = state_.epoch;
  lock.release();
  absl::Status s = co_await wait_committed(*offset, epoch, deadline);
  if (s.ok()) co_return std::make_pair(net::Error::kNone, std::string());
  if (absl::IsDeadlineExceeded(s)) {
    co_return std::make_pair(net::Error::kRequestTimedOut,
                             fmt::format("the voter change at offset {} did not commit in time", *offset));
  }
  if (absl::IsAborted(s)) co_return std::make_pair(net::Error::kNotLeaderOrFollower, std::string(s.message()));
  co_return std::make_pair(net::Error::kUnknownServerError, std::string(s.message()));
}

template <typename Response>
absl::StatusOr<io::BufferChain> RaftNode::answer_voter_change(const net::RequestFrame& frame, std::string_view what,
                                                              int32_t voter_id, net::Error e, std::string message) {
  Response response;
  response.error_code = err(e);
  if (e != net::Error::kNone) {
    ctx_->log().info("raft: {} voter {}: {}: {}", what, voter_id, net::error_name(err(e)), message);
    response.error_message = std::move(message);
  } else {
    response.error_message = std::nullopt;
  }
  return net::encode_response(response, frame.header);
}

io::Task<absl::StatusOr<io::BufferChain>> RaftNode::on_add_voter(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::AddRaftVoterRequest request, net::decode_body<net::AddRaftVoterRequest>(frame));
  auto answer = [&](net::Error e, std::string message) {
    return answer_voter_change<net::AddRaftVoterResponse>(frame, "add", request.voter_id, e, std::move(message));
  };
  auto lock = co_await mu_.lock();
  if (!cluster_matches(request.cluster_id, config_.cluster_id)) {
    co_return answer(net::Error::kInconsistentClusterId, "the cluster id does not match");
  }
  if (auto blocked = voter_change_blocked()) co_return answer(blocked->first, std::move(blocked->second));
  if (request.voter_id < 0) co_return answer(net::Error::kInvalidRequest, "the voter id is negative");
  if (voters().contains(request.voter_id)) {
    co_return answer(net::Error::kDuplicateVoter,
                     fmt::format("voter {} is already one of the voters {}", request.voter_id,
                                 fmt::join(voter_ids(), ",")));
  }
  Voter voter;
  voter.id = request.voter_id;
  voter.directory_id = request.voter_directory_id;
  voter.endpoints = endpoints_of(request.listeners);
  if (!voter.address(config_.listener_name).has_value()) {
    co_return answer(net::Error::kInvalidRequest,
                     fmt::format("voter {} names no endpoint for {}", request.voter_id, config_.listener_name));
  }
  // The new voter must be caught up, or the high watermark would stall
  // until it is.
  auto progress = progress_.find(request.voter_id);
  const io::Instant now = ctx_->clock().now();
  if (progress == progress_.end() || !progress->second.last_caught_up.has_value() ||
      *progress->second.last_caught_up + config_.fetch_timeout < now ||
      (!progress->second.directory_id.is_zero() && progress->second.directory_id != request.voter_directory_id)) {
    co_return answer(net::Error::kRequestTimedOut,
                     fmt::format("replica {} (directory {}) is not fetching or not caught up with the leader",
                                 request.voter_id, request.voter_directory_id.to_string()));
  }
  VoterSet next = voters();
  next.emplace(voter.id, voter);
  const io::Instant deadline =
      now + (request.timeout_ms > 0 ? io::Duration(std::chrono::milliseconds(request.timeout_ms))
                                    : config_.request_timeout);
  auto [e, message] = co_await change_voters(std::move(next), std::move(lock), deadline);
  co_return answer(e, std::move(message));
}

io::Task<absl::StatusOr<io::BufferChain>> RaftNode::on_remove_voter(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::RemoveRaftVoterRequest request, net::decode_body<net::RemoveRaftVoterRequest>(frame));
  auto answer = [&](net::Error e, std::string message) {
    return answer_voter_change<net::RemoveRaftVoterResponse>(frame, "remove", request.voter_id, e,
                                                             std::move(message));
  };
  auto lock = co_await mu_.lock();
  if (!cluster_matches(request.cluster_id, config_.cluster_id)) {
    co_return answer(net::Error::kInconsistentClusterId, "the cluster id does not match");
  }
  if (auto blocked = voter_change_blocked()) co_return answer(blocked->first, std::move(blocked->second));
  auto it = voters().find(request.voter_id);
  if (it == voters().end() || it->second.directory_id != request.voter_directory_id) {
    co_return answer(net::Error::kVoterNotFound,
                     fmt::format("voter {} (directory {}) is not one of the voters {}", request.voter_id,
                                 request.voter_directory_id.to_string(), fmt::join(voter_ids(), ",")));
  }
  if (voters().size() == 1) {
    co_return answer(net::Error::kInvalidRequest, "the last voter cannot be removed");
  }
  VoterSet next = voters();
  next.erase(request.voter_id);
  auto [e, message] =
      co_await change_voters(std::move(next), std::move(lock), ctx_->clock().now() + config_.request_timeout);
  co_return answer(e, std::move(message));
}

io::Task<absl::StatusOr<io::BufferChain>> RaftNode::on_update_voter(const net::RequestFrame& frame) {
  CO_ASSIGN_OR_RETURN(net::UpdateRaftVoterRequest request, net::decode_body<net::UpdateRaftVoterRequest>(frame));
  net::UpdateRaftVoterResponse response;
  auto lock = co_await mu_.lock();
  auto answer = [&](net::Error e) {
    response.error_code = err(e);
    response.current_leader.leader_id =
        role_ == Role::kLeader || role_ == Role::kFollower ? state_.leader_id : kNoNode;
    response.current_leader.leader_epoch = state_.epoch;
    if (role_ == Role::kLeader && config_.advertised.has_value()) {
      response.current_leader.host = config_.advertised->host;
      response.current_leader.port = config_.advertised->port;
    }
    return net::encode_response(response, frame.header);
  };
  if (!cluster_matches(request.cluster_id, config_.cluster_id)) co_return answer(net::Error::kInconsistentClusterId);
  if (request.current_leader_epoch < state_.epoch) co_return answer(net::Error::kFencedLeaderEpoch);
  if (request.current_leader_epoch > state_.epoch) co_return answer(net::Error::kUnknownLeaderEpoch);
  if (auto blocked = voter_change_blocked()) co_return answer(blocked->first);
  auto it = voters().find(request.voter_id);
  if (it == voters().end() || it->second.directory_id != request.voter_directory_id) {
    co_return answer(net::Error::kVoterNotFound);
  }
  const auto& range = request.k_raft_version_feature;
  if (range.min_supported_version > kraft_version() || range.max_supported_version < kraft_version()) {
    co_return answer(net::Error::kInvalidRequest);
  }
  Voter updated = it->second;
  updated.endpoints = endpoints_of(request.listeners);
  if (!updated.address(config_.listener_name).has_value()) co_return answer(net::Error::kInvalidRequest);
  updated.min_kraft_version = range.min_supported_version;
  updated.max_kraft_version = range.max_supported_version;
  if (updated == it->second) co_return answer(net::Error::kNone);
  VoterSet next = voters();
  next[updated.id] = updated;
  auto [e, message] =
      co_await change_voters(std::move(next), std::move(lock), ctx_->clock().now() + config_.request_timeout);
  lock = co_await mu_.lock();
  co_return answer(e);
}

io::Task<void> RaftNode::send_update_voter(uint64_t generation, int32_t leader) {
  net::Peer* target = peer(leader);
  if (target == nullptr || !config_.advertised.has_value()) co_return;
  net::UpdateRaftVoterRequest request;
  request.cluster_id = config_.cluster_id;
  request.current_leader_epoch = state_.epoch;
  request.voter_id = config_.node_id;
  request.voter_directory_id = config_.directory_id;
  net::UpdateRaftVoterRequest::Listener listener;
  listener.name = config_.listener_name;
  listener.host = config_.advertised->host;
  listener.port = config_.advertised->port;
  request.listeners.push_back(std::move(listener));
  request.k_raft_version_feature.min_supported_version = 0;
  request.k_raft_version_feature.max_supported_version = kKRaftVersionMax;
  absl::StatusOr<net::UpdateRaftVoterResponse> response =
      co_await target->call<net::UpdateRaftVoterResponse>(request, kUpdateVoterVersion, config_.request_timeout);
  if (generation_ != generation) co_return;
  if (!response.ok() || response->error_code != 0) {
    // Tried again in a later epoch, or after the next fetch of this one.
    ctx_->log().info("raft: update voter: {}", response.ok() ? std::string(net::error_name(response->error_code))
                                                            : response.status().ToString());
    auto lock = co_await mu_.lock();
    if (generation_ == generation) update_sent_epoch_ = -1;
  }
}

}  // namespace brook::raft
