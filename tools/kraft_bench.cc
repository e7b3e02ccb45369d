// tools/kraft_bench.cc
//
// brook-kraft-bench: figures of the KRaft controller quorum.
//
//   brook-kraft-bench [--brook PATH] [--batches N] [--records R] [--inflight K]
//                     [--election-timeout-ms MS] [--sim-seeds S]
//
// 1. Commit latency and throughput on real processes: three `brook
//    controller` processes on loopback; whichever leads appends N batches of
//    R metadata records, K in flight, each waited for until committed (the
//    leader and a follower have flushed it), and prints p50/p99/p999 commit
//    latency and records/s.
// 2. Failover on real processes: the leader is killed with SIGKILL; the
//    time until another node leads a later epoch with its first entry
//    committed (asked with DescribeQuorum every 10 ms).
// 3. Failover in the simulator (3 and 5 voters, default timeouts, election
//    timeout 1 s), over several seeds.
// 4. Simulated-to-wall time ratio of the kraft scenario's 5-voter seeds
//    among seeds 1..S (the swarm sweep with every fault).
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
