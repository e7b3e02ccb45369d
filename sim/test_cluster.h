// sim/test_cluster.h
//
// TestCluster: a World for tests of brokers in the simulator, with `nodes`
// broker+controller nodes (node index i has node id i + 1, its client
// listener on port 9092 and its controller listener on 9093) and one more
// node for the test's clients. Debug log lines are formatted and dropped,
// so a line that reads freed memory shows under ASan. Test-only
// (header-only, on brook_sim).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "net/kafka/messages/metadata_request.h"
#include "net/kafka/messages/metadata_response.h"
#include "net/kafka/rpc.h"
#include "sim/broker.h"
#include "sim/world.h"

namespace brook::sim {

struct TestCluster {
  // `configure` adjusts each node's options after the defaults (its index,
  // every listener, replication factor `nodes`).
  TestCluster(uint64_t seed, int nodes, std::function<void(ServerNodeOptions&)> configure)
      : world(seed, options()) {
    for (int i = 0; i < nodes; ++i) {
      servers.push_back(&world.add_node());
      brokers.push_back(servers.back()->address(9092));
      controllers.push_back(servers.back()->address(9093));
    }
    client = &world.add_node();
    for (int i = 0; i < nodes; ++i) {
      servers[static_cast<size_t>(i)]->start([this, i, nodes, configure](io::Context& ctx) {
        ServerNodeOptions o;
        o.index = i;
        o.brokers = brokers;
        o.controllers = controllers;
        o.replication_factor = nodes;
        configure(o);
        return server_node_main(&ctx, o);
      });
    }
  }
  TestCluster(const TestCluster&) = delete;
  TestCluster& operator=(const TestCluster&) = delete;

  static WorldOptions options() {
    WorldOptions o;
    o.log_sink = &io::null_log_sink();
    o.log_level = io::LogLevel::kDebug;
    return o;
  }

  Node& server(int32_t node_id) { return *servers[static_cast<size_t>(node_id - 1)]; }
  const io::Address& broker(int32_t node_id) const { return brokers[static_cast<size_t>(node_id - 1)]; }
  // Nodes `a` and `b` (ids) can no longer reach each other; the client
  // node reaches both.
  void cut(int32_t a, int32_t b) {
    world.network().partition({server(a).index()}, {server(b).index()}, PartitionMode::kSymmetric);
  }

  World world;
  std::vector<Node*> servers;
  Node* client = nullptr;
  std::vector<io::Address> brokers;
  std::vector<io::Address> controllers;
};

// Each partition's leader of `topic` (by index) in `broker`'s metadata;
// empty when it could not be asked.
inline io::Task<std::vector<int32_t>> partition_leaders(io::Context* ctx, io::Address broker, std::string topic) {
  net::Peer peer(ctx->network(), ctx->clock(), broker, "metadata-probe");
  net::MetadataRequest r;
  r.topics->emplace_back().name = std::move(topic);
  absl::StatusOr<net::MetadataResponse> out = co_await peer.call<net::MetadataResponse>(r, 9, std::chrono::seconds(2));
  std::vector<int32_t> leaders;
  if (!out.ok() || out->topics.size() != 1 || out->topics.front().error_code != 0) co_return leaders;
  leaders.resize(out->topics.front().partitions.size(), -1);
  for (const auto& p : out->topics.front().partitions) {
    if (p.partition_index >= 0 && static_cast<size_t>(p.partition_index) < leaders.size()) {
      leaders[static_cast<size_t>(p.partition_index)] = p.leader_id;
    }
  }
  co_return leaders;
}

// Crashes `victim` after 100 ms, then `look_after` later returns `topic`'s
// partition leaders as `observer` has them: for a test that checks what a
// call under way all that time saw happen meanwhile.
inline io::Task<std::vector<int32_t>> crash_then_leaders(io::Context* ctx, Node* victim, io::Duration look_after,
                                                         io::Address observer, std::string topic) {
  co_await ctx->clock().sleep_for(std::chrono::milliseconds(100));
  victim->crash();
  co_await ctx->clock().sleep_for(look_after);
  co_return co_await partition_leaders(ctx, std::move(observer), std::move(topic));
}

}  // namespace brook::sim
