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

}  // namespace
}  // namespace brook::controller
