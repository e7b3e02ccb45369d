// sim/test_cluster.h
//
// TestCluster: a World for tests of brokers in the simulator, with `nodes`
// broker+controller nodes (node index i has node id i + 1, its client
// listener on port 9092 and its controller listener on 9093) and one more
// node for the test's clients. Debug log lines are formatted and dropped,
// so a line that reads freed memory shows under ASan. Test-only
// (header-only, on brook_sim).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "net/kafka/messages/metadata_request.h"
#include "net/kafka/messages/metadata_response.h"
#include "net/kafka/messages/produce_request.h"
#include "net/kafka/messages/produce_response.h"
#include "net/kafka/record_batch.h"
#include "net/kafka/rpc.h"
#include "sim/broker.h"
#include "sim/world.h"

namespace brook::sim {

struct TestCluster {
  // `configure` adjusts each node's options after the defaults (its index,
  // every listener, replication factor `nodes`).
  TestCluster(uint64_t seed, int nodes, std::function<void(ServerNodeOptions&)> configure,
              io::LogSink* log_sink = nullptr)
      : world(seed, options(log_sink)) {
    for (int i = 0; i < nodes; ++i) {
      servers.push_back(&world.add_node());
      brokers.push_back(servers.back()->address(kServerBrokerPort));
      controllers.push_back(servers.back()->address(kServerControllerPort));
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

  // Log lines go to `log_sink` when given.
  static WorldOptions options(io::LogSink* log_sink) {
    WorldOptions o;
    o.log_sink = log_sink != nullptr ? log_sink : &io::null_log_sink();
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

// A partition as one broker's metadata has it.
struct PartitionState {
  int32_t leader = -1;
  std::vector<int32_t> replicas;
  std::vector<int32_t> isr;  // sorted
};

// Each partition of `topic` (by index) in `broker`'s metadata; empty when
// it could not be asked.
inline io::Task<std::vector<PartitionState>> partition_states(io::Context* ctx, io::Address broker,
                                                              std::string topic) {
  net::Peer peer(ctx->network(), ctx->clock(), broker, "metadata-probe");
  net::MetadataRequest r;
  r.topics->emplace_back().name = std::move(topic);
  absl::StatusOr<net::MetadataResponse> out = co_await peer.call<net::MetadataResponse>(r, 9, std::chrono::seconds(2));
  std::vector<PartitionState> states;
  if (!out.ok() || out->topics.size() != 1 || out->topics.front().error_code != 0) co_return states;
  states.resize(out->topics.front().partitions.size());
  for (const auto& p : out->topics.front().partitions) {
    if (p.partition_index < 0 || static_cast<size_t>(p.partition_index) >= states.size()) continue;
    PartitionState& s = states[static_cast<size_t>(p.partition_index)];
    s.leader = p.leader_id;
    s.replicas = p.replica_nodes;
    s.isr = p.isr_nodes;
    std::sort(s.isr.begin(), s.isr.end());
  }
  co_return states;
}

// Each partition's leader of `topic` (by index) in `broker`'s metadata;
// empty when it could not be asked.
inline io::Task<std::vector<int32_t>> partition_leaders(io::Context* ctx, io::Address broker, std::string topic) {
  const std::vector<PartitionState> states = co_await partition_states(ctx, std::move(broker), std::move(topic));
  std::vector<int32_t> leaders;
  for (const PartitionState& s : states) leaders.push_back(s.leader);
  co_return leaders;
}

// One batch of one record (`value`, and `key` when given) with `batch`'s
// producer fields, to `partition` of `topic` at `broker`, acks=all within
// `timeout`; the partition's answer, or none when the call failed.
inline io::Task<std::optional<net::ProduceResponse::PartitionProduceResponse>> produce_one(
    io::Context* ctx, io::Address broker, std::string topic, int32_t partition, net::RecordBatchOptions batch,
    std::string value, std::optional<std::string> transactional_id,
    std::chrono::milliseconds timeout = std::chrono::seconds(30), std::optional<std::string> key = std::nullopt) {
  net::RecordBatchBuilder builder(batch);
  net::NewRecord record;
  record.timestamp_ms = 1;
  if (key.has_value()) record.key = io::Buffer::copy_of(*key);
  record.value = io::Buffer::copy_of(value);
  builder.append(std::move(record));
  absl::StatusOr<io::Buffer> bytes = builder.build();
  if (!bytes.ok()) co_return std::nullopt;
  const net::ProduceRequest r =
      one_batch_produce(std::move(transactional_id), std::move(topic), partition, *std::move(bytes),
                        static_cast<int32_t>(timeout.count()));
  net::Peer peer(ctx->network(), ctx->clock(), broker, "producer");
  absl::StatusOr<net::ProduceResponse> out =
      co_await peer.call<net::ProduceResponse>(r, 9, timeout + std::chrono::seconds(10));
  if (!out.ok() || out->responses.size() != 1 || out->responses.front().partition_responses.size() != 1) {
    co_return std::nullopt;
  }
  co_return out->responses.front().partition_responses.front();
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
