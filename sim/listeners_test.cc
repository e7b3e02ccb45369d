// sim/listeners_test.cc
//
// Brokers with two client listeners (PLAINTEXT, the inter-broker one, and
// EXTERNAL): a client is told of every broker's address on the listener
// its request came in on (Metadata, FindCoordinator, DescribeCluster), and
// a producer that bootstraps from the second listener writes with
// acks=all through it while the replicas fetch from each other on the
// first.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "net/client/cluster.h"
#include "net/client/producer.h"
#include "net/kafka/messages/describe_cluster_request.h"
#include "net/kafka/messages/describe_cluster_response.h"
#include "net/kafka/messages/find_coordinator_request.h"
#include "net/kafka/messages/find_coordinator_response.h"
#include "net/kafka/messages/metadata_request.h"
#include "net/kafka/messages/metadata_response.h"
#include "net/kafka/rpc.h"
#include "sim/broker.h"
#include "sim/test_cluster.h"
#include "sim/world.h"

namespace brook::sim {
namespace {

using namespace std::chrono_literals;

constexpr uint16_t kExternalPort = 9094;
constexpr io::Duration kCallTimeout = 10s;

// The (node id, "host:port") pairs an answer lists.
using Listed = std::vector<std::pair<int32_t, std::string>>;

struct Seen {
  Listed metadata_plain;
  Listed metadata_external;
  Listed cluster_external;
  std::optional<std::pair<int32_t, std::string>> coordinator_plain;
  std::optional<std::pair<int32_t, std::string>> coordinator_external;
  int acknowledged = 0;
  int failed = 0;
  bool done = false;
};

io::Task<Listed> metadata_brokers(net::Peer* peer) {
  net::MetadataRequest request;
  request.topics = std::nullopt;
  absl::StatusOr<net::MetadataResponse> r = co_await peer->call<net::MetadataResponse>(request, 12, kCallTimeout);
  Listed out;
  if (!r.ok()) co_return out;
  for (const auto& b : r->brokers) out.emplace_back(b.node_id, fmt::format("{}:{}", b.host, b.port));
  co_return out;
}

io::Task<Listed> cluster_brokers(net::Peer* peer) {
  const net::DescribeClusterRequest request;
  absl::StatusOr<net::DescribeClusterResponse> r =
      co_await peer->call<net::DescribeClusterResponse>(request, 1, kCallTimeout);
  Listed out;
  if (!r.ok() || r->error_code != 0) co_return out;
  for (const auto& b : r->brokers) out.emplace_back(b.broker_id, fmt::format("{}:{}", b.host, b.port));
  co_return out;
}

// The group's coordinator as FindCoordinator v4 on `peer` names it;
// retried while the offsets topic is being made.
io::Task<std::optional<std::pair<int32_t, std::string>>> coordinator(io::Context* ctx, net::Peer* peer) {
  net::FindCoordinatorRequest request;
  request.key_type = 0;
  request.coordinator_keys = {"a-group"};
  for (int attempt = 0; attempt < 100; ++attempt) {
    absl::StatusOr<net::FindCoordinatorResponse> r =
        co_await peer->call<net::FindCoordinatorResponse>(request, 4, kCallTimeout);
    if (r.ok() && r->coordinators.size() == 1 && r->coordinators[0].error_code == 0) {
      const auto& c = r->coordinators[0];
      co_return std::make_pair(c.node_id, fmt::format("{}:{}", c.host, c.port));
    }
    co_await ctx->clock().sleep_for(200ms);
  }
  co_return std::nullopt;
}

io::Task<void> clients(io::Context* ctx, io::Address plain, io::Address external, Seen* seen) {
  co_await ctx->clock().sleep_for(3s);  // the nodes register
  net::Peer p(ctx->network(), ctx->clock(), plain, "plain-client");
  net::Peer e(ctx->network(), ctx->clock(), external, "external-client");
  seen->metadata_plain = co_await metadata_brokers(&p);
  seen->metadata_external = co_await metadata_brokers(&e);
  seen->cluster_external = co_await cluster_brokers(&e);
  seen->coordinator_external = co_await coordinator(ctx, &e);
  seen->coordinator_plain = co_await coordinator(ctx, &p);

  client::ProducerConfig config;
  config.client = sim_client_options({external}, "external-producer");
  config.client.allow_auto_create_topics = true;
  client::Producer producer(*ctx, config);
  for (int i = 0; i < 20; ++i) {
    client::ProducerRecord record;
    record.topic = "through-external";
    record.value = io::Buffer::copy_of(std::to_string(i));
    absl::StatusOr<client::RecordMetadata> m = co_await producer.produce(std::move(record));
    if (m.ok()) {
      ++seen->acknowledged;
    } else {
      ++seen->failed;
    }
  }
  seen->done = true;
}

TEST(Listeners, EachClientIsToldOfTheListenerItCameInOn) {
  TestCluster cluster(7, 3, [](ServerNodeOptions& o) {
    for (const io::Address& plain : o.brokers) o.external.emplace_back(plain.host, kExternalPort);
    o.min_insync = 2;
    o.offsets_replication_factor = 3;
  });
  std::vector<io::Address> external;
  for (const io::Address& plain : cluster.brokers) external.emplace_back(plain.host, kExternalPort);
  Seen seen;
  cluster.client->start([&](io::Context& ctx) { return clients(&ctx, cluster.broker(1), external[0], &seen); });
  ASSERT_TRUE(cluster.world.run_until([&] { return seen.done; }, 120s));

  Listed plain_expected;
  Listed external_expected;
  for (int32_t id = 1; id <= 3; ++id) {
    plain_expected.emplace_back(id, cluster.broker(id).to_string());
    external_expected.emplace_back(id, external[static_cast<size_t>(id - 1)].to_string());
  }
  EXPECT_EQ(seen.metadata_plain, plain_expected);
  EXPECT_EQ(seen.metadata_external, external_expected);
  EXPECT_EQ(seen.cluster_external, external_expected);
  ASSERT_TRUE(seen.coordinator_plain.has_value());
  ASSERT_TRUE(seen.coordinator_external.has_value());
  EXPECT_EQ(seen.coordinator_plain->first, seen.coordinator_external->first);
  EXPECT_EQ(seen.coordinator_plain->second, cluster.broker(seen.coordinator_plain->first).to_string());
  EXPECT_EQ(seen.coordinator_external->second,
            external[static_cast<size_t>(seen.coordinator_external->first - 1)].to_string());
  // acks=all with min.insync.replicas=2 over 3 replicas: the followers
  // fetched (on the inter-broker listener).
  EXPECT_EQ(seen.acknowledged, 20);
  EXPECT_EQ(seen.failed, 0);
}

}  // namespace
}  // namespace brook::sim
