// sim/offset_fetch_forward_test.cc
//
// OffsetFetch at a broker that is not the group's coordinator, in a
// three-node cluster in the simulator: the broker asks the coordinator and
// answers with its committed offsets, in every version's shape; a request
// it was forwarded is not forwarded again; and a coordinator it cannot
// reach makes the answer COORDINATOR_LOAD_IN_PROGRESS, which clients retry,
// never NOT_COORDINATOR, which leaves librdkafka's partitions unfetched.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/broker/broker.h"
#include "io/when.h"
#include "net/client/group.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/offset_fetch_request.h"
#include "net/kafka/messages/offset_fetch_response.h"
#include "net/kafka/rpc.h"
#include "sim/broker.h"
#include "sim/test_cluster.h"
#include "sim/world.h"

namespace brook::sim {
namespace {

using namespace std::chrono_literals;
using net::Error;

constexpr std::string_view kGroup = "moving-group";
constexpr int kNodes = 3;
// The client id a forwarding broker (node 9) would send.
const std::string kForwarded = std::string(broker::kOffsetFetchForwardClientId) + "-9";

// One OffsetFetch's answer: the group's error (wherever the version puts
// it) and the committed offsets of t-0 and t-1.
struct Answer {
  bool ok = false;
  Error error = Error::kNone;
  std::map<int32_t, int64_t> offsets;
};

io::Task<Answer> fetch(io::Context* ctx, io::Address broker, int16_t version, std::string client_id) {
  net::Peer peer(ctx->network(), ctx->clock(), broker, std::move(client_id));
  net::OffsetFetchRequest r;
  if (version < 8) {
    r.group_id = std::string(kGroup);
    auto& t = r.topics.emplace().emplace_back();
    t.name = "t";
    t.partition_indexes = {0, 1};
  } else {
    auto& g = r.groups.emplace_back();
    g.group_id = std::string(kGroup);
    auto& t = g.topics.emplace().emplace_back();
    t.name = "t";
    t.partition_indexes = {0, 1};
  }
  absl::StatusOr<net::OffsetFetchResponse> out = co_await peer.call<net::OffsetFetchResponse>(r, version, 20s);
  Answer a;
  if (!out.ok()) co_return a;
  // v8+ and the older versions name their topic types differently.
  auto take = [&a](const auto& topics) {
    for (const auto& t : topics) {
      for (const auto& p : t.partitions) {
        if (p.error_code != 0 && a.error == Error::kNone) a.error = static_cast<Error>(p.error_code);
        a.offsets[p.partition_index] = p.committed_offset;
      }
    }
  };
  if (version >= 8) {
    if (out->groups.size() != 1) co_return a;
    a.error = static_cast<Error>(out->groups.front().error_code);
    take(out->groups.front().topics);
  } else {
    if (version >= 2) a.error = static_cast<Error>(out->error_code);
    take(out->topics);
  }
  a.ok = true;
  co_return a;
}

struct Outcome {
  bool done = false;
  // By broker index, then version.
  std::map<int, std::map<int16_t, Answer>> forwarded;
  std::map<int, Answer> direct;  // asked as a forwarding broker asks
  std::optional<int> coordinator;
  Answer cut_off;  // from a broker that cannot reach the coordinator
  io::Duration cut_off_took{0};
  // Leaders of __consumer_offsets' partitions, as the cut-off broker saw
  // them while its forwarded request was under way.
  std::vector<int32_t> offsets_leaders_meanwhile;
};

class OffsetFetchForward : public ::testing::Test {
 protected:
  OffsetFetchForward()
      : cluster_(29, kNodes, [](ServerNodeOptions& o) {
          o.offsets_partitions = 5;
          o.offsets_replication_factor = kNodes;
        }) {}

  // Commits t-0 at 42 and t-1 at 7 for the group, retrying until the
  // cluster takes it.
  io::Task<void> commit(io::Context* ctx) {
    co_await ctx->clock().sleep_for(3s);
    client::Cluster admin(*ctx, sim_client_options(brokers_, "admin"));
    co_await create_topic_until_done(ctx, &admin, "t", 2, kNodes);
    client::Cluster cluster(*ctx, sim_client_options(brokers_, "committer"));
    client::GroupOptions g;
    g.group_id = std::string(kGroup);
    client::GroupMember m(cluster, g);
    const std::map<client::TopicPartition, int64_t> offsets{{client::TopicPartition("t", 0), 42},
                                                           {client::TopicPartition("t", 1), 7}};
    while (!(co_await m.commit(offsets)).ok()) co_await ctx->clock().sleep_for(200ms);
  }

  // Asks every broker for the group's offsets as a forwarding broker asks,
  // so that only the coordinator answers them; records each answer and the
  // coordinator.
  io::Task<void> find_coordinator(io::Context* ctx) {
    for (int i = 0; i < kNodes; ++i) {
      Answer direct = co_await fetch(ctx, brokers_[static_cast<size_t>(i)], 7, kForwarded);
      if (direct.ok && direct.error == Error::kNone) out_.coordinator = i;
      out_.direct[i] = direct;
    }
  }

  // Commits, finds the coordinator, and cuts the next broker off from it
  // (the client reaches both); that broker's index, or nullopt (and the
  // test done) without a coordinator.
  io::Task<std::optional<size_t>> cut_off_a_broker(io::Context* ctx) {
    co_await commit(ctx);
    co_await find_coordinator(ctx);
    if (!out_.coordinator.has_value()) {
      out_.done = true;
      co_return std::nullopt;
    }
    const int other = (*out_.coordinator + 1) % kNodes;
    cluster_.cut(other + 1, *out_.coordinator + 1);
    co_return static_cast<size_t>(other);
  }

  TestCluster cluster_;
  World& world_ = cluster_.world;
  const std::vector<Node*>& servers_ = cluster_.servers;
  Node* const client_ = cluster_.client;
  const std::vector<io::Address>& brokers_ = cluster_.brokers;
  Outcome out_;
};

TEST_F(OffsetFetchForward, EveryBrokerAnswersWithTheCoordinatorsOffsets) {
  client_->start([this](io::Context& ctx) -> io::Task<void> {
    co_await commit(&ctx);
    co_await find_coordinator(&ctx);
    for (int i = 0; i < kNodes; ++i) {
      for (int16_t v : {int16_t{1}, int16_t{3}, int16_t{7}, int16_t{8}}) {
        out_.forwarded[i][v] = co_await fetch(&ctx, brokers_[static_cast<size_t>(i)], v, "consumer");
      }
    }
    out_.done = true;
  });
  ASSERT_TRUE(world_.run_until([&] { return out_.done; }, 300s));
  ASSERT_TRUE(out_.coordinator.has_value());
  for (int i = 0; i < kNodes; ++i) {
    if (i != *out_.coordinator) {
      EXPECT_TRUE(out_.direct[i].ok);
      EXPECT_EQ(net::code(out_.direct[i].error), net::code(Error::kNotCoordinator)) << "broker " << i;
    }
    for (const auto& [v, a] : out_.forwarded[i]) {
      SCOPED_TRACE(testing::Message() << "broker " << i << " v" << v);
      EXPECT_TRUE(a.ok);
      EXPECT_EQ(net::code(a.error), 0);
      EXPECT_EQ(a.offsets, (std::map<int32_t, int64_t>{{0, 42}, {1, 7}}));
    }
  }
}

TEST_F(OffsetFetchForward, AnUnreachableCoordinatorIsRetriable) {
  client_->start([this](io::Context& ctx) -> io::Task<void> {
    const std::optional<size_t> other = co_await cut_off_a_broker(&ctx);
    if (!other.has_value()) co_return;
    out_.cut_off = co_await fetch(&ctx, brokers_[*other], 7, "consumer");
    world_.network().heal();
    out_.done = true;
  });
  ASSERT_TRUE(world_.run_until([&] { return out_.done; }, 300s));
  ASSERT_TRUE(out_.coordinator.has_value());
  EXPECT_TRUE(out_.cut_off.ok);
  EXPECT_EQ(net::code(out_.cut_off.error), net::code(Error::kCoordinatorLoadInProgress));
  // From v2 a group's error comes alone, as Kafka answers it.
  EXPECT_TRUE(out_.cut_off.offsets.empty());
}

// The coordinator crashes while a broker cut off from it waits for its
// forwarded OffsetFetch; the controller fences it and moves the group's
// partition, which replaces the waiting broker's metadata image. The
// broker's answer must not read the replaced image (ASan sees it if it
// does) and is still COORDINATOR_LOAD_IN_PROGRESS.
TEST_F(OffsetFetchForward, TheCoordinatorMovesWhileTheForwardWaits) {
  client_->start([this](io::Context& ctx) -> io::Task<void> {
    const std::optional<size_t> other = co_await cut_off_a_broker(&ctx);
    if (!other.has_value()) co_return;
    const io::Instant start = ctx.clock().now();
    std::tuple<Answer, std::vector<int32_t>> both = co_await io::when_all(
        fetch(&ctx, brokers_[*other], 7, "consumer"),
        crash_then_leaders(&ctx, servers_[static_cast<size_t>(*out_.coordinator)], 4400ms, brokers_[*other],
                           "__consumer_offsets"));
    out_.cut_off = std::get<0>(both);
    out_.offsets_leaders_meanwhile = std::get<1>(both);
    out_.cut_off_took = ctx.clock().now() - start;
    out_.done = true;
  });
  ASSERT_TRUE(world_.run_until([&] { return out_.done; }, 300s));
  ASSERT_TRUE(out_.coordinator.has_value());
  const int32_t coordinator_id = *out_.coordinator + 1;
  // The partitions moved off the crashed broker before the forward gave up.
  ASSERT_EQ(out_.offsets_leaders_meanwhile.size(), 5u);
  for (int32_t leader : out_.offsets_leaders_meanwhile) EXPECT_NE(leader, coordinator_id);
  EXPECT_GE(out_.cut_off_took, 4500ms);
  EXPECT_TRUE(out_.cut_off.ok);
  EXPECT_EQ(net::code(out_.cut_off.error), net::code(Error::kCoordinatorLoadInProgress));
}

}  // namespace
}  // namespace brook::sim
