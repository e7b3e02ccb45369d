// The transaction coordinator in the simulator, over an in-memory
// __transaction_state and a host that records the markers it is asked to
// write.
#include "coordinators/txn/transaction_coordinator.h"

#include <gtest/gtest.h>

#include "sim/world.h"

namespace brook::txn {
namespace {

using namespace std::chrono_literals;
using net::Error;
using net::code;

class MemoryHost final : public TransactionHost {
 public:
  struct Entry {
    int64_t offset;
    runtime::Record record;
  };
  explicit MemoryHost(io::Context& ctx) : ctx_(&ctx) {}

  io::Task<Written> write(int32_t partition, int32_t epoch, std::vector<runtime::Record> records) override {
    (void)epoch;
    co_await ctx_->clock().sleep_for(2ms);
    std::vector<Entry>& log = partitions[partition];
    if (time_out_writes > 0) {
      // Appended, but the replicas did not confirm it in time.
      --time_out_writes;
      for (auto& r : records) log.push_back(Entry{static_cast<int64_t>(log.size()), std::move(r)});
      co_return Written{Error::kRequestTimedOut, -1};
    }
    if (fail_writes > 0) {
      --fail_writes;
      co_return Written{Error::kNotEnoughReplicas, -1};
    }
    const int64_t base = static_cast<int64_t>(log.size());
    for (auto& r : records) log.push_back(Entry{static_cast<int64_t>(log.size()), std::move(r)});
    co_return Written{Error::kNone, base};
  }
  io::Task<absl::StatusOr<int64_t>> allocate_producer_id() override { co_return next_pid++; }
  io::Task<Error> write_markers(const TxnMarkers& markers, std::function<bool()> still_coordinator) override {
    // While `hold_markers`, partitions do not take markers: the write
    // keeps trying until this coordinator is replaced.
    while (hold_markers) {
      if (!still_coordinator()) co_return Error::kNotCoordinator;
      co_await ctx_->clock().sleep_for(10ms);
    }
    co_await ctx_->clock().sleep_for(3ms);
    if (!still_coordinator()) co_return Error::kNotCoordinator;
    written_markers.push_back(markers);
    co_return Error::kNone;
  }
  bool partition_exists(const std::string& topic, int32_t partition) const override {
    return topic != "missing" && partition >= 0 && partition < 8;
  }

  io::Context* ctx_;
  int fail_writes = 0;
  int time_out_writes = 0;
  bool hold_markers = false;
  int64_t next_pid = 1000;
  std::vector<TxnMarkers> written_markers;
  std::map<int32_t, std::vector<Entry>> partitions;
};

constexpr int32_t kPartitions = 4;

struct Harness {
  explicit Harness(std::function<void(TransactionCoordinatorConfig&)> configure = {}) : world(11) {
    node = &world.add_node();
    node->start([this, configure](io::Context& ctx) -> io::Task<void> {
      host = std::make_unique<MemoryHost>(ctx);
      TransactionCoordinatorConfig c;
      c.state_topic_partitions = kPartitions;
      c.offsets_topic_partitions = 3;
      c.abort_check_interval = 1s;
      if (configure) configure(c);
      coordinator = std::make_unique<TransactionCoordinator>(ctx, *host, c);
      for (int32_t p = 0; p < kPartitions; ++p) {
        coordinator->begin_load(p, epoch);
        coordinator->finish_load(p, epoch);
      }
      co_await coordinator->run();
    });
    world.run_for(1ms);
  }
  ~Harness() {
    node->crash();
    world.run_for(1ms);
  }

  template <typename T>
  static io::Task<void> capture(io::Task<T> task, std::optional<T>* out) {
    *out = co_await std::move(task);
  }
  template <typename T>
  T call(io::Task<T> task) {
    auto slot = std::make_shared<std::optional<T>>();
    node->spawn(capture(std::move(task), slot.get()));
    EXPECT_TRUE(world.run_until([&] { return slot->has_value(); }, 60s));
    return std::move(**slot);
  }

  net::InitProducerIdResponse init(const std::string& id, int32_t timeout_ms = 60000, int64_t pid = -1,
                                   int16_t epoch = -1, int16_t version = 4) {
    net::InitProducerIdRequest r;
    r.transactional_id = id;
    r.transaction_timeout_ms = timeout_ms;
    r.producer_id = pid;
    r.producer_epoch = epoch;
    return call(coordinator->init_producer_id(std::move(r), version));
  }
  // AddPartitionsToTxn of `partitions` of topic `topic`: the error of each.
  std::vector<int16_t> add(const std::string& id, int64_t pid, int16_t epoch, const std::string& topic,
                           std::vector<int32_t> partitions, int16_t version = 3) {
    net::AddPartitionsToTxnRequest r;
    r.v3_and_below_transactional_id = id;
    r.v3_and_below_producer_id = pid;
    r.v3_and_below_producer_epoch = epoch;
    auto& t = r.v3_and_below_topics.emplace_back();
    t.name = topic;
    t.partitions = std::move(partitions);
    net::AddPartitionsToTxnResponse out = call(coordinator->add_partitions(std::move(r), version));
    std::vector<int16_t> errors;
    for (const auto& tr : out.results_by_topic_v3_and_below) {
      for (const auto& pr : tr.results_by_partition) errors.push_back(pr.partition_error_code);
    }
    return errors;
  }
  // AddPartitionsToTxn v4 with verify_only (a partition leader's check):
  // the error of each partition of topic `topic`.
  std::vector<int16_t> verify(const std::string& id, int64_t pid, int16_t epoch, const std::string& topic,
                              std::vector<int32_t> partitions) {
    net::AddPartitionsToTxnRequest r;
    auto& txn = r.transactions.emplace_back();
    txn.transactional_id = id;
    txn.producer_id = pid;
    txn.producer_epoch = epoch;
    txn.verify_only = true;
    auto& t = txn.topics.emplace_back();
    t.name = topic;
    t.partitions = std::move(partitions);
    net::AddPartitionsToTxnResponse out = call(coordinator->add_partitions(std::move(r), 4));
    std::vector<int16_t> errors;
    EXPECT_EQ(out.results_by_transaction.size(), 1u);
    for (const auto& result : out.results_by_transaction) {
      EXPECT_EQ(result.transactional_id, id);
      for (const auto& tr : result.topic_results) {
        for (const auto& pr : tr.results_by_partition) errors.push_back(pr.partition_error_code);
      }
    }
    return errors;
  }
  int16_t end(const std::string& id, int64_t pid, int16_t epoch, bool commit, int16_t version = 3) {
    net::EndTxnRequest r;
    r.transactional_id = id;
    r.producer_id = pid;
    r.producer_epoch = epoch;
    r.committed = commit;
    return call(coordinator->end_txn(std::move(r), version)).error_code;
  }
  TxnState state(const std::string& id) {
    std::optional<TransactionCoordinator::Snapshot> s = coordinator->snapshot(id);
    EXPECT_TRUE(s.has_value());
    return s.has_value() ? s->state : TxnState::kDead;
  }
  // Drops every partition and loads it again from the log, in a new epoch.
  void reload() {
    ++epoch;
    for (int32_t p = 0; p < kPartitions; ++p) {
      coordinator->begin_load(p, epoch);
      for (const auto& e : host->partitions[p]) {
        ASSERT_TRUE(coordinator->replay(p, e.offset, e.record.key, e.record.value).ok());
      }
      coordinator->finish_load(p, epoch);
    }
  }

  sim::World world;
  int32_t epoch = 1;
  sim::Node* node = nullptr;
  std::unique_ptr<MemoryHost> host;
  std::unique_ptr<TransactionCoordinator> coordinator;
};

TEST(TransactionCoordinator, EachInitBumpsTheEpochOfOneProducerId) {
  Harness h;
  net::InitProducerIdResponse a = h.init("tx");
  ASSERT_EQ(a.error_code, 0);
  EXPECT_EQ(a.producer_id, 1000);
  EXPECT_EQ(a.producer_epoch, 0);
  net::InitProducerIdResponse b = h.init("tx");
  ASSERT_EQ(b.error_code, 0);
  EXPECT_EQ(b.producer_id, 1000);
  EXPECT_EQ(b.producer_epoch, 1);
  EXPECT_EQ(h.init("other").producer_id, 1001);
  EXPECT_EQ(h.state("tx"), TxnState::kEmpty);
  EXPECT_EQ(h.host->partitions[h.coordinator->partition_for("tx")].size(),
            h.coordinator->partition_for("tx") == h.coordinator->partition_for("other") ? 3u : 2u)
      << "each epoch is written";
}

TEST(TransactionCoordinator, RefusesBadIdsTimeoutsAndUnknownPartitions) {
  Harness h([](TransactionCoordinatorConfig& c) { c.max_timeout = 10s; });
  EXPECT_EQ(h.init("").error_code, code(Error::kInvalidRequest));
  EXPECT_EQ(h.init("tx", 0).error_code, code(Error::kInvalidTransactionTimeout));
  EXPECT_EQ(h.init("tx", 10001).error_code, code(Error::kInvalidTransactionTimeout));
  net::InitProducerIdResponse p = h.init("tx", 10000);
  ASSERT_EQ(p.error_code, 0);
  EXPECT_EQ(h.add("tx", p.producer_id, p.producer_epoch, "missing", {0}),
            (std::vector<int16_t>{code(Error::kUnknownTopicOrPartition)}));
  EXPECT_EQ(h.add("tx", p.producer_id, p.producer_epoch, "t", {0, 9}),
            (std::vector<int16_t>{code(Error::kOperationNotAttempted), code(Error::kUnknownTopicOrPartition)}));
  EXPECT_EQ(h.state("tx"), TxnState::kEmpty);
  EXPECT_EQ(h.add("nobody", 5, 0, "t", {0}), (std::vector<int16_t>{code(Error::kInvalidProducerIdMapping)}));
  EXPECT_EQ(h.add("tx", p.producer_id + 1, p.producer_epoch, "t", {0}),
            (std::vector<int16_t>{code(Error::kInvalidProducerIdMapping)}));
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, true), code(Error::kInvalidTxnState))
      << "nothing to end";
}

TEST(TransactionCoordinator, CommitWritesMarkersToEveryPartitionThenCompletes) {
  Harness h;
  net::InitProducerIdResponse p = h.init("tx");
  EXPECT_EQ(h.add("tx", p.producer_id, p.producer_epoch, "t", {0, 1}), (std::vector<int16_t>{0, 0}));
  EXPECT_EQ(h.add("tx", p.producer_id, p.producer_epoch, "u", {2}), (std::vector<int16_t>{0}));
  net::AddOffsetsToTxnRequest offsets;
  offsets.transactional_id = "tx";
  offsets.producer_id = p.producer_id;
  offsets.producer_epoch = p.producer_epoch;
  offsets.group_id = "g";
  EXPECT_EQ(h.call(h.coordinator->add_offsets(offsets, 1)).error_code, 0);
  EXPECT_EQ(h.state("tx"), TxnState::kOngoing);
  const size_t records = h.host->partitions[h.coordinator->partition_for("tx")].size();

  h.host->hold_markers = true;
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, true), 0) << "answered once the decision is written";
  EXPECT_EQ(h.state("tx"), TxnState::kPrepareCommit);
  EXPECT_EQ(h.host->partitions[h.coordinator->partition_for("tx")].size(), records + 1);
  // While the markers are under way the producer's next transaction waits.
  EXPECT_EQ(h.add("tx", p.producer_id, p.producer_epoch, "t", {0}),
            (std::vector<int16_t>{code(Error::kConcurrentTransactions)}));
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, true), code(Error::kConcurrentTransactions));
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, false), code(Error::kInvalidTxnState));
  EXPECT_EQ(h.init("tx").error_code, code(Error::kConcurrentTransactions));
  h.host->hold_markers = false;
  h.world.run_for(1s);
  ASSERT_EQ(h.host->written_markers.size(), 1u);
  const TxnMarkers& m = h.host->written_markers[0];
  EXPECT_TRUE(m.commit);
  EXPECT_EQ(m.producer_id, p.producer_id);
  EXPECT_EQ(m.producer_epoch, p.producer_epoch);
  EXPECT_EQ(m.coordinator_epoch, 1);
  EXPECT_EQ(m.partitions, (std::set<TopicPartition>{{"t", 0}, {"t", 1}, {"u", 2}, {"__consumer_offsets", runtime::partition_for_key("g", 3)}}));
  EXPECT_EQ(h.state("tx"), TxnState::kCompleteCommit);
  EXPECT_TRUE(h.coordinator->snapshot("tx")->partitions.empty());
  EXPECT_EQ(h.host->partitions[h.coordinator->partition_for("tx")].size(), records + 2);

  // A retried commit is answered; an abort of a committed transaction is not.
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, true), 0);
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, false), code(Error::kInvalidTxnState));
  // The next transaction of the same producer.
  EXPECT_EQ(h.add("tx", p.producer_id, p.producer_epoch, "t", {3}), (std::vector<int16_t>{0}));
  EXPECT_EQ(h.coordinator->snapshot("tx")->partitions, (std::set<TopicPartition>{{"t", 3}}));
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, false), 0);
  h.world.run_for(1s);
  ASSERT_EQ(h.host->written_markers.size(), 2u);
  EXPECT_FALSE(h.host->written_markers[1].commit);
  EXPECT_EQ(h.state("tx"), TxnState::kCompleteAbort);
}

TEST(TransactionCoordinator, ANewProducerFencesTheOldOneAndAbortsItsTransaction) {
  Harness h;
  net::InitProducerIdResponse old = h.init("tx");
  EXPECT_EQ(h.add("tx", old.producer_id, old.producer_epoch, "t", {0}), (std::vector<int16_t>{0}));
  // The new producer is told to retry while the open transaction is aborted.
  EXPECT_EQ(h.init("tx").error_code, code(Error::kConcurrentTransactions));
  h.world.run_for(1s);
  ASSERT_EQ(h.host->written_markers.size(), 1u);
  EXPECT_FALSE(h.host->written_markers[0].commit);
  EXPECT_EQ(h.host->written_markers[0].producer_epoch, old.producer_epoch + 1) << "the abort fences the old epoch";
  net::InitProducerIdResponse now = h.init("tx");
  ASSERT_EQ(now.error_code, 0);
  EXPECT_EQ(now.producer_id, old.producer_id);
  EXPECT_EQ(now.producer_epoch, old.producer_epoch + 2);
  EXPECT_EQ(h.end("tx", old.producer_id, old.producer_epoch, true), code(Error::kProducerFenced));
  EXPECT_EQ(h.end("tx", old.producer_id, old.producer_epoch, true, 1), code(Error::kInvalidProducerEpoch))
      << "EndTxn v1 predates PRODUCER_FENCED";
  EXPECT_EQ(h.add("tx", old.producer_id, old.producer_epoch, "t", {0}),
            (std::vector<int16_t>{code(Error::kProducerFenced)}));
}

TEST(TransactionCoordinator, AbortsATransactionOpenPastItsTimeout) {
  Harness h;
  net::InitProducerIdResponse p = h.init("tx", 3000);
  EXPECT_EQ(h.add("tx", p.producer_id, p.producer_epoch, "t", {0, 1}), (std::vector<int16_t>{0, 0}));
  h.world.run_for(2s);
  EXPECT_EQ(h.state("tx"), TxnState::kOngoing);
  h.world.run_for(3s);
  EXPECT_EQ(h.state("tx"), TxnState::kCompleteAbort);
  ASSERT_EQ(h.host->written_markers.size(), 1u);
  EXPECT_FALSE(h.host->written_markers[0].commit);
  EXPECT_EQ(h.host->written_markers[0].partitions.size(), 2u);
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, true), code(Error::kProducerFenced));
  // The fenced producer re-initializes (KIP-360: it names its old epoch).
  net::InitProducerIdResponse again = h.init("tx", 3000, p.producer_id, p.producer_epoch);
  EXPECT_EQ(again.error_code, code(Error::kProducerFenced)) << "its epoch is no longer current";
  net::InitProducerIdResponse fresh = h.init("tx", 3000);
  EXPECT_EQ(fresh.error_code, 0);
  EXPECT_EQ(fresh.producer_epoch, p.producer_epoch + 2);
}

TEST(TransactionCoordinator, AWallClockStepBackDoesNotKeepATransactionOpen) {
  Harness h;
  net::InitProducerIdResponse p = h.init("tx", 3000);
  EXPECT_EQ(h.add("tx", p.producer_id, p.producer_epoch, "t", {0}), (std::vector<int16_t>{0}));
  // The calendar says the transaction began a minute from now (another
  // broker's clock, or this one stepped back).
  h.node->jump_wall_clock(-60s);
  h.world.run_for(5s);
  EXPECT_EQ(h.state("tx"), TxnState::kCompleteAbort) << "aborted a timeout after it began, by the local clock";
  // And one loaded from the log: a timeout after the load.
  net::InitProducerIdResponse q = h.init("tx2", 3000);
  EXPECT_EQ(h.add("tx2", q.producer_id, q.producer_epoch, "t", {1}), (std::vector<int16_t>{0}));
  h.reload();
  h.node->jump_wall_clock(-60s);
  h.world.run_for(2s);
  EXPECT_EQ(h.state("tx2"), TxnState::kOngoing);
  h.world.run_for(3s);
  EXPECT_EQ(h.state("tx2"), TxnState::kCompleteAbort);
}

TEST(TransactionCoordinator, BumpsTheNamedEpochAndAnswersARetriedBump) {
  Harness h;
  net::InitProducerIdResponse p = h.init("tx");
  net::InitProducerIdResponse bumped = h.init("tx", 60000, p.producer_id, p.producer_epoch);
  ASSERT_EQ(bumped.error_code, 0);
  EXPECT_EQ(bumped.producer_epoch, p.producer_epoch + 1);
  net::InitProducerIdResponse retried = h.init("tx", 60000, p.producer_id, p.producer_epoch);
  ASSERT_EQ(retried.error_code, 0) << "the answer to the bump was lost: the same one again";
  EXPECT_EQ(retried.producer_epoch, bumped.producer_epoch);
  EXPECT_EQ(h.init("tx", 60000, p.producer_id + 7, 0).error_code, code(Error::kProducerFenced));
  EXPECT_EQ(h.init("tx", 60000, p.producer_id + 7, 0, 3).error_code, code(Error::kInvalidProducerEpoch));
}

TEST(TransactionCoordinator, ANewCoordinatorFinishesAPreparedTransaction) {
  Harness h;
  net::InitProducerIdResponse p = h.init("tx");
  EXPECT_EQ(h.add("tx", p.producer_id, p.producer_epoch, "t", {0}), (std::vector<int16_t>{0}));
  h.host->hold_markers = true;
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, true), 0);
  h.world.run_for(1s);
  EXPECT_TRUE(h.host->written_markers.empty());
  // Leadership moves (here: back, in a newer epoch); the state comes from
  // the log and the markers are written again under the new epoch.
  h.reload();
  EXPECT_EQ(h.state("tx"), TxnState::kPrepareCommit);
  h.host->hold_markers = false;
  h.world.run_for(1s);
  ASSERT_EQ(h.host->written_markers.size(), 1u);
  EXPECT_TRUE(h.host->written_markers[0].commit);
  EXPECT_EQ(h.host->written_markers[0].coordinator_epoch, 2);
  EXPECT_EQ(h.state("tx"), TxnState::kCompleteCommit);
  h.reload();
  EXPECT_EQ(h.state("tx"), TxnState::kCompleteCommit);
  EXPECT_EQ(h.coordinator->snapshot("tx")->producer_epoch, p.producer_epoch);
  h.world.run_for(1s);
  EXPECT_EQ(h.host->written_markers.size(), 1u) << "a completed transaction is not marked again";
}

TEST(TransactionCoordinator, AFailedWriteChangesNothing) {
  Harness h;
  net::InitProducerIdResponse p = h.init("tx");
  h.host->fail_writes = 1;
  EXPECT_EQ(h.add("tx", p.producer_id, p.producer_epoch, "t", {0}),
            (std::vector<int16_t>{code(Error::kCoordinatorNotAvailable)}));
  EXPECT_EQ(h.state("tx"), TxnState::kEmpty);
  EXPECT_EQ(h.add("tx", p.producer_id, p.producer_epoch, "t", {0}), (std::vector<int16_t>{0}));
  h.host->fail_writes = 1;
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, true), code(Error::kCoordinatorNotAvailable));
  EXPECT_EQ(h.state("tx"), TxnState::kOngoing);
  EXPECT_TRUE(h.host->written_markers.empty());
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, true), 0);
  h.world.run_for(1s);
  EXPECT_EQ(h.state("tx"), TxnState::kCompleteCommit);
}

// A broker cut off from the controller keeps the state it had after
// another broker took the partition over; its writes reach no replica. A
// retried EndTxn must not be told from that stale state that its
// transaction is complete: the producer would take it for its new
// transaction's commit and go on, while the new coordinator still holds
// that transaction open (found by the transactions-late scenario).
TEST(TransactionCoordinator, AnswersFromMemoryOnlyOnceAWriteConfirmsTheState) {
  Harness h;
  net::InitProducerIdResponse p = h.init("tx");
  EXPECT_EQ(h.add("tx", p.producer_id, p.producer_epoch, "t", {0}), (std::vector<int16_t>{0}));
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, true), 0);
  h.world.run_for(1s);
  EXPECT_EQ(h.state("tx"), TxnState::kCompleteCommit);
  std::vector<MemoryHost::Entry>& log = h.host->partitions[h.coordinator->partition_for("tx")];
  const size_t before = log.size();

  h.host->fail_writes = 1;
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, true), code(Error::kCoordinatorNotAvailable))
      << "a commit found complete is answered only once a write says this is still the coordinator";
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, true), 0);
  EXPECT_EQ(log.size(), before + 1);
  EXPECT_EQ(h.state("tx"), TxnState::kCompleteCommit);

  EXPECT_EQ(h.add("tx", p.producer_id, p.producer_epoch, "t", {1}), (std::vector<int16_t>{0}));
  h.host->fail_writes = 1;
  EXPECT_EQ(h.add("tx", p.producer_id, p.producer_epoch, "t", {1}),
            (std::vector<int16_t>{code(Error::kCoordinatorNotAvailable)}))
      << "a partition the transaction holds is written again too";
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, false), 0);
  h.world.run_for(1s);
  EXPECT_EQ(h.state("tx"), TxnState::kCompleteAbort);
  h.host->fail_writes = 1;
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, false), code(Error::kCoordinatorNotAvailable));
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, false), 0);
}

TEST(TransactionCoordinator, AWriteThatMayHaveLandedIsTakenButConfirmedBeforeItCounts) {
  Harness h;
  net::InitProducerIdResponse p = h.init("tx");
  const size_t before = h.host->partitions[h.coordinator->partition_for("tx")].size();
  h.host->time_out_writes = 1;
  EXPECT_EQ(h.add("tx", p.producer_id, p.producer_epoch, "t", {0}),
            (std::vector<int16_t>{code(Error::kCoordinatorNotAvailable)}));
  EXPECT_EQ(h.state("tx"), TxnState::kOngoing) << "the record is in the log: the state follows it";
  // The retry is written again (it is not answered from the unconfirmed state).
  EXPECT_EQ(h.add("tx", p.producer_id, p.producer_epoch, "t", {0}), (std::vector<int16_t>{0}));
  EXPECT_EQ(h.host->partitions[h.coordinator->partition_for("tx")].size(), before + 2);

  // A commit whose Prepare record timed out: the client is told to retry,
  // but the decision may be in the log, so the coordinator carries it out,
  // after writing it once more.
  h.host->time_out_writes = 1;
  h.host->fail_writes = 3;
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, true), code(Error::kCoordinatorNotAvailable));
  EXPECT_EQ(h.state("tx"), TxnState::kPrepareCommit);
  EXPECT_EQ(h.init("tx").error_code, code(Error::kConcurrentTransactions))
      << "a new producer may not abort a transaction whose commit may be decided";
  h.world.run_for(100ms);
  EXPECT_TRUE(h.host->written_markers.empty()) << "no marker before the decision is confirmed";
  h.world.run_for(2s);
  ASSERT_EQ(h.host->written_markers.size(), 1u);
  EXPECT_TRUE(h.host->written_markers[0].commit);
  EXPECT_EQ(h.state("tx"), TxnState::kCompleteCommit);
  EXPECT_EQ(h.end("tx", p.producer_id, p.producer_epoch, true), 0) << "the retried commit is answered";
}

TEST(TransactionCoordinator, VerifiesOnlyPartitionsOfAnOngoingTransaction) {
  Harness h;
  net::InitProducerIdResponse p = h.init("tx");
  const int64_t pid = p.producer_id;
  const int16_t epoch = p.producer_epoch;
  EXPECT_EQ(h.verify("tx", pid, epoch, "t", {0}), (std::vector<int16_t>{code(Error::kInvalidTxnState)}))
      << "no transaction yet";
  EXPECT_EQ(h.add("tx", pid, epoch, "t", {0, 1}), (std::vector<int16_t>{0, 0}));
  const size_t records = h.host->partitions[h.coordinator->partition_for("tx")].size();
  EXPECT_EQ(h.verify("tx", pid, epoch, "t", {0, 1, 2}),
            (std::vector<int16_t>{0, 0, code(Error::kInvalidTxnState)}));
  EXPECT_EQ(h.host->partitions[h.coordinator->partition_for("tx")].size(), records) << "a check writes nothing";
  EXPECT_EQ(h.coordinator->snapshot("tx")->partitions, (std::set<TopicPartition>{{"t", 0}, {"t", 1}}))
      << "nor adds anything";
  EXPECT_EQ(h.verify("tx", pid, static_cast<int16_t>(epoch + 1), "t", {0}),
            (std::vector<int16_t>{code(Error::kProducerFenced)}));
  EXPECT_EQ(h.verify("tx", pid + 1, epoch, "t", {0}), (std::vector<int16_t>{code(Error::kInvalidProducerIdMapping)}));
  EXPECT_EQ(h.verify("unknown", pid, epoch, "t", {0}),
            (std::vector<int16_t>{code(Error::kInvalidProducerIdMapping)}));

  // While the markers are under way, a check waits; once they are written,
  // the transaction is over and a late batch of it is refused.
  h.host->hold_markers = true;
  EXPECT_EQ(h.end("tx", pid, epoch, false), 0);
  EXPECT_EQ(h.verify("tx", pid, epoch, "t", {0}), (std::vector<int16_t>{code(Error::kConcurrentTransactions)}));
  h.host->hold_markers = false;
  h.world.run_for(1s);
  EXPECT_EQ(h.state("tx"), TxnState::kCompleteAbort);
  EXPECT_EQ(h.verify("tx", pid, epoch, "t", {0}), (std::vector<int16_t>{code(Error::kInvalidTxnState)}));

  // A state loaded from the log is confirmed (written again) before it is
  // vouched for.
  EXPECT_EQ(h.add("tx", pid, epoch, "t", {3}), (std::vector<int16_t>{0}));
  h.reload();
  const size_t loaded = h.host->partitions[h.coordinator->partition_for("tx")].size();
  EXPECT_EQ(h.verify("tx", pid, epoch, "t", {3}), (std::vector<int16_t>{0}));
  EXPECT_EQ(h.host->partitions[h.coordinator->partition_for("tx")].size(), loaded + 1);
  EXPECT_EQ(h.verify("tx", pid, epoch, "t", {3}), (std::vector<int16_t>{0}));
  EXPECT_EQ(h.host->partitions[h.coordinator->partition_for("tx")].size(), loaded + 1);
}

TEST(TransactionCoordinator, RequestsForPartitionsNotServedHereAreRefused) {
  Harness h;
  const int32_t partition = h.coordinator->partition_for("tx");
  h.coordinator->unload(partition);
  EXPECT_EQ(h.init("tx").error_code, code(Error::kNotCoordinator));
  h.coordinator->begin_load(partition, 5);
  EXPECT_EQ(h.init("tx").error_code, code(Error::kCoordinatorLoadInProgress));
  h.coordinator->finish_load(partition, 5);
  EXPECT_EQ(h.init("tx").error_code, 0);
}

TEST(TransactionCoordinator, ForgetsIdsIdlePastTheirExpiration) {
  Harness h([](TransactionCoordinatorConfig& c) {
    c.id_expiration = 1h;
    c.expire_check_interval = 1min;
  });
  net::InitProducerIdResponse p = h.init("tx");
  net::InitProducerIdResponse busy = h.init("busy", 900000);
  EXPECT_EQ(h.add("busy", busy.producer_id, busy.producer_epoch, "t", {0}), (std::vector<int16_t>{0}));
  h.world.run_for(61min);
  EXPECT_FALSE(h.coordinator->snapshot("tx").has_value());
  EXPECT_TRUE(h.coordinator->snapshot("busy").has_value()) << "an open transaction keeps its id";
  h.reload();
  EXPECT_FALSE(h.coordinator->snapshot("tx").has_value()) << "the tombstone is in the log";
  net::InitProducerIdResponse again = h.init("tx");
  EXPECT_NE(again.producer_id, p.producer_id);
  EXPECT_EQ(again.producer_epoch, 0);
}

TEST(TransactionCoordinator, DescribesAndListsTransactions) {
  Harness h;
  net::InitProducerIdResponse a = h.init("a");
  net::InitProducerIdResponse b = h.init("b");
  EXPECT_EQ(h.add("a", a.producer_id, a.producer_epoch, "t", {1, 0}), (std::vector<int16_t>{0, 0}));
  net::DescribeTransactionsRequest d;
  d.transactional_ids = {"a", "b", "nobody"};
  net::DescribeTransactionsResponse described = h.coordinator->describe(d);
  ASSERT_EQ(described.transaction_states.size(), 3u);
  EXPECT_EQ(described.transaction_states[0].transaction_state, "Ongoing");
  ASSERT_EQ(described.transaction_states[0].topics.size(), 1u);
  EXPECT_EQ(described.transaction_states[0].topics[0].partitions, (std::vector<int32_t>{0, 1}));
  EXPECT_GE(described.transaction_states[0].transaction_start_time_ms, 0);
  EXPECT_EQ(described.transaction_states[1].transaction_state, "Empty");
  EXPECT_EQ(described.transaction_states[1].producer_id, b.producer_id);
  EXPECT_EQ(described.transaction_states[2].error_code, code(Error::kTransactionalIdNotFound));
  net::ListTransactionsRequest l;
  EXPECT_EQ(h.coordinator->list(l).transaction_states.size(), 2u);
  l.state_filters = {"Ongoing", "Sideways"};
  net::ListTransactionsResponse listed = h.coordinator->list(l);
  ASSERT_EQ(listed.transaction_states.size(), 1u);
  EXPECT_EQ(listed.transaction_states[0].transactional_id, "a");
  EXPECT_EQ(listed.unknown_state_filters, (std::vector<std::string>{"Sideways"}));
}

}  // namespace
}  // namespace brook::txn
