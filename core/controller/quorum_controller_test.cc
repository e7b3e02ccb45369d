// core/controller/quorum_controller_test.cc
//
// The QuorumController on a one-voter quorum in the simulator: requests are
// made through its typed entry points and their effects read back from the
// committed image.
#include "core/controller/quorum_controller.h"
#include "net/kafka/messages/describe_configs_request.h"
#include "net/kafka/messages/describe_configs_response.h"
#include "net/kafka/messages/api_versions_request.h"
#include "net/kafka/messages/api_versions_response.h"
#include "core/controller/acls.h"
#include "core/controller/client_quotas.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "io/scope.h"
#include "sim/world.h"

namespace brook::controller {
namespace {

using namespace std::chrono_literals;

constexpr uint16_t kPort = 9093;
const char* const kClusterId = "MkU3OEVBNTcwNTJENDM2Qk";

struct Harness;
io::Task<void> node_main(io::Context* ctx, Harness* h);

struct Harness {
  // `configure` adjusts the controller's configuration.
  explicit Harness(uint64_t seed = 1, int16_t bootstrap_mv = kMetadataVersionLatest,
                   std::function<void(ControllerConfig&)> configure = {})
      : world(seed), bootstrap_mv(bootstrap_mv), configure(std::move(configure)) {
    sim::Node& node = world.add_node();
    address = node.address(kPort);
    node.start([this](io::Context& ctx) { return node_main(&ctx, this); });
    const bool ready = world.run_until(
        [&] {
          return controller != nullptr && controller->active() &&
                 controller->image().features().metadata_version == this->bootstrap_mv;
        },
        30s);
    EXPECT_TRUE(ready);
  }

  template <typename T>
  T call(io::Task<T> task) {
    std::optional<T> out;
    world.node(0).spawn(capture(std::move(task), &out));
    EXPECT_TRUE(world.run_until([&] { return out.has_value(); }, 60s));
    // The answer comes once the write commits; the controller's own
    // listener sees it a moment later.
    EXPECT_TRUE(world.run_until([&] { return controller->committed_end() >= raft->high_watermark(); }, 60s));
    return std::move(*out);
  }

  template <typename T>
  static io::Task<void> capture(io::Task<T> task, std::optional<T>* out) {
    *out = co_await std::move(task);
  }

  const metadata::MetadataImage& image() const { return controller->image(); }

  ControllerConfig config() const {
    ControllerConfig c;
    c.node_id = 1;
    c.cluster_id = kClusterId;
    c.broker_session_timeout = 2s;
    c.bootstrap_metadata_version = bootstrap_mv;
    if (configure) configure(c);
    return c;
  }

  // Registers broker `id` and heartbeats until it is unfenced.
  int64_t add_broker(int32_t id, std::optional<std::string> rack = std::nullopt) {
    net::BrokerRegistrationRequest r;
    r.broker_id = id;
    r.cluster_id = kClusterId;
    r.incarnation_id.bytes[0] = static_cast<uint8_t>(id);
    r.incarnation_id.bytes[15] = 1;
    r.rack = std::move(rack);
    net::BrokerRegistrationRequest::Feature mv;
    mv.name = "metadata.version";
    mv.min_supported_version = kMetadataVersionMin;
    mv.max_supported_version = kMetadataVersionLatest;
    r.features.push_back(mv);
    net::BrokerRegistrationResponse registered = call(controller->register_broker(r));
    EXPECT_EQ(registered.error_code, 0);
    net::BrokerHeartbeatResponse hb = heartbeat(id, registered.broker_epoch);
    EXPECT_EQ(hb.error_code, 0);
    EXPECT_FALSE(hb.is_fenced);
    return registered.broker_epoch;
  }

  net::BrokerHeartbeatResponse heartbeat(int32_t id, int64_t epoch, bool want_shut_down = false) {
    net::BrokerHeartbeatRequest h;
    h.broker_id = id;
    h.broker_epoch = epoch;
    h.current_metadata_offset = controller->committed_end();
    h.want_shut_down = want_shut_down;
    return call(controller->heartbeat(h));
  }

  net::CreateTopicsResponse::CreatableTopicResult create(const std::string& name, int32_t partitions,
                                                         int16_t rf) {
    net::CreateTopicsRequest r;
    net::CreateTopicsRequest::CreatableTopic t;
    t.name = name;
    t.num_partitions = partitions;
    t.replication_factor = rf;
    r.topics.push_back(t);
    net::CreateTopicsResponse resp = call(controller->create_topics(r, 7));
    EXPECT_EQ(resp.topics.size(), 1u);
    return resp.topics.at(0);
  }

  // The leader `leader` (broker epoch `epoch`) sets partition `id`'s ISR
  // (AlterPartition); the partition's error code.
  int16_t set_isr(const std::string& topic, int32_t id, int32_t leader, int64_t epoch, std::vector<int32_t> isr) {
    const metadata::PartitionRegistration p = image().topics().topic(topic)->partitions.at(id);
    net::AlterPartitionRequest r;
    r.broker_id = leader;
    r.broker_epoch = epoch;
    auto& t = r.topics.emplace_back();
    t.topic_id = image().topics().topic(topic)->id;
    auto& d = t.partitions.emplace_back();
    d.partition_index = id;
    d.leader_epoch = p.leader_epoch;
    d.partition_epoch = p.partition_epoch;
    for (int32_t b : isr) {
      auto& s = d.new_isr_with_epochs.emplace_back();
      s.broker_id = b;
      s.broker_epoch = -1;
    }
    return call(controller->alter_partition(r, 3)).topics.at(0).partitions.at(0).error_code;
  }

  sim::World world;
  int16_t bootstrap_mv;
  std::function<void(ControllerConfig&)> configure;
  io::Address address;
  raft::RaftNode* raft = nullptr;
  QuorumController* controller = nullptr;
};

io::Task<void> node_main(io::Context* ctx, Harness* h) {
  raft::RaftConfig rc;
  rc.node_id = 1;
  rc.voters.emplace(1, h->address);
  rc.cluster_id = kClusterId;
  absl::StatusOr<std::unique_ptr<raft::RaftNode>> opened = co_await raft::RaftNode::open(*ctx, rc);
  BROOK_ASSERT(opened.ok());
  std::unique_ptr<raft::RaftNode> node = std::move(*opened);
  absl::StatusOr<std::unique_ptr<io::Listener>> listener = co_await ctx->network().listen(h->address);
  BROOK_ASSERT(listener.ok());
  QuorumController controller(*ctx, *node, h->config());
  node->set_listener(&controller);
  h->raft = node.get();
  h->controller = &controller;
  io::TaskScope tasks(ctx->executor());
  tasks.spawn(controller.run());
  QuorumController* c = &controller;
  (void)co_await node->run(**listener, [c](net::RequestFrame f) { return c->handle_request(std::move(f)); });
  h->controller = nullptr;
  h->raft = nullptr;
}

// SCRAM credentials from `brook format --add-scram` are in the new
// cluster's first batch, with metadata.version.
TEST(QuorumController, BootstrapRecordsAreWrittenWithTheMetadataVersion) {
  Harness h(1, kMetadataVersionLatest, [](ControllerConfig& c) {
    net::UserScramCredentialRecord r;
    r.name = "broker";
    r.mechanism = 1;
    r.salt = io::Buffer::copy_of(std::string_view("salt"));
    r.stored_key = io::Buffer::copy_of(std::string_view("stored"));
    r.server_key = io::Buffer::copy_of(std::string_view("server"));
    r.iterations = 4096;
    c.bootstrap_records.emplace_back(std::move(r));
  });
  ASSERT_EQ(h.image().scram().mechanisms.at(1).count("broker"), 1u);
  EXPECT_EQ(h.image().scram().mechanisms.at(1).at("broker").stored_key, "stored");
}

TEST(QuorumController, BootstrapsMetadataVersion) {
  Harness h;
  EXPECT_EQ(h.image().features().metadata_version, kMetadataVersionLatest);
}

TEST(QuorumController, RegistersAndUnfencesBrokers) {
  Harness h;
  const int64_t epoch = h.add_broker(1, "rack-a");
  const metadata::BrokerRegistration* b = h.image().cluster().broker(1);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->epoch, epoch);
  EXPECT_FALSE(b->fenced);
  EXPECT_EQ(b->rack, "rack-a");
  // The broker epoch is the offset of the registration record.
  EXPECT_GT(epoch, 0);
  // Another incarnation while the session lives is refused.
  net::BrokerRegistrationRequest other;
  other.broker_id = 1;
  other.cluster_id = kClusterId;
  other.incarnation_id.bytes[3] = 9;
  net::BrokerRegistrationRequest::Feature mv;
  mv.name = "metadata.version";
  mv.min_supported_version = kMetadataVersionMin;
  mv.max_supported_version = kMetadataVersionLatest;
  other.features.push_back(mv);
  EXPECT_EQ(h.call(h.controller->register_broker(other)).error_code,
            net::code(net::Error::kDuplicateBrokerRegistration));
  other.cluster_id = "another-cluster";
  EXPECT_EQ(h.call(h.controller->register_broker(other)).error_code,
            net::code(net::Error::kInconsistentClusterId));
  // A stale epoch is refused.
  EXPECT_EQ(h.heartbeat(1, epoch - 1).error_code, net::code(net::Error::kStaleBrokerEpoch));
}

TEST(QuorumController, CreatesTopicsAcrossRacks) {
  Harness h;
  h.add_broker(1, "a");
  h.add_broker(2, "a");
  h.add_broker(3, "b");
  h.add_broker(4, "b");
  auto created = h.create("orders", 8, 2);
  ASSERT_EQ(created.error_code, 0) << created.error_message.value_or("");
  EXPECT_EQ(created.num_partitions, 8);
  EXPECT_EQ(created.replication_factor, 2);
  const metadata::TopicImage* topic = h.image().topics().topic("orders");
  ASSERT_NE(topic, nullptr);
  EXPECT_EQ(topic->id, created.topic_id);
  ASSERT_EQ(topic->partitions.size(), 8u);
  std::map<std::string, int> rack_leaders;
  for (const auto& [id, p] : topic->partitions) {
    ASSERT_EQ(p.replicas.size(), 2u);
    const auto rack = [&](int32_t b) { return *h.image().cluster().broker(b)->rack; };
    EXPECT_NE(rack(p.replicas[0]), rack(p.replicas[1])) << "partition " << id;
    EXPECT_EQ(p.isr, p.replicas);
    EXPECT_EQ(p.leader, p.replicas[0]);
    ++rack_leaders[rack(p.leader)];
  }
  // Leaders spread evenly over the racks.
  EXPECT_EQ(rack_leaders["a"], 4);
  EXPECT_EQ(rack_leaders["b"], 4);

  EXPECT_EQ(h.create("orders", 1, 1).error_code, net::code(net::Error::kTopicAlreadyExists));
  EXPECT_EQ(h.create("bad name", 1, 1).error_code, net::code(net::Error::kInvalidTopicException));
  EXPECT_EQ(h.create("my.topic", 1, 1).error_code, 0);
  EXPECT_EQ(h.create("my_topic", 1, 1).error_code, net::code(net::Error::kInvalidTopicException));
  EXPECT_EQ(h.create("wide", 1, 5).error_code, net::code(net::Error::kInvalidReplicationFactor));
  EXPECT_EQ(h.create("none", 0, 1).error_code, net::code(net::Error::kInvalidPartitions));
  EXPECT_EQ(h.create("defaults", -1, -1).error_code, 0);
  // Within one request too.
  net::CreateTopicsRequest both;
  for (const char* name : {"a.b", "a_b"}) {
    net::CreateTopicsRequest::CreatableTopic t;
    t.name = name;
    t.num_partitions = 1;
    t.replication_factor = 1;
    both.topics.push_back(t);
  }
  net::CreateTopicsResponse r = h.call(h.controller->create_topics(both, 7));
  ASSERT_EQ(r.topics.size(), 2u);
  EXPECT_EQ(r.topics[0].error_code, 0);
  EXPECT_EQ(r.topics[1].error_code, net::code(net::Error::kInvalidTopicException));
  EXPECT_EQ(h.image().topics().topic("defaults")->partitions.size(), 1u);
}

TEST(QuorumController, ExpiredSessionFencesAndMovesLeaders) {
  Harness h;
  const int64_t e1 = h.add_broker(1);
  const int64_t e2 = h.add_broker(2);
  ASSERT_EQ(h.create("t", 4, 2).error_code, 0);
  // Broker 2 keeps heartbeating; broker 1 stops.
  for (int i = 0; i < 10; ++i) {
    h.world.run_for(500ms);
    EXPECT_EQ(h.heartbeat(2, e2).error_code, 0);
  }
  EXPECT_TRUE(h.image().cluster().broker(1)->fenced);
  EXPECT_FALSE(h.image().cluster().broker(2)->fenced);
  for (const auto& [id, p] : h.image().topics().topic("t")->partitions) {
    EXPECT_EQ(p.leader, 2) << id;
    EXPECT_EQ(p.isr, std::vector<int32_t>{2}) << id;
  }
  // Broker 2 goes too: the ISR keeps its last member, without a leader.
  h.world.run_for(5s);
  for (const auto& [id, p] : h.image().topics().topic("t")->partitions) {
    EXPECT_EQ(p.leader, -1) << id;
    EXPECT_EQ(p.isr, std::vector<int32_t>{2}) << id;
  }
  // Broker 1 is back but out of the ISR: still no leader (no unclean
  // election); broker 2 back leads again.
  EXPECT_FALSE(h.heartbeat(1, e1).is_fenced);
  EXPECT_EQ(h.image().topics().topic("t")->partitions.at(0).leader, -1);
  EXPECT_FALSE(h.heartbeat(2, e2).is_fenced);
  for (const auto& [id, p] : h.image().topics().topic("t")->partitions) EXPECT_EQ(p.leader, 2) << id;
}

// Broker 1 lapses and comes back; broker 2 (leader epoch `e2`) takes it
// back into the ISRs of the partitions that prefer it. Returns those.
std::vector<int32_t> lapse_and_rejoin_broker_1(Harness& h, int64_t e1, int64_t e2) {
  std::vector<int32_t> preferring_1;
  for (const auto& [id, p] : h.image().topics().topic("t")->partitions) {
    if (p.replicas.front() == 1) preferring_1.push_back(id);
  }
  for (int i = 0; i < 6; ++i) {
    h.world.run_for(500ms);
    EXPECT_EQ(h.heartbeat(2, e2).error_code, 0);
  }
  EXPECT_TRUE(h.image().cluster().broker(1)->fenced);
  EXPECT_FALSE(h.heartbeat(1, e1).is_fenced);
  for (int32_t id : preferring_1) EXPECT_EQ(h.set_isr("t", id, 2, e2, {2, 1}), 0);
  return preferring_1;
}

TEST(QuorumController, MovesLeadershipBackToPreferredReplicasInTheIsr) {
  Harness h(1, kMetadataVersionLatest, [](ControllerConfig& c) { c.leader_imbalance_check_interval = 10s; });
  const int64_t e1 = h.add_broker(1);
  const int64_t e2 = h.add_broker(2);
  ASSERT_EQ(h.create("t", 4, 2).error_code, 0);
  std::vector<int32_t> preferring_1;
  for (const auto& [id, p] : h.image().topics().topic("t")->partitions) {
    EXPECT_EQ(p.leader, p.replicas.front()) << id;
    if (p.replicas.front() == 1) preferring_1.push_back(id);
  }
  ASSERT_FALSE(preferring_1.empty());
  auto beat_both_for = [&](io::Duration d) {
    for (io::Duration t{0}; t < d; t += 500ms) {
      h.world.run_for(500ms);
      EXPECT_EQ(h.heartbeat(1, e1).error_code, 0);
      EXPECT_EQ(h.heartbeat(2, e2).error_code, 0);
    }
  };
  // Broker 1's session lapses: broker 2 leads everything, alone in the ISR.
  for (int i = 0; i < 6; ++i) {
    h.world.run_for(500ms);
    EXPECT_EQ(h.heartbeat(2, e2).error_code, 0);
  }
  ASSERT_TRUE(h.image().cluster().broker(1)->fenced);
  EXPECT_FALSE(h.heartbeat(1, e1).is_fenced);
  // Back, but out of the ISR: leadership stays with broker 2.
  beat_both_for(25s);
  for (int32_t id : preferring_1) EXPECT_EQ(h.image().topics().topic("t")->partitions.at(id).leader, 2) << id;
  // Broker 2 takes broker 1 back into the ISRs; within an interval broker 1
  // leads its preferred partitions again.
  for (int32_t id : preferring_1) ASSERT_EQ(h.set_isr("t", id, 2, e2, {2, 1}), 0);
  beat_both_for(12s);
  for (const auto& [id, p] : h.image().topics().topic("t")->partitions) EXPECT_EQ(p.leader, p.replicas.front()) << id;
  for (int32_t id : preferring_1) EXPECT_EQ(h.image().topics().topic("t")->partitions.at(id).isr.size(), 2u) << id;
}

TEST(QuorumController, LeavesLeadershipAloneWithAutoLeaderRebalanceOff) {
  Harness h(1, kMetadataVersionLatest, [](ControllerConfig& c) {
    c.auto_leader_rebalance = false;
    c.leader_imbalance_check_interval = 1s;
  });
  const int64_t e1 = h.add_broker(1);
  const int64_t e2 = h.add_broker(2);
  ASSERT_EQ(h.create("t", 4, 2).error_code, 0);
  const std::vector<int32_t> preferring_1 = lapse_and_rejoin_broker_1(h, e1, e2);
  ASSERT_FALSE(preferring_1.empty());
  for (int i = 0; i < 20; ++i) {
    h.world.run_for(500ms);
    EXPECT_EQ(h.heartbeat(1, e1).error_code, 0);
    EXPECT_EQ(h.heartbeat(2, e2).error_code, 0);
  }
  for (int32_t id : preferring_1) {
    const metadata::PartitionRegistration& p = h.image().topics().topic("t")->partitions.at(id);
    EXPECT_EQ(p.leader, 2) << id;
    EXPECT_EQ(p.isr.size(), 2u) << id;
  }
}

TEST(QuorumController, ElectsPreferredAndUncleanLeadersOnRequest) {
  Harness h;
  const int64_t e1 = h.add_broker(1);
  const int64_t e2 = h.add_broker(2);
  ASSERT_EQ(h.create("t", 4, 2).error_code, 0);
  std::vector<int32_t> preferring_1;
  for (const auto& [id, p] : h.image().topics().topic("t")->partitions) {
    if (p.replicas.front() == 1) preferring_1.push_back(id);
  }
  ASSERT_FALSE(preferring_1.empty());
  auto elect = [&](int8_t type, std::optional<std::vector<int32_t>> partitions) {
    net::ElectLeadersRequest r;
    r.election_type = type;
    if (partitions.has_value()) {
      auto& t = r.topic_partitions->emplace_back();
      t.topic = "t";
      t.partitions = *partitions;
    } else {
      r.topic_partitions = std::nullopt;
    }
    net::ElectLeadersResponse out = h.call(h.controller->elect_leaders(r, 2));
    EXPECT_EQ(out.error_code, 0);
    std::map<int32_t, int16_t> errors;
    for (const auto& t : out.replica_election_results) {
      for (const auto& p : t.partition_result) errors[p.partition_id] = p.error_code;
    }
    return errors;
  };
  const int16_t not_needed = net::code(net::Error::kElectionNotNeeded);
  const int16_t preferred_unavailable = net::code(net::Error::kPreferredLeaderNotAvailable);
  // Every leader is preferred: nothing to do (and, for all partitions,
  // nothing to list).
  for (const auto& [id, error] : elect(0, std::vector<int32_t>{0, 1, 2, 3})) EXPECT_EQ(error, not_needed) << id;
  EXPECT_TRUE(elect(0, std::nullopt).empty());
  EXPECT_EQ(elect(0, std::vector<int32_t>{9}).at(9), net::code(net::Error::kUnknownTopicOrPartition));

  // Broker 1 lapses and comes back out of the ISRs: its preferred
  // partitions cannot go back to it until it is in their ISR again.
  for (int i = 0; i < 6; ++i) {
    h.world.run_for(500ms);
    EXPECT_EQ(h.heartbeat(2, e2).error_code, 0);
  }
  EXPECT_FALSE(h.heartbeat(1, e1).is_fenced);
  std::map<int32_t, int16_t> refused = elect(0, std::nullopt);
  EXPECT_EQ(refused.size(), preferring_1.size());
  for (int32_t id : preferring_1) EXPECT_EQ(refused[id], preferred_unavailable) << id;
  for (int32_t id : preferring_1) ASSERT_EQ(h.set_isr("t", id, 2, e2, {2, 1}), 0);
  for (const auto& [id, error] : elect(0, preferring_1)) EXPECT_EQ(error, 0) << id;
  for (const auto& [id, p] : h.image().topics().topic("t")->partitions) EXPECT_EQ(p.leader, p.replicas.front()) << id;

  // Both lapse; only broker 1 comes back, outside the ISR of the partitions
  // broker 2 kept: UNCLEAN elects it there (the ISR becomes it alone).
  for (const auto& [id, p] : h.image().topics().topic("t")->partitions) {
    if (p.replicas.front() == 2) {
      ASSERT_EQ(h.set_isr("t", id, 2, e2, {2}), 0);
    }
  }
  h.world.run_for(5s);
  EXPECT_FALSE(h.heartbeat(1, e1).is_fenced);
  std::vector<int32_t> leaderless;
  for (const auto& [id, p] : h.image().topics().topic("t")->partitions) {
    if (p.leader == metadata::kNoLeader) leaderless.push_back(id);
  }
  ASSERT_FALSE(leaderless.empty());
  for (const auto& [id, error] : elect(0, leaderless)) EXPECT_EQ(error, preferred_unavailable) << id;
  for (const auto& [id, error] : elect(1, std::vector<int32_t>{0, 1, 2, 3})) {
    const bool was_leaderless = std::find(leaderless.begin(), leaderless.end(), id) != leaderless.end();
    EXPECT_EQ(error, was_leaderless ? 0 : not_needed) << id;
  }
  for (int32_t id : leaderless) {
    const metadata::PartitionRegistration& p = h.image().topics().topic("t")->partitions.at(id);
    EXPECT_EQ(p.leader, 1) << id;
    EXPECT_EQ(p.isr, std::vector<int32_t>{1}) << id;
  }
}

TEST(QuorumController, ControlledShutdownMovesLeadershipFirst) {
  Harness h;
  const int64_t e1 = h.add_broker(1);
  const int64_t e2 = h.add_broker(2);
  ASSERT_EQ(h.create("t", 4, 2).error_code, 0);
  net::BrokerHeartbeatResponse r = h.heartbeat(1, e1, true);
  EXPECT_EQ(r.error_code, 0);
  EXPECT_FALSE(r.should_shut_down);
  EXPECT_TRUE(h.image().cluster().broker(1)->in_controlled_shutdown);
  for (const auto& [id, p] : h.image().topics().topic("t")->partitions) {
    EXPECT_EQ(p.leader, 2) << id;
    EXPECT_EQ(p.isr, std::vector<int32_t>{2}) << id;
  }
  r = h.heartbeat(1, e1, true);
  EXPECT_TRUE(r.should_shut_down);
  EXPECT_TRUE(r.is_fenced);
  EXPECT_TRUE(h.image().cluster().broker(1)->fenced);
  EXPECT_EQ(h.heartbeat(2, e2).error_code, 0);
  // The fenced broker has no session left: its next incarnation (a
  // restart) registers at once, as with Kafka's BrokerHeartbeatManager.
  // (Found by restarting a real `brook server`: the restart was refused
  // DUPLICATE_BROKER_REGISTRATION until the old session timed out.)
  net::BrokerRegistrationRequest again;
  again.broker_id = 1;
  again.cluster_id = kClusterId;
  again.incarnation_id.bytes[7] = 42;
  net::BrokerRegistrationRequest::Feature mv;
  mv.name = "metadata.version";
  mv.min_supported_version = kMetadataVersionMin;
  mv.max_supported_version = kMetadataVersionLatest;
  again.features.push_back(mv);
  net::BrokerRegistrationResponse registered = h.call(h.controller->register_broker(again));
  EXPECT_EQ(registered.error_code, 0);
  EXPECT_GT(registered.broker_epoch, e1);
}

TEST(QuorumController, AlterPartitionChecksEpochs) {
  Harness h;
  h.add_broker(1);
  const int64_t e2 = h.add_broker(2);
  ASSERT_EQ(h.create("t", 1, 2).error_code, 0);
  // Copies: every committed write replaces the image.
  const net::Uuid topic_id = h.image().topics().topic("t")->id;
  const metadata::PartitionRegistration p = h.image().topics().topic("t")->partitions.at(0);
  const int32_t leader = p.leader;
  const int64_t leader_epoch_b = h.image().cluster().broker(leader)->epoch;
  const int32_t follower = leader == 1 ? 2 : 1;
  auto alter = [&](int32_t broker, int64_t broker_epoch, std::vector<int32_t> isr, int32_t partition_epoch) {
    net::AlterPartitionRequest r;
    r.broker_id = broker;
    r.broker_epoch = broker_epoch;
    net::AlterPartitionRequest::TopicData t;
    t.topic_id = topic_id;
    net::AlterPartitionRequest::PartitionData d;
    d.partition_index = 0;
    d.leader_epoch = p.leader_epoch;
    d.partition_epoch = partition_epoch;
    for (int32_t b : isr) {
      net::AlterPartitionRequest::BrokerState s;
      s.broker_id = b;
      s.broker_epoch = -1;
      d.new_isr_with_epochs.push_back(s);
    }
    t.partitions.push_back(d);
    r.topics.push_back(t);
    return h.call(h.controller->alter_partition(r, 3));
  };
  net::AlterPartitionResponse shrunk = alter(leader, leader_epoch_b, {leader}, p.partition_epoch);
  ASSERT_EQ(shrunk.error_code, 0);
  ASSERT_EQ(shrunk.topics.at(0).partitions.at(0).error_code, 0);
  EXPECT_EQ(shrunk.topics[0].partitions[0].isr, std::vector<int32_t>{leader});
  EXPECT_EQ(shrunk.topics[0].partitions[0].partition_epoch, p.partition_epoch + 1);
  EXPECT_EQ(shrunk.topics[0].partitions[0].leader_epoch, p.leader_epoch);
  EXPECT_EQ(h.image().topics().topic("t")->partitions.at(0).isr, std::vector<int32_t>{leader});
  // The old partition epoch is stale now.
  EXPECT_EQ(alter(leader, leader_epoch_b, {leader, follower}, p.partition_epoch).topics[0].partitions[0].error_code,
            net::code(net::Error::kInvalidUpdateVersion));
  // Only the leader may alter, with its current broker epoch.
  EXPECT_EQ(alter(follower, follower == 2 ? e2 : h.image().cluster().broker(1)->epoch, {leader, follower},
                  p.partition_epoch + 1).topics[0].partitions[0].error_code,
            net::code(net::Error::kInvalidRequest));
  EXPECT_EQ(alter(leader, leader_epoch_b + 1000, {leader}, p.partition_epoch + 1).error_code,
            net::code(net::Error::kStaleBrokerEpoch));
  // A new ISR must hold the leader, and replicas only.
  EXPECT_EQ(alter(leader, leader_epoch_b, {follower}, p.partition_epoch + 1).topics[0].partitions[0].error_code,
            net::code(net::Error::kInvalidRequest));
  EXPECT_EQ(alter(leader, leader_epoch_b, {leader, 7}, p.partition_epoch + 1).topics[0].partitions[0].error_code,
            net::code(net::Error::kInvalidRequest));
  // Expanding back works.
  net::AlterPartitionResponse grown = alter(leader, leader_epoch_b, {leader, follower}, p.partition_epoch + 1);
  EXPECT_EQ(grown.topics[0].partitions[0].error_code, 0);
  EXPECT_EQ(h.image().topics().topic("t")->partitions.at(0).isr.size(), 2u);
}

// AlterPartitionReassignments for one partition (null `replicas`
// cancels); the partition's error code and message.
std::pair<int16_t, std::optional<std::string>> reassign(Harness& h, const std::string& topic, int32_t partition,
                                                        std::optional<std::vector<int32_t>> replicas) {
  net::AlterPartitionReassignmentsRequest r;
  auto& t = r.topics.emplace_back();
  t.name = topic;
  auto& p = t.partitions.emplace_back();
  p.partition_index = partition;
  p.replicas = std::move(replicas);
  net::AlterPartitionReassignmentsResponse resp = h.call(h.controller->alter_partition_reassignments(r));
  EXPECT_EQ(resp.error_code, 0);
  const auto& out = resp.responses.at(0).partitions.at(0);
  return {out.error_code, out.error_message};
}

// ListPartitionReassignments of every partition: "topic-partition" to
// (replicas, adding, removing).
std::map<std::string, std::vector<std::vector<int32_t>>> ongoing(Harness& h) {
  net::ListPartitionReassignmentsRequest r;
  r.topics = std::nullopt;
  net::ListPartitionReassignmentsResponse resp = h.call(h.controller->list_partition_reassignments(r));
  EXPECT_EQ(resp.error_code, 0);
  std::map<std::string, std::vector<std::vector<int32_t>>> out;
  for (const auto& t : resp.topics) {
    for (const auto& p : t.partitions) {
      out[fmt::format("{}-{}", t.name, p.partition_index)] = {p.replicas, p.adding_replicas, p.removing_replicas};
    }
  }
  return out;
}

TEST(QuorumController, ReassignsPartitions) {
  Harness h;
  const int64_t e1 = h.add_broker(1);
  h.add_broker(2);
  const int64_t e3 = h.add_broker(3);
  h.add_broker(4);
  net::CreateTopicsRequest create;
  auto& ct = create.topics.emplace_back();
  ct.name = "t";
  ct.num_partitions = -1;
  ct.replication_factor = -1;
  for (int32_t i = 0; i < 2; ++i) {
    auto& a = ct.assignments.emplace_back();
    a.partition_index = i;
    a.broker_ids = {1, 2};
  }
  ASSERT_EQ(h.call(h.controller->create_topics(create, 7)).topics.at(0).error_code, 0);
  auto part = [&](int32_t i) { return h.image().topics().topic("t")->partitions.at(i); };
  using V = std::vector<int32_t>;
  ASSERT_EQ(part(0).leader, 1);
  const int32_t epoch0 = part(0).leader_epoch;

  // A move of replica 1 to 3: 3 joins as an adding replica, 1 stays as a
  // removing one until 3 is in the ISR.
  EXPECT_EQ(reassign(h, "t", 0, V{3, 2}).first, 0);
  EXPECT_EQ(part(0).replicas, (V{3, 2, 1}));
  EXPECT_EQ(part(0).adding_replicas, V{3});
  EXPECT_EQ(part(0).removing_replicas, V{1});
  EXPECT_EQ(part(0).isr, (V{1, 2}));
  EXPECT_EQ(part(0).leader, 1);
  EXPECT_EQ(part(0).leader_epoch, epoch0);
  auto listed = ongoing(h);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed["t-0"], (std::vector<V>{{3, 2, 1}, {3}, {1}}));
  // The leader's ISR expansion to 3 completes it: 1 leaves the replicas
  // and the ISR, and a new leader is elected in the target's order.
  ASSERT_EQ(h.set_isr("t", 0, 1, e1, {1, 2, 3}), 0);
  EXPECT_EQ(part(0).replicas, (V{3, 2}));
  EXPECT_TRUE(part(0).adding_replicas.empty());
  EXPECT_TRUE(part(0).removing_replicas.empty());
  EXPECT_EQ(part(0).isr, (V{2, 3}));
  EXPECT_EQ(part(0).leader, 3);
  EXPECT_EQ(part(0).leader_epoch, epoch0 + 1);
  EXPECT_TRUE(ongoing(h).empty());

  // Dropping a follower completes at once; the leader stays, in a new
  // epoch that fences the removed replica.
  EXPECT_EQ(reassign(h, "t", 0, V{3}).first, 0);
  EXPECT_EQ(part(0).replicas, V{3});
  EXPECT_EQ(part(0).isr, V{3});
  EXPECT_EQ(part(0).leader, 3);
  EXPECT_EQ(part(0).leader_epoch, epoch0 + 2);
  // The same replicas again change nothing.
  const int32_t partition_epoch = part(0).partition_epoch;
  EXPECT_EQ(reassign(h, "t", 0, V{3}).first, 0);
  EXPECT_EQ(part(0).partition_epoch, partition_epoch);

  // Dropping the leader moves leadership.
  EXPECT_EQ(reassign(h, "t", 1, V{2}).first, 0);
  EXPECT_EQ(part(1).replicas, V{2});
  EXPECT_EQ(part(1).leader, 2);
  // Growing keeps the leader and its epoch; a cancellation takes the
  // adding replicas out again.
  const int32_t epoch1 = part(1).leader_epoch;
  EXPECT_EQ(reassign(h, "t", 1, V{2, 4, 3}).first, 0);
  EXPECT_EQ(part(1).replicas, (V{2, 4, 3}));
  EXPECT_EQ(part(1).adding_replicas, (V{4, 3}));
  EXPECT_EQ(part(1).leader_epoch, epoch1);
  EXPECT_EQ(reassign(h, "t", 1, std::nullopt).first, 0);
  EXPECT_EQ(part(1).replicas, V{2});
  EXPECT_TRUE(part(1).adding_replicas.empty());
  EXPECT_EQ(part(1).isr, V{2});
  EXPECT_EQ(part(1).leader, 2);
  EXPECT_EQ(reassign(h, "t", 1, std::nullopt).first, net::code(net::Error::kNoReassignmentInProgress));
  // A new target replaces an ongoing reassignment, measured from the
  // replicas it has (as Kafka's controller does): 4, being added, is now
  // removed, and a cancellation goes back to those replicas.
  EXPECT_EQ(reassign(h, "t", 1, V{2, 4}).first, 0);
  EXPECT_EQ(reassign(h, "t", 1, V{2, 3}).first, 0);
  EXPECT_EQ(part(1).replicas, (V{2, 3, 4}));
  EXPECT_EQ(part(1).adding_replicas, V{3});
  EXPECT_EQ(part(1).removing_replicas, V{4});
  EXPECT_EQ(reassign(h, "t", 1, std::nullopt).first, 0);
  EXPECT_EQ(part(1).replicas, (V{2, 4}));
  EXPECT_TRUE(part(1).adding_replicas.empty());
  EXPECT_TRUE(part(1).removing_replicas.empty());
  // A new target made only of replicas the partition has (3, being added,
  // among them) completes at once: 3 is left to catch up as a follower.
  EXPECT_EQ(reassign(h, "t", 1, V{2, 4, 3}).first, 0);
  EXPECT_EQ(reassign(h, "t", 1, V{2, 3}).first, 0);
  EXPECT_EQ(part(1).replicas, (V{2, 3}));
  EXPECT_EQ(part(1).isr, V{2});
  EXPECT_TRUE(ongoing(h).empty());

  // Refusals, each with Kafka's message.
  EXPECT_EQ(reassign(h, "nope", 0, V{1}),
            std::make_pair(net::code(net::Error::kUnknownTopicOrPartition),
                           std::optional<std::string>("Unable to find a topic named nope.")));
  EXPECT_EQ(reassign(h, "t", 7, V{1}).first, net::code(net::Error::kUnknownTopicOrPartition));
  EXPECT_EQ(reassign(h, "t", 1, V{}).first, net::code(net::Error::kInvalidReplicaAssignment));
  EXPECT_EQ(reassign(h, "t", 1, V{2, 9}),
            std::make_pair(net::code(net::Error::kInvalidReplicaAssignment),
                           std::optional<std::string>("The manual partition assignment includes broker 9, "
                                                      "but no such broker is registered.")));
  EXPECT_EQ(reassign(h, "t", 1, V{3, 1, 3}).first, net::code(net::Error::kInvalidReplicaAssignment));
  EXPECT_EQ(part(1).replicas, (V{2, 3}));

  // Cancelling a reassignment whose ISR holds only adding replicas would
  // need an unclean election.
  EXPECT_EQ(reassign(h, "t", 0, V{1, 4}).first, 0);
  EXPECT_EQ(part(0).replicas, (V{1, 4, 3}));
  ASSERT_EQ(h.set_isr("t", 0, 3, e3, {3, 1}), 0);  // 4 is not in yet
  EXPECT_EQ(part(0).adding_replicas, (V{1, 4}));
  h.heartbeat(3, e3, /*want_shut_down=*/true);     // 3 leaves the ISR
  EXPECT_EQ(part(0).isr, V{1});
  EXPECT_EQ(part(0).leader, 1);
  EXPECT_EQ(reassign(h, "t", 0, std::nullopt),
            std::make_pair(net::code(net::Error::kInvalidReplicaAssignment),
                           std::optional<std::string>("Unable to revert partition assignment for t:0 because it "
                                                      "would require an unclean leader election.")));
  EXPECT_EQ(part(0).replicas, (V{1, 4, 3}));
  EXPECT_EQ(ongoing(h).size(), 1u);
  // New partitions take the replication factor the first partition is
  // being reassigned to (2), not its replicas while it moves (3).
  net::CreatePartitionsRequest cp;
  auto& grow = cp.topics.emplace_back();
  grow.name = "t";
  grow.count = 3;
  grow.assignments = std::nullopt;
  ASSERT_EQ(h.call(h.controller->create_partitions(cp)).results.at(0).error_code, 0);
  EXPECT_EQ(part(2).replicas.size(), 2u);
}

TEST(QuorumController, ProducerIdBlocksDoNotOverlap) {
  Harness h;
  const int64_t e1 = h.add_broker(1);
  int64_t next = 0;
  for (int i = 0; i < 3; ++i) {
    net::AllocateProducerIdsRequest r;
    r.broker_id = 1;
    r.broker_epoch = e1;
    net::AllocateProducerIdsResponse resp = h.call(h.controller->allocate_producer_ids(r));
    ASSERT_EQ(resp.error_code, 0);
    EXPECT_EQ(resp.producer_id_start, next);
    EXPECT_EQ(resp.producer_id_len, kProducerIdBlockSize);
    next += kProducerIdBlockSize;
  }
  net::AllocateProducerIdsRequest stale;
  stale.broker_id = 1;
  stale.broker_epoch = e1 + 1;
  EXPECT_EQ(h.call(h.controller->allocate_producer_ids(stale)).error_code,
            net::code(net::Error::kStaleBrokerEpoch));
}

TEST(QuorumController, DeletesTopicsAndAddsPartitions) {
  Harness h;
  h.add_broker(1);
  h.add_broker(2);
  ASSERT_EQ(h.create("a", 2, 2).error_code, 0);
  net::CreatePartitionsRequest cp;
  net::CreatePartitionsRequest::CreatePartitionsTopic t;
  t.name = "a";
  t.count = 5;
  t.assignments = std::nullopt;
  cp.topics.push_back(t);
  net::CreatePartitionsResponse grown = h.call(h.controller->create_partitions(cp));
  ASSERT_EQ(grown.results.at(0).error_code, 0);
  EXPECT_EQ(h.image().topics().topic("a")->partitions.size(), 5u);
  EXPECT_EQ(h.image().topics().topic("a")->partitions.at(4).replicas.size(), 2u);
  cp.topics[0].count = 3;
  EXPECT_EQ(h.call(h.controller->create_partitions(cp)).results.at(0).error_code,
            net::code(net::Error::kInvalidPartitions));
  net::DeleteTopicsRequest del;
  del.topic_names = {"a", "missing"};
  net::DeleteTopicsResponse deleted = h.call(h.controller->delete_topics(del, 5));
  ASSERT_EQ(deleted.responses.size(), 2u);
  EXPECT_EQ(deleted.responses[0].error_code, 0);
  EXPECT_EQ(deleted.responses[1].error_code, net::code(net::Error::kUnknownTopicOrPartition));
  EXPECT_EQ(h.image().topics().topic("a"), nullptr);
  // The name may be used again.
  EXPECT_EQ(h.create("a", 1, 1).error_code, 0);
}

TEST(QuorumController, AltersConfigs) {
  Harness h;
  h.add_broker(1);
  ASSERT_EQ(h.create("t", 1, 1).error_code, 0);
  net::IncrementalAlterConfigsRequest r;
  net::IncrementalAlterConfigsRequest::AlterConfigsResource res;
  res.resource_type = metadata::kConfigResourceTopic;
  res.resource_name = "t";
  net::IncrementalAlterConfigsRequest::AlterableConfig c;
  c.name = "retention.ms";
  c.config_operation = 0;
  c.value = "1000";
  res.configs.push_back(c);
  r.resources.push_back(res);
  EXPECT_EQ(h.call(h.controller->incremental_alter_configs(r)).responses.at(0).error_code, 0);
  const metadata::ConfigMap* m =
      h.image().configs().find(metadata::ConfigResource{metadata::kConfigResourceTopic, "t"});
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->at("retention.ms"), "1000");
  // A value of the wrong type, and an unknown topic.
  r.resources[0].configs[0].value = "soon";
  EXPECT_EQ(h.call(h.controller->incremental_alter_configs(r)).responses.at(0).error_code,
            net::code(net::Error::kInvalidConfig));
  r.resources[0].resource_name = "missing";
  EXPECT_EQ(h.call(h.controller->incremental_alter_configs(r)).responses.at(0).error_code,
            net::code(net::Error::kUnknownTopicOrPartition));
  // Delete.
  r.resources[0].resource_name = "t";
  r.resources[0].configs[0].config_operation = 1;
  EXPECT_EQ(h.call(h.controller->incremental_alter_configs(r)).responses.at(0).error_code, 0);
  EXPECT_EQ(h.image().configs().find(metadata::ConfigResource{metadata::kConfigResourceTopic, "t"}), nullptr);
}

net::CreateAclsRequest::AclCreation acl(int8_t type, std::string name, int8_t pattern, std::string principal) {
  net::CreateAclsRequest::AclCreation c;
  c.resource_type = type;
  c.resource_name = std::move(name);
  c.resource_pattern_type = pattern;
  c.principal = std::move(principal);
  c.host = "*";
  c.operation = 3;        // READ
  c.permission_type = 3;  // ALLOW
  return c;
}

TEST(QuorumController, CreatesAndDeletesAcls) {
  Harness h;
  net::CreateAclsRequest create;
  create.creations.push_back(acl(2, "orders", kPatternLiteral, "User:alice"));
  create.creations.push_back(acl(2, "pay", kPatternPrefixed, "User:bob"));
  create.creations.push_back(acl(2, "orders", kAclAny, "User:alice"));        // no concrete pattern
  create.creations.push_back(acl(2, "orders", kPatternLiteral, "alice"));     // no principal type
  create.creations.push_back(acl(2, "orders", kPatternLiteral, "User:alice"));  // a repeat
  net::CreateAclsResponse created = h.call(h.controller->create_acls(create));
  ASSERT_EQ(created.results.size(), 5u);
  EXPECT_EQ(created.results[0].error_code, 0);
  EXPECT_EQ(created.results[1].error_code, 0);
  EXPECT_EQ(created.results[2].error_code, net::code(net::Error::kInvalidRequest));
  EXPECT_EQ(created.results[3].error_code, net::code(net::Error::kInvalidRequest));
  EXPECT_EQ(created.results[4].error_code, 0);
  EXPECT_EQ(h.image().acls().acls.size(), 2u);

  // MATCH finds the prefixed ACL whose prefix starts the name.
  net::DeleteAclsRequest del;
  net::DeleteAclsRequest::DeleteAclsFilter f;
  f.resource_type_filter = kAclAny;
  f.resource_name_filter = "payments";
  f.pattern_type_filter = kPatternMatch;
  f.principal_filter = std::nullopt;
  f.host_filter = std::nullopt;
  f.operation = kAclAny;
  f.permission_type = kAclAny;
  del.filters.push_back(f);
  net::DeleteAclsResponse deleted = h.call(h.controller->delete_acls(del));
  ASSERT_EQ(deleted.filter_results.size(), 1u);
  EXPECT_EQ(deleted.filter_results[0].error_code, 0);
  ASSERT_EQ(deleted.filter_results[0].matching_acls.size(), 1u);
  EXPECT_EQ(deleted.filter_results[0].matching_acls[0].principal, "User:bob");
  ASSERT_EQ(h.image().acls().acls.size(), 1u);
  EXPECT_EQ(h.image().acls().acls.begin()->second.principal, "User:alice");
}

TEST(QuorumController, DescribesAclsByFilterGroupedByResource) {
  Harness h;
  net::CreateAclsRequest create;
  create.creations.push_back(acl(2, "orders", kPatternLiteral, "User:alice"));
  create.creations.push_back(acl(2, "orders", kPatternLiteral, "User:carol"));
  create.creations.push_back(acl(2, "*", kPatternLiteral, "User:dave"));
  create.creations.push_back(acl(2, "pay", kPatternPrefixed, "User:bob"));
  create.creations.push_back(acl(3, "orders", kPatternLiteral, "User:erin"));  // a group
  for (const auto& r : h.call(h.controller->create_acls(create)).results) ASSERT_EQ(r.error_code, 0);

  auto describe = [&](int8_t type, std::optional<std::string> name, int8_t pattern,
                      std::optional<std::string> principal = std::nullopt) {
    net::DescribeAclsRequest r;
    r.resource_type_filter = type;
    r.resource_name_filter = std::move(name);
    r.pattern_type_filter = pattern;
    r.principal_filter = std::move(principal);
    r.host_filter = std::nullopt;
    r.operation = kAclAny;
    r.permission_type = kAclAny;
    return describe_acls(h.image().acls(), r);
  };
  auto principals = [](const net::DescribeAclsResponse::DescribeAclsResource& r) {
    std::set<std::string> out;
    for (const auto& a : r.acls) out.insert(a.principal);
    return out;
  };

  // Everything: one entry per resource pattern.
  net::DescribeAclsResponse all = describe(kAclAny, std::nullopt, kAclAny);
  EXPECT_EQ(all.error_code, 0);
  ASSERT_EQ(all.resources.size(), 4u);
  size_t bindings = 0;
  for (const auto& r : all.resources) bindings += r.acls.size();
  EXPECT_EQ(bindings, 5u);

  // LITERAL "orders" on topics: exactly that pattern, both of its ACLs.
  net::DescribeAclsResponse literal = describe(2, "orders", kPatternLiteral);
  ASSERT_EQ(literal.resources.size(), 1u);
  EXPECT_EQ(literal.resources[0].resource_name, "orders");
  EXPECT_EQ(literal.resources[0].pattern_type, kPatternLiteral);
  EXPECT_EQ(principals(literal.resources[0]), (std::set<std::string>{"User:alice", "User:carol"}));

  // MATCH "payments": the wildcard and the prefix "pay", not "orders".
  net::DescribeAclsResponse match = describe(2, "payments", kPatternMatch);
  ASSERT_EQ(match.resources.size(), 2u);
  std::set<std::string> names;
  for (const auto& r : match.resources) names.insert(r.resource_name);
  EXPECT_EQ(names, (std::set<std::string>{"*", "pay"}));

  // By principal, across resource types.
  net::DescribeAclsResponse erin = describe(kAclAny, std::nullopt, kAclAny, "User:erin");
  ASSERT_EQ(erin.resources.size(), 1u);
  EXPECT_EQ(erin.resources[0].resource_type, 3);

  // UNKNOWN (0) or out-of-range values are refused, not matched.
  EXPECT_EQ(describe(0, std::nullopt, kAclAny).error_code, net::code(net::Error::kInvalidRequest));
  net::DescribeAclsResponse bad = describe(kAclAny, std::nullopt, 9);
  EXPECT_EQ(bad.error_code, net::code(net::Error::kInvalidRequest));
  EXPECT_TRUE(bad.resources.empty());
}

TEST(QuorumController, AltersClientQuotas) {
  Harness h;
  auto alter = [&](std::optional<std::string> user, std::string key, double value, bool remove) {
    net::AlterClientQuotasRequest r;
    net::AlterClientQuotasRequest::EntryData e;
    net::AlterClientQuotasRequest::EntityData entity;
    entity.entity_type = "user";
    entity.entity_name = std::move(user);
    e.entity.push_back(entity);
    net::AlterClientQuotasRequest::OpData op;
    op.key = std::move(key);
    op.value = value;
    op.remove = remove;
    e.ops.push_back(op);
    r.entries.push_back(e);
    net::AlterClientQuotasResponse resp = h.call(h.controller->alter_client_quotas(r));
    EXPECT_EQ(resp.entries.size(), 1u);
    return resp.entries.at(0).error_code;
  };
  EXPECT_EQ(alter("alice", "producer_byte_rate", 1048576, false), 0);
  EXPECT_EQ(alter(std::nullopt, "request_percentage", 12.5, false), 0);
  const metadata::ClientQuotaEntity alice{{"user", "alice"}};
  ASSERT_TRUE(h.image().client_quotas().entities.contains(alice));
  EXPECT_EQ(h.image().client_quotas().entities.at(alice).at("producer_byte_rate"), 1048576);
  EXPECT_EQ(h.image().client_quotas().entities.size(), 2u);
  EXPECT_EQ(alter("alice", "producer_byte_rate", 1.5, false), net::code(net::Error::kInvalidRequest));
  EXPECT_EQ(alter("alice", "connection_creation_rate", 10, false), net::code(net::Error::kInvalidRequest));
  EXPECT_EQ(alter("alice", "producer_byte_rate", 0, true), 0);
  EXPECT_FALSE(h.image().client_quotas().entities.contains(alice));
}

TEST(QuorumController, DescribesClientQuotasByFilter) {
  metadata::ClientQuotasImage quotas;
  quotas.entities[{{"user", "alice"}}] = {{"producer_byte_rate", 1024}};
  quotas.entities[{{"user", std::nullopt}}] = {{"request_percentage", 50}};
  quotas.entities[{{"user", "alice"}, {"client-id", "app"}}] = {{"consumer_byte_rate", 2048}};
  quotas.entities[{{"client-id", "app"}}] = {{"producer_byte_rate", 4096}};
  quotas.entities[{{"ip", "10.0.0.1"}}] = {{"connection_creation_rate", 5}};
  using Component = net::DescribeClientQuotasRequest::ComponentData;
  auto component = [](std::string type, int8_t match_type, std::optional<std::string> match) {
    Component c;
    c.entity_type = std::move(type);
    c.match_type = match_type;
    c.match = std::move(match);
    return c;
  };
  auto describe = [&](std::vector<Component> components, bool strict) {
    net::DescribeClientQuotasRequest r;
    r.components = std::move(components);
    r.strict = strict;
    return describe_client_quotas(quotas, r);
  };
  // The entities found, as "type=name,..." (the default entity "type=").
  auto found = [](const net::DescribeClientQuotasResponse& r) {
    std::set<std::string> out;
    if (!r.entries.has_value()) return out;
    for (const auto& e : *r.entries) {
      std::string s;
      for (const auto& x : e.entity) s += fmt::format("{}{}={}", s.empty() ? "" : ",", x.entity_type, x.entity_name.value_or(""));
      out.insert(s);
    }
    return out;
  };
  using Found = std::set<std::string>;
  EXPECT_EQ(found(describe({}, false)).size(), 5u);
  EXPECT_TRUE(found(describe({}, true)).empty());
  // Exact: every entity with that user, or only the one entity when strict.
  EXPECT_EQ(found(describe({component("user", 0, "alice")}, false)), (Found{"client-id=app,user=alice", "user=alice"}));
  EXPECT_EQ(found(describe({component("user", 0, "alice")}, true)), (Found{"user=alice"}));
  // Default: the entity with no user name.
  net::DescribeClientQuotasResponse defaults = describe({component("user", 1, std::nullopt)}, true);
  EXPECT_EQ(found(defaults), (Found{"user="}));
  ASSERT_EQ(defaults.entries->at(0).values.size(), 1u);
  EXPECT_EQ(defaults.entries->at(0).values[0].key, "request_percentage");
  EXPECT_EQ(defaults.entries->at(0).values[0].value, 50);
  // Any name (the default included).
  EXPECT_EQ(found(describe({component("user", 2, std::nullopt)}, true)), (Found{"user=", "user=alice"}));
  EXPECT_EQ(found(describe({component("user", 2, std::nullopt), component("client-id", 0, "app")}, false)),
            (Found{"client-id=app,user=alice"}));
  EXPECT_EQ(found(describe({component("ip", 2, std::nullopt)}, false)), (Found{"ip=10.0.0.1"}));
  // Bad filters: entries null.
  auto error = [](const net::DescribeClientQuotasResponse& r) {
    EXPECT_FALSE(r.entries.has_value());
    return r.error_code;
  };
  const int16_t invalid = net::code(net::Error::kInvalidRequest);
  EXPECT_EQ(error(describe({component("user", 0, std::nullopt)}, false)), invalid);
  EXPECT_EQ(error(describe({component("user", 1, "alice")}, false)), invalid);
  EXPECT_EQ(error(describe({component("user", 2, "alice")}, false)), invalid);
  EXPECT_EQ(error(describe({component("user", 7, std::nullopt)}, false)), invalid);
  EXPECT_EQ(error(describe({component("user", 2, std::nullopt), component("user", 0, "bob")}, false)), invalid);
  EXPECT_EQ(error(describe({component("ip", 2, std::nullopt), component("user", 0, "bob")}, false)), invalid);
  EXPECT_EQ(error(describe({component("", 2, std::nullopt)}, false)), invalid);
  EXPECT_EQ(error(describe({component("group", 2, std::nullopt)}, false)),
            net::code(net::Error::kUnsupportedVersion));
}

net::UpdateFeaturesResponse update_mv(Harness& h, int16_t level) {
  net::UpdateFeaturesRequest r;
  net::UpdateFeaturesRequest::FeatureUpdateKey k;
  k.feature = "metadata.version";
  k.max_version_level = level;
  r.feature_updates.push_back(k);
  return h.call(h.controller->update_features(r, 1));
}

TEST(QuorumController, UpgradesMetadataVersionOnly) {
  Harness h(1, 19);
  h.add_broker(1);
  net::UpdateFeaturesResponse up = update_mv(h, 20);
  ASSERT_EQ(up.results.size(), 1u);
  EXPECT_EQ(up.results[0].error_code, 0) << up.results[0].error_message.value_or("");
  EXPECT_EQ(h.image().features().metadata_version, 20);
  EXPECT_EQ(update_mv(h, 19).results.at(0).error_code, net::code(net::Error::kInvalidUpdateVersion));
  EXPECT_EQ(update_mv(h, kMetadataVersionLatest + 1).results.at(0).error_code,
            net::code(net::Error::kInvalidUpdateVersion));
  EXPECT_EQ(update_mv(h, 20).results.at(0).error_code, 0);  // already there
  EXPECT_EQ(h.image().features().metadata_version, 20);
}

TEST(QuorumController, AnswersForwardedRequests) {
  Harness h;
  h.add_broker(1);
  net::CreateTopicsRequest inner;
  net::CreateTopicsRequest::CreatableTopic t;
  t.name = "forwarded";
  t.num_partitions = 2;
  t.replication_factor = 1;
  inner.topics.push_back(t);
  absl::StatusOr<io::BufferChain> frame = net::encode_request(inner, 7, 42, std::string("admin"));
  ASSERT_TRUE(frame.ok());
  net::EnvelopeRequest envelope;
  envelope.request_data = frame->linearize().slice(4);
  envelope.request_principal = io::Buffer::copy_of("principal");
  envelope.client_host_address = io::Buffer::copy_of(std::string("\x7f\x00\x00\x01", 4));
  net::EnvelopeResponse answered = h.call(h.controller->envelope(envelope));
  EXPECT_EQ(answered.error_code, 0);
  ASSERT_TRUE(answered.response_data.has_value());
  absl::StatusOr<net::CreateTopicsResponse> response =
      net::decode_response<net::CreateTopicsResponse>(*answered.response_data, 7);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->topics.size(), 1u);
  EXPECT_EQ(response->topics[0].error_code, 0);
  EXPECT_NE(h.image().topics().topic("forwarded"), nullptr);
  // Broker-to-controller APIs are not forwardable.
  net::AllocateProducerIdsRequest pid;
  pid.broker_id = 1;
  frame = net::encode_request(pid, 0, 43, std::string("admin"));
  ASSERT_TRUE(frame.ok());
  envelope.request_data = frame->linearize().slice(4);
  EXPECT_EQ(h.call(h.controller->envelope(envelope)).error_code, net::code(net::Error::kInvalidRequest));
  envelope.request_principal = std::nullopt;
  EXPECT_EQ(h.call(h.controller->envelope(envelope)).error_code,
            net::code(net::Error::kPrincipalDeserializationFailure));
}

}  // namespace
// KIP-919: a controller answers DescribeConfigs from its committed image.
TEST(QuorumController, DescribesConfigs) {
  Harness h;
  h.add_broker(1);
  ASSERT_EQ(h.create("described", 1, 1).error_code, 0);
  net::DescribeConfigsRequest r;
  net::DescribeConfigsRequest::DescribeConfigsResource topic;
  topic.resource_type = metadata::kConfigResourceTopic;
  topic.resource_name = "described";
  topic.configuration_keys = std::vector<std::string>{"cleanup.policy", "retention.ms"};
  r.resources.push_back(topic);
  net::DescribeConfigsRequest::DescribeConfigsResource missing = topic;
  missing.resource_name = "missing";
  r.resources.push_back(missing);
  net::DescribeConfigsRequest::DescribeConfigsResource other_broker;
  other_broker.resource_type = metadata::kConfigResourceBroker;
  other_broker.resource_name = "7";
  r.resources.push_back(other_broker);
  absl::StatusOr<io::BufferChain> frame = net::encode_request(r, 4, 11, std::string("test"));
  ASSERT_TRUE(frame.ok());
  const io::Buffer bytes = frame->linearize();
  absl::StatusOr<net::ParsedRequest> parsed = net::parse_request(bytes.slice(4, bytes.size() - 4));
  ASSERT_TRUE(parsed.ok());
  absl::StatusOr<io::BufferChain> answer = h.call(h.controller->handle_request(parsed->frame));
  ASSERT_TRUE(answer.ok()) << answer.status();
  const io::Buffer out = answer->linearize();
  absl::StatusOr<net::DescribeConfigsResponse> response =
      net::decode_response<net::DescribeConfigsResponse>(out.slice(4, out.size() - 4), 4);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->results.size(), 3u);
  EXPECT_EQ(response->results[0].error_code, 0);
  ASSERT_EQ(response->results[0].configs.size(), 2u);
  EXPECT_EQ(response->results[0].configs[0].name, "cleanup.policy");
  EXPECT_EQ(response->results[0].configs[0].value, "delete");
  EXPECT_EQ(response->results[0].configs[1].name, "retention.ms");
  EXPECT_EQ(response->results[0].configs[1].value, "604800000");
  EXPECT_EQ(response->results[1].error_code, net::code(net::Error::kUnknownTopicOrPartition));
  EXPECT_EQ(response->results[2].error_code, net::code(net::Error::kInvalidRequest));
}

// ApiVersions on the controller listener: as a broker answers it (KIP-511),
// an unknown version gets the v0 fallback, v3 needs client software labels.
TEST(QuorumController, AnswersApiVersionsAsABrokerDoes) {
  Harness h;
  auto ask = [&](int16_t version, const net::ApiVersionsRequest& body) -> net::ApiVersionsResponse {
    absl::StatusOr<io::BufferChain> frame = net::encode_request(
        body, std::min<int16_t>(version, net::ApiVersionsRequest::kHighestVersion), 21, std::string("test"));
    EXPECT_TRUE(frame.ok());
    const io::Buffer bytes = frame->linearize();
    absl::StatusOr<net::ParsedRequest> parsed = net::parse_request(bytes.slice(4, bytes.size() - 4));
    EXPECT_TRUE(parsed.ok());
    net::RequestFrame request = parsed->frame;
    request.header.request_api_version = version;
    absl::StatusOr<io::BufferChain> answer = h.call(h.controller->handle_request(request));
    EXPECT_TRUE(answer.ok()) << answer.status();
    const io::Buffer out = answer->linearize();
    const int16_t as = version > net::ApiVersionsRequest::kHighestVersion ? 0 : version;
    absl::StatusOr<net::ApiVersionsResponse> response =
        net::decode_response<net::ApiVersionsResponse>(out.slice(4, out.size() - 4), as);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.value_or(net::ApiVersionsResponse{});
  };
  auto lists = [](const net::ApiVersionsResponse& r, int16_t key) {
    return std::any_of(r.api_keys.begin(), r.api_keys.end(), [&](const auto& k) { return k.api_key == key; });
  };
  net::ApiVersionsRequest named;
  named.client_software_name = "kafka-python";
  named.client_software_version = "2.0.2";
  const net::ApiVersionsResponse full = ask(3, named);
  EXPECT_EQ(full.error_code, 0);
  EXPECT_TRUE(lists(full, net::CreateTopicsRequest::kApiKey));
  EXPECT_TRUE(lists(full, net::ApiVersionsRequest::kApiKey));
  EXPECT_EQ(ask(0, net::ApiVersionsRequest{}).api_keys, full.api_keys);

  const net::ApiVersionsResponse unnamed = ask(3, net::ApiVersionsRequest{});
  EXPECT_EQ(unnamed.error_code, net::code(net::Error::kInvalidRequest));
  EXPECT_TRUE(unnamed.api_keys.empty());

  const net::ApiVersionsResponse unknown = ask(net::ApiVersionsRequest::kHighestVersion + 1, named);
  EXPECT_EQ(unknown.error_code, net::code(net::Error::kUnsupportedVersion));
  ASSERT_EQ(unknown.api_keys.size(), 1u);
  EXPECT_EQ(unknown.api_keys[0].api_key, net::ApiVersionsRequest::kApiKey);
  EXPECT_EQ(unknown.api_keys[0].max_version, net::ApiVersionsRequest::kHighestVersion);
}

}  // namespace brook::controller
