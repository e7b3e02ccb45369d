// tools/kraft_bench.cc
//
// brook-kraft-bench: figures of the KRaft controller quorum.
//
//   brook-kraft-bench [--brook PATH] [--batches N] [--records R] [--inflight K]
//                     [--election-timeout-ms MS] [--sim-seeds S]
//                     [--topics T] [--topic-inflight J]
//
// 1. Commit latency and throughput on real processes: three `brook
//    controller` processes on loopback; whichever leads appends N batches of
//    R metadata records, K in flight, each waited for until committed (the
//    leader and a follower have flushed it), and prints p50/p99/p999 commit
//    latency and records/s.
// 2. Controller requests on the same processes: a broker registers and is
//    unfenced, then T CreateTopics requests (one topic of one partition
//    each), J in flight, are answered by the active controller once
//    committed; prints p50/p99/p999 request latency and topics/s.
// 3. Failover on real processes: the leader is killed with SIGKILL; the
//    time until another node leads a later epoch with its first entry
//    committed (asked with DescribeQuorum every 10 ms).
// 4. Failover in the simulator (3 and 5 voters, default timeouts, election
//    timeout 1 s), over several seeds.
// 5. Simulated-to-wall time ratio of the kraft scenario's 5-voter seeds
//    among seeds 1..S (the swarm sweep with every fault), and of the
//    controller scenario's seeds 1..S.
//
// Tools are not logic code: processes, threads and the real clock are fine.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "io/real/real_node.h"
#include "net/kafka/messages/broker_heartbeat_request.h"
#include "net/kafka/messages/broker_heartbeat_response.h"
#include "net/kafka/messages/broker_registration_request.h"
#include "net/kafka/messages/broker_registration_response.h"
#include "net/kafka/messages/create_topics_request.h"
#include "net/kafka/messages/create_topics_response.h"
#include "net/kafka/messages/describe_quorum_request.h"
#include "net/kafka/messages/describe_quorum_response.h"
#include "net/kafka/rpc.h"
#include "sim/kraft.h"
#include "sim/scenario.h"

namespace {

using namespace std::chrono_literals;
using namespace brook;

struct Options {
  std::string brook = "build/tools/brook";
  int64_t batches = 20000;
  int64_t records = 10;
  int64_t inflight = 8;
  int64_t election_timeout_ms = 1000;
  int64_t sim_seeds = 200;
  int64_t topics = 4000;
  int64_t topic_inflight = 8;
};

uint16_t free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  uint16_t port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

struct View {
  int32_t leader_id = -1;
  int32_t epoch = -1;
  int64_t high_watermark = -1;
  int64_t leader_end = -1;
};

io::Task<void> describe(io::Context* ctx, uint16_t port, std::optional<View>* out, bool* done) {
  net::Peer peer(ctx->network(), ctx->clock(), io::Address("127.0.0.1", port), "kraft-bench");
  net::DescribeQuorumRequest request;
  net::DescribeQuorumRequest::TopicData topic;
  topic.topic_name = "__cluster_metadata";
  topic.partitions.emplace_back();
  request.topics.push_back(topic);
  auto r = co_await peer.call<net::DescribeQuorumResponse>(request, 2, 1s);
  if (r.ok() && r->topics.size() == 1 && r->topics[0].partitions.size() == 1 &&
      r->topics[0].partitions[0].error_code == 0) {
    const auto& p = r->topics[0].partitions[0];
    View v{p.leader_id, p.leader_epoch, p.high_watermark, -1};
    for (const auto& voter : p.current_voters) {
      if (voter.replica_id == p.leader_id) v.leader_end = voter.log_end_offset;
    }
    *out = v;
  }
  *done = true;
}

std::optional<View> ask(io::real::RealNode& client, uint16_t port) {
  std::optional<View> view;
  bool done = false;
  client.scope().spawn(describe(&client.context(), port, &view, &done));
  client.run_until([&] { return done; });
  return view;
}

// Controller request bench state, shared by the client's tasks.
struct TopicBench {
  uint16_t port = 0;
  int64_t next = 0;
  int64_t total = 0;
  int64_t failed = 0;
  int running = 0;
  std::vector<int64_t> latencies_us;
};

io::Task<void> register_broker(io::Context* ctx, uint16_t port, bool* ok, bool* done) {
  net::Peer peer(ctx->network(), ctx->clock(), io::Address("127.0.0.1", port), "kraft-bench");
  net::BrokerRegistrationRequest reg;
  reg.broker_id = 100;
  reg.cluster_id = "MkU3OEVBNTcwNTJENDM2Qk";
  reg.incarnation_id.bytes[0] = 7;
  reg.rack = std::nullopt;
  net::BrokerRegistrationRequest::Feature mv;
  mv.name = "metadata.version";
  mv.min_supported_version = 7;
  mv.max_supported_version = 21;
  reg.features.push_back(mv);
  for (int attempt = 0; attempt < 200 && !*ok; ++attempt) {
    absl::StatusOr<net::BrokerRegistrationResponse> r =
        co_await peer.call<net::BrokerRegistrationResponse>(reg, 4, 2s);
    if (!r.ok() || r->error_code != 0) {
      co_await ctx->clock().sleep_for(20ms);
      continue;
    }
    net::BrokerHeartbeatRequest hb;
    hb.broker_id = 100;
    hb.broker_epoch = r->broker_epoch;
    hb.current_metadata_offset = r->broker_epoch;
    absl::StatusOr<net::BrokerHeartbeatResponse> h = co_await peer.call<net::BrokerHeartbeatResponse>(hb, 1, 2s);
    *ok = h.ok() && h->error_code == 0 && !h->is_fenced;
  }
  *done = true;
}

io::Task<void> create_topics(io::Context* ctx, TopicBench* b) {
  net::Peer peer(ctx->network(), ctx->clock(), io::Address("127.0.0.1", b->port), "kraft-bench");
  while (b->next < b->total) {
    const int64_t i = b->next++;
    net::CreateTopicsRequest request;
    net::CreateTopicsRequest::CreatableTopic topic;
    topic.name = fmt::format("bench-{}", i);
    topic.num_partitions = 1;
    topic.replication_factor = 1;
    request.topics.push_back(topic);
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<net::CreateTopicsResponse> r = co_await peer.call<net::CreateTopicsResponse>(request, 7, 5s);
    const auto t1 = std::chrono::steady_clock::now();
    if (!r.ok() || r->topics.size() != 1 || r->topics[0].error_code != 0) {
      ++b->failed;
      continue;
    }
    b->latencies_us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(t1 - t0).count());
  }
  --b->running;
}

int controller_requests(const Options& o, io::real::RealNode& client, uint16_t port) {
  bool registered = false;
  bool done = false;
  client.scope().spawn(register_broker(&client.context(), port, &registered, &done));
  client.run_until([&] { return done; });
  if (!registered) {
    std::fprintf(stderr, "brook-kraft-bench: the broker did not register and unfence\n");
    return 1;
  }
  TopicBench b;
  b.port = port;
  b.total = o.topics;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.topic_inflight; ++i) {
    ++b.running;
    client.scope().spawn(create_topics(&client.context(), &b));
  }
  client.run_until([&] { return b.running == 0; });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<int64_t> l = b.latencies_us;
  std::sort(l.begin(), l.end());
  auto pct = [&](double q) { return l.empty() ? 0 : l[std::min(l.size() - 1, static_cast<size_t>(q * l.size()))]; };
  std::printf("controller requests: %lld CreateTopics (1 topic, 1 partition each), %lld in flight: %.0f topics/s; "
              "latency-us p50=%lld p99=%lld p999=%lld max=%lld; failed=%lld\n",
              static_cast<long long>(l.size()), static_cast<long long>(o.topic_inflight),
              static_cast<double>(l.size()) / seconds, static_cast<long long>(pct(0.5)),
              static_cast<long long>(pct(0.99)), static_cast<long long>(pct(0.999)),
              static_cast<long long>(l.empty() ? 0 : l.back()), static_cast<long long>(b.failed));
  return b.failed == 0 ? 0 : 1;
}

int real_processes(const Options& o, const std::string& root) {
  std::vector<uint16_t> ports;
  std::string voters;
  for (int id = 1; id <= 3; ++id) {
    ports.push_back(free_port());
    if (!voters.empty()) voters += ",";
    voters += fmt::format("{}@127.0.0.1:{}", id, ports.back());
  }
  std::vector<pid_t> pids;
  std::vector<std::string> outs;
  for (int id = 1; id <= 3; ++id) {
    const std::string out = fmt::format("{}/node{}.out", root, id);
    outs.push_back(out);
    const pid_t pid = fork();
    if (pid == 0) {
      if (std::freopen(out.c_str(), "w", stdout) == nullptr) _exit(126);
      if (std::freopen(fmt::format("{}/node{}.log", root, id).c_str(), "w", stderr) == nullptr) _exit(126);
      const std::vector<std::string> argv_s = {
          o.brook, "controller", "--node-id", std::to_string(id), "--controller-quorum-voters", voters,
          "--data-dir", fmt::format("{}/node{}", root, id), "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qk",
          "--election-timeout-ms",
          std::to_string(o.election_timeout_ms), "--bench-batches", std::to_string(o.batches),
          "--bench-records", std::to_string(o.records), "--bench-inflight", std::to_string(o.inflight)};
      std::vector<char*> argv;
      for (const std::string& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(o.brook.c_str(), argv.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  auto cleanup = [&] {
    for (pid_t p : pids) kill(p, SIGKILL);
    for (pid_t p : pids) waitpid(p, nullptr, 0);
  };
  // The leader prints its bench line when its batches are committed.
  std::string bench_line;
  int leader = -1;
  const auto deadline = std::chrono::steady_clock::now() + 300s;
  while (bench_line.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
    for (size_t i = 0; i < outs.size(); ++i) {
      if (FILE* f = std::fopen(outs[i].c_str(), "r")) {
        char line[1024];
        while (std::fgets(line, sizeof(line), f) != nullptr) {
          if (std::string_view(line).starts_with("bench:")) {
            bench_line = line;
            leader = static_cast<int>(i);
          }
        }
        std::fclose(f);
      }
    }
  }
  if (bench_line.empty()) {
    std::fprintf(stderr, "brook-kraft-bench: no bench result within 300 s (logs in %s)\n", root.c_str());
    cleanup();
    return 1;
  }
  std::printf("real 3-voter quorum, loopback, %lld batches x %lld records, %lld in flight:\n  %s",
              static_cast<long long>(o.batches), static_cast<long long>(o.records),
              static_cast<long long>(o.inflight), bench_line.c_str());

  io::real::RealNodeOptions client_options;
  client_options.data_dir = root + "/client";
  auto client = io::real::RealNode::create(client_options);
  if (!client.ok()) {
    cleanup();
    return 1;
  }
  if (o.topics > 0 && controller_requests(o, **client, ports[static_cast<size_t>(leader)]) != 0) {
    cleanup();
    return 1;
  }
  std::optional<View> before = ask(**client, ports[static_cast<size_t>(leader)]);
  if (!before || before->leader_id != leader + 1) {
    std::fprintf(stderr, "brook-kraft-bench: node %d no longer leads\n", leader + 1);
    cleanup();
    return 1;
  }
  kill(pids[static_cast<size_t>(leader)], SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  std::optional<View> after;
  while (!after && std::chrono::steady_clock::now() < killed + 60s) {
    for (size_t i = 0; i < ports.size() && !after; ++i) {
      if (static_cast<int>(i) == leader) continue;
      std::optional<View> v = ask(**client, ports[i]);
      if (v && v->leader_id == static_cast<int32_t>(i + 1) && v->epoch > before->epoch &&
          v->high_watermark > before->leader_end) {
        after = v;
      }
    }
    if (!after) std::this_thread::sleep_for(10ms);
  }
  cleanup();
  if (!after) {
    std::fprintf(stderr, "brook-kraft-bench: no new leader committed within 60 s\n");
    return 1;
  }
  std::printf("real failover (SIGKILL of the leader, election timeout %lld ms, fetch timeout %lld ms): "
              "%.0f ms to a committed entry of epoch %d\n",
              static_cast<long long>(o.election_timeout_ms),
              static_cast<long long>(o.election_timeout_ms * 2),
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - killed).count(),
              after->epoch);
  return 0;
}

void simulated(const Options& o) {
  for (int voters : {3, 5}) {
    std::vector<double> ms;
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      auto d = sim::simulated_failover(seed, voters);
      if (d.ok()) ms.push_back(std::chrono::duration<double, std::milli>(*d).count());
    }
    std::sort(ms.begin(), ms.end());
    if (ms.empty()) continue;
    std::printf("simulated failover, %d voters (20 seeds, election timeout 1 s, fetch timeout 2 s): "
                "median %.0f ms, max %.0f ms\n",
                voters, ms[ms.size() / 2], ms.back());
  }
  double simulated_s = 0;
  double wall_s = 0;
  int runs = 0;
  int failed = 0;
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(o.sim_seeds); ++seed) {
    if (sim::KraftConfig::draw(seed).voters != 5) continue;
    sim::ScenarioOptions options;
    options.name = "kraft";
    options.seed = seed;
    const auto t0 = std::chrono::steady_clock::now();
    auto r = sim::run_scenario(options);
    wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r.ok()) continue;
    ++runs;
    if (!r->passed) ++failed;
    simulated_s += std::chrono::duration<double>(r->simulated).count();
  }
  std::printf("kraft sweep, 5-voter seeds of 1..%lld: %d runs (%d failed), %.0f s simulated in %.2f s: "
              "%.0fx simulated-to-wall\n",
              static_cast<long long>(o.sim_seeds), runs, failed, simulated_s, wall_s,
              wall_s > 0 ? simulated_s / wall_s : 0.0);
  simulated_s = 0;
  wall_s = 0;
  runs = 0;
  failed = 0;
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(o.sim_seeds); ++seed) {
    sim::ScenarioOptions options;
    options.name = "controller";
    options.seed = seed;
    const auto t0 = std::chrono::steady_clock::now();
    auto r = sim::run_scenario(options);
    wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r.ok()) continue;
    ++runs;
    if (!r->passed) ++failed;
    simulated_s += std::chrono::duration<double>(r->simulated).count();
  }
  std::printf("controller sweep, seeds 1..%lld: %d runs (%d failed), %.0f s simulated in %.2f s: "
              "%.0fx simulated-to-wall\n",
              static_cast<long long>(o.sim_seeds), runs, failed, simulated_s, wall_s,
              wall_s > 0 ? simulated_s / wall_s : 0.0);
}

std::optional<int64_t> parse_int(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view arg = argv[i];
    const std::string_view value = argv[i + 1];
    if (arg == "--brook") {
      o.brook = std::string(value);
      continue;
    }
    const std::optional<int64_t> v = parse_int(value);
    if (!v) {
      std::fprintf(stderr, "brook-kraft-bench: bad value for %s\n", argv[i]);
      return 2;
    }
    if (arg == "--batches") o.batches = *v;
    else if (arg == "--records") o.records = *v;
    else if (arg == "--inflight") o.inflight = *v;
    else if (arg == "--election-timeout-ms") o.election_timeout_ms = *v;
    else if (arg == "--sim-seeds") o.sim_seeds = *v;
    else if (arg == "--topics") o.topics = *v;
    else if (arg == "--topic-inflight") o.topic_inflight = *v;
    else {
      std::fprintf(stderr, "brook-kraft-bench: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  char dir[] = "/tmp/brook-kraft-bench-XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  const int rc = real_processes(o, dir);
  std::error_code ec;
  if (rc == 0) std::filesystem::remove_all(dir, ec);
  simulated(o);
  return rc;
}
