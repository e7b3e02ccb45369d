// sim/broker.h
//
// The "broker" scenario: one `brook server` node (a single-voter metadata
// quorum, the QuorumController and the Broker, wired as tools/server_command
// wires them) and a client node whose writers produce batches with acks=all
// to a topic of 1-4 partitions while a reader fetches acknowledged offsets
// back. The broker's partitions sync before they acknowledge
// (FlushMode::kBeforeAck: with one replica the disk is the only copy), and
// roll segments often. Faults are drawn per seed (sim/faults.h): crashes
// with lost unsynced writes and torn tails, disk errors and corrupted reads,
// partitions, clogs, resets, clock drift and jumps; a broker whose log
// fails stops and is power-cycled. Then the faults stop, a produce must be
// acknowledged within the quiet phase, and after a final power loss the
// broker restarts and every partition is read from its start.
//
// The "replication" scenario runs the same workload against three nodes,
// each a metadata quorum voter, controller and broker, with a topic of
// three replicas and min.insync.replicas=2: writers find partition leaders
// through Metadata and follow them across failovers. Every replica syncs
// before it acknowledges (a follower before its next fetch reports the
// records), so acks=all must survive any crash, correlated ones included.
// After the final power loss and read-back, once the followers caught up,
// every replica must hold the leader's records below its high watermark.
// Mutants (broker-mutant-flush, replication-mutant-flush) acknowledge
// before syncing; the checkers must report a lost record.
//
// Checkers (the oracle lives outside the nodes):
// - an offset is never acknowledged twice;
// - a record read back at an acknowledged offset is the acknowledged one
//   (during the run and after the final restart);
// - no acknowledged record is lost after the final power loss;
// - fetches return offsets in order, without going backwards;
// - liveness: after the heal a produce is acknowledged;
// - replication: replicas agree on every offset below the high watermark,
//   and every follower catches up with its leader.
#pragma once

#include "absl/status/statusor.h"
#include "sim/scenario.h"

namespace brook::sim {

absl::StatusOr<ScenarioResult> run_broker(const ScenarioOptions& options);

}  // namespace brook::sim
