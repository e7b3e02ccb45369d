// sim/long_poll_test.cc
//
// A long-polling fetch (min_bytes not yet there, max_wait_ms ahead) is
// answered as soon as an append gives it enough, in the simulator, even
// when the append lands while the fetch is still reading its other
// partitions: the fetch reads them one after another, each read waiting
// for the disk, and an append to a partition it has already read in that
// pass must not leave it asleep until max_wait_ms.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "io/when.h"
#include "net/kafka/messages/fetch_request.h"
#include "net/kafka/messages/fetch_response.h"
#include "net/kafka/record_batch.h"
#include "net/kafka/rpc.h"
#include "sim/broker.h"
#include "sim/disk.h"
#include "sim/test_cluster.h"
#include "sim/world.h"

namespace brook::sim {
namespace {

using namespace std::chrono_literals;

constexpr int kPartitions = 20;
constexpr int32_t kMaxWaitMs = 5000;
constexpr int32_t kMinBytes = 64 << 10;
constexpr size_t kBigValueBytes = 100 << 10;  // more than kMinBytes alone

struct Fetched {
  bool answered = false;
  io::Instant at{};
  size_t partition0_bytes = 0;
};

// A fetch of every partition of t: partition 0 from `offset0`, the others
// from 0 (one small record each, far less than kMinBytes in all).
io::Task<Fetched> long_poll(io::Context* ctx, io::Address broker, int64_t offset0) {
  net::FetchRequest r;
  r.max_wait_ms = kMaxWaitMs;
  r.min_bytes = kMinBytes;
  r.max_bytes = 50 << 20;
  r.isolation_level = 0;
  auto& t = r.topics.emplace_back();
  t.topic = "t";
  for (int32_t p = 0; p < kPartitions; ++p) {
    auto& fp = t.partitions.emplace_back();
    fp.partition = p;
    fp.fetch_offset = p == 0 ? offset0 : 0;
    fp.partition_max_bytes = 1 << 20;
  }
  net::Peer peer(ctx->network(), ctx->clock(), std::move(broker), "long-poll");
  absl::StatusOr<net::FetchResponse> answer = co_await peer.call<net::FetchResponse>(r, 11, 30s);
  Fetched out;
  out.at = ctx->clock().now();
  if (!answer.ok() || answer->responses.size() != 1) co_return out;
  out.answered = true;
  for (const auto& pd : answer->responses.front().partitions) {
    if (pd.partition_index == 0 && pd.records.has_value()) out.partition0_bytes = pd.records->size();
  }
  co_return out;
}

struct Produced {
  std::optional<int64_t> base_offset;
  io::Instant at{};
};

// After `delay`, one record of kBigValueBytes to partition 0.
io::Task<Produced> produce_after(io::Context* ctx, io::Address broker, io::Duration delay) {
  co_await ctx->clock().sleep_for(delay);
  std::optional<net::ProduceResponse::PartitionProduceResponse> out = co_await produce_one(
      ctx, std::move(broker), "t", 0, net::RecordBatchOptions{}, std::string(kBigValueBytes, 'x'), std::nullopt);
  Produced produced;
  produced.at = ctx->clock().now();
  if (out.has_value() && out->error_code == 0) produced.base_offset = out->base_offset;
  co_return produced;
}

int64_t ms(io::Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

struct Round {
  io::Duration delay{0};
  bool fetch_answered = false;
  bool produced = false;
  size_t partition0_bytes = 0;
  io::Duration answer_after_append{0};  // fetch answer minus produce answer
};

TEST(LongPoll, AnAppendDuringTheFetchsReadsWakesIt) {
  TestCluster cluster(7, 1, [](ServerNodeOptions&) {});
  // Every disk operation of the broker takes 1-2 ms, so a fetch's pass over
  // its partitions takes 20-40 ms.
  DiskFaults slow;
  slow.latency_min = 1ms;
  slow.latency_max = 2ms;
  cluster.world.set_disk_faults(0, slow);
  bool done = false;
  bool setup_ok = false;
  std::vector<Round> rounds;
  cluster.client->start([&](io::Context& ctx) -> io::Task<void> {
    co_await ctx.clock().sleep_for(3s);
    client::Cluster admin(ctx, sim_client_options(cluster.brokers, "admin"));
    co_await create_topic_until_done(&ctx, &admin, "t", kPartitions, 1);
    for (int32_t p = 1; p < kPartitions; ++p) {
      std::optional<net::ProduceResponse::PartitionProduceResponse> out =
          co_await produce_one(&ctx, cluster.broker(1), "t", p, net::RecordBatchOptions{}, "small", std::nullopt);
      if (!out.has_value() || out->error_code != 0) {
        done = true;
        co_return;
      }
    }
    setup_ok = true;
    // The append lands at a different point of the fetch's pass each round
    // (the pass starts a network hop after the fetch is sent).
    int64_t offset0 = 0;
    for (io::Duration delay = 0ms; delay <= 60ms; delay += 3ms) {
      std::tuple<Fetched, Produced> both = co_await io::when_all(long_poll(&ctx, cluster.broker(1), offset0),
                                                                  produce_after(&ctx, cluster.broker(1), delay));
      const Fetched& fetched = std::get<0>(both);
      const Produced& produced = std::get<1>(both);
      Round& round = rounds.emplace_back();
      round.delay = delay;
      round.fetch_answered = fetched.answered;
      round.produced = produced.base_offset.has_value();
      round.partition0_bytes = fetched.partition0_bytes;
      round.answer_after_append = fetched.at - produced.at;
      if (!produced.base_offset.has_value()) break;
      offset0 = *produced.base_offset + 1;
    }
    done = true;
  });
  ASSERT_TRUE(cluster.world.run_until([&] { return done; }, 600s));
  ASSERT_TRUE(setup_ok);
  ASSERT_EQ(rounds.size(), 21u);
  for (const Round& r : rounds) {
    SCOPED_TRACE(testing::Message() << "append sent " << ms(r.delay) << " ms after the fetch");
    ASSERT_TRUE(r.produced);
    ASSERT_TRUE(r.fetch_answered);
    EXPECT_GT(r.partition0_bytes, kBigValueBytes);
    // One more pass over the partitions at most, not max_wait_ms.
    EXPECT_LT(r.answer_after_append, 500ms) << ms(r.answer_after_append) << " ms";
  }
}

}  // namespace
}  // namespace brook::sim
