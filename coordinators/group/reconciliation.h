// coordinators/group/reconciliation.h
//
// The reconciliation of KIP-848's consumer protocol: how one member moves
// from the partitions it has towards its target assignment without any
// partition ever belonging to two members.
//
// A member is in one of three states:
// - kStable: it has every partition of the target it was reconciled to;
// - kUnrevokedPartitions: it must give up `pending_revocation` first and
//   stays at its epoch until its heartbeat no longer reports them owned;
// - kUnreleasedPartitions: it reached the target epoch but some of its
//   target partitions are still held (assigned or pending revocation) by
//   other members; it gets them when they are released.
//
// reconcile() is Kafka's CurrentAssignmentBuilder as a pure function: given
// the member, the group's target (epoch and this member's partitions), the
// partitions the member's heartbeat reports owned (nullopt: not reported)
// and who holds what, it returns the member's next state. A partition is
// given to the member only once no other member holds it, so a group whose
// members' states change only through reconcile() (and the caller keeping
// `held_by_other` current) never has one partition in two members' assigned
// or pending sets.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>

#include "coordinators/group/assignors.h"

namespace brook::group {

enum class MemberState : uint8_t { kStable, kUnrevokedPartitions, kUnreleasedPartitions };

struct ReconciledMember {
  int32_t member_epoch = 0;
  MemberState state = MemberState::kStable;
  TopicPartitions assigned;
  TopicPartitions pending_revocation;
  bool operator==(const ReconciledMember&) const = default;
};

// True while a member other than this one has the partition assigned or
// pending revocation.
using HeldByOther = std::function<bool(const TopicId&, int32_t)>;

// `subscribed`: the topics the member subscribes to now; partitions of other
// topics are revoked even if the target still lists them.
ReconciledMember reconcile(const ReconciledMember& member, const std::set<TopicId, TopicIdLess>& subscribed,
                           int32_t target_epoch, const TopicPartitions& target,
                           const std::optional<TopicPartitions>& owned, const HeldByOther& held_by_other);

}  // namespace brook::group
