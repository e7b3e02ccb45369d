// net/client/transactions.h
//
// Admin calls for transactions, as Kafka's Admin client and the
// kafka-transactions tool make them: the transactions every coordinator
// holds (ListTransactions to each broker), one transaction's state
// (DescribeTransactions to its coordinator), and the producers a
// partition's leader keeps state for (DescribeProducers), whose open
// transactions show one that may hang; the hanging ones (open on a
// partition past the longest transaction timeout, and not ongoing there at
// any coordinator), and their abort (WriteTxnMarkers to the leader).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/task.h"
#include "io/time.h"
#include "net/client/cluster.h"

namespace brook::client {

struct TransactionListing {
  std::string transactional_id;
  int64_t producer_id = -1;
  std::string state;
  int32_t coordinator = -1;
};
// Every broker's transactions, by transactional id; only those of
// `producer_ids` when not empty.
io::Task<absl::StatusOr<std::vector<TransactionListing>>> list_transactions(Cluster& cluster,
                                                                           std::vector<int64_t> producer_ids = {});

struct TransactionDescription {
  std::string transactional_id;
  int32_t coordinator = -1;
  std::string state;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int32_t timeout_ms = 0;
  // -1 when no transaction is open.
  int64_t start_time_ms = -1;
  std::vector<TopicPartition> partitions;
};
// NotFound (TRANSACTIONAL_ID_NOT_FOUND) for an id the coordinator does not
// know; coordinator errors are retried until the request timeout.
io::Task<absl::StatusOr<TransactionDescription>> describe_transaction(Cluster& cluster,
                                                                      const std::string& transactional_id);

struct ProducerState {
  int64_t producer_id = -1;
  int32_t producer_epoch = -1;
  int32_t last_sequence = -1;
  int64_t last_timestamp_ms = -1;
  int32_t coordinator_epoch = -1;
  // The first offset of the producer's open transaction, -1 when none.
  int64_t current_txn_start_offset = -1;
};
// The active producers of `tp`, from its leader.
io::Task<absl::StatusOr<std::vector<ProducerState>>> describe_producers(Cluster& cluster, TopicPartition tp);

// A transaction open on a partition that no coordinator holds open there:
// nothing will end it, and the partition's last stable offset (what
// read_committed consumers read up to) waits for it.
struct HangingTransaction {
  TopicPartition partition;
  ProducerState producer;
};
// The open transactions of `partitions` whose producer wrote nothing for
// longer than `max_transaction_timeout` (transaction.max.timeout.ms: no
// transaction may run longer) and whose producer id no coordinator holds
// in an ongoing transaction over the partition.
io::Task<absl::StatusOr<std::vector<HangingTransaction>>> find_hanging_transactions(
    Cluster& cluster, std::vector<TopicPartition> partitions, io::Duration max_transaction_timeout);

// Ends the transaction open on `tp` since `start_offset` with an abort
// marker written by the partition's leader, at the producer's epoch and
// coordinator epoch. NotFound when no transaction is open there from that
// offset. For hanging transactions only: one its coordinator still holds
// would be ended behind the coordinator's back.
io::Task<absl::Status> abort_transaction(Cluster& cluster, TopicPartition tp, int64_t start_offset);

}  // namespace brook::client
