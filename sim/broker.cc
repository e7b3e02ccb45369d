// sim/broker.cc: the "broker" scenario (see sim/broker.h).
#include "sim/broker.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/broker/broker.h"
#include "core/controller/quorum_controller.h"
#include "core/meta_properties.h"
#include "io/scope.h"
#include "io/when.h"
#include "net/kafka/messages/create_topics_request.h"
#include "net/kafka/messages/create_topics_response.h"
#include "net/kafka/messages/fetch_request.h"
#include "net/kafka/messages/fetch_response.h"
#include "net/kafka/messages/produce_request.h"
#include "net/kafka/messages/produce_response.h"
#include "net/kafka/record_batch.h"
#include "net/kafka/rpc.h"
#include "raft/raft_node.h"
#include "sim/faults.h"
#include "sim/world.h"

namespace brook::sim {

namespace {

using namespace std::chrono_literals;

constexpr uint16_t kBrokerPort = 9092;
constexpr uint16_t kControllerPort = 9093;
constexpr uint64_t kConfigSalt = 0x6272'6f6b'6572'0001ULL;  // "broker"
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

  static BrokerSimConfig draw(uint64_t seed) {
    io::Random r(seed ^ kConfigSalt);
    BrokerSimConfig c;
    c.faults = FaultConfig::draw(r);
    c.partitions = static_cast<int>(r.uniform_range(1, 4));
    c.writers = static_cast<int>(r.uniform_range(1, 3));
    c.records_per_batch_max = static_cast<int>(r.uniform_range(1, 8));
    c.write_interval_max = uniform_duration(r, 5ms, 100ms);
    return c;
  }
  std::string describe() const {
    return fmt::format("broker: partitions={} writers={} records-per-batch<={} write-interval<={}\n{}",
                       partitions, writers, records_per_batch_max, seconds(write_interval_max),
                       faults.describe());
  }
};

struct Shared {
  explicit Shared(BrokerSimConfig c) : config(std::move(c)), acked(static_cast<size_t>(config.partitions)) {}

  BrokerSimConfig config;
  io::Address broker;
  io::Address controller;
  // What acks=all answered: partition -> offset -> value.
  std::vector<std::map<int64_t, std::string>> acked;
  std::vector<std::string> violations;
  bool writing = true;
  int64_t last_ack_ns = -1;
  uint64_t produce_requests = 0;
  uint64_t produce_errors = 0;
  uint64_t records_acked = 0;
  uint64_t fetches = 0;
  uint64_t fetched_records = 0;
  uint64_t broker_starts = 0;
  bool final_read_done = false;

  void violation(std::string what) {
    if (violations.size() < kFailuresMax) violations.push_back(std::move(what));
  }
};

// One batch of `values` (keys null, timestamps from the node's wall clock).
absl::StatusOr<io::Buffer> build_batch(io::Context* ctx, const std::vector<std::string>& values) {
  net::RecordBatchBuilder builder(net::RecordBatchOptions{});
  for (const std::string& v : values) {
    net::NewRecord record;
    record.timestamp_ms = io::to_ms(ctx->clock().wall_now());
    record.value = io::Buffer::copy_of(v);
    builder.append(std::move(record));
  }
  return builder.build();
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

// The node: controller quorum of one, QuorumController and Broker, as
// `brook server` wires them. Returns when the broker stops (a log failed):
// the fault schedule power-cycles it like a supervisor.
io::Task<void> broker_node_main(io::Context* ctx, Shared* s) {
  ++s->broker_starts;
  std::vector<std::string> dirs(1);
  absl::StatusOr<core::MetaProperties> meta = co_await core::ensure_formatted(
      ctx->disk(), std::move(dirs), std::string(kClusterId), 1, true, ctx->random());
  if (!meta.ok()) {
    ctx->log().error("broker-sim: format: {}", meta.status().ToString());
    co_return;
  }
  raft::RaftConfig rc;
  rc.node_id = 1;
  rc.voters.emplace(1, s->controller);
  rc.cluster_id = std::string(kClusterId);
  rc.advertised = s->controller;
  rc.election_timeout = 200ms;
  rc.election_backoff_max = 200ms;
  absl::StatusOr<std::unique_ptr<raft::RaftNode>> opened = co_await raft::RaftNode::open(*ctx, rc);
  if (!opened.ok()) {
    ctx->log().error("broker-sim: metadata log: {}", opened.status().ToString());
    co_return;
  }
  std::unique_ptr<raft::RaftNode> node = std::move(*opened);
  absl::StatusOr<std::unique_ptr<io::Listener>> controller_listener = co_await ctx->network().listen(s->controller);
  absl::StatusOr<std::unique_ptr<io::Listener>> broker_listener = co_await ctx->network().listen(s->broker);
  if (!controller_listener.ok() || !broker_listener.ok()) {
    ctx->log().error("broker-sim: listen failed");
    co_return;
  }
  controller::ControllerConfig cc;
  cc.node_id = 1;
  cc.cluster_id = std::string(kClusterId);
  cc.broker_session_timeout = 3s;
  cc.num_partitions = s->config.partitions;
  controller::QuorumController controller(*ctx, *node, cc);
  node->set_listener(&controller);
  broker::BrokerConfig bc;
  bc.node_id = 1;
  bc.cluster_id = std::string(kClusterId);
  bc.advertised = s->broker;
  bc.incarnation_id = core::random_uuid(ctx->random());
  bc.heartbeat_interval = 500ms;
  bc.num_partitions = s->config.partitions;
  // A single replica: an acknowledgement is only as durable as the disk.
  bc.log_defaults.flush_mode =
      s->config.ack_before_flush ? storage::FlushMode::kBackground : storage::FlushMode::kBeforeAck;
  bc.log_defaults.segment_bytes = 64 << 10;  // many segments, rolls and index files
  broker::Broker broker(*ctx, *node, bc);
  controller.set_observer(&broker);
  io::TaskScope tasks(ctx->executor());
  tasks.spawn(controller.run());
  broker::Broker* b = &broker;
  auto serve = [](io::Context* x, io::Listener* l, broker::Broker* br) -> io::Task<void> {
    while (!br->serving()) co_await x->clock().sleep_for(10ms);
    (void)co_await net::serve(*l, [br](net::RequestFrame f) { return br->handle_request(std::move(f)); });
  };
  tasks.spawn(serve(ctx, broker_listener->get(), b));
  // Until the broker or the metadata log stops (a failed log): the node
  // then goes down, and the fault schedule power-cycles it.
  controller::QuorumController* c = &controller;
  auto stopped = co_await io::when_first(
      broker.run(), node->run(**controller_listener, [c](net::RequestFrame f) { return c->handle_request(std::move(f)); }));
  const absl::Status& why = stopped.index() == 0 ? std::get<0>(stopped) : std::get<1>(stopped);
  ctx->log().warn("broker-sim: {} stopped: {}", stopped.index() == 0 ? "broker" : "metadata log", why.ToString());
}

io::Task<bool> ensure_topic(io::Context* ctx, Shared* s, net::Peer* peer) {
  net::CreateTopicsRequest r;
  r.timeout_ms = 5000;
  net::CreateTopicsRequest::CreatableTopic t;
  t.name = std::string(kTopic);
  t.num_partitions = s->config.partitions;
  t.replication_factor = 1;
  r.topics.push_back(t);
  absl::StatusOr<net::CreateTopicsResponse> resp = co_await peer->call<net::CreateTopicsResponse>(r, 5, kRpcTimeout);
  if (!resp.ok() || resp->topics.size() != 1) co_return false;
  const int16_t e = resp->topics[0].error_code;
  if (e != 0 && e != net::code(net::Error::kTopicAlreadyExists)) {
    ctx->log().debug("broker-sim: CreateTopics: {}", net::error_name(e));
    co_return false;
  }
  co_return true;
}

io::Task<void> writer(io::Context* ctx, Shared* s, int id) {
  net::Peer peer(ctx->network(), ctx->clock(), s->broker, fmt::format("writer-{}", id));
  uint64_t seq = 0;
  while (!co_await ensure_topic(ctx, s, &peer)) co_await ctx->clock().sleep_for(200ms);
  while (true) {
    co_await ctx->clock().sleep_for(uniform_duration(ctx->random(), 1ms, s->config.write_interval_max));
    if (!s->writing) continue;
    const int32_t partition = static_cast<int32_t>(ctx->random().uniform(static_cast<uint64_t>(s->config.partitions)));
    std::vector<std::string> values;
    const int n = static_cast<int>(ctx->random().uniform_range(1, s->config.records_per_batch_max));
    for (int i = 0; i < n; ++i) values.push_back(fmt::format("w{}-{}-{}", id, ctx->random().uniform(1u << 30), seq++));
    absl::StatusOr<io::Buffer> batch = build_batch(ctx, values);
    if (!batch.ok()) {
      s->violation(fmt::format("writer {}: batch does not build: {}", id, batch.status().ToString()));
      co_return;
    }
    net::ProduceRequest r;
    r.acks = -1;
    r.timeout_ms = 2000;
    net::ProduceRequest::TopicProduceData t;
    t.name = std::string(kTopic);
    net::ProduceRequest::PartitionProduceData p;
    p.index = partition;
    p.records = std::move(*batch);
    t.partition_data.push_back(std::move(p));
    r.topic_data.push_back(std::move(t));
    ++s->produce_requests;
    absl::StatusOr<net::ProduceResponse> resp = co_await peer.call<net::ProduceResponse>(r, 9, kRpcTimeout);
    if (!resp.ok() || resp->responses.size() != 1 || resp->responses[0].partition_responses.size() != 1) {
      ++s->produce_errors;
      continue;
    }
    const auto& pr = resp->responses[0].partition_responses[0];
    if (pr.error_code != 0) {
      ++s->produce_errors;
      continue;
    }
    std::map<int64_t, std::string>& acked = s->acked[static_cast<size_t>(partition)];
    for (size_t i = 0; i < values.size(); ++i) {
      const int64_t offset = pr.base_offset + static_cast<int64_t>(i);
      auto [it, fresh] = acked.emplace(offset, values[i]);
      if (!fresh) {
        s->violation(fmt::format("partition {} offset {} acknowledged twice: '{}' and then '{}'", partition,
                                 offset, it->second, values[i]));
      }
    }
    s->records_acked += values.size();
    s->last_ack_ns = ctx->clock().now().time_since_epoch().count();
  }
}

// Reads [from, to) of a partition; offset -> value.
io::Task<absl::StatusOr<std::vector<std::pair<int64_t, std::string>>>> read_range(Shared* s, net::Peer* peer,
                                                                                 int32_t partition, int64_t from,
                                                                                 int64_t to) {
  std::vector<std::pair<int64_t, std::string>> out;
  int64_t offset = from;
  while (offset < to) {
    net::FetchRequest r;
    r.max_wait_ms = 50;
    r.min_bytes = 1;
    r.max_bytes = 1 << 20;
    net::FetchRequest::FetchTopic t;
    t.topic = std::string(kTopic);
    net::FetchRequest::FetchPartition p;
    p.partition = partition;
    p.fetch_offset = offset;
    p.partition_max_bytes = 256 << 10;
    t.partitions.push_back(p);
    r.topics.push_back(std::move(t));
    ++s->fetches;
    absl::StatusOr<net::FetchResponse> resp = co_await peer->call<net::FetchResponse>(r, 11, kRpcTimeout);
    if (!resp.ok()) co_return resp.status();
    if (resp->responses.size() != 1 || resp->responses[0].partitions.size() != 1) {
      co_return absl::DataLossError("malformed fetch answer");
    }
    const auto& pd = resp->responses[0].partitions[0];
    if (pd.error_code != 0) co_return absl::UnavailableError(std::string(net::error_name(pd.error_code)));
    std::vector<std::pair<int64_t, std::string>> got;
    if (pd.records.has_value()) {
      absl::Status decoded = decode_fetched(*pd.records, &got);
      if (!decoded.ok()) co_return decoded;
    }
    int64_t next = offset;
    for (auto& [o, v] : got) {
      if (o < offset) continue;  // the batch holding `offset` starts earlier
      if (o < next) co_return absl::DataLossError(fmt::format("offset {} after {}", o, next - 1));
      out.emplace_back(o, std::move(v));
      next = o + 1;
    }
    if (next == offset) {
      if (pd.high_watermark <= offset) break;  // nothing more committed
      co_return absl::UnavailableError("no progress");
    }
    offset = next;
  }
  s->fetched_records += out.size();
  co_return out;
}

// Reads back acknowledged records while the workload runs.
io::Task<void> reader(io::Context* ctx, Shared* s) {
  net::Peer peer(ctx->network(), ctx->clock(), s->broker, "reader");
  while (true) {
    co_await ctx->clock().sleep_for(uniform_duration(ctx->random(), 50ms, 300ms));
    const int32_t partition = static_cast<int32_t>(ctx->random().uniform(static_cast<uint64_t>(s->config.partitions)));
    const std::map<int64_t, std::string>& acked = s->acked[static_cast<size_t>(partition)];
    if (acked.empty()) continue;
    auto it = acked.begin();
    std::advance(it, static_cast<long>(ctx->random().uniform(acked.size())));
    const int64_t from = it->first;
    absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> got =
        co_await read_range(s, &peer, partition, from, from + 20);
    if (!got.ok()) continue;
    // Only what was acknowledged before the read started is checked.
    for (const auto& [o, v] : *got) {
      auto a = s->acked[static_cast<size_t>(partition)].find(o);
      if (a != s->acked[static_cast<size_t>(partition)].end() && a->second != v) {
        s->violation(fmt::format("partition {} offset {}: acknowledged '{}', read '{}'", partition, o, a->second, v));
      }
    }
  }
}

io::Task<void> client_main(io::Context* ctx, Shared* s) {
  io::TaskScope tasks(ctx->executor());
  for (int i = 0; i < s->config.writers; ++i) tasks.spawn(writer(ctx, s, i));
  co_await reader(ctx, s);
}

// After the final power loss and restart: every partition read from its
// start; every acknowledged record must be there, at its offset, unchanged.
io::Task<void> final_read_main(io::Context* ctx, Shared* s) {
  net::Peer peer(ctx->network(), ctx->clock(), s->broker, "final-reader");
  for (int32_t p = 0; p < s->config.partitions; ++p) {
    const std::map<int64_t, std::string>& acked = s->acked[static_cast<size_t>(p)];
    const int64_t end = acked.empty() ? 0 : acked.rbegin()->first + 1;
    absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> got;
    for (int attempt = 0; attempt < 200; ++attempt) {
      got = co_await read_range(s, &peer, p, 0, end);
      if (got.ok()) break;
      co_await ctx->clock().sleep_for(100ms);
    }
    if (!got.ok()) {
      s->violation(fmt::format("final read of partition {} failed: {}", p, got.status().ToString()));
      continue;
    }
    std::map<int64_t, std::string> read(got->begin(), got->end());
    for (const auto& [offset, value] : acked) {
      auto it = read.find(offset);
      if (it == read.end()) {
        s->violation(fmt::format("partition {}: acknowledged record at offset {} ('{}') lost", p, offset, value));
      } else if (it->second != value) {
        s->violation(fmt::format("partition {} offset {}: acknowledged '{}', finally read '{}'", p, offset, value,
                                 it->second));
      }
    }
  }
  s->final_read_done = true;
}

}  // namespace

absl::StatusOr<ScenarioResult> run_broker(const ScenarioOptions& options) {
  BrokerSimConfig config = BrokerSimConfig::draw(options.seed);
  config.ack_before_flush = options.name == "broker-mutant-flush";
  WorldOptions world_options;
  world_options.scenario = options.name;
  world_options.network = config.faults.network;
  world_options.trace = options.trace;
  world_options.log_sink = options.log_sink;
  Shared shared(config);  // before the World: dying tasks touch it
  World world(options.seed, world_options);
  if (options.out != nullptr) {
    fmt::print(options.out, "brook sim: scenario={} seed={}\n{}\nbuggify: {}\n", options.name, options.seed,
               config.describe(), world.buggify().enabled() ? "on" : "off");
  }
  io::Random node_random(options.seed ^ (kConfigSalt << 1));
  Node& server = world.add_node(config.faults.node_options(node_random));
  Node& client = world.add_node(config.faults.node_options(node_random));
  shared.broker = server.address(kBrokerPort);
  shared.controller = server.address(kControllerPort);
  Shared* s = &shared;
  server.start([s](io::Context& ctx) { return broker_node_main(&ctx, s); });
  client.start([s](io::Context& ctx) { return client_main(&ctx, s); });
  FaultSchedule faults(world, config.faults);
  faults.start();
  world.run_for(config.workload);
  faults.stop();
  const int64_t heal_ns = world.now_ns();
  const bool live = world.run_until([&] { return shared.last_ack_ns > heal_ns; }, config.quiet_max);
  shared.writing = false;
  world.run_for(1s);  // answers in flight arrive

  // Power loss, restart, read everything back.
  faults.finish();
  server.crash();
  client.crash();
  server.start([s](io::Context& ctx) { return broker_node_main(&ctx, s); });
  client.start([s](io::Context& ctx) { return final_read_main(&ctx, s); });
  world.run_until([&] { return shared.final_read_done; }, 120s);

  ScenarioResult result;
  result.failures = shared.violations;
  if (!live && result.failures.size() < kFailuresMax) {
    result.failures.push_back(fmt::format("liveness: no produce was acknowledged within {} of the heal (last at {})",
                                          seconds(config.quiet_max),
                                          seconds(io::Duration(std::max<int64_t>(shared.last_ack_ns, 0)))));
  }
  if (!shared.final_read_done && result.failures.size() < kFailuresMax) {
    result.failures.push_back("the final read-back did not finish");
  }
  result.passed = result.failures.empty();
  result.trace_hash = world.trace_hash();
  result.events = world.events_run();
  result.simulated = world.elapsed();
  result.replay_command = world.replay_command();
  result.summary = fmt::format(
      "broker: produce-requests={} errors={} records-acked={} fetches={} records-read={} broker-starts={}; "
      "faults: crashes={} partitions={} clogs={} resets={} wall-jumps={} revivals={} buggify-fired={}",
      shared.produce_requests, shared.produce_errors, shared.records_acked, shared.fetches, shared.fetched_records,
      shared.broker_starts, faults.crashes, faults.partitions, faults.clogs, faults.resets, faults.wall_jumps,
      faults.revivals, world.buggify().fired());
  return result;
}

}  // namespace brook::sim
