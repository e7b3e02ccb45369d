// coordinators/group/group_coordinator.cc
#include "coordinators/group/group_coordinator.h"

#include <algorithm>

#include <absl/strings/match.h>
#include <fmt/format.h>

#include "io/assert.h"
#include "io/scope.h"
#include "io/when.h"
#include "net/kafka/versioned.h"
#include "net/kafka/messages/consumer_protocol_subscription.h"
#include "net/kafka/messages/group_metadata_key.h"
#include "net/kafka/messages/group_metadata_value.h"
#include "net/kafka/messages/offset_commit_key.h"
#include "net/kafka/messages/offset_commit_value.h"

namespace brook::group {

namespace {

using net::Error;
using namespace std::chrono_literals;

constexpr int16_t kOffsetCommitKeyVersion = 1;
constexpr int16_t kGroupMetadataKeyVersion = 2;
constexpr int16_t kOffsetCommitValueVersion = 3;
constexpr int16_t kGroupMetadataValueVersion = 3;
// How long a new member may wait in a join before it counts as gone
// (Kafka's GroupCoordinator.NewMemberJoinTimeoutMs).
constexpr io::Duration kNewMemberJoinTimeout = 5min;
// READ, DELETE, DESCRIBE (AclOperation codes 3, 6, 8).
constexpr int32_t kGroupOperationsAll = (1 << 3) | (1 << 6) | (1 << 8);

using net::code;

// A record key or value: a big-endian int16 version, then the message.
template <typename M>
io::Buffer versioned(const M& m, int16_t version) {
  absl::StatusOr<io::Buffer> out = net::encode_versioned(m, version);
  BROOK_ASSERT(out.ok());
  return *std::move(out);
}

// The topics of a consumer protocol subscription, or nullopt when it does
// not parse.
std::optional<std::set<std::string>> subscribed_topics(const io::Buffer& metadata) {
  absl::StatusOr<net::ConsumerProtocolSubscription> sub =
      net::decode_versioned<net::ConsumerProtocolSubscription>(metadata, /*tolerant=*/true);
  if (!sub.ok()) return std::nullopt;
  return std::set<std::string>(sub->topics.begin(), sub->topics.end());
}

// A JoinGroup's protocols, in its order.
std::vector<std::pair<std::string, io::Buffer>> protocols_of(const net::JoinGroupRequest& r) {
  std::vector<std::pair<std::string, io::Buffer>> out;
  out.reserve(r.protocols.size());
  for (const auto& p : r.protocols) out.emplace_back(p.name, p.metadata);
  return out;
}

bool same_protocols(const std::vector<std::pair<std::string, io::Buffer>>& a,
                    const std::vector<std::pair<std::string, io::Buffer>>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.first == y.first && x.second.view() == y.second.view();
  });
}

enum class Written : uint8_t { kGroup, kOffsets };

// Kafka's error mapping for a failed write: the same for group metadata
// and offsets, except that a timeout stays REQUEST_TIMED_OUT for offsets
// and a record too large is INVALID_COMMIT_OFFSET_SIZE for them.
Error write_error(Error e, Written what) {
  const bool offsets = what == Written::kOffsets;
  switch (e) {
    case Error::kUnknownTopicOrPartition:
    case Error::kNotEnoughReplicas:
    case Error::kNotEnoughReplicasAfterAppend:
      return Error::kCoordinatorNotAvailable;
    case Error::kRequestTimedOut:
      return offsets ? e : Error::kCoordinatorNotAvailable;
    case Error::kNotLeaderOrFollower:
    case Error::kKafkaStorageError:
      return Error::kNotCoordinator;
    case Error::kMessageTooLarge:
    case Error::kRecordListTooLarge:
    case Error::kInvalidFetchSize:
      return offsets ? Error::kInvalidCommitOffsetSize : Error::kUnknownServerError;
    default:
      return e;
  }
}

}  // namespace

net::Error coordinator_write_error(net::Error e) { return write_error(e, Written::kGroup); }

// --- records and hashing ---------------------------------------------------------

int32_t partition_for_group(std::string_view group_id, int32_t partitions) {
  return runtime::partition_for_key(group_id, partitions);
}

io::Buffer offset_commit_key(const std::string& group, const std::string& topic, int32_t partition) {
  net::OffsetCommitKey k;
  k.group = group;
  k.topic = topic;
  k.partition = partition;
  return versioned(k, kOffsetCommitKeyVersion);
}

// An offset with an expiry time is written at version 1, the only one with
// the field (as Kafka does).
io::Buffer offset_commit_value(int64_t offset, int32_t leader_epoch, const std::string& metadata,
                               int64_t commit_timestamp_ms, int64_t expire_timestamp_ms) {
  net::OffsetCommitValue v;
  v.offset = offset;
  v.leader_epoch = leader_epoch;
  v.metadata = metadata;
  v.commit_timestamp = commit_timestamp_ms;
  v.expire_timestamp = expire_timestamp_ms;
  return versioned(v, expire_timestamp_ms >= 0 ? 1 : kOffsetCommitValueVersion);
}

namespace {

// A group's committed offset for one partition, as a record.
template <typename Entry>
CoordinatorRecord offset_commit_record(const std::string& group, const std::string& topic, int32_t partition,
                                       const Entry& e) {
  return CoordinatorRecord{offset_commit_key(group, topic, partition),
                           offset_commit_value(e.offset, e.leader_epoch, e.metadata, e.commit_timestamp_ms,
                                               e.expire_timestamp_ms)};
}

}  // namespace

io::Buffer group_metadata_key(const std::string& group) {
  net::GroupMetadataKey k;
  k.group = group;
  return versioned(k, kGroupMetadataKeyVersion);
}

std::string_view state_name(GroupCoordinator::State state) {
  switch (state) {
    case GroupCoordinator::State::kEmpty:
      return "Empty";
    case GroupCoordinator::State::kPreparingRebalance:
      return "PreparingRebalance";
    case GroupCoordinator::State::kCompletingRebalance:
      return "CompletingRebalance";
    case GroupCoordinator::State::kStable:
      return "Stable";
    case GroupCoordinator::State::kDead:
      return "Dead";
  }
  return "Dead";
}

// --- set-up and loading ---------------------------------------------------------

GroupCoordinator::GroupCoordinator(io::Context& ctx, CoordinatorLog& log, GroupCoordinatorConfig config)
    : ctx_(&ctx), log_(&log), config_(std::move(config)) {
  BROOK_ASSERT(config_.offsets_topic_partitions > 0);
}

GroupCoordinator::~GroupCoordinator() = default;

const io::Buffer* GroupCoordinator::Member::metadata(const std::string& protocol) const {
  for (const auto& [name, md] : protocols) {
    if (name == protocol) return &md;
  }
  return nullptr;
}

int64_t GroupCoordinator::now_ms() const { return io::to_ms(ctx_->clock().wall_now()); }

void GroupCoordinator::begin_load(int32_t partition, int32_t epoch) {
  unload(partition);
  shards_.begin_load(partition, epoch);
}

void GroupCoordinator::unload(int32_t partition) {
  shards_.unload(partition);
  // The partition's open transactions go with its groups (a load replays
  // them again).
  open_transactions_.erase(open_transactions_.lower_bound({partition, INT64_MIN}),
                           open_transactions_.upper_bound({partition, INT64_MAX}));
  for (auto it = groups_.begin(); it != groups_.end();) {
    Group& g = *it->second;
    if (g.partition != partition) {
      ++it;
      continue;
    }
    // Members waiting for a join or sync learn to find the coordinator again.
    for (auto& [id, m] : g.members) {
      answer_join(g, m, Error::kNotCoordinator);
      answer_sync(m, Error::kNotCoordinator);
    }
    it = groups_.erase(it);
  }
}

std::optional<int32_t> GroupCoordinator::loaded_epoch(int32_t partition) const {
  return shards_.epoch(partition);
}

std::vector<int32_t> GroupCoordinator::loaded_partitions() const {
  return shards_.partitions();
}

bool GroupCoordinator::loading(int32_t partition) const {
  return shards_.loading(partition);
}

absl::Status GroupCoordinator::replay(int32_t partition, int64_t offset, const std::optional<io::Buffer>& key,
                                      const std::optional<io::Buffer>& value) {
  if (!key.has_value()) return absl::DataLossError(fmt::format("{}-{}: a record without a key", kOffsetsTopic, partition));
  absl::StatusOr<int16_t> kv = net::versioned_version(*key);
  if (!kv.ok()) return kv.status();
  if (*kv == 0 || *kv == 1) {
    absl::StatusOr<net::OffsetCommitKey> k = net::decode_versioned<net::OffsetCommitKey>(*key);
    if (!k.ok()) return k.status();
    Group* g = find(k->group);
    if (!value.has_value()) {
      if (g != nullptr) erase_offset(*g, {k->topic, k->partition}, offset);
      return absl::OkStatus();
    }
    absl::StatusOr<net::OffsetCommitValue> v = net::decode_versioned<net::OffsetCommitValue>(*value);
    if (!v.ok()) return v.status();
    if (g == nullptr) g = &create(k->group);
    g->offsets[{k->topic, k->partition}] = offset_entry(*v, offset);
    return absl::OkStatus();
  }
  if (*kv == 2) {
    absl::StatusOr<net::GroupMetadataKey> k = net::decode_versioned<net::GroupMetadataKey>(*key);
    if (!k.ok()) return k.status();
    if (!value.has_value()) {
      // The classic group is gone; its committed offsets (deleted by their
      // own tombstones) and a consumer protocol group of the same id stay.
      Group* g = find(k->group);
      if (g == nullptr) return absl::OkStatus();
      if (g->offsets.empty() && g->txn_offsets.empty() && g->consumer == nullptr) {
        groups_.erase(k->group);
      } else if (g->consumer == nullptr) {
        g->members.clear();
        g->join_order.clear();
        g->static_members.clear();
        g->generation = 0;
        g->protocol_type.reset();
        g->protocol.reset();
        g->leader.reset();
        g->state = State::kEmpty;
      }
      return absl::OkStatus();
    }
    absl::StatusOr<net::GroupMetadataValue> v = net::decode_versioned<net::GroupMetadataValue>(*value);
    if (!v.ok()) return v.status();
    Group* g = find(k->group);
    if (g == nullptr) g = &create(k->group);
    // (An emptied consumer protocol group taken over by the classic one.)
    g->consumer.reset();
    g->generation = v->generation;
    g->protocol_type = v->protocol_type.empty() ? std::nullopt : std::optional<std::string>(v->protocol_type);
    g->protocol = v->protocol;
    g->leader = v->leader;
    g->state_timestamp_ms = v->current_state_timestamp;
    g->members.clear();
    g->join_order.clear();
    g->static_members.clear();
    for (auto& mm : v->members) {
      Member m;
      m.id = mm.member_id;
      m.instance_id = mm.group_instance_id;
      m.client_id = mm.client_id;
      m.client_host = mm.client_host;
      m.session_timeout_ms = mm.session_timeout;
      m.rebalance_timeout_ms = mm.rebalance_timeout < 0 ? mm.session_timeout : mm.rebalance_timeout;
      m.protocol_type = v->protocol_type;
      if (v->protocol.has_value()) m.protocols.emplace_back(*v->protocol, mm.subscription);
      m.assignment = mm.assignment;
      if (m.instance_id.has_value()) g->static_members[*m.instance_id] = m.id;
      g->join_order.push_back(m.id);
      g->members.emplace(m.id, std::move(m));
    }
    g->state = g->members.empty() ? State::kEmpty : State::kStable;
    return absl::OkStatus();
  }
  if (*kv >= 3 && *kv <= 8) return replay_consumer(*kv, *key, value);
  // Other coordinators' record types (share groups) are not served; they
  // are skipped, as unknown versions are by Kafka's loader for types it
  // does not own.
  return absl::OkStatus();
}

void GroupCoordinator::finish_load(int32_t partition, int32_t epoch) {
  if (!shards_.finish_load(partition, epoch)) return;
  // Loaded members must heartbeat within their session timeout (and
  // revoke within their rebalance timeout).
  const io::Instant now = ctx_->clock().now();
  for (auto& [id, g] : groups_) {
    if (g->partition != partition) continue;
    for (auto& [mid, m] : g->members) schedule_heartbeat(m);
    if (g->consumer == nullptr) continue;
    sync_classic_timers(*g);
    for (auto& [mid, m] : g->consumer->members) {
      m.session_deadline = now + config_.consumer_session_timeout;
      if (m.current.state == MemberState::kUnrevokedPartitions && !m.classic.has_value()) {
        m.revocation_deadline = now + std::chrono::milliseconds(std::max(m.rebalance_timeout_ms, 0));
      }
    }
  }
  ctx_->log().info("group coordinator: loaded {}-{} in epoch {}", kOffsetsTopic, partition, epoch);
  wake_timers();
}

// --- helpers -------------------------------------------------------------------------

net::Error GroupCoordinator::check_coordinator(const std::string& group_id) const {
  return shards_.check(partition_for(group_id));
}

net::Error GroupCoordinator::check_commit(const std::string& topic, int32_t partition,
                                     const std::string& metadata) const {
  if (static_cast<int64_t>(metadata.size()) > config_.offset_metadata_max_bytes) return Error::kOffsetMetadataTooLarge;
  if (!log_->partition_exists(topic, partition)) return Error::kUnknownTopicOrPartition;
  return Error::kNone;
}

Error GroupCoordinator::check_group(const std::string& group_id) const {
  return group_id.empty() ? Error::kInvalidGroupId : check_coordinator(group_id);
}

void GroupCoordinator::answer_join(const Group& g, Member& m, Error error) const {
  if (!m.awaiting_join) return;
  m.awaiting_join->response = join_response(g, m, false);
  m.awaiting_join->response.error_code = code(error);
  m.awaiting_join->done.set();
  m.awaiting_join = nullptr;
}

void GroupCoordinator::answer_sync(Member& m, Error error) {
  if (!m.awaiting_sync) return;
  m.awaiting_sync->response.error_code = code(error);
  m.awaiting_sync->done.set();
  m.awaiting_sync = nullptr;
}

GroupCoordinator::Member GroupCoordinator::member_from(const net::JoinGroupRequest& r, std::string id,
                                                       std::string client_id, std::string client_host) {
  Member m;
  m.id = std::move(id);
  m.instance_id = r.group_instance_id;
  m.client_id = std::move(client_id);
  m.client_host = std::move(client_host);
  m.rebalance_timeout_ms = r.rebalance_timeout_ms;
  m.session_timeout_ms = r.session_timeout_ms;
  m.protocol_type = r.protocol_type;
  m.protocols = protocols_of(r);
  return m;
}

GroupCoordinator::Group* GroupCoordinator::find(const std::string& group_id) {
  auto it = groups_.find(group_id);
  return it == groups_.end() ? nullptr : it->second.get();
}

const GroupCoordinator::Group* GroupCoordinator::find(const std::string& group_id) const {
  auto it = groups_.find(group_id);
  return it == groups_.end() ? nullptr : it->second.get();
}

GroupCoordinator::Group& GroupCoordinator::create(const std::string& group_id) {
  auto g = std::make_unique<Group>();
  g->id = group_id;
  g->partition = partition_for(group_id);
  g->state_timestamp_ms = now_ms();
  Group& ref = *g;
  groups_[group_id] = std::move(g);
  return ref;
}

std::string GroupCoordinator::new_member_id(const std::string& prefix) {
  const uint64_t a = ctx_->random().next_u64();
  const uint64_t b = ctx_->random().next_u64();
  return fmt::format("{}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", prefix, a >> 32, (a >> 16) & 0xffff, a & 0xffff,
                     b >> 48, b & 0xffffffffffffULL);
}

std::string GroupCoordinator::new_uuid() { return net::random_uuid(ctx_->random()).to_string(); }

void GroupCoordinator::transition(Group& g, State to) {
  g.state = to;
  g.state_timestamp_ms = now_ms();
}

int32_t GroupCoordinator::rebalance_timeout_ms(const Group& g) const {
  int32_t t = 0;
  for (const auto& [id, m] : g.members) t = std::max(t, m.rebalance_timeout_ms);
  return t;
}

std::vector<std::string> GroupCoordinator::candidate_protocols(const Group& g) const {
  std::vector<std::string> out;
  if (g.members.empty()) return out;
  for (const auto& [name, md] : g.members.begin()->second.protocols) {
    bool all = true;
    for (const auto& [id, m] : g.members) {
      if (m.metadata(name) == nullptr) {
        all = false;
        break;
      }
    }
    if (all) out.push_back(name);
  }
  return out;
}

bool GroupCoordinator::supports_protocols(const Group& g, const std::string& type,
                                          const Protocols& protocols) const {
  if (type.empty() || protocols.empty()) return false;
  if (g.state == State::kEmpty || g.members.empty()) return true;
  if (g.protocol_type.has_value() && *g.protocol_type != type) return false;
  const std::vector<std::string> candidates = candidate_protocols(g);
  for (const auto& [name, md] : protocols) {
    if (std::find(candidates.begin(), candidates.end(), name) != candidates.end()) return true;
  }
  return false;
}

std::string GroupCoordinator::select_protocol(const Group& g) const {
  const std::vector<std::string> candidates = candidate_protocols(g);
  BROOK_ASSERT(!candidates.empty());
  // Each member votes for the first candidate in its own preference order;
  // ties go to the earlier candidate.
  std::map<std::string, int> votes;
  for (const auto& [id, m] : g.members) {
    for (const auto& [name, md] : m.protocols) {
      if (std::find(candidates.begin(), candidates.end(), name) != candidates.end()) {
        ++votes[name];
        break;
      }
    }
  }
  std::string best = candidates.front();
  for (const std::string& c : candidates) {
    if (votes[c] > votes[best]) best = c;
  }
  return best;
}

bool GroupCoordinator::static_member_fenced(const Group& g, const std::string& member_id,
                                            const std::optional<std::string>& instance_id) const {
  if (!instance_id.has_value()) return false;
  auto it = g.static_members.find(*instance_id);
  return it != g.static_members.end() && it->second != member_id;
}

void GroupCoordinator::schedule_heartbeat(Member& m) {
  m.heartbeat_deadline = ctx_->clock().now() + std::chrono::milliseconds(m.session_timeout_ms);
}

net::JoinGroupResponse GroupCoordinator::join_response(const Group& g, const Member& m, bool with_members) const {
  net::JoinGroupResponse r;
  r.generation_id = g.generation;
  r.protocol_type = g.protocol_type;
  r.protocol_name = g.protocol;
  r.leader = g.leader.value_or("");
  r.member_id = m.id;
  if (with_members && g.protocol.has_value()) {
    for (const auto& [id, other] : g.members) {
      net::JoinGroupResponse::JoinGroupResponseMember jm;
      jm.member_id = id;
      jm.group_instance_id = other.instance_id;
      if (const io::Buffer* md = other.metadata(*g.protocol)) jm.metadata = *md;
      r.members.push_back(std::move(jm));
    }
  }
  return r;
}

void GroupCoordinator::wake_timers() { timer_wake_.notify(); }

// --- the rebalance state machine ------------------------------------------------------

void GroupCoordinator::add_member_and_rebalance(Group& g, Member member, const std::shared_ptr<JoinWait>& wait) {
  member.awaiting_join = wait;
  member.is_new = true;
  schedule_heartbeat(member);
  if (!g.leader.has_value()) g.leader = member.id;
  // The first member of an empty group sets its protocol type.
  if (g.members.empty() || !g.protocol_type.has_value()) g.protocol_type = member.protocol_type;
  if (member.instance_id.has_value()) g.static_members[*member.instance_id] = member.id;
  g.join_order.push_back(member.id);
  const std::string id = member.id;
  g.members.emplace(id, std::move(member));
  g.new_member_added = true;
  maybe_prepare_rebalance(g, fmt::format("adding new member {}", id));
}

void GroupCoordinator::update_member_and_rebalance(Group& g, Member& m,
                                                   Protocols protocols,
                                                   int32_t rebalance_timeout_ms, int32_t session_timeout_ms,
                                                   const std::shared_ptr<JoinWait>& wait, const std::string& reason) {
  // A second JoinGroup while one waits: the older one is answered now.
  if (m.awaiting_join != wait) answer_join(g, m, Error::kRebalanceInProgress);
  m.protocols = std::move(protocols);
  m.rebalance_timeout_ms = rebalance_timeout_ms;
  m.session_timeout_ms = session_timeout_ms;
  m.awaiting_join = wait;
  schedule_heartbeat(m);
  maybe_prepare_rebalance(g, reason);
}

void GroupCoordinator::maybe_prepare_rebalance(Group& g, const std::string& reason) {
  if (g.state == State::kEmpty || g.state == State::kStable || g.state == State::kCompletingRebalance) {
    prepare_rebalance(g, reason);
  }
  maybe_complete_join(g, false);
}

void GroupCoordinator::prepare_rebalance(Group& g, const std::string& reason) {
  if (g.state == State::kCompletingRebalance) reset_and_propagate_assignment_error(g, Error::kRebalanceInProgress);
  g.pending_sync.clear();
  const bool was_empty = g.state == State::kEmpty;
  transition(g, State::kPreparingRebalance);
  const io::Instant now = ctx_->clock().now();
  const io::Duration timeout = std::chrono::milliseconds(rebalance_timeout_ms(g));
  if (was_empty && config_.initial_rebalance_delay > io::Duration::zero()) {
    g.initial_delay_until = now + config_.initial_rebalance_delay;
    g.initial_delay_limit = now + std::max(timeout, config_.initial_rebalance_delay);
    g.new_member_added = false;
  } else {
    g.initial_delay_until.reset();
  }
  g.join_deadline = now + timeout;
  ctx_->log().info("group coordinator: preparing to rebalance group {} in generation {}: {}", g.id, g.generation,
                   reason);
  wake_timers();
}

void GroupCoordinator::maybe_complete_join(Group& g, bool force) {
  if (g.state != State::kPreparingRebalance) return;
  if (g.initial_delay_until.has_value() && !force) return;
  bool all = g.pending_members.empty();
  for (const auto& [id, m] : g.members) {
    if (!m.awaiting_join) all = false;
  }
  if (all || force) complete_join(g);
}

void GroupCoordinator::complete_join(Group& g) {
  g.initial_delay_until.reset();
  // Dynamic members that did not rejoin in time are gone; static ones keep
  // their place until their session times out.
  std::vector<std::string> gone;
  for (const auto& [id, m] : g.members) {
    if (!m.awaiting_join && !m.instance_id.has_value()) gone.push_back(id);
  }
  for (const std::string& id : gone) remove_member(g, id, "did not rejoin before the rebalance timeout");
  if (g.leader.has_value()) {
    auto it = g.members.find(*g.leader);
    if (it == g.members.end() || !it->second.awaiting_join) g.leader.reset();
  }
  if (!g.leader.has_value()) {
    for (const std::string& id : g.join_order) {
      auto it = g.members.find(id);
      if (it != g.members.end() && it->second.awaiting_join) {
        g.leader = id;
        break;
      }
    }
  }
  ++g.generation;
  if (g.members.empty()) {
    g.protocol.reset();
    g.leader.reset();
    transition(g, State::kEmpty);
    ctx_->log().info("group coordinator: group {} is empty in generation {}", g.id, g.generation);
    if (scope_ != nullptr) scope_->spawn(store_group_metadata(g.id));
    return;
  }
  g.protocol = select_protocol(g);
  transition(g, State::kCompletingRebalance);
  ctx_->log().info("group coordinator: group {} generation {} ({}, {} members, leader {})", g.id, g.generation,
                   *g.protocol, g.members.size(), g.leader.value_or("none"));
  for (auto& [id, m] : g.members) {
    if (!m.awaiting_join) continue;
    m.awaiting_join->response = join_response(g, m, g.leader.has_value() && id == *g.leader);
    m.awaiting_join->done.set();
    m.awaiting_join = nullptr;
    m.is_new = false;
    schedule_heartbeat(m);
    g.pending_sync.insert(id);
  }
  g.sync_deadline = ctx_->clock().now() + std::chrono::milliseconds(rebalance_timeout_ms(g));
  wake_timers();
}

void GroupCoordinator::remove_member(Group& g, std::string member_id, const std::string& reason) {
  auto it = g.members.find(member_id);
  if (it == g.members.end()) return;
  Member& m = it->second;
  answer_join(g, m, Error::kUnknownMemberId);
  answer_sync(m, Error::kUnknownMemberId);
  if (m.instance_id.has_value()) {
    auto s = g.static_members.find(*m.instance_id);
    if (s != g.static_members.end() && s->second == member_id) g.static_members.erase(s);
  }
  std::erase(g.join_order, member_id);
  g.pending_sync.erase(member_id);
  g.members.erase(it);
  if (g.leader == member_id) {
    g.leader.reset();
    if (!g.join_order.empty()) g.leader = g.join_order.front();
  }
  ctx_->log().info("group coordinator: member {} left group {}: {}", member_id, g.id, reason);
}

void GroupCoordinator::remove_member_and_update(Group& g, std::string member_id, const std::string& reason) {
  remove_member(g, member_id, reason);
  switch (g.state) {
    case State::kStable:
    case State::kCompletingRebalance:
      maybe_prepare_rebalance(g, fmt::format("removing member {}: {}", member_id, reason));
      break;
    case State::kPreparingRebalance:
      maybe_complete_join(g, false);
      break;
    case State::kEmpty:
    case State::kDead:
      break;
  }
}

void GroupCoordinator::reset_and_propagate_assignment_error(Group& g, Error error) {
  for (auto& [id, m] : g.members) m.assignment = io::Buffer();
  propagate_assignment(g, error);
}

void GroupCoordinator::propagate_assignment(Group& g, Error error) {
  for (auto& [id, m] : g.members) {
    if (!m.awaiting_sync) continue;
    net::SyncGroupResponse& r = m.awaiting_sync->response;
    r.error_code = code(error);
    r.protocol_type = g.protocol_type;
    r.protocol_name = g.protocol;
    r.assignment = error == Error::kNone ? m.assignment : io::Buffer();
    m.awaiting_sync->done.set();
    m.awaiting_sync = nullptr;
    if (error == Error::kNone) schedule_heartbeat(m);
  }
}

CoordinatorRecord GroupCoordinator::group_record(const Group& g) const {
  net::GroupMetadataValue v;
  v.protocol_type = g.protocol_type.value_or("");
  v.generation = g.generation;
  v.protocol = g.protocol;
  v.leader = g.leader;
  v.current_state_timestamp = g.state_timestamp_ms;
  for (const std::string& id : g.join_order) {
    auto it = g.members.find(id);
    if (it == g.members.end()) continue;
    const Member& m = it->second;
    net::GroupMetadataValue::MemberMetadata mm;
    mm.member_id = m.id;
    mm.group_instance_id = m.instance_id;
    mm.client_id = m.client_id;
    mm.client_host = m.client_host;
    mm.rebalance_timeout = m.rebalance_timeout_ms;
    mm.session_timeout = m.session_timeout_ms;
    if (g.protocol.has_value()) {
      if (const io::Buffer* md = m.metadata(*g.protocol)) mm.subscription = *md;
    }
    mm.assignment = m.assignment;
    v.members.push_back(std::move(mm));
  }
  return CoordinatorRecord{group_metadata_key(g.id), versioned(v, kGroupMetadataValueVersion)};
}

io::Task<void> GroupCoordinator::store_group_metadata(std::string group_id) {
  Group* g = find(group_id);
  if (g == nullptr) co_return;
  const int32_t partition = g->partition;
  const std::optional<int32_t> loaded = shards_.epoch(partition);
  if (!loaded.has_value()) co_return;
  const int32_t epoch = *loaded;
  std::vector<CoordinatorRecord> records;
  const std::set<std::string> covered = conversion_tombstones(*g, records);
  records.push_back(group_record(*g));
  const CoordinatorLog::Written w = co_await log_->write(partition, epoch, std::move(records));
  if (w.error != Error::kNone) {
    ctx_->log().warn("group coordinator: storing group {} failed: {}", group_id, net::error_name(code(w.error)));
  } else {
    conversion_tombstones_written(group_id, covered);
  }
}

// --- JoinGroup ---------------------------------------------------------------------

io::Task<net::JoinGroupResponse> GroupCoordinator::join_group(net::JoinGroupRequest r, int16_t version,
                                                               std::string client_id, std::string client_host) {
  if (version == 0) r.rebalance_timeout_ms = r.session_timeout_ms;
  auto fail = [&](Error e) {
    net::JoinGroupResponse out;
    out.error_code = code(e);
    out.member_id = r.member_id;
    out.generation_id = -1;
    if (version >= 7) out.protocol_name = std::nullopt;
    return out;
  };
  if (Error e = check_group(r.group_id); e != Error::kNone) co_return fail(e);
  const io::Duration session = std::chrono::milliseconds(r.session_timeout_ms);
  if (session < config_.min_session_timeout || session > config_.max_session_timeout) {
    co_return fail(Error::kInvalidSessionTimeout);
  }
  Group* g = find(r.group_id);
  const bool unknown = r.member_id.empty();
  if (g == nullptr) {
    if (!unknown) co_return fail(Error::kUnknownMemberId);
    g = &create(r.group_id);
  }
  if (g->converting) {
    // Being converted to a consumer group: join whatever it becomes.
    co_await await_conversion(r.group_id);
    co_return co_await join_group(std::move(r), version, std::move(client_id), std::move(client_host));
  }
  if (g->consumer != nullptr) {
    // A consumer protocol group: with members, the member joins it as a
    // classic member; once empty, the classic protocol takes it over.
    co_return co_await classic_join_consumer_group(std::move(r), version, std::move(client_id),
                                                   std::move(client_host));
  }
  if (g->state == State::kDead) co_return fail(Error::kCoordinatorNotAvailable);
  if (!supports_protocols(*g, r.protocol_type, protocols_of(r))) co_return fail(Error::kInconsistentGroupProtocol);
  if (unknown && !g->members.contains(r.member_id) && g->members.size() >= static_cast<size_t>(config_.max_group_size) &&
      !(r.group_instance_id.has_value() && g->static_members.contains(*r.group_instance_id))) {
    co_return fail(Error::kGroupMaxSizeReached);
  }
  auto wait = std::make_shared<JoinWait>();
  if (unknown) {
    join_unknown_member(*g, r, version, client_id, client_host, wait);
  } else {
    join_known_member(*g, r, client_id, client_host, wait);
  }
  if (!wait->done.is_set()) co_await wait->done.wait();
  net::JoinGroupResponse out = std::move(wait->response);
  if (out.error_code != 0) {
    out.generation_id = -1;
    if (version >= 7 && out.error_code != code(Error::kMemberIdRequired)) out.protocol_name = std::nullopt;
  }
  if (version < 7) {
    // protocol_name is not nullable before v7.
    if (!out.protocol_name.has_value()) out.protocol_name = "";
  }
  if (version < 9) out.skip_assignment = false;
  co_return out;
}

void GroupCoordinator::join_unknown_member(Group& g, const net::JoinGroupRequest& r, int16_t version,
                                           const std::string& client_id, const std::string& client_host,
                                           const std::shared_ptr<JoinWait>& wait) {
  if (r.group_instance_id.has_value()) {
    const std::string new_id = new_member_id(*r.group_instance_id);
    auto known = g.static_members.find(*r.group_instance_id);
    if (known != g.static_members.end() && g.members.contains(known->second)) {
      // A static member restarted: its new incarnation takes the old one's
      // place and the old one is fenced.
      const std::string old_id = known->second;
      Member m = std::move(g.members.at(old_id));
      g.members.erase(old_id);
      answer_join(g, m, Error::kFencedInstanceId);
      answer_sync(m, Error::kFencedInstanceId);
      m.id = new_id;
      m.client_id = client_id;
      m.client_host = client_host;
      std::replace(g.join_order.begin(), g.join_order.end(), old_id, new_id);
      if (g.leader == old_id) g.leader = new_id;
      if (g.pending_sync.erase(old_id) > 0) g.pending_sync.insert(new_id);
      known->second = new_id;
      Member& placed = g.members.emplace(new_id, std::move(m)).first->second;
      Protocols protocols = protocols_of(r);
      if (g.state == State::kStable && g.protocol.has_value()) {
        // Kafka's rule: unless the group's protocol would change, it gets
        // its old assignment back without a rebalance. A leader gets the
        // members again, told to skip the assignment (JoinGroup v9+; an
        // older leader's SyncGroup in a stable group changes nothing).
        Protocols before = std::exchange(placed.protocols, protocols);
        if (!candidate_protocols(g).empty() && select_protocol(g) == *g.protocol) {
          placed.session_timeout_ms = r.session_timeout_ms;
          placed.rebalance_timeout_ms = r.rebalance_timeout_ms;
          schedule_heartbeat(placed);
          const bool leader = g.leader == new_id;
          wait->response = join_response(g, placed, leader);
          wait->response.skip_assignment = leader;
          wait->done.set();
          if (scope_ != nullptr) scope_->spawn(store_group_metadata(g.id));
          return;
        }
        placed.protocols = std::move(before);
      }
      update_member_and_rebalance(g, placed, std::move(protocols), r.rebalance_timeout_ms, r.session_timeout_ms, wait,
                                  fmt::format("static member {} rejoined", *r.group_instance_id));
      return;
    }
    add_member_and_rebalance(g, member_from(r, new_id, client_id, client_host), wait);
    return;
  }
  const std::string id = new_member_id(client_id);
  if (version >= 4) {
    // KIP-394: the member rejoins with this id; until it does it holds a
    // place for a session timeout.
    g.pending_members[id] = ctx_->clock().now() + std::chrono::milliseconds(r.session_timeout_ms);
    wait->response.error_code = code(Error::kMemberIdRequired);
    wait->response.member_id = id;
    wait->done.set();
    wake_timers();
    return;
  }
  add_member_and_rebalance(g, member_from(r, id, client_id, client_host), wait);
}

void GroupCoordinator::join_known_member(Group& g, const net::JoinGroupRequest& r, const std::string& client_id,
                                         const std::string& client_host, const std::shared_ptr<JoinWait>& wait) {
  Protocols protocols = protocols_of(r);
  auto respond_error = [&](Error e) {
    wait->response.error_code = code(e);
    wait->response.member_id = r.member_id;
    wait->done.set();
  };
  if (auto pending = g.pending_members.find(r.member_id); pending != g.pending_members.end()) {
    g.pending_members.erase(pending);
    add_member_and_rebalance(g, member_from(r, r.member_id, client_id, client_host), wait);
    return;
  }
  auto it = g.members.find(r.member_id);
  if (it == g.members.end()) return respond_error(Error::kUnknownMemberId);
  if (static_member_fenced(g, r.member_id, r.group_instance_id)) return respond_error(Error::kFencedInstanceId);
  Member& m = it->second;
  const bool same = same_protocols(protocols, m.protocols);
  switch (g.state) {
    case State::kPreparingRebalance:
      update_member_and_rebalance(g, m, std::move(protocols), r.rebalance_timeout_ms, r.session_timeout_ms, wait,
                                  fmt::format("member {} rejoined", m.id));
      return;
    case State::kCompletingRebalance:
      if (same) {
        // It lost the join answer: it gets it again.
        wait->response = join_response(g, m, g.leader == m.id);
        wait->done.set();
        return;
      }
      update_member_and_rebalance(g, m, std::move(protocols), r.rebalance_timeout_ms, r.session_timeout_ms, wait,
                                  fmt::format("member {} changed its metadata", m.id));
      return;
    case State::kStable:
      if (g.leader == m.id || !same) {
        update_member_and_rebalance(g, m, std::move(protocols), r.rebalance_timeout_ms, r.session_timeout_ms, wait,
                                    fmt::format("member {} (leader or with new metadata) rejoined", m.id));
        return;
      }
      schedule_heartbeat(m);
      wait->response = join_response(g, m, false);
      wait->done.set();
      return;
    case State::kEmpty:
    case State::kDead:
      return respond_error(Error::kUnknownMemberId);
  }
}

// --- SyncGroup, Heartbeat, LeaveGroup ----------------------------------------------------

io::Task<net::SyncGroupResponse> GroupCoordinator::sync_group(net::SyncGroupRequest r, int16_t version) {
  (void)version;
  auto fail = [](Error e) {
    net::SyncGroupResponse out;
    out.error_code = code(e);
    return out;
  };
  if (Error e = check_group(r.group_id); e != Error::kNone) co_return fail(e);
  Group* g = find(r.group_id);
  if (g == nullptr) co_return fail(Error::kUnknownMemberId);
  if (g->converting) {
    co_await await_conversion(r.group_id);
    co_return co_await sync_group(std::move(r), version);
  }
  if (g->consumer != nullptr) co_return classic_sync_consumer_group(*g, r);
  if (static_member_fenced(*g, r.member_id, r.group_instance_id)) co_return fail(Error::kFencedInstanceId);
  auto it = g->members.find(r.member_id);
  if (it == g->members.end()) co_return fail(Error::kUnknownMemberId);
  if (r.generation_id != g->generation) co_return fail(Error::kIllegalGeneration);
  if ((r.protocol_type.has_value() && r.protocol_type != g->protocol_type) ||
      (r.protocol_name.has_value() && r.protocol_name != g->protocol)) {
    co_return fail(Error::kInconsistentGroupProtocol);
  }
  Member& m = it->second;
  switch (g->state) {
    case State::kEmpty:
      co_return fail(Error::kUnknownMemberId);
    case State::kDead:
      co_return fail(Error::kCoordinatorNotAvailable);
    case State::kPreparingRebalance:
      co_return fail(Error::kRebalanceInProgress);
    case State::kStable: {
      schedule_heartbeat(m);
      net::SyncGroupResponse out;
      out.protocol_type = g->protocol_type;
      out.protocol_name = g->protocol;
      out.assignment = m.assignment;
      co_return out;
    }
    case State::kCompletingRebalance:
      break;
  }
  auto wait = std::make_shared<SyncWait>();
  answer_sync(m, Error::kRebalanceInProgress);  // an earlier SyncGroup still waiting
  m.awaiting_sync = wait;
  g->pending_sync.erase(m.id);
  if (g->leader == m.id) {
    // The leader's assignment: stored, then handed to every member.
    std::map<std::string, io::Buffer> given;
    for (auto& a : r.assignments) given[a.member_id] = a.assignment;
    for (auto& [id, member] : g->members) {
      auto a = given.find(id);
      member.assignment = a == given.end() ? io::Buffer() : a->second;
    }
    const std::string group_id = g->id;
    const int32_t generation = g->generation;
    const int32_t partition = g->partition;
    const int32_t epoch = *shards_.epoch(partition);
    std::vector<CoordinatorRecord> records;
    const std::set<std::string> covered = conversion_tombstones(*g, records);
    records.push_back(group_record(*g));
    const CoordinatorLog::Written w = co_await log_->write(partition, epoch, std::move(records));
    if (w.error == Error::kNone) conversion_tombstones_written(group_id, covered);
    g = find(group_id);
    if (g != nullptr && g->generation == generation && g->state == State::kCompletingRebalance) {
      if (w.error != Error::kNone) {
        ctx_->log().warn("group coordinator: storing group {} generation {} failed: {}", group_id, generation,
                         net::error_name(code(w.error)));
        reset_and_propagate_assignment_error(*g, write_error(w.error, Written::kGroup));
        maybe_prepare_rebalance(*g, fmt::format("storing the assignment failed: {}", net::error_name(code(w.error))));
      } else {
        g->pending_sync.clear();
        transition(*g, State::kStable);
        propagate_assignment(*g, Error::kNone);
      }
    }
  }
  if (!wait->done.is_set()) co_await wait->done.wait();
  co_return std::move(wait->response);
}

net::HeartbeatResponse GroupCoordinator::heartbeat(const net::HeartbeatRequest& r, int16_t version) {
  (void)version;
  net::HeartbeatResponse out;
  auto fail = [&](Error e) {
    out.error_code = code(e);
    return out;
  };
  if (Error e = check_group(r.group_id); e != Error::kNone) return fail(e);
  Group* g = find(r.group_id);
  if (g == nullptr) return fail(Error::kUnknownMemberId);
  if (g->consumer != nullptr) return classic_heartbeat_consumer_group(*g, r);
  // (Being converted to a consumer group: the member will rejoin.)
  if (g->converting && g->members.contains(r.member_id)) return fail(Error::kRebalanceInProgress);
  if (g->state == State::kDead) return fail(Error::kCoordinatorNotAvailable);
  if (static_member_fenced(*g, r.member_id, r.group_instance_id)) return fail(Error::kFencedInstanceId);
  if (g->state == State::kEmpty) return fail(Error::kUnknownMemberId);
  auto it = g->members.find(r.member_id);
  if (it == g->members.end()) return fail(Error::kUnknownMemberId);
  if (r.generation_id != g->generation) return fail(Error::kIllegalGeneration);
  schedule_heartbeat(it->second);
  if (g->state == State::kPreparingRebalance) return fail(Error::kRebalanceInProgress);
  return out;
}

io::Task<net::LeaveGroupResponse> GroupCoordinator::leave_group(net::LeaveGroupRequest r, int16_t version) {
  net::LeaveGroupResponse out;
  if (version < 3) {
    net::LeaveGroupRequest::MemberIdentity who;
    who.member_id = r.member_id;
    r.members.assign(1, std::move(who));
  }
  if (Error e = check_group(r.group_id); e != Error::kNone) {
    out.error_code = code(e);
    co_return out;
  }
  Group* g = find(r.group_id);
  if (g != nullptr && g->converting) {
    co_await await_conversion(r.group_id);
    co_return co_await leave_group(std::move(r), version);
  }
  if (g != nullptr && g->consumer != nullptr && !g->consumer->members.empty()) {
    co_return co_await classic_leave_consumer_group(std::move(r), version);
  }
  for (const auto& who : r.members) {
    net::LeaveGroupResponse::MemberResponse mr;
    mr.member_id = who.member_id;
    mr.group_instance_id = who.group_instance_id;
    Error e = Error::kNone;
    if (g == nullptr || g->state == State::kDead) {
      e = Error::kUnknownMemberId;
    } else if (who.group_instance_id.has_value()) {
      auto s = g->static_members.find(*who.group_instance_id);
      if (s == g->static_members.end()) {
        e = Error::kUnknownMemberId;
      } else if (!who.member_id.empty() && who.member_id != s->second) {
        e = Error::kFencedInstanceId;
      } else {
        remove_member_and_update(*g, s->second,
                                 fmt::format("static member {} left{}", *who.group_instance_id,
                                             who.reason.has_value() ? ": " + *who.reason : std::string()));
      }
    } else if (g->pending_members.erase(who.member_id) > 0) {
      maybe_complete_join(*g, false);
    } else if (g->members.contains(who.member_id)) {
      remove_member_and_update(
          *g, who.member_id, who.reason.has_value() ? "it left: " + *who.reason : std::string("it left the group"));
    } else {
      e = Error::kUnknownMemberId;
    }
    mr.error_code = code(e);
    if (version < 3) {
      out.error_code = mr.error_code;
    } else {
      out.members.push_back(std::move(mr));
    }
  }
  co_return out;
}

// --- offsets ---------------------------------------------------------------------------

io::Task<net::OffsetCommitResponse> GroupCoordinator::commit_offsets(net::OffsetCommitRequest r, int16_t version) {
  net::OffsetCommitResponse out;
  for (const auto& t : r.topics) {
    auto& to = out.topics.emplace_back();
    to.name = t.name;
    for (const auto& p : t.partitions) to.partitions.emplace_back().partition_index = p.partition_index;
  }
  auto fail_all = [&](Error e) {
    for (auto& t : out.topics) {
      for (auto& p : t.partitions) p.error_code = code(e);
    }
    return out;
  };
  if (Error e = check_group(r.group_id); e != Error::kNone) co_return fail_all(e);
  const int32_t generation = version == 0 ? -1 : r.generation_id_or_member_epoch;
  Group* g = find(r.group_id);
  if (g == nullptr) {
    if (generation >= 0) co_return fail_all(version >= 9 ? Error::kGroupIdNotFound : Error::kIllegalGeneration);
    g = &create(r.group_id);
  }
  if (g->state == State::kDead) co_return fail_all(Error::kCoordinatorNotAvailable);
  if (g->converting) {
    co_await await_conversion(r.group_id);
    co_return co_await commit_offsets(std::move(r), version);
  }
  if (g->consumer != nullptr) {
    // A consumer protocol group: a member commits at its current epoch
    // (a consumer protocol member with OffsetCommit v9+; a classic member's
    // generation is its epoch); without a member only while it is empty.
    const ConsumerGroup& cg = *g->consumer;
    if (!(generation < 0 && cg.members.empty()) && !config_.mutant_unfenced_commits) {
      auto m = cg.members.find(r.member_id);
      if (m == cg.members.end()) co_return fail_all(Error::kUnknownMemberId);
      if (m->second.classic.has_value()) {
        if (generation != m->second.current.member_epoch) co_return fail_all(Error::kIllegalGeneration);
      } else {
        if (version < 9) co_return fail_all(Error::kUnsupportedVersion);
        if (generation != m->second.current.member_epoch) co_return fail_all(Error::kStaleMemberEpoch);
      }
    }
  } else if (static_member_fenced(*g, r.member_id, r.group_instance_id)) {
    co_return fail_all(Error::kFencedInstanceId);
  } else if (!(generation < 0 && g->state == State::kEmpty) && !config_.mutant_unfenced_commits) {
    if (g->state == State::kCompletingRebalance) co_return fail_all(Error::kRebalanceInProgress);
    auto m = g->members.find(r.member_id);
    if (m == g->members.end()) co_return fail_all(Error::kUnknownMemberId);
    if (generation != g->generation) co_return fail_all(Error::kIllegalGeneration);
    schedule_heartbeat(m->second);
  }
  struct Pending {
    net::OffsetCommitResponse::OffsetCommitResponsePartition* out;
    std::string topic;
    int32_t partition;
    OffsetEntry entry;
  };
  std::vector<Pending> pending;
  std::vector<CoordinatorRecord> records;
  const int64_t now = now_ms();
  for (size_t ti = 0; ti < r.topics.size(); ++ti) {
    auto& t = r.topics[ti];
    for (size_t pi = 0; pi < t.partitions.size(); ++pi) {
      auto& p = t.partitions[pi];
      auto* po = &out.topics[ti].partitions[pi];
      const std::string metadata = p.committed_metadata.value_or("");
      if (const Error e = check_commit(t.name, p.partition_index, metadata); e != Error::kNone) {
        po->error_code = code(e);
        continue;
      }
      OffsetEntry e;
      e.offset = p.committed_offset;
      e.leader_epoch = version >= 6 ? p.committed_leader_epoch : -1;
      e.metadata = metadata;
      e.commit_timestamp_ms = version == 1 && p.commit_timestamp >= 0 ? p.commit_timestamp : now;
      // (-1: the broker's retention; versions 5+ have no such field.)
      if (version >= 2 && version <= 4 && r.retention_time_ms != -1) {
        e.expire_timestamp_ms = r.retention_time_ms > INT64_MAX - now ? INT64_MAX : now + r.retention_time_ms;
      }
      records.push_back(offset_commit_record(r.group_id, t.name, p.partition_index, e));
      pending.push_back(Pending{po, t.name, p.partition_index, std::move(e)});
    }
  }
  if (records.empty()) co_return out;
  const int32_t partition = g->partition;
  const int32_t epoch = *shards_.epoch(partition);
  const std::string group_id = g->id;
  for (const Pending& p : pending) ++g->committing[{p.topic, p.partition}];
  const CoordinatorLog::Written w = co_await log_->write(partition, epoch, std::move(records));
  g = find(group_id);
  if (g != nullptr) {
    for (const Pending& p : pending) {
      auto it = g->committing.find({p.topic, p.partition});
      if (it != g->committing.end() && --it->second <= 0) g->committing.erase(it);
    }
  }
  if (w.error != Error::kNone) {
    const Error e = write_error(w.error, Written::kOffsets);
    for (Pending& p : pending) p.out->error_code = code(e);
    co_return out;
  }
  if (g != nullptr && loaded_epoch(partition) == epoch) {
    for (size_t i = 0; i < pending.size(); ++i) {
      Pending& p = pending[i];
      p.entry.record_offset = w.base_offset + static_cast<int64_t>(i);
      OffsetEntry& stored = g->offsets[{p.topic, p.partition}];
      if (stored.record_offset < p.entry.record_offset) stored = std::move(p.entry);
    }
  }
  co_return out;
}

net::OffsetFetchResponse GroupCoordinator::fetch_offsets(const net::OffsetFetchRequest& r, int16_t version) {
  net::OffsetFetchResponse out;
  const bool require_stable = version >= 7 && r.require_stable;
  // One group's answer, in the v8+ shape.
  auto one = [&](const std::string& group_id,
                 const std::optional<std::vector<std::pair<std::string, std::vector<int32_t>>>>& topics,
                 const std::optional<std::string>& member_id, int32_t member_epoch) {
    net::OffsetFetchResponse::OffsetFetchResponseGroup go;
    go.group_id = group_id;
    Error e = group_id.empty() && version >= 8 ? Error::kInvalidGroupId : check_coordinator(group_id);
    if (e == Error::kNone && (member_id.has_value() || member_epoch >= 0)) {
      // v9+: a consumer protocol member reads at its current epoch.
      const Group* fg = find(group_id);
      if (fg != nullptr && fg->consumer != nullptr) {
        auto m = fg->consumer->members.find(member_id.value_or(""));
        if (m == fg->consumer->members.end()) {
          e = Error::kUnknownMemberId;
        } else if (m->second.current.member_epoch != member_epoch) {
          e = Error::kStaleMemberEpoch;
        }
      }
    }
    if (e != Error::kNone) {
      go.error_code = code(e);
      // As Kafka answers: from v2 the group's error alone, before v2 the
      // error of every partition asked about.
      if (topics.has_value() && version < 2) {
        for (const auto& [name, parts] : *topics) {
          auto& t = go.topics.emplace_back();
          t.name = name;
          for (int32_t p : parts) {
            auto& po = t.partitions.emplace_back();
            po.partition_index = p;
            po.committed_offset = -1;
            po.metadata = "";
            po.error_code = code(e);
          }
        }
      }
      return go;
    }
    const Group* g = find(group_id);
    auto put = [&](net::OffsetFetchResponse::OffsetFetchResponseTopics& t, int32_t partition) {
      auto& po = t.partitions.emplace_back();
      po.partition_index = partition;
      po.committed_offset = -1;
      po.metadata = "";
      if (g == nullptr) return;
      // KIP-447: a consumer that asks for stable offsets learns that a
      // transaction may still move this one, and retries.
      if (require_stable && has_txn_offset(*g, {t.name, partition})) {
        po.error_code = code(Error::kUnstableOffsetCommit);
        return;
      }
      auto it = g->offsets.find({t.name, partition});
      if (it == g->offsets.end()) return;
      po.committed_offset = it->second.offset;
      po.committed_leader_epoch = it->second.leader_epoch;
      po.metadata = it->second.metadata;
    };
    if (topics.has_value()) {
      for (const auto& [name, parts] : *topics) {
        auto& t = go.topics.emplace_back();
        t.name = name;
        for (int32_t p : parts) put(t, p);
      }
    } else if (g != nullptr) {
      for (const auto& [key, entry] : g->offsets) {
        if (go.topics.empty() || go.topics.back().name != key.first) go.topics.emplace_back().name = key.first;
        put(go.topics.back(), key.second);
      }
    }
    return go;
  };
  if (version >= 8) {
    for (const auto& rg : r.groups) {
      std::optional<std::vector<std::pair<std::string, std::vector<int32_t>>>> topics;
      if (rg.topics.has_value()) {
        topics.emplace();
        for (const auto& t : *rg.topics) topics->emplace_back(t.name, t.partition_indexes);
      }
      out.groups.push_back(one(rg.group_id, topics, rg.member_id, version >= 9 ? rg.member_epoch : -1));
    }
    return out;
  }
  std::optional<std::vector<std::pair<std::string, std::vector<int32_t>>>> topics;
  if (r.topics.has_value()) {
    topics.emplace();
    for (const auto& t : *r.topics) topics->emplace_back(t.name, t.partition_indexes);
  }
  net::OffsetFetchResponse::OffsetFetchResponseGroup go = one(r.group_id, topics, std::nullopt, -1);
  if (version >= 2) {
    out.error_code = go.error_code;
  }
  for (auto& t : go.topics) {
    auto& to = out.topics.emplace_back();
    to.name = t.name;
    for (auto& p : t.partitions) {
      auto& po = to.partitions.emplace_back();
      po.partition_index = p.partition_index;
      po.committed_offset = p.committed_offset;
      po.committed_leader_epoch = p.committed_leader_epoch;
      po.metadata = p.metadata;
      // From v2 a group error is the top-level code only.
      po.error_code = version >= 2 && go.error_code != 0 ? 0 : p.error_code;
    }
  }
  return out;
}

io::Task<net::OffsetDeleteResponse> GroupCoordinator::delete_offsets(net::OffsetDeleteRequest r, int16_t version) {
  (void)version;
  net::OffsetDeleteResponse out;
  if (Error e = check_group(r.group_id); e != Error::kNone) {
    out.error_code = code(e);
    co_return out;
  }
  Group* g = find(r.group_id);
  if (g == nullptr || g->state == State::kDead) {
    out.error_code = code(Error::kGroupIdNotFound);
    co_return out;
  }
  // Topics the group's members subscribe to keep their offsets.
  std::set<std::string> subscribed;
  if (g->consumer != nullptr) {
    if (!g->consumer->members.empty()) {
      for (const auto& [name, meta] : g->consumer->subscribed) subscribed.insert(name);
    }
  } else if (g->state != State::kEmpty) {
    if (g->protocol_type != "consumer" || !g->protocol.has_value()) {
      out.error_code = code(Error::kNonEmptyGroup);
      co_return out;
    }
    for (const auto& [id, m] : g->members) {
      const io::Buffer* md = m.metadata(*g->protocol);
      if (md == nullptr) continue;
      if (std::optional<std::set<std::string>> topics = subscribed_topics(*md)) {
        subscribed.insert(topics->begin(), topics->end());
      }
    }
  }
  std::vector<CoordinatorRecord> records;
  std::vector<std::pair<std::string, int32_t>> deleting;
  for (const auto& t : r.topics) {
    auto& to = out.topics.emplace_back();
    to.name = t.name;
    for (const auto& p : t.partitions) {
      auto& po = to.partitions.emplace_back();
      po.partition_index = p.partition_index;
      if (subscribed.contains(t.name)) {
        po.error_code = code(Error::kGroupSubscribedToTopic);
        continue;
      }
      // (Pending transactional offsets are deleted too, as in Kafka.)
      if (g->offsets.contains({t.name, p.partition_index}) || has_txn_offset(*g, {t.name, p.partition_index})) {
        records.push_back(CoordinatorRecord{offset_commit_key(r.group_id, t.name, p.partition_index), std::nullopt});
        deleting.emplace_back(t.name, p.partition_index);
      }
    }
  }
  if (records.empty()) co_return out;
  const std::string group_id = g->id;
  const int32_t partition = g->partition;
  const CoordinatorLog::Written w =
      co_await log_->write(partition, *shards_.epoch(partition), std::move(records));
  if (w.error != Error::kNone) {
    out.error_code = code(write_error(w.error, Written::kOffsets));
    out.topics.clear();
    co_return out;
  }
  if (Group* now = find(group_id)) {
    for (size_t i = 0; i < deleting.size(); ++i) {
      erase_offset(*now, deleting[i], w.base_offset + static_cast<int64_t>(i));
    }
  }
  co_return out;
}

// --- transactional offsets -------------------------------------------------------------

GroupCoordinator::OffsetEntry GroupCoordinator::offset_entry(const net::OffsetCommitValue& v, int64_t record_offset) {
  OffsetEntry e;
  e.offset = v.offset;
  e.leader_epoch = v.leader_epoch;
  e.metadata = v.metadata;
  e.commit_timestamp_ms = v.commit_timestamp;
  e.expire_timestamp_ms = v.expire_timestamp;
  e.record_offset = record_offset;
  return e;
}

void GroupCoordinator::add_txn_offset(Group& g, int64_t producer_id, const TopicPartitionKey& key, TxnOffset offset) {
  TxnOffset& slot = g.txn_offsets[producer_id][key];
  // (The transaction committed the partition's offset before: the later
  // record is the one its marker commits.)
  if (slot.entry.record_offset <= offset.entry.record_offset) slot = std::move(offset);
  open_transactions_[{g.partition, producer_id}].insert(g.id);
}

bool GroupCoordinator::has_txn_offset(const Group& g, const TopicPartitionKey& key) {
  return std::any_of(g.txn_offsets.begin(), g.txn_offsets.end(),
                     [&](const auto& producer) { return producer.second.contains(key); });
}

void GroupCoordinator::erase_offset(Group& g, const TopicPartitionKey& key, int64_t tombstone_offset) {
  // (An offset committed after the tombstone stays.)
  if (auto it = g.offsets.find(key); it != g.offsets.end() && it->second.record_offset < tombstone_offset) {
    g.offsets.erase(it);
  }
  for (auto producer = g.txn_offsets.begin(); producer != g.txn_offsets.end();) {
    auto it = producer->second.find(key);
    if (it != producer->second.end() && it->second.entry.record_offset < tombstone_offset) producer->second.erase(it);
    if (producer->second.empty()) {
      producer = g.txn_offsets.erase(producer);
    } else {
      ++producer;
    }
  }
}

absl::Status GroupCoordinator::replay_transactional(int32_t partition, int64_t offset, int64_t producer_id,
                                                    const std::optional<io::Buffer>& key,
                                                    const std::optional<io::Buffer>& value) {
  if (!key.has_value()) return replay(partition, offset, key, value);
  absl::StatusOr<int16_t> kv = net::versioned_version(*key);
  if (!kv.ok()) return kv.status();
  // Only offset commits wait for their transaction (as in Kafka); any
  // other record of such a batch takes effect at once.
  if (*kv != 0 && *kv != 1) return replay(partition, offset, key, value);
  absl::StatusOr<net::OffsetCommitKey> k = net::decode_versioned<net::OffsetCommitKey>(*key);
  if (!k.ok()) return k.status();
  TxnOffset pending;
  pending.entry.record_offset = offset;
  Group* g = find(k->group);
  if (!value.has_value()) {
    // A tombstone of the transaction deletes the offset if it commits.
    if (g == nullptr) return absl::OkStatus();
    pending.deletes = true;
  } else {
    absl::StatusOr<net::OffsetCommitValue> v = net::decode_versioned<net::OffsetCommitValue>(*value);
    if (!v.ok()) return v.status();
    if (g == nullptr) g = &create(k->group);
    pending.entry = offset_entry(*v, offset);
  }
  add_txn_offset(*g, producer_id, {k->topic, k->partition}, std::move(pending));
  return absl::OkStatus();
}

void GroupCoordinator::replay_marker(int32_t partition, int64_t offset, int64_t producer_id, bool commit) {
  (void)offset;
  complete_transaction(partition, producer_id, commit);
}

void GroupCoordinator::complete_transaction(int32_t partition, int64_t producer_id, bool commit) {
  for (auto& [seq, w] : txn_writes_) {
    if (w.partition == partition && w.producer_id == producer_id) w.ended = commit;
  }
  auto open = open_transactions_.find({partition, producer_id});
  if (open == open_transactions_.end()) return;
  const std::set<std::string> ids = std::move(open->second);
  open_transactions_.erase(open);
  for (const std::string& id : ids) {
    Group* g = find(id);
    if (g == nullptr || g->partition != partition) continue;
    auto txn = g->txn_offsets.find(producer_id);
    if (txn == g->txn_offsets.end()) continue;
    std::map<TopicPartitionKey, TxnOffset> offsets = std::move(txn->second);
    g->txn_offsets.erase(txn);
    if (!commit) continue;
    for (auto& [key, pending] : offsets) {
      // The newer of a committed offset and the transaction's by their
      // place in the log wins, whatever order they completed in (as in
      // Kafka: a replay of the compacted partition must agree).
      auto it = g->offsets.find(key);
      if (it != g->offsets.end() && it->second.record_offset > pending.entry.record_offset) continue;
      if (!pending.deletes) {
        g->offsets[key] = std::move(pending.entry);
      } else if (it != g->offsets.end()) {
        g->offsets.erase(it);
      }
    }
  }
}

net::Error GroupCoordinator::check_txn_member(const Group& g, const net::TxnOffsetCommitRequest& r) const {
  // TxnOffsetCommit before v3 names no member, and from v3 a producer that
  // is not a group member need not: the member is checked only when named.
  const bool anonymous = r.generation_id < 0 && r.member_id.empty() && !r.group_instance_id.has_value();
  if (g.consumer != nullptr) {
    const ConsumerGroup& cg = *g.consumer;
    if ((r.generation_id < 0 && cg.members.empty()) || anonymous) return Error::kNone;
    auto m = cg.members.find(r.member_id);
    if (m == cg.members.end()) return Error::kUnknownMemberId;
    // (Kafka answers a stale member epoch with ILLEGAL_GENERATION here.)
    if (r.generation_id != m->second.current.member_epoch) return Error::kIllegalGeneration;
    return Error::kNone;
  }
  if ((r.generation_id < 0 && g.state == State::kEmpty) || anonymous) return Error::kNone;
  if (r.group_instance_id.has_value()) {
    auto s = g.static_members.find(*r.group_instance_id);
    if (s == g.static_members.end()) return Error::kUnknownMemberId;
    if (s->second != r.member_id) return Error::kFencedInstanceId;
  } else if (!g.members.contains(r.member_id)) {
    return Error::kUnknownMemberId;
  }
  if (r.generation_id != g.generation) return Error::kIllegalGeneration;
  return Error::kNone;
}

io::Task<net::TxnOffsetCommitResponse> GroupCoordinator::txn_offset_commit(net::TxnOffsetCommitRequest r,
                                                                           int16_t version, uint64_t verification) {
  net::TxnOffsetCommitResponse out;
  for (const auto& t : r.topics) {
    auto& to = out.topics.emplace_back();
    to.name = t.name;
    for (const auto& p : t.partitions) to.partitions.emplace_back().partition_index = p.partition_index;
  }
  auto fail_all = [&](Error e) {
    for (auto& t : out.topics) {
      for (auto& p : t.partitions) p.error_code = code(e);
    }
    return out;
  };
  if (Error e = check_group(r.group_id); e != Error::kNone) co_return fail_all(e);
  if (version < 3) {
    // (No member fields before v3: as decoded, they hold their defaults.)
    r.generation_id = -1;
    r.member_id.clear();
    r.group_instance_id.reset();
  }
  Group* g = find(r.group_id);
  if (g == nullptr) {
    // A producer outside the group's membership commits to a group that
    // need not exist (Kafka creates it, empty, as OffsetCommit does).
    if (r.generation_id >= 0) co_return fail_all(Error::kIllegalGeneration);
    g = &create(r.group_id);
  }
  if (g->state == State::kDead) co_return fail_all(Error::kCoordinatorNotAvailable);
  if (g->converting) {
    co_await await_conversion(r.group_id);
    co_return co_await txn_offset_commit(std::move(r), version, verification);
  }
  if (Error e = check_txn_member(*g, r); e != Error::kNone) co_return fail_all(e);
  struct Pending {
    net::TxnOffsetCommitResponse::TxnOffsetCommitResponsePartition* out;
    TopicPartitionKey key;
    OffsetEntry entry;
  };
  std::vector<Pending> pending;
  std::vector<CoordinatorRecord> records;
  const int64_t now = now_ms();
  for (size_t ti = 0; ti < r.topics.size(); ++ti) {
    auto& t = r.topics[ti];
    for (size_t pi = 0; pi < t.partitions.size(); ++pi) {
      auto& p = t.partitions[pi];
      auto* po = &out.topics[ti].partitions[pi];
      const std::string metadata = p.committed_metadata.value_or("");
      if (const Error e = check_commit(t.name, p.partition_index, metadata); e != Error::kNone) {
        po->error_code = code(e);
        continue;
      }
      OffsetEntry e;
      e.offset = p.committed_offset;
      e.leader_epoch = version >= 2 ? p.committed_leader_epoch : -1;
      e.metadata = metadata;
      e.commit_timestamp_ms = now;
      records.push_back(offset_commit_record(r.group_id, t.name, p.partition_index, e));
      pending.push_back(Pending{po, {t.name, p.partition_index}, std::move(e)});
    }
  }
  if (records.empty()) co_return out;
  const int32_t partition = g->partition;
  const int32_t epoch = *shards_.epoch(partition);
  const std::string group_id = g->id;
  const int64_t producer_id = r.producer_id;
  for (const Pending& p : pending) ++g->committing[p.key];
  const uint64_t write = next_txn_write_++;
  txn_writes_[write] = TxnWrite{partition, producer_id, std::nullopt};
  const CoordinatorLog::Written w =
      co_await log_->write_transactional(partition, epoch, producer_id, r.producer_epoch, verification,
                                         std::move(records));
  const std::optional<bool> ended = txn_writes_[write].ended;
  txn_writes_.erase(write);
  g = find(group_id);
  if (g != nullptr) {
    for (const Pending& p : pending) {
      auto it = g->committing.find(p.key);
      if (it != g->committing.end() && --it->second <= 0) g->committing.erase(it);
    }
  }
  if (w.error != Error::kNone) {
    const Error e = write_error(w.error, Written::kOffsets);
    for (Pending& p : pending) p.out->error_code = code(e);
    co_return out;
  }
  if (loaded_epoch(partition) != epoch || loading(partition)) co_return out;
  // (A replay would find the group: the records create it.)
  if (g == nullptr) g = &create(group_id);
  for (size_t i = 0; i < pending.size(); ++i) {
    pending[i].entry.record_offset = w.base_offset + static_cast<int64_t>(i);
    add_txn_offset(*g, producer_id, pending[i].key, TxnOffset{std::move(pending[i].entry), false});
  }
  // The transaction ended while its records were being committed (its
  // producer gave up waiting and aborted): the marker follows them in the
  // log, so it applies to them.
  if (ended.has_value()) complete_transaction(partition, producer_id, *ended);
  co_return out;
}

// --- admin ---------------------------------------------------------------------------------

net::DescribeGroupsResponse GroupCoordinator::describe_groups(const net::DescribeGroupsRequest& r, int16_t version) {
  net::DescribeGroupsResponse out;
  for (const std::string& id : r.groups) {
    auto& d = out.groups.emplace_back();
    d.group_id = id;
    if (version >= 3) d.authorized_operations = r.include_authorized_operations ? kGroupOperationsAll : INT32_MIN;
    if (Error e = check_coordinator(id); e != Error::kNone) {
      d.error_code = code(e);
      continue;
    }
    const Group* g = find(id);
    if (g == nullptr || g->consumer != nullptr) {
      // (A consumer protocol group is described by ConsumerGroupDescribe.)
      d.group_state = "Dead";
      continue;
    }
    d.group_state = std::string(state_name(g->state));
    d.protocol_type = g->protocol_type.value_or("");
    const bool stable = g->state == State::kStable;
    d.protocol_data = stable ? g->protocol.value_or("") : "";
    for (const std::string& mid : g->join_order) {
      auto it = g->members.find(mid);
      if (it == g->members.end()) continue;
      const Member& m = it->second;
      auto& dm = d.members.emplace_back();
      dm.member_id = m.id;
      dm.group_instance_id = m.instance_id;
      dm.client_id = m.client_id;
      dm.client_host = m.client_host;
      if (stable && g->protocol.has_value()) {
        if (const io::Buffer* md = m.metadata(*g->protocol)) dm.member_metadata = *md;
        dm.member_assignment = m.assignment;
      }
    }
  }
  return out;
}

net::ListGroupsResponse GroupCoordinator::list_groups(const net::ListGroupsRequest& r, int16_t version) {
  net::ListGroupsResponse out;
  for (int32_t partition : shards_.partitions()) {
    if (shards_.loading(partition)) out.error_code = code(Error::kCoordinatorLoadInProgress);
  }
  for (const auto& [id, g] : groups_) {
    if (loading(g->partition)) continue;
    const std::string consumer_state_name = g->consumer != nullptr ? consumer_state(*g->consumer) : std::string();
    const std::string state(g->consumer != nullptr ? std::string_view(consumer_state_name) : state_name(g->state));
    const std::string type = g->consumer != nullptr ? "consumer" : "classic";
    if (version >= 4 && !r.states_filter.empty() &&
        std::none_of(r.states_filter.begin(), r.states_filter.end(),
                     [&](const std::string& s) { return absl::EqualsIgnoreCase(s, state); })) {
      continue;
    }
    if (version >= 5 && !r.types_filter.empty() &&
        std::none_of(r.types_filter.begin(), r.types_filter.end(),
                     [&](const std::string& s) { return absl::EqualsIgnoreCase(s, type); })) {
      continue;
    }
    auto& lg = out.groups.emplace_back();
    lg.group_id = id;
    lg.protocol_type = g->protocol_type.value_or("");
    lg.group_state = state;
    lg.group_type = type;
  }
  return out;
}

io::Task<net::DeleteGroupsResponse> GroupCoordinator::delete_groups(net::DeleteGroupsRequest r, int16_t version) {
  (void)version;
  net::DeleteGroupsResponse out;
  for (const std::string& id : r.groups_names) {
    auto& res = out.results.emplace_back();
    res.group_id = id;
    if (Error e = check_group(id); e != Error::kNone) {
      res.error_code = code(e);
      continue;
    }
    // (Serialized with the consumer protocol's changes of the partition.)
    const int32_t partition = partition_for(id);
    auto lock = co_await shards_.lock(partition).lock();
    if (Error e = check_group(id); e != Error::kNone) {
      res.error_code = code(e);
      continue;
    }
    Group* g = find(id);
    if (g == nullptr || g->state == State::kDead) {
      res.error_code = code(Error::kGroupIdNotFound);
      continue;
    }
    const bool consumer = g->consumer != nullptr;
    if (g->state != State::kEmpty || (consumer && !g->consumer->members.empty())) {
      res.error_code = code(Error::kNonEmptyGroup);
      continue;
    }
    std::vector<CoordinatorRecord> records;
    for (const auto& [key, entry] : g->offsets) {
      records.push_back(CoordinatorRecord{offset_commit_key(id, key.first, key.second), std::nullopt});
    }
    // Kafka deletes the offsets of open transactions too: their tombstones
    // drop them on a replay, and a later commit marker finds none.
    std::set<TopicPartitionKey> pending_only;
    for (const auto& [producer_id, offsets] : g->txn_offsets) {
      for (const auto& [key, o] : offsets) {
        if (!g->offsets.contains(key)) pending_only.insert(key);
      }
    }
    for (const auto& key : pending_only) {
      records.push_back(CoordinatorRecord{offset_commit_key(id, key.first, key.second), std::nullopt});
    }
    std::set<std::string> covered;
    if (consumer) {
      for (CoordinatorRecord& rec : consumer_group_tombstones(id)) records.push_back(std::move(rec));
    } else {
      covered = conversion_tombstones(*g, records);
      records.push_back(CoordinatorRecord{group_metadata_key(id), std::nullopt});
    }
    const CoordinatorLog::Written w =
        co_await log_->write(partition, *shards_.epoch(partition), std::move(records));
    if (w.error != Error::kNone) {
      res.error_code = code(write_error(w.error, Written::kGroup));
      continue;
    }
    conversion_tombstones_written(id, covered);
    g = find(id);
    if (g != nullptr && g->state == State::kEmpty && (g->consumer == nullptr || g->consumer->members.empty())) {
      transition(*g, State::kDead);
      groups_.erase(id);
    }
  }
  co_return out;
}

std::string GroupCoordinator::group_state(const std::string& group_id) const {
  const Group* g = find(group_id);
  if (g != nullptr && g->consumer != nullptr) return consumer_state(*g->consumer);
  return std::string(state_name(g == nullptr ? State::kDead : g->state));
}

int32_t GroupCoordinator::group_generation(const std::string& group_id) const {
  const Group* g = find(group_id);
  if (g != nullptr && g->consumer != nullptr) return g->consumer->group_epoch;
  return g == nullptr ? -1 : g->generation;
}

std::vector<std::string> GroupCoordinator::group_members(const std::string& group_id) const {
  std::vector<std::string> out;
  if (const Group* g = find(group_id)) {
    for (const auto& [id, m] : g->members) out.push_back(id);
    if (g->consumer != nullptr) {
      for (const auto& [id, m] : g->consumer->members) out.push_back(id);
    }
  }
  return out;
}

// --- timers ----------------------------------------------------------------------------------

void GroupCoordinator::on_timers() {
  const io::Instant now = ctx_->clock().now();
  std::vector<std::string> ids;
  ids.reserve(groups_.size());
  for (const auto& [id, g] : groups_) ids.push_back(id);
  for (const std::string& id : ids) {
    Group* g = find(id);
    if (g == nullptr || loading(g->partition) || g->converting) continue;
    if (g->consumer != nullptr) {
      expire_consumer_members(*g, now);
      continue;
    }
    // Pending member ids not claimed in time.
    for (auto it = g->pending_members.begin(); it != g->pending_members.end();) {
      if (it->second <= now) {
        it = g->pending_members.erase(it);
      } else {
        ++it;
      }
    }
    if (g->state == State::kPreparingRebalance) {
      if (g->initial_delay_until.has_value()) {
        if (now >= *g->initial_delay_until) {
          if (g->new_member_added && *g->initial_delay_until < g->initial_delay_limit) {
            g->initial_delay_until = std::min(*g->initial_delay_until + config_.initial_rebalance_delay,
                                              g->initial_delay_limit);
            g->new_member_added = false;
          } else {
            g->initial_delay_until.reset();
            maybe_complete_join(*g, true);
          }
        }
      } else if (now >= g->join_deadline) {
        maybe_complete_join(*g, true);
      } else {
        maybe_complete_join(*g, false);
      }
    }
    if (g->state == State::kCompletingRebalance && now >= g->sync_deadline && !g->pending_sync.empty()) {
      const std::set<std::string> late = g->pending_sync;
      for (const std::string& mid : late) remove_member(*g, mid, "no SyncGroup before the rebalance timeout");
      maybe_prepare_rebalance(*g, "members did not sync in time");
    }
    // Sessions: a member not waiting in a join or sync must heartbeat.
    std::vector<std::string> expired;
    for (const auto& [mid, m] : g->members) {
      bool alive = now < m.heartbeat_deadline;
      if (m.awaiting_join) alive = !m.is_new || now < m.heartbeat_deadline + kNewMemberJoinTimeout;
      if (m.awaiting_sync) alive = true;
      if (!alive) expired.push_back(mid);
    }
    for (const std::string& mid : expired) {
      remove_member_and_update(*g, mid, "its session timed out");
    }
  }
}

std::optional<GroupCoordinator::ExpiryRule> GroupCoordinator::expiry_rule(const Group& g) const {
  ExpiryRule rule;
  if (g.consumer != nullptr) {
    // A consumer protocol group: offsets of topics no member subscribes to
    // (by name or regular expression) expire from their commit.
    if (g.consumer->members.empty()) return rule;
    for (const auto& [name, meta] : g.consumer->subscribed) rule.subscribed.insert(name);
    for (const auto& [id, m] : g.consumer->members) {
      rule.subscribed.insert(m.subscribed_topic_names.begin(), m.subscribed_topic_names.end());
    }
    return rule;
  }
  // No protocol type: a group that only commits (a standalone consumer).
  if (!g.protocol_type.has_value()) return rule;
  if (g.state == State::kEmpty) {
    rule.from_empty = true;
    return rule;
  }
  // A stable classic consumer group expires the offsets of topics none of
  // its members subscribes to (when every subscription can be read).
  if (g.state != State::kStable || *g.protocol_type != "consumer" || !g.protocol.has_value()) return std::nullopt;
  for (const auto& [id, m] : g.members) {
    const io::Buffer* metadata = m.metadata(*g.protocol);
    if (metadata == nullptr) return std::nullopt;
    absl::StatusOr<net::ConsumerProtocolSubscription> sub =
        net::decode_versioned<net::ConsumerProtocolSubscription>(*metadata, /*tolerant=*/true);
    if (!sub.ok()) return std::nullopt;
    rule.subscribed.insert(sub->topics.begin(), sub->topics.end());
  }
  return rule;
}

io::Task<void> GroupCoordinator::expire_offsets() {
  const int64_t now = now_ms();
  const int64_t retention =
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.offsets_retention).count();
  std::vector<std::string> ids;
  for (const auto& [id, g] : groups_) ids.push_back(id);
  for (const std::string& id : ids) {
    const int32_t partition = partition_for(id);
    auto lock = co_await shards_.lock(partition).lock();
    Group* g = find(id);
    if (g == nullptr || loading(g->partition) || g->converting) continue;
    const std::optional<ExpiryRule> rule = expiry_rule(*g);
    if (!rule.has_value()) continue;
    std::vector<CoordinatorRecord> records;
    std::vector<std::pair<std::string, int32_t>> expired;
    for (const auto& [key, e] : g->offsets) {
      // Offsets of consumed topics, and those being committed, stay. One
      // committed with a retention time expires then; the others a
      // retention period after their commit, or in an emptied group after
      // it emptied.
      // So does one an open transaction may still replace (as in Kafka).
      if (rule->subscribed.contains(key.first) || g->committing.contains(key) || has_txn_offset(*g, key)) continue;
      const bool gone = e.expire_timestamp_ms >= 0
                            ? now >= e.expire_timestamp_ms
                            : now - (rule->from_empty ? std::max(g->state_timestamp_ms, e.commit_timestamp_ms)
                                                      : e.commit_timestamp_ms) >=
                                  retention;
      if (gone) {
        records.push_back(CoordinatorRecord{offset_commit_key(id, key.first, key.second), std::nullopt});
        expired.push_back(key);
      }
    }
    const bool empty = g->consumer != nullptr ? g->consumer->members.empty() : g->state == State::kEmpty;
    const bool drop_group = empty && expired.size() == g->offsets.size() && g->pending_members.empty() &&
                            g->committing.empty() && g->txn_offsets.empty();
    std::set<std::string> covered;
    if (drop_group) {
      if (g->consumer != nullptr) {
        for (CoordinatorRecord& rec : consumer_group_tombstones(id)) records.push_back(std::move(rec));
      } else {
        covered = conversion_tombstones(*g, records);
        records.push_back(CoordinatorRecord{group_metadata_key(id), std::nullopt});
      }
    }
    if (records.empty()) continue;
    const CoordinatorLog::Written w =
        co_await log_->write(partition, *shards_.epoch(partition), std::move(records));
    if (w.error != Error::kNone) continue;
    conversion_tombstones_written(id, covered);
    g = find(id);
    if (g == nullptr) continue;
    size_t erased = 0;
    for (size_t i = 0; i < expired.size(); ++i) {
      // (A commit written after the tombstone stays.)
      auto it = g->offsets.find(expired[i]);
      if (it != g->offsets.end() && it->second.record_offset < w.base_offset + static_cast<int64_t>(i)) {
        g->offsets.erase(it);
        ++erased;
      }
    }
    ctx_->log().info("group coordinator: expired {} offsets of group {}", erased, id);
    if (drop_group && g->state == State::kEmpty && g->offsets.empty() && g->committing.empty() &&
        g->txn_offsets.empty() && (g->consumer == nullptr || g->consumer->members.empty())) {
      groups_.erase(id);
    }
  }
}

io::Task<void> GroupCoordinator::run() {
  io::TaskScope scope(co_await io::this_executor());
  scope_ = &scope;
  struct Unset {
    io::TaskScope** slot;
    ~Unset() { *slot = nullptr; }
  } unset{&scope_};
  next_expiry_check_ = ctx_->clock().now() + config_.offsets_retention_check_interval;
  while (true) {
    const uint64_t seen = timer_wake_.seen();
    on_timers();
    io::Instant now = ctx_->clock().now();
    if (now >= next_expiry_check_) {
      co_await expire_offsets();
      now = ctx_->clock().now();
      next_expiry_check_ = now + config_.offsets_retention_check_interval;
    }
    // Sleep until the next deadline of any group, or until woken.
    io::Instant next = next_expiry_check_;
    for (const auto& [id, g] : groups_) {
      // (A conversion being written wakes the timers when it is done.)
      if (loading(g->partition) || g->converting) continue;
      for (const auto& [mid, at] : g->pending_members) next = std::min(next, at);
      if (g->state == State::kPreparingRebalance) {
        next = std::min(next, g->initial_delay_until.value_or(g->join_deadline));
      }
      if (g->state == State::kCompletingRebalance && !g->pending_sync.empty()) next = std::min(next, g->sync_deadline);
      for (const auto& [mid, m] : g->members) {
        if (!m.awaiting_join && !m.awaiting_sync) next = std::min(next, m.heartbeat_deadline);
      }
      if (g->consumer == nullptr) continue;
      for (const auto& [mid, m] : g->consumer->members) {
        if (fencing_.contains({id, mid})) continue;
        next = std::min(next, consumer_member_deadline(*g, m));
      }
    }
    if (next <= now) continue;
    (void)co_await io::with_deadline(ctx_->clock(), next, timer_wake_.changed_since(seen));
  }
}

}  // namespace brook::group
