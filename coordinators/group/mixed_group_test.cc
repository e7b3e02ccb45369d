// coordinators/group/mixed_group_test.cc
//
// Groups of classic and consumer protocol members, in the simulator over an
// in-memory coordinator log: the online upgrade of a classic group when a
// consumer protocol member joins, classic members (cooperative and eager)
// reconciling inside a consumer group without a partition in two members'
// hands, their commits, timers and leaving, the online downgrade when the
// last consumer protocol member leaves, the migration policy, and the state
// rebuilt by replaying the partition.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "coordinators/group/test_harness.h"
#include "net/kafka/messages/consumer_protocol_assignment.h"
#include "net/kafka/messages/consumer_protocol_subscription.h"
#include "net/kafka/versioned.h"

namespace brook::group {
namespace {

using net::Error;
using Owned = std::map<std::string, std::set<int32_t>>;

constexpr int16_t kJoin = 7;

// A classic consumer: cooperative ones report what they own in their
// subscription (v1) and keep it across rebalances; eager ones (v0) give up
// everything before they rejoin.
struct Classic {
  std::string id;
  int32_t generation = -1;
  bool cooperative = true;
  std::optional<std::string> instance;
  Owned owned;
};

// A consumer protocol consumer.
struct Modern {
  std::string id;
  int32_t epoch = 0;
  bool joined = false;
  TopicPartitions owned;
};

io::Buffer subscription(const Classic& c) {
  net::ConsumerProtocolSubscription s;
  s.topics = {"t"};
  if (c.cooperative) {
    for (const auto& [topic, ps] : c.owned) {
      auto& tp = s.owned_partitions.emplace_back();
      tp.topic = topic;
      tp.partitions.assign(ps.begin(), ps.end());
    }
  }
  absl::StatusOr<io::Buffer> out = net::encode_versioned(s, c.cooperative ? 1 : 0);
  EXPECT_TRUE(out.ok());
  return *out;
}

io::Buffer assignment(const Owned& owned) {
  net::ConsumerProtocolAssignment a;
  for (const auto& [topic, ps] : owned) {
    auto& tp = a.assigned_partitions.emplace_back();
    tp.topic = topic;
    tp.partitions.assign(ps.begin(), ps.end());
  }
  absl::StatusOr<io::Buffer> out = net::encode_versioned(a, 1);
  EXPECT_TRUE(out.ok());
  return *out;
}

Owned decode_assignment(const io::Buffer& b) {
  Owned out;
  if (b.empty()) return out;
  absl::StatusOr<net::ConsumerProtocolAssignment> a = net::decode_versioned<net::ConsumerProtocolAssignment>(b, true);
  EXPECT_TRUE(a.ok());
  if (!a.ok()) return out;
  for (const auto& tp : a->assigned_partitions) out[tp.topic].insert(tp.partitions.begin(), tp.partitions.end());
  return out;
}

std::function<void(GroupCoordinatorConfig&)> with_policy(GroupCoordinatorConfig::MigrationPolicy p) {
  return [p](GroupCoordinatorConfig& c) { c.consumer_migration_policy = p; };
}

struct MixedHarness : Harness {
  explicit MixedHarness(std::function<void(GroupCoordinatorConfig&)> configure = {}) : Harness(std::move(configure)) {
    log->add_topic("t", 4);
  }
  TopicId topic_id() const { return log->topics.at("t").id; }
  int moderns = 0;

  net::JoinGroupRequest join_request(const Classic& c, const std::string& group) {
    net::JoinGroupRequest r;
    r.group_id = group;
    r.session_timeout_ms = 10000;
    r.rebalance_timeout_ms = 20000;
    r.member_id = c.id;
    r.group_instance_id = c.instance;
    r.protocol_type = "consumer";
    auto& p = r.protocols.emplace_back();
    p.name = "range";  // (the protocol's name means nothing to the coordinator)
    p.metadata = subscription(c);
    return r;
  }
  std::shared_ptr<std::optional<net::JoinGroupResponse>> start_join(const Classic& c, const std::string& group = "g") {
    return start(coordinator->join_group(join_request(c, group), kJoin, "classic", "/10.0.0.2"));
  }
  // A JoinGroup through MEMBER_ID_REQUIRED; the member takes its id and
  // generation.
  net::JoinGroupResponse join(Classic& c, const std::string& group = "g") {
    if (!c.cooperative) c.owned.clear();
    net::JoinGroupResponse out = await(start_join(c, group));
    if (out.error_code == net::code(Error::kMemberIdRequired)) {
      c.id = out.member_id;
      out = await(start_join(c, group));
    }
    if (out.error_code == 0) {
      c.id = out.member_id;
      c.generation = out.generation_id;
    }
    return out;
  }
  net::SyncGroupResponse sync(Classic& c, const std::string& group = "g", std::map<std::string, Owned> given = {}) {
    net::SyncGroupResponse out = await(Harness::start(sync_start(c, group, std::move(given))));
    if (out.error_code == 0) c.owned = decode_assignment(out.assignment);
    return out;
  }
  int16_t heartbeat(Classic& c, const std::string& group = "g") {
    net::HeartbeatRequest r;
    r.group_id = group;
    r.generation_id = c.generation;
    r.member_id = c.id;
    r.group_instance_id = c.instance;
    return coordinator->heartbeat(r, 4).error_code;
  }
  // One round of a classic member: heartbeat, and rejoin and sync when
  // told to.
  void step(Classic& c, const std::string& group = "g") {
    const int16_t e = heartbeat(c, group);
    if (e == 0) return;
    ASSERT_TRUE(e == net::code(Error::kRebalanceInProgress) || e == net::code(Error::kIllegalGeneration))
        << net::error_name(e);
    net::JoinGroupResponse j = join(c, group);
    ASSERT_EQ(j.error_code, 0) << net::error_name(j.error_code);
    net::SyncGroupResponse s = sync(c, group);
    ASSERT_TRUE(s.error_code == 0 || s.error_code == net::code(Error::kRebalanceInProgress))
        << net::error_name(s.error_code);
  }

  net::ConsumerGroupHeartbeatResponse beat(Modern& m, const std::string& group = "g") {
    // (Version 1: the consumer picks its member id.)
    if (m.id.empty()) m.id = fmt::format("modern-{}", ++moderns);
    net::ConsumerGroupHeartbeatRequest r;
    r.group_id = group;
    r.member_id = m.id;
    r.member_epoch = m.joined ? m.epoch : 0;
    if (!m.joined) {
      r.rebalance_timeout_ms = 20000;
      r.subscribed_topic_names = std::vector<std::string>{"t"};
    }
    auto& owned = r.topic_partitions.emplace();
    for (const auto& [topic, ps] : m.owned) {
      auto& t = owned.emplace_back();
      t.topic_id = topic;
      t.partitions.assign(ps.begin(), ps.end());
    }
    net::ConsumerGroupHeartbeatResponse out = call(coordinator->consumer_group_heartbeat(std::move(r), 1, "modern", "/10.0.0.3"));
    if (out.error_code == 0) {
      m.id = *out.member_id;
      m.epoch = out.member_epoch;
      m.joined = true;
      if (out.assignment.has_value()) {
        m.owned.clear();
        for (const auto& t : out.assignment->topic_partitions) m.owned[t.topic_id].insert(t.partitions.begin(), t.partitions.end());
      }
    }
    return out;
  }
  net::ConsumerGroupHeartbeatResponse leave(Modern& m, const std::string& group = "g") {
    net::ConsumerGroupHeartbeatRequest r;
    r.group_id = group;
    r.member_id = m.id;
    r.member_epoch = -1;
    m.joined = false;
    m.owned.clear();
    return call(coordinator->consumer_group_heartbeat(std::move(r), 1, "modern", "/10.0.0.3"));
  }

  // No partition of "t" is owned by two consumers; returns how many are owned.
  size_t check_disjoint(const std::vector<Classic*>& classics, const std::vector<Modern*>& moderns) {
    std::map<int32_t, std::string> owner;
    auto own = [&](int32_t p, const std::string& who) {
      auto [it, fresh] = owner.emplace(p, who);
      EXPECT_TRUE(fresh) << "partition t-" << p << " is owned by " << it->second << " and " << who;
    };
    for (Classic* c : classics) {
      if (auto it = c->owned.find("t"); it != c->owned.end()) {
        for (int32_t p : it->second) own(p, c->id);
      }
    }
    for (Modern* m : moderns) {
      if (auto it = m->owned.find(topic_id()); it != m->owned.end()) {
        for (int32_t p : it->second) own(p, m->id);
      }
    }
    return owner.size();
  }

  // Two classic members forming group `group` (the first leads and gives
  // the first two partitions to itself, the others to the second).
  void form(Classic& a, Classic& b, const std::string& group = "g") {
    net::JoinGroupResponse a0 = await(start_join(a, group));
    ASSERT_EQ(a0.error_code, net::code(Error::kMemberIdRequired));
    a.id = a0.member_id;
    net::JoinGroupResponse b0 = await(start_join(b, group));
    b.id = b0.member_id;
    auto ja = start_join(a, group);
    auto jb = start_join(b, group);
    net::JoinGroupResponse ra = await(ja);
    net::JoinGroupResponse rb = await(jb);
    ASSERT_EQ(ra.error_code, 0);
    ASSERT_EQ(rb.error_code, 0);
    ASSERT_EQ(ra.leader, a.id);
    a.generation = ra.generation_id;
    b.generation = rb.generation_id;
    auto sb = Harness::start(sync_start(b, group, {}));
    net::SyncGroupResponse sa = sync(a, group, {{a.id, Owned{{"t", {0, 1}}}}, {b.id, Owned{{"t", {2, 3}}}}});
    ASSERT_EQ(sa.error_code, 0);
    net::SyncGroupResponse rsb = await(sb);
    ASSERT_EQ(rsb.error_code, 0);
    b.owned = decode_assignment(rsb.assignment);
    ASSERT_EQ(coordinator->group_state(group), "Stable");
  }
  io::Task<net::SyncGroupResponse> sync_start(const Classic& c, const std::string& group,
                                              std::map<std::string, Owned> given) {
    net::SyncGroupRequest r;
    r.group_id = group;
    r.generation_id = c.generation;
    r.member_id = c.id;
    r.group_instance_id = c.instance;
    r.protocol_type = "consumer";
    r.protocol_name = "range";
    for (const auto& [id, owned] : given) {
      auto& a = r.assignments.emplace_back();
      a.member_id = id;
      a.assignment = assignment(owned);
    }
    return coordinator->sync_group(std::move(r), 5);
  }
};

TEST(MixedGroup, UpgradeReconcileAndDowngrade) {
  MixedHarness h;
  Classic a, b;
  b.cooperative = false;  // one eager member
  h.form(a, b);
  const int32_t generation = a.generation;
  EXPECT_EQ(h.commit("g", generation, a.id, "t", 0, 5).topics[0].partitions[0].error_code, 0);

  // A consumer protocol member joins: the group converts, keeping the
  // classic members' partitions, and moves to the next epoch.
  Modern c;
  net::ConsumerGroupHeartbeatResponse joined = h.beat(c);
  ASSERT_EQ(joined.error_code, 0) << (joined.error_message ? *joined.error_message : "");
  EXPECT_EQ(c.epoch, generation + 1);
  EXPECT_EQ(h.coordinator->group_members("g").size(), 3u);
  EXPECT_EQ(h.fetched("g", "t", 0), 5);
  EXPECT_EQ(h.check_disjoint({&a, &b}, {&c}), 4u);
  // The classic members learn to rejoin from their heartbeats.
  EXPECT_EQ(h.heartbeat(a), net::code(Error::kRebalanceInProgress));
  // Commits at the member's epoch still work; others are refused.
  EXPECT_EQ(h.commit("g", a.generation, a.id, "t", 0, 6).topics[0].partitions[0].error_code, 0);
  EXPECT_EQ(h.commit("g", a.generation + 5, a.id, "t", 0, 7).topics[0].partitions[0].error_code,
            net::code(Error::kIllegalGeneration));

  for (int round = 0; round < 12 && h.coordinator->group_state("g") != "Stable"; ++round) {
    h.step(a);
    h.check_disjoint({&a, &b}, {&c});
    h.step(b);
    h.check_disjoint({&a, &b}, {&c});
    h.beat(c);
    h.check_disjoint({&a, &b}, {&c});
    h.world.run_for(100ms);
  }
  ASSERT_EQ(h.coordinator->group_state("g"), "Stable");
  EXPECT_EQ(h.check_disjoint({&a, &b}, {&c}), 4u);
  EXPECT_FALSE(c.owned.empty());
  EXPECT_EQ(a.generation, c.epoch);
  EXPECT_EQ(h.heartbeat(a), 0);
  EXPECT_EQ(h.heartbeat(b), 0);
  // The classic API does not describe it; the consumer protocol's does,
  // classic members included.
  net::ConsumerGroupDescribeRequest dr;
  dr.group_ids = {"g"};
  EXPECT_EQ(h.coordinator->consumer_group_describe(dr, 0).groups.at(0).members.size(), 3u);

  // The state survives a reload (classic members stay classic).
  h.reload();
  EXPECT_EQ(h.coordinator->group_state("g"), "Stable");
  EXPECT_EQ(h.heartbeat(a), 0);
  EXPECT_EQ(h.heartbeat(b), 0);

  // The last consumer protocol member leaves: a classic group again, which
  // rebalances from generation = the group epoch.
  const int32_t group_epoch = h.coordinator->group_generation("g");
  ASSERT_EQ(h.leave(c).error_code, 0);
  EXPECT_EQ(h.coordinator->group_state("g"), "PreparingRebalance");
  EXPECT_EQ(h.coordinator->group_generation("g"), group_epoch);
  auto ja = h.start_join(a);
  b.owned.clear();
  auto jb = h.start_join(b);
  net::JoinGroupResponse ra = h.await(ja);
  net::JoinGroupResponse rb = h.await(jb);
  ASSERT_EQ(ra.error_code, 0);
  ASSERT_EQ(rb.error_code, 0);
  EXPECT_EQ(ra.generation_id, group_epoch + 1);
  // A classic leader again computes the assignment.
  Classic& leader = ra.leader == a.id ? a : b;
  Classic& follower = ra.leader == a.id ? b : a;
  ASSERT_EQ(ra.leader == a.id ? ra.members.size() : rb.members.size(), 2u);
  a.generation = b.generation = ra.generation_id;
  auto sf = h.Harness::start(h.sync_start(follower, "g", {}));
  ASSERT_EQ(h.sync(leader, "g", {{leader.id, Owned{{"t", {0, 1, 2}}}}, {follower.id, Owned{{"t", {3}}}}}).error_code, 0);
  ASSERT_EQ(h.await(sf).error_code, 0);
  EXPECT_EQ(h.coordinator->group_state("g"), "Stable");
  EXPECT_EQ(h.fetched("g", "t", 0), 6);
  h.reload();
  EXPECT_EQ(h.coordinator->group_state("g"), "Stable");
  EXPECT_EQ(h.coordinator->group_generation("g"), group_epoch + 1);
  EXPECT_EQ(h.fetched("g", "t", 0), 6);
}

TEST(MixedGroup, ClassicMembersJoinAConsumerGroupAndLeave) {
  MixedHarness h;
  Modern m;
  ASSERT_EQ(h.beat(m).error_code, 0);
  Classic c;
  // A dynamic classic member goes through MEMBER_ID_REQUIRED.
  net::JoinGroupResponse first = h.await(h.start_join(c));
  EXPECT_EQ(first.error_code, net::code(Error::kMemberIdRequired));
  EXPECT_FALSE(first.member_id.empty());
  c.id = first.member_id;
  net::JoinGroupResponse j = h.join(c);
  ASSERT_EQ(j.error_code, 0);
  EXPECT_EQ(j.leader, "");
  EXPECT_TRUE(j.members.empty());
  EXPECT_EQ(j.protocol_name, "range");
  EXPECT_EQ(j.generation_id, h.coordinator->group_generation("g"));
  // The wrong protocol type is refused.
  Classic other;
  net::JoinGroupRequest bad = h.join_request(other, "g");
  bad.protocol_type = "connect";
  EXPECT_EQ(h.call(h.coordinator->join_group(bad, kJoin, "x", "/h")).error_code,
            net::code(Error::kInconsistentGroupProtocol));
  for (int round = 0; round < 12 && h.coordinator->group_state("g") != "Stable"; ++round) {
    h.sync(c);
    h.step(c);
    h.beat(m);
    h.check_disjoint({&c}, {&m});
    h.world.run_for(100ms);
  }
  ASSERT_EQ(h.coordinator->group_state("g"), "Stable");
  EXPECT_EQ(h.check_disjoint({&c}, {&m}), 4u);
  EXPECT_FALSE(c.owned.empty());
  // A consumer protocol member is unknown to the classic APIs.
  Classic impostor;
  impostor.id = m.id;
  impostor.generation = m.epoch;
  EXPECT_EQ(h.heartbeat(impostor), net::code(Error::kUnknownMemberId));
  // The classic member leaves: the group epoch moves and the consumer
  // protocol member takes everything.
  const int32_t before = h.coordinator->group_generation("g");
  net::LeaveGroupRequest lr;
  lr.group_id = "g";
  auto& who = lr.members.emplace_back();
  who.member_id = c.id;
  net::LeaveGroupResponse left = h.call(h.coordinator->leave_group(lr, 5));
  ASSERT_EQ(left.error_code, 0);
  ASSERT_EQ(left.members.at(0).error_code, 0);
  EXPECT_EQ(h.coordinator->group_generation("g"), before + 1);
  for (int i = 0; i < 3; ++i) h.beat(m);
  EXPECT_EQ(h.check_disjoint({}, {&m}), 4u);
  // Leaving with the only member classic does not downgrade: the group is
  // a consumer group with one member.
  EXPECT_EQ(h.coordinator->group_members("g").size(), 1u);
}

TEST(MixedGroup, ClassicMembersAreFencedByTheirTimers) {
  MixedHarness h;
  Modern m;
  ASSERT_EQ(h.beat(m).error_code, 0);
  Classic quiet, unsynced;
  ASSERT_EQ(h.join(quiet).error_code, 0);
  ASSERT_EQ(h.sync(quiet).error_code, 0);
  ASSERT_EQ(h.join(unsynced).error_code, 0);
  EXPECT_EQ(h.coordinator->group_members("g").size(), 3u);
  // `quiet` never heartbeats (10 s session); `unsynced` heartbeats but never
  // sends SyncGroup (20 s rebalance timeout).
  for (int i = 0; i < 12; ++i) {
    h.world.run_for(1s);
    h.beat(m);
    h.heartbeat(unsynced);
  }
  std::vector<std::string> members = h.coordinator->group_members("g");
  EXPECT_EQ(std::count(members.begin(), members.end(), quiet.id), 0);
  EXPECT_EQ(std::count(members.begin(), members.end(), unsynced.id), 1);
  for (int i = 0; i < 10; ++i) {
    h.world.run_for(1s);
    h.beat(m);
    h.heartbeat(unsynced);
  }
  members = h.coordinator->group_members("g");
  EXPECT_EQ(members, std::vector<std::string>{m.id});
}

TEST(MixedGroup, ASessionTimeoutOfTheLastConsumerProtocolMemberDowngrades) {
  MixedHarness h;
  Classic a, b;
  h.form(a, b);
  Modern c;
  ASSERT_EQ(h.beat(c).error_code, 0);
  // Only the classic members keep heartbeating; the consumer protocol
  // member's 45 s session runs out.
  for (int i = 0; i < 50; ++i) {
    h.world.run_for(1s);
    if (h.coordinator->group_state("g") == "PreparingRebalance") break;
    h.step(a);
    h.step(b);
  }
  EXPECT_EQ(h.coordinator->group_state("g"), "PreparingRebalance");
  EXPECT_EQ(h.coordinator->group_members("g").size(), 2u);
  // A coordinator that loads the group before its rebalance is stored
  // sends the members to rejoin too (the generation they hold handed out
  // nothing).
  h.reload();
  EXPECT_EQ(h.heartbeat(a), net::code(Error::kIllegalGeneration));
  EXPECT_EQ(h.heartbeat(b), net::code(Error::kIllegalGeneration));
}

TEST(MixedGroup, TheMigrationPolicyCanRefuseTheUpgrade) {
  MixedHarness h(with_policy(GroupCoordinatorConfig::MigrationPolicy::kDowngrade));
  Classic a, b;
  h.form(a, b);
  Modern c;
  EXPECT_EQ(h.beat(c).error_code, net::code(Error::kGroupIdNotFound));
  EXPECT_EQ(h.coordinator->group_state("g"), "Stable");
  EXPECT_EQ(h.heartbeat(a), 0);
  // An empty classic group converts whatever the policy.
  Classic d, e;
  h.form(d, e, "g2");
  for (Classic* x : {&d, &e}) {
    net::LeaveGroupRequest lr;
    lr.group_id = "g2";
    lr.members.emplace_back().member_id = x->id;
    ASSERT_EQ(h.call(h.coordinator->leave_group(lr, 5)).error_code, 0);
  }
  EXPECT_EQ(h.beat(c, "g2").error_code, 0);

  EXPECT_EQ(parse_migration_policy("BIDIRECTIONAL"), GroupCoordinatorConfig::MigrationPolicy::kBidirectional);
  EXPECT_EQ(parse_migration_policy("disabled"), GroupCoordinatorConfig::MigrationPolicy::kDisabled);
  EXPECT_EQ(parse_migration_policy("sideways"), std::nullopt);
}

// An upgrade whose write fails stays a classic group in memory, though the
// write may land. What it wrote must not come back from the log once the
// classic group has moved on: the group's next write deletes it, and a
// deleted group stays deleted, after compaction too.
TEST(MixedGroup, AFailedUpgradeThatLandsLeavesNoGhostBehind) {
  for (const bool lands : {false, true}) {
    SCOPED_TRACE(lands ? "the failed write landed" : "the failed write was lost");
    MixedHarness h;
    Classic a, b;
    h.form(a, b);
    h.log->fail_next = Error::kNotEnoughReplicas;
    h.log->failed_write_lands = lands;
    Modern c;
    EXPECT_NE(h.beat(c).error_code, 0);
    EXPECT_EQ(h.coordinator->group_state("g"), "Stable");
    EXPECT_EQ(h.heartbeat(a), 0);
    EXPECT_EQ(h.coordinator->group_members("g").size(), 2u);
    for (Classic* x : {&a, &b}) {
      net::LeaveGroupRequest lr;
      lr.group_id = "g";
      lr.members.emplace_back().member_id = x->id;
      ASSERT_EQ(h.call(h.coordinator->leave_group(lr, 5)).error_code, 0);
    }
    EXPECT_EQ(h.coordinator->group_state("g"), "Empty");
    h.world.run_for(1s);  // (the emptied group's record is written in the background)
    h.reload();
    EXPECT_EQ(h.coordinator->group_state("g"), "Empty");
    EXPECT_TRUE(h.coordinator->group_members("g").empty());
    net::DeleteGroupsRequest del;
    del.groups_names = {"g"};
    EXPECT_EQ(h.call(h.coordinator->delete_groups(del, 2)).results.at(0).error_code, 0);
    h.reload();
    EXPECT_EQ(h.coordinator->group_state("g"), "Dead");
    // Compaction keeps each key's newest record and in time drops the
    // tombstones: what is left must not hold the group either.
    for (auto& [p, entries] : h.log->partitions) {
      std::map<std::string, size_t> newest;
      for (size_t i = 0; i < entries.size(); ++i) newest[std::string(entries[i].record.key.view())] = i;
      std::vector<MemoryLog::Entry> kept;
      for (size_t i = 0; i < entries.size(); ++i) {
        if (newest[std::string(entries[i].record.key.view())] == i && entries[i].record.value.has_value()) {
          kept.push_back(entries[i]);
        }
      }
      entries = std::move(kept);
    }
    h.reload();
    EXPECT_EQ(h.coordinator->group_state("g"), "Dead");
  }
}

TEST(MixedGroup, AClassicJoinWaitingDuringTheUpgradeIsToldToRejoin) {
  MixedHarness h;
  Classic a, b;
  h.form(a, b);
  // `a` rejoins (a rebalance starts and waits for `b`) when the consumer
  // protocol member arrives.
  auto waiting = h.start_join(a);
  Modern c;
  ASSERT_EQ(h.beat(c).error_code, 0);
  net::JoinGroupResponse r = h.await(waiting);
  EXPECT_EQ(r.error_code, net::code(Error::kRebalanceInProgress));
  // It rejoins the consumer group as a classic member.
  ASSERT_EQ(h.join(a).error_code, 0);
  EXPECT_EQ(h.coordinator->group_members("g").size(), 3u);
}

TEST(MixedGroup, TheMigrationPolicyCanRefuseTheDowngrade) {
  MixedHarness h(with_policy(GroupCoordinatorConfig::MigrationPolicy::kUpgrade));
  Classic a, b;
  h.form(a, b);
  Modern c;
  ASSERT_EQ(h.beat(c).error_code, 0);
  for (int round = 0; round < 12 && h.coordinator->group_state("g") != "Stable"; ++round) {
    h.step(a);
    h.step(b);
    h.beat(c);
    h.world.run_for(100ms);
  }
  ASSERT_EQ(h.coordinator->group_state("g"), "Stable");
  // The last consumer protocol member leaves: the group stays a consumer
  // group of the two classic members, which keep their partitions.
  const int32_t before = h.coordinator->group_generation("g");
  ASSERT_EQ(h.leave(c).error_code, 0);
  EXPECT_EQ(h.coordinator->group_members("g").size(), 2u);
  EXPECT_EQ(h.coordinator->group_generation("g"), before + 1);
  net::ListGroupsRequest lr;
  net::ListGroupsResponse listed = h.coordinator->list_groups(lr, 5);
  ASSERT_EQ(listed.groups.size(), 1u);
  EXPECT_EQ(listed.groups[0].group_type, "consumer");
  for (int round = 0; round < 12 && h.check_disjoint({&a, &b}, {}) < 4; ++round) {
    h.step(a);
    h.step(b);
    h.world.run_for(100ms);
  }
  EXPECT_EQ(h.check_disjoint({&a, &b}, {}), 4u);
  EXPECT_EQ(h.coordinator->group_state("g"), "Stable");
}

TEST(MixedGroup, AStaticClassicMemberReplacesItselfInAConsumerGroup) {
  MixedHarness h;
  Modern m;
  ASSERT_EQ(h.beat(m).error_code, 0);
  Classic s;
  s.instance = "instance-1";
  // A static member skips MEMBER_ID_REQUIRED.
  ASSERT_EQ(h.join(s).error_code, 0);
  for (int round = 0; round < 12 && (h.coordinator->group_state("g") != "Stable" || s.owned.empty()); ++round) {
    h.sync(s);
    h.step(s);
    h.beat(m);
    h.world.run_for(100ms);
  }
  ASSERT_EQ(h.coordinator->group_state("g"), "Stable");
  ASSERT_FALSE(s.owned.empty());
  // The same instance restarts (a new member id) while the old one is
  // still in the group: it takes the old one's place and partitions.
  Classic restarted;
  restarted.instance = s.instance;
  ASSERT_EQ(h.join(restarted).error_code, 0);
  EXPECT_NE(restarted.id, s.id);
  std::vector<std::string> members = h.coordinator->group_members("g");
  EXPECT_EQ(members.size(), 2u);
  EXPECT_EQ(std::count(members.begin(), members.end(), s.id), 0);
  ASSERT_EQ(h.sync(restarted).error_code, 0);
  EXPECT_EQ(restarted.owned, s.owned);
  // The old member is fenced.
  EXPECT_EQ(h.heartbeat(s), net::code(Error::kFencedInstanceId));
  EXPECT_EQ(h.heartbeat(restarted), 0);
}

TEST(MixedGroup, ClassicRequestsDuringTheUpgradeWaitForIt) {
  MixedHarness h;
  Classic a, b, d;
  h.form(a, b);
  const int32_t generation = a.generation;
  // The conversion's write takes 50 ms.
  h.log->delay = 50ms;
  Modern c;
  c.id = "modern";
  net::ConsumerGroupHeartbeatRequest join;
  join.group_id = "g";
  join.member_id = c.id;
  join.member_epoch = 0;
  join.rebalance_timeout_ms = 20000;
  join.subscribed_topic_names = std::vector<std::string>{"t"};
  join.topic_partitions.emplace();
  auto upgraded = h.start(h.coordinator->consumer_group_heartbeat(std::move(join), 1, "modern", "/10.0.0.3"));
  h.world.run_for(10ms);
  ASSERT_FALSE(upgraded->has_value());

  auto committed = h.start(h.coordinator->commit_offsets(Harness::commit_request("g", generation, a.id, "t", 0, 42), 8));
  auto synced = h.Harness::start(h.sync_start(a, "g", {}));
  net::LeaveGroupRequest leave;
  leave.group_id = "g";
  leave.members.emplace_back().member_id = b.id;
  auto left = h.start(h.coordinator->leave_group(std::move(leave), 5));
  auto joined = h.start_join(d);
  h.world.run_for(10ms);
  // None is answered while the group is being converted.
  EXPECT_FALSE(committed->has_value());
  EXPECT_FALSE(synced->has_value());
  EXPECT_FALSE(left->has_value());
  EXPECT_FALSE(joined->has_value());

  ASSERT_EQ(h.await(upgraded).error_code, 0);
  // Then each is handled by the consumer group: the commit at the member's
  // epoch is taken, the classic member is told to rejoin by its sync, the
  // leaving one leaves, and the new one goes through MEMBER_ID_REQUIRED.
  net::OffsetCommitResponse cr = h.await(committed);
  ASSERT_EQ(cr.topics.size(), 1u);
  EXPECT_EQ(cr.topics[0].partitions[0].error_code, 0);
  EXPECT_EQ(h.fetched("g", "t", 0), 42);
  EXPECT_EQ(h.await(synced).error_code, net::code(Error::kRebalanceInProgress));
  net::LeaveGroupResponse lr = h.await(left);
  EXPECT_EQ(lr.error_code, 0);
  ASSERT_EQ(lr.members.size(), 1u);
  EXPECT_EQ(lr.members[0].error_code, 0);
  EXPECT_EQ(h.await(joined).error_code, net::code(Error::kMemberIdRequired));
  std::vector<std::string> members = h.coordinator->group_members("g");
  EXPECT_EQ(members.size(), 2u);
  EXPECT_EQ(std::count(members.begin(), members.end(), b.id), 0);
  EXPECT_EQ(std::count(members.begin(), members.end(), a.id), 1);
}

}  // namespace
}  // namespace brook::group
