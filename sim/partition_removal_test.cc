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
// - A creation or removal cut short leaves a partition's directory empty,
//   or with only the temporary copy of partition.metadata: the broker
//   removes it when it comes back, and leaves alone what it does not know.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "core/broker/broker.h"
#include "io/disk.h"
#include "io/status.h"
#include "io/when.h"
#include "storage/checkpoint.h"
#include "storage/log.h"
#include "net/client/admin.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/fetch_request.h"
#include "net/kafka/messages/fetch_response.h"
#include "net/kafka/record_batch.h"
#include "net/kafka/rpc.h"
#include "net/kafka/wire.h"
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
  net::FetchRequest r = one_partition_fetch("t", 0, offset, 1 << 20, 0);
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
    (void)co_await delete_topic(&ctx, &admin, "t", nullptr);
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

// What a crash leaves in a data directory, and what is not a broker's:
// - gone-0: empty (a removal that got as far as partition.metadata, which
//   goes last; or a creation that got no further than the directory);
// - half-1: only partition.metadata's temporary copy (a creation cut short
//   before the rename);
// - old-0: the partition.metadata of a topic id no image holds;
// - other-0: a partition-like name with a file that is no broker's;
// - misc: no partition's name.
io::Task<absl::Status> leave_debris(io::Context* ctx) {
  io::Disk& disk = ctx->disk();
  static constexpr std::string_view kDirs[] = {"gone-0", "half-1", "old-0", "other-0", "misc"};
  for (std::string_view name : kDirs) {
    std::string dir(name);
    CO_RETURN_IF_ERROR(co_await disk.make_dir(dir));
  }
  const std::string temporary =
      "half-1/" + std::string(storage::kPartitionMetadataFileName) + std::string(storage::kTempFileSuffix);
  CO_ASSIGN_OR_RETURN(std::unique_ptr<io::File> half, co_await disk.open(temporary, io::OpenMode::kCreate));
  io::BufferChain half_text(io::Buffer::copy_of(std::string("version: 0\n")));
  CO_RETURN_IF_ERROR(co_await half->append(std::move(half_text)));
  CO_RETURN_IF_ERROR(co_await half->close());
  CO_ASSIGN_OR_RETURN(std::unique_ptr<io::File> notes, co_await disk.open("other-0/notes.txt", io::OpenMode::kCreate));
  io::BufferChain notes_text(io::Buffer::copy_of(std::string("kept\n")));
  CO_RETURN_IF_ERROR(co_await notes->append(std::move(notes_text)));
  CO_RETURN_IF_ERROR(co_await notes->close());
  const net::Uuid unknown = net::random_uuid(ctx->random());
  CO_RETURN_IF_ERROR(co_await storage::write_partition_metadata(
      disk, "old-0/" + std::string(storage::kPartitionMetadataFileName), unknown));
  co_return absl::OkStatus();
}

TEST(PartitionRemoval, DirectoriesLeftByCutShortCreationsAndRemovalsGo) {
  TestCluster cluster(11, 1, [](ServerNodeOptions&) {});
  Node& node = cluster.server(1);
  bool created = false;
  cluster.client->start([&](io::Context& ctx) -> io::Task<void> {
    co_await ctx.clock().sleep_for(2s);
    client::Cluster admin(ctx, sim_client_options(cluster.brokers, "admin"));
    co_await create_topic_until_done(&ctx, &admin, "t", 1, 1);
    created = true;
  });
  ASSERT_TRUE(cluster.world.run_until([&] { return created && has_dir(node, "t-0"); }, 60s));
  // Let the creation reach the disk before the power goes.
  cluster.world.run_for(5s);
  node.crash();
  absl::Status debris = absl::UnknownError("not run");
  bool restarted = false;
  node.start([&](io::Context& ctx) -> io::Task<void> {
    debris = co_await leave_debris(&ctx);
    restarted = true;
    ServerNodeOptions o;
    o.index = 0;
    o.brokers = cluster.brokers;
    o.controllers = cluster.controllers;
    o.replication_factor = 1;
    co_await server_node_main(&ctx, o);
  });
  ASSERT_TRUE(cluster.world.run_until([&] { return restarted; }, 10s));
  ASSERT_TRUE(debris.ok()) << debris;
  ASSERT_TRUE(has_dir(node, "gone-0") && has_dir(node, "half-1") && has_dir(node, "old-0"));
  EXPECT_TRUE(cluster.world.run_until(
      [&] { return !has_dir(node, "gone-0") && !has_dir(node, "half-1") && !has_dir(node, "old-0"); }, 30s))
      << "directories a cut-short creation or removal left are still there";
  // Nothing else went: the live topic, the metadata log, what is no
  // partition's.
  EXPECT_TRUE(has_dir(node, "t-0"));
  EXPECT_TRUE(has_dir(node, "__cluster_metadata-0"));
  EXPECT_TRUE(has_dir(node, "other-0"));
  EXPECT_TRUE(node.disk().contents(DiskView::kCurrent, "other-0/notes.txt").has_value());
  EXPECT_TRUE(has_dir(node, "misc"));
}

}  // namespace
}  // namespace brook::sim
