// coordinators/txn/transaction_coordinator.h
//
// TransactionCoordinator: Kafka's transaction coordinator (KIP-98). Each
// transactional id belongs to one partition of `__transaction_state`
// (runtime::partition_for_key); the broker leading that partition serves
// it, and every change of a transaction's state is a record of that
// partition, committed to its ISR before the in-memory state takes it and
// replayed when another broker takes the partition over.
//
// A transaction's life (Kafka's TransactionState):
//
//   Empty --AddPartitions/AddOffsets--> Ongoing --EndTxn--> PrepareCommit
//   or PrepareAbort --markers written--> CompleteCommit or CompleteAbort
//   --AddPartitions--> Ongoing ...
//
// EndTxn answers once the Prepare record is committed: from then on the
// outcome is decided. The coordinator then writes a commit or abort marker
// to every partition of the transaction (WriteTxnMarkers, through the
// host), retrying until each partition has it or is gone, and writes the
// Complete record. A coordinator that takes a partition over finishes the
// transactions it finds prepared.
//
// Fencing. InitProducerId for a transactional id bumps the producer epoch
// (a new producer id once the epoch is exhausted), which fences every
// earlier producer of that id: their requests answer PRODUCER_FENCED. If
// the id has a transaction in progress, it is aborted first under the
// bumped epoch, and the caller is told CONCURRENT_TRANSACTIONS, to retry.
// A transaction open longer than its timeout is aborted the same way, by
// `run()`. An id whose producer has been idle for
// transactional.id.expiration.ms is forgotten (a tombstone).
//
// Requests for one transactional id do not interleave: while one of its
// writes is in flight, others answer CONCURRENT_TRANSACTIONS (retriable),
// as Kafka's pendingState does.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinators/runtime/loader.h"
#include "coordinators/runtime/record_log.h"
#include "coordinators/runtime/shards.h"
#include "io/context.h"
#include "io/scope.h"
#include "io/task.h"
#include "io/time.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/add_offsets_to_txn_request.h"
#include "net/kafka/messages/add_offsets_to_txn_response.h"
#include "net/kafka/messages/add_partitions_to_txn_request.h"
#include "net/kafka/messages/add_partitions_to_txn_response.h"
#include "net/kafka/messages/describe_transactions_request.h"
#include "net/kafka/messages/describe_transactions_response.h"
#include "net/kafka/messages/end_txn_request.h"
#include "net/kafka/messages/end_txn_response.h"
#include "net/kafka/messages/init_producer_id_request.h"
#include "net/kafka/messages/init_producer_id_response.h"
#include "net/kafka/messages/list_transactions_request.h"
#include "net/kafka/messages/list_transactions_response.h"

namespace brook::txn {

inline constexpr std::string_view kTransactionStateTopic = "__transaction_state";

struct TransactionCoordinatorConfig {
  // transaction.state.log.num.partitions
  int32_t state_topic_partitions = 50;
  // offsets.topic.num.partitions: AddOffsetsToTxn adds the group's
  // __consumer_offsets partition to the transaction.
  int32_t offsets_topic_partitions = 50;
  // transaction.max.timeout.ms
  io::Duration max_timeout{std::chrono::minutes(15)};
  // transactional.id.expiration.ms
  io::Duration id_expiration{std::chrono::hours(24 * 7)};
  // transaction.abort.timed.out.transaction.cleanup.interval.ms
  io::Duration abort_check_interval{std::chrono::seconds(10)};
  // transaction.remove.expired.transaction.cleanup.interval.ms
  io::Duration expire_check_interval{std::chrono::hours(1)};
  // How long marker writes back off after a partition did not take one.
  io::Duration marker_retry_backoff{std::chrono::milliseconds(100)};
  // A mutant for the simulator's checkers: every transaction's markers
  // commit, aborted ones too.
  bool mutant_commit_aborts = false;
};

// Kafka's TransactionState, with its codes in __transaction_state.
enum class TxnState : int8_t {
  kEmpty = 0,
  kOngoing = 1,
  kPrepareCommit = 2,
  kPrepareAbort = 3,
  kCompleteCommit = 4,
  kCompleteAbort = 5,
  kDead = 6,
  kPrepareEpochFence = 7,
};
std::string_view txn_state_name(TxnState state);

using TopicPartition = std::pair<std::string, int32_t>;

// Commit or abort markers for one transaction.
struct TxnMarkers {
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  bool commit = false;
  // The leader epoch of the __transaction_state partition: partitions
  // refuse markers of an older coordinator (TRANSACTION_COORDINATOR_FENCED).
  int32_t coordinator_epoch = 0;
  std::set<TopicPartition> partitions;
};

// What the coordinator needs of its broker.
class TransactionHost : public runtime::RecordLog {
 public:
  // A new producer id (from the controller's blocks).
  virtual io::Task<absl::StatusOr<int64_t>> allocate_producer_id() = 0;
  // Writes the markers to each partition's leader and returns once every
  // partition has its marker committed (or no longer exists). Retries
  // failed partitions itself; returns early only with
  // TRANSACTION_COORDINATOR_FENCED (a partition saw a newer coordinator) or
  // when `still_coordinator()` turns false.
  virtual io::Task<net::Error> write_markers(const TxnMarkers& markers,
                                             std::function<bool()> still_coordinator) = 0;
  // Whether the partition exists (AddPartitionsToTxn refuses others).
  virtual bool partition_exists(const std::string& topic, int32_t partition) const = 0;
};

class TransactionCoordinator final : public runtime::Coordinator {
 public:
  TransactionCoordinator(io::Context& ctx, TransactionHost& host, TransactionCoordinatorConfig config = {});
  ~TransactionCoordinator() override;
  TransactionCoordinator(const TransactionCoordinator&) = delete;
  TransactionCoordinator& operator=(const TransactionCoordinator&) = delete;

  const TransactionCoordinatorConfig& config() const { return config_; }
  int32_t partition_for(std::string_view transactional_id) const {
    return runtime::partition_for_key(transactional_id, config_.state_topic_partitions);
  }

  // Aborts timed-out transactions, expires idle ids and finishes the
  // markers of prepared transactions. Runs until cancelled.
  io::Task<void> run();

  // --- loading (runtime::Coordinator) ---
  void begin_load(int32_t partition, int32_t epoch) override;
  absl::Status replay(int32_t partition, int64_t offset, const std::optional<io::Buffer>& key,
                      const std::optional<io::Buffer>& value) override;
  void finish_load(int32_t partition, int32_t epoch) override;
  void unload(int32_t partition) override;
  std::optional<int32_t> loaded_epoch(int32_t partition) const override { return shards_.epoch(partition); }
  bool loading(int32_t partition) const override { return shards_.loading(partition); }
  std::vector<int32_t> loaded_partitions() const override { return shards_.partitions(); }

  // --- the APIs; requests decoded at `version` ---
  // InitProducerId with a transactional id (the broker answers others).
  io::Task<net::InitProducerIdResponse> init_producer_id(net::InitProducerIdRequest request, int16_t version);
  // AddPartitionsToTxn: v0-3 add the partitions of one transaction; v4+
  // (from brokers) carry several transactions, each to add or, with
  // verify_only, to check (KIP-890): a partition answers NONE only if the
  // transaction is ongoing with that producer id and epoch and has added it.
  io::Task<net::AddPartitionsToTxnResponse> add_partitions(net::AddPartitionsToTxnRequest request, int16_t version);
  io::Task<net::AddOffsetsToTxnResponse> add_offsets(net::AddOffsetsToTxnRequest request, int16_t version);
  io::Task<net::EndTxnResponse> end_txn(net::EndTxnRequest request, int16_t version);
  net::DescribeTransactionsResponse describe(const net::DescribeTransactionsRequest& request) const;
  net::ListTransactionsResponse list(const net::ListTransactionsRequest& request) const;

  // A transaction's state, for tests and tools.
  struct Snapshot {
    int64_t producer_id = -1;
    int16_t producer_epoch = -1;
    TxnState state = TxnState::kEmpty;
    std::set<TopicPartition> partitions;
    int32_t timeout_ms = 0;
  };
  std::optional<Snapshot> snapshot(const std::string& transactional_id) const;

 private:
  struct Txn {
    std::string id;
    int32_t partition = 0;
    int64_t producer_id = -1;
    int16_t producer_epoch = -1;
    // The previous producer id and epoch (KIP-360): a producer retrying
    // InitProducerId with them gets the current ones back.
    int64_t last_producer_id = -1;
    int16_t last_producer_epoch = -1;
    int32_t timeout_ms = 0;
    TxnState state = TxnState::kEmpty;
    std::set<TopicPartition> partitions;
    int64_t start_ms = -1;
    int64_t update_ms = -1;
    // Ongoing: when it times out by this broker's clock (see abort_timed_out).
    io::Instant deadline{};
    // A write of this transaction's state is in flight.
    bool pending = false;
    // The state was taken from a write that failed after its append, or
    // from a load (which reads past the high watermark): it may not be in
    // the log for good until a later write of the transaction succeeds.
    bool unconfirmed = false;
  };
  // The state a write is to make current.
  struct Transition {
    int64_t producer_id;
    int16_t producer_epoch;
    int64_t last_producer_id;
    int16_t last_producer_epoch;
    int32_t timeout_ms;
    TxnState state;
    std::set<TopicPartition> partitions;
    int64_t start_ms;
    int64_t update_ms;
  };
  static Transition current(const Txn& t);

  // NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for an id not served here.
  net::Error check(const std::string& transactional_id) const;
  Txn* find(const std::string& transactional_id);
  const Txn* find(const std::string& transactional_id) const;
  int64_t now_ms() const;

  // Writes `to` as the transaction's state (nullopt: forgets the id) and
  // applies it once committed. The caller has checked that no write of it
  // is pending. On failure the state stays as it was, and the error is
  // Kafka's answer for it.
  io::Task<net::Error> write(std::string transactional_id, std::optional<Transition> to);
  // Writes the transaction's state again, unchanged. An answer that lets
  // a producer go on without changing the state (a retried EndTxn that
  // finds its transaction complete) is given only once such a write
  // succeeds: a broker that lost the partition and has not heard yet (cut
  // off from the controller) still holds the state it had, and its write
  // can no longer reach the ISR. Without it, a producer that took such a
  // stale "committed" for its new transaction's commit went on while the
  // new coordinator still held that transaction open, and aborted it
  // later. AddPartitionsToTxn of partitions the transaction holds already
  // is written again for the same reason.
  io::Task<net::Error> confirm(std::string transactional_id);
  // Prepares the end of the transaction (PrepareCommit/PrepareAbort, with
  // `epoch`), and on success schedules its completion.
  io::Task<net::Error> prepare_end(std::string transactional_id, bool commit, int16_t epoch);
  void schedule_complete(const std::string& transactional_id);
  // Writes the markers of a prepared transaction and then its Complete
  // record.
  io::Task<void> complete(std::string transactional_id);
  // Timers: aborts transactions past their timeout (fencing their
  // producers), forgets ids idle past transactional.id.expiration.ms.
  void abort_timed_out();
  io::Task<void> fence_and_abort(std::string transactional_id);
  void expire_ids();
  io::Task<void> expire(std::string transactional_id);
  // AddPartitionsToTxn / AddOffsetsToTxn of one transaction.
  io::Task<net::Error> add(std::string transactional_id, int64_t producer_id, int16_t producer_epoch,
                           std::set<TopicPartition> partitions);
  // Whether the transaction is ongoing with that producer id and epoch (a
  // state not yet confirmed in the log is written again first).
  io::Task<net::Error> verify(std::string transactional_id, int64_t producer_id, int16_t producer_epoch);
  // One transaction of an AddPartitionsToTxn request: its partitions' results.
  io::Task<std::vector<net::AddPartitionsToTxnResponse::AddPartitionsToTxnTopicResult>> add_or_verify(
      std::string transactional_id, int64_t producer_id, int16_t producer_epoch,
      std::vector<net::AddPartitionsToTxnRequest::AddPartitionsToTxnTopic> topics, bool verify_only, int16_t version);

  io::Context* ctx_;
  TransactionHost* host_;
  TransactionCoordinatorConfig config_;
  runtime::ShardTable shards_;
  std::map<std::string, std::unique_ptr<Txn>> txns_;
  io::TaskScope* scope_ = nullptr;
  // Prepared transactions waiting for run() to complete them (found by a
  // load, or prepared before run() started).
  std::vector<std::string> to_complete_;
  // Counts the loads that grew to_complete_; run() takes seen() before it
  // takes them (a load finishing while run() is not yet waiting is not
  // missed).
  io::ChangeCount wake_;
};

}  // namespace brook::txn
