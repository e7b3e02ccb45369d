// sim/txn_verify_test.cc
//
// KIP-890 verification while the transaction coordinator moves, in a
// three-node cluster in the simulator: a partition leader cut off from the
// coordinator waits for its verification of a transaction's first write
// while the coordinator crashes and the controller moves its partitions,
// which replaces the leader's metadata image under the call. The leader
// must answer NOT_ENOUGH_REPLICAS, which producers retry, without reading
// the replaced image (its debug lines are formatted, so ASan sees a read of
// freed memory).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "io/when.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/add_partitions_to_txn_request.h"
#include "net/kafka/messages/add_partitions_to_txn_response.h"
#include "net/kafka/messages/find_coordinator_request.h"
#include "net/kafka/messages/find_coordinator_response.h"
#include "net/kafka/messages/init_producer_id_request.h"
#include "net/kafka/messages/init_producer_id_response.h"
#include "net/kafka/rpc.h"
#include "sim/broker.h"
#include "sim/test_cluster.h"
#include "sim/world.h"

namespace brook::sim {
namespace {

using namespace std::chrono_literals;
using net::Error;

constexpr int kNodes = 3;
constexpr int kTxnPartitions = 3;
const std::string kTxnId = "moving-txn";

struct Outcome {
  bool done = false;
  int32_t coordinator = -1;  // node id
  int32_t leader = -1;       // node id of the written partition's leader
  std::optional<int16_t> produce_error;
  io::Duration produce_took{0};
  // __transaction_state's leaders as the cut-off leader saw them while its
  // verification was under way.
  std::vector<int32_t> txn_leaders_meanwhile;
};

class TxnVerifyMoves : public ::testing::Test {
 protected:
  TxnVerifyMoves()
      : cluster_(31, kNodes, [](ServerNodeOptions& o) {
          o.txn_partitions = kTxnPartitions;
          o.txn_replication_factor = kNodes;
          o.txn_min_isr = 2;
        }) {}

  // The coordinator of kTxnId, asked of every broker until one answers.
  io::Task<int32_t> find_coordinator(io::Context* ctx) {
    for (;;) {
      for (const io::Address& b : brokers_) {
        net::Peer peer(ctx->network(), ctx->clock(), b, "probe");
        net::FindCoordinatorRequest r;
        r.key = kTxnId;
        r.key_type = 1;
        absl::StatusOr<net::FindCoordinatorResponse> out = co_await peer.call<net::FindCoordinatorResponse>(r, 3, 2s);
        if (out.ok() && out->error_code == 0) co_return out->node_id;
      }
      co_await ctx->clock().sleep_for(200ms);
    }
  }

  // The producer's first write to `partition` of t, to the partition's
  // leader: a transactional batch of one record.
  io::Task<std::optional<int16_t>> produce(io::Context* ctx, int32_t partition, int64_t producer_id,
                                           int16_t epoch) {
    net::RecordBatchOptions o;
    o.producer_id = producer_id;
    o.producer_epoch = epoch;
    o.base_sequence = 0;
    o.transactional = true;
    std::optional<net::ProduceResponse::PartitionProduceResponse> out =
        co_await produce_one(ctx, cluster_.broker(out_.leader), "t", partition, o, "v", kTxnId);
    if (!out.has_value()) co_return std::nullopt;
    co_return out->error_code;
  }

  TestCluster cluster_;
  const std::vector<io::Address>& brokers_ = cluster_.brokers;
  Outcome out_;
};

TEST_F(TxnVerifyMoves, TheCoordinatorMovesWhileALeaderVerifies) {
  cluster_.client->start([this](io::Context& ctx) -> io::Task<void> {
    co_await ctx.clock().sleep_for(3s);
    client::Cluster admin(ctx, sim_client_options(brokers_, "admin"));
    co_await create_topic_until_done(&ctx, &admin, "t", kNodes, kNodes);
    out_.coordinator = co_await find_coordinator(&ctx);
    net::Peer coordinator(ctx.network(), ctx.clock(), cluster_.broker(out_.coordinator), "producer");
    // The producer's id, then the partition of t it writes: one led by
    // another broker.
    int64_t producer_id = -1;
    int16_t epoch = -1;
    while (producer_id < 0) {
      net::InitProducerIdRequest r;
      r.transactional_id = kTxnId;
      r.transaction_timeout_ms = 60000;
      absl::StatusOr<net::InitProducerIdResponse> out = co_await coordinator.call<net::InitProducerIdResponse>(r, 4, 5s);
      if (out.ok() && out->error_code == 0) {
        producer_id = out->producer_id;
        epoch = out->producer_epoch;
      } else {
        co_await ctx.clock().sleep_for(200ms);
      }
    }
    int32_t partition = -1;
    const std::vector<int32_t> t_leaders = co_await partition_leaders(&ctx, brokers_.front(), "t");
    for (size_t i = 0; i < t_leaders.size() && partition < 0; ++i) {
      if (t_leaders[i] >= 0 && t_leaders[i] != out_.coordinator) {
        partition = static_cast<int32_t>(i);
        out_.leader = t_leaders[i];
      }
    }
    if (partition < 0) {
      out_.done = true;
      co_return;
    }
    for (bool added = false; !added;) {
      net::AddPartitionsToTxnRequest r;
      r.v3_and_below_transactional_id = kTxnId;
      r.v3_and_below_producer_id = producer_id;
      r.v3_and_below_producer_epoch = epoch;
      auto& t = r.v3_and_below_topics.emplace_back();
      t.name = "t";
      t.partitions.push_back(partition);
      absl::StatusOr<net::AddPartitionsToTxnResponse> out =
          co_await coordinator.call<net::AddPartitionsToTxnResponse>(r, 3, 5s);
      added = out.ok() && out->error_code == 0 && out->results_by_topic_v3_and_below.size() == 1 &&
              out->results_by_topic_v3_and_below.front().results_by_partition.size() == 1 &&
              out->results_by_topic_v3_and_below.front().results_by_partition.front().partition_error_code == 0;
      if (!added) co_await ctx.clock().sleep_for(200ms);
    }
    // The leader can no longer reach the coordinator, which then crashes.
    cluster_.cut(out_.leader, out_.coordinator);
    const io::Instant start = ctx.clock().now();
    std::tuple<std::optional<int16_t>, std::vector<int32_t>> both =
        co_await io::when_all(produce(&ctx, partition, producer_id, epoch),
                              crash_then_leaders(&ctx, &cluster_.server(out_.coordinator), 8900ms,
                                                 cluster_.broker(out_.leader), "__transaction_state"));
    out_.produce_error = std::get<0>(both);
    out_.txn_leaders_meanwhile = std::get<1>(both);
    out_.produce_took = ctx.clock().now() - start;
    out_.done = true;
  });
  ASSERT_TRUE(cluster_.world.run_until([&] { return out_.done; }, 300s));
  ASSERT_GT(out_.coordinator, 0);
  ASSERT_GT(out_.leader, 0) << "every partition of t is led by the coordinator";
  // __transaction_state moved off the crashed coordinator before the
  // verification gave up.
  ASSERT_EQ(out_.txn_leaders_meanwhile.size(), static_cast<size_t>(kTxnPartitions));
  for (int32_t leader : out_.txn_leaders_meanwhile) EXPECT_NE(leader, out_.coordinator);
  EXPECT_GE(out_.produce_took, 9s);
  EXPECT_EQ(out_.produce_error, net::code(Error::kNotEnoughReplicas));
}

}  // namespace
}  // namespace brook::sim
