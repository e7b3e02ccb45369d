// sim/coordinator_writes_test.cc
//
// The broker's coordinator writes in the simulator: offset commits that
// arrive while an append to their __consumer_offsets partition is under
// way are appended together in one record batch, and every one of them is
// still acknowledged only once committed, with its own offsets intact.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/broker/broker.h"
#include "io/when.h"
#include "net/client/group.h"
#include "sim/broker.h"
#include "sim/world.h"

namespace brook::sim {
namespace {

using namespace std::chrono_literals;

constexpr int kWriters = 20;
constexpr int kCommitsEach = 10;

struct Outcome {
  bool done = false;
  int acknowledged = 0;
  std::map<client::TopicPartition, int64_t> committed;
};

// One admin-style committer (never joins: simple commits to a group with
// no members) per partition, all at once.
io::Task<void> commit_loop(client::GroupMember* m, int32_t partition, int* acknowledged) {
  for (int64_t i = 1; i <= kCommitsEach; ++i) {
    std::map<client::TopicPartition, int64_t> one{{client::TopicPartition("t", partition), i * 100 + partition}};
    if ((co_await m->commit(one)).ok()) ++*acknowledged;
  }
}

io::Task<void> client_main(io::Context* ctx, std::vector<io::Address> brokers, Outcome* out) {
  co_await ctx->clock().sleep_for(2s);  // the node formats and elects itself
  client::Cluster admin(*ctx, sim_client_options(brokers, "admin"));
  co_await create_topic_until_done(ctx, &admin, "t", kWriters, 1);
  std::vector<std::unique_ptr<client::Cluster>> clusters;
  std::vector<std::unique_ptr<client::GroupMember>> members;
  client::GroupOptions g;
  g.group_id = "batched";
  for (int i = 0; i < kWriters; ++i) {
    clusters.push_back(std::make_unique<client::Cluster>(*ctx, sim_client_options(brokers, "c")));
    members.push_back(std::make_unique<client::GroupMember>(*clusters.back(), g));
  }
  // Find the coordinator first, so that the commits start together.
  (void)co_await members.front()->committed_all();
  std::vector<io::Task<void>> loops;
  for (int i = 0; i < kWriters; ++i) loops.push_back(commit_loop(members[static_cast<size_t>(i)].get(), i, &out->acknowledged));
  co_await io::when_all(std::move(loops));
  absl::StatusOr<std::map<client::TopicPartition, int64_t>> all = co_await members.front()->committed_all();
  if (all.ok()) out->committed = *all;
  out->done = true;
}

TEST(CoordinatorWrites, QueuedCommitsShareBatchesAndAllLand) {
  World world(11);
  // A disk whose writes take time, as real ones do: commits arriving
  // meanwhile queue up.
  NodeOptions disk;
  disk.disk_faults.latency_min = 20us;
  disk.disk_faults.latency_max = 200us;
  Node& server = world.add_node(disk);
  Node& client = world.add_node();
  const std::vector<io::Address> brokers{server.address(9092)};
  broker::Broker* running = nullptr;
  server.start([&](io::Context& ctx) {
    ServerNodeOptions o;
    o.brokers = brokers;
    o.controllers = {server.address(9093)};
    o.offsets_partitions = 1;
    o.on_broker = [&](broker::Broker* b) {
      if (b != nullptr) running = b;
    };
    return server_node_main(&ctx, o);
  });
  Outcome out;
  client.start([&](io::Context& ctx) { return client_main(&ctx, brokers, &out); });
  ASSERT_TRUE(world.run_until([&] { return out.done; }, 120s));
  ASSERT_NE(running, nullptr);
  EXPECT_EQ(out.acknowledged, kWriters * kCommitsEach);
  ASSERT_EQ(out.committed.size(), static_cast<size_t>(kWriters));
  for (const auto& [tp, offset] : out.committed) EXPECT_EQ(offset, kCommitsEach * 100 + tp.partition) << tp.partition;
  const broker::Broker::CoordinatorWriteStats stats = running->coordinator_write_stats();
  EXPECT_GE(stats.writes, static_cast<uint64_t>(kWriters * kCommitsEach));
  // Twenty committers at once: most appends carry several commits.
  EXPECT_LT(stats.batches * 2, stats.writes) << stats.batches << " batches for " << stats.writes << " writes";
}

}  // namespace
}  // namespace brook::sim
