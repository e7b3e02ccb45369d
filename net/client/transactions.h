// net/client/transactions.h
//
// Admin calls for transactions, as Kafka's Admin client and the
// kafka-transactions tool make them: the transactions every coordinator
// holds (ListTransactions to each broker), one transaction's state
// (DescribeTransactions to its coordinator), and the producers a
// partition's leader keeps state for (DescribeProducers), whose open
// transactions show one that may hang.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "io/task.h"
#include "net/client/cluster.h"

namespace brook::client {

struct TransactionListing {
  std::string transactional_id;
  int64_t producer_id = -1;
  std::string state;
  int32_t coordinator = -1;
};
// Every broker's transactions, by transactional id.
io::Task<absl::StatusOr<std::vector<TransactionListing>>> list_transactions(Cluster& cluster);

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

}  // namespace brook::client
