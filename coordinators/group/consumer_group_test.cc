// coordinators/group/consumer_group_test.cc
//
// The consumer group protocol (KIP-848) of the group coordinator, in the
// simulator over an in-memory coordinator log: joining and reconciling
// without a partition in two members' hands, epoch fencing, session and
// revocation timeouts, static members, offset commits at member epochs,
// state rebuilt by replaying the partition (also after a failed write), and
// a RapidCheck model run of well- and badly-behaved consumers.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <fmt/format.h>

#include "coordinators/group/test_harness.h"

namespace brook::group {
namespace {

using net::Error;

constexpr int16_t kHeartbeatVersion = 1;

// A consumer as a client of the protocol: its member id and epoch, and the
// partitions it believes it owns.
struct Consumer {
  std::string id;
  int32_t epoch = 0;
  std::vector<std::string> topics{"orders", "events"};
  std::optional<std::string> instance;
  std::optional<std::string> assignor;
  TopicPartitions owned;
  bool joined = false;
};

TopicPartitions assignment_of(const net::ConsumerGroupHeartbeatResponse& r) {
  TopicPartitions out;
  if (!r.assignment.has_value()) return out;
  for (const auto& t : r.assignment->topic_partitions) out[t.topic_id].insert(t.partitions.begin(), t.partitions.end());
  return out;
}

size_t count(const TopicPartitions& tps) {
  size_t n = 0;
  for (const auto& [t, ps] : tps) n += ps.size();
  return n;
}

struct ConsumerHarness : Harness {
  ConsumerHarness() {
    log->add_topic("orders", 6);
    log->add_topic("events", 4);
  }

  net::ConsumerGroupHeartbeatRequest request(const Consumer& c, const std::string& group = "cg") {
    net::ConsumerGroupHeartbeatRequest r;
    r.group_id = group;
    r.member_id = c.id;
    r.member_epoch = c.joined ? c.epoch : 0;
    r.instance_id = c.instance;
    r.server_assignor = c.assignor;
    if (!c.joined) {
      r.rebalance_timeout_ms = 30000;
      r.subscribed_topic_names = c.topics;
      r.topic_partitions.emplace();
      return r;
    }
    auto& owned = r.topic_partitions.emplace();
    for (const auto& [topic, ps] : c.owned) {
      auto& t = owned.emplace_back();
      t.topic_id = topic;
      t.partitions.assign(ps.begin(), ps.end());
    }
    return r;
  }
  net::ConsumerGroupHeartbeatResponse send(net::ConsumerGroupHeartbeatRequest r, int16_t version = kHeartbeatVersion) {
    return call(coordinator->consumer_group_heartbeat(std::move(r), version, "client", "/10.0.0.1"));
  }
  // One heartbeat of a consumer that follows its assignment at once (it
  // revokes and takes partitions as answered) and rejoins when fenced.
  net::ConsumerGroupHeartbeatResponse beat(Consumer& c, const std::string& group = "cg") {
    net::ConsumerGroupHeartbeatResponse out = send(request(c, group));
    apply(c, out);
    return out;
  }
  // A consumer's first heartbeat, subscribing with a regular expression.
  void join_by_regex(Consumer& c, const std::string& regex) {
    c.topics = {};
    net::ConsumerGroupHeartbeatRequest join = request(c);
    join.subscribed_topic_names.reset();
    join.subscribed_topic_regex = regex;
    apply(c, send(std::move(join)));
  }
  // A group that is gone (its last member expired and the empty group was
  // cleaned up) is joined again too.
  static void apply(Consumer& c, const net::ConsumerGroupHeartbeatResponse& out) {
    if (out.error_code == net::code(Error::kFencedMemberEpoch) || out.error_code == net::code(Error::kUnknownMemberId) ||
        out.error_code == net::code(Error::kGroupIdNotFound)) {
      c.owned.clear();
      c.joined = false;
      c.epoch = 0;
      return;
    }
    if (out.error_code != 0) return;
    c.id = *out.member_id;
    c.epoch = out.member_epoch;
    c.joined = true;
    if (out.assignment.has_value()) c.owned = assignment_of(out);
  }
  net::ConsumerGroupDescribeResponse::DescribedGroup describe(const std::string& group = "cg") {
    net::ConsumerGroupDescribeRequest r;
    r.group_ids = {group};
    return coordinator->consumer_group_describe(r, 0).groups.at(0);
  }
  // Heartbeats every consumer until the group is Stable.
  void settle(std::vector<Consumer*> cs, const std::string& group = "cg") {
    for (int round = 0; round < 10 && coordinator->group_state(group) != "Stable"; ++round) {
      for (Consumer* c : cs) beat(*c, group);
    }
    EXPECT_EQ(coordinator->group_state(group), "Stable");
  }
  net::OffsetCommitResponse commit_at(const Consumer& c, int32_t epoch, int16_t version) {
    return call(coordinator->commit_offsets(commit_request("cg", epoch, c.id, "orders", 0, 42), version));
  }
};

void expect_disjoint_and_complete(const std::vector<Consumer*>& cs, size_t partitions) {
  std::set<std::pair<uint8_t, int32_t>> seen;
  size_t total = 0;
  for (const Consumer* c : cs) {
    for (const auto& [topic, ps] : c->owned) {
      for (int32_t p : ps) {
        EXPECT_TRUE(seen.insert({topic.bytes[0], p}).second) << "partition owned twice";
        ++total;
      }
    }
  }
  EXPECT_EQ(total, partitions);
}

TEST(ConsumerGroup, MembersSplitThePartitionsWithoutOverlap) {
  ConsumerHarness h;
  Consumer a, b;
  a.id = "member-a";
  b.id = "member-b";
  net::ConsumerGroupHeartbeatResponse ra = h.beat(a);
  ASSERT_EQ(ra.error_code, 0) << ra.error_message.value_or("");
  EXPECT_EQ(ra.member_id, "member-a");
  EXPECT_EQ(ra.member_epoch, 1);
  EXPECT_EQ(ra.heartbeat_interval_ms, 5000);
  EXPECT_EQ(count(a.owned), 10u) << "the only member gets every partition";

  net::ConsumerGroupHeartbeatResponse rb = h.beat(b);
  ASSERT_EQ(rb.error_code, 0);
  EXPECT_EQ(rb.member_epoch, 2);
  EXPECT_TRUE(b.owned.empty()) << "b's partitions are still a's";
  EXPECT_EQ(h.coordinator->group_state("cg"), "Reconciling");

  // a is told to give up half and stays at epoch 1 until it has.
  ra = h.beat(a);
  EXPECT_EQ(ra.member_epoch, 1);
  EXPECT_EQ(count(a.owned), 5u);
  ra = h.beat(a);
  EXPECT_EQ(ra.member_epoch, 2);
  h.beat(b);
  EXPECT_EQ(count(b.owned), 5u);
  expect_disjoint_and_complete({&a, &b}, 10);
  EXPECT_EQ(h.coordinator->group_state("cg"), "Stable");

  auto d = h.describe();
  EXPECT_EQ(d.error_code, 0);
  EXPECT_EQ(d.group_state, "Stable");
  EXPECT_EQ(d.group_epoch, 2);
  EXPECT_EQ(d.assignment_epoch, 2);
  EXPECT_EQ(d.assignor_name, "uniform");
  ASSERT_EQ(d.members.size(), 2u);
  EXPECT_EQ(d.members[0].member_id, "member-a");
  EXPECT_EQ(d.members[0].client_host, "/10.0.0.1");
  EXPECT_EQ(d.members[0].subscribed_topic_names, (std::vector<std::string>{"events", "orders"}));
  EXPECT_EQ(d.members[0].assignment, d.members[0].target_assignment);
  ASSERT_FALSE(d.members[0].assignment.topic_partitions.empty());
  EXPECT_FALSE(d.members[0].assignment.topic_partitions[0].topic_name.empty());

  // A steady heartbeat writes nothing and carries no assignment.
  const int writes = h.log->writes;
  net::ConsumerGroupHeartbeatRequest steady = h.request(a);
  steady.topic_partitions.reset();
  net::ConsumerGroupHeartbeatResponse again = h.send(steady);
  EXPECT_EQ(again.error_code, 0);
  EXPECT_FALSE(again.assignment.has_value());
  EXPECT_EQ(h.log->writes, writes);
}

TEST(ConsumerGroup, SteadyHeartbeatsWriteNothingAndKeepTheSession) {
  ConsumerHarness h;
  Consumer a, b;
  a.id = "a";
  b.id = "b";
  h.settle({&a, &b});
  ASSERT_EQ(h.coordinator->group_state("cg"), "Stable");
  const int writes = h.log->writes;
  const int32_t epoch = a.epoch;
  const uint64_t steady = h.coordinator->steady_heartbeats();
  // Well past one 45 s session, heartbeating every 10 s: no writes, no
  // fencing, the same epoch, and no copy of the group's state.
  for (int i = 0; i < 8; ++i) {
    h.world.run_for(10s);
    EXPECT_EQ(h.beat(a).error_code, 0);
    EXPECT_EQ(h.beat(b).error_code, 0);
  }
  EXPECT_EQ(h.coordinator->steady_heartbeats(), steady + 16);
  EXPECT_EQ(h.log->writes, writes);
  EXPECT_EQ(a.epoch, epoch);
  EXPECT_EQ(h.coordinator->group_members("cg").size(), 2u);
  expect_disjoint_and_complete({&a, &b}, 10);
  // A full request (as after a lost response) gets the assignment again.
  net::ConsumerGroupHeartbeatRequest full = h.request(a);
  full.rebalance_timeout_ms = 30000;
  full.subscribed_topic_names = a.topics;
  net::ConsumerGroupHeartbeatResponse again = h.send(full);
  ASSERT_EQ(again.error_code, 0);
  EXPECT_EQ(assignment_of(again), a.owned);
  // A heartbeat that reports other partitions than assigned takes the full
  // path (and is corrected).
  Consumer odd = a;
  odd.owned.clear();
  const uint64_t before_odd = h.coordinator->steady_heartbeats();
  EXPECT_EQ(h.beat(odd).error_code, 0);
  EXPECT_EQ(h.coordinator->steady_heartbeats(), before_odd);
  // A changed subscription still bumps the group epoch.
  net::ConsumerGroupHeartbeatRequest change = h.request(b);
  change.subscribed_topic_names = std::vector<std::string>{"orders"};
  net::ConsumerGroupHeartbeatResponse changed = h.send(change);
  ASSERT_EQ(changed.error_code, 0);
  EXPECT_GT(h.coordinator->group_generation("cg"), epoch);
  EXPECT_GT(h.log->writes, writes);
}

TEST(ConsumerGroup, InvalidRequestsAndEpochFencing) {
  ConsumerHarness h;
  Consumer a;
  a.id = "member-a";
  ASSERT_EQ(h.beat(a).error_code, 0);

  auto bad = h.request(a);
  bad.member_epoch = a.epoch + 1;
  net::ConsumerGroupHeartbeatResponse r = h.send(bad);
  EXPECT_EQ(r.error_code, net::code(Error::kFencedMemberEpoch));
  EXPECT_TRUE(r.error_message.has_value());

  bad = h.request(a);
  bad.member_id = "nobody";
  EXPECT_EQ(h.send(bad).error_code, net::code(Error::kUnknownMemberId));

  Consumer fresh;
  fresh.id = "member-x";
  auto join = h.request(fresh);
  join.subscribed_topic_names.reset();
  EXPECT_EQ(h.send(join).error_code, net::code(Error::kInvalidRequest));
  join = h.request(fresh);
  join.rebalance_timeout_ms = -1;
  EXPECT_EQ(h.send(join).error_code, net::code(Error::kInvalidRequest));
  join = h.request(fresh);
  join.topic_partitions->emplace_back().partitions = {1};
  EXPECT_EQ(h.send(join).error_code, net::code(Error::kInvalidRequest));
  join = h.request(fresh);
  join.member_epoch = -3;
  EXPECT_EQ(h.send(join).error_code, net::code(Error::kInvalidRequest));
  join = h.request(fresh);
  join.member_id = "";
  EXPECT_EQ(h.send(join).error_code, net::code(Error::kInvalidRequest)) << "v1 members choose their id";
  net::ConsumerGroupHeartbeatResponse v0 = h.send(join, 0);
  EXPECT_EQ(v0.error_code, 0) << "v0: the coordinator chooses the id";
  EXPECT_EQ(v0.member_id->size(), 22u);
  join = h.request(fresh);
  join.server_assignor = "sticky";
  EXPECT_EQ(h.send(join).error_code, net::code(Error::kUnsupportedAssignor));
  join = h.request(fresh);
  join.subscribed_topic_regex = "orders(";
  EXPECT_EQ(h.send(join).error_code, net::code(Error::kInvalidRegularExpression));
  // RE2's syntax, as Kafka's RE2/J: no backreferences or lookarounds.
  for (const char* refused : {"(ord)\\1ers", "orders(?=x)", "(?<!x)orders"}) {
    join = h.request(fresh);
    join.subscribed_topic_regex = refused;
    EXPECT_EQ(h.send(join).error_code, net::code(Error::kInvalidRegularExpression)) << refused;
  }
  join = h.request(fresh);
  join.group_id = "unknown-group";
  join.member_epoch = 3;
  EXPECT_EQ(h.send(join).error_code, net::code(Error::kGroupIdNotFound));
}

TEST(ConsumerGroup, LostResponseAtThePreviousEpochIsAccepted) {
  ConsumerHarness h;
  Consumer a, b;
  a.id = "a";
  b.id = "b";
  h.beat(a);
  ASSERT_EQ(a.epoch, 1);
  h.beat(b);
  h.beat(a);  // revokes half, still at epoch 1
  ASSERT_EQ(a.epoch, 1);
  ASSERT_EQ(count(a.owned), 5u);
  Consumer lost = a;
  h.beat(a);  // moves to epoch 2; suppose this answer is lost
  ASSERT_EQ(a.epoch, 2);
  // The retry at epoch 1, owning a subset of the assignment, is answered
  // with epoch 2 and (a full request) the assignment.
  net::ConsumerGroupHeartbeatRequest r = h.request(lost);
  r.rebalance_timeout_ms = 30000;
  r.subscribed_topic_names = lost.topics;
  net::ConsumerGroupHeartbeatResponse out = h.send(r);
  ASSERT_EQ(out.error_code, 0) << out.error_message.value_or("");
  EXPECT_EQ(out.member_epoch, 2);
  EXPECT_EQ(assignment_of(out), a.owned);
  // Owning more than the assignment, or an epoch neither the current nor
  // the previous one: fenced.
  r.topic_partitions->emplace_back().topic_id = h.log->topics.at("orders").id;
  r.topic_partitions->back().partitions = {0, 1, 2, 3, 4, 5};
  EXPECT_EQ(h.send(r).error_code, net::code(Error::kFencedMemberEpoch));
  r = h.request(lost);
  r.member_epoch = 3;
  EXPECT_EQ(h.send(r).error_code, net::code(Error::kFencedMemberEpoch));
}

TEST(ConsumerGroup, SessionTimeoutFencesAndThePartitionsMove) {
  ConsumerHarness h;
  Consumer a, b;
  a.id = "a";
  b.id = "b";
  h.beat(a);
  h.beat(b);
  h.settle({&a, &b});
  // b stops; a heartbeats every 5 s.
  for (int i = 0; i < 10; ++i) {
    h.world.run_for(5s);
    h.beat(a);
  }
  EXPECT_EQ(h.coordinator->group_members("cg"), std::vector<std::string>{"a"});
  h.settle({&a});
  EXPECT_EQ(count(a.owned), 10u);
  // b comes back: unknown, it rejoins with nothing and gets a share.
  EXPECT_EQ(h.beat(b).error_code, net::code(Error::kUnknownMemberId));
  EXPECT_TRUE(b.owned.empty());
  EXPECT_EQ(h.beat(b).error_code, 0);
  h.settle({&a, &b});
  expect_disjoint_and_complete({&a, &b}, 10);
}

TEST(ConsumerGroup, MemberThatDoesNotRevokeIsFencedAfterItsRebalanceTimeout) {
  ConsumerHarness h;
  Consumer a, b;
  a.id = "a";
  b.id = "b";
  h.beat(a);
  ASSERT_EQ(count(a.owned), 10u);
  h.beat(b);
  // a heartbeats but keeps reporting every partition owned.
  const TopicPartitions all = a.owned;
  for (int i = 0; i < 8; ++i) {
    h.world.run_for(5s);
    net::ConsumerGroupHeartbeatResponse r = h.send(h.request(a));
    if (r.error_code != 0) {
      EXPECT_EQ(r.error_code, net::code(Error::kUnknownMemberId));
      break;
    }
    h.beat(b);
    EXPECT_TRUE(b.owned.empty()) << "b gets nothing while a holds it";
  }
  EXPECT_EQ(h.coordinator->group_members("cg"), std::vector<std::string>{"b"});
  h.settle({&b});
  EXPECT_EQ(count(b.owned), 10u);
}

TEST(ConsumerGroup, LeavingAndStaticMembers) {
  ConsumerHarness h;
  Consumer a, s;
  a.id = "a";
  s.id = "s1";
  s.instance = "instance-1";
  h.beat(a);
  h.beat(s);
  h.settle({&a, &s});
  const TopicPartitions held = s.owned;
  ASSERT_EQ(count(held), 5u);

  // Another incarnation while s is active: refused.
  Consumer s2;
  s2.id = "s2";
  s2.instance = "instance-1";
  EXPECT_EQ(h.beat(s2).error_code, net::code(Error::kUnreleasedInstanceId));

  // s leaves as a static member: its partitions wait for it.
  auto leave = h.request(s);
  leave.member_epoch = -2;
  net::ConsumerGroupHeartbeatResponse left = h.send(leave);
  EXPECT_EQ(left.error_code, 0);
  EXPECT_EQ(left.member_epoch, -2);
  h.beat(a);
  EXPECT_EQ(count(a.owned), 5u) << "nothing moves to a";
  // The new incarnation takes over the assignment.
  net::ConsumerGroupHeartbeatResponse back = h.beat(s2);
  ASSERT_EQ(back.error_code, 0) << back.error_message.value_or("");
  EXPECT_EQ(s2.owned, held);
  EXPECT_EQ(h.coordinator->group_members("cg"), (std::vector<std::string>{"a", "s2"}));
  // The old incarnation is fenced.
  EXPECT_EQ(h.send(h.request(s)).error_code, net::code(Error::kFencedInstanceId));
  h.settle({&a, &s2});

  // A dynamic leave: the group epoch moves and a gets everything.
  const int32_t epoch = h.coordinator->group_generation("cg");
  auto bye = h.request(s2);
  bye.member_epoch = -1;
  bye.instance_id.reset();
  EXPECT_EQ(h.send(bye).error_code, 0);
  EXPECT_EQ(h.coordinator->group_generation("cg"), epoch + 1);
  h.settle({&a});
  EXPECT_EQ(count(a.owned), 10u);
}

TEST(ConsumerGroup, NewPartitionsAndSubscriptionChangesRebalance) {
  ConsumerHarness h;
  Consumer a, b;
  a.id = "a";
  b.id = "b";
  b.topics = {"orders"};
  h.beat(a);
  h.beat(b);
  h.settle({&a, &b});
  expect_disjoint_and_complete({&a, &b}, 10);
  // b only ever gets orders partitions.
  const TopicId orders = h.log->topics.at("orders").id;
  for (const auto& [topic, ps] : b.owned) EXPECT_EQ(topic, orders);
  // orders grows to 8 partitions: the next heartbeat bumps the epoch.
  const int32_t epoch = h.coordinator->group_generation("cg");
  h.log->add_topic("orders", 8);
  h.log->topics.at("orders").id = orders;
  h.beat(a);
  h.settle({&a, &b});
  EXPECT_GT(h.coordinator->group_generation("cg"), epoch);
  expect_disjoint_and_complete({&a, &b}, 12);
  // a drops events: its events partitions are revoked and nobody gets them.
  a.topics = {"orders"};
  auto change = h.request(a);
  change.subscribed_topic_names = a.topics;
  h.apply(a, h.send(change));
  h.settle({&a, &b});
  expect_disjoint_and_complete({&a, &b}, 8);
  // A regular expression subscription.
  Consumer c;
  c.id = "c";
  h.join_by_regex(c, "ev.*");
  ASSERT_TRUE(c.joined);
  h.settle({&a, &b, &c});
  expect_disjoint_and_complete({&a, &b, &c}, 12);
  EXPECT_EQ(count(c.owned), 4u) << "c alone subscribes to events";
}

// Subscription patterns are RE2's (Kafka compiles them with RE2/J): flags
// such as (?i) work, and matching takes time linear in the topic name
// whatever the pattern — a backtracking matcher would take 2^40 steps for
// the pattern below against the topic created here.
TEST(ConsumerGroup, RegexSubscriptionsAreRe2s) {
  ConsumerHarness h;
  const std::string as(40, 'a');
  h.log->add_topic(as, 2);
  Consumer a;
  a.id = "a";
  h.join_by_regex(a, "(?i)ORDERS");
  ASSERT_TRUE(a.joined);
  h.settle({&a});
  EXPECT_EQ(count(a.owned), 6u) << "(?i)ORDERS matches orders";

  Consumer b;
  b.id = "b";
  h.join_by_regex(b, "(a|a)*b|a+");
  ASSERT_TRUE(b.joined);
  h.settle({&a, &b});
  EXPECT_EQ(count(a.owned) + count(b.owned), 8u);
  EXPECT_EQ(count(b.owned), 2u) << "b alone subscribes to the topic of 40 a's";
}

TEST(ConsumerGroup, OffsetCommitsAreCheckedAgainstMemberEpochs) {
  ConsumerHarness h;
  Consumer a;
  a.id = "a";
  h.beat(a);
  auto first = [](const net::OffsetCommitResponse& r) { return r.topics.at(0).partitions.at(0).error_code; };
  EXPECT_EQ(first(h.commit_at(a, a.epoch, 9)), 0);
  EXPECT_EQ(first(h.commit_at(a, a.epoch, 8)), net::code(Error::kUnsupportedVersion));
  EXPECT_EQ(first(h.commit_at(a, a.epoch + 1, 9)), net::code(Error::kStaleMemberEpoch));
  EXPECT_EQ(first(h.commit_at(a, a.epoch - 1, 9)), net::code(Error::kStaleMemberEpoch));
  Consumer stranger;
  stranger.id = "stranger";
  EXPECT_EQ(first(h.commit_at(stranger, 1, 9)), net::code(Error::kUnknownMemberId));
  EXPECT_EQ(first(h.commit_at(stranger, -1, 9)), net::code(Error::kUnknownMemberId))
      << "a group with members takes no simple commits";
  EXPECT_EQ(h.fetched("cg", "orders", 0), 42);

  // OffsetFetch v9 with a member and epoch.
  auto fetch = [&](int32_t epoch) {
    net::OffsetFetchRequest r;
    auto& g = r.groups.emplace_back();
    g.group_id = "cg";
    g.member_id = a.id;
    g.member_epoch = epoch;
    return h.coordinator->fetch_offsets(r, 9).groups.at(0).error_code;
  };
  EXPECT_EQ(fetch(a.epoch), 0);
  EXPECT_EQ(fetch(a.epoch + 1), net::code(Error::kStaleMemberEpoch));

  // Once the group is empty, commits without a member are taken.
  auto bye = h.request(a);
  bye.member_epoch = -1;
  EXPECT_EQ(h.send(bye).error_code, 0);
  EXPECT_EQ(first(h.commit_at(stranger, -1, 9)), 0);
  EXPECT_EQ(first(h.commit_at(stranger, 3, 9)), net::code(Error::kUnknownMemberId));
}

// Members a, b and c (ids as named); a and b settle in the group, then c's
// join fails: its write times out, and lands in the log or not.
void settle_two_then_fail_a_join(ConsumerHarness& h, Consumer& a, Consumer& b, Consumer& c, bool lands) {
  a.id = "a";
  b.id = "b";
  c.id = "c";
  h.beat(a);
  h.beat(b);
  h.settle({&a, &b});
  h.log->fail_next = Error::kRequestTimedOut;
  h.log->failed_write_lands = lands;
  EXPECT_EQ(h.beat(c).error_code, net::code(Error::kCoordinatorNotAvailable));
}

// Reloading the partitions gives back the group that was served.
net::ConsumerGroupDescribeResponse::DescribedGroup expect_replay_gives_back(ConsumerHarness& h) {
  const auto before = h.describe();
  h.reload();
  const auto after = h.describe();
  EXPECT_EQ(before, after);
  return after;
}

TEST(ConsumerGroup, StateIsRebuiltByReplayEvenAfterAFailedWrite) {
  ConsumerHarness h;
  Consumer a, b, c;
  // A write fails (it may land or not): the answer is an error and the
  // next change writes the whole group again.
  settle_two_then_fail_a_join(h, a, b, c, false);
  EXPECT_EQ(h.beat(c).error_code, 0);
  h.settle({&a, &b, &c});
  expect_replay_gives_back(h);
  // The reloaded members carry on at their epochs.
  h.settle({&a, &b, &c});
  EXPECT_EQ(h.beat(a).error_code, 0);
  expect_disjoint_and_complete({&a, &b, &c}, 10);
}

// After a failed write the next one writes the whole group again; it must
// also remove what the log may hold of members the group no longer has: a
// member that leaves then, and one whose failed join landed after all.
// Replay must give back the group that was served.
TEST(ConsumerGroup, RewriteAfterAFailedWriteRemovesGoneMembers) {
  for (const bool lands : {false, true}) {
    SCOPED_TRACE(lands ? "the failed write landed" : "the failed write was lost");
    ConsumerHarness h;
    Consumer a, b, c;
    settle_two_then_fail_a_join(h, a, b, c, lands);
    // b leaves: this write carries the whole group (a alone).
    auto bye = h.request(b);
    bye.member_epoch = -1;
    ASSERT_EQ(h.send(bye).error_code, 0);
    h.settle({&a});
    ASSERT_EQ(h.describe().members.size(), 1u);
    const auto after = expect_replay_gives_back(h);
    ASSERT_EQ(after.members.size(), 1u);
    EXPECT_EQ(after.members[0].member_id, "a");
    h.settle({&a});
    EXPECT_EQ(count(a.owned), 10u);
  }
}

// The write that creates a group fails but lands in the log all the same;
// the group the next join creates must delete the member it held, or a
// replay would give two members of one epoch the same partitions.
TEST(ConsumerGroup, AJoinAfterAFailedCreationRemovesTheMemberItMayHaveLogged) {
  ConsumerHarness h;
  Consumer a, b;
  a.id = "a";
  b.id = "b";
  h.log->fail_next = Error::kRequestTimedOut;
  h.log->failed_write_lands = true;
  ASSERT_EQ(h.beat(a).error_code, net::code(Error::kCoordinatorNotAvailable));
  ASSERT_EQ(h.beat(b).error_code, 0);
  h.settle({&b});
  const auto after = expect_replay_gives_back(h);
  ASSERT_EQ(after.members.size(), 1u);
  EXPECT_EQ(after.members[0].member_id, "b");
  h.settle({&b});
  EXPECT_EQ(count(b.owned), 10u);
}

TEST(ConsumerGroup, SharesTheGroupIdSpaceWithClassicGroups) {
  ConsumerHarness h;
  Consumer a;
  a.id = "a";
  h.beat(a);
  // Classic members may join it (through MEMBER_ID_REQUIRED), with the
  // consumer protocol type only.
  EXPECT_EQ(h.await(h.join("cg", "")).error_code, net::code(Error::kMemberIdRequired));
  net::JoinGroupRequest other = h.join_request("cg", "");
  other.protocol_type = "connect";
  EXPECT_EQ(h.call(h.coordinator->join_group(other, kJoinVersion, "c", "/h")).error_code,
            net::code(Error::kInconsistentGroupProtocol));
  net::DescribeGroupsRequest dr;
  dr.groups = {"cg"};
  EXPECT_EQ(h.coordinator->describe_groups(dr, 5).groups.at(0).group_state, "Dead");
  net::ListGroupsRequest lr;
  lr.types_filter = {"consumer"};
  net::ListGroupsResponse listed = h.coordinator->list_groups(lr, 5);
  ASSERT_EQ(listed.groups.size(), 1u);
  EXPECT_EQ(listed.groups[0].group_type, "consumer");
  EXPECT_EQ(listed.groups[0].protocol_type, "consumer");
  EXPECT_EQ(listed.groups[0].group_state, "Stable");
  lr.types_filter = {"classic"};
  EXPECT_TRUE(h.coordinator->list_groups(lr, 5).groups.empty());
  net::DeleteGroupsRequest del;
  del.groups_names = {"cg"};
  EXPECT_EQ(h.call(h.coordinator->delete_groups(del, 2)).results.at(0).error_code,
            net::code(Error::kNonEmptyGroup));
  // A classic group whose members do not embed Kafka's consumer protocol
  // (this one's subscriptions are "sub") cannot be upgraded.
  h.form_group("classic");
  Consumer x;
  x.id = "x";
  EXPECT_EQ(h.beat(x, "classic").error_code, net::code(Error::kGroupIdNotFound));
  net::ConsumerGroupDescribeRequest cdr;
  cdr.group_ids = {"classic", "missing"};
  auto described = h.coordinator->consumer_group_describe(cdr, 0);
  EXPECT_EQ(described.groups.at(0).error_code, net::code(Error::kGroupIdNotFound));
  EXPECT_EQ(described.groups.at(1).error_code, net::code(Error::kGroupIdNotFound));
  // Emptied, the consumer group is deleted; it survives no reload.
  auto bye = h.request(a);
  bye.member_epoch = -1;
  EXPECT_EQ(h.send(bye).error_code, 0);
  EXPECT_EQ(h.coordinator->group_state("cg"), "Empty");
  EXPECT_EQ(h.call(h.coordinator->delete_groups(del, 2)).results.at(0).error_code, 0);
  h.reload();
  EXPECT_EQ(h.coordinator->group_state("cg"), "Dead");
  EXPECT_EQ(h.describe().error_code, net::code(Error::kGroupIdNotFound));
}

// --- a model run -----------------------------------------------------------------------------

// Random consumers joining, heartbeating (some slow to revoke), leaving,
// crashing and restarting, and time passing. After every step the members
// the coordinator knows never believe they own one partition together;
// when the live ones then keep heartbeating, the group becomes Stable with
// every partition owned by exactly one of them.
RC_GTEST_PROP(ConsumerGroupModel, NoPartitionInTwoMembersAndConvergence, ()) {
  constexpr int kConsumers = 4;
  const auto ops = *rc::gen::container<std::vector<std::pair<int, int>>>(
      rc::gen::pair(rc::gen::inRange(0, 8), rc::gen::inRange(0, kConsumers)));
  ConsumerHarness h;
  std::array<Consumer, kConsumers> cs;
  std::array<bool, kConsumers> alive{};
  for (int i = 0; i < kConsumers; ++i) {
    cs[i].id = fmt::format("m{}", i);
    if (i % 2 == 1) cs[i].topics = {"orders"};
    if (i == 3) cs[i].instance = "static-3";
  }
  auto check = [&] {
    const auto d = h.describe();
    std::set<std::string> members;
    for (const auto& m : d.members) members.insert(m.member_id);
    std::set<std::pair<uint8_t, int32_t>> seen;
    for (const Consumer& c : cs) {
      if (!c.joined || !members.contains(c.id)) continue;
      for (const auto& [topic, ps] : c.owned) {
        for (int32_t p : ps) RC_ASSERT(seen.insert({topic.bytes[0], p}).second);
      }
    }
  };
  for (const auto& [op, i] : ops) {
    Consumer& c = cs[i];
    switch (op) {
      case 0:
      case 1:
      case 2:  // a heartbeat that follows the assignment
        alive[i] = true;
        h.beat(c);
        break;
      case 3: {  // a heartbeat that has not revoked yet: it reports what it
                 // owns and takes only what is added
        if (!c.joined) break;
        net::ConsumerGroupHeartbeatResponse r = h.send(h.request(c));
        if (r.error_code != 0) {
          h.apply(c, r);
          break;
        }
        c.epoch = r.member_epoch;
        if (r.assignment.has_value()) {
          for (auto& [topic, ps] : assignment_of(r)) c.owned[topic].merge(ps);
        }
        break;
      }
      case 4: {  // leaves
        if (!c.joined) break;
        auto bye = h.request(c);
        bye.member_epoch = c.instance.has_value() ? -2 : -1;
        h.send(bye);
        c.owned.clear();
        c.joined = false;
        c.epoch = 0;
        if (c.instance.has_value()) c.id += "x";  // its next incarnation
        alive[i] = false;
        break;
      }
      case 5:  // crashes: stops heartbeating, loses its state
        c.owned.clear();
        c.joined = false;
        c.epoch = 0;
        if (c.instance.has_value()) c.id += "y";
        alive[i] = false;
        break;
      case 6:
        h.world.run_for(std::chrono::seconds(5 + 5 * i));
        break;
      case 7:
        h.reload();
        break;
    }
    check();
  }
  // The live consumers keep heartbeating; the others' sessions expire.
  for (int round = 0; round < 30; ++round) {
    h.world.run_for(3s);
    for (int i = 0; i < kConsumers; ++i) {
      if (alive[i]) h.beat(cs[i]);
    }
    check();
  }
  std::vector<Consumer*> live;
  for (int i = 0; i < kConsumers; ++i) {
    if (alive[i]) live.push_back(&cs[i]);
  }
  if (live.empty()) return;
  h.settle(live);
  RC_ASSERT(h.coordinator->group_state("cg") == "Stable");
  RC_ASSERT(h.coordinator->group_members("cg").size() == live.size());
  bool events = false;
  for (const Consumer* c : live) events |= c->topics.size() == 2;
  std::set<std::pair<uint8_t, int32_t>> seen;
  for (const Consumer* c : live) {
    for (const auto& [topic, ps] : c->owned) {
      for (int32_t p : ps) RC_ASSERT(seen.insert({topic.bytes[0], p}).second);
    }
  }
  RC_ASSERT(seen.size() == (events ? 10u : 6u));
}

TEST(ConsumerGroup, OffsetsOfTopicsNoMemberSubscribesToExpire) {
  ConsumerHarness h;  // offsets.retention 1 h
  Consumer a;
  a.id = "a";
  a.topics = {"orders"};
  h.settle({&a});
  for (const char* topic : {"orders", "events"}) {
    net::OffsetCommitResponse out =
        h.call(h.coordinator->commit_offsets(h.commit_request("cg", a.epoch, a.id, topic, 0, 42), 9));
    EXPECT_EQ(out.topics[0].partitions[0].error_code, 0);
  }
  for (int i = 0; i < 62 * 6; ++i) {  // 62 minutes, heartbeats every 10 s
    h.world.run_for(10s);
    ASSERT_EQ(h.beat(a).error_code, 0);
  }
  EXPECT_EQ(h.fetched("cg", "orders", 0), 42);
  EXPECT_EQ(h.fetched("cg", "events", 0), -1);
  EXPECT_EQ(h.coordinator->group_members("cg").size(), 1u);
  // Without members the rest goes too, and then the group.
  auto bye = h.request(a);
  bye.member_epoch = -1;
  ASSERT_EQ(h.send(bye).error_code, 0);
  h.world.run_for(2min);
  EXPECT_EQ(h.fetched("cg", "orders", 0), -1);
  EXPECT_EQ(h.coordinator->group_state("cg"), "Dead");
}

TEST(ConsumerGroup, AFailedFenceIsRetried) {
  ConsumerHarness h;  // 45 s sessions
  Consumer a, b;
  a.id = "a";
  b.id = "b";
  h.settle({&a, &b});
  ASSERT_EQ(h.coordinator->group_members("cg").size(), 2u);
  // Both go quiet past their sessions, and their fences fail, slowly: one
  // waits for the other's write, so for a while the coordinator's timers
  // have no member deadline to wake for.
  h.log->delay = 3s;
  h.log->fail_writes = 2;
  for (int i = 0; i < 600 && h.log->fail_writes > 0; ++i) h.world.run_for(100ms);
  ASSERT_EQ(h.log->fail_writes, 0);
  EXPECT_EQ(h.coordinator->group_members("cg").size(), 2u);
  // Each failed fence is tried again soon after (nothing else wakes the
  // timers meanwhile).
  h.world.run_for(10s);
  EXPECT_TRUE(h.coordinator->group_members("cg").empty());
}

// Fences that fail at once, while the timer loop that started them has
// not yet gone back to waiting, are tried again all the same.
TEST(ConsumerGroup, AFenceThatFailsAtOnceIsRetried) {
  ConsumerHarness h;  // 45 s sessions
  Consumer a;
  a.id = "a";
  h.settle({&a});
  ASSERT_EQ(h.coordinator->group_members("cg").size(), 1u);
  h.log->delay = 0ms;
  h.log->fail_writes = 2;
  for (int i = 0; i < 600 && h.log->fail_writes > 0; ++i) h.world.run_for(100ms);
  ASSERT_EQ(h.log->fail_writes, 0);
  h.world.run_for(10s);
  EXPECT_TRUE(h.coordinator->group_members("cg").empty());
}

}  // namespace
}  // namespace brook::group
