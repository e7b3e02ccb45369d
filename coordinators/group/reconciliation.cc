// coordinators/group/reconciliation.cc
#include "coordinators/group/reconciliation.h"

namespace brook::group {
namespace {

// The member still reports one of `revoking` owned (or reports nothing).
bool still_owns(const std::optional<TopicPartitions>& owned, const TopicPartitions& revoking) {
  if (!owned) return true;
  for (const auto& [topic, partitions] : *owned) {
    auto r = revoking.find(topic);
    if (r == revoking.end()) continue;
    for (int32_t p : partitions) {
      if (r->second.contains(p)) return true;
    }
  }
  return false;
}

// Kafka's computeNextAssignment: keep what is in the target, revoke the
// rest, and add the target's free partitions once nothing is left to revoke.
ReconciledMember next_assignment(const ReconciledMember& member, const std::set<TopicId, TopicIdLess>& subscribed,
                                 int32_t target_epoch, const TopicPartitions& target,
                                 const std::optional<TopicPartitions>& owned, const HeldByOther& held_by_other) {
  std::set<TopicId, TopicIdLess> topics;
  for (const auto& [topic, unused] : target) topics.insert(topic);
  for (const auto& [topic, unused] : member.assigned) topics.insert(topic);

  TopicPartitions keep, revoke, add;
  bool unreleased = false;
  static const std::set<int32_t> kNone;
  for (const TopicId& topic : topics) {
    auto t = target.find(topic);
    const std::set<int32_t>& wanted = (t == target.end() || !subscribed.contains(topic)) ? kNone : t->second;
    auto a = member.assigned.find(topic);
    const std::set<int32_t>& has = a == member.assigned.end() ? kNone : a->second;
    for (int32_t p : has) (wanted.contains(p) ? keep : revoke)[topic].insert(p);
    for (int32_t p : wanted) {
      if (has.contains(p)) continue;
      if (held_by_other(topic, p)) {
        unreleased = true;
      } else {
        add[topic].insert(p);
      }
    }
  }

  ReconciledMember next = member;
  next.assigned = std::move(keep);
  if (!revoke.empty() && still_owns(owned, revoke)) {
    // Stay at this epoch until the member reports the partitions revoked.
    next.state = MemberState::kUnrevokedPartitions;
    next.pending_revocation = std::move(revoke);
    return next;
  }
  for (auto& [topic, partitions] : add) next.assigned[topic].merge(partitions);
  next.member_epoch = target_epoch;
  next.pending_revocation.clear();
  next.state = unreleased ? MemberState::kUnreleasedPartitions : MemberState::kStable;
  return next;
}

}  // namespace

ReconciledMember reconcile(const ReconciledMember& member, const std::set<TopicId, TopicIdLess>& subscribed,
                           int32_t target_epoch, const TopicPartitions& target,
                           const std::optional<TopicPartitions>& owned, const HeldByOther& held_by_other) {
  switch (member.state) {
    case MemberState::kStable:
      if (member.member_epoch != target_epoch) {
        return next_assignment(member, subscribed, target_epoch, target, owned, held_by_other);
      }
      break;
    case MemberState::kUnrevokedPartitions:
      if (!still_owns(owned, member.pending_revocation)) {
        return next_assignment(member, subscribed, target_epoch, target, owned, held_by_other);
      }
      break;
    case MemberState::kUnreleasedPartitions:
      return next_assignment(member, subscribed, target_epoch, target, owned, held_by_other);
  }
  // No progress possible; still, partitions of topics the member no longer
  // subscribes to are revoked at once.
  TopicPartitions dropped;
  for (const auto& [topic, partitions] : member.assigned) {
    if (!subscribed.contains(topic)) dropped[topic] = partitions;
  }
  if (dropped.empty()) return member;
  ReconciledMember next = member;
  TopicPartitions pending = member.pending_revocation;
  for (auto& [topic, partitions] : dropped) {
    next.assigned.erase(topic);
    pending[topic].merge(partitions);
  }
  // Partitions the member reports no longer owning just go.
  if (still_owns(owned, pending)) {
    next.state = MemberState::kUnrevokedPartitions;
    next.pending_revocation = std::move(pending);
  }
  return next;
}

}  // namespace brook::group
