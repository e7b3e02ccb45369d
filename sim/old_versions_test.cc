// sim/old_versions_test.cc
//
// The admin APIs at the oldest versions a broker serves (those Kafka 3
// served, below Kafka 4's floor): advertised by ApiVersions, and answered
// with what the version carries. Clients still in use send them: sarama
// before 1.41 lists topics with DescribeConfigs v0, and creates and deletes
// topics with CreateTopics v0-1 and DeleteTopics v0 when configured for
// brokers before 0.11 or 1.0.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "net/kafka/errors.h"
#include "net/kafka/messages/api_versions_request.h"
#include "net/kafka/messages/api_versions_response.h"
#include "net/kafka/messages/create_acls_request.h"
#include "net/kafka/messages/create_topics_request.h"
#include "net/kafka/messages/create_topics_response.h"
#include "net/kafka/messages/delete_acls_request.h"
#include "net/kafka/messages/delete_topics_request.h"
#include "net/kafka/messages/delete_topics_response.h"
#include "net/kafka/messages/describe_acls_request.h"
#include "net/kafka/messages/describe_configs_request.h"
#include "net/kafka/messages/describe_configs_response.h"
#include "net/kafka/messages/describe_log_dirs_request.h"
#include "net/kafka/messages/describe_log_dirs_response.h"
#include "net/kafka/messages/offset_for_leader_epoch_request.h"
#include "net/kafka/messages/offset_for_leader_epoch_response.h"
#include "net/kafka/record_batch.h"
#include "net/kafka/rpc.h"
#include "sim/broker.h"
#include "sim/test_cluster.h"
#include "sim/world.h"

namespace brook::sim {
namespace {

using namespace std::chrono_literals;

constexpr io::Duration kCallTimeout = 30s;

// What each call answered (nullopt: no answer).
struct Answers {
  std::optional<net::ApiVersionsResponse> api_versions;
  std::optional<net::CreateTopicsResponse> create_v0;
  std::optional<net::CreateTopicsResponse> create_again_v0;
  std::optional<net::CreateTopicsResponse> validate_v1;
  std::optional<net::DescribeConfigsResponse> describe_configs_v0;
  std::optional<net::DescribeLogDirsResponse> log_dirs_v0;
  std::optional<net::OffsetForLeaderEpochResponse> epoch_v0;
  std::optional<net::OffsetForLeaderEpochResponse> epoch_v1;
  std::optional<net::DeleteTopicsResponse> delete_v0;
  std::optional<net::DescribeConfigsResponse> describe_after_delete;
  bool produced = false;
  bool done = false;
};

template <typename Response, typename Request>
io::Task<std::optional<Response>> call_at(net::Peer* peer, Request request, int16_t version) {
  absl::StatusOr<Response> out = co_await peer->call<Response>(request, version, kCallTimeout);
  if (!out.ok()) co_return std::nullopt;
  co_return *std::move(out);
}

net::CreateTopicsRequest create_old(std::string name, bool validate_only) {
  net::CreateTopicsRequest r;
  auto& t = r.topics.emplace_back();
  t.name = std::move(name);
  t.num_partitions = 2;
  t.replication_factor = 1;
  r.timeout_ms = 30000;
  r.validate_only = validate_only;
  return r;
}

io::Task<void> old_clients(io::Context* ctx, io::Address broker, Answers* a) {
  co_await ctx->clock().sleep_for(2s);  // the node registers
  net::Peer peer(ctx->network(), ctx->clock(), broker, "old-client");
  const net::ApiVersionsRequest versions;
  a->api_versions = co_await call_at<net::ApiVersionsResponse>(&peer, versions, 0);
  const net::CreateTopicsRequest create = create_old("old", false);
  a->create_v0 = co_await call_at<net::CreateTopicsResponse>(&peer, create, 0);
  a->create_again_v0 = co_await call_at<net::CreateTopicsResponse>(&peer, create, 0);
  const net::CreateTopicsRequest validate = create_old("checked", true);
  a->validate_v1 = co_await call_at<net::CreateTopicsResponse>(&peer, validate, 1);

  for (int i = 0; i < 3; ++i) {
    const net::RecordBatchOptions batch;
    const std::string topic = "old";
    const std::string value = "v";
    std::optional<net::ProduceResponse::PartitionProduceResponse> p =
        co_await produce_one(ctx, broker, topic, 0, batch, value, std::nullopt);
    if (!p.has_value() || p->error_code != 0) co_return;
  }
  a->produced = true;

  net::DescribeConfigsRequest configs;
  auto& resource = configs.resources.emplace_back();
  resource.resource_type = 2;  // topic
  resource.resource_name = "old";
  resource.configuration_keys = std::nullopt;
  a->describe_configs_v0 = co_await call_at<net::DescribeConfigsResponse>(&peer, configs, 0);

  net::DescribeLogDirsRequest dirs;
  dirs.topics = std::nullopt;
  a->log_dirs_v0 = co_await call_at<net::DescribeLogDirsResponse>(&peer, dirs, 0);

  net::OffsetForLeaderEpochRequest epochs;
  auto& topic = epochs.topics.emplace_back();
  topic.topic = "old";
  auto& partition = topic.partitions.emplace_back();
  partition.partition = 0;
  partition.leader_epoch = 0;
  a->epoch_v0 = co_await call_at<net::OffsetForLeaderEpochResponse>(&peer, epochs, 0);
  a->epoch_v1 = co_await call_at<net::OffsetForLeaderEpochResponse>(&peer, epochs, 1);

  net::DeleteTopicsRequest del;
  del.topic_names.push_back("old");
  del.timeout_ms = 30000;
  a->delete_v0 = co_await call_at<net::DeleteTopicsResponse>(&peer, del, 0);
  co_await ctx->clock().sleep_for(1s);
  // (Not a Metadata request: that would create the topic again.)
  a->describe_after_delete = co_await call_at<net::DescribeConfigsResponse>(&peer, configs, 0);
  a->done = true;
}

TEST(OldVersions, TheAdminApisAnswerAtTheVersionsKafka3Served) {
  TestCluster cluster(3, 1, [](ServerNodeOptions&) {});
  Answers a;
  cluster.client->start([&](io::Context& ctx) { return old_clients(&ctx, cluster.broker(1), &a); });
  ASSERT_TRUE(cluster.world.run_until([&] { return a.done; }, 120s)) << "produced: " << a.produced;

  ASSERT_TRUE(a.api_versions.has_value());
  std::map<int16_t, int16_t> lowest;
  for (const auto& k : a.api_versions->api_keys) lowest[k.api_key] = k.min_version;
  EXPECT_EQ(lowest[net::CreateTopicsRequest::kApiKey], 0);
  EXPECT_EQ(lowest[net::DeleteTopicsRequest::kApiKey], 0);
  EXPECT_EQ(lowest[net::DescribeConfigsRequest::kApiKey], 0);
  EXPECT_EQ(lowest[net::DescribeLogDirsRequest::kApiKey], 0);
  EXPECT_EQ(lowest[net::OffsetForLeaderEpochRequest::kApiKey], 0);
  EXPECT_EQ(lowest[net::CreateAclsRequest::kApiKey], 0);
  EXPECT_EQ(lowest[net::DeleteAclsRequest::kApiKey], 0);
  EXPECT_EQ(lowest[net::DescribeAclsRequest::kApiKey], 0);

  ASSERT_TRUE(a.create_v0.has_value());
  ASSERT_EQ(a.create_v0->topics.size(), 1u);
  EXPECT_EQ(a.create_v0->topics[0].name, "old");
  EXPECT_EQ(a.create_v0->topics[0].error_code, 0);
  ASSERT_TRUE(a.create_again_v0.has_value());
  ASSERT_EQ(a.create_again_v0->topics.size(), 1u);
  EXPECT_EQ(a.create_again_v0->topics[0].error_code, net::code(net::Error::kTopicAlreadyExists));
  // validate_only (v1+) is honoured: checked, not created.
  ASSERT_TRUE(a.validate_v1.has_value());
  ASSERT_EQ(a.validate_v1->topics.size(), 1u);
  EXPECT_EQ(a.validate_v1->topics[0].error_code, 0);

  // v0 marks defaults with is_default (v1+ has config_source instead).
  ASSERT_TRUE(a.produced);
  ASSERT_TRUE(a.describe_configs_v0.has_value());
  ASSERT_EQ(a.describe_configs_v0->results.size(), 1u);
  const auto& described = a.describe_configs_v0->results[0];
  EXPECT_EQ(described.error_code, 0);
  std::map<std::string, std::pair<std::optional<std::string>, bool>> entries;
  for (const auto& c : described.configs) entries[c.name] = {c.value, c.is_default};
  ASSERT_TRUE(entries.contains("retention.ms"));
  EXPECT_EQ(entries["retention.ms"].first, std::optional<std::string>("604800000"));
  EXPECT_TRUE(entries["retention.ms"].second);
  ASSERT_TRUE(entries.contains("cleanup.policy"));

  ASSERT_TRUE(a.log_dirs_v0.has_value());
  ASSERT_EQ(a.log_dirs_v0->results.size(), 1u);
  std::map<int32_t, int64_t> sizes;
  for (const auto& t : a.log_dirs_v0->results[0].topics) {
    if (t.name != "old") continue;
    for (const auto& p : t.partitions) sizes[p.partition_index] = p.partition_size;
  }
  ASSERT_EQ(sizes.size(), 2u);
  EXPECT_GT(sizes[0], 0);
  EXPECT_EQ(sizes[1], 0);

  // Epoch 0's end is the log end: three records in partition 0.
  for (const auto* e : {&a.epoch_v0, &a.epoch_v1}) {
    ASSERT_TRUE(e->has_value());
    ASSERT_EQ((*e)->topics.size(), 1u);
    ASSERT_EQ((*e)->topics[0].partitions.size(), 1u);
    EXPECT_EQ((*e)->topics[0].partitions[0].error_code, 0);
    EXPECT_EQ((*e)->topics[0].partitions[0].end_offset, 3);
  }
  EXPECT_EQ(a.epoch_v1->topics[0].partitions[0].leader_epoch, 0);  // v1+ only

  ASSERT_TRUE(a.delete_v0.has_value());
  ASSERT_EQ(a.delete_v0->responses.size(), 1u);
  EXPECT_EQ(a.delete_v0->responses[0].name, std::optional<std::string>("old"));
  EXPECT_EQ(a.delete_v0->responses[0].error_code, 0);
  ASSERT_TRUE(a.describe_after_delete.has_value());
  ASSERT_EQ(a.describe_after_delete->results.size(), 1u);
  EXPECT_EQ(a.describe_after_delete->results[0].error_code, net::code(net::Error::kUnknownTopicOrPartition))
      << "the topic deleted with DeleteTopics v0 is still there";
}

}  // namespace
}  // namespace brook::sim
