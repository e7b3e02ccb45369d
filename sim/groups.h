// sim/groups.h
//
// The "groups" scenario: three `brook server` nodes (each a metadata voter,
// controller and broker; __consumer_offsets and the topic have three
// replicas, min.insync.replicas=2) and 1-4 client nodes, each running one
// member of a consumer group through the project's client
// (client::GroupMember, range assignor) on a topic of 1-6 partitions. A
// member joins, reads its partitions' committed offsets, "consumes" by
// advancing its positions, commits now and then, heartbeats, and joins
// again when the group rebalances (committing first, as a consumer does on
// revocation). Faults are drawn per seed (sim/faults.h): crashes of
// servers and members (a restarted member joins with a new id), network
// partitions, clogs, resets, clock drift and jumps, disk faults.
//
// Checkers:
// - no two members of one generation own the same partition (SyncGroup
//   answers);
// - a member taking over a partition starts at or above every commit
//   acknowledged before it asked (no acknowledged progress is lost);
// - after the heal the group settles within the quiet time on one
//   generation that every member confirmed with a heartbeat, owning every
//   partition exactly once, and stays on it for three session timeouts;
// - the committed offsets read at the end are not below any acknowledged
//   commit.
//
// The mutant (groups-mutant-fence) lets OffsetCommit skip the member and
// generation checks; the checkers must report lost progress.
//
// "consumer-groups" runs the same under KIP-848's consumer protocol
// (client::GroupMember::consumer_heartbeat): members report what they own
// in every ConsumerGroupHeartbeat, commit and drop revoked partitions
// before reporting them gone, read committed offsets for added ones, drop
// everything when fenced, and keep consuming and committing while the
// coordinator is unreachable (so a fenced member's late commits reach it).
// Generations are member epochs: no partition may be given to two members
// at one member epoch; liveness wants every member at one epoch owning
// every partition once. consumer-groups-mutant-fence skips the member
// epoch check on commits.
//
// "mixed-groups" has each run of a member pick the classic or the consumer
// protocol at random, so members of both share the group and it converts
// between a classic and a consumer group (online upgrade and downgrade) as
// members restart. Classic members' generations are their member epochs
// inside a consumer group, so the same checkers apply across conversions.
#pragma once

#include "absl/status/statusor.h"
#include "sim/scenario.h"

namespace brook::sim {

absl::StatusOr<ScenarioResult> run_groups(const ScenarioOptions& options);

}  // namespace brook::sim
