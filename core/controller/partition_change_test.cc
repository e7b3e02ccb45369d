// core/controller/partition_change_test.cc
#include "core/controller/partition_change.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <set>

namespace brook::controller {
namespace {

using metadata::PartitionRegistration;

PartitionRegistration partition(std::vector<int32_t> replicas, std::vector<int32_t> isr, int32_t leader) {
  PartitionRegistration p;
  p.replicas = std::move(replicas);
  p.isr = std::move(isr);
  p.leader = leader;
  p.leader_epoch = 3;
  p.partition_epoch = 7;
  return p;
}

EligibleFn all_but(std::set<int32_t> out) {
  return [out](int32_t id) { return !out.contains(id); };
}

PartitionRegistration after(const PartitionRegistration& p, const std::optional<net::PartitionChangeRecord>& c) {
  PartitionRegistration out = p;
  if (!c.has_value()) return out;
  if (c->replicas.has_value()) out.replicas = *c->replicas;
  if (c->adding_replicas.has_value()) out.adding_replicas = *c->adding_replicas;
  if (c->removing_replicas.has_value()) out.removing_replicas = *c->removing_replicas;
  if (c->isr.has_value()) out.isr = *c->isr;
  if (c->leader != metadata::kNoLeaderChange) out.leader = c->leader;
  if (c->leader_recovery_state != -1) out.leader_recovery_state = c->leader_recovery_state;
  return out;
}

bool contains(const std::vector<int32_t>& v, int32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

TEST(PartitionChange, NothingToChangeGivesNoRecord) {
  const PartitionRegistration p = partition({1, 2, 3}, {1, 2, 3}, 1);
  EXPECT_FALSE(build_partition_change(p, PartitionChangeRequest{}, all_but({})).has_value());
  PartitionChangeRequest same;
  same.target_isr = std::vector<int32_t>{1, 2, 3};
  EXPECT_FALSE(build_partition_change(p, same, all_but({})).has_value());
}

TEST(PartitionChange, ShrinkKeepsAnEligibleLeader) {
  const PartitionRegistration p = partition({1, 2, 3}, {1, 2, 3}, 2);
  PartitionChangeRequest r;
  r.target_isr = std::vector<int32_t>{2, 3};
  auto c = build_partition_change(p, r, all_but({1}));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->isr, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(c->leader, metadata::kNoLeaderChange);
}

TEST(PartitionChange, FencedLeaderIsReplacedInReplicaOrder) {
  const PartitionRegistration p = partition({3, 1, 2}, {1, 2, 3}, 3);
  PartitionChangeRequest r;
  r.target_isr = std::vector<int32_t>{1, 2};
  auto c = build_partition_change(p, r, all_but({3}));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->leader, 1);
}

TEST(PartitionChange, LastIsrMemberStaysWithoutLeader) {
  const PartitionRegistration p = partition({1, 2}, {2}, 2);
  PartitionChangeRequest r;
  r.target_isr = std::vector<int32_t>{};
  auto c = build_partition_change(p, r, all_but({2}));
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(c->isr.has_value());  // stays [2]
  EXPECT_EQ(c->leader, metadata::kNoLeader);
  // Broker 2 comes back: it leads again.
  const PartitionRegistration leaderless = after(p, c);
  auto back = build_partition_change(leaderless, PartitionChangeRequest{}, all_but({}));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->leader, 2);
  // Broker 1 alone is not an ISR member: no clean election.
  EXPECT_FALSE(build_partition_change(leaderless, PartitionChangeRequest{}, all_but({2})).has_value());
}

TEST(PartitionChange, UncleanElectionOnlyWhenAllowed) {
  const PartitionRegistration p = partition({1, 2}, {2}, metadata::kNoLeader);
  PartitionChangeRequest r;
  r.unclean_allowed = true;
  auto c = build_partition_change(p, r, all_but({2}));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->leader, 1);
  EXPECT_EQ(c->isr, (std::vector<int32_t>{1}));
  EXPECT_EQ(c->leader_recovery_state, 1);
}

TEST(PartitionChange, PreferredElectionMovesToFirstReplica) {
  const PartitionRegistration p = partition({1, 2, 3}, {1, 2, 3}, 3);
  PartitionChangeRequest r;
  r.election = Election::kPreferred;
  auto c = build_partition_change(p, r, all_but({}));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->leader, 1);
  EXPECT_FALSE(c->isr.has_value());
}

// For any partition, eligibility and target ISR within the replicas: the
// ISR is never empty and stays within the replicas; a leader is eligible
// and in the ISR; an eligible current leader left in the ISR keeps leading;
// a leader is elected whenever an eligible ISR member exists; without
// unclean election the ISR only loses members.
RC_GTEST_PROP(PartitionChangeProperties, Invariants, ()) {
  const int n = *rc::gen::inRange(1, 6);
  std::vector<int32_t> replicas;
  for (int i = 1; i <= n; ++i) replicas.push_back(i);
  std::rotate(replicas.begin(), replicas.begin() + *rc::gen::inRange(0, n), replicas.end());
  const auto subset = [&] {
    std::vector<int32_t> out;
    for (int32_t r : replicas) {
      if (*rc::gen::arbitrary<bool>()) out.push_back(r);
    }
    return out;
  };
  std::vector<int32_t> isr = subset();
  if (isr.empty()) isr.push_back(replicas[0]);
  const int32_t leader = *rc::gen::arbitrary<bool>() ? isr[static_cast<size_t>(*rc::gen::inRange<size_t>(0, isr.size()))]
                                                      : metadata::kNoLeader;
  const PartitionRegistration p = partition(replicas, isr, leader);
  std::set<int32_t> ineligible;
  for (int32_t r : replicas) {
    if (*rc::gen::arbitrary<bool>()) ineligible.insert(r);
  }
  PartitionChangeRequest request;
  std::vector<int32_t> target = subset();
  request.target_isr = target;
  request.unclean_allowed = *rc::gen::arbitrary<bool>();
  const EligibleFn eligible = all_but(ineligible);
  const PartitionRegistration out = after(p, build_partition_change(p, request, eligible));
  RC_ASSERT(!out.isr.empty());
  for (int32_t r : out.isr) RC_ASSERT(contains(replicas, r));
  if (out.leader != metadata::kNoLeader) {
    RC_ASSERT(eligible(out.leader));
    RC_ASSERT(contains(out.isr, out.leader));
  }
  if (leader != metadata::kNoLeader && contains(target, leader) && eligible(leader)) {
    RC_ASSERT(out.leader == leader);
  }
  const bool electable = std::any_of(target.begin(), target.end(), [&](int32_t r) { return eligible(r); });
  if (electable) RC_ASSERT(out.leader != metadata::kNoLeader);
  if (out.leader_recovery_state == 0) {
    for (int32_t r : out.isr) RC_ASSERT(contains(target, r) || contains(isr, r));
  } else {
    RC_ASSERT(request.unclean_allowed);
    RC_ASSERT(out.isr.size() == 1u);
  }
}

// A partition being reassigned from `original` to `target` (its replicas
// the target's then the original's it drops), any ISR change: the ISR
// stays non-empty and within the replicas; a leader is eligible, in the
// ISR and a replica; the reassignment completes exactly when every adding
// replica is in the new ISR and it keeps a member not being removed, and
// then the replicas are the target's and no removed replica is in the ISR;
// a change that drops a replica sets the leader (a new leader epoch).
RC_GTEST_PROP(PartitionChangeProperties, ReassignmentCompletesOnlyWithTheAddedReplicasInTheIsr, ()) {
  const int n = *rc::gen::inRange(2, 7);
  std::vector<int32_t> ids;
  for (int i = 1; i <= n; ++i) ids.push_back(i);
  const auto subset = [](const std::vector<int32_t>& from) {
    std::vector<int32_t> out;
    for (int32_t r : from) {
      if (*rc::gen::arbitrary<bool>()) out.push_back(r);
    }
    return out;
  };
  std::vector<int32_t> original = subset(ids);
  std::vector<int32_t> target = subset(ids);
  RC_PRE(!original.empty() && !target.empty());
  std::rotate(target.begin(), target.begin() + *rc::gen::inRange<size_t>(0, target.size()), target.end());
  std::vector<int32_t> adding;
  std::vector<int32_t> removing;
  for (int32_t r : target) {
    if (!contains(original, r)) adding.push_back(r);
  }
  for (int32_t r : original) {
    if (!contains(target, r)) removing.push_back(r);
  }
  RC_PRE(!adding.empty());  // (without adding replicas it completes when asked)
  std::vector<int32_t> replicas = target;
  replicas.insert(replicas.end(), removing.begin(), removing.end());
  std::vector<int32_t> isr = subset(original);
  if (isr.empty()) isr.push_back(original.front());
  const int32_t leader = *rc::gen::arbitrary<bool>() ? isr[*rc::gen::inRange<size_t>(0, isr.size())]
                                                      : metadata::kNoLeader;
  PartitionRegistration p = partition(replicas, isr, leader);
  p.adding_replicas = adding;
  p.removing_replicas = removing;
  std::set<int32_t> ineligible;
  for (int32_t r : replicas) {
    if (*rc::gen::arbitrary<bool>()) ineligible.insert(r);
  }
  const EligibleFn eligible = all_but(ineligible);
  PartitionChangeRequest request;
  const std::vector<int32_t> wanted = subset(replicas);
  request.target_isr = wanted;
  request.unclean_allowed = *rc::gen::arbitrary<bool>();
  const std::optional<net::PartitionChangeRecord> record = build_partition_change(p, request, eligible);
  const PartitionRegistration out = after(p, record);
  RC_ASSERT(!out.isr.empty());
  for (int32_t r : out.isr) RC_ASSERT(contains(out.replicas, r));
  if (out.leader != metadata::kNoLeader) {
    RC_ASSERT(eligible(out.leader));
    RC_ASSERT(contains(out.isr, out.leader));
    RC_ASSERT(contains(out.replicas, out.leader));
  }
  bool kept_member = false;
  for (int32_t r : wanted) kept_member = kept_member || !contains(removing, r);
  const bool all_added = std::all_of(adding.begin(), adding.end(), [&](int32_t r) { return contains(wanted, r); });
  const bool completed = out.adding_replicas.empty() && out.removing_replicas.empty();
  RC_ASSERT(completed == (kept_member && all_added));
  if (completed) {
    RC_ASSERT(out.replicas == target);
    for (int32_t r : removing) RC_ASSERT(!contains(out.isr, r));
  } else {
    RC_ASSERT(out.replicas == replicas);
    RC_ASSERT(out.adding_replicas == adding);
    RC_ASSERT(out.removing_replicas == removing);
  }
  const bool dropped = std::any_of(replicas.begin(), replicas.end(), [&](int32_t r) { return !contains(out.replicas, r); });
  if (dropped) RC_ASSERT(record.has_value() && record->leader != metadata::kNoLeaderChange);
}

}  // namespace
}  // namespace brook::controller
