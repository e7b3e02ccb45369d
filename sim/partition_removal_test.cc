// sim/partition_removal_test.cc
//
// Partitions removed from a broker, in the simulator.
// - A topic deleted while a fetch reads its log: the broker closes the log
//   under the read, which then fails. That failure is the deletion's, not
//   the disk's: the fetch is answered with a retriable error and the broker
//   keeps serving. (A failed log stops a broker, so treating it as a disk
//   failure would take a node down for every topic deleted under a
//   consumer.)
// - A topic deleted while one of its replicas' brokers was down: that
//   broker removes the partition's directory when it comes back.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/broker/broker.h"
#include "io/when.h"
#include "storage/log.h"
#include "net/client/admin.h"
#include "net/kafka/errors.h"
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

constexpr int kRecords = 200;
constexpr size_t kValueBytes = 50 << 10;

struct Fetched {
  bool answered = false;
  int16_t error_code = -1;
  io::Instant at{};
};

// A fetch of partition 0 of t from `offset`, answered at once.
io::Task<Fetched> fetch_from(io::Context* ctx, io::Address broker, int64_t offset) {
  net::FetchRequest r;
  r.max_wait_ms = 0;
  r.min_bytes = 1;
  r.max_bytes = 1 << 20;
  r.isolation_level = 0;
  auto& t = r.topics.emplace_back();
  t.topic = "t";
  auto& fp = t.partitions.emplace_back();
  fp.partition = 0;
  fp.fetch_offset = offset;
  fp.partition_max_bytes = 1 << 20;
  net::Peer peer(ctx->network(), ctx->clock(), std::move(broker), "fetcher");
  absl::StatusOr<net::FetchResponse> answer = co_await peer.call<net::FetchResponse>(r, 11, 30s);
  Fetched out;
  out.at = ctx->clock().now();
  if (!answer.ok() || answer->responses.size() != 1 || answer->responses.front().partitions.size() != 1) {
    co_return out;
  }
  out.answered = true;
  out.error_code = answer->responses.front().partitions.front().error_code;
  co_return out;
}

// After `delay`, deletes t; when the deletion was accepted, if it was.
io::Task<std::optional<io::Instant>> delete_after(io::Context* ctx, client::Cluster* admin, io::Duration delay) {
  co_await ctx->clock().sleep_for(delay);
  std::vector<std::string> names;
  names.push_back("t");
  absl::StatusOr<std::map<std::string, absl::Status>> out = co_await client::delete_topics(*admin, names);
  if (!out.ok() || out->size() != 1 || !out->begin()->second.ok()) co_return std::nullopt;
  co_return ctx->clock().now();
}

TEST(PartitionRemoval, AReadOfADeletedTopicsLogIsNoDiskFailure) {
  broker::Broker* running = nullptr;
  bool stopped = false;
  TestCluster cluster(5, 1, [&](ServerNodeOptions& o) {
    o.on_broker = [&](broker::Broker* b) {
      if (b != nullptr) running = b;
      if (b == nullptr) stopped = true;
    };
  });
  bool done = false;
  bool setup_ok = false;
  Fetched fetched;
  std::optional<io::Instant> deleted;
  size_t segments = 0;
  std::optional<int16_t> later_produce_error;
  cluster.client->start([&](io::Context& ctx) -> io::Task<void> {
    co_await ctx.clock().sleep_for(3s);
    client::Cluster admin(ctx, sim_client_options(cluster.brokers, "admin"));
    // An index entry only every 100 MB: finding the last batch scans the
    // headers of all the others, one disk read each.
    client::NewTopic t;
    t.name = "t";
    t.partitions = 1;
    t.replication_factor = 1;
    t.configs["index.interval.bytes"] = "100000000";
    t.configs["segment.bytes"] = "100000000";
    t.configs["segment.ms"] = "9223372036854775807";  // the records have timestamp 1
    std::vector<client::NewTopic> topics;
    topics.push_back(t);
    topics.push_back(client::NewTopic{.name = "u", .partitions = 1, .replication_factor = 1, .configs = {}});
    absl::StatusOr<std::map<std::string, client::CreatedTopic>> created = co_await client::create_topics(admin, topics);
    if (!created.ok() || created->size() != 2 || !created->at("t").status.ok() || !created->at("u").status.ok()) {
      done = true;
      co_return;
    }
    for (int i = 0; i < kRecords; ++i) {
      std::optional<net::ProduceResponse::PartitionProduceResponse> out = co_await produce_one(
          &ctx, cluster.broker(1), "t", 0, net::RecordBatchOptions{}, std::string(kValueBytes, 'x'), std::nullopt);
      if (!out.has_value() || out->error_code != 0) {
        done = true;
        co_return;
      }
    }
    setup_ok = true;
    if (auto it = running->partitions().find({"t", 0}); it != running->partitions().end()) {
      segments = it->second->log->segment_count();
    }
    // Every disk operation now takes 1-2 ms: the fetch's scan takes about
    // 300 ms, the deletion far less.
    DiskFaults slow;
    slow.latency_min = 1ms;
    slow.latency_max = 2ms;
    cluster.world.set_disk_faults(0, slow);
    std::tuple<Fetched, std::optional<io::Instant>> both = co_await io::when_all(fetch_from(&ctx, cluster.broker(1), kRecords - 1),
                                                          delete_after(&ctx, &admin, 20ms));
    fetched = std::get<0>(both);
    deleted = std::get<1>(both);
    cluster.world.set_disk_faults(0, DiskFaults{});
    std::optional<net::ProduceResponse::PartitionProduceResponse> later =
        co_await produce_one(&ctx, cluster.broker(1), "u", 0, net::RecordBatchOptions{}, "after", std::nullopt);
    if (later.has_value()) later_produce_error = later->error_code;
    done = true;
  });
  ASSERT_TRUE(cluster.world.run_until([&] { return done; }, 600s));
  ASSERT_TRUE(setup_ok);
  ASSERT_NE(running, nullptr);
  // The premise: one segment to scan, and a scan that outlasted the deletion.
  EXPECT_EQ(segments, 1u);
  ASSERT_TRUE(deleted.has_value());
  ASSERT_TRUE(fetched.answered);
  EXPECT_LT(*deleted, fetched.at);
  // Retriable: the consumer refreshes its metadata and finds the topic gone.
  EXPECT_TRUE(fetched.error_code == net::code(net::Error::kUnknownTopicOrPartition) ||
              fetched.error_code == net::code(net::Error::kNotLeaderOrFollower))
      << fetched.error_code;
  EXPECT_FALSE(stopped);
  EXPECT_EQ(later_produce_error, std::optional<int16_t>(0));
}

bool has_dir(Node& node, const std::string& dir) {
  const std::vector<std::string> dirs = node.disk().directories(DiskView::kCurrent);
  return std::find(dirs.begin(), dirs.end(), dir) != dirs.end();
}

// Deletes t, retrying until the controller takes it.
io::Task<void> delete_until_done(io::Context* ctx, client::Cluster* admin) {
  while (true) {
    std::vector<std::string> names;
    names.push_back("t");
    absl::StatusOr<std::map<std::string, absl::Status>> out = co_await client::delete_topics(*admin, names);
    if (out.ok() && out->size() == 1 && out->begin()->second.ok()) co_return;
    co_await ctx->clock().sleep_for(200ms);
  }
}

TEST(PartitionRemoval, ABrokerAwayWhileItsTopicWasDeletedRemovesItsDirectory) {
  TestCluster cluster(9, 3, [](ServerNodeOptions&) {});
  Node& away = cluster.server(3);
  enum class Step { kCreating, kCreated, kDeleting, kDeleted } step = Step::kCreating;
  cluster.client->start([&](io::Context& ctx) -> io::Task<void> {
    co_await ctx.clock().sleep_for(3s);
    client::Cluster admin(ctx, sim_client_options(cluster.brokers, "admin"));
    co_await create_topic_until_done(&ctx, &admin, "t", 2, 3);
    step = Step::kCreated;
    while (step != Step::kDeleting) co_await ctx.clock().sleep_for(100ms);
    co_await delete_until_done(&ctx, &admin);
    step = Step::kDeleted;
  });
  ASSERT_TRUE(cluster.world.run_until([&] { return step == Step::kCreated && has_dir(away, "t-1"); }, 60s));
  away.crash();
  step = Step::kDeleting;
  ASSERT_TRUE(cluster.world.run_until(
      [&] { return step == Step::kDeleted && !has_dir(cluster.server(1), "t-0") && !has_dir(cluster.server(1), "t-1"); },
      60s));
  ASSERT_TRUE(has_dir(away, "t-0"));
  ASSERT_TRUE(has_dir(away, "t-1"));
  away.restart();
  EXPECT_TRUE(cluster.world.run_until([&] { return !has_dir(away, "t-0") && !has_dir(away, "t-1"); }, 30s))
      << "the deleted topic's directories are still on the broker that was away";
  // Nothing else went: the metadata log and the broker's registration.
  EXPECT_TRUE(has_dir(away, "__cluster_metadata-0"));
}

}  // namespace
}  // namespace brook::sim
