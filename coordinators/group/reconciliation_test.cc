// coordinators/group/reconciliation_test.cc
//
// KIP-848 reconciliation: examples, and a RapidCheck model of a group whose
// target assignment changes arbitrarily while members heartbeat (reporting
// their owned partitions or not), revoke late and change subscriptions.
// Throughout, no partition is held by two members on the coordinator's side
// nor owned by two consumers; once every consumer heartbeats and revokes
// promptly, every member ends Stable at the target epoch with its target.
#include "coordinators/group/reconciliation.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "coordinators/group/test_topics.h"

namespace brook::group {
namespace {

const HeldByOther kNobody = [](const TopicId&, int32_t) { return false; };

TEST(Reconciliation, ANewMemberGetsItsTargetAtTheTargetEpoch) {
  const TopicId t = test_topic(1);
  const ReconciledMember m = reconcile({}, {t}, 3, {{t, {0, 1}}}, TopicPartitions{}, kNobody);
  EXPECT_EQ(m, (ReconciledMember{3, MemberState::kStable, {{t, {0, 1}}}, {}}));
}

TEST(Reconciliation, RevokesFirstThenMovesToTheEpoch) {
  const TopicId t = test_topic(1);
  const ReconciledMember start{3, MemberState::kStable, {{t, {0, 1, 2}}}, {}};
  // Target epoch 4 takes partition 2 away and adds 3.
  const ReconciledMember revoking = reconcile(start, {t}, 4, {{t, {0, 1, 3}}}, TopicPartitions{{t, {0, 1, 2}}}, kNobody);
  EXPECT_EQ(revoking, (ReconciledMember{3, MemberState::kUnrevokedPartitions, {{t, {0, 1}}}, {{t, {2}}}}));
  // Still owned (or not reported): no progress.
  EXPECT_EQ(reconcile(revoking, {t}, 4, {{t, {0, 1, 3}}}, TopicPartitions{{t, {0, 1, 2}}}, kNobody), revoking);
  EXPECT_EQ(reconcile(revoking, {t}, 4, {{t, {0, 1, 3}}}, std::nullopt, kNobody), revoking);
  // Revoked: epoch 4, partition 3 added.
  EXPECT_EQ(reconcile(revoking, {t}, 4, {{t, {0, 1, 3}}}, TopicPartitions{{t, {0, 1}}}, kNobody),
            (ReconciledMember{4, MemberState::kStable, {{t, {0, 1, 3}}}, {}}));
}

TEST(Reconciliation, WaitsForPartitionsOthersStillHold) {
  const TopicId t = test_topic(1);
  const HeldByOther two_held = [&](const TopicId& id, int32_t p) { return id == t && p == 2; };
  const ReconciledMember m = reconcile({1, MemberState::kStable, {{t, {0}}}, {}}, {t}, 2, {{t, {0, 1, 2}}},
                                       TopicPartitions{{t, {0}}}, two_held);
  EXPECT_EQ(m, (ReconciledMember{2, MemberState::kUnreleasedPartitions, {{t, {0, 1}}}, {}}));
  EXPECT_EQ(reconcile(m, {t}, 2, {{t, {0, 1, 2}}}, TopicPartitions{{t, {0, 1}}}, kNobody),
            (ReconciledMember{2, MemberState::kStable, {{t, {0, 1, 2}}}, {}}));
}

TEST(Reconciliation, AnUnsubscribedTopicIsRevokedAtOnce) {
  const TopicId t1 = test_topic(1), t2 = test_topic(2);
  const ReconciledMember start{5, MemberState::kStable, {{t1, {0}}, {t2, {0}}}, {}};
  // Same epoch, t2 no longer subscribed (the target has not caught up).
  EXPECT_EQ(reconcile(start, {t1}, 5, {{t1, {0}}, {t2, {0}}}, TopicPartitions{{t1, {0}}, {t2, {0}}}, kNobody),
            (ReconciledMember{5, MemberState::kUnrevokedPartitions, {{t1, {0}}}, {{t2, {0}}}}));
  // Already let go of: simply dropped.
  EXPECT_EQ(reconcile(start, {t1}, 5, {{t1, {0}}, {t2, {0}}}, TopicPartitions{{t1, {0}}}, kNobody),
            (ReconciledMember{5, MemberState::kStable, {{t1, {0}}}, {}}));
}

// The model: up to 5 members, two topics of up to 5 partitions.
struct Group {
  std::vector<std::set<TopicId, TopicIdLess>> subscribed;
  std::vector<ReconciledMember> members;
  std::vector<TopicPartitions> consumer_owned;  // what each consumer is consuming
  std::vector<TopicPartitions> target;
  int32_t epoch = 0;
};

using TP = std::pair<TopicId, int32_t>;

struct TPLess {
  bool operator()(const TP& a, const TP& b) const {
    return a.first.bytes != b.first.bytes ? a.first.bytes < b.first.bytes : a.second < b.second;
  }
};

void check_disjoint(const Group& g) {
  std::set<TP, TPLess> held, owned;
  for (size_t i = 0; i < g.members.size(); ++i) {
    for (const TopicPartitions* tp : {&g.members[i].assigned, &g.members[i].pending_revocation}) {
      for (const auto& [t, ps] : *tp) {
        for (int32_t p : ps) RC_ASSERT(held.emplace(t, p).second);
      }
    }
    for (const auto& [t, ps] : g.consumer_owned[i]) {
      for (int32_t p : ps) {
        RC_ASSERT(owned.emplace(t, p).second);
        // A consumer owns only what the coordinator holds for it.
        const ReconciledMember& m = g.members[i];
        RC_ASSERT((m.assigned.contains(t) && m.assigned.at(t).contains(p)) ||
                  (m.pending_revocation.contains(t) && m.pending_revocation.at(t).contains(p)));
      }
    }
    RC_ASSERT(g.members[i].member_epoch <= g.epoch);
  }
}

// One heartbeat of member i; the consumer then takes up what it was given
// and, if `revoke_now`, lets go of what was taken away.
void heartbeat(Group& g, size_t i, bool report_owned, bool revoke_now) {
  const HeldByOther held_by_other = [&](const TopicId& t, int32_t p) {
    for (size_t j = 0; j < g.members.size(); ++j) {
      if (j == i) continue;
      for (const TopicPartitions* tp : {&g.members[j].assigned, &g.members[j].pending_revocation}) {
        if (tp->contains(t) && tp->at(t).contains(p)) return true;
      }
    }
    return false;
  };
  const int32_t before = g.members[i].member_epoch;
  const std::optional<TopicPartitions> owned =
      report_owned ? std::optional<TopicPartitions>(g.consumer_owned[i]) : std::nullopt;
  g.members[i] = reconcile(g.members[i], g.subscribed[i], g.epoch, g.target[i], owned, held_by_other);
  RC_ASSERT(g.members[i].member_epoch >= before);
  const TopicPartitions& given = g.members[i].assigned;
  TopicPartitions next;
  for (const auto& [t, ps] : g.consumer_owned[i]) {
    for (int32_t p : ps) {
      if (!revoke_now || (given.contains(t) && given.at(t).contains(p))) next[t].insert(p);
    }
  }
  for (const auto& [t, ps] : given) next[t].insert(ps.begin(), ps.end());
  g.consumer_owned[i] = std::move(next);
}

RC_GTEST_PROP(Reconciliation, NoPartitionTwiceAndConvergence, ()) {
  const std::vector<TopicId> topics{test_topic(1), test_topic(2)};
  const std::vector<int32_t> partitions{*rc::gen::inRange(1, 6), *rc::gen::inRange(0, 6)};
  const size_t n = *rc::gen::inRange<size_t>(1, 6);
  Group g;
  g.subscribed.assign(n, {topics[0], topics[1]});
  g.members.resize(n);
  g.consumer_owned.resize(n);
  g.target.resize(n);
  const int steps = *rc::gen::inRange(0, 80);
  for (int s = 0; s < steps; ++s) {
    switch (*rc::gen::inRange(0, 6)) {
      case 0: {  // a new target: every partition to a random member or nobody
        ++g.epoch;
        for (TopicPartitions& t : g.target) t.clear();
        for (size_t k = 0; k < topics.size(); ++k) {
          for (int32_t p = 0; p < partitions[k]; ++p) {
            const size_t owner = *rc::gen::inRange<size_t>(0, n + 1);
            if (owner < n) g.target[owner][topics[k]].insert(p);
          }
        }
        break;
      }
      case 1: {  // a subscription changes, which bumps the group's epoch
        const size_t i = *rc::gen::inRange<size_t>(0, n);
        const TopicId& t = topics[*rc::gen::inRange<size_t>(0, topics.size())];
        if (!g.subscribed[i].erase(t)) g.subscribed[i].insert(t);
        ++g.epoch;
        break;
      }
      default:
        heartbeat(g, *rc::gen::inRange<size_t>(0, n), *rc::gen::arbitrary<bool>(), *rc::gen::arbitrary<bool>());
    }
    check_disjoint(g);
  }
  // Everyone heartbeats and revokes promptly: the group converges.
  for (int round = 0; round < 4; ++round) {
    for (size_t i = 0; i < n; ++i) {
      heartbeat(g, i, true, true);
      check_disjoint(g);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    TopicPartitions expected;
    for (const auto& [t, ps] : g.target[i]) {
      if (g.subscribed[i].contains(t)) expected[t] = ps;
    }
    RC_ASSERT(g.members[i].state == MemberState::kStable);
    RC_ASSERT(g.members[i].member_epoch == g.epoch);
    RC_ASSERT(g.members[i].assigned == expected);
    RC_ASSERT(g.members[i].pending_revocation.empty());
    RC_ASSERT(g.consumer_owned[i] == expected);
  }
}

}  // namespace
}  // namespace brook::group
