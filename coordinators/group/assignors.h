// coordinators/group/assignors.h
//
// The server-side partition assignors of Kafka's consumer group protocol
// (KIP-848): the coordinator, not a client leader, computes each member's
// target assignment from the members' subscriptions, their current
// assignments and the subscribed topics' partition counts.
//
// - "uniform" (the default of group.consumer.assignors): every partition of
//   a subscribed topic goes to one member subscribed to it, the members'
//   partition counts as even as the subscriptions allow, and as few
//   partitions as possible leave the member that holds them. When every
//   member subscribes to the same topics the counts differ by at most one
//   and a member keeps min(what it holds, its share) of its partitions;
//   otherwise no single partition can move to a member subscribed to its
//   topic and leave the counts more even (no member holding a partition of
//   topic T has two more than another subscriber of T).
// - "range": per topic, the subscribed members (ordered by member id) get
//   contiguous ranges of floor(N/M) or floor(N/M)+1 partitions, the larger
//   ranges first, so that co-partitioned topics with the same subscribers
//   give each member the same partition numbers (joins). A member keeps up
//   to its share of the lowest partitions it already holds.
//
// Both are pure functions of their input: the order of `members` does not
// matter, and equal inputs give equal assignments. Subscribed topics absent
// from `topics` (not created yet, or deleted) are ignored, as are current
// partitions of them or beyond their partition count; a partition held by
// two members (a stale assignment) stays with the first by member id.
// Every member appears in the result, possibly with nothing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "net/kafka/wire.h"

namespace brook::group {

using TopicId = net::Uuid;

struct TopicIdLess {
  bool operator()(const TopicId& a, const TopicId& b) const { return a.bytes < b.bytes; }
};

// A member's partitions: topic id -> partition indexes.
using TopicPartitions = std::map<TopicId, std::set<int32_t>, TopicIdLess>;

struct AssignorMember {
  std::string member_id;
  std::set<TopicId, TopicIdLess> subscribed_topics;
  TopicPartitions current;
};

// The subscribed topics that exist: topic id -> number of partitions.
using TopicPartitionCounts = std::map<TopicId, int32_t, TopicIdLess>;

// Member id -> its target assignment.
using GroupAssignment = std::map<std::string, TopicPartitions>;

GroupAssignment assign_uniform(const std::vector<AssignorMember>& members, const TopicPartitionCounts& topics);
GroupAssignment assign_range(const std::vector<AssignorMember>& members, const TopicPartitionCounts& topics);

// The assignor Kafka names `name` ("uniform", "range"); nullopt otherwise.
using Assignor = GroupAssignment (*)(const std::vector<AssignorMember>&, const TopicPartitionCounts&);
std::optional<Assignor> find_assignor(std::string_view name);

}  // namespace brook::group
