// sim/old_versions_test.cc
//
// The admin APIs at the oldest versions a broker serves (those Kafka 3
// served, below Kafka 4's floor): advertised by ApiVersions, and answered
// with what the version carries. Clients still in use send them: sarama
// before 1.41 lists topics with DescribeConfigs v0, and creates and deletes
// topics with CreateTopics v0-1 and DeleteTopics v0 when configured for
// brokers before 0.11 or 1.0.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "net/client/admin.h"
#include "net/kafka/errors.h"
#include "net/codec/compression.h"
#include "net/codec/endian.h"
#include "net/kafka/message_set.h"
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
#include "net/kafka/messages/fetch_request.h"
#include "net/kafka/messages/fetch_response.h"
#include "net/kafka/messages/list_offsets_request.h"
#include "net/kafka/messages/list_offsets_response.h"
#include "net/kafka/messages/offset_for_leader_epoch_request.h"
#include "net/kafka/messages/offset_for_leader_epoch_response.h"
#include "net/kafka/messages/produce_request.h"
#include "net/kafka/messages/produce_response.h"
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

// --- Message sets ---------------------------------------------------------------

std::optional<io::Buffer> bytes(std::string_view s) { return io::Buffer::copy_of(s); }

struct Entry {
  int64_t offset;
  int8_t magic;
  int64_t timestamp;
  std::string value;
  bool operator==(const Entry&) const = default;
};

// The entries of an uncompressed message set, read as an old client does.
std::vector<Entry> entries_of(const io::Buffer& set) {
  std::vector<Entry> out;
  std::span<const std::byte> b = set.span();
  for (size_t pos = 0; pos + 12 <= b.size();) {
    Entry e;
    e.offset = codec::load_be<int64_t>(b, pos);
    const auto size = static_cast<size_t>(codec::load_be<int32_t>(b, pos + 8));
    size_t at = pos + 12 + 4;
    e.magic = static_cast<int8_t>(b[at]);
    at += 2;
    e.timestamp = -1;
    if (e.magic == 1) {
      e.timestamp = codec::load_be<int64_t>(b, at);
      at += 8;
    }
    const int32_t key = codec::load_be<int32_t>(b, at);
    at += 4 + static_cast<size_t>(std::max(0, key));
    const int32_t value = codec::load_be<int32_t>(b, at);
    at += 4;
    e.value = std::string(reinterpret_cast<const char*>(b.data() + at), static_cast<size_t>(std::max(0, value)));
    out.push_back(e);
    pos += 12 + size;
  }
  return out;
}

struct SetAnswers {
  std::optional<net::ProduceResponse> produce_v0;
  std::optional<net::ProduceResponse> produce_v2;
  std::optional<net::ProduceResponse> produce_corrupt;
  std::optional<net::FetchResponse> fetch_v0;
  std::optional<net::FetchResponse> fetch_v3;
  std::optional<net::ListOffsetsResponse> latest_v0;
  std::optional<net::ListOffsetsResponse> earliest_v0;
  std::optional<net::ProduceResponse> produce_no_down;
  std::optional<net::FetchResponse> fetch_no_down;
  bool done = false;
};

net::ListOffsetsRequest list_offsets(int64_t timestamp) {
  net::ListOffsetsRequest r;
  r.replica_id = -1;
  auto& t = r.topics.emplace_back();
  t.name = "sets";
  auto& p = t.partitions.emplace_back();
  p.partition_index = 0;
  p.timestamp = timestamp;
  p.max_num_offsets = 1;
  return r;
}

io::Task<void> old_producers(io::Context* ctx, io::Address broker, SetAnswers* a) {
  co_await ctx->clock().sleep_for(2s);
  std::vector<io::Address> bootstrap;
  bootstrap.push_back(broker);
  client::Cluster admin(*ctx, sim_client_options(bootstrap, "admin"));
  co_await create_topic_until_done(ctx, &admin, "sets", 1, 1);
  client::NewTopic no_down;
  no_down.name = "no-down";
  no_down.partitions = 1;
  no_down.replication_factor = 1;
  no_down.configs["message.downconversion.enable"] = "false";
  if (!co_await create_topic(ctx, &admin, std::move(no_down), 50)) co_return;
  net::Peer peer(ctx->network(), ctx->clock(), broker, "old-client");

  // Magic 0, uncompressed: offsets 0 and 1.
  std::string v0_set;
  net::append_message_set_entry(v0_set, 0, 0, 0, 0, bytes("k0"), bytes("v0"));
  net::append_message_set_entry(v0_set, 1, 0, 0, 0, bytes("k1"), bytes("v1"));
  const net::ProduceRequest v0 = one_batch_produce(std::nullopt, "sets", 0, io::Buffer::copy_of(v0_set), 30000);
  a->produce_v0 = co_await call_at<net::ProduceResponse>(&peer, v0, 0);

  // Magic 1, a gzip wrapper of two: offsets 2 and 3, timestamps 1000, 1001.
  std::string inner;
  net::append_message_set_entry(inner, 0, 1, 0, 1000, bytes("k2"), bytes("v2"));
  net::append_message_set_entry(inner, 1, 1, 0, 1001, bytes("k3"), bytes("v3"));
  absl::StatusOr<io::Buffer> gzipped =
      codec::compress(codec::Compression::kGzip, io::Buffer::copy_of(inner).span());
  if (!gzipped.ok()) co_return;
  std::string v1_set;
  net::append_message_set_entry(v1_set, 1, 1, 1, 1001, std::nullopt, *gzipped);
  const net::ProduceRequest v2 = one_batch_produce(std::nullopt, "sets", 0, io::Buffer::copy_of(v1_set), 30000);
  a->produce_v2 = co_await call_at<net::ProduceResponse>(&peer, v2, 2);

  std::string corrupt = v1_set;
  corrupt.back() = static_cast<char>(corrupt.back() ^ 0x10);
  const net::ProduceRequest bad = one_batch_produce(std::nullopt, "sets", 0, io::Buffer::copy_of(corrupt), 30000);
  a->produce_corrupt = co_await call_at<net::ProduceResponse>(&peer, bad, 2);

  const net::FetchRequest from0 = one_partition_fetch("sets", 0, 0, 1 << 20, 0);
  a->fetch_v0 = co_await call_at<net::FetchResponse>(&peer, from0, 0);
  const net::FetchRequest from1 = one_partition_fetch("sets", 0, 1, 1 << 20, 0);
  a->fetch_v3 = co_await call_at<net::FetchResponse>(&peer, from1, 3);
  const net::ListOffsetsRequest latest = list_offsets(-1);
  a->latest_v0 = co_await call_at<net::ListOffsetsResponse>(&peer, latest, 0);
  const net::ListOffsetsRequest earliest = list_offsets(-2);
  a->earliest_v0 = co_await call_at<net::ListOffsetsResponse>(&peer, earliest, 0);

  const net::ProduceRequest to_no_down =
      one_batch_produce(std::nullopt, "no-down", 0, io::Buffer::copy_of(v0_set), 30000);
  a->produce_no_down = co_await call_at<net::ProduceResponse>(&peer, to_no_down, 0);
  const net::FetchRequest no_down_fetch = one_partition_fetch("no-down", 0, 0, 1 << 20, 0);
  a->fetch_no_down = co_await call_at<net::FetchResponse>(&peer, no_down_fetch, 2);
  a->done = true;
}

int16_t produce_error(const std::optional<net::ProduceResponse>& r) {
  if (!r.has_value() || r->responses.size() != 1 || r->responses[0].partition_responses.size() != 1) return -100;
  return r->responses[0].partition_responses[0].error_code;
}

const net::FetchResponse::PartitionData* fetched(const std::optional<net::FetchResponse>& r) {
  if (!r.has_value() || r->responses.size() != 1 || r->responses[0].partitions.size() != 1) return nullptr;
  return &r->responses[0].partitions[0];
}

TEST(OldVersions, MessageSetsAreStoredAsBatchesAndFetchedAsMessageSets) {
  TestCluster cluster(5, 1, [](ServerNodeOptions&) {});
  SetAnswers a;
  cluster.client->start([&](io::Context& ctx) { return old_producers(&ctx, cluster.broker(1), &a); });
  ASSERT_TRUE(cluster.world.run_until([&] { return a.done; }, 120s));

  EXPECT_EQ(produce_error(a.produce_v0), 0);
  EXPECT_EQ(a.produce_v0->responses[0].partition_responses[0].base_offset, 0);
  EXPECT_EQ(produce_error(a.produce_v2), 0);
  EXPECT_EQ(a.produce_v2->responses[0].partition_responses[0].base_offset, 2);
  EXPECT_EQ(produce_error(a.produce_corrupt), net::code(net::Error::kCorruptMessage));

  const net::FetchResponse::PartitionData* v0 = fetched(a.fetch_v0);
  ASSERT_NE(v0, nullptr);
  EXPECT_EQ(v0->error_code, 0);
  EXPECT_EQ(v0->high_watermark, 4);
  ASSERT_TRUE(v0->records.has_value());
  EXPECT_EQ(entries_of(*v0->records),
            (std::vector<Entry>{{0, 0, -1, "v0"}, {1, 0, -1, "v1"}, {2, 0, -1, "v2"}, {3, 0, -1, "v3"}}));

  // Fetch v3: magic 1 from the fetch offset on; magic 0's records have no
  // timestamp.
  const net::FetchResponse::PartitionData* v3 = fetched(a.fetch_v3);
  ASSERT_NE(v3, nullptr);
  EXPECT_EQ(v3->error_code, 0);
  ASSERT_TRUE(v3->records.has_value());
  EXPECT_EQ(entries_of(*v3->records),
            (std::vector<Entry>{{1, 1, -1, "v1"}, {2, 1, 1000, "v2"}, {3, 1, 1001, "v3"}}));

  ASSERT_TRUE(a.latest_v0.has_value() && a.earliest_v0.has_value());
  EXPECT_EQ(a.latest_v0->topics.at(0).partitions.at(0).old_style_offsets, (std::vector<int64_t>{4}));
  EXPECT_EQ(a.earliest_v0->topics.at(0).partitions.at(0).old_style_offsets, (std::vector<int64_t>{0}));

  // message.downconversion.enable=false: taken in, not given out.
  EXPECT_EQ(produce_error(a.produce_no_down), 0);
  const net::FetchResponse::PartitionData* no_down = fetched(a.fetch_no_down);
  ASSERT_NE(no_down, nullptr);
  EXPECT_EQ(no_down->error_code, net::code(net::Error::kUnsupportedVersion));
}

}  // namespace
}  // namespace brook::sim
