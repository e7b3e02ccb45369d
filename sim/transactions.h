// sim/transactions.h
//
// The "transactions" scenario: three `brook server` nodes (each a metadata
// voter, controller and broker; the topic and __transaction_state have
// three replicas, min.insync.replicas=2) and 1-3 client nodes, each a
// transactional producer with its own transactional id. A producer finds
// its transaction coordinator (FindCoordinator, key type 1), takes a
// producer id and epoch (InitProducerId), and runs transaction after
// transaction: AddPartitionsToTxn for 1-4 partitions, idempotent
// transactional batches to each partition's leader (acks=all), then
// EndTxn, committing most and aborting the rest; now and then it leaves a
// transaction open past its timeout. Any error it cannot retry sends it
// back to InitProducerId, which aborts what it left open. Faults are drawn
// per seed (sim/faults.h): crashes of servers and producers, network
// partitions, clogs, resets, clock drift and jumps, disk faults.
//
// After the workload the producers stop (crashed: their open transactions
// are left to the coordinators' timeouts) and the faults heal. Checkers,
// on every partition read from its start as a read_committed consumer
// reads it (up to the last stable offset, skipping what the fetch's
// aborted-transaction list and abort markers say is aborted):
// - liveness: within the quiet time every transaction is decided: the last
//   stable offset reaches the high watermark on every partition;
// - a transaction whose commit was acknowledged is visible whole: every
//   record acknowledged for it, each once;
// - a transaction whose abort was acknowledged is not visible at all;
// - a transaction whose outcome the producer never learnt is all or
//   nothing;
// - nothing else is visible, and no record twice.
//
// The mutant (transactions-mutant-markers) writes commit markers for
// aborted transactions too; the checkers must report it.
//
// transactions-loss loses one server for good partway through (sim/README.md,
// Losing a node for good); the checkers read from the two left.
#pragma once

#include "absl/status/statusor.h"
#include "sim/scenario.h"

namespace brook::sim {

absl::StatusOr<ScenarioResult> run_transactions(const ScenarioOptions& options);

}  // namespace brook::sim
