// sim/kraft.h
//
// The "kraft" scenario: a KRaft controller quorum (raft/raft_node.h) of 3 or
// 5 voters, sometimes with an observer, on simulated disks and network. On
// every node a writer appends batches of metadata records whenever the node
// leads, and counts a batch acknowledged once it is committed. Faults are
// drawn per seed (sim/faults.h: crashes with lost unsynced writes and torn
// tails, disk errors and corrupted reads, symmetric / one-way / isolating
// partitions, clogs, resets, clock drift and jumps). Then the faults stop,
// and the quorum must elect a leader and commit a new write within the
// quiet phase; finally every node loses power at once and its log is read
// back from disk.
//
// Checkers (the oracle lives outside the nodes, so it survives crashes):
// - election safety: at most one leader per epoch;
// - committed entries never change: every batch any node hands to its
//   listener (below its high watermark) is identical, at its offset, to
//   what every other node handed over, in every incarnation;
// - listener order: each incarnation delivers the log gap-free from 0;
// - metadata images: replaying the committed records gives every node the
//   same MetadataImage hash at the same offset;
// - snapshots: a node loading a snapshot (its own at restart, or the
//   leader's through FetchSnapshot) gets the image every node had at that
//   offset;
// - durability: every committed batch is on the disks of a majority of
//   voters after the final power loss (in the log or in a snapshot), and
//   every acknowledged batch is committed;
// - agreement: after the quiet phase every voter's log holds the committed
//   prefix;
// - liveness: after the faults heal, a leader commits a new write within
//   the quiet phase.
//
// Mutations (KraftConfig::mutation) break the replica on purpose, to prove
// the checkers catch what they claim to: "skip-vote-persist" grants votes
// without persisting them; "ack-before-flush" reports appended offsets
// before they are durable; "answer-before-commit" makes the controller
// answer writes before they commit.
//
// The "kraft-reconfig" scenario checks the same with the voter set
// changing under the faults: durability is judged against the voters in
// effect at each committed batch, agreement and catching up against the
// final voter set. "kraft-reconfig-harsh" redraws the target every second
// or so, with agents pressing hard and crashes every few seconds;
// "kraft-reconfig-mutant-concurrent" is the same weather for a leader that
// accepts a voter change while the previous one is uncommitted, which the
// checkers must catch.
//
// The "controller" scenario (QuorumController on the voters, brokers as
// observers) adds, on every node's replay of the committed log:
// - partition invariants: replicas distinct, the ISR non-empty and within
//   the replicas, a leader in the ISR and registered, unfenced and not in
//   controlled shutdown, no unclean recovery;
// - a broker's epoch is the offset of its registration record;
// and, on the answers: producer id blocks handed out never overlap.
// Liveness there also needs
// an admin write answered after the heal and every broker unfenced.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "io/time.h"
#include "sim/faults.h"
#include "sim/scenario.h"

namespace brook::sim {

struct KraftConfig {
  int voters = 3;
  int observers = 0;
  // The "kraft-reconfig" scenarios: a dynamic quorum (KIP-853). Node 1 is
  // formatted standalone (the only voter); the other `voters - 1` nodes
  // start as observers knowing only the bootstrap servers. Every node
  // runs a membership agent that asks the leader (AddRaftVoter /
  // RemoveRaftVoter) to move the voter set towards a target the scenario
  // redraws every few seconds: first all nodes, then any non-empty subset.
  bool reconfig = false;
  // How often the target is redrawn, and how often each agent acts (at
  // most).
  io::Duration reconfig_every_max{0};
  io::Duration agent_interval_max{0};
  // The "controller" scenarios: every voter runs a QuorumController
  // (core/controller) and `brokers` more nodes are brokers: Raft observers
  // replaying the log, registering and heartbeating, changing ISRs and
  // taking producer ids, and admin clients creating, deleting and growing
  // topics and altering configs. No node writes raw records.
  bool controller = false;
  int brokers = 0;
  io::Duration broker_session_timeout{0};
  io::Duration heartbeat_interval{0};
  int64_t controller_snapshot_bytes = 0;
  // leader.imbalance.check.interval (zero: auto.leader.rebalance off).
  io::Duration leader_rebalance_interval{0};
  io::Duration write_interval_min{0};
  io::Duration write_interval_max{0};
  int records_per_batch_max = 1;
  // controller.quorum.election.timeout.ms (the fetch timeout is twice it).
  io::Duration election_timeout{0};
  // Every node snapshots its image after this many committed batches (0:
  // never), which drops the log below it; small segments let that happen.
  uint64_t snapshot_every = 0;
  uint64_t segment_bytes = uint64_t{1} << 30;
  io::Duration workload{0};
  io::Duration quiet_max{0};
  FaultConfig faults;
  // "" (none) or "skip-vote-persist".
  std::string mutation;

  static KraftConfig draw(uint64_t seed);
  std::string describe() const;
};

// Runs the scenario for options.seed; options.name is "kraft", or
// "kraft-mutant-vote" (skip-vote-persist) or "kraft-mutant-flush"
// (ack-before-flush), "kraft-harsh", "kraft-reconfig",
// "kraft-reconfig-harsh", "kraft-reconfig-mutant-concurrent", "controller" or
// "controller-mutant-commit" (answer-before-commit).
absl::StatusOr<ScenarioResult> run_kraft(const ScenarioOptions& options);

// Failover in the simulator, without faults: `voters` controllers (default
// timeouts, election timeout 1 s), writes every 10 ms; the leader of the
// first epoch loses power at 5 s and stays down. Returns the simulated
// time from the crash until a leader of a later epoch commits a write and
// each of `observers` more nodes (Raft observers, as brokers are) follows
// that leader and knows the write committed.
absl::StatusOr<io::Duration> simulated_failover(uint64_t seed, int voters, int observers = 0);

}  // namespace brook::sim
