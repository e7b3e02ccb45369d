// coordinators/group/assignors_test.cc
//
// The server-side assignors: examples, and RapidCheck properties over
// random groups whose current assignments may be stale (unsubscribed or
// deleted topics, partitions beyond the count, a partition held twice).
#include "coordinators/group/assignors.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <array>
#include <random>

#include "coordinators/group/test_topics.h"

namespace brook::group {
namespace {

AssignorMember member(std::string id, std::set<TopicId, TopicIdLess> topics, TopicPartitions current = {}) {
  return AssignorMember{std::move(id), std::move(topics), std::move(current)};
}

TEST(RangeAssignor, FreshGroupGetsContiguousRangesLargerFirst) {
  const TopicId t = test_topic(1);
  const GroupAssignment a =
      assign_range({member("m2", {t}), member("m0", {t}), member("m1", {t})}, TopicPartitionCounts{{t, 7}});
  EXPECT_EQ(a.at("m0"), (TopicPartitions{{t, {0, 1, 2}}}));
  EXPECT_EQ(a.at("m1"), (TopicPartitions{{t, {3, 4}}}));
  EXPECT_EQ(a.at("m2"), (TopicPartitions{{t, {5, 6}}}));
}

TEST(RangeAssignor, CoPartitionedTopicsGiveEachMemberTheSameNumbers) {
  const TopicId t1 = test_topic(1), t2 = test_topic(2);
  const GroupAssignment a = assign_range({member("a", {t1, t2}), member("b", {t1, t2})},
                                         TopicPartitionCounts{{t1, 5}, {t2, 5}});
  EXPECT_EQ(a.at("a"), (TopicPartitions{{t1, {0, 1, 2}}, {t2, {0, 1, 2}}}));
  EXPECT_EQ(a.at("b"), (TopicPartitions{{t1, {3, 4}}, {t2, {3, 4}}}));
}

TEST(RangeAssignor, AJoiningMemberTakesOnlyWhatIsOverTheShares) {
  const TopicId t = test_topic(1);
  const GroupAssignment a = assign_range(
      {member("a", {t}, {{t, {0, 1, 2}}}), member("b", {t}, {{t, {3, 4, 5}}}), member("c", {t})},
      TopicPartitionCounts{{t, 6}});
  EXPECT_EQ(a.at("a"), (TopicPartitions{{t, {0, 1}}}));
  EXPECT_EQ(a.at("b"), (TopicPartitions{{t, {3, 4}}}));
  EXPECT_EQ(a.at("c"), (TopicPartitions{{t, {2, 5}}}));
}

TEST(RangeAssignor, AMemberHoldingAnExtraPartitionKeepsIt) {
  const TopicId t = test_topic(1);
  const GroupAssignment a = assign_range({member("a", {t}, {{t, {0, 1}}}), member("b", {t}, {{t, {2, 3, 4}}})},
                                         TopicPartitionCounts{{t, 5}});
  EXPECT_EQ(a.at("a"), (TopicPartitions{{t, {0, 1}}}));
  EXPECT_EQ(a.at("b"), (TopicPartitions{{t, {2, 3, 4}}}));
}

TEST(UniformAssignor, ANewMemberTakesHalfAndTheHolderKeepsItsLowest) {
  const TopicId t = test_topic(1);
  const GroupAssignment a =
      assign_uniform({member("a", {t}, {{t, {0, 1, 2, 3}}}), member("b", {t})}, TopicPartitionCounts{{t, 4}});
  EXPECT_EQ(a.at("a"), (TopicPartitions{{t, {0, 1}}}));
  EXPECT_EQ(a.at("b"), (TopicPartitions{{t, {2, 3}}}));
}

TEST(UniformAssignor, DifferentSubscriptionsBalanceWhereTheyCan) {
  const TopicId t1 = test_topic(1), t2 = test_topic(2);
  // b alone can take t2, so a gets all of t1.
  const GroupAssignment a = assign_uniform({member("a", {t1}), member("b", {t1, t2})},
                                           TopicPartitionCounts{{t1, 2}, {t2, 2}});
  EXPECT_EQ(a.at("a"), (TopicPartitions{{t1, {0, 1}}}));
  EXPECT_EQ(a.at("b"), (TopicPartitions{{t2, {0, 1}}}));
  // b held all four: two of t1 move to a.
  const GroupAssignment b = assign_uniform(
      {member("a", {t1}), member("b", {t1, t2}, {{t1, {0, 1}}, {t2, {0, 1}}})}, TopicPartitionCounts{{t1, 2}, {t2, 2}});
  EXPECT_EQ(b, a);
}

TEST(Assignors, StaleCurrentAssignmentsAreDropped) {
  const TopicId t1 = test_topic(1), t2 = test_topic(2), gone = test_topic(9);
  for (Assignor assign : {&assign_uniform, &assign_range}) {
    // a held a partition beyond the count, one of a topic it left and one
    // of a deleted topic; b held p0 too (a wins: first by id).
    const GroupAssignment g = assign({member("a", {t1}, {{t1, {0, 7}}, {t2, {0}}, {gone, {1}}}),
                                      member("b", {t1}, {{t1, {0, 1}}})},
                                     TopicPartitionCounts{{t1, 2}, {t2, 1}});
    EXPECT_EQ(g.at("a"), (TopicPartitions{{t1, {0}}}));
    EXPECT_EQ(g.at("b"), (TopicPartitions{{t1, {1}}}));
  }
}

TEST(Assignors, FoundByKafkasNames) {
  EXPECT_EQ(find_assignor("uniform"), std::optional<Assignor>(&assign_uniform));
  EXPECT_EQ(find_assignor("range"), std::optional<Assignor>(&assign_range));
  EXPECT_EQ(find_assignor("sticky"), std::nullopt);
  EXPECT_TRUE(assign_uniform({}, {}).empty());
}

// A random group: up to 4 topics (one perhaps missing from the metadata),
// up to 8 members with random subscriptions and random, possibly stale,
// current partitions.
struct Case {
  TopicPartitionCounts topics;
  std::vector<AssignorMember> members;
};

rc::Gen<Case> gen_case(bool same_subscriptions) {
  return rc::gen::exec([same_subscriptions] {
    Case c;
    const int topic_count = *rc::gen::inRange(1, 5);
    for (int t = 0; t < topic_count; ++t) {
      c.topics[test_topic(static_cast<uint8_t>(t + 1))] = *rc::gen::inRange(0, 13);
    }
    const int member_count = *rc::gen::inRange(1, 9);
    const auto subscription = [&] {
      std::set<TopicId, TopicIdLess> s;
      for (int t = 0; t <= topic_count; ++t) {  // topic_count + 1: not in the metadata
        if (*rc::gen::inRange(0, 3) > 0) s.insert(test_topic(static_cast<uint8_t>(t + 1)));
      }
      return s;
    };
    const std::set<TopicId, TopicIdLess> common = subscription();
    for (int m = 0; m < member_count; ++m) {
      AssignorMember am;
      am.member_id = "m" + std::to_string(m);
      am.subscribed_topics = same_subscriptions ? common : subscription();
      const int held = *rc::gen::inRange(0, 8);
      for (int k = 0; k < held; ++k) {
        am.current[test_topic(static_cast<uint8_t>(*rc::gen::inRange(1, topic_count + 2)))].insert(
            *rc::gen::inRange(0, 14));
      }
      c.members.push_back(std::move(am));
    }
    return c;
  });
}

size_t count_of(const TopicPartitions& a) {
  size_t n = 0;
  for (const auto& [t, ps] : a) n += ps.size();
  return n;
}

// Every partition of a topic with a subscriber goes to exactly one of its
// subscribers; nothing else is assigned; every member is in the result.
void check_complete(const Case& c, const GroupAssignment& a) {
  RC_ASSERT(a.size() == c.members.size());
  std::map<TopicId, std::vector<int>, TopicIdLess> owners;
  for (const auto& [t, n] : c.topics) owners[t].assign(static_cast<size_t>(n), 0);
  for (const AssignorMember& m : c.members) {
    RC_ASSERT(a.contains(m.member_id));
    for (const auto& [t, ps] : a.at(m.member_id)) {
      RC_ASSERT(m.subscribed_topics.contains(t));
      RC_ASSERT(c.topics.contains(t));
      RC_ASSERT(!ps.empty());
      for (int32_t p : ps) {
        RC_ASSERT(p >= 0 && p < c.topics.at(t));
        owners[t][static_cast<size_t>(p)]++;
      }
    }
  }
  for (const auto& [topic, counts] : owners) {
    const auto& t = topic;  // not a structured binding: captured below
    const bool subscribed = std::any_of(c.members.begin(), c.members.end(),
                                        [&](const AssignorMember& m) { return m.subscribed_topics.contains(t); });
    for (int owned : counts) RC_ASSERT(owned == (subscribed ? 1 : 0));
  }
}

// The same input in another order gives the same result, and the result
// given back as the current assignment is kept as it is.
void check_stable(Assignor assign, Case c, const GroupAssignment& a) {
  std::mt19937 rng(*rc::gen::arbitrary<uint32_t>());
  std::shuffle(c.members.begin(), c.members.end(), rng);
  RC_ASSERT(assign(c.members, c.topics) == a);
  for (AssignorMember& m : c.members) m.current = a.at(m.member_id);
  RC_ASSERT(assign(c.members, c.topics) == a);
}

// What each member may keep of its current assignment (the first holder by
// id of a partition of a subscribed, existing topic within its count).
std::map<std::string, TopicPartitions> valid_holdings(const Case& c) {
  std::vector<const AssignorMember*> order;
  for (const AssignorMember& m : c.members) order.push_back(&m);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->member_id < b->member_id; });
  std::set<std::pair<std::array<uint8_t, 16>, int32_t>> claimed;
  std::map<std::string, TopicPartitions> out;
  for (const AssignorMember* m : order) {
    for (const auto& [t, ps] : m->current) {
      if (!m->subscribed_topics.contains(t) || !c.topics.contains(t)) continue;
      for (int32_t p : ps) {
        if (p < c.topics.at(t) && claimed.emplace(t.bytes, p).second) out[m->member_id][t].insert(p);
      }
    }
  }
  return out;
}

RC_GTEST_PROP(UniformAssignor, SameSubscriptionsBalancedWithinOneAndSticky, ()) {
  const Case c = *gen_case(true);
  const GroupAssignment a = assign_uniform(c.members, c.topics);
  check_complete(c, a);
  check_stable(&assign_uniform, c, a);
  size_t partitions = 0;
  for (const TopicId& t : c.members.front().subscribed_topics) {
    if (c.topics.contains(t)) partitions += static_cast<size_t>(c.topics.at(t));
  }
  const size_t share = partitions / c.members.size();
  size_t lo = SIZE_MAX, hi = 0;
  const auto held = valid_holdings(c);
  for (const auto& [id, assigned] : a) {
    lo = std::min(lo, count_of(assigned));
    hi = std::max(hi, count_of(assigned));
    // It keeps min(what it validly held, the share) of its partitions.
    size_t kept = 0;
    if (auto h = held.find(id); h != held.end()) {
      for (const auto& [t, ps] : h->second) {
        for (int32_t p : ps) kept += assigned.contains(t) && assigned.at(t).contains(p) ? 1 : 0;
      }
      RC_ASSERT(kept >= std::min(count_of(h->second), share));
    }
  }
  RC_ASSERT(hi - lo <= 1);
}

RC_GTEST_PROP(UniformAssignor, DifferentSubscriptionsNoMoveEvensTheCounts, ()) {
  const Case c = *gen_case(false);
  const GroupAssignment a = assign_uniform(c.members, c.topics);
  check_complete(c, a);
  check_stable(&assign_uniform, c, a);
  for (const AssignorMember& holder : c.members) {
    for (const auto& [t, ps] : a.at(holder.member_id)) {
      for (const AssignorMember& other : c.members) {
        if (other.subscribed_topics.contains(t)) {
          RC_ASSERT(count_of(a.at(holder.member_id)) <= count_of(a.at(other.member_id)) + 1);
        }
      }
    }
  }
}

RC_GTEST_PROP(RangeAssignor, EachSubscriberGetsItsShareOfEveryTopic, (bool same_subscriptions)) {
  const Case c = *gen_case(same_subscriptions);
  const GroupAssignment a = assign_range(c.members, c.topics);
  check_complete(c, a);
  check_stable(&assign_range, c, a);
  for (const auto& [t, n] : c.topics) {
    size_t subscribers = 0;
    for (const AssignorMember& m : c.members) subscribers += m.subscribed_topics.contains(t) ? 1 : 0;
    if (subscribers == 0) continue;
    const size_t share = static_cast<size_t>(n) / subscribers;
    for (const AssignorMember& m : c.members) {
      if (!m.subscribed_topics.contains(t)) continue;
      const auto& mine = a.at(m.member_id);
      const size_t got = mine.contains(t) ? mine.at(t).size() : 0;
      RC_ASSERT(got == share || got == share + 1);
    }
  }
}

RC_GTEST_PROP(RangeAssignor, KeepsAllItsSharesAllow, (bool same_subscriptions)) {
  const Case c = *gen_case(same_subscriptions);
  const GroupAssignment a = assign_range(c.members, c.topics);
  const auto held = valid_holdings(c);
  // Per topic: every member keeps min(held, share) of what it held, and as
  // many members as there are extra partitions keep one more.
  for (const auto& [t, n] : c.topics) {
    size_t subscribers = 0;
    for (const AssignorMember& m : c.members) subscribers += m.subscribed_topics.contains(t) ? 1 : 0;
    if (subscribers == 0) continue;
    const size_t share = static_cast<size_t>(n) / subscribers;
    size_t expected = 0, over = 0, kept = 0;
    for (const auto& [id, mine] : held) {
      if (!mine.contains(t)) continue;
      const std::set<int32_t>& h = mine.at(t);
      expected += std::min(h.size(), share);
      over += h.size() > share ? 1 : 0;
      const auto& now = a.at(id);
      for (int32_t p : h) kept += now.contains(t) && now.at(t).contains(p) ? 1 : 0;
    }
    expected += std::min(over, static_cast<size_t>(n) % subscribers);
    RC_ASSERT(kept == expected);
  }
}

RC_GTEST_PROP(RangeAssignor, FreshCoPartitionedTopicsAlign, ()) {
  Case c = *gen_case(true);
  for (AssignorMember& m : c.members) m.current.clear();
  const int32_t n = c.topics.begin()->second;
  for (auto& [t, count] : c.topics) count = n;
  const GroupAssignment a = assign_range(c.members, c.topics);
  for (const auto& [id, assigned] : a) {
    const std::set<int32_t>* first = nullptr;
    for (const auto& [t, ps] : assigned) {
      if (first) RC_ASSERT(ps == *first);
      first = &ps;
    }
  }
}

}  // namespace
}  // namespace brook::group
