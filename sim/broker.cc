// sim/broker.cc: the "broker" scenario (see sim/broker.h).
#include "sim/broker.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

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
#include "net/kafka/messages/metadata_request.h"
#include "net/kafka/messages/metadata_response.h"
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
  // The replication scenario: nodes running broker and controller each,
  // topics of `replication_factor` replicas and min.insync.replicas.
  int nodes = 1;
  int replication_factor = 1;
  int min_insync = 1;

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
    return fmt::format(
        "broker: nodes={} replication-factor={} min.insync.replicas={} partitions={} writers={} "
        "records-per-batch<={} write-interval<={}\n{}",
        nodes, replication_factor, min_insync, partitions, writers, records_per_batch_max,
        seconds(write_interval_max), faults.describe());
  }
};

struct Shared {
  explicit Shared(BrokerSimConfig c) : config(std::move(c)), acked(static_cast<size_t>(config.partitions)) {}

  BrokerSimConfig config;
  // Per node (node id = index + 1).
  std::vector<io::Address> brokers;
  std::vector<io::Address> controllers;
  // The running brokers (null while a node is down), for the replica check.
  std::vector<broker::Broker*> running;
  // What acks=all answered: partition -> offset -> value.
  std::vector<std::map<int64_t, std::string>> acked;
  std::vector<std::string> violations;
  bool writing = true;
  int64_t last_ack_ns = -1;
  uint64_t produce_requests = 0;
  uint64_t produce_errors = 0;
  uint64_t records_acked = 0;
  uint64_t fetches = 0;
  uint64_t incremental_fetches = 0;
  uint64_t fetch_session_resets = 0;
  uint64_t fetched_records = 0;
  uint64_t broker_starts = 0;
  uint64_t leader_lookups = 0;
  bool final_read_done = false;
  bool replicas_checked = false;
  uint64_t replica_records_compared = 0;

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

// A node: a metadata quorum voter, the QuorumController and the Broker, as
// `brook server` wires them. Returns when the broker stops (a log failed):
// the fault schedule power-cycles it like a supervisor.
io::Task<void> broker_node_main(io::Context* ctx, Shared* s, int index) {
  ++s->broker_starts;
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
  for (int i = 0; i < s->config.nodes; ++i) rc.voters.emplace(i + 1, s->controllers[static_cast<size_t>(i)]);
  rc.cluster_id = std::string(kClusterId);
  rc.advertised = s->controllers[static_cast<size_t>(index)];
  rc.election_timeout = 200ms;
  rc.election_backoff_max = 200ms;
  absl::StatusOr<std::unique_ptr<raft::RaftNode>> opened = co_await raft::RaftNode::open(*ctx, rc);
  if (!opened.ok()) {
    ctx->log().error("broker-sim: metadata log: {}", opened.status().ToString());
    co_return;
  }
  std::unique_ptr<raft::RaftNode> node = std::move(*opened);
  absl::StatusOr<std::unique_ptr<io::Listener>> controller_listener =
      co_await ctx->network().listen(s->controllers[static_cast<size_t>(index)]);
  absl::StatusOr<std::unique_ptr<io::Listener>> broker_listener =
      co_await ctx->network().listen(s->brokers[static_cast<size_t>(index)]);
  if (!controller_listener.ok() || !broker_listener.ok()) {
    ctx->log().error("broker-sim: listen failed");
    co_return;
  }
  controller::ControllerConfig cc;
  cc.node_id = id;
  cc.cluster_id = std::string(kClusterId);
  cc.broker_session_timeout = 3s;
  cc.num_partitions = s->config.partitions;
  cc.default_replication_factor = static_cast<int16_t>(s->config.replication_factor);
  controller::QuorumController controller(*ctx, *node, cc);
  node->set_listener(&controller);
  broker::BrokerConfig bc;
  bc.node_id = id;
  bc.cluster_id = std::string(kClusterId);
  bc.advertised = s->brokers[static_cast<size_t>(index)];
  bc.incarnation_id = core::random_uuid(ctx->random());
  bc.heartbeat_interval = 500ms;
  bc.num_partitions = s->config.partitions;
  bc.default_replication_factor = static_cast<int16_t>(s->config.replication_factor);
  bc.min_insync_replicas = s->config.min_insync;
  bc.replica_lag_time_max = 3s;
  // Idle client connections close (and the clients connect again).
  bc.connections_max_idle = uniform_duration(ctx->random(), 500ms, 10s);
  bc.replica_fetch_wait_max = 200ms;
  bc.replica_fetch_backoff = 100ms;
  // Every replica syncs before it acknowledges (a leader before it answers,
  // a follower before its next fetch reports the records): crashes lose
  // unsynced writes here, and acks=all must survive them.
  bc.log_defaults.flush_mode =
      s->config.ack_before_flush ? storage::FlushMode::kBackground : storage::FlushMode::kBeforeAck;
  bc.log_defaults.segment_bytes = 64 << 10;  // many segments, rolls and index files
  broker::Broker broker(*ctx, *node, bc);
  controller.set_observer(&broker);
  s->running[static_cast<size_t>(index)] = &broker;
  struct Clear {
    Shared* s;
    int index;
    ~Clear() { s->running[static_cast<size_t>(index)] = nullptr; }
  } clear{s, index};
  io::TaskScope tasks(ctx->executor());
  tasks.spawn(controller.run());
  broker::Broker* b = &broker;
  auto serve = [](io::Context* x, io::Listener* l, broker::Broker* br) -> io::Task<void> {
    while (!br->serving()) co_await x->clock().sleep_for(10ms);
    (void)co_await net::serve(
        *l, [br](net::RequestFrame f) { return br->handle_request(std::move(f)); }, br->serve_options());
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

// A reader's incremental fetch session with one broker (KIP-227).
struct SessionState {
  int32_t id = 0;
  int32_t epoch = 0;  // 0: the next request opens a session
  int32_t partition = -1;  // the partition the session holds
};

// The clients' view of the cluster: a connection per node and the leader
// of every partition, from Metadata answers.
class Cluster {
 public:
  Cluster(io::Context* ctx, Shared* s, std::string name) : ctx_(ctx), s_(s), leaders_(s->config.partitions, -1) {
    for (size_t i = 0; i < s->brokers.size(); ++i) {
      peers_.push_back(std::make_unique<net::Peer>(ctx->network(), ctx->clock(), s->brokers[i],
                                                   fmt::format("{}-{}", name, i)));
    }
  }
  // The connection to the partition's leader (looked up when unknown).
  io::Task<net::Peer*> leader(int32_t partition) {
    if (leaders_[static_cast<size_t>(partition)] < 0) co_await refresh();
    const int32_t l = leaders_[static_cast<size_t>(partition)];
    if (l < 1 || l > static_cast<int32_t>(peers_.size())) co_return nullptr;
    co_return peers_[static_cast<size_t>(l - 1)].get();
  }
  // After an error: look the leaders up again.
  void forget() { std::fill(leaders_.begin(), leaders_.end(), -1); }
  net::Peer& any() { return *peers_[ctx_->random().uniform(peers_.size())]; }
  // The fetch session with a broker.
  SessionState& session(net::Peer* peer) { return sessions_[peer]; }

 private:
  io::Task<void> refresh() {
    ++s_->leader_lookups;
    net::MetadataRequest r;
    auto& t = r.topics.emplace();
    t.emplace_back().name = std::string(kTopic);
    r.allow_auto_topic_creation = false;
    absl::StatusOr<net::MetadataResponse> resp = co_await any().call<net::MetadataResponse>(r, 9, kRpcTimeout);
    if (!resp.ok()) co_return;
    for (const auto& topic : resp->topics) {
      if (topic.error_code != 0) continue;
      for (const auto& p : topic.partitions) {
        if (p.partition_index >= 0 && p.partition_index < static_cast<int32_t>(leaders_.size())) {
          leaders_[static_cast<size_t>(p.partition_index)] = p.error_code == 0 ? p.leader_id : -1;
        }
      }
    }
  }

  io::Context* ctx_;
  Shared* s_;
  std::vector<std::unique_ptr<net::Peer>> peers_;
  std::vector<int32_t> leaders_;
  std::map<net::Peer*, SessionState> sessions_;
};

io::Task<bool> ensure_topic(io::Context* ctx, Shared* s, net::Peer* peer) {
  net::CreateTopicsRequest r;
  r.timeout_ms = 5000;
  net::CreateTopicsRequest::CreatableTopic t;
  t.name = std::string(kTopic);
  t.num_partitions = s->config.partitions;
  t.replication_factor = static_cast<int16_t>(s->config.replication_factor);
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
  Cluster cluster(ctx, s, fmt::format("writer-{}", id));
  uint64_t seq = 0;
  while (!co_await ensure_topic(ctx, s, &cluster.any())) co_await ctx->clock().sleep_for(200ms);
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
    net::Peer* peer = co_await cluster.leader(partition);
    if (peer == nullptr) {
      cluster.forget();
      continue;
    }
    ++s->produce_requests;
    absl::StatusOr<net::ProduceResponse> resp = co_await peer->call<net::ProduceResponse>(r, 9, kRpcTimeout);
    if (!resp.ok() || resp->responses.size() != 1 || resp->responses[0].partition_responses.size() != 1) {
      ++s->produce_errors;
      cluster.forget();
      continue;
    }
    const auto& pr = resp->responses[0].partition_responses[0];
    if (pr.error_code != 0) {
      ++s->produce_errors;
      cluster.forget();
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

// Reads [from, to) of a partition; offset -> value. Fetches in the
// reader's session with that broker: the first request opens it, later ones
// name only the partition whose offset moved (and forget the one the
// session held before); a broker that lost the session answers
// FETCH_SESSION_ID_NOT_FOUND and the reader opens a new one.
io::Task<absl::StatusOr<std::vector<std::pair<int64_t, std::string>>>> read_range(Shared* s, net::Peer* peer,
                                                                                 SessionState* session,
                                                                                 int32_t partition, int64_t from,
                                                                                 int64_t to) {
  std::vector<std::pair<int64_t, std::string>> out;
  int64_t offset = from;
  int resets = 0;
  while (offset < to) {
    net::FetchRequest r;
    r.max_wait_ms = 50;
    r.min_bytes = 1;
    r.max_bytes = 1 << 20;
    r.session_id = session->id;
    r.session_epoch = session->epoch;
    net::FetchRequest::FetchTopic t;
    t.topic = std::string(kTopic);
    net::FetchRequest::FetchPartition p;
    p.partition = partition;
    p.fetch_offset = offset;
    p.partition_max_bytes = 256 << 10;
    t.partitions.push_back(p);
    r.topics.push_back(std::move(t));
    if (session->epoch > 0 && session->partition >= 0 && session->partition != partition) {
      auto& f = r.forgotten_topics_data.emplace_back();
      f.topic = std::string(kTopic);
      f.partitions.push_back(session->partition);
    }
    ++s->fetches;
    absl::StatusOr<net::FetchResponse> resp = co_await peer->call<net::FetchResponse>(r, 11, kRpcTimeout);
    if (!resp.ok()) {
      *session = SessionState{};
      co_return resp.status();
    }
    if (resp->error_code == net::code(net::Error::kFetchSessionIdNotFound) ||
        resp->error_code == net::code(net::Error::kInvalidFetchSessionEpoch)) {
      *session = SessionState{};
      ++s->fetch_session_resets;
      if (++resets > 3) co_return absl::UnavailableError(std::string(net::error_name(resp->error_code)));
      continue;
    }
    if (resp->error_code != 0) co_return absl::UnavailableError(std::string(net::error_name(resp->error_code)));
    const bool incremental = session->epoch > 0;
    if (incremental) ++s->incremental_fetches;
    if (!incremental && resp->session_id == 0) co_return absl::DataLossError("no session opened");
    if (incremental && resp->session_id != session->id) co_return absl::DataLossError("another session answered");
    session->id = resp->session_id;
    session->epoch = incremental ? session->epoch + 1 : 1;
    session->partition = partition;
    const net::FetchResponse::PartitionData* pd = nullptr;
    for (const auto& topic : resp->responses) {
      for (const auto& x : topic.partitions) {
        if (x.partition_index == partition && pd == nullptr) {
          pd = &x;
        } else {
          co_return absl::DataLossError(fmt::format("fetch answered for partition {} too", x.partition_index));
        }
      }
    }
    if (pd == nullptr) {
      // Left out of an incremental answer: nothing to read at `offset`.
      if (!incremental) co_return absl::DataLossError("malformed fetch answer");
      break;
    }
    if (pd->error_code != 0) co_return absl::UnavailableError(std::string(net::error_name(pd->error_code)));
    std::vector<std::pair<int64_t, std::string>> got;
    if (pd->records.has_value()) {
      absl::Status decoded = decode_fetched(*pd->records, &got);
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
      if (pd->high_watermark <= offset) break;  // nothing more committed
      co_return absl::UnavailableError("no progress");
    }
    offset = next;
  }
  s->fetched_records += out.size();
  co_return out;
}

// Reads back acknowledged records while the workload runs.
io::Task<void> reader(io::Context* ctx, Shared* s) {
  Cluster cluster(ctx, s, "reader");
  while (true) {
    co_await ctx->clock().sleep_for(uniform_duration(ctx->random(), 50ms, 300ms));
    const int32_t partition = static_cast<int32_t>(ctx->random().uniform(static_cast<uint64_t>(s->config.partitions)));
    const std::map<int64_t, std::string>& acked = s->acked[static_cast<size_t>(partition)];
    if (acked.empty()) continue;
    auto it = acked.begin();
    std::advance(it, static_cast<long>(ctx->random().uniform(acked.size())));
    const int64_t from = it->first;
    net::Peer* peer = co_await cluster.leader(partition);
    if (peer == nullptr) {
      cluster.forget();
      continue;
    }
    absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> got =
        co_await read_range(s, peer, &cluster.session(peer), partition, from, from + 20);
    if (!got.ok()) {
      cluster.forget();
      continue;
    }
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
  Cluster cluster(ctx, s, "final-reader");
  for (int32_t p = 0; p < s->config.partitions; ++p) {
    const std::map<int64_t, std::string>& acked = s->acked[static_cast<size_t>(p)];
    const int64_t end = acked.empty() ? 0 : acked.rbegin()->first + 1;
    absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> got;
    for (int attempt = 0; attempt < 300; ++attempt) {
      net::Peer* peer = co_await cluster.leader(p);
      if (peer != nullptr) {
        got = co_await read_range(s, peer, &cluster.session(peer), p, 0, end);
        if (got.ok()) break;
      } else {
        got = absl::UnavailableError("no leader");
      }
      cluster.forget();
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

// Reads a replica's records in [from, to) straight from its log.
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
      // Caught up: every replica back in the ISR (a follower joins only
      // from a fetch whose last epoch matched the leader's log), all at the
      // leader's log end.
      bool caught_up = leader != nullptr && leader->log->high_watermark() == leader->log->log_end_offset() &&
                       leader->isr.size() == leader->replicas.size();
      for (broker::Broker* b : s->running) {
        if (b == nullptr || leader == nullptr) continue;
        auto it = b->partitions().find({std::string(kTopic), p});
        if (it == b->partitions().end()) continue;
        caught_up = caught_up && it->second->log->log_end_offset() == leader->log->log_end_offset();
      }
      if (caught_up) break;
      co_await ctx->clock().sleep_for(100ms);
    }
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

}  // namespace

absl::StatusOr<ScenarioResult> run_broker(const ScenarioOptions& options) {
  BrokerSimConfig config = BrokerSimConfig::draw(options.seed);
  config.ack_before_flush = options.name == "broker-mutant-flush" || options.name == "replication-mutant-flush";
  if (options.name.starts_with("replication")) {
    config.nodes = 3;
    config.replication_factor = 3;
    config.min_insync = 2;
  }
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
  std::vector<Node*> servers;
  for (int i = 0; i < config.nodes; ++i) {
    Node& server = world.add_node(config.faults.node_options(node_random));
    servers.push_back(&server);
    shared.brokers.push_back(server.address(kBrokerPort));
    shared.controllers.push_back(server.address(kControllerPort));
    shared.running.push_back(nullptr);
  }
  Node& client = world.add_node(config.faults.node_options(node_random));
  Shared* s = &shared;
  for (int i = 0; i < config.nodes; ++i) {
    servers[static_cast<size_t>(i)]->start([s, i](io::Context& ctx) { return broker_node_main(&ctx, s, i); });
  }
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
  for (Node* server : servers) server->crash();
  client.crash();
  for (int i = 0; i < config.nodes; ++i) {
    servers[static_cast<size_t>(i)]->start([s, i](io::Context& ctx) { return broker_node_main(&ctx, s, i); });
  }
  client.start([s](io::Context& ctx) { return final_read_main(&ctx, s); });
  world.run_until([&] { return shared.final_read_done; }, 120s);
  if (config.nodes > 1 && shared.final_read_done) {
    client.crash();
    client.start([s](io::Context& ctx) { return replica_check_main(&ctx, s); });
    world.run_until([&] { return shared.replicas_checked; }, 60s);
  }

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
      "broker: produce-requests={} errors={} records-acked={} fetches={} (incremental {}, session resets {}) "
      "records-read={} broker-starts={} leader-lookups={} replica-records-compared={}; "
      "faults: crashes={} partitions={} clogs={} resets={} wall-jumps={} revivals={} buggify-fired={}",
      shared.produce_requests, shared.produce_errors, shared.records_acked, shared.fetches,
      shared.incremental_fetches, shared.fetch_session_resets, shared.fetched_records,
      shared.broker_starts, shared.leader_lookups, shared.replica_records_compared, faults.crashes, faults.partitions, faults.clogs, faults.resets, faults.wall_jumps,
      faults.revivals, world.buggify().fired());
  return result;
}

}  // namespace brook::sim
