// sim/broker.cc: the "broker" scenario (see sim/broker.h).
#include "sim/broker.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/broker/broker.h"
#include "core/controller/quorum_controller.h"
#include "core/meta_properties.h"
#include "io/scope.h"
#include "io/when.h"
#include "absl/strings/match.h"
#include "net/client/admin.h"
#include "net/client/consumer.h"
#include "net/client/producer.h"
#include "net/kafka/record_batch.h"
#include "net/kafka/rpc.h"
#include "raft/raft_node.h"
#include "sim/faults.h"
#include "sim/world.h"
#include "storage/log_manager.h"

namespace brook::sim {

namespace {

using namespace std::chrono_literals;

constexpr uint64_t kConfigSalt = 0x6272'6f6b'6572'0001ULL;  // "broker"
constexpr uint64_t kRebalanceSalt = 0x6c65'6164'6572'0001ULL;  // "leader"
constexpr uint64_t kChurnSalt = 0x6368'7572'6e00'0001ULL;      // "churn"
constexpr uint64_t kReassignSalt = 0x6d6f'7665'0000'0001ULL;    // "move"
// Topics the churn workload creates and deletes, by name: churn-0 and churn-1.
constexpr std::string_view kChurnPrefix = "churn-";
constexpr int kChurnNames = 2;
constexpr std::string_view kTopic = "events";
constexpr std::string_view kClusterId = "c2ltdWxhdGVkLWJyb2tlcg";
constexpr size_t kFailuresMax = 10;
constexpr io::Duration kRpcTimeout = 3s;

struct BrokerSimConfig {
  FaultConfig faults;
  int partitions = 3;
  int writers = 2;
  int records_per_batch_max = 5;
  io::Duration write_interval_max = 50ms;
  io::Duration workload = 30s;
  io::Duration quiet_max = 40s;
  // Mutation testing: acknowledge before the data is durable (Kafka's
  // default flush policy, which relies on replicas that this single node
  // does not have). The checkers must find acknowledged records lost.
  bool ack_before_flush = false;
  // The replication scenario: nodes running broker and controller each,
  // topics of `replication_factor` replicas and min.insync.replicas.
  int nodes = 1;
  int replication_factor = 1;
  int min_insync = 1;
  // The clients' settings.
  io::Duration linger{0};
  size_t batch_size = 16384;
  codec::Compression compression = codec::Compression::kNone;
  int max_in_flight = 5;
  bool keyed = false;  // records carry keys (partitioned by murmur2)
  bool fetch_sessions = true;
  // How often the controllers move leadership back to preferred replicas
  // (auto.leader.rebalance.enable; zero: never).
  io::Duration leader_rebalance_interval{0};
  // Topic churn: besides the checked topic, topics created, written, read
  // and deleted over and over (the same names again), a reader on each
  // while it goes.
  bool churn = false;
  // Partition reassignment (with more than one node): now and then a
  // partition of the checked topic gets new replicas, or its ongoing
  // reassignment is cancelled.
  bool reassign = false;

  static BrokerSimConfig draw(uint64_t seed) {
    io::Random r(seed ^ kConfigSalt);
    BrokerSimConfig c;
    c.faults = FaultConfig::draw(r);
    c.partitions = static_cast<int>(r.uniform_range(1, 4));
    c.writers = static_cast<int>(r.uniform_range(1, 3));
    c.records_per_batch_max = static_cast<int>(r.uniform_range(1, 8));
    c.write_interval_max = uniform_duration(r, 5ms, 100ms);
    c.linger = uniform_duration(r, 0ms, 20ms);
    c.batch_size = static_cast<size_t>(r.uniform_range(100, 16384));
    c.compression = static_cast<codec::Compression>(r.uniform(5));
    c.max_in_flight = static_cast<int>(r.uniform_range(1, 5));
    c.keyed = r.uniform(2) == 0;
    c.fetch_sessions = r.uniform(4) != 0;
    // (From a stream of its own, so the draws above stay each seed's.)
    io::Random rebalance(seed ^ kRebalanceSalt);
    if (rebalance.uniform(2) == 0) c.leader_rebalance_interval = uniform_duration(rebalance, 2s, 15s);
    c.faults.draw_graceful_stops(seed);
    io::Random churn(seed ^ kChurnSalt);
    c.churn = churn.uniform(2) == 0;
    io::Random reassign(seed ^ kReassignSalt);
    c.reassign = reassign.uniform(2) == 0;
    c.faults.draw_full_disks(seed);
    return c;
  }
  bool reassigning() const { return reassign && nodes > 1; }
  std::string describe() const {
    return fmt::format(
        "broker: nodes={} replication-factor={} min.insync.replicas={} partitions={} writers={} "
        "records-per-send<={} write-interval<={} linger={} batch.size={} compression={} "
        "max.in.flight={} keyed={} fetch-sessions={} leader-rebalance={} topic-churn={} reassignments={}\n{}",
        nodes, replication_factor, min_insync, partitions, writers, records_per_batch_max,
        seconds(write_interval_max), seconds(linger), batch_size, codec::compression_name(compression),
        max_in_flight, keyed, fetch_sessions,
        leader_rebalance_interval > io::Duration{0} ? seconds(leader_rebalance_interval) : std::string("off"),
        churn, reassigning(), faults.describe());
  }
};

struct Shared {
  explicit Shared(BrokerSimConfig c)
      : config(std::move(c)),
        acked(static_cast<size_t>(config.partitions)),
        observed(static_cast<size_t>(config.partitions)),
        stops(config.nodes),
        last_ack_ns(static_cast<size_t>(config.partitions), -1) {}

  BrokerSimConfig config;
  // Per node (node id = index + 1).
  std::vector<io::Address> brokers;
  std::vector<io::Address> controllers;
  // The running brokers (null while a node is down), for the replica check.
  std::vector<broker::Broker*> running;
  // What acks=all answered: partition -> offset -> value.
  std::vector<std::map<int64_t, std::string>> acked;
  // What the reader was given while the workload ran (records below the
  // high watermark, acknowledged or not): partition -> offset -> value.
  std::vector<std::map<int64_t, std::string>> observed;
  GracefulStops stops;
  // The run's faults (set once they exist): lost() is the node lost for
  // good (index), or -1. loss_near from a few seconds before the loss may
  // come until it came.
  const FaultSchedule* faults = nullptr;
  bool loss_near = false;
  std::vector<std::string> violations;
  bool writing = true;
  // World time of each partition's latest acknowledgement.
  std::vector<int64_t> last_ack_ns;
  uint64_t produce_requests = 0;
  uint64_t records_sent = 0;
  uint64_t records_failed = 0;
  uint64_t records_acked = 0;
  uint64_t records_acked_unknown_offset = 0;
  uint64_t produce_retries = 0;
  uint64_t producer_ids = 0;
  uint64_t fetches = 0;
  uint64_t incremental_fetches = 0;
  uint64_t fetch_session_resets = 0;
  uint64_t fetched_records = 0;
  uint64_t broker_starts = 0;
  // The churn workload's rounds.
  uint64_t churn_created = 0;
  uint64_t churn_deleted = 0;
  uint64_t churn_records_acked = 0;
  uint64_t churn_records_read = 0;
  // Reassignments the controller took, and refused (a cancellation with
  // none in progress, or one that needs an unclean election).
  uint64_t reassignments = 0;
  uint64_t reassignments_refused = 0;
  // Partitions of the checked topic found offline because their only
  // in-sync replica is the node lost for good.
  std::set<int32_t> offline;
  bool final_read_done = false;
  bool replicas_checked = false;
  uint64_t replica_records_compared = 0;

  int lost() const { return faults == nullptr ? -1 : faults->lost_node(); }
  void violation(std::string what) {
    if (violations.size() < kFailuresMax) violations.push_back(std::move(what));
  }
};

// Whether partition p of the checked topic is offline with the node lost
// for good (offline_with_lost_server).
bool offline_by_loss(const Shared& s, int32_t p) {
  return offline_with_lost_server(s.running, s.lost(), kTopic, p);
}

// Notes the partitions offline_by_loss(); true when `p` is one.
bool note_offline(Shared* s, int32_t p) {
  if (!offline_by_loss(*s, p)) return false;
  s->offline.insert(p);
  return true;
}

// Every record of a Fetch answer's records: offset -> value.
absl::Status decode_fetched(const io::Buffer& records, std::vector<std::pair<int64_t, std::string>>* out) {
  net::BatchIterator it(records);
  while (true) {
    absl::StatusOr<std::optional<net::BatchView>> next = it.next();
    if (!next.ok()) return next.status();
    if (!next->has_value()) break;
    absl::StatusOr<std::vector<net::Record>> decoded = net::decode_records((*next)->bytes, 1 << 20);
    if (!decoded.ok()) return decoded.status();
    for (const net::Record& r : *decoded) {
      out->emplace_back(net::record_offset((*next)->header, r),
                        r.value.has_value() ? std::string(r.value->view()) : std::string());
    }
  }
  return absl::OkStatus();
}

// Injected disk errors of any kind so far.
uint64_t disk_errors(const DiskStats& d) {
  return d.read_errors + d.write_errors + d.metadata_errors + d.sync_errors + d.sync_dir_errors +
         d.read_corruptions + d.no_space_errors;
}

// Waits for a graceful stop to be asked for, then does what `brook server`
// does on SIGTERM while the broker and the metadata log still run:
// controlled shutdown and the logs closed, then the metadata log's
// leadership resigned. Yields the logs' close.
io::Task<absl::Status> graceful_stop(io::Context* ctx, broker::Broker* b, raft::RaftNode* node, bool* requested) {
  while (!*requested) co_await ctx->clock().sleep_for(50ms);
  ctx->log().info("broker-sim: stopping gracefully");
  absl::Status closed = co_await b->shutdown(5s);
  co_await node->resign();
  co_await ctx->clock().sleep_for(100ms);
  co_return closed;
}

}  // namespace

io::Task<void> server_node_main(io::Context* ctx, ServerNodeOptions o) {
  const int index = o.index;
  const int32_t id = index + 1;
  std::vector<std::string> dirs(1);
  absl::StatusOr<core::MetaProperties> meta = co_await core::ensure_formatted(
      ctx->disk(), std::move(dirs), std::string(kClusterId), id, true, ctx->random());
  if (!meta.ok()) {
    ctx->log().error("broker-sim: format: {}", meta.status().ToString());
    co_return;
  }
  raft::RaftConfig rc;
  rc.node_id = id;
  for (size_t i = 0; i < o.controllers.size(); ++i) rc.voters.emplace(static_cast<int32_t>(i + 1), o.controllers[i]);
  rc.cluster_id = std::string(kClusterId);
  rc.advertised = o.controllers[static_cast<size_t>(index)];
  rc.election_timeout = 200ms;
  rc.election_backoff_max = 200ms;
  absl::StatusOr<std::unique_ptr<raft::RaftNode>> opened = co_await raft::RaftNode::open(*ctx, rc);
  if (!opened.ok()) {
    ctx->log().error("broker-sim: metadata log: {}", opened.status().ToString());
    co_return;
  }
  std::unique_ptr<raft::RaftNode> node = std::move(*opened);
  absl::StatusOr<std::unique_ptr<io::Listener>> controller_listener =
      co_await ctx->network().listen(o.controllers[static_cast<size_t>(index)]);
  absl::StatusOr<std::unique_ptr<io::Listener>> broker_listener =
      co_await ctx->network().listen(o.brokers[static_cast<size_t>(index)]);
  std::unique_ptr<io::Listener> external_listener;
  const bool external = !o.external.empty() && o.external[static_cast<size_t>(index)].port != 0;
  if (external) {
    absl::StatusOr<std::unique_ptr<io::Listener>> l =
        co_await ctx->network().listen(o.external[static_cast<size_t>(index)]);
    if (l.ok()) external_listener = std::move(*l);
  }
  if (!controller_listener.ok() || !broker_listener.ok() || (external && external_listener == nullptr)) {
    ctx->log().error("broker-sim: listen failed");
    co_return;
  }
  controller::ControllerConfig cc;
  cc.node_id = id;
  cc.cluster_id = std::string(kClusterId);
  cc.broker_session_timeout = 3s;
  cc.num_partitions = o.partitions;
  cc.default_replication_factor = static_cast<int16_t>(o.replication_factor);
  cc.auto_leader_rebalance = o.leader_rebalance_interval > io::Duration{0};
  if (cc.auto_leader_rebalance) cc.leader_imbalance_check_interval = o.leader_rebalance_interval;
  controller::QuorumController controller(*ctx, *node, cc);
  node->set_listener(&controller);
  broker::BrokerConfig bc;
  bc.node_id = id;
  bc.cluster_id = std::string(kClusterId);
  bc.advertised = o.brokers[static_cast<size_t>(index)];
  if (o.inter_broker_sasl != nullptr) bc.inter_broker_sasl = *o.inter_broker_sasl;
  // The context outlives the node.
  if (o.inter_broker_tls != nullptr) bc.inter_broker_tls = net::tls::Context::unowned(o.inter_broker_tls);
  if (external) bc.other_listeners.emplace_back(std::string(kExternalListener), o.external[static_cast<size_t>(index)]);
  bc.incarnation_id = core::random_uuid(ctx->random());
  bc.heartbeat_interval = 500ms;
  bc.num_partitions = o.partitions;
  bc.default_replication_factor = static_cast<int16_t>(o.replication_factor);
  bc.min_insync_replicas = o.min_insync;
  bc.replica_lag_time_max = 3s;
  // Idle client connections close (and the clients connect again).
  bc.connections_max_idle = uniform_duration(ctx->random(), 500ms, 10s);
  bc.replica_fetch_wait_max = 200ms;
  bc.replica_fetch_backoff = 100ms;
  // Every replica syncs before it acknowledges (a leader before it answers,
  // a follower before its next fetch reports the records): crashes lose
  // unsynced writes here, and acks=all must survive them.
  bc.log_defaults.flush_mode =
      o.ack_before_flush ? storage::FlushMode::kBackground : storage::FlushMode::kBeforeAck;
  bc.log_defaults.segment_bytes = 64 << 10;  // many segments, rolls and index files
  bc.group.offsets_topic_partitions = o.offsets_partitions;
  bc.offsets_topic_replication_factor = static_cast<int16_t>(o.offsets_replication_factor);
  bc.group.initial_rebalance_delay = o.group_initial_delay;
  bc.group.min_session_timeout = o.group_min_session_timeout;
  bc.group.mutant_unfenced_commits = o.group_mutant_unfenced_commits;
  bc.group.consumer_session_timeout = o.group_consumer_session_timeout;
  bc.group.consumer_heartbeat_interval = o.group_consumer_heartbeat_interval;
  bc.txn.state_topic_partitions = o.txn_partitions;
  bc.txn.offsets_topic_partitions = o.offsets_partitions;
  bc.txn.abort_check_interval = o.txn_abort_check_interval;
  bc.txn.mutant_commit_aborts = o.txn_mutant_commit_aborts;
  bc.transaction_partition_verification = o.txn_partition_verification;
  bc.transaction_state_replication_factor = static_cast<int16_t>(o.txn_replication_factor);
  bc.transaction_state_min_isr = o.txn_min_isr;
  if (o.adjust_broker_config) o.adjust_broker_config(bc);
  broker::Broker broker(*ctx, *node, bc);
  controller.set_observer(&broker);
  if (o.on_broker) o.on_broker(&broker);
  struct Clear {
    ServerNodeOptions* o;
    ~Clear() {
      if (o->on_broker) o->on_broker(nullptr);
    }
  } clear{&o};
  io::TaskScope tasks(ctx->executor());
  tasks.spawn(controller.run());
  broker::Broker* b = &broker;
  auto serve = [](io::Context* x, io::Listener* l, broker::Broker* br, std::string_view name,
                  const net::SaslServerConfig* sasl, const net::tls::Context* tls) -> io::Task<void> {
    while (!br->serving()) co_await x->clock().sleep_for(10ms);
    net::ServeOptions options = br->serve_options(name);
    std::optional<net::SaslServerConfig> config;
    if (sasl != nullptr) options.sasl = &config.emplace(br->sasl_config(*sasl));
    options.tls = tls;
    (void)co_await net::serve(
        *l, [br](net::RequestFrame f) { return br->answer(std::move(f)); }, options);
  };
  tasks.spawn(serve(ctx, broker_listener->get(), b, std::string_view(), o.sasl, o.tls));
  if (external_listener != nullptr) {
    tasks.spawn(serve(ctx, external_listener.get(), b, kExternalListener, o.external_sasl, nullptr));
  }
  // Until the broker or the metadata log stops (a failed log): the node
  // then goes down, and the fault schedule power-cycles it. Or until a
  // graceful stop is asked for and done.
  controller::QuorumController* c = &controller;
  std::vector<io::Task<absl::Status>> runs;
  runs.push_back(broker.run());
  runs.push_back(node->run(**controller_listener, [c](net::RequestFrame f) { return c->handle_request(std::move(f)); }));
  SimDisk* disk = dynamic_cast<SimDisk*>(&ctx->disk());
  const uint64_t disk_errors_at_start = disk != nullptr ? disk_errors(disk->stats()) : 0;
  if (o.stop_requested != nullptr) {
    *o.stop_requested = false;
    runs.push_back(graceful_stop(ctx, &broker, node.get(), o.stop_requested));
  }
  auto [which, why] = co_await io::when_first(std::move(runs));
  const bool stopping = o.stop_requested != nullptr && *o.stop_requested;
  const bool disk_failed = disk == nullptr || disk_errors(disk->stats()) != disk_errors_at_start;
  if (which < 2) {
    ctx->log().warn("broker-sim: {} stopped: {}", which == 0 ? "broker" : "metadata log", why.ToString());
    // Only a disk fault of this incarnation stops a node: a log error
    // without one is a bug (a log closed under an operation, say).
    if (!disk_failed && o.on_violation) {
      o.on_violation(fmt::format("node {}: the {} failed{} with no disk fault to explain it: {}", id,
                                 which == 0 ? "broker" : "metadata log", stopping ? " during a graceful stop" : "",
                                 why.ToString()));
    }
    co_return;
  }
  tasks.cancel_all();
  (void)co_await node->log().close();
  if (!why.ok() && !disk_failed && o.on_violation) {
    o.on_violation(fmt::format("node {}: a graceful stop failed to close the logs: {}", id, why.ToString()));
  }
  ctx->log().info("broker-sim: stopped gracefully: {}", why.ToString());
}

void GracefulStops::wire(const FaultConfig& faults, int index, ServerNodeOptions& o,
                         std::function<void(std::string)> violation) {
  o.on_violation = std::move(violation);
  if (faults.stop_interval.count() == 0) return;
  o.stop_requested = &requested_[static_cast<size_t>(index)];
}

void GracefulStops::attach(FaultSchedule& schedule) {
  schedule.graceful_stop = [this](int i) {
    if (i < 0 || static_cast<size_t>(i) >= requested_.size()) return false;
    requested_[static_cast<size_t>(i)] = true;
    return true;
  };
}

net::ProduceRequest one_batch_produce(std::optional<std::string> transactional_id, std::string topic,
                                      int32_t partition, io::Buffer batch, int32_t timeout_ms) {
  net::ProduceRequest r;
  r.transactional_id = std::move(transactional_id);
  r.acks = -1;
  r.timeout_ms = timeout_ms;
  auto& t = r.topic_data.emplace_back();
  t.name = std::move(topic);
  auto& p = t.partition_data.emplace_back();
  p.index = partition;
  p.records = std::move(batch);
  return r;
}

net::FetchRequest one_partition_fetch(std::string topic, int32_t partition, int64_t offset, int32_t max_bytes,
                                      int8_t isolation_level) {
  net::FetchRequest r;
  r.max_wait_ms = 0;
  r.min_bytes = 1;
  r.max_bytes = max_bytes;
  r.isolation_level = isolation_level;
  auto& t = r.topics.emplace_back();
  t.topic = std::move(topic);
  auto& fp = t.partitions.emplace_back();
  fp.partition = partition;
  fp.fetch_offset = offset;
  fp.partition_max_bytes = max_bytes;
  return r;
}

std::vector<Node*> add_server_nodes(World& world, const FaultConfig& faults, io::Random& random, int count,
                                    std::vector<io::Address>* brokers, std::vector<io::Address>* controllers) {
  std::vector<Node*> servers;
  for (int i = 0; i < count; ++i) {
    Node& server = world.add_node(faults.node_options(random));
    servers.push_back(&server);
    brokers->push_back(server.address(kServerBrokerPort));
    controllers->push_back(server.address(kServerControllerPort));
  }
  return servers;
}

client::ClientOptions sim_client_options(const std::vector<io::Address>& brokers, std::string client_id) {
  client::ClientOptions o;
  o.bootstrap = brokers;
  o.client_id = std::move(client_id);
  o.request_timeout = kRpcTimeout;
  o.retry_backoff = 100ms;
  o.allow_auto_create_topics = false;
  return o;
}

io::Task<bool> create_topic(io::Context* ctx, client::Cluster* cluster, client::NewTopic topic, int tries) {
  for (int attempt = 0; tries < 0 || attempt < tries; ++attempt) {
    std::vector<client::NewTopic> topics;
    topics.push_back(topic);
    absl::StatusOr<std::map<std::string, client::CreatedTopic>> created =
        co_await client::create_topics(*cluster, std::move(topics));
    if (created.ok()) {
      const absl::Status& st = (*created)[topic.name].status;
      if (st.ok() || absl::StrContains(st.message(), "TOPIC_ALREADY_EXISTS")) co_return true;
      ctx->log().debug("sim: CreateTopics {}: {}", topic.name, st.ToString());
    }
    co_await ctx->clock().sleep_for(200ms);
  }
  co_return false;
}

io::Task<void> create_topic_until_done(io::Context* ctx, client::Cluster* cluster, std::string topic,
                                       int partitions, int replication_factor) {
  client::NewTopic t;
  t.name = std::move(topic);
  t.partitions = partitions;
  t.replication_factor = static_cast<int16_t>(replication_factor);
  (void)co_await create_topic(ctx, cluster, std::move(t), -1);
}

io::Task<bool> delete_topic(io::Context* ctx, client::Cluster* cluster, std::string topic, const bool* go_on) {
  while (go_on == nullptr || *go_on) {
    std::vector<std::string> names;
    names.push_back(topic);
    absl::StatusOr<std::map<std::string, absl::Status>> out = co_await client::delete_topics(*cluster, names);
    if (out.ok() && out->size() == 1 &&
        (out->begin()->second.ok() || absl::StrContains(out->begin()->second.message(), "UNKNOWN_TOPIC"))) {
      co_return true;
    }
    co_await ctx->clock().sleep_for(200ms);
  }
  co_return false;
}

std::optional<int> spare_server(World& world, const std::vector<broker::Broker*>& running, int min_insync,
                                const std::vector<std::pair<std::string, int>>& topics) {
  const int n = static_cast<int>(running.size());
  for (int i = 0; i < n; ++i) {
    if (!world.node(i).up() || running[static_cast<size_t>(i)] == nullptr) return std::nullopt;
  }
  std::vector<int> candidates;
  for (int lost = 0; lost < n; ++lost) {
    const int32_t id = lost + 1;
    auto without = [&](const std::vector<int32_t>& ids) {
      return static_cast<int>(ids.size() - static_cast<size_t>(std::count(ids.begin(), ids.end(), id)));
    };
    bool spare = true;
    for (const broker::Broker* b : running) {
      for (const auto& [name, partitions] : topics) {
        const metadata::TopicImage* t = b->image().topics().topic(name);
        for (int32_t p = 0; spare && p < partitions; ++p) {
          const metadata::PartitionRegistration* reg = t == nullptr ? nullptr : t->partition(p);
          spare = reg != nullptr && reg->adding_replicas.empty() && reg->removing_replicas.empty() &&
                  without(reg->replicas) >= min_insync && without(reg->isr) >= min_insync;
        }
      }
    }
    if (spare) candidates.push_back(lost);
  }
  if (candidates.empty()) return std::nullopt;
  return candidates[world.random().uniform(candidates.size())];
}

bool offline_with_lost_server(const std::vector<broker::Broker*>& running, int lost, std::string_view topic,
                              int32_t p) {
  if (lost < 0) return false;
  bool any = false;
  for (const broker::Broker* b : running) {
    if (b == nullptr) continue;
    const metadata::TopicImage* t = b->image().topics().topic(topic);
    const metadata::PartitionRegistration* reg = t == nullptr ? nullptr : t->partition(p);
    if (reg == nullptr || reg->leader != metadata::kNoLeader || reg->isr != std::vector<int32_t>{lost + 1}) {
      return false;
    }
    any = true;
  }
  return any;
}

namespace {

// A node of the scenario; returns when its broker stops (a log failed):
// the fault schedule power-cycles it like a supervisor.
io::Task<void> broker_node_main(io::Context* ctx, Shared* s, int index) {
  ++s->broker_starts;
  ServerNodeOptions o;
  o.index = index;
  o.brokers = s->brokers;
  o.controllers = s->controllers;
  o.partitions = s->config.partitions;
  o.replication_factor = s->config.replication_factor;
  o.min_insync = s->config.min_insync;
  o.ack_before_flush = s->config.ack_before_flush;
  o.leader_rebalance_interval = s->config.leader_rebalance_interval;
  o.on_broker = [s, index](broker::Broker* b) { s->running[static_cast<size_t>(index)] = b; };
  s->stops.wire(s->config.faults, index, o, [s](std::string what) { s->violation(std::move(what)); });
  co_await server_node_main(ctx, std::move(o));
}

client::ClientOptions client_options(Shared* s, std::string name) {
  return sim_client_options(s->brokers, std::move(name));
}

std::vector<client::TopicPartition> all_partitions(Shared* s) {
  std::vector<client::TopicPartition> out;
  for (int32_t p = 0; p < s->config.partitions; ++p) out.emplace_back(std::string(kTopic), p);
  return out;
}

io::Task<void> ensure_topic(io::Context* ctx, Shared* s, client::Cluster* cluster) {
  co_await create_topic_until_done(ctx, cluster, std::string(kTopic), s->config.partitions,
                                   s->config.replication_factor);
}

// A producer: idempotent, acks=all, retrying; every acknowledged record is
// remembered at its offset.
io::Task<void> writer(io::Context* ctx, Shared* s, int id) {
  client::ProducerConfig pc;
  pc.client = client_options(s, fmt::format("writer-{}", id));
  pc.acks = -1;
  pc.enable_idempotence = true;
  pc.linger = s->config.linger;
  pc.batch_size = s->config.batch_size;
  pc.compression = s->config.compression;
  pc.max_in_flight = s->config.max_in_flight;
  pc.delivery_timeout = 15s;
  pc.max_block = 5s;
  client::Producer producer(*ctx, pc);
  co_await ensure_topic(ctx, s, &producer.cluster());
  uint64_t seq = 0;
  client::ProducerStats counted;
  while (true) {
    co_await ctx->clock().sleep_for(uniform_duration(ctx->random(), 1ms, s->config.write_interval_max));
    if (!s->writing) continue;
    const int n = static_cast<int>(ctx->random().uniform_range(1, s->config.records_per_batch_max));
    const int32_t partition = static_cast<int32_t>(ctx->random().uniform(static_cast<uint64_t>(s->config.partitions)));
    for (int i = 0; i < n; ++i) {
      client::ProducerRecord record;
      record.topic = std::string(kTopic);
      std::string value = fmt::format("w{}-{}-{}", id, ctx->random().uniform(1u << 30), seq++);
      if (s->config.keyed) {
        record.key = io::Buffer::copy_of(fmt::format("k{}", ctx->random().uniform(64)));
      } else {
        record.partition = partition;
      }
      record.value = io::Buffer::copy_of(value);
      ++s->records_sent;
      // Named, not a temporary in the co_await (g++ 12 destroys those twice).
      client::DeliveryCallback done = [s, value](const absl::StatusOr<client::RecordMetadata>& md) {
        if (!md.ok()) {
          ++s->records_failed;
          return;
        }
        if (md->offset < 0) {
          ++s->records_acked_unknown_offset;
          return;
        }
        std::map<int64_t, std::string>& acked = s->acked[static_cast<size_t>(md->partition)];
        auto [it, fresh] = acked.emplace(md->offset, value);
        if (!fresh) {
          s->violation(fmt::format("partition {} offset {} acknowledged twice: '{}' and then '{}'", md->partition,
                                   md->offset, it->second, value));
        }
        ++s->records_acked;
        s->last_ack_ns[static_cast<size_t>(md->partition)] = World::running()->now_ns();
      };
      (void)co_await producer.send(std::move(record), std::move(done));
    }
    s->produce_requests += producer.stats().requests - counted.requests;
    s->produce_retries += producer.stats().retries - counted.retries;
    s->producer_ids += producer.stats().producer_ids - counted.producer_ids;
    counted = producer.stats();
  }
}

client::ConsumerConfig consumer_config(Shared* s, std::string name) {
  client::ConsumerConfig cc;
  cc.client = client_options(s, std::move(name));
  cc.fetch_max_wait = 50ms;
  cc.max_partition_fetch_bytes = 256 << 10;
  // Readers only seek to acknowledged offsets and read on up to the high
  // watermark: no fetch of theirs may be out of range.
  cc.auto_offset_reset = client::OffsetReset::kNone;
  cc.fetch_sessions = s->config.fetch_sessions;
  return cc;
}

void count_fetches(Shared* s, const client::Consumer& c, client::ConsumerStats* counted) {
  const client::ConsumerStats& now = c.stats();
  s->fetches += now.fetches - counted->fetches;
  s->incremental_fetches += now.incremental_fetches - counted->incremental_fetches;
  s->fetch_session_resets += now.session_resets - counted->session_resets;
  s->fetched_records += now.records - counted->records;
  *counted = now;
}

// Reads back acknowledged records while the workload runs: a consumer
// seeks to a random acknowledged offset and reads on from there.
io::Task<void> reader(io::Context* ctx, Shared* s) {
  client::Consumer consumer(*ctx, consumer_config(s, "reader"));
  client::ConsumerStats counted;
  while (true) {
    co_await ctx->clock().sleep_for(uniform_duration(ctx->random(), 50ms, 300ms));
    if (!s->writing) continue;  // the workload is over
    const int32_t partition = static_cast<int32_t>(ctx->random().uniform(static_cast<uint64_t>(s->config.partitions)));
    const std::map<int64_t, std::string>& acked = s->acked[static_cast<size_t>(partition)];
    if (acked.empty()) continue;
    auto it = acked.begin();
    std::advance(it, static_cast<long>(ctx->random().uniform(acked.size())));
    const int64_t from = it->first;
    const client::TopicPartition tp(std::string(kTopic), partition);
    if (consumer.assignment().empty() || consumer.assignment()[0] != tp) consumer.assign({tp});
    consumer.seek(tp, from);
    int64_t last = from - 1;
    for (int polls = 0; polls < 3 && last < from + 20; ++polls) {
      absl::StatusOr<std::vector<client::ConsumerRecord>> got = co_await consumer.poll(300ms);
      count_fetches(s, consumer, &counted);
      if (!got.ok()) {
        s->violation(fmt::format("reader: poll of partition {} from {} failed: {}", partition, from,
                                 got.status().ToString()));
        break;
      }
      for (const client::ConsumerRecord& r : *got) {
        if (r.offset <= last) {
          s->violation(fmt::format("partition {}: read offset {} after offset {}", partition, r.offset, last));
        }
        last = r.offset;
        auto a = acked.find(r.offset);
        const std::string v = r.value.has_value() ? std::string(r.value->view()) : std::string();
        s->observed[static_cast<size_t>(partition)].emplace(r.offset, v);
        if (a != acked.end() && a->second != v) {
          s->violation(fmt::format("partition {} offset {}: acknowledged '{}', read '{}'", partition, r.offset,
                                   a->second, v));
        }
      }
    }
  }
}

// Reads a churn topic from its start until `stop`, again and again (as a
// consumer far behind would, so that reads are under way when the topic
// goes); errors (the topic going away under it) are expected.
io::Task<void> churn_reader(io::Context* ctx, Shared* s, std::string topic, int partitions, const bool* stop) {
  client::ConsumerConfig cc = consumer_config(s, "churn-reader");
  cc.auto_offset_reset = client::OffsetReset::kEarliest;
  client::Consumer consumer(*ctx, cc);
  std::vector<client::TopicPartition> tps;
  for (int32_t p = 0; p < partitions; ++p) tps.emplace_back(topic, p);
  consumer.assign(tps);
  while (!*stop) {
    absl::StatusOr<std::vector<client::ConsumerRecord>> got = co_await consumer.poll(200ms);
    if (got.ok()) {
      s->churn_records_read += got->size();
      if (ctx->random().uniform(2) == 0) consumer.seek_to_beginning(tps);
    } else {
      co_await ctx->clock().sleep_for(100ms);
    }
  }
}

// Writes to a churn topic until `stop` (acks=1; failures, the topic gone
// among them, are expected).
io::Task<void> churn_writer(io::Context* ctx, Shared* s, std::string topic, int partitions, const bool* stop) {
  client::ProducerConfig pc;
  pc.client = client_options(s, "churn-writer");
  pc.acks = 1;
  pc.delivery_timeout = 5s;
  pc.max_block = 2s;
  client::Producer producer(*ctx, pc);
  while (!*stop) {
    client::ProducerRecord record;
    record.topic = topic;
    record.partition = static_cast<int32_t>(ctx->random().uniform(static_cast<uint64_t>(partitions)));
    record.value = io::Buffer::copy_of(std::string(static_cast<size_t>(ctx->random().uniform_range(10, 4000)), 'c'));
    client::DeliveryCallback done = [s](const absl::StatusOr<client::RecordMetadata>& md) {
      if (md.ok()) ++s->churn_records_acked;
    };
    (void)co_await producer.send(std::move(record), std::move(done));
    co_await ctx->clock().sleep_for(uniform_duration(ctx->random(), 0ms, 20ms));
  }
  // What is still in flight is dropped with the producer: the topic is
  // gone, and waiting out delivery.timeout.ms would slow the churn.
}

// Topic churn: a topic created, then deleted while a writer writes to it
// and a reader reads it from the start; the names come back. What it checks
// is done elsewhere: no node fails without a disk fault
// (server_node_main), and no directory of a deleted topic stays
// (stray_directories).
io::Task<void> churner(io::Context* ctx, Shared* s) {
  client::Cluster admin(*ctx, client_options(s, "churn-admin"));
  for (uint64_t round = 0; s->writing; ++round) {
    co_await ctx->clock().sleep_for(uniform_duration(ctx->random(), 100ms, 2s));
    const std::string topic = fmt::format("{}{}", kChurnPrefix, round % kChurnNames);
    const int partitions = static_cast<int>(ctx->random().uniform_range(1, 3));
    const bool sparse = ctx->random().uniform(2) == 0;
    client::NewTopic t;
    t.name = topic;
    t.partitions = partitions;
    // (Once a node is gone, on the nodes left.)
    const int nodes_left = s->config.nodes - (s->lost() >= 0 ? 1 : 0);
    t.replication_factor = static_cast<int16_t>(std::min(s->config.replication_factor, nodes_left));
    if (sparse) {
      // 1 MiB segments with one index entry each: finding a batch scans
      // many headers, and a read takes many disk operations.
      t.configs["segment.bytes"] = "1048576";
      t.configs["index.interval.bytes"] = "1048576";
    }
    // (Twenty tries; the churn goes on with the next round if the
    // controller took none of them.)
    if (!co_await create_topic(ctx, &admin, std::move(t), 20)) continue;
    ++s->churn_created;
    bool stop = false;
    io::TaskScope churning(ctx->executor());
    churning.spawn(churn_writer(ctx, s, topic, partitions, &stop));
    churning.spawn(churn_reader(ctx, s, topic, partitions, &stop));
    co_await ctx->clock().sleep_for(uniform_duration(ctx->random(), 200ms, 3s));
    if (co_await delete_topic(ctx, &admin, topic, &s->writing)) ++s->churn_deleted;
    co_await ctx->clock().sleep_for(uniform_duration(ctx->random(), 0ms, 500ms));
    stop = true;
    co_await churning.join();
  }
}

// Partition reassignment: a partition of the checked topic moved to two
// or three of the nodes, in a random order (its preferred leader first),
// or its ongoing reassignment cancelled. What it checks is done elsewhere:
// no acknowledged record lost (the final read), replicas agreeing (the
// replica check), every partition writable after the heal (liveness), no
// directory left on a node that is no longer a replica.
io::Task<void> reassigner(io::Context* ctx, Shared* s) {
  client::Cluster admin(*ctx, client_options(s, "reassigner"));
  while (s->writing) {
    co_await ctx->clock().sleep_for(uniform_duration(ctx->random(), 500ms, 5s));
    if (!s->writing) break;
    // (None while a node may be lost: node_to_lose judges the replicas
    // from the brokers' images, and a reassignment they do not show yet
    // could leave a partition too few replicas without it.)
    if (s->loss_near && s->lost() < 0) continue;
    const client::TopicPartition tp(std::string(kTopic),
                                    static_cast<int32_t>(ctx->random().uniform(static_cast<uint64_t>(s->config.partitions))));
    std::optional<std::vector<int32_t>> target;
    if (ctx->random().uniform(5) != 0) {
      std::vector<int32_t> nodes;
      for (int32_t id = 1; id <= s->config.nodes; ++id) {
        if (id != s->lost() + 1) nodes.push_back(id);  // (not onto a node that is gone)
      }
      ctx->random().shuffle(nodes);
      const int64_t most = static_cast<int64_t>(nodes.size());
      nodes.resize(static_cast<size_t>(ctx->random().uniform_range(s->config.min_insync, most)));
      target = std::move(nodes);
    }
    std::map<client::TopicPartition, std::optional<std::vector<int32_t>>> targets;
    targets.emplace(tp, std::move(target));
    absl::StatusOr<std::map<client::TopicPartition, absl::Status>> done =
        co_await client::alter_partition_reassignments(admin, std::move(targets));
    if (!done.ok()) continue;
    for (const auto& [_, status] : *done) {
      if (status.ok()) {
        ++s->reassignments;
      } else {
        ++s->reassignments_refused;
      }
    }
  }
}

io::Task<void> client_main(io::Context* ctx, Shared* s) {
  io::TaskScope tasks(ctx->executor());
  for (int i = 0; i < s->config.writers; ++i) tasks.spawn(writer(ctx, s, i));
  if (s->config.churn) tasks.spawn(churner(ctx, s));
  if (s->config.reassigning()) tasks.spawn(reassigner(ctx, s));
  co_await reader(ctx, s);
}

// After the final power loss and restart: every partition read from its
// start up to its high watermark. Every acknowledged record must be there,
// at its offset, unchanged; offsets only grow; no value twice (the
// producers are idempotent, and every value is unique).
io::Task<void> final_read_main(io::Context* ctx, Shared* s) {
  client::Consumer consumer(*ctx, consumer_config(s, "final-reader"));
  client::ConsumerStats counted;
  const std::vector<client::TopicPartition> tps = all_partitions(s);
  consumer.assign(tps);
  for (const client::TopicPartition& tp : tps) consumer.seek(tp, 0);
  std::vector<std::map<int64_t, std::string>> read(tps.size());
  const io::Instant deadline = ctx->clock().now() + 100s;
  // Done once every acknowledged record was read; or, when some are
  // missing, once the reader stood at every partition's high watermark with
  // nothing changing for 10 s (a new leader's high watermark may lag until
  // its followers fetch).
  io::Instant settled = ctx->clock().now();
  std::vector<std::pair<int64_t, int64_t>> seen(tps.size(), {-1, -1});
  while (true) {
    bool all_acked = true;
    bool at_end = true;
    bool changed = false;
    for (const client::TopicPartition& tp : tps) {
      if (note_offline(s, tp.partition)) continue;
      const std::map<int64_t, std::string>& acked = s->acked[static_cast<size_t>(tp.partition)];
      const int64_t pos = consumer.position(tp).value_or(-1);
      const int64_t hw = consumer.end_offset_seen(tp).value_or(-1);
      all_acked = all_acked && pos >= (acked.empty() ? 0 : acked.rbegin()->first + 1) && pos >= hw;
      at_end = at_end && hw >= 0 && pos >= hw;
      std::pair<int64_t, int64_t>& last = seen[static_cast<size_t>(tp.partition)];
      changed = changed || last != std::pair<int64_t, int64_t>(pos, hw);
      last = {pos, hw};
    }
    if (changed || !at_end) settled = ctx->clock().now();
    if (all_acked || ctx->clock().now() - settled >= 10s) break;
    if (ctx->clock().now() >= deadline) {
      for (const client::TopicPartition& tp : tps) {
        if (s->offline.contains(tp.partition)) continue;
        s->violation(fmt::format("final read of partition {} stopped at {} (high watermark seen: {})", tp.partition,
                                 consumer.position(tp).value_or(-1), consumer.end_offset_seen(tp).value_or(-1)));
      }
      break;
    }
    absl::StatusOr<std::vector<client::ConsumerRecord>> got = co_await consumer.poll(500ms);
    count_fetches(s, consumer, &counted);
    if (!got.ok()) {
      s->violation(fmt::format("final read: poll failed: {}", got.status().ToString()));
      break;
    }
    for (const client::ConsumerRecord& r : *got) {
      std::map<int64_t, std::string>& m = read[static_cast<size_t>(r.partition)];
      if (!m.empty() && r.offset <= m.rbegin()->first) {
        s->violation(fmt::format("partition {}: final read went from offset {} to {}", r.partition,
                                 m.rbegin()->first, r.offset));
      }
      m[r.offset] = r.value.has_value() ? std::string(r.value->view()) : std::string();
    }
  }
  for (const client::TopicPartition& tp : tps) {
    // (An offline partition was read as far as it went: no duplicates;
    // what it holds cannot be read.)
    const bool offline = s->offline.contains(tp.partition);
    const std::map<int64_t, std::string>& got = read[static_cast<size_t>(tp.partition)];
    std::map<std::string, int64_t> seen;
    for (const auto& [offset, value] : got) {
      auto [it, fresh] = seen.emplace(value, offset);
      if (!fresh) {
        s->violation(fmt::format("partition {}: '{}' is at offset {} and again at {}: a duplicate", tp.partition,
                                 value, it->second, offset));
      }
    }
    if (offline) continue;
    // A record once served below the high watermark stays: no read of
    // data a crash can still take (acknowledged or not).
    for (const auto& [offset, value] : s->observed[static_cast<size_t>(tp.partition)]) {
      auto it = got.find(offset);
      if (it == got.end() || it->second != value) {
        s->violation(fmt::format("partition {} offset {}: read '{}' while writing, finally {}", tp.partition, offset,
                                 value, it == got.end() ? std::string("nothing") : "'" + it->second + "'"));
      }
    }
    for (const auto& [offset, value] : s->acked[static_cast<size_t>(tp.partition)]) {
      auto it = got.find(offset);
      if (it == got.end()) {
        s->violation(fmt::format("partition {}: acknowledged record at offset {} ('{}') lost", tp.partition, offset,
                                 value));
      } else if (it->second != value) {
        s->violation(fmt::format("partition {} offset {}: acknowledged '{}', finally read '{}'", tp.partition, offset,
                                 value, it->second));
      }
    }
  }
  s->final_read_done = true;
}

}  // namespace

io::Task<absl::StatusOr<std::vector<std::pair<int64_t, std::string>>>> read_log(storage::Log* log, int64_t from,
                                                                               int64_t to) {
  std::vector<std::pair<int64_t, std::string>> out;
  int64_t offset = from;
  while (offset < to) {
    absl::StatusOr<storage::ReadResult> read = co_await log->read(offset, 1 << 20, storage::ReadBound::kLogEnd, true);
    if (!read.ok()) co_return read.status();
    if (read->error != net::Error::kNone) co_return absl::OutOfRangeError(std::string(net::error_name(net::code(read->error))));
    std::vector<std::pair<int64_t, std::string>> got;
    absl::Status decoded = decode_fetched(read->records, &got);
    if (!decoded.ok()) co_return decoded;
    const int64_t before = offset;
    for (auto& [o, v] : got) {
      if (o < offset || o >= to) continue;
      out.emplace_back(o, std::move(v));
      offset = o + 1;
    }
    if (offset == before) break;  // compacted away or the end
  }
  co_return out;
}

namespace {

// After the final read: once the followers have caught up (all of them in
// the ISR again, at the leader's log end), every replica holds the leader's
// records at every offset below the leader's high watermark.
io::Task<void> replica_check_main(io::Context* ctx, Shared* s) {
  auto leader_of = [&](int32_t partition) -> std::shared_ptr<broker::Partition> {
    for (broker::Broker* b : s->running) {
      if (b == nullptr) continue;
      auto it = b->partitions().find({std::string(kTopic), partition});
      if (it != b->partitions().end() && it->second->is_leader(b->node_id())) return it->second;
    }
    return nullptr;
  };
  for (int32_t p = 0; p < s->config.partitions; ++p) {
    // Up to 30 s for the followers to reach the leader's log end.
    std::shared_ptr<broker::Partition> leader;
    for (int i = 0; i < 300; ++i) {
      leader = leader_of(p);
      if (leader == nullptr && offline_by_loss(*s, p)) break;
      // Caught up: every replica back in the ISR (a follower joins only
      // from a fetch whose last epoch matched the leader's log), all at the
      // leader's log end; all but the node lost for good.
      bool caught_up = leader != nullptr && leader->log->high_watermark() == leader->log->log_end_offset() &&
                       leader->isr.size() == leader->replicas.size() - static_cast<size_t>(std::count(
                                                 leader->replicas.begin(), leader->replicas.end(), s->lost() + 1));
      for (broker::Broker* b : s->running) {
        if (b == nullptr || leader == nullptr) continue;
        auto it = b->partitions().find({std::string(kTopic), p});
        if (it == b->partitions().end()) continue;
        caught_up = caught_up && it->second->log->log_end_offset() == leader->log->log_end_offset();
      }
      if (caught_up) break;
      co_await ctx->clock().sleep_for(100ms);
    }
    if (leader == nullptr && note_offline(s, p)) continue;
    if (leader == nullptr) {
      s->violation(fmt::format("partition {} has no leader after the final restart", p));
      continue;
    }
    const int64_t hw = leader->log->high_watermark();
    for (size_t i = 0; i < s->running.size(); ++i) {
      broker::Broker* b = s->running[i];
      if (b == nullptr) continue;
      auto it = b->partitions().find({std::string(kTopic), p});
      if (it == b->partitions().end() || it->second == leader) continue;
      std::shared_ptr<broker::Partition> replica = it->second;
      const int64_t from = std::max(leader->log->log_start_offset(), replica->log->log_start_offset());
      const int64_t to = std::min(hw, replica->log->log_end_offset());
      if (replica->log->log_end_offset() < hw || std::find(leader->isr.begin(), leader->isr.end(), b->node_id()) == leader->isr.end()) {
        s->violation(fmt::format("partition {}: replica {} ends at {} (leader's high watermark {}, ISR [{}]): "
                                 "it did not catch up within 30s",
                                 p, b->node_id(), replica->log->log_end_offset(), hw, fmt::join(leader->isr, ",")));
        continue;
      }
      absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> ours = co_await read_log(leader->log.get(), from, to);
      absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> theirs =
          co_await read_log(replica->log.get(), from, to);
      if (!ours.ok() || !theirs.ok()) {
        s->violation(fmt::format("partition {}: reading the replicas' logs failed: {} / {}", p,
                                 ours.status().ToString(), theirs.status().ToString()));
        continue;
      }
      if (*ours != *theirs) {
        size_t k = 0;
        while (k < ours->size() && k < theirs->size() && (*ours)[k] == (*theirs)[k]) ++k;
        s->violation(fmt::format(
            "partition {}: replica {} disagrees with leader {} below the high watermark {}: at offset {} "
            "the leader has '{}', the replica '{}'",
            p, b->node_id(), leader->leader, hw, k < ours->size() ? (*ours)[k].first : (k < theirs->size() ? (*theirs)[k].first : -1),
            k < ours->size() ? (*ours)[k].second : "(nothing)", k < theirs->size() ? (*theirs)[k].second : "(nothing)"));
      }
      s->replica_records_compared += ours->size();
    }
  }
  s->replicas_checked = true;
}

// The churn topics' (and the checked topic's) directories on server node
// `index` that no partition of that node's broker stands for (a topic
// deleted, or a replica moved away, its directory kept).
std::vector<std::string> stray_directories(Node& node, Shared* s, size_t index) {
  std::vector<std::string> out;
  const broker::Broker* b = s->running[index];
  if (b == nullptr) return out;  // down: the other checks say why
  for (const std::string& dir : node.disk().directories(DiskView::kCurrent)) {
    if (!(dir.starts_with(kChurnPrefix) || dir.starts_with(kTopic)) || dir.find('/') != std::string::npos) continue;
    const std::optional<storage::TopicPartition> key = storage::parse_partition_dir_name(dir);
    if (!key.has_value()) continue;
    const metadata::TopicImage* t = b->image().topics().topic(key->topic);
    const metadata::PartitionRegistration* reg = t == nullptr ? nullptr : t->partition(key->partition);
    if (reg == nullptr || std::find(reg->replicas.begin(), reg->replicas.end(), b->node_id()) == reg->replicas.end()) {
      out.push_back(dir);
    }
  }
  return out;
}

// The node whose loss the checked topic can take now (spare_server; the
// churned topics come and go, and are left out).
std::optional<int> node_to_lose(World& world, const Shared& s) {
  return spare_server(world, s.running, s.config.min_insync, {{std::string(kTopic), s.config.partitions}});
}

}  // namespace

absl::StatusOr<ScenarioResult> run_broker(const ScenarioOptions& options) {
  BrokerSimConfig config = BrokerSimConfig::draw(options.seed);
  config.ack_before_flush = options.name == "broker-mutant-flush" || options.name == "replication-mutant-flush";
  if (options.name.starts_with("replication")) {
    config.nodes = 3;
    config.replication_factor = 3;
    config.min_insync = 2;
  }
  if (options.name == "replication-loss") config.faults.draw_node_loss(options.seed);
  const WorldOptions world_options = scenario_world_options(options, config.faults.network);
  Shared shared(config);  // before the World: dying tasks touch it
  World world(options.seed, world_options);
  print_run_start(options, world, config.describe());
  io::Random node_random(options.seed ^ (kConfigSalt << 1));
  const std::vector<Node*> servers =
      add_server_nodes(world, config.faults, node_random, config.nodes, &shared.brokers, &shared.controllers);
  shared.running.resize(servers.size());
  Node& client = world.add_node(config.faults.node_options(node_random));
  Shared* s = &shared;
  for (int i = 0; i < config.nodes; ++i) {
    servers[static_cast<size_t>(i)]->start([s, i](io::Context& ctx) { return broker_node_main(&ctx, s, i); });
  }
  client.start([s](io::Context& ctx) { return client_main(&ctx, s); });
  FaultSchedule faults(world, config.faults);
  shared.faults = &faults;
  shared.stops.attach(faults);
  if (config.faults.node_loss_after.count() > 0) {
    faults.pick_lost = [&] { return node_to_lose(world, shared); };
    world.schedule(std::max(config.faults.node_loss_after - 5s, io::Duration(0)), [&] { shared.loss_near = true; });
  }
  faults.start();
  world.run_for(config.workload);
  faults.stop();
  const int64_t heal_ns = world.now_ns();
  // Liveness: once the faults stop, every partition takes writes again.
  auto stalled = [&] {
    std::vector<int> out;
    for (size_t p = 0; p < shared.last_ack_ns.size(); ++p) {
      if (shared.last_ack_ns[p] <= heal_ns && !note_offline(&shared, static_cast<int32_t>(p))) {
        out.push_back(static_cast<int>(p));
      }
    }
    return out;
  };
  world.run_until([&] { return stalled().empty(); }, config.quiet_max);
  const std::vector<int> stalled_partitions = stalled();
  shared.writing = false;
  // Answers in flight arrive; a request stuck since the workload has been
  // pending kSlowRequest by the end of this.
  world.run_for(broker::kSlowRequest);
  // No request of a running broker waited long (a Produce waits at most
  // its timeout): one that did, or still waits, is stuck on something.
  for (size_t i = 0; i < shared.running.size(); ++i) {
    const broker::Broker* b = shared.running[i];
    if (b == nullptr) continue;
    if (b->longest_answer() >= broker::kSlowRequest) {
      shared.violation(fmt::format("node {}: a request took {} to be answered", i + 1, seconds(b->longest_answer())));
    }
    if (auto oldest = b->oldest_pending_request(); oldest.has_value() && oldest->second >= broker::kSlowRequest) {
      shared.violation(
          fmt::format("node {}: {} unanswered after {}", i + 1, oldest->first.describe(), seconds(oldest->second)));
    }
  }

  // Power loss, restart, read everything back.
  faults.finish();
  for (Node* server : servers) server->crash();
  client.crash();
  for (int i = 0; i < config.nodes; ++i) {
    if (faults.lost(i)) continue;
    servers[static_cast<size_t>(i)]->start([s, i](io::Context& ctx) { return broker_node_main(&ctx, s, i); });
  }
  client.start([s](io::Context& ctx) { return final_read_main(&ctx, s); });
  world.run_until([&] { return shared.final_read_done; }, 120s);
  if (config.nodes > 1 && shared.final_read_done) {
    client.crash();
    client.start([s](io::Context& ctx) { return replica_check_main(&ctx, s); });
    world.run_until([&] { return shared.replicas_checked; }, 60s);
  }

  // Every node back after the power loss, and the image it holds: no
  // directory of a churned topic that is gone, or of a partition that is
  // not on this node.
  if (config.churn || config.reassigning()) {
    auto strays = [&] {
      std::vector<std::string> out;
      for (size_t i = 0; i < servers.size(); ++i) {
        for (const std::string& dir : stray_directories(*servers[i], s, i)) {
          out.push_back(fmt::format("node {} keeps {}", i + 1, dir));
        }
      }
      return out;
    };
    world.run_until([&] { return strays().empty(); }, 30s);
    for (const std::string& stray : strays()) {
      shared.violation(fmt::format("a directory of a deleted topic or a moved replica stays: {}", stray));
    }
  }

  ScenarioResult result;
  result.failures = shared.violations;
  for (int p : stalled_partitions) {
    if (result.failures.size() >= kFailuresMax) break;
    result.failures.push_back(
        fmt::format("liveness: partition {} had no produce acknowledged within {} of the heal (its last at {})", p,
                    seconds(config.quiet_max),
                    seconds(io::Duration(std::max<int64_t>(shared.last_ack_ns[static_cast<size_t>(p)], 0)))));
  }
  if (!shared.final_read_done && result.failures.size() < kFailuresMax) {
    result.failures.push_back("the final read-back did not finish");
  }
  if (config.nodes > 1 && shared.final_read_done && !shared.replicas_checked &&
      result.failures.size() < kFailuresMax) {
    result.failures.push_back("the replica check did not finish");
  }
  result.passed = result.failures.empty();
  result.trace_hash = world.trace_hash();
  result.events = world.events_run();
  result.simulated = world.elapsed();
  result.replay_command = world.replay_command();
  result.summary = fmt::format(
      "broker: records sent={} acked={} (offset unknown {}) failed={} produce-requests={} retries={} "
      "producer-ids={} fetches={} (incremental {}, session "
      "resets {}) records-read={} broker-starts={} replica-records-compared={} churn: created={} deleted={} "
      "acked={} read={}; reassignments={} (refused {}); offline with the lost node=[{}]; "
      "faults: {} buggify-fired={}",
      shared.records_sent, shared.records_acked, shared.records_acked_unknown_offset, shared.records_failed,
      shared.produce_requests, shared.produce_retries, shared.producer_ids,
      shared.fetches, shared.incremental_fetches, shared.fetch_session_resets, shared.fetched_records,
      shared.broker_starts, shared.replica_records_compared, shared.churn_created, shared.churn_deleted,
      shared.churn_records_acked, shared.churn_records_read, shared.reassignments, shared.reassignments_refused,
      fmt::join(shared.offline, ","), faults.counters(), world.buggify().fired());
  return result;
}

}  // namespace brook::sim
