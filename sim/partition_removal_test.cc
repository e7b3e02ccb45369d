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
// - A creation cut short leaves a partition's directory empty, or with only
//   the temporary copy of partition.metadata, and a removal cut short a
//   `-delete` directory (a removal renames the directory first): the broker
//   removes them when it comes back, and leaves alone what it does not know.
// - A removal that fails partway (its disk failing) leaves no partition
//   directory that would be opened again without its first segments.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
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
// - gone-0: empty (a creation that got no further than the directory);
// - t-0.<id>-delete: a removal cut short after its rename, with a segment
//   and partition.metadata left (the live topic's partition, by name);
// - half-1: only partition.metadata's temporary copy (a creation cut short
//   before the rename);
// - old-0: the partition.metadata of a topic id no image holds;
// - other-0: a partition-like name with a file that is no broker's;
// - misc: no partition's name.
constexpr std::string_view kCutShortRemoval = "t-0.0123456789abcdef0123456789abcdef-delete";

io::Task<absl::Status> leave_debris(io::Context* ctx) {
  io::Disk& disk = ctx->disk();
  static constexpr std::string_view kDirs[] = {"gone-0", "half-1", "old-0", "other-0", "misc", kCutShortRemoval};
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
  const std::string segment = std::string(kCutShortRemoval) + "/00000000000000000000.log";
  CO_ASSIGN_OR_RETURN(std::unique_ptr<io::File> left, co_await disk.open(segment, io::OpenMode::kCreate));
  io::BufferChain left_bytes(io::Buffer::copy_of(std::string(100, 'x')));
  CO_RETURN_IF_ERROR(co_await left->append(std::move(left_bytes)));
  CO_RETURN_IF_ERROR(co_await left->close());
  CO_ASSIGN_OR_RETURN(std::unique_ptr<io::File> notes, co_await disk.open("other-0/notes.txt", io::OpenMode::kCreate));
  io::BufferChain notes_text(io::Buffer::copy_of(std::string("kept\n")));
  CO_RETURN_IF_ERROR(co_await notes->append(std::move(notes_text)));
  CO_RETURN_IF_ERROR(co_await notes->close());
  const net::Uuid unknown = net::random_uuid(ctx->random());
  CO_RETURN_IF_ERROR(co_await storage::write_partition_metadata(
      disk, "old-0/" + std::string(storage::kPartitionMetadataFileName), unknown));
  CO_RETURN_IF_ERROR(co_await storage::write_partition_metadata(
      disk, std::string(kCutShortRemoval) + "/" + std::string(storage::kPartitionMetadataFileName), unknown));
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
  const std::string cut_short(kCutShortRemoval);
  ASSERT_TRUE(has_dir(node, "gone-0") && has_dir(node, "half-1") && has_dir(node, "old-0") &&
              has_dir(node, cut_short));
  EXPECT_TRUE(cluster.world.run_until(
      [&] {
        return !has_dir(node, "gone-0") && !has_dir(node, "half-1") && !has_dir(node, "old-0") &&
               !has_dir(node, cut_short);
      },
      30s))
      << "directories a cut-short creation or removal left are still there";
  // And durably so: a crash now would not bring the `-delete` one back.
  EXPECT_TRUE(cluster.world.run_until(
      [&] {
        const std::vector<std::string> durable = node.disk().directories(DiskView::kDurable);
        return std::find(durable.begin(), durable.end(), cut_short) == durable.end();
      },
      100ms))
      << cut_short << " is gone from the disk's current view but not from its durable one";
  // Nothing else went: the live topic, the metadata log, what is no
  // partition's.
  EXPECT_TRUE(has_dir(node, "t-0"));
  EXPECT_TRUE(has_dir(node, "__cluster_metadata-0"));
  EXPECT_TRUE(has_dir(node, "other-0"));
  EXPECT_TRUE(node.disk().contents(DiskView::kCurrent, "other-0/notes.txt").has_value());
  EXPECT_TRUE(has_dir(node, "misc"));
}

// Asks for t-0's replicas to be `replicas` (in that order) until the
// request is taken, then waits until `probe`'s metadata shows them all,
// and all in the ISR; whether it did within a minute.
io::Task<bool> reassign_until_done(io::Context* ctx, client::Cluster* admin, std::vector<int32_t> replicas,
                                   io::Address probe) {
  bool taken = false;
  for (int i = 0; i < 100 && !taken; ++i) {
    std::map<client::TopicPartition, std::optional<std::vector<int32_t>>> targets;
    targets.emplace(client::TopicPartition("t", 0), replicas);
    absl::StatusOr<std::map<client::TopicPartition, absl::Status>> out =
        co_await client::alter_partition_reassignments(*admin, std::move(targets));
    taken = out.ok() && out->size() == 1 && out->begin()->second.ok();
    if (!taken) co_await ctx->clock().sleep_for(200ms);
  }
  std::vector<int32_t> sorted = replicas;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 600 && taken; ++i) {
    const std::vector<PartitionState> states = co_await partition_states(ctx, probe, "t");
    if (states.size() == 1 && states[0].replicas == replicas && states[0].isr == sorted) co_return true;
    co_await ctx->clock().sleep_for(100ms);
  }
  co_return false;
}

// A reassignment moves t-0 off broker 1 while broker 1's disk fails half
// its directory operations, then moves it back. Whatever the removal got
// done before an operation failed, broker 1 must end up with the whole
// log, kept whole or fetched again: never a directory that lost its first
// segments but kept partition.metadata, which broker 1 would open again as
// a log starting past records the leader still has (a removal that took
// the files in place did that, and the replica then led the partition
// without them).
TEST(PartitionRemoval, ARemovalCutShortNeverLeavesALogMissingItsStart) {
  constexpr int kRuns = 12;
  int cut_short = 0;  // runs whose removal on broker 1 failed partway
  for (uint64_t seed = 1; seed <= kRuns; ++seed) {
    SCOPED_TRACE(seed);
    broker::Broker* one = nullptr;
    TestCluster cluster(700 + seed, 2, [&](ServerNodeOptions& o) {
      if (o.index == 0) o.on_broker = [&](broker::Broker* b) { one = b; };
    });
    bool setup_ok = false;
    std::string setup_failure;
    bool moved_back = false;
    bool done = false;
    cluster.client->start([&](io::Context& ctx) -> io::Task<void> {
      co_await ctx.clock().sleep_for(3s);
      client::Cluster admin(ctx, sim_client_options(cluster.brokers, "admin"));
      client::NewTopic t{.name = "t", .partitions = 1, .replication_factor = 1, .configs = {}};
      t.configs["segment.bytes"] = "40000";  // four records a segment
      std::vector<client::NewTopic> topics;
      topics.push_back(t);
      absl::StatusOr<std::map<std::string, client::CreatedTopic>> created =
          co_await client::create_topics(admin, topics);
      const std::vector<int32_t> on_one{1};
      if (!created.ok() || !co_await reassign_until_done(&ctx, &admin, on_one, cluster.broker(2))) {
        setup_failure = created.ok() ? "moving t-0 to broker 1" : created.status().ToString();
        done = true;
        co_return;
      }
      for (int i = 0; i < 40; ++i) {
        std::optional<net::ProduceResponse::PartitionProduceResponse> out;
        for (int tries = 0; tries < 50 && !(out.has_value() && out->error_code == 0); ++tries) {
          if (tries > 0) co_await ctx.clock().sleep_for(100ms);  // broker 1 may not know yet that it leads
          out = co_await produce_one(&ctx, cluster.broker(1), "t", 0, net::RecordBatchOptions{},
                                     std::string(10000, 'x'), std::nullopt);
        }
        if (!out.has_value() || out->error_code != 0) {
          setup_failure = fmt::format("produce {}: {}", i, out.has_value() ? out->error_code : -1);
          done = true;
          co_return;
        }
      }
      setup_ok = true;
      DiskFaults failing;
      failing.metadata_error_probability = 0.5;
      cluster.server(1).disk().set_faults(failing);
      const std::vector<int32_t> on_two{2};
      const bool moved = co_await reassign_until_done(&ctx, &admin, on_two, cluster.broker(2));
      for (int i = 0; i < 50 && one != nullptr && one->partitions().contains({"t", 0}); ++i) {
        co_await ctx.clock().sleep_for(100ms);
      }
      co_await ctx.clock().sleep_for(1s);
      cluster.server(1).disk().set_faults(DiskFaults{});
      const std::vector<std::string> dirs = cluster.server(1).disk().directories(DiskView::kCurrent);
      if (std::any_of(dirs.begin(), dirs.end(), [](const std::string& d) { return d.starts_with("t-0"); })) {
        ++cut_short;
      }
      const std::vector<int32_t> on_both{2, 1};
      moved_back = moved && co_await reassign_until_done(&ctx, &admin, on_both, cluster.broker(2));
      done = true;
    });
    ASSERT_TRUE(cluster.world.run_until([&] { return done; }, 600s));
    ASSERT_TRUE(setup_ok) << setup_failure;
    ASSERT_TRUE(moved_back);
    ASSERT_NE(one, nullptr);
    const auto it = one->partitions().find({"t", 0});
    ASSERT_NE(it, one->partitions().end());
    EXPECT_EQ(it->second->log->log_start_offset(), 0) << "broker 1 took t-0 back without its first records";
    EXPECT_EQ(it->second->log->log_end_offset(), 40);
  }
  std::printf("%d of %d removals were cut short\n", cut_short, kRuns);
  // Else the runs above checked nothing: no removal failed partway.
  EXPECT_GT(cut_short, 0);
}

}  // namespace
}  // namespace brook::sim
