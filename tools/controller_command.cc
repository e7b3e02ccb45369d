// tools/controller_command.cc
//
// `brook controller`: one KRaft controller (raft/raft_node.h and the
// QuorumController of core/controller) on real I/O, serving the Raft RPCs,
// DescribeQuorum and the controller APIs (broker registration and
// heartbeats, CreateTopics, DeleteTopics, CreatePartitions, AlterPartition,
// AllocateProducerIds, IncrementalAlterConfigs, AlterConfigs, CreateAcls,
// DeleteAcls, AlterClientQuotas, UpdateFeatures, Envelope, ApiVersions) on
// its listener.
//
//   brook controller --node-id N --controller-quorum-voters 1@host:port,2@host:port,...
//                    --data-dir DIR [--listen host:port] [--cluster-id ID]
//   brook controller --node-id N --data-dir DIR --listen host:port
//                    (--standalone | --controller-quorum-bootstrap-servers host:port,...)
//                    [--cluster-id ID]
//                    [--backend auto|uring|epoll] [--election-timeout-ms MS]
//                    [--log-level info|debug]
//                    [--bench-batches B --bench-records R --bench-inflight K]
//
// The listener defaults to the node's own entry in the voter list; a node
// not in the list is an observer.
//
// Without --controller-quorum-voters the quorum is dynamic (KIP-853,
// kraft.version 1). --standalone formats the first controller of a new
// quorum: on first start it writes the bootstrap checkpoint naming itself
// the only voter (as `kafka-storage format --standalone` does). Other
// controllers start with --controller-quorum-bootstrap-servers, follow the
// log as observers, and become voters once added with `brook
// metadata-quorum add-controller`. SIGTERM or SIGINT shut it down gracefully
// (a leader resigns first, so a successor takes over at once).
//
// Before the Raft log opens, the data directory's meta.properties is checked
// (core/meta_properties.h): its node id must be --node-id and its cluster id
// --cluster-id when given; a mismatch prints the error and exits 1. An
// unformatted directory is formatted on first start. Without --cluster-id
// the stored id is used; when there is none, a quorum of just this node draws
// a random one, and a larger quorum is refused (its voters must share one id:
// `brook format` each node, or give them all the same --cluster-id).
//
// With --bench-batches, the node that leads appends B batches of R metadata
// records each (K in flight), waits for each to commit, and prints one line:
//   bench: batches=B records=N seconds=S records/s=X commit-latency-us p50=.. p99=.. p999=.. max=..
//
// Tools are not logic code: signals and the real clock are fine here.
#include <signal.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/controller/quorum_controller.h"
#include "core/bootstrap_records.h"
#include "core/meta_properties.h"
#include "core/metadata/record_serde.h"
#include "io/real/real_node.h"
#include "io/scope.h"
#include "io/status.h"
#include "net/kafka/messages/no_op_record.h"
#include "raft/raft_node.h"
#include "tools/commands.h"

namespace brook::tools {

namespace {

using namespace std::chrono_literals;

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

struct ControllerArgs {
  int32_t node_id = -1;
  std::map<int32_t, io::Address> voters;
  std::vector<io::Address> bootstrap_servers;
  bool standalone = false;
  std::string data_dir;
  std::optional<io::Address> listen;
  std::string cluster_id;  // empty: the stored one, or a new one
  io::real::BackendKind backend = io::real::BackendKind::kAuto;
  int64_t election_timeout_ms = 1000;
  int64_t bench_batches = 0;
  int64_t bench_records = 1;
  int64_t bench_inflight = 1;
  bool debug = false;
};

void usage() {
  std::fprintf(stderr,
               "usage: brook controller --node-id N --controller-quorum-voters ID@HOST:PORT,...\n"
               "                        --data-dir DIR [--listen HOST:PORT] [--cluster-id ID]\n"
               "       brook controller --node-id N --data-dir DIR --listen HOST:PORT\n"
               "                        (--standalone | --controller-quorum-bootstrap-servers HOST:PORT,...)\n"
               "                        [--cluster-id ID]\n"
               "       options of both:\n"
               "                        [--backend auto|uring|epoll] [--election-timeout-ms MS]\n"
               "                        [--log-level info|debug]\n"
               "                        [--bench-batches B --bench-records R --bench-inflight K]\n");
}

std::optional<int64_t> parse_int(std::string_view text) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

// controller.quorum.voters: "1@host:port,2@host:port".
std::optional<std::map<int32_t, io::Address>> parse_voters(std::string_view text) {
  std::map<int32_t, io::Address> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view entry = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t at = entry.find('@');
    if (at == std::string_view::npos) return std::nullopt;
    const std::optional<int64_t> id = parse_int(entry.substr(0, at));
    absl::StatusOr<io::Address> address = io::Address::parse(entry.substr(at + 1));
    if (!id || *id < 0 || *id > INT32_MAX || !address.ok()) return std::nullopt;
    if (!out.emplace(static_cast<int32_t>(*id), *address).second) return std::nullopt;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::optional<ControllerArgs> parse(Args args) {
  ControllerArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--standalone") {
      out.standalone = true;
      continue;
    }
    if (i + 1 >= args.size()) return std::nullopt;
    const std::string_view value = args[++i];
    if (arg == "--controller-quorum-bootstrap-servers") {
      std::string_view text = value;
      while (!text.empty()) {
        const size_t comma = text.find(',');
        absl::StatusOr<io::Address> a = io::Address::parse(text.substr(0, comma));
        if (!a.ok()) return std::nullopt;
        out.bootstrap_servers.push_back(*a);
        text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
      }
    } else if (arg == "--node-id") {
      const auto v = parse_int(value);
      if (!v || *v < 0 || *v > INT32_MAX) return std::nullopt;
      out.node_id = static_cast<int32_t>(*v);
    } else if (arg == "--controller-quorum-voters") {
      auto v = parse_voters(value);
      if (!v) return std::nullopt;
      out.voters = std::move(*v);
    } else if (arg == "--data-dir") {
      out.data_dir = std::string(value);
    } else if (arg == "--listen") {
      absl::StatusOr<io::Address> a = io::Address::parse(value);
      if (!a.ok()) return std::nullopt;
      out.listen = *a;
    } else if (arg == "--cluster-id") {
      out.cluster_id = std::string(value);
    } else if (arg == "--log-level") {
      if (value != "debug" && value != "info") return std::nullopt;
      out.debug = value == "debug";
    } else if (arg == "--backend") {
      auto b = io::real::parse_backend_kind(value);
      if (!b.ok()) return std::nullopt;
      out.backend = *b;
    } else {
      const auto v = parse_int(value);
      if (!v || *v < 0) return std::nullopt;
      if (arg == "--election-timeout-ms") {
        out.election_timeout_ms = *v;
      } else if (arg == "--bench-batches") {
        out.bench_batches = *v;
      } else if (arg == "--bench-records") {
        out.bench_records = std::max<int64_t>(1, *v);
      } else if (arg == "--bench-inflight") {
        out.bench_inflight = std::max<int64_t>(1, *v);
      } else {
        return std::nullopt;
      }
    }
  }
  if (out.node_id < 0 || out.data_dir.empty()) return std::nullopt;
  const bool dynamic = out.standalone || !out.bootstrap_servers.empty();
  if (out.voters.empty() == !dynamic) return std::nullopt;  // static or dynamic, one of them
  if (dynamic) return out.listen ? std::optional<ControllerArgs>(out) : std::nullopt;
  if (!out.listen) {
    auto it = out.voters.find(out.node_id);
    if (it == out.voters.end()) return std::nullopt;  // an observer must say where it listens
    out.listen = it->second;
  }
  return out;
}

struct Bench {
  int64_t next = 0;
  int64_t done = 0;
  std::vector<int64_t> latencies_us;
  std::chrono::steady_clock::time_point start;
  bool printed = false;
};

io::Task<void> bench_writer(io::Context* ctx, raft::RaftNode* node, const ControllerArgs* args,
                            Bench* bench) {
  std::vector<io::Buffer> values;
  net::NoOpRecord noop;
  absl::StatusOr<io::Buffer> value =
      metadata::encode_metadata_record(metadata::at_highest_version(metadata::MetadataRecord(noop)));
  if (!value.ok()) co_return;
  while (bench->next < args->bench_batches) {
    if (node->role() != raft::Role::kLeader) {
      co_await ctx->clock().sleep_for(10ms);
      continue;
    }
    if (bench->next == 0 && bench->done == 0) bench->start = std::chrono::steady_clock::now();
    ++bench->next;
    std::vector<io::Buffer> batch(static_cast<size_t>(args->bench_records), *value);
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<raft::AppendedBatch> appended = co_await node->append(std::move(batch));
    if (!appended.ok()) {
      --bench->next;
      co_await ctx->clock().sleep_for(10ms);
      continue;
    }
    absl::Status committed =
        co_await node->wait_committed(appended->last_offset, appended->epoch, ctx->clock().now() + 30s);
    if (!committed.ok()) continue;
    const auto t1 = std::chrono::steady_clock::now();
    bench->latencies_us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(t1 - t0).count());
    ++bench->done;
  }
  if (bench->done >= args->bench_batches && !bench->printed) {
    bench->printed = true;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - bench->start).count();
    std::vector<int64_t> l = bench->latencies_us;
    std::sort(l.begin(), l.end());
    auto pct = [&](double q) { return l.empty() ? 0 : l[std::min(l.size() - 1, static_cast<size_t>(q * static_cast<double>(l.size())))]; };
    std::printf(
        "bench: batches=%lld records=%lld seconds=%.3f records/s=%.0f batches/s=%.0f "
        "commit-latency-us p50=%lld p99=%lld p999=%lld max=%lld\n",
        static_cast<long long>(bench->done), static_cast<long long>(bench->done * args->bench_records),
        seconds, static_cast<double>(bench->done * args->bench_records) / seconds,
        static_cast<double>(bench->done) / seconds, static_cast<long long>(pct(0.5)),
        static_cast<long long>(pct(0.99)), static_cast<long long>(pct(0.999)),
        static_cast<long long>(l.empty() ? 0 : l.back()));
    std::fflush(stdout);
  }
}

// The cluster id of an unformatted directory when none is given: a new one
// for a quorum of just this node; a larger quorum must be told.
absl::StatusOr<std::string> default_cluster_id(io::Context* ctx, const ControllerArgs& args) {
  if (args.standalone || (args.voters.size() == 1 && args.voters.contains(args.node_id))) {
    return core::random_cluster_id(ctx->random());
  }
  if (args.voters.empty()) {
    return absl::FailedPreconditionError(
        "no meta.properties and no --cluster-id: a controller joining a quorum needs the quorum's "
        "cluster id (`brook format --cluster-id ID ...`, or --cluster-id)");
  }
  return absl::FailedPreconditionError(fmt::format(
      "no meta.properties and no --cluster-id: the {} voters must share a cluster id (run `brook "
      "format --cluster-id ID ...` on each node, or pass the same --cluster-id to all; `brook "
      "random-uuid` makes one)",
      args.voters.size()));
}

// Checks (or formats) the data directory; its meta.properties.
io::Task<absl::StatusOr<core::MetaProperties>> check_formatted(io::Context* ctx,
                                                               const ControllerArgs* args) {
  std::string cluster_id = args->cluster_id;
  if (cluster_id.empty()) {
    CO_ASSIGN_OR_RETURN(std::optional<core::MetaProperties> stored,
                        co_await core::read_meta_properties(ctx->disk(), ""));
    if (!stored.has_value()) {
      CO_ASSIGN_OR_RETURN(cluster_id, default_cluster_id(ctx, *args));
    }
  }
  std::vector<std::string> dirs(1);  // the Disk's root: the data directory
  CO_ASSIGN_OR_RETURN(core::MetaProperties meta,
                      co_await core::ensure_formatted(ctx->disk(), std::move(dirs), cluster_id,
                                                      args->node_id, true, ctx->random()));
  // The directory's own id (a voter is the pair node id, directory id).
  CO_ASSIGN_OR_RETURN(std::optional<core::MetaProperties> stored,
                      co_await core::read_meta_properties(ctx->disk(), ""));
  if (stored.has_value()) meta.directory_id = stored->directory_id;
  co_return meta;
}

// --standalone on first start: the bootstrap checkpoint naming this node
// the only voter. A log directory holding any snapshot is left alone.
io::Task<absl::Status> bootstrap_standalone(io::Context* ctx, const ControllerArgs* args,
                                            const raft::RaftConfig* config) {
  CO_RETURN_IF_ERROR(co_await ctx->disk().make_dir(config->log_dir));
  CO_ASSIGN_OR_RETURN(std::vector<raft::SnapshotId> existing,
                      co_await raft::list_snapshots(ctx->disk(), config->log_dir));
  if (!existing.empty()) co_return absl::OkStatus();
  raft::Voter self;
  self.id = args->node_id;
  self.directory_id = config->directory_id;
  self.endpoints.push_back(raft::VoterEndpoint{config->listener_name, *config->advertised});
  raft::VoterSet voters;
  voters.emplace(self.id, std::move(self));
  co_return co_await raft::write_bootstrap_checkpoint(ctx->disk(), config->log_dir, std::move(voters));
}

io::Task<void> controller_main(io::Context* ctx, const ControllerArgs* args, bool* done, int* exit_code) {
  absl::StatusOr<core::MetaProperties> meta = co_await check_formatted(ctx, args);
  if (!meta.ok()) {
    std::fprintf(stderr, "brook controller: %s: %s\n", args->data_dir.c_str(),
                 std::string(meta.status().message()).c_str());
    *exit_code = 1;
    *done = true;
    co_return;
  }
  const std::string* cluster_id = &meta->cluster_id;
  raft::RaftConfig config;
  config.node_id = args->node_id;
  config.voters = args->voters;
  config.bootstrap_servers = args->bootstrap_servers;
  if (meta->directory_id.has_value()) config.directory_id = *meta->directory_id;
  config.advertised = args->listen;
  config.cluster_id = *cluster_id;
  if (args->standalone) {
    absl::Status bootstrapped = co_await bootstrap_standalone(ctx, args, &config);
    if (!bootstrapped.ok()) {
      std::fprintf(stderr, "brook controller: bootstrap checkpoint: %s\n", bootstrapped.ToString().c_str());
      *exit_code = 1;
      *done = true;
      co_return;
    }
  }
  config.election_timeout = std::chrono::milliseconds(args->election_timeout_ms);
  config.election_backoff_max = config.election_timeout;
  config.fetch_timeout = config.election_timeout * 2;
  absl::StatusOr<std::unique_ptr<raft::RaftNode>> node = co_await raft::RaftNode::open(*ctx, config);
  if (!node.ok()) {
    std::fprintf(stderr, "brook controller: %s\n", node.status().ToString().c_str());
    *exit_code = 1;
    *done = true;
    co_return;
  }
  absl::StatusOr<std::unique_ptr<io::Listener>> listener = co_await ctx->network().listen(*args->listen);
  if (!listener.ok()) {
    std::fprintf(stderr, "brook controller: listen on %s: %s\n", args->listen->to_string().c_str(),
                 listener.status().ToString().c_str());
    *exit_code = 1;
    *done = true;
    co_return;
  }
  std::printf("brook controller: node %d listening on %s\n", args->node_id,
              (*listener)->address().to_string().c_str());
  std::fflush(stdout);
  controller::ControllerConfig controller_config;
  controller_config.node_id = args->node_id;
  controller_config.cluster_id = *cluster_id;
  absl::StatusOr<std::vector<metadata::MetadataRecord>> bootstrap = co_await core::read_bootstrap_records(ctx->disk(), "");
  if (!bootstrap.ok()) {
    std::fprintf(stderr, "brook controller: %s\n", bootstrap.status().ToString().c_str());
    *exit_code = 1;
    *done = true;
    co_return;
  }
  controller_config.bootstrap_records = std::move(*bootstrap);
  controller::QuorumController controller(*ctx, **node, controller_config);
  (*node)->set_listener(&controller);
  Bench bench;
  io::TaskScope tasks(ctx->executor());
  tasks.spawn(controller.run());
  if (args->bench_batches > 0) {
    for (int64_t i = 0; i < args->bench_inflight; ++i) {
      tasks.spawn(bench_writer(ctx, node->get(), args, &bench));
    }
  }
  raft::RaftNode* raw = node->get();
  io::Listener* l = listener->get();
  auto run = [](raft::RaftNode* n, io::Listener* li, controller::QuorumController* c,
                bool* stopped_with_error) -> io::Task<void> {
    absl::Status s =
        co_await n->run(*li, [c](net::RequestFrame f) { return c->handle_request(std::move(f)); });
    std::fprintf(stderr, "brook controller: stopped: %s\n", s.ToString().c_str());
    *stopped_with_error = true;
  };
  bool failed = false;
  tasks.spawn(run(raw, l, &controller, &failed));
  while (!g_stop && !failed) co_await ctx->clock().sleep_for(50ms);
  if (!failed) {
    co_await raw->resign();
    co_await ctx->clock().sleep_for(200ms);  // let the EndQuorumEpoch requests go out
  }
  tasks.cancel_all();
  (void)co_await raw->log().close();
  *exit_code = failed ? 1 : 0;
  *done = true;
}

}  // namespace

int controller_main(Args args) {
  const std::optional<ControllerArgs> parsed = parse(args);
  if (!parsed) {
    usage();
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  io::real::RealNodeOptions options;
  options.backend = parsed->backend;
  options.data_dir = parsed->data_dir;
  options.node_id = io::NodeId{parsed->node_id};
  if (parsed->debug) options.log_level_min = io::LogLevel::kDebug;
  absl::StatusOr<std::unique_ptr<io::real::RealNode>> node = io::real::RealNode::create(options);
  if (!node.ok()) {
    std::fprintf(stderr, "brook controller: %s\n", node.status().ToString().c_str());
    return 1;
  }
  bool done = false;
  int exit_code = 0;
  (*node)->scope().spawn(controller_main(&(*node)->context(), &*parsed, &done, &exit_code));
  (*node)->run_until([&] { return done; });
  return exit_code;
}

}  // namespace brook::tools
