// sim/log_maintenance_test.cc
//
// The broker's log maintenance, in the simulator, on every replica of a
// three-broker cluster:
// - retention deletes the segments past retention.ms once they are below
//   the high watermark, every log.retention.check.interval.ms, with the
//   broker's log.* defaults where a topic sets none;
// - the cleaner compacts a cleanup.policy=compact topic every
//   log.cleaner.backoff.ms, keeping each key's latest record;
// - a log start moved by DeleteRecords (log-start-offset-checkpoint)
//   survives power loss of every node; a corrupt checkpoint counts as
//   none.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/broker/broker.h"
#include "net/client/admin.h"
#include "sim/broker.h"
#include "sim/test_cluster.h"
#include "sim/world.h"
#include "storage/checkpoint.h"

namespace brook::sim {
namespace {

using namespace std::chrono_literals;

constexpr int kNodes = 3;
constexpr int kRounds = 8;
constexpr int kKeys = 5;

struct Replica {
  int64_t log_start = -1;
  size_t segments = 0;
  std::vector<std::pair<int64_t, std::string>> records;
};

// Each running broker's replica of partition 0 of `topic`, by node index.
io::Task<std::map<int, Replica>> replicas_of(const std::vector<broker::Broker*>& running, std::string topic) {
  std::map<int, Replica> out;
  for (size_t i = 0; i < running.size(); ++i) {
    if (running[i] == nullptr) continue;
    auto it = running[i]->partitions().find({topic, 0});
    if (it == running[i]->partitions().end()) continue;
    storage::Log* log = it->second->log.get();
    Replica r;
    r.log_start = log->log_start_offset();
    r.segments = log->segment_count();
    absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> read =
        co_await read_log(log, log->log_start_offset(), log->log_end_offset());
    if (read.ok()) r.records = *std::move(read);
    out[static_cast<int>(i)] = std::move(r);
  }
  co_return out;
}

TEST(LogMaintenance, RetentionAndTheCleanerRunOnEveryReplica) {
  std::vector<broker::Broker*> running(kNodes, nullptr);
  TestCluster cluster(11, kNodes, [&](ServerNodeOptions& o) {
    o.min_insync = 2;
    const int index = o.index;  // by value: the options outlive this call
    o.adjust_broker_config = [](broker::BrokerConfig& c) {
      c.log_retention_check_interval = 1s;
      c.log_cleaner_backoff = 1s;
      // The broker's defaults for topics that set none, as
      // server.properties sets them: topic k keeps its records forever.
      c.static_configs["log.segment.bytes"] = "1024";
      c.static_configs["log.retention.ms"] = "-1";
    };
    o.on_broker = [&running, index](broker::Broker* b) { running[static_cast<size_t>(index)] = b; };
  });
  bool done = false;
  bool setup_ok = false;
  std::map<int, Replica> retained;
  std::map<int, Replica> kept;
  std::map<int, Replica> compacted;
  cluster.client->start([&](io::Context& ctx) -> io::Task<void> {
    co_await ctx.clock().sleep_for(3s);
    client::Cluster admin(ctx, sim_client_options(cluster.brokers, "admin"));
    std::vector<client::NewTopic> topics;
    // Every record has timestamp 1 (produce_one): past any retention.ms.
    topics.push_back(client::NewTopic{
        .name = "r", .partitions = 1, .replication_factor = kNodes,
        .configs = {{"segment.bytes", "1024"}, {"retention.ms", "60000"}}});
    topics.push_back(client::NewTopic{.name = "k", .partitions = 1, .replication_factor = kNodes, .configs = {}});
    topics.push_back(client::NewTopic{
        .name = "c", .partitions = 1, .replication_factor = kNodes,
        .configs = {{"cleanup.policy", "compact"}, {"segment.bytes", "1024"},
                    {"min.cleanable.dirty.ratio", "0.01"}}});
    absl::StatusOr<std::map<std::string, client::CreatedTopic>> created = co_await client::create_topics(admin, topics);
    if (!created.ok() || created->size() != 3 || !created->at("r").status.ok() || !created->at("c").status.ok() ||
        !created->at("k").status.ok()) {
      done = true;
      co_return;
    }
    std::map<std::string, io::Address> leader;
    for (const std::string topic : {"c", "r", "k"}) {
      std::vector<int32_t> leaders;
      while (leaders.empty() || leaders.front() < 0) {
        co_await ctx.clock().sleep_for(200ms);
        leaders = co_await partition_leaders(&ctx, cluster.broker(1), topic);
      }
      leader[topic] = cluster.broker(leaders.front());
    }
    for (int round = 0; round < kRounds; ++round) {
      for (int key = 0; key < kKeys; ++key) {
        const std::string value = fmt::format("k{}-round{}-{}", key, round, std::string(100, 'x'));
        const std::string key_name = fmt::format("k{}", key);
        std::optional<net::ProduceResponse::PartitionProduceResponse> c = co_await produce_one(
            &ctx, leader["c"], "c", 0, net::RecordBatchOptions{}, value, std::nullopt, 30s, key_name);
        std::optional<net::ProduceResponse::PartitionProduceResponse> r =
            co_await produce_one(&ctx, leader["r"], "r", 0, net::RecordBatchOptions{}, value, std::nullopt);
        std::optional<net::ProduceResponse::PartitionProduceResponse> k =
            co_await produce_one(&ctx, leader["k"], "k", 0, net::RecordBatchOptions{}, value, std::nullopt);
        if (!c.has_value() || c->error_code != 0 || !r.has_value() || r->error_code != 0 || !k.has_value() ||
            k->error_code != 0) {
          done = true;
          co_return;
        }
      }
    }
    setup_ok = true;
    co_await ctx.clock().sleep_for(5s);
    retained = co_await replicas_of(running, "r");
    kept = co_await replicas_of(running, "k");
    compacted = co_await replicas_of(running, "c");
    done = true;
  });
  ASSERT_TRUE(cluster.world.run_until([&] { return done; }, 600s));
  ASSERT_TRUE(setup_ok);
  ASSERT_EQ(retained.size(), static_cast<size_t>(kNodes));
  ASSERT_EQ(compacted.size(), static_cast<size_t>(kNodes));
  for (const auto& [node, r] : retained) {
    // All but the records of the active segment (each segment holds a few).
    EXPECT_GT(r.log_start, kRounds * kKeys / 2) << "node " << node;
    EXPECT_LE(r.segments, 2u) << "node " << node;
  }
  ASSERT_EQ(kept.size(), static_cast<size_t>(kNodes));
  for (const auto& [node, k] : kept) {
    EXPECT_EQ(k.log_start, 0) << "node " << node;
    EXPECT_EQ(k.records.size(), static_cast<size_t>(kRounds * kKeys)) << "node " << node;
    EXPECT_GT(k.segments, 2u) << "node " << node;
  }
  for (const auto& [node, c] : compacted) {
    // Each key's last value is there; most older ones are gone.
    std::map<std::string, std::string> latest;
    for (const auto& [offset, value] : c.records) latest[value.substr(0, value.find('-'))] = value;
    for (int key = 0; key < kKeys; ++key) {
      const std::string k = fmt::format("k{}", key);
      EXPECT_EQ(latest[k].substr(0, latest[k].find('-', latest[k].find('-') + 1)),
                fmt::format("k{}-round{}", key, kRounds - 1))
          << "node " << node;
    }
    EXPECT_LT(c.records.size(), static_cast<size_t>(kRounds * kKeys / 2)) << "node " << node;
  }
}

// DeleteRecords moves partition d-0's start to 10 on a three-broker
// cluster; every node loses power, its checkpoint file rotted when `rot`;
// the earliest offset after the restart is `want_earliest`.
void power_loss_after_delete_records(uint64_t seed, bool rot, int64_t want_earliest) {
  TestCluster cluster(seed, kNodes, [&](ServerNodeOptions& o) { o.min_insync = 2; });
  enum class Step { kSetUp, kDeleted, kRestarted, kListed, kFailed };
  Step step = Step::kSetUp;
  std::optional<int64_t> low_watermark;
  std::optional<int64_t> earliest;
  cluster.client->start([&](io::Context& ctx) -> io::Task<void> {
    co_await ctx.clock().sleep_for(3s);
    client::Cluster admin(ctx, sim_client_options(cluster.brokers, "admin"));
    co_await create_topic_until_done(&ctx, &admin, "d", 1, kNodes);
    std::vector<int32_t> leaders;
    while (leaders.empty() || leaders.front() < 0) {
      co_await ctx.clock().sleep_for(200ms);
      leaders = co_await partition_leaders(&ctx, cluster.broker(1), "d");
    }
    for (int i = 0; i < 20; ++i) {
      const std::string value = fmt::format("d{}", i);
      // Until the leader has opened its replica and the ISR has formed.
      for (int attempt = 0;; ++attempt) {
        std::optional<net::ProduceResponse::PartitionProduceResponse> out = co_await produce_one(
            &ctx, cluster.broker(leaders.front()), "d", 0, net::RecordBatchOptions{}, value, std::nullopt);
        if (out.has_value() && out->error_code == 0) break;
        if (attempt == 50) {
          step = Step::kFailed;
          co_return;
        }
        co_await ctx.clock().sleep_for(200ms);
      }
    }
    std::map<client::TopicPartition, int64_t> to;
    to[client::TopicPartition("d", 0)] = 10;
    std::map<client::TopicPartition, absl::StatusOr<int64_t>> deleted = co_await client::delete_records(admin, to);
    if (deleted.size() == 1 && deleted.begin()->second.ok()) low_watermark = *deleted.begin()->second;
    co_await ctx.clock().sleep_for(2s);  // the followers fetch the new start
    step = Step::kDeleted;
    while (step != Step::kRestarted) co_await ctx.clock().sleep_for(100ms);
    client::Cluster reader(ctx, sim_client_options(cluster.brokers, "reader"));
    std::vector<client::TopicPartition> partitions;
    partitions.emplace_back("d", 0);
    std::map<client::TopicPartition, absl::StatusOr<client::ListedOffset>> listed =
        co_await client::list_offsets(reader, partitions, client::kEarliestOffset);
    if (listed.size() == 1 && listed.begin()->second.ok()) earliest = listed.begin()->second->offset;
    step = Step::kListed;
  });
  ASSERT_TRUE(cluster.world.run_until([&] { return step == Step::kDeleted || step == Step::kFailed; }, 120s));
  ASSERT_EQ(step, Step::kDeleted);
  ASSERT_EQ(low_watermark, std::optional<int64_t>(10));
  // Power loss everywhere at once: only what was synced stays.
  for (int id = 1; id <= kNodes; ++id) {
    cluster.server(id).crash();
    const std::string checkpoint(storage::kLogStartOffsetCheckpointFileName);
    if (rot) {
      ASSERT_TRUE(cluster.server(id).disk().inject_bit_rot(checkpoint, 0).ok());
    }
  }
  for (int id = 1; id <= kNodes; ++id) cluster.server(id).restart();
  step = Step::kRestarted;
  ASSERT_TRUE(cluster.world.run_until([&] { return step == Step::kListed; }, 120s));
  EXPECT_EQ(earliest, std::optional<int64_t>(want_earliest));
}

TEST(LogMaintenance, ALogStartMovedByDeleteRecordsSurvivesPowerLossOfEveryNode) {
  power_loss_after_delete_records(12, false, 10);
}

// As Kafka: a corrupt checkpoint counts as none, and the brokers start.
TEST(LogMaintenance, ACorruptLogStartCheckpointCountsAsNone) {
  power_loss_after_delete_records(12, true, 0);
}

}  // namespace
}  // namespace brook::sim
