// sim/transactions.cc: the "transactions" scenario (see transactions.h).
#include "sim/transactions.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "coordinators/group/group_coordinator.h"
#include "coordinators/txn/transaction_coordinator.h"
#include "net/client/cluster.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/add_offsets_to_txn_request.h"
#include "net/kafka/messages/add_offsets_to_txn_response.h"
#include "net/kafka/messages/add_partitions_to_txn_request.h"
#include "net/kafka/messages/add_partitions_to_txn_response.h"
#include "net/kafka/messages/describe_transactions_request.h"
#include "net/kafka/messages/describe_transactions_response.h"
#include "net/kafka/messages/end_txn_request.h"
#include "net/kafka/messages/end_txn_response.h"
#include "net/kafka/messages/fetch_request.h"
#include "net/kafka/messages/fetch_response.h"
#include "net/kafka/messages/find_coordinator_request.h"
#include "net/kafka/messages/find_coordinator_response.h"
#include "net/kafka/messages/init_producer_id_request.h"
#include "net/kafka/messages/offset_fetch_request.h"
#include "net/kafka/messages/offset_fetch_response.h"
#include "net/kafka/messages/txn_offset_commit_request.h"
#include "net/kafka/messages/txn_offset_commit_response.h"
#include "net/kafka/messages/init_producer_id_response.h"
#include "net/kafka/messages/produce_request.h"
#include "net/kafka/messages/produce_response.h"
#include "net/kafka/record_batch.h"
#include "sim/broker.h"
#include "sim/faults.h"
#include "sim/world.h"

namespace brook::sim {

namespace {

using namespace std::chrono_literals;
using net::Error;

constexpr uint64_t kConfigSalt = 0x7472'616e'7361'0001ULL;  // "transa"
constexpr std::string_view kTopic = "ledger";
constexpr size_t kFailuresMax = 10;
constexpr io::Duration kRpcTimeout = 3s;
// How long a producer retries one step before it starts over with
// InitProducerId.
constexpr io::Duration kStepDeadline = 10s;

struct TxnSimConfig {
  FaultConfig faults;
  int nodes = 3;
  int partitions = 3;
  int producers = 2;
  int txn_partitions = 2;
  int max_records = 3;
  int commit_percent = 70;
  // The chance a transaction is left open past its timeout.
  int hang_percent = 5;
  io::Duration txn_timeout = 5s;
  io::Duration abort_check = 1s;
  io::Duration workload = 30s;
  io::Duration quiet_max = 90s;
  bool mutant_commit_aborts = false;
  // The chance that one of a transaction's Produce or TxnOffsetCommit
  // requests is held up in the network until after the producer gave up
  // and aborted ("late" scenarios; see producer_main).
  int late_percent = 0;
  uint64_t late_seed = 0;
  // The mutant leaves out the leaders' check with the coordinator.
  bool mutant_unverified = false;
  // Half the transactions also commit an offset for the producer's group
  // (AddOffsetsToTxn, TxnOffsetCommit).
  bool offsets = false;

  static TxnSimConfig draw(uint64_t seed) {
    io::Random r(seed ^ kConfigSalt);
    TxnSimConfig c;
    c.faults = FaultConfig::draw(r);
    c.partitions = static_cast<int>(r.uniform_range(1, 4));
    c.producers = static_cast<int>(r.uniform_range(1, 3));
    c.txn_partitions = static_cast<int>(r.uniform_range(1, 3));
    c.max_records = static_cast<int>(r.uniform_range(1, 4));
    c.commit_percent = static_cast<int>(r.uniform_range(40, 90));
    c.txn_timeout = uniform_duration(r, 2s, 8s);
    c.abort_check = uniform_duration(r, 200ms, 2s);
    c.offsets = r.uniform(3) != 0;
    c.late_seed = r.next_u64();
    c.faults.draw_graceful_stops(seed);
    c.faults.draw_full_disks(seed);
    return c;
  }
  std::string describe() const {
    return fmt::format(
        "transactions: nodes={} partitions={} producers={} txn-partitions={} records<={} commit={}% "
        "timeout={} abort-check={} offsets={} late={}%{}\n{}",
        nodes, partitions, producers, txn_partitions, max_records, commit_percent, seconds(txn_timeout),
        seconds(abort_check), offsets ? "on" : "off", late_percent, mutant_unverified ? " (unverified)" : "",
        faults.describe());
  }
};

enum class Outcome : uint8_t { kOpen, kCommitted, kAborted, kUnknown };

struct Txn {
  std::string producer;
  int64_t producer_id = -1;
  int16_t epoch = -1;
  // Record values acknowledged by their partition leader, by partition.
  std::map<int32_t, std::vector<std::string>> acked;
  // Where each partition's leader took the batch: "offset/error/sequence".
  std::map<int32_t, std::string> acked_at;
  // Every value sent for it, acknowledged or not.
  std::set<std::string> sent;
  // The offset it sent for its producer's group (TxnOffsetCommit), and
  // whether that was acknowledged.
  std::optional<int64_t> offset;
  bool offset_acked = false;
  Outcome outcome = Outcome::kOpen;
};

struct Shared {
  explicit Shared(TxnSimConfig c)
      : config(std::move(c)), stops(config.nodes), running(static_cast<size_t>(config.nodes)) {}

  TxnSimConfig config;
  std::vector<io::Address> brokers;
  GracefulStops stops;
  std::vector<io::Address> controllers;
  // The running brokers (null while a node is down), and the run's faults
  // once they exist (the node lost for good in "transactions-loss").
  std::vector<broker::Broker*> running;
  const FaultSchedule* faults = nullptr;
  // The partitions the final check needed and found without a leader for
  // good (their only in-sync replica the lost node), when it was left out.
  std::string offline;
  std::map<std::string, Txn> txns;
  // The transaction each value was sent in.
  std::map<std::string, std::string> txn_of;
  uint64_t next_txn = 0;
  // Offsets the producers commit in their transactions: each a new one.
  int64_t next_offset = 1;
  std::vector<std::string> violations;
  bool topic_ready = false;
  // The workload is over: producers (restarted ones too) stop.
  bool stopped = false;
  bool final_checked = false;
  bool settled = false;
  std::string unsettled = "not checked";
  uint64_t inits = 0;
  uint64_t committed = 0;
  uint64_t aborted = 0;
  uint64_t unknown = 0;
  uint64_t hung = 0;
  uint64_t broker_starts = 0;
  uint64_t producer_starts = 0;
  uint64_t records_checked = 0;
  uint64_t offsets_sent = 0;
  uint64_t groups_checked = 0;
  uint64_t late_sent = 0;
  uint64_t late_refused = 0;

  void violation(std::string what) {
    if (violations.size() < kFailuresMax) violations.push_back(std::move(what));
  }
};

io::Task<void> server_main(io::Context* ctx, Shared* s, int index) {
  ++s->broker_starts;
  ServerNodeOptions o;
  o.index = index;
  o.brokers = s->brokers;
  o.controllers = s->controllers;
  o.partitions = s->config.partitions;
  o.replication_factor = s->config.nodes;
  o.min_insync = std::min(2, s->config.nodes);
  o.offsets_partitions = 1;
  o.offsets_replication_factor = s->config.nodes;
  o.txn_partitions = s->config.txn_partitions;
  o.txn_replication_factor = s->config.nodes;
  o.txn_min_isr = std::min(2, s->config.nodes);
  o.txn_abort_check_interval = s->config.abort_check;
  o.txn_mutant_commit_aborts = s->config.mutant_commit_aborts;
  o.txn_partition_verification = !s->config.mutant_unverified;
  o.on_broker = [s, index](broker::Broker* b) { s->running[static_cast<size_t>(index)] = b; };
  s->stops.wire(s->config.faults, index, o, [s](std::string what) { s->violation(std::move(what)); });
  co_await server_node_main(ctx, std::move(o));
}

// The topics the final check reads, with their partition counts: the
// ledger, the coordinators' state and, when transactions commit offsets,
// the groups' offsets.
std::vector<std::pair<std::string, int>> checked_topics(const TxnSimConfig& c) {
  std::vector<std::pair<std::string, int>> out{{std::string(kTopic), c.partitions},
                                               {std::string(txn::kTransactionStateTopic), c.txn_partitions}};
  if (c.offsets) out.emplace_back(std::string(group::kOffsetsTopic), 1);
  return out;
}

// The checked topics' partitions without a leader for good, as
// "topic-partition" (offline_with_lost_server); none while no node is lost.
std::vector<std::string> offline_partitions(const Shared& s) {
  std::vector<std::string> out;
  const int lost = s.faults == nullptr ? -1 : s.faults->lost_node();
  if (lost < 0) return out;
  for (const auto& [topic, partitions] : checked_topics(s.config)) {
    for (int32_t p = 0; p < partitions; ++p) {
      if (offline_with_lost_server(s.running, lost, topic, p)) out.push_back(fmt::format("{}-{}", topic, p));
    }
  }
  return out;
}

bool retriable(Error e) {
  switch (e) {
    case Error::kConcurrentTransactions:
    case Error::kNotCoordinator:
    case Error::kCoordinatorLoadInProgress:
    case Error::kCoordinatorNotAvailable:
    case Error::kRequestTimedOut:
    case Error::kNotLeaderOrFollower:
    case Error::kUnknownTopicOrPartition:
    case Error::kNotEnoughReplicas:
    case Error::kNotEnoughReplicasAfterAppend:
    case Error::kKafkaStorageError:
    case Error::kLeaderNotAvailable:
      return true;
    default:
      return false;
  }
}

// A producer's session with its transaction coordinator and the leaders.
struct Producer {
  io::Context* ctx;
  Shared* s;
  client::Cluster* cluster;
  std::string tid;
  int64_t producer_id = -1;
  int16_t epoch = -1;
  std::map<int32_t, int32_t> sequences;
  // The last acknowledged produce: its base offset and error code.
  int64_t acked_offset = -1;
  int16_t acked_error = 0;

  // Sends `request` to the transactional id's coordinator.
  template <typename Resp, typename Req>
  io::Task<absl::StatusOr<Resp>> to_coordinator(const Req& request, int16_t version) {
    co_return co_await to_coordinator_of<Resp>(tid, 1, request, version);
  }
  // Sends `request` to the coordinator of `key` (key type 0: a group, 1: a
  // transactional id).
  template <typename Resp, typename Req>
  io::Task<absl::StatusOr<Resp>> to_coordinator_of(std::string key, int8_t key_type, const Req& request,
                                                   int16_t version) {
    net::FindCoordinatorRequest find;
    find.key = std::move(key);
    find.key_type = key_type;
    absl::StatusOr<net::FindCoordinatorResponse> found =
        co_await cluster->any().call<net::FindCoordinatorResponse>(find, 1, kRpcTimeout);
    if (!found.ok()) co_return found.status();
    if (found->error_code != 0) co_return absl::UnavailableError(std::string(net::error_name(found->error_code)));
    net::Peer* peer = cluster->broker(found->node_id);
    if (peer == nullptr) {
      std::vector<std::string> topics{std::string(kTopic)};
      (void)co_await cluster->refresh(std::move(topics));
      peer = cluster->broker(found->node_id);
    }
    if (peer == nullptr) co_return absl::UnavailableError("the coordinator is not known");
    co_return co_await peer->call<Resp>(request, version, kRpcTimeout);
  }

  // Retries a coordinator request until it answers something other than a
  // retriable error, or until the deadline (then nullopt).
  template <typename Resp, typename Req>
  io::Task<std::optional<Resp>> retry_coordinator(const Req& request, int16_t version) {
    const io::Instant deadline = ctx->clock().now() + kStepDeadline;
    while (ctx->clock().now() < deadline) {
      absl::StatusOr<Resp> r = co_await to_coordinator<Resp>(request, version);
      if (r.ok() && !retriable(static_cast<Error>(r->error_code))) co_return *std::move(r);
      co_await ctx->clock().sleep_for(100ms);
    }
    co_return std::nullopt;
  }

  io::Task<bool> init() {
    net::InitProducerIdRequest r;
    r.transactional_id = tid;
    r.transaction_timeout_ms =
        static_cast<int32_t>(std::chrono::duration_cast<std::chrono::milliseconds>(s->config.txn_timeout).count());
    std::optional<net::InitProducerIdResponse> answer = co_await retry_coordinator<net::InitProducerIdResponse>(r, 3);
    if (!answer.has_value() || answer->error_code != 0) co_return false;
    producer_id = answer->producer_id;
    epoch = answer->producer_epoch;
    sequences.clear();
    ++s->inits;
    co_return true;
  }

  io::Task<bool> add_partitions(const std::vector<int32_t>& partitions) {
    net::AddPartitionsToTxnRequest r;
    r.v3_and_below_transactional_id = tid;
    r.v3_and_below_producer_id = producer_id;
    r.v3_and_below_producer_epoch = epoch;
    auto& t = r.v3_and_below_topics.emplace_back();
    t.name = std::string(kTopic);
    t.partitions = partitions;
    const io::Instant deadline = ctx->clock().now() + kStepDeadline;
    while (ctx->clock().now() < deadline) {
      absl::StatusOr<net::AddPartitionsToTxnResponse> answer =
          co_await to_coordinator<net::AddPartitionsToTxnResponse>(r, 1);
      if (answer.ok()) {
        bool all = true;
        bool again = false;
        for (const auto& tr : answer->results_by_topic_v3_and_below) {
          for (const auto& pr : tr.results_by_partition) {
            if (pr.partition_error_code == 0) continue;
            all = false;
            if (retriable(static_cast<Error>(pr.partition_error_code))) again = true;
          }
        }
        if (all) co_return true;
        if (!again) co_return false;
      }
      co_await ctx->clock().sleep_for(100ms);
    }
    co_return false;
  }

  // A transactional Produce of `values` to the partition at the next
  // sequence; nullopt if the batch cannot be built.
  std::optional<net::ProduceRequest> produce_request(int32_t partition, const std::vector<std::string>& values) {
    net::RecordBatchOptions options;
    options.producer_id = producer_id;
    options.producer_epoch = epoch;
    options.base_sequence = sequences[partition];
    options.transactional = true;
    net::RecordBatchBuilder builder(options);
    for (const std::string& v : values) {
      net::NewRecord record;
      record.timestamp_ms = io::to_ms(ctx->clock().wall_now());
      record.value = io::Buffer::copy_of(v);
      builder.append(std::move(record));
    }
    absl::StatusOr<io::Buffer> batch = builder.build();
    if (!batch.ok()) return std::nullopt;
    return one_batch_produce(tid, std::string(kTopic), partition, *std::move(batch), 3000);
  }

  // Sends `request` once to its partition's leader, as a Produce held up in
  // the network arrives in the end: true if the leader took it.
  io::Task<bool> produce_late(int32_t partition, const net::ProduceRequest& request) {
    const int32_t leader = cluster->leader(client::TopicPartition(std::string(kTopic), partition));
    net::Peer* peer = leader < 0 ? nullptr : cluster->broker(leader);
    if (peer == nullptr) co_return false;
    absl::StatusOr<net::ProduceResponse> answer = co_await peer->call<net::ProduceResponse>(request, 7, kRpcTimeout);
    if (!answer.ok() || answer->responses.empty() || answer->responses[0].partition_responses.empty()) {
      co_return false;
    }
    const auto& pr = answer->responses[0].partition_responses[0];
    ctx->log().debug("txn-sim: {} epoch {} late batch for {}-{}: {} at {}", tid, epoch, kTopic, partition,
                     net::error_name(pr.error_code), pr.base_offset);
    co_return pr.error_code == 0;
  }

  // Produces `values` to the partition in the current transaction, retrying
  // until acknowledged (true) or the step's deadline passes.
  io::Task<bool> produce(int32_t partition, const std::vector<std::string>& values) {
    std::optional<net::ProduceRequest> built = produce_request(partition, values);
    if (!built.has_value()) co_return false;
    net::ProduceRequest r = *std::move(built);
    const client::TopicPartition tp(std::string(kTopic), partition);
    const io::Instant deadline = ctx->clock().now() + kStepDeadline;
    while (ctx->clock().now() < deadline) {
      int32_t leader = cluster->leader(tp);
      if (leader < 0 || cluster->broker(leader) == nullptr) {
        std::vector<std::string> topics{std::string(kTopic)};
        (void)co_await cluster->refresh(std::move(topics));
        leader = cluster->leader(tp);
      }
      net::Peer* peer = leader < 0 ? nullptr : cluster->broker(leader);
      if (peer != nullptr) {
        absl::StatusOr<net::ProduceResponse> answer = co_await peer->call<net::ProduceResponse>(r, 7, kRpcTimeout);
        if (answer.ok() && !answer->responses.empty() && !answer->responses[0].partition_responses.empty()) {
          const Error e = static_cast<Error>(answer->responses[0].partition_responses[0].error_code);
          if (e == Error::kNone || e == Error::kDuplicateSequenceNumber) {
            acked_offset = answer->responses[0].partition_responses[0].base_offset;
            acked_error = static_cast<int16_t>(e);
            ctx->log().debug("txn-sim: {} epoch {} {}-{} acked at {} by broker {}", tid, epoch, kTopic, partition,
                             acked_offset, leader);
            sequences[partition] += static_cast<int32_t>(values.size());
            co_return true;
          }
          if (!retriable(e)) co_return false;
          if (e == Error::kNotLeaderOrFollower || e == Error::kUnknownTopicOrPartition) {
            std::vector<std::string> topics{std::string(kTopic)};
            (void)co_await cluster->refresh(std::move(topics));
          }
        } else if (!answer.ok()) {
          std::vector<std::string> topics{std::string(kTopic)};
          (void)co_await cluster->refresh(std::move(topics));
        }
      }
      co_await ctx->clock().sleep_for(100ms);
    }
    co_return false;
  }

  std::string group() const { return "group-" + tid; }

  // AddOffsetsToTxn of the producer's group: true once acknowledged.
  io::Task<bool> add_offsets() {
    net::AddOffsetsToTxnRequest add;
    add.transactional_id = tid;
    add.producer_id = producer_id;
    add.producer_epoch = epoch;
    add.group_id = group();
    std::optional<net::AddOffsetsToTxnResponse> added = co_await retry_coordinator<net::AddOffsetsToTxnResponse>(add, 1);
    co_return added.has_value() && added->error_code == 0;
  }

  // TxnOffsetCommit of `offset` for partition 0 of the topic in the
  // producer's group.
  net::TxnOffsetCommitRequest offset_request(int64_t offset) const {
    net::TxnOffsetCommitRequest r;
    r.transactional_id = tid;
    r.group_id = group();
    r.producer_id = producer_id;
    r.producer_epoch = epoch;
    auto& t = r.topics.emplace_back();
    t.name = std::string(kTopic);
    auto& p = t.partitions.emplace_back();
    p.partition_index = 0;
    p.committed_offset = offset;
    return r;
  }

  // AddOffsetsToTxn and TxnOffsetCommit of `offset`; true once both are
  // acknowledged.
  io::Task<bool> commit_offset(int64_t offset) {
    if (!co_await add_offsets()) co_return false;
    const net::TxnOffsetCommitRequest r = offset_request(offset);
    const io::Instant deadline = ctx->clock().now() + kStepDeadline;
    while (ctx->clock().now() < deadline) {
      absl::StatusOr<net::TxnOffsetCommitResponse> answer =
          co_await to_coordinator_of<net::TxnOffsetCommitResponse>(group(), 0, r, 3);
      if (answer.ok() && !answer->topics.empty() && !answer->topics[0].partitions.empty()) {
        const Error e = static_cast<Error>(answer->topics[0].partitions[0].error_code);
        if (e == Error::kNone) co_return true;
        if (!retriable(e)) co_return false;
      }
      co_await ctx->clock().sleep_for(100ms);
    }
    co_return false;
  }

  // Sends a held TxnOffsetCommit once: true if the group coordinator took it.
  io::Task<bool> commit_offset_late(const net::TxnOffsetCommitRequest& r) {
    absl::StatusOr<net::TxnOffsetCommitResponse> answer =
        co_await to_coordinator_of<net::TxnOffsetCommitResponse>(group(), 0, r, 3);
    co_return answer.ok() && !answer->topics.empty() && !answer->topics[0].partitions.empty() &&
        answer->topics[0].partitions[0].error_code == 0;
  }

  // EndTxn: the outcome when the coordinator answered it.
  io::Task<Outcome> end(bool commit) {
    net::EndTxnRequest r;
    r.transactional_id = tid;
    r.producer_id = producer_id;
    r.producer_epoch = epoch;
    r.committed = commit;
    std::optional<net::EndTxnResponse> answer = co_await retry_coordinator<net::EndTxnResponse>(r, 1);
    if (!answer.has_value() || answer->error_code != 0) co_return Outcome::kUnknown;
    co_return commit ? Outcome::kCommitted : Outcome::kAborted;
  }
};

io::Task<void> ensure_topic(io::Context* ctx, Shared* s, client::Cluster* cluster) {
  if (s->topic_ready) co_return;
  co_await create_topic_until_done(ctx, cluster, std::string(kTopic), s->config.partitions, s->config.nodes);
  s->topic_ready = true;
}

io::Task<void> producer_main(io::Context* ctx, Shared* s, int index) {
  if (s->stopped) co_return;
  ++s->producer_starts;
  client::Cluster cluster(*ctx, sim_client_options(s->brokers, fmt::format("txn-producer-{}", index)));
  co_await ensure_topic(ctx, s, &cluster);
  Producer p{ctx, s, &cluster, fmt::format("producer-{}", index), -1, -1, {}};
  io::Random& r = ctx->random();
  // Late batches draw from their own stream, so that scenarios without them
  // run as before.
  io::Random late_random(s->config.late_seed + static_cast<uint64_t>(index) * 7919 + s->producer_starts);
  while (!s->stopped) {
    if (!co_await p.init()) {
      co_await ctx->clock().sleep_for(200ms);
      continue;
    }
    while (!s->stopped) {
      const std::string name = fmt::format("t{}", s->next_txn++);
      std::vector<int32_t> all;
      for (int32_t i = 0; i < s->config.partitions; ++i) all.push_back(i);
      std::vector<int32_t> chosen;
      const size_t count = static_cast<size_t>(r.uniform_range(1, s->config.partitions));
      while (chosen.size() < count) {
        const size_t at = static_cast<size_t>(r.uniform(all.size()));
        chosen.push_back(all[at]);
        all.erase(all.begin() + static_cast<std::ptrdiff_t>(at));
      }
      std::sort(chosen.begin(), chosen.end());
      // "late" scenarios: one partition's Produce is held up in the network
      // (the producer times out, and aborts) and arrives after the abort.
      // Or it is the TxnOffsetCommit that is held.
      std::optional<int32_t> held_partition;
      std::optional<net::ProduceRequest> held;
      bool hold_offsets = false;
      std::optional<net::TxnOffsetCommitRequest> held_offsets;
      if (static_cast<int>(late_random.uniform(100)) < s->config.late_percent) {
        if (s->config.offsets && late_random.uniform(3) == 0) {
          hold_offsets = true;
        } else {
          held_partition = chosen[static_cast<size_t>(late_random.uniform(chosen.size()))];
        }
      }
      Txn& started = s->txns[name];
      started.producer = p.tid;
      started.producer_id = p.producer_id;
      started.epoch = p.epoch;
      if (!co_await p.add_partitions(chosen)) {
        s->txns[name].outcome = Outcome::kUnknown;
        ++s->unknown;
        break;  // start over: a new epoch aborts whatever is open
      }
      bool sent_all = true;
      for (int32_t partition : chosen) {
        std::vector<std::string> values;
        const int n = static_cast<int>(r.uniform_range(1, s->config.max_records));
        for (int k = 0; k < n; ++k) {
          values.push_back(fmt::format("{}-{}-p{}-{}", name, p.tid, partition, k));
          s->txns[name].sent.insert(values.back());
          s->txn_of[values.back()] = name;
        }
        if (partition == held_partition) {
          held = p.produce_request(partition, values);
          sent_all = false;
          break;
        }
        if (!co_await p.produce(partition, values)) {
          sent_all = false;
          break;
        }
        s->txns[name].acked_at[partition] = fmt::format("{}/{}/seq{}", p.acked_offset, p.acked_error,
                                                        p.sequences[partition] - static_cast<int32_t>(values.size()));
        std::vector<std::string>& acked = s->txns[name].acked[partition];
        acked.insert(acked.end(), values.begin(), values.end());
      }
      if (sent_all && s->config.offsets && r.uniform(2) == 0) {
        const int64_t offset = s->next_offset++;
        ++s->offsets_sent;
        s->txns[name].offset = offset;
        if (hold_offsets) {
          if (co_await p.add_offsets()) held_offsets = p.offset_request(offset);
          sent_all = false;
        } else if (co_await p.commit_offset(offset)) {
          s->txns[name].offset_acked = true;
        } else {
          sent_all = false;
        }
      }
      if (sent_all && static_cast<int>(r.uniform(100)) < s->config.hang_percent) {
        // Left open: the coordinator must abort it once it times out, and
        // fence this producer.
        ++s->hung;
        co_await ctx->clock().sleep_for(s->config.txn_timeout + s->config.abort_check + 1s);
      }
      const bool commit = sent_all && static_cast<int>(r.uniform(100)) < s->config.commit_percent;
      const Outcome outcome = co_await p.end(commit);
      s->txns[name].outcome = outcome;
      if (outcome == Outcome::kCommitted) ++s->committed;
      if (outcome == Outcome::kAborted) ++s->aborted;
      if (held.has_value()) {
        // The held Produce arrives. Before the partition's abort marker it
        // joins the aborted transaction; after it, no leader may take it
        // (KIP-890): it would open a transaction nothing ever ends, and
        // the partition's last stable offset would wait for it for good.
        co_await ctx->clock().sleep_for(std::chrono::milliseconds(late_random.uniform(500)));
        ++s->late_sent;
        if (!co_await p.produce_late(*held_partition, *held)) ++s->late_refused;
      }
      if (held_offsets.has_value()) {
        // Likewise the held TxnOffsetCommit: after the group's abort marker
        // it would leave an offset pending that nothing ever ends, and the
        // group's stable offset reads would fail for good.
        co_await ctx->clock().sleep_for(std::chrono::milliseconds(late_random.uniform(500)));
        ++s->late_sent;
        if (!co_await p.commit_offset_late(*held_offsets)) ++s->late_refused;
      }
      if (outcome == Outcome::kUnknown) {
        ++s->unknown;
        break;
      }
      if (!sent_all) break;
      co_await ctx->clock().sleep_for(std::chrono::milliseconds(r.uniform(50)));
    }
  }
}

// What a read_committed consumer sees of one partition: its values in
// order, or nullopt when the partition cannot be read (yet); `settled` is
// whether its last stable offset reached its high watermark.
struct Visible {
  std::vector<std::string> values;
  // Every transactional batch read, by producer id, for failure reports.
  std::map<int64_t, std::vector<std::string>> batches;
  bool settled = false;
  int64_t high_watermark = -1;
  int64_t last_stable = -1;
  // When not settled: the open transaction's first batch.
  std::string holding;
};

io::Task<absl::StatusOr<Visible>> read_committed(client::Cluster* cluster, int32_t partition) {
  const client::TopicPartition tp(std::string(kTopic), partition);
  std::vector<std::string> topics{std::string(kTopic)};
  (void)co_await cluster->refresh(std::move(topics));
  const int32_t leader = cluster->leader(tp);
  net::Peer* peer = leader < 0 ? nullptr : cluster->broker(leader);
  if (peer == nullptr) co_return absl::UnavailableError(fmt::format("no leader known (leader {})", leader));
  Visible out;
  int64_t offset = 0;
  // Kafka's consumer: a producer's batches count as aborted from the first
  // offset the fetch's aborted-transaction list names until its abort marker.
  std::set<int64_t> aborting;
  while (true) {
    net::FetchRequest r = one_partition_fetch(std::string(kTopic), partition, offset, 1 << 20, 1);
    // (An idle connection the broker closed is found closed once.)
    absl::StatusOr<net::FetchResponse> answer = absl::UnavailableError("not sent");
    for (int attempt = 0; attempt < 3 && !answer.ok(); ++attempt) {
      answer = co_await peer->call<net::FetchResponse>(r, 11, kRpcTimeout);
    }
    if (!answer.ok()) co_return answer.status();
    if (answer->responses.empty() || answer->responses[0].partitions.empty()) {
      co_return absl::DataLossError(fmt::format("broker {}: an empty fetch answer", leader));
    }
    const net::FetchResponse::PartitionData& pd = answer->responses[0].partitions[0];
    if (pd.error_code != 0) {
      co_return absl::UnavailableError(fmt::format("broker {}: {}", leader, net::error_name(pd.error_code)));
    }
    out.high_watermark = pd.high_watermark;
    out.last_stable = pd.last_stable_offset;
    std::deque<net::FetchResponse::AbortedTransaction> aborted;
    if (pd.aborted_transactions.has_value()) {
      aborted.assign(pd.aborted_transactions->begin(), pd.aborted_transactions->end());
      std::sort(aborted.begin(), aborted.end(),
                [](const auto& a, const auto& b) { return a.first_offset < b.first_offset; });
    }
    if (!pd.records.has_value() || pd.records->empty()) break;
    net::BatchIterator it(*pd.records);
    const int64_t before = offset;
    while (true) {
      absl::StatusOr<std::optional<net::BatchView>> next = it.next();
      if (!next.ok()) co_return next.status();
      if (!next->has_value()) break;
      const net::RecordBatchHeader& h = (*next)->header;
      if (h.last_offset() < offset) continue;
      offset = h.last_offset() + 1;
      while (!aborted.empty() && aborted.front().first_offset <= h.last_offset()) {
        aborting.insert(aborted.front().producer_id);
        aborted.pop_front();
      }
      absl::StatusOr<std::vector<net::Record>> records = net::decode_records((*next)->bytes, 64 << 20);
      if (!records.ok()) co_return records.status();
      if (h.is_control()) {
        for (const net::Record& rec : *records) {
          if (!rec.key.has_value()) continue;
          absl::StatusOr<net::ControlRecordKey> key = net::decode_control_record_key(rec.key->span());
          if (!key.ok()) continue;
          if (key->type == net::ControlRecordType::kAbort) aborting.erase(h.producer_id);
          out.batches[h.producer_id].push_back(
              fmt::format("{}:{}@{}", h.base_offset, key->type == net::ControlRecordType::kAbort ? "ABORT" : "COMMIT",
                          h.producer_epoch));
        }
        continue;
      }
      if (h.is_transactional()) {
        out.batches[h.producer_id].push_back(fmt::format("{}-{}:data@{}{}", h.base_offset, h.last_offset(),
                                                         h.producer_epoch,
                                                         aborting.contains(h.producer_id) ? "(aborted)" : ""));
      }
      if (h.is_transactional() && aborting.contains(h.producer_id)) continue;
      for (const net::Record& rec : *records) {
        if (net::record_offset(h, rec) < before) continue;
        out.values.emplace_back(rec.value.has_value() ? std::string(rec.value->view()) : std::string());
      }
    }
    if (offset == before) break;
  }
  out.settled = out.last_stable == out.high_watermark;
  if (!out.settled) {
    // For the report: the batch that holds the last stable offset back.
    net::FetchRequest r = one_partition_fetch(std::string(kTopic), partition, out.last_stable, 1 << 16, 0);
    absl::StatusOr<net::FetchResponse> answer = co_await peer->call<net::FetchResponse>(r, 11, kRpcTimeout);
    if (answer.ok() && !answer->responses.empty() && !answer->responses[0].partitions.empty() &&
        answer->responses[0].partitions[0].records.has_value()) {
      net::BatchIterator it(*answer->responses[0].partitions[0].records);
      absl::StatusOr<std::optional<net::BatchView>> next = it.next();
      if (next.ok() && next->has_value()) {
        const net::RecordBatchHeader& h = (*next)->header;
        out.holding = fmt::format("batch {}-{} of producer {} epoch {} sequence {}", h.base_offset, h.last_offset(),
                                  h.producer_id, h.producer_epoch, h.base_sequence);
      }
    }
  }
  co_return out;
}

// After the heal: waits until every partition's transactions are decided,
// then checks what a read_committed consumer sees.
io::Task<void> final_check_main(io::Context* ctx, Shared* s) {
  client::Cluster cluster(*ctx, sim_client_options(s->brokers, "txn-checker"));
  // Settled: every partition's last stable offset at its high watermark,
  // and the same in two reads a few seconds apart (a request sent before
  // the producers stopped may still land).
  std::map<int32_t, Visible> seen;
  std::map<int32_t, std::pair<int64_t, int64_t>> previous;
  while (true) {
    // A partition with no leader for good (transactions-loss) is never read
    // again, and a coordinator partition so leaves its transactions open
    // for good, as in Kafka with unclean election off: the check is left
    // out.
    if (const std::vector<std::string> offline = offline_partitions(*s); !offline.empty()) {
      s->offline = fmt::format("{}", fmt::join(offline, ","));
      s->settled = true;
      s->final_checked = true;
      co_return;
    }
    seen.clear();
    bool settled = true;
    for (int32_t p = 0; p < s->config.partitions; ++p) {
      absl::StatusOr<Visible> v = co_await read_committed(&cluster, p);
      if (!v.ok()) {
        settled = false;
        s->unsettled = fmt::format("partition {} could not be read: {}", p, v.status().ToString());
        break;
      }
      if (!v->settled) {
        settled = false;
        s->unsettled = fmt::format("partition {}: last stable offset {} below the high watermark {} ({})", p,
                                   v->last_stable, v->high_watermark, v->holding);
        break;
      }
      seen[p] = *std::move(v);
    }
    if (!settled) {
      // For the report: what the coordinators say of each producer.
      for (int i = 0; i < s->config.producers; ++i) {
        Producer asker{ctx, s, &cluster, fmt::format("producer-{}", i), -1, -1, {}};
        net::DescribeTransactionsRequest d;
        d.transactional_ids = {asker.tid};
        absl::StatusOr<net::DescribeTransactionsResponse> described =
            co_await asker.to_coordinator<net::DescribeTransactionsResponse>(d, 0);
        if (!described.ok() || described->transaction_states.empty()) continue;
        const auto& st = described->transaction_states[0];
        s->unsettled += fmt::format("; {}: {} producer {} epoch {} error {} partitions", asker.tid, st.transaction_state,
                                    st.producer_id, st.producer_epoch, st.error_code);
        for (const auto& topic : st.topics) s->unsettled += fmt::format(" {}", fmt::join(topic.partitions, ","));
      }
    }
    std::map<int32_t, std::pair<int64_t, int64_t>> now;
    for (const auto& [p, v] : seen) now[p] = {v.high_watermark, v.last_stable};
    if (settled && now == previous) break;
    previous = std::move(now);
    co_await ctx->clock().sleep_for(settled ? 3s : 1s);
  }
  s->settled = true;
  // Which values of which transaction are visible, by partition.
  std::map<std::string, std::map<int32_t, std::vector<std::string>>> visible;
  for (const auto& [p, v] : seen) {
    std::set<std::string> once;
    for (const std::string& value : v.values) {
      ++s->records_checked;
      if (!once.insert(value).second) s->violation(fmt::format("partition {}: {} is visible twice", p, value));
      auto it = s->txn_of.find(value);
      if (it == s->txn_of.end()) {
        s->violation(fmt::format("partition {}: {} was never sent", p, value));
        continue;
      }
      visible[it->second][p].push_back(value);
    }
  }
  for (const auto& entry : s->txns) {
    const std::string& name = entry.first;
    const auto& t = entry.second;  // not a structured binding: captured below
    auto v = visible.find(name);
    const bool any = v != visible.end();
    auto here = [&](int32_t p) {
      std::set<std::string> out;
      if (any && v->second.contains(p)) out.insert(v->second.at(p).begin(), v->second.at(p).end());
      return out;
    };
    bool whole = true;
    for (const auto& [p, acked] : t.acked) {
      const std::set<std::string> shown = here(p);
      for (const std::string& value : acked) {
        if (!shown.contains(value)) whole = false;
      }
    }
    // For a report: per partition, what was acknowledged where, what is
    // visible, and the producer's batches and markers there.
    auto detail = [&] {
      std::string out = fmt::format("{} producer {} epoch {}:", t.producer, t.producer_id, t.epoch);
      for (const auto& [p, acked] : t.acked) {
        out += fmt::format(" partition {}: {} acknowledged at {}, {} visible", p, acked.size(),
                           t.acked_at.contains(p) ? t.acked_at.at(p) : "?", here(p).size());
        auto read = seen.find(p);
        if (read != seen.end() && read->second.batches.contains(t.producer_id)) {
          out += fmt::format(" [{}]", fmt::join(read->second.batches.at(t.producer_id), " "));
        }
        out += ";";
      }
      return out;
    };
    switch (t.outcome) {
      case Outcome::kCommitted:
        if (!whole) s->violation(fmt::format("committed transaction {} is not visible whole ({})", name, detail()));
        break;
      case Outcome::kAborted:
        if (any) s->violation(fmt::format("aborted transaction {} is visible ({})", name, detail()));
        break;
      case Outcome::kOpen:
      case Outcome::kUnknown:
        if (any && !whole) {
          s->violation(fmt::format("transaction {} (outcome unknown) is visible in part ({})", name, detail()));
        }
        break;
    }
  }
  // Each producer's group: the offset committed last is that of its last
  // transaction known to have committed one, or of a later one whose
  // outcome its producer never learnt; never an aborted transaction's.
  for (int i = 0; i < s->config.producers; ++i) {
    const std::string tid = fmt::format("producer-{}", i);
    int64_t known = -1;
    std::set<int64_t> allowed;
    for (const auto& [name, t] : s->txns) {
      if (t.producer != tid || !t.offset.has_value()) continue;
      if (t.outcome == Outcome::kCommitted && t.offset_acked) known = std::max(known, *t.offset);
    }
    allowed.insert(known);
    for (const auto& [name, t] : s->txns) {
      if (t.producer != tid || !t.offset.has_value() || *t.offset <= known) continue;
      if (t.outcome == Outcome::kOpen || t.outcome == Outcome::kUnknown) allowed.insert(*t.offset);
    }
    Producer asker{ctx, s, &cluster, tid, -1, -1, {}};
    net::OffsetFetchRequest r;
    r.group_id = asker.group();
    auto& t = r.topics->emplace_back();
    t.name = std::string(kTopic);
    t.partition_indexes = {0};
    r.require_stable = true;
    std::optional<int64_t> committed;
    // Every distinct answer short of an offset, in the order first seen.
    std::vector<std::string> why;
    auto note = [&why](std::string reason) {
      if (std::find(why.begin(), why.end(), reason) == why.end()) why.push_back(std::move(reason));
    };
    for (int attempt = 0; attempt < 60 && !committed.has_value(); ++attempt) {
      absl::StatusOr<net::OffsetFetchResponse> answer =
          co_await asker.to_coordinator_of<net::OffsetFetchResponse>(asker.group(), 0, r, 7);
      if (!answer.ok()) {
        note(answer.status().ToString());
      } else if (answer->error_code != 0) {
        note(std::string(net::error_name(answer->error_code)));
      } else if (answer->topics.empty() || answer->topics[0].partitions.empty()) {
        committed = -1;
      } else if (answer->topics[0].partitions[0].error_code != 0) {
        note(std::string(net::error_name(answer->topics[0].partitions[0].error_code)));
      } else {
        committed = answer->topics[0].partitions[0].committed_offset;
      }
      if (!committed.has_value()) co_await ctx->clock().sleep_for(1s);
    }
    if (!committed.has_value()) {
      s->violation(fmt::format("liveness: {}'s committed offset cannot be read in 60 tries: {}", asker.group(),
                               fmt::join(why, "; ")));
      continue;
    }
    ++s->groups_checked;
    if (!allowed.contains(*committed)) {
      s->violation(fmt::format("{} committed offset {}; expected {} (the last known committed {})", asker.group(),
                               *committed, fmt::join(allowed, " or "), known));
    }
  }
  s->final_checked = true;
}

}  // namespace

absl::StatusOr<ScenarioResult> run_transactions(const ScenarioOptions& options) {
  TxnSimConfig config = TxnSimConfig::draw(options.seed);
  config.mutant_commit_aborts = options.name.ends_with("-mutant-markers");
  if (options.name.starts_with("transactions-late")) config.late_percent = 30;
  if (options.name == "transactions-loss") config.faults.draw_node_loss(options.seed);
  config.mutant_unverified = options.name.ends_with("-mutant-unverified");
  const WorldOptions world_options = scenario_world_options(options, config.faults.network);
  Shared shared(config);  // before the World: dying tasks touch it
  World world(options.seed, world_options);
  print_run_start(options, world, config.describe());
  io::Random node_random(options.seed ^ (kConfigSalt << 1));
  const std::vector<Node*> servers =
      add_server_nodes(world, config.faults, node_random, config.nodes, &shared.brokers, &shared.controllers);
  std::vector<Node*> producers;
  for (int i = 0; i < config.producers; ++i) {
    producers.push_back(&world.add_node(config.faults.node_options(node_random)));
  }
  Node& checker = world.add_node(config.faults.node_options(node_random));
  Shared* s = &shared;
  for (int i = 0; i < config.nodes; ++i) {
    servers[static_cast<size_t>(i)]->start([s, i](io::Context& ctx) { return server_main(&ctx, s, i); });
  }
  for (int i = 0; i < config.producers; ++i) {
    producers[static_cast<size_t>(i)]->start([s, i](io::Context& ctx) { return producer_main(&ctx, s, i); });
  }
  // The checker's node idles until the end (the fault schedule restarts
  // every node it finds down).
  checker.start([](io::Context& ctx) -> io::Task<void> {
    while (true) co_await ctx.clock().sleep_for(1h);
  });
  FaultSchedule faults(world, config.faults);
  shared.faults = &faults;
  shared.stops.attach(faults);
  if (config.faults.node_loss_after.count() > 0) {
    // A server whose loss every topic the final check reads can take.
    faults.pick_lost = [&] { return spare_server(world, shared.running, 2, checked_topics(config)); };
  }
  faults.start();
  world.run_for(config.workload);
  faults.stop();
  // The producers stop where they are (a restart the fault schedule still
  // has pending finds them stopped): what they left open is the
  // coordinators' to abort.
  shared.stopped = true;
  for (Node* p : producers) p->crash();
  checker.crash();
  checker.start([s](io::Context& ctx) { return final_check_main(&ctx, s); });
  world.run_until([&] { return shared.final_checked; }, config.quiet_max);
  faults.finish();

  ScenarioResult result;
  result.failures = shared.violations;
  if (!shared.settled && result.failures.size() < kFailuresMax) {
    result.failures.push_back(fmt::format("liveness: transactions still undecided {} after the heal: {}",
                                          seconds(config.quiet_max), shared.unsettled));
  } else if (!shared.final_checked && result.failures.size() < kFailuresMax) {
    result.failures.push_back("the final check did not finish");
  }
  result.passed = result.failures.empty();
  result.trace_hash = world.trace_hash();
  result.events = world.events_run();
  result.simulated = world.elapsed();
  result.replay_command = world.replay_command();
  result.summary = fmt::format(
      "{}: transactions committed={} aborted={} unknown={} hung={} inits={} records-checked={} offsets-sent={} "
      "groups-checked={} late-sent={} late-refused={} "
      "producer-starts={} broker-starts={}{}; faults: {} buggify-fired={}",
      options.name, shared.committed, shared.aborted, shared.unknown, shared.hung, shared.inits,
      shared.records_checked, shared.offsets_sent, shared.groups_checked, shared.late_sent, shared.late_refused,
      shared.producer_starts, shared.broker_starts,
      shared.offline.empty() ? ""
                             : fmt::format("; final check left out: offline with the lost node=[{}]", shared.offline),
      faults.counters(), world.buggify().fired());
  return result;
}

}  // namespace brook::sim
