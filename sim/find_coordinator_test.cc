// sim/find_coordinator_test.cc
//
// FindCoordinator in a three-node cluster in the simulator whose
// __consumer_offsets partitions have one replica each, after one node is
// powered off for good: the partitions it led have no leader (their only
// in-sync replica is gone; unclean election is off). A group whose
// partition is one of them has no coordinator (COORDINATOR_NOT_AVAILABLE,
// which clients retry); every other group's coordinator is named at once,
// in the one-key versions and in a batched v4 request that asks for both.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coordinators/group/group_coordinator.h"
#include "coordinators/runtime/record_log.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/find_coordinator_request.h"
#include "net/kafka/messages/find_coordinator_response.h"
#include "net/kafka/rpc.h"
#include "sim/broker.h"
#include "sim/test_cluster.h"
#include "sim/world.h"

namespace brook::sim {
namespace {

using namespace std::chrono_literals;
using net::Error;

constexpr int kNodes = 3;
constexpr int kOffsetsPartitions = 6;
constexpr int32_t kLost = 3;  // the node id powered off for good
const std::string kOffsets(group::kOffsetsTopic);

// One key's answer.
struct Found {
  bool ok = false;
  Error error = Error::kNone;
  int32_t node_id = -1;
};

// FindCoordinator for group `keys` at `broker`: one key per request below
// v4, all of them in one request from v4.
io::Task<std::map<std::string, Found>> find(io::Context* ctx, io::Address broker, int16_t version,
                                            std::vector<std::string> keys) {
  net::Peer peer(ctx->network(), ctx->clock(), broker, "finder");
  std::map<std::string, Found> out;
  if (version >= 4) {
    net::FindCoordinatorRequest r;
    r.key_type = 0;
    r.coordinator_keys = keys;
    absl::StatusOr<net::FindCoordinatorResponse> answer =
        co_await peer.call<net::FindCoordinatorResponse>(r, version, 20s);
    if (!answer.ok()) co_return out;
    for (const auto& c : answer->coordinators) {
      out[c.key] = Found{true, static_cast<Error>(c.error_code), c.node_id};
    }
    co_return out;
  }
  for (const std::string& key : keys) {
    net::FindCoordinatorRequest r;
    r.key = key;
    absl::StatusOr<net::FindCoordinatorResponse> answer =
        co_await peer.call<net::FindCoordinatorResponse>(r, version, 20s);
    if (answer.ok()) out[key] = Found{true, static_cast<Error>(answer->error_code), answer->node_id};
  }
  co_return out;
}

struct Outcome {
  bool done = false;
  std::string live_key;  // a group whose partition a node left leads
  std::string dead_key;  // a group whose partition node kLost led
  int32_t live_leader = -1;
  // By version: the answers, and how long (world time) they took.
  std::map<int16_t, std::map<std::string, Found>> answers;
  std::map<int16_t, io::Duration> took;
};

class FindCoordinatorLoss : public ::testing::Test {
 protected:
  FindCoordinatorLoss()
      : cluster_(41, kNodes, [](ServerNodeOptions& o) {
          o.offsets_partitions = kOffsetsPartitions;
          o.offsets_replication_factor = 1;
        }) {}

  // Creates __consumer_offsets (a first FindCoordinator), waits until every
  // partition has a leader, and picks a group on a partition node kLost
  // leads and one on a partition another node leads.
  io::Task<bool> pick_keys(io::Context* ctx) {
    co_await ctx->clock().sleep_for(3s);
    const std::vector<std::string> first{"first"};
    for (int attempt = 0; attempt < 60; ++attempt) {
      (void)co_await find(ctx, cluster_.broker(1), 3, first);
      const std::vector<int32_t> leaders = co_await partition_leaders(ctx, cluster_.broker(1), kOffsets);
      const bool all_led = leaders.size() == kOffsetsPartitions &&
                           std::none_of(leaders.begin(), leaders.end(), [](int32_t l) { return l < 0; });
      if (all_led) {
        for (int i = 0; i < 1000 && (out_.live_key.empty() || out_.dead_key.empty()); ++i) {
          const std::string key = "group-" + std::to_string(i);
          const int32_t leader =
              leaders[static_cast<size_t>(runtime::partition_for_key(key, kOffsetsPartitions))];
          if (leader == kLost && out_.dead_key.empty()) out_.dead_key = key;
          if (leader != kLost && out_.live_key.empty()) {
            out_.live_key = key;
            out_.live_leader = leader;
          }
        }
        co_return !out_.live_key.empty() && !out_.dead_key.empty();
      }
      co_await ctx->clock().sleep_for(500ms);
    }
    co_return false;
  }

  // Powers node kLost off and waits until node 1's metadata has its
  // partitions without a leader.
  io::Task<bool> lose_node(io::Context* ctx) {
    cluster_.server(kLost).crash();
    const int32_t dead_partition = runtime::partition_for_key(out_.dead_key, kOffsetsPartitions);
    for (int attempt = 0; attempt < 120; ++attempt) {
      co_await ctx->clock().sleep_for(500ms);
      const std::vector<int32_t> leaders = co_await partition_leaders(ctx, cluster_.broker(1), kOffsets);
      if (leaders.size() == kOffsetsPartitions && leaders[static_cast<size_t>(dead_partition)] < 0) co_return true;
    }
    co_return false;
  }

  TestCluster cluster_;
  Outcome out_;
};

TEST_F(FindCoordinatorLoss, OnlyTheGroupsOnALeaderlessPartitionHaveNoCoordinator) {
  cluster_.client->start([this](io::Context& ctx) -> io::Task<void> {
    if (co_await pick_keys(&ctx) && co_await lose_node(&ctx)) {
      const std::vector<std::string> keys{out_.live_key, out_.dead_key};
      for (int16_t version : {int16_t{0}, int16_t{3}, int16_t{4}}) {
        const io::Instant start = ctx.clock().now();
        out_.answers[version] = co_await find(&ctx, cluster_.broker(1), version, keys);
        out_.took[version] = ctx.clock().now() - start;
      }
    }
    out_.done = true;
  });
  ASSERT_TRUE(cluster_.world.run_until([&] { return out_.done; }, 300s));
  ASSERT_FALSE(out_.live_key.empty());
  ASSERT_FALSE(out_.dead_key.empty());
  ASSERT_EQ(out_.answers.size(), 3u) << "node " << kLost << "'s partitions never lost their leader";
  for (const auto& [version, answers] : out_.answers) {
    SCOPED_TRACE(testing::Message() << "v" << version);
    ASSERT_EQ(answers.size(), 2u);
    const Found& live = answers.at(out_.live_key);
    EXPECT_TRUE(live.ok);
    EXPECT_EQ(net::code(live.error), 0);
    EXPECT_EQ(live.node_id, out_.live_leader);
    const Found& dead = answers.at(out_.dead_key);
    EXPECT_TRUE(dead.ok);
    EXPECT_EQ(net::code(dead.error), net::code(Error::kCoordinatorNotAvailable));
    // Answered from the metadata at hand, not after a wait for every
    // partition of the topic to have a leader.
    EXPECT_LT(out_.took[version], 1s);
  }
}

}  // namespace
}  // namespace brook::sim
