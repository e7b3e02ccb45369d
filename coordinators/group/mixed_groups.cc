// coordinators/group/mixed_groups.cc
//
// Groups whose members use both protocols, as Kafka 4's group coordinator
// runs them, so consumers can move between the classic protocol and the
// consumer protocol (KIP-848) one at a time without stopping the group:
//
// - Online upgrade: a consumer protocol member joining a classic group with
//   members (protocol type "consumer") converts it into a consumer group.
//   Each classic member keeps its assignment, at member epoch = the
//   generation, and stays a classic member; the joiner bumps the group
//   epoch, so the classic members are told to rejoin.
// - Classic members of a consumer group keep using JoinGroup, SyncGroup,
//   Heartbeat and LeaveGroup. The coordinator computes their assignment
//   with the group's server-side assignor: a JoinGroup is the member's
//   heartbeat (its subscription and owned partitions come from the embedded
//   consumer protocol), answered with the member epoch as generation and no
//   leader; SyncGroup hands out the member's partitions; Heartbeat answers
//   REBALANCE_IN_PROGRESS whenever a rejoin would move the member on (a new
//   group epoch, partitions to revoke, released partitions to take). A
//   classic member revokes by rejoining, so it never gets a partition
//   another member still holds.
// - Online downgrade: when the last consumer protocol member leaves or is
//   fenced and the others all use the classic protocol, the group becomes a
//   classic group again (generation = the group epoch, each member's target
//   assignment as its assignment) and rebalances.
//
// group.consumer.migration.policy limits the conversions of groups with
// members (an empty group always converts).
#include <algorithm>

#include <absl/strings/match.h>
#include <fmt/format.h>

#include "coordinators/group/group_coordinator.h"
#include "io/assert.h"
#include "net/kafka/messages/consumer_protocol_assignment.h"
#include "net/kafka/messages/consumer_protocol_subscription.h"
#include "net/kafka/versioned.h"

namespace brook::group {

namespace {

using net::code;
using net::Error;
using Policy = GroupCoordinatorConfig::MigrationPolicy;

// The newest ConsumerProtocolAssignment version.
constexpr int16_t kAssignmentVersionMax = 3;

// The version a consumer protocol message starts with (0 if too short).
int16_t embedded_version(const io::Buffer& b) { return net::versioned_version(b).value_or(0); }

}  // namespace

std::optional<GroupCoordinatorConfig::MigrationPolicy> parse_migration_policy(std::string_view s) {
  for (Policy p : {Policy::kBidirectional, Policy::kUpgrade, Policy::kDowngrade, Policy::kDisabled}) {
    const std::string_view name = migration_policy_name(p);
    if (absl::EqualsIgnoreCase(absl::string_view(s.data(), s.size()), absl::string_view(name.data(), name.size()))) {
      return p;
    }
  }
  return std::nullopt;
}

std::string_view migration_policy_name(GroupCoordinatorConfig::MigrationPolicy p) {
  switch (p) {
    case Policy::kBidirectional:
      return "bidirectional";
    case Policy::kUpgrade:
      return "upgrade";
    case Policy::kDowngrade:
      return "downgrade";
    case Policy::kDisabled:
      return "disabled";
  }
  return "disabled";
}

// --- conversions ---------------------------------------------------------------------------

bool GroupCoordinator::upgrade_allowed(const Group& g) const {
  const Policy p = config_.consumer_migration_policy;
  if (p != Policy::kBidirectional && p != Policy::kUpgrade) return false;
  if (g.protocol_type != "consumer") return false;
  return static_cast<int64_t>(g.members.size()) <= config_.consumer_max_group_size;
}

std::optional<GroupCoordinator::ConsumerGroup> GroupCoordinator::consumer_group_from_classic(
    const Group& g, std::vector<CoordinatorRecord>& records) const {
  ConsumerGroup cg;
  cg.group_epoch = g.generation;
  cg.assignment_epoch = g.generation;
  for (const auto& [id, m] : g.members) {
    // The subscription of the group's protocol (before the first
    // generation: the member's first choice).
    const io::Buffer* metadata = g.protocol.has_value() ? m.metadata(*g.protocol)
                                                        : (m.protocols.empty() ? nullptr : &m.protocols.front().second);
    if (metadata == nullptr) return std::nullopt;
    absl::StatusOr<net::ConsumerProtocolSubscription> sub =
        net::decode_versioned<net::ConsumerProtocolSubscription>(*metadata, /*tolerant=*/true);
    if (!sub.ok()) return std::nullopt;
    ConsumerMember cm;
    cm.id = id;
    cm.instance_id = m.instance_id;
    cm.rack_id = sub->rack_id;
    cm.client_id = m.client_id;
    cm.client_host = m.client_host;
    std::set<std::string> topics(sub->topics.begin(), sub->topics.end());
    cm.subscribed_topic_names.assign(topics.begin(), topics.end());
    cm.rebalance_timeout_ms = m.rebalance_timeout_ms;
    cm.current.member_epoch = g.generation;
    cm.previous_member_epoch = g.generation;
    cm.current.state = MemberState::kStable;
    // Its assignment (none yet: an empty one), by topic id; topics gone
    // from the cluster are dropped.
    if (!m.assignment.empty()) {
      absl::StatusOr<net::ConsumerProtocolAssignment> a =
          net::decode_versioned<net::ConsumerProtocolAssignment>(m.assignment, /*tolerant=*/true);
      if (!a.ok()) return std::nullopt;
      for (const auto& tp : a->assigned_partitions) {
        std::optional<CoordinatorLog::Topic> t = log_->topic(tp.topic);
        if (!t.has_value()) continue;
        for (int32_t p : tp.partitions) cm.current.assigned[t->id].insert(p);
      }
    }
    cm.classic = ClassicMetadata{m.session_timeout_ms, m.protocols};
    cg.target[id] = cm.current.assigned;
    cg.members.emplace(id, std::move(cm));
  }
  records.push_back(CoordinatorRecord{group_metadata_key(g.id), std::nullopt});
  for (CoordinatorRecord& r : consumer_group_records(g.id, cg)) records.push_back(std::move(r));
  return cg;
}

bool GroupCoordinator::downgrade_allowed(const ConsumerGroup& cg, const std::string& leaving) const {
  const Policy p = config_.consumer_migration_policy;
  if (p != Policy::kBidirectional && p != Policy::kDowngrade) return false;
  auto it = cg.members.find(leaving);
  if (it == cg.members.end() || it->second.classic.has_value() || cg.members.size() < 2) return false;
  // The others all use the classic protocol, with a protocol in common.
  std::map<std::string, size_t> supported;
  for (const auto& [id, m] : cg.members) {
    if (id == leaving) continue;
    if (!m.classic.has_value()) return false;
    std::set<std::string> names;
    for (const auto& [name, md] : m.classic->protocols) names.insert(name);
    for (const std::string& name : names) ++supported[name];
  }
  const size_t others = cg.members.size() - 1;
  if (std::none_of(supported.begin(), supported.end(), [&](const auto& e) { return e.second == others; })) {
    return false;
  }
  return static_cast<int64_t>(others) <= config_.max_group_size;
}

io::Task<Error> GroupCoordinator::commit_downgrade(std::string group_id, int32_t partition, int32_t epoch,
                                                   std::shared_ptr<ConsumerGroup> cg, std::string leaving) {
  // The classic group: every member but the leaving one, in member order
  // (the first leads), each with its target assignment.
  Group classic;
  classic.id = group_id;
  classic.partition = partition;
  classic.generation = cg->group_epoch;
  classic.protocol_type = "consumer";
  classic.state = State::kStable;
  for (const auto& [id, cm] : cg->members) {
    if (id == leaving) continue;
    BROOK_ASSERT(cm.classic.has_value());
    Member m;
    m.id = id;
    m.instance_id = cm.instance_id;
    m.client_id = cm.client_id;
    m.client_host = cm.client_host;
    m.session_timeout_ms = cm.classic->session_timeout_ms;
    m.rebalance_timeout_ms = cm.rebalance_timeout_ms < 0 ? m.session_timeout_ms : cm.rebalance_timeout_ms;
    m.protocol_type = "consumer";
    m.protocols = cm.classic->protocols;
    if (m.instance_id.has_value()) classic.static_members[*m.instance_id] = id;
    classic.join_order.push_back(id);
    classic.members.emplace(id, std::move(m));
  }
  if (candidate_protocols(classic).empty()) co_return Error::kInconsistentGroupProtocol;
  classic.protocol = select_protocol(classic);
  classic.leader = classic.join_order.front();
  for (auto& [id, m] : classic.members) {
    net::ConsumerProtocolAssignment a;
    if (auto t = cg->target.find(id); t != cg->target.end()) {
      for (const auto& [topic, partitions] : t->second) {
        std::optional<CoordinatorLog::Topic> known = log_->topic(topic);
        if (!known.has_value() || partitions.empty()) continue;
        auto& tp = a.assigned_partitions.emplace_back();
        tp.topic = known->name;
        tp.partitions.assign(partitions.begin(), partitions.end());
      }
    }
    const io::Buffer* metadata = m.metadata(*classic.protocol);
    const int16_t version =
        std::clamp<int16_t>(metadata == nullptr ? 0 : embedded_version(*metadata), 0, kAssignmentVersionMax);
    absl::StatusOr<io::Buffer> encoded = net::encode_versioned(a, version);
    BROOK_ASSERT(encoded.ok());
    m.assignment = *std::move(encoded);
  }
  std::vector<CoordinatorRecord> records;
  for (const auto& [id, cm] : cg->members) {
    member_tombstones(group_id, id, records);
  }
  // And those a failed write may have left in the log.
  for (const std::string& id : cg->maybe_logged) {
    if (!cg->members.contains(id)) member_tombstones(group_id, id, records);
  }
  for (CoordinatorRecord& r : consumer_group_tombstones(group_id)) records.push_back(std::move(r));
  classic.state_timestamp_ms = now_ms();
  // The record carries the next generation: the group rebalances from the
  // group epoch now, and should it be loaded from this record instead (a
  // coordinator failover before the rebalance is stored), its members,
  // still at the group epoch, must not pass for a generation that handed
  // them these assignments; they are told to rejoin.
  ++classic.generation;
  records.push_back(group_record(classic));
  --classic.generation;

  if (Error e = co_await write_consumer_records(group_id, partition, epoch, std::move(records)); e != Error::kNone) {
    co_return e;
  }
  Group* g = find(group_id);
  if (g == nullptr) g = &create(group_id);
  g->consumer.reset();
  g->classic_timers.clear();
  g->generation = classic.generation;
  g->protocol_type = classic.protocol_type;
  g->protocol = classic.protocol;
  g->leader = classic.leader;
  g->members = std::move(classic.members);
  g->join_order = std::move(classic.join_order);
  g->static_members = std::move(classic.static_members);
  g->pending_members.clear();
  g->pending_sync.clear();
  g->state = State::kStable;
  g->state_timestamp_ms = classic.state_timestamp_ms;
  for (auto& [id, m] : g->members) schedule_heartbeat(m);
  ctx_->log().info("group coordinator: group {} downgraded from the consumer to the classic protocol", group_id);
  prepare_rebalance(*g, fmt::format("Downgrade group {} from consumer to classic.", group_id));
  co_return Error::kNone;
}

io::Task<void> GroupCoordinator::await_conversion(const std::string& group_id) {
  // The conversion holds the partition's lock until it is applied (or
  // failed).
  auto lock = co_await shards_.lock(partition_for(group_id)).lock();
}

// --- classic members of consumer groups ---------------------------------------------------

void GroupCoordinator::sync_classic_timers(Group& g) {
  if (g.consumer == nullptr) {
    g.classic_timers.clear();
    return;
  }
  const io::Instant now = ctx_->clock().now();
  for (auto it = g.classic_timers.begin(); it != g.classic_timers.end();) {
    auto m = g.consumer->members.find(it->first);
    if (m == g.consumer->members.end() || !m->second.classic.has_value()) {
      it = g.classic_timers.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [id, m] : g.consumer->members) {
    if (!m.classic.has_value() || g.classic_timers.contains(id)) continue;
    g.classic_timers[id].session_deadline = now + std::chrono::milliseconds(m.classic->session_timeout_ms);
  }
}

const char* GroupCoordinator::consumer_member_expired(const Group& g, const ConsumerMember& m,
                                                      io::Instant now) const {
  if (!m.classic.has_value()) {
    if (m.session_deadline <= now) return "its session timed out";
    if (m.revocation_deadline.has_value() && *m.revocation_deadline <= now) {
      return "it did not revoke its partitions within its rebalance timeout";
    }
    return nullptr;
  }
  auto t = g.classic_timers.find(m.id);
  if (t == g.classic_timers.end()) return nullptr;
  if (t->second.session_deadline <= now) return "its session timed out";
  if (t->second.join_deadline.has_value() && *t->second.join_deadline <= now) {
    return "the classic member did not rejoin within its rebalance timeout";
  }
  if (t->second.sync_deadline.has_value() && *t->second.sync_deadline <= now) {
    return "the classic member did not sync within its rebalance timeout";
  }
  return nullptr;
}

io::Instant GroupCoordinator::consumer_member_deadline(const Group& g, const ConsumerMember& m) const {
  if (!m.classic.has_value()) {
    return m.revocation_deadline.has_value() ? std::min(m.session_deadline, *m.revocation_deadline)
                                             : m.session_deadline;
  }
  auto t = g.classic_timers.find(m.id);
  if (t == g.classic_timers.end()) return io::Instant::max();
  io::Instant at = t->second.session_deadline;
  if (t->second.join_deadline.has_value()) at = std::min(at, *t->second.join_deadline);
  if (t->second.sync_deadline.has_value()) at = std::min(at, *t->second.sync_deadline);
  return at;
}

Error GroupCoordinator::find_classic_member(ConsumerGroup& cg, const std::string& member_id,
                                            const std::optional<std::string>& instance_id, ConsumerMember** out) {
  ConsumerMember* m = nullptr;
  if (instance_id.has_value()) {
    for (auto& [id, cm] : cg.members) {
      if (cm.instance_id == instance_id) m = &cm;
    }
    if (m == nullptr) return Error::kUnknownMemberId;
    if (m->id != member_id) return Error::kFencedInstanceId;
  } else {
    auto it = cg.members.find(member_id);
    if (it == cg.members.end()) return Error::kUnknownMemberId;
    m = &it->second;
  }
  if (!m->classic.has_value()) return Error::kUnknownMemberId;
  *out = m;
  return Error::kNone;
}

bool GroupCoordinator::classic_member_must_rejoin(const ConsumerGroup& cg, const ConsumerMember& m) const {
  if (m.current.member_epoch < cg.group_epoch) return true;
  if (m.current.state == MemberState::kUnrevokedPartitions) return true;
  if (m.current.state != MemberState::kUnreleasedPartitions) return false;
  // Waiting for partitions: it rejoins once one of them is free.
  auto t = cg.target.find(m.id);
  if (t == cg.target.end()) return false;
  for (const auto& [topic, partitions] : t->second) {
    auto a = m.current.assigned.find(topic);
    for (int32_t p : partitions) {
      if (a != m.current.assigned.end() && a->second.contains(p)) continue;
      bool held = false;
      for (const auto& [id, other] : cg.members) {
        if (id == m.id) continue;
        for (const TopicPartitions* tps : {&other.current.assigned, &other.current.pending_revocation}) {
          auto o = tps->find(topic);
          held |= o != tps->end() && o->second.contains(p);
        }
      }
      if (!held) return true;
    }
  }
  return false;
}

io::Task<net::JoinGroupResponse> GroupCoordinator::classic_join_consumer_group(net::JoinGroupRequest r,
                                                                               int16_t version,
                                                                               std::string client_id,
                                                                               std::string client_host) {
  auto fail = [&](Error e, std::string member_id) {
    net::JoinGroupResponse out;
    out.error_code = code(e);
    out.member_id = std::move(member_id);
    out.generation_id = -1;
    out.protocol_name = version >= 7 ? std::nullopt : std::optional<std::string>("");
    return out;
  };
  const std::string group_id = r.group_id;
  const int32_t partition = partition_for(group_id);
  std::optional<net::JoinGroupResponse> answer;
  {
    auto lock = co_await shards_.lock(partition).lock();
    if (Error e = check_group(group_id); e != Error::kNone) co_return fail(e, r.member_id);
    Group* g = find(group_id);
    if (g != nullptr && g->consumer != nullptr && g->consumer->members.empty()) {
      // An empty consumer group: the classic protocol takes it over (its
      // records are superseded by the classic group's), under the lock so
      // no consumer protocol write in flight installs its state over the
      // classic member. Generations go on from the group epoch (see the
      // consumer protocol's takeover of an empty classic group).
      g->generation = std::max(g->generation, g->consumer->group_epoch);
      g->consumer.reset();
      g->classic_timers.clear();
      g->protocol_type.reset();
    }
    if (g != nullptr && g->consumer != nullptr) {
      ConsumerGroup& cg = *g->consumer;
      // The protocol type, and a protocol every classic member supports.
      std::map<std::string, size_t> supported;
      size_t classic_members = 0;
      for (const auto& [id, m] : cg.members) {
        if (!m.classic.has_value()) continue;
        ++classic_members;
        for (const auto& [name, md] : m.classic->protocols) ++supported[name];
      }
      bool common = false;
      for (const auto& p : r.protocols) {
        auto it = supported.find(p.name);
        common |= (it == supported.end() ? 0 : it->second) == classic_members;
      }
      if (r.protocol_type != "consumer" || r.protocols.empty() || !common) {
        co_return fail(Error::kInconsistentGroupProtocol, r.member_id);
      }
      const bool unknown = r.member_id.empty();
      std::string member_id = unknown ? new_uuid() : r.member_id;
      if (unknown && !r.group_instance_id.has_value() && version >= 4) {
        // Kafka's round trip: the member rejoins with the id it is given.
        co_return fail(Error::kMemberIdRequired, member_id);
      }
      const ConsumerMember* existing = nullptr;
      if (r.group_instance_id.has_value()) {
        const ConsumerMember* old = nullptr;
        for (const auto& [id, m] : cg.members) {
          if (m.instance_id == r.group_instance_id) old = &m;
        }
        if (!unknown) {
          if (old == nullptr) co_return fail(Error::kUnknownMemberId, member_id);
          if (old->id != member_id) co_return fail(Error::kFencedInstanceId, member_id);
          existing = old;
        }
      } else if (auto it = cg.members.find(member_id); it != cg.members.end()) {
        existing = &it->second;
      }
      absl::StatusOr<net::ConsumerProtocolSubscription> sub =
          net::decode_versioned<net::ConsumerProtocolSubscription>(r.protocols.front().metadata, /*tolerant=*/true);
      if (!sub.ok()) {
        ctx_->log().warn("group coordinator: member {} of group {} sent a malformed subscription: {}", member_id,
                         group_id, sub.status().ToString());
        co_return fail(Error::kUnknownServerError, member_id);
      }
      // The JoinGroup as a consumer protocol heartbeat.
      net::ConsumerGroupHeartbeatRequest hr;
      hr.group_id = group_id;
      hr.member_id = member_id;
      hr.member_epoch = existing == nullptr ? 0 : std::max(existing->current.member_epoch, 0);
      hr.instance_id = r.group_instance_id;
      hr.rack_id = sub->rack_id.has_value() && !sub->rack_id->empty() ? sub->rack_id : std::nullopt;
      hr.rebalance_timeout_ms = r.rebalance_timeout_ms;
      hr.subscribed_topic_names = sub->topics;
      hr.subscribed_topic_regex = std::nullopt;
      hr.server_assignor = std::nullopt;
      // What it still owns (eager members, and subscriptions before v1:
      // nothing).
      auto& owned = hr.topic_partitions.emplace();
      for (const auto& tp : sub->owned_partitions) {
        std::optional<CoordinatorLog::Topic> t = log_->topic(tp.topic);
        if (!t.has_value() || tp.partitions.empty()) continue;
        auto& o = owned.emplace_back();
        o.topic_id = t->id;
        o.partitions = tp.partitions;
      }
      ClassicMetadata classic;
      classic.session_timeout_ms = r.session_timeout_ms;
      for (const auto& p : r.protocols) classic.protocols.emplace_back(p.name, p.metadata);

      auto next = std::make_shared<ConsumerGroup>(cg);
      HeartbeatResult result;
      consumer_heartbeat_step(group_id, *next, hr, 0, client_id, client_host, result, &classic);
      if (result.error != Error::kNone) co_return fail(result.error, member_id);
      if (next->rewrite && !result.records.empty()) result.records = rewrite_records(group_id, &cg, *next);
      const int32_t epoch = *shards_.epoch(partition);
      if (!result.records.empty()) {
        const Error e = co_await commit_consumer_state(group_id, partition, epoch, next, std::move(result.records));
        if (e != Error::kNone) co_return fail(e, member_id);
      } else {
        g->consumer = next;
      }
      g = find(group_id);
      if (g == nullptr || g->consumer == nullptr) co_return fail(Error::kUnknownMemberId, member_id);
      sync_classic_timers(*g);
      const io::Instant now = ctx_->clock().now();
      Group::ClassicTimers& timers = g->classic_timers[result.member_id];
      timers.session_deadline = now + std::chrono::milliseconds(r.session_timeout_ms);
      timers.join_deadline.reset();
      timers.sync_deadline = now + std::chrono::milliseconds(std::max(r.rebalance_timeout_ms, 0));
      wake_timers();

      net::JoinGroupResponse out;
      out.member_id = result.member_id;
      out.generation_id = result.member_epoch;
      out.protocol_type = "consumer";
      out.protocol_name = r.protocols.front().name;
      out.leader = "";
      out.skip_assignment = false;
      answer = std::move(out);
    }
  }
  // The group is no consumer group with members (any more): the classic
  // protocol's own JoinGroup.
  if (!answer.has_value()) co_return co_await join_group(std::move(r), version, std::move(client_id),
                                                         std::move(client_host));
  co_return *std::move(answer);
}

net::SyncGroupResponse GroupCoordinator::classic_sync_consumer_group(Group& g, const net::SyncGroupRequest& r) {
  net::SyncGroupResponse out;
  auto fail = [&](Error e) {
    out.error_code = code(e);
    return out;
  };
  ConsumerGroup& cg = *g.consumer;
  ConsumerMember* m = nullptr;
  if (Error e = find_classic_member(cg, r.member_id, r.group_instance_id, &m); e != Error::kNone) return fail(e);
  if (r.generation_id != m->current.member_epoch) return fail(Error::kIllegalGeneration);
  const std::string& protocol = m->classic->protocols.front().first;
  if ((r.protocol_type.has_value() && *r.protocol_type != "consumer") ||
      (r.protocol_name.has_value() && *r.protocol_name != protocol)) {
    return fail(Error::kInconsistentGroupProtocol);
  }
  const io::Instant now = ctx_->clock().now();
  Group::ClassicTimers& timers = g.classic_timers[m->id];
  if (cg.group_epoch > m->current.member_epoch && m->current.state != MemberState::kUnrevokedPartitions) {
    if (!timers.join_deadline.has_value()) {
      timers.join_deadline = now + std::chrono::milliseconds(std::max(m->rebalance_timeout_ms, 0));
      wake_timers();
    }
    return fail(Error::kRebalanceInProgress);
  }
  timers.sync_deadline.reset();
  timers.session_deadline = now + std::chrono::milliseconds(m->classic->session_timeout_ms);
  net::ConsumerProtocolAssignment a;
  for (const auto& [topic, partitions] : m->current.assigned) {
    std::optional<CoordinatorLog::Topic> known = log_->topic(topic);
    if (!known.has_value() || partitions.empty()) continue;
    auto& tp = a.assigned_partitions.emplace_back();
    tp.topic = known->name;
    tp.partitions.assign(partitions.begin(), partitions.end());
  }
  const int16_t v = std::clamp<int16_t>(embedded_version(m->classic->protocols.front().second), 0,
                                        kAssignmentVersionMax);
  absl::StatusOr<io::Buffer> encoded = net::encode_versioned(a, v);
  BROOK_ASSERT(encoded.ok());
  out.protocol_type = r.protocol_type;
  out.protocol_name = r.protocol_name;
  out.assignment = *std::move(encoded);
  return out;
}

net::HeartbeatResponse GroupCoordinator::classic_heartbeat_consumer_group(Group& g, const net::HeartbeatRequest& r) {
  net::HeartbeatResponse out;
  ConsumerGroup& cg = *g.consumer;
  ConsumerMember* m = nullptr;
  if (Error e = find_classic_member(cg, r.member_id, r.group_instance_id, &m); e != Error::kNone) {
    out.error_code = code(e);
    return out;
  }
  if (r.generation_id != m->current.member_epoch) {
    out.error_code = code(Error::kIllegalGeneration);
    return out;
  }
  const io::Instant now = ctx_->clock().now();
  Group::ClassicTimers& timers = g.classic_timers[m->id];
  timers.session_deadline = now + std::chrono::milliseconds(m->classic->session_timeout_ms);
  if (classic_member_must_rejoin(cg, *m)) {
    if (!timers.join_deadline.has_value()) {
      timers.join_deadline = now + std::chrono::milliseconds(std::max(m->rebalance_timeout_ms, 0));
      wake_timers();
    }
    out.error_code = code(Error::kRebalanceInProgress);
  }
  return out;
}

io::Task<net::LeaveGroupResponse> GroupCoordinator::classic_leave_consumer_group(net::LeaveGroupRequest r,
                                                                                 int16_t version) {
  net::LeaveGroupResponse out;
  const std::string group_id = r.group_id;
  const int32_t partition = partition_for(group_id);
  auto lock = co_await shards_.lock(partition).lock();
  if (Error e = check_group(group_id); e != Error::kNone) {
    out.error_code = code(e);
    co_return out;
  }
  Group* g = find(group_id);
  if (g == nullptr || g->consumer == nullptr) {
    // Converted meanwhile: the classic protocol's LeaveGroup.
    lock = {};
    co_return co_await leave_group(std::move(r), version);
  }
  auto next = std::make_shared<ConsumerGroup>(*g->consumer);
  std::vector<CoordinatorRecord> records;
  std::vector<std::string> left;
  for (const auto& who : r.members) {
    net::LeaveGroupResponse::MemberResponse mr;
    mr.member_id = who.member_id;
    mr.group_instance_id = who.group_instance_id;
    ConsumerMember* m = nullptr;
    Error e = Error::kNone;
    if (who.group_instance_id.has_value() && who.member_id.empty()) {
      // An administrator removing a static member by its instance id.
      for (auto& [id, cm] : next->members) {
        if (cm.instance_id == who.group_instance_id) m = &cm;
      }
      e = m == nullptr || !m->classic.has_value() ? Error::kUnknownMemberId : Error::kNone;
    } else {
      e = find_classic_member(*next, who.member_id, who.group_instance_id, &m);
    }
    if (e == Error::kNone) {
      const std::string id = m->id;
      member_tombstones(group_id, id, records);
      next->members.erase(id);
      next->target.erase(id);
      left.push_back(id);
      ctx_->log().info("group coordinator: classic member {} left consumer group {}{}", id, group_id,
                       who.reason.has_value() ? ": " + *who.reason : std::string());
    }
    mr.error_code = code(e);
    if (version < 3) {
      out.error_code = mr.error_code;
    } else {
      out.members.push_back(std::move(mr));
    }
  }
  if (left.empty()) co_return out;
  refresh_subscriptions(group_id, *next, records);
  ++next->group_epoch;
  records.push_back(group_epoch_record(group_id, next->group_epoch));
  if (next->rewrite) {
    const Group* committed = find(group_id);
    records = rewrite_records(group_id, committed != nullptr ? committed->consumer.get() : nullptr, *next);
  }
  const int32_t epoch = *shards_.epoch(partition);
  const Error e = co_await commit_consumer_state(group_id, partition, epoch, next, std::move(records));
  if (e != Error::kNone) {
    if (version < 3) {
      out.error_code = code(e);
    } else {
      for (auto& mr : out.members) {
        if (mr.error_code == 0) mr.error_code = code(e);
      }
    }
    co_return out;
  }
  if (Group* now = find(group_id); now != nullptr) sync_classic_timers(*now);
  wake_timers();
  co_return out;
}

}  // namespace brook::group
