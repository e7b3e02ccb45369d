// tools/group_bench.cc
//
// `brook bench groups`: consumer group figures, against a real cluster or
// a `brook server` node in the simulator.
//
//   brook bench groups --bootstrap-server H:P [--members N] [--heartbeat-ms MS]
//                      [--commit-seconds S] [--protocol classic|consumer]
//   brook bench groups --sim [--members N] [--heartbeat-ms MS] [--commit-seconds S]
//                      [--protocol classic|consumer]
//
// --protocol consumer uses KIP-848's ConsumerGroupHeartbeat: members
// heartbeat at the interval the broker gives (group.consumer.heartbeat.
// interval.ms; --heartbeat-ms sets it in the simulator) and at once after
// their assignment changed, as the Java consumer acknowledges a
// reconciliation.
//
// It prints:
// - formation: N members join an empty group at once, until every one has
//   its assignment (this includes group.initial.rebalance.delay.ms);
// - rebalance: one more member joins the settled group of N-1, until all N
//   have their assignment in the new generation (the others learn of it at
//   their next heartbeat, so the heartbeat interval is part of it);
// - commits: OffsetCommit requests answered per second by the group's
//   coordinator, from one member and from all N at once (each commit is one
//   partition's offset, replicated like any __consumer_offsets record).
// In the simulator the times are simulated time, and the wall time of the
// run is printed beside them.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "io/scope.h"
#include "io/when.h"
#include "net/client/admin.h"
#include "net/client/group.h"
#include "sim/broker.h"
#include "sim/world.h"
#include "tools/client_tool.h"
#include "tools/commands.h"

namespace brook::tools {

namespace {

using namespace std::chrono_literals;

struct GroupBenchArgs {
  client::ClientOptions client;
  bool sim = false;
  int members = 10;
  io::Duration heartbeat = 100ms;
  io::Duration commit_time = 5s;
  bool consumer_protocol = false;
};

struct GroupBenchResult {
  int code = 1;
  double formation_ms = 0;
  double rebalance_ms = 0;
  double commits_one = 0;
  double commits_all = 0;
};

double ms_between(io::Instant a, io::Instant b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

// One member: its own connections, and its latest assignment.
struct BenchMember {
  BenchMember(io::Context& ctx, const client::ClientOptions& options, client::GroupOptions group)
      : cluster(ctx, options), member(cluster, std::move(group)) {}
  client::Cluster cluster;
  client::GroupMember member;
  int32_t generation = -1;
  io::Instant assigned_at{};
  std::vector<client::TopicPartition> partitions;
};

// Joins, then heartbeats and joins again whenever the group rebalances.
io::Task<void> member_loop(io::Context* ctx, BenchMember* m, io::Duration heartbeat) {
  while (true) {
    absl::StatusOr<client::GroupAssignment> a = co_await m->member.join(ctx->clock().now() + 60s);
    if (!a.ok()) {
      co_await ctx->clock().sleep_for(100ms);
      continue;
    }
    m->generation = a->generation;
    m->partitions = a->partitions;
    m->assigned_at = ctx->clock().now();
    while (true) {
      co_await ctx->clock().sleep_for(heartbeat);
      absl::Status h = co_await m->member.heartbeat();
      if (!h.ok() && !absl::IsUnavailable(h) && !absl::IsDeadlineExceeded(h)) break;
    }
  }
}

// The consumer protocol: heartbeats, owning what the last answer assigned
// (the member epoch stands in for the generation).
io::Task<void> consumer_member_loop(io::Context* ctx, BenchMember* m) {
  while (true) {
    absl::StatusOr<client::ConsumerHeartbeat> h = co_await m->member.consumer_heartbeat(m->partitions);
    if (!h.ok()) {
      if (absl::IsAborted(h.status())) m->partitions.clear();
      co_await ctx->clock().sleep_for(100ms);
      continue;
    }
    bool changed = h->member_epoch != m->generation;
    m->generation = h->member_epoch;
    if (h->assignment.has_value() && *h->assignment != m->partitions) {
      m->partitions = *h->assignment;
      changed = true;
    }
    if (changed) {
      m->assigned_at = ctx->clock().now();
      continue;  // acknowledge at once
    }
    co_await ctx->clock().sleep_for(h->heartbeat_interval);
  }
}

// Every member in generation `generation` or later, all in the same one
// (and, for the consumer protocol, each with its one partition: a member
// can be at the new epoch while it waits for a partition to be released).
bool all_assigned(const std::vector<std::unique_ptr<BenchMember>>& ms, int32_t after, bool consumer_protocol) {
  int32_t g = -1;
  for (const auto& m : ms) {
    if (m->generation <= after) return false;
    if (g >= 0 && m->generation != g) return false;
    if (consumer_protocol && m->partitions.size() != 1) return false;
    g = m->generation;
  }
  return true;
}

io::Task<void> commit_loop(io::Context* ctx, BenchMember* m, io::Instant until, uint64_t* commits) {
  int64_t offset = 0;
  while (ctx->clock().now() < until) {
    if (m->partitions.empty()) co_return;
    std::map<client::TopicPartition, int64_t> one{{m->partitions.front(), ++offset}};
    if ((co_await m->member.commit(one)).ok()) ++*commits;
  }
}

io::Task<GroupBenchResult> bench(io::Context& ctx, const GroupBenchArgs* a) {
  GroupBenchResult r;
  client::Cluster admin(ctx, a->client);
  const std::string topic = fmt::format("group-bench-{}", ctx.random().next_u64() % 1000000);
  client::NewTopic t;
  t.name = topic;
  t.partitions = a->members;
  t.replication_factor = -1;
  std::vector<client::NewTopic> topics{t};
  absl::StatusOr<std::map<std::string, client::CreatedTopic>> created = co_await client::create_topics(admin, topics);
  if (!created.ok() || !(*created)[topic].status.ok()) {
    std::fprintf(stderr, "brook bench groups: creating %s failed: %s\n", topic.c_str(),
                 (created.ok() ? (*created)[topic].status : created.status()).ToString().c_str());
    co_return r;
  }
  client::GroupOptions go;
  go.consumer_protocol = a->consumer_protocol;
  go.group_id = topic;
  go.topics = {topic};
  go.session_timeout = 10s;
  go.rebalance_timeout = 30s;
  go.heartbeat_interval = a->heartbeat;
  std::vector<std::unique_ptr<BenchMember>> members;
  for (int i = 0; i < a->members; ++i) {
    client::ClientOptions o = a->client;
    o.client_id = fmt::format("bench-member-{}", i);
    members.push_back(std::make_unique<BenchMember>(ctx, o, go));
  }
  io::TaskScope scope(ctx.executor());
  auto wait_for = [&](auto done, io::Duration limit) -> io::Task<bool> {
    const io::Instant deadline = ctx.clock().now() + limit;
    while (!done()) {
      if (ctx.clock().now() >= deadline) co_return false;
      co_await ctx.clock().sleep_for(1ms);
    }
    co_return true;
  };
  // Formation: all but the last member join the empty group at once.
  io::Instant start = ctx.clock().now();
  auto spawn = [&](BenchMember* m) {
    scope.spawn(a->consumer_protocol ? consumer_member_loop(&ctx, m) : member_loop(&ctx, m, a->heartbeat));
  };
  for (int i = 0; i + 1 < a->members; ++i) spawn(members[static_cast<size_t>(i)].get());
  std::vector<std::unique_ptr<BenchMember>>* all = &members;
  auto formed = [&] {
    if (a->consumer_protocol) {
      // Every partition owned, all members at one epoch.
      size_t owned = 0;
      for (int i = 0; i + 1 < a->members; ++i) {
        const BenchMember& m = *(*all)[static_cast<size_t>(i)];
        if (m.partitions.empty() || m.generation != (*all)[0]->generation) return false;
        owned += m.partitions.size();
      }
      return owned == static_cast<size_t>(a->members);
    }
    for (int i = 0; i + 1 < a->members; ++i) {
      if ((*all)[static_cast<size_t>(i)]->generation < 0) return false;
    }
    return true;
  };
  if (!co_await wait_for(formed, 120s)) {
    std::fprintf(stderr, "brook bench groups: the group did not form\n");
    co_return r;
  }
  io::Instant last = start;
  for (int i = 0; i + 1 < a->members; ++i) last = std::max(last, members[static_cast<size_t>(i)]->assigned_at);
  r.formation_ms = ms_between(start, last);
  // Let it settle (late joiners of the formation cause one more round).
  // A random phase against the members' heartbeats.
  const io::Duration phase = std::chrono::microseconds(
      ctx.random().uniform(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(a->heartbeat).count())));
  co_await ctx.clock().sleep_for(std::max<io::Duration>(2s, 10 * a->heartbeat) + phase);
  // Rebalance: the last member joins.
  int32_t before = -1;
  for (int i = 0; i + 1 < a->members; ++i) before = std::max(before, members[static_cast<size_t>(i)]->generation);
  start = ctx.clock().now();
  spawn(members.back().get());
  auto rebalanced = [&] { return all_assigned(*all, before, a->consumer_protocol); };
  if (!co_await wait_for(rebalanced, 120s)) {
    std::fprintf(stderr, "brook bench groups: the rebalance did not finish\n");
    co_return r;
  }
  last = start;
  for (const auto& m : members) last = std::max(last, m->assigned_at);
  r.rebalance_ms = ms_between(start, last);
  // Commits: one member, then all of them.
  const double seconds = std::chrono::duration<double>(a->commit_time).count();
  uint64_t one = 0;
  co_await commit_loop(&ctx, members.front().get(), ctx.clock().now() + a->commit_time, &one);
  r.commits_one = static_cast<double>(one) / seconds;
  uint64_t total = 0;
  std::vector<io::Task<void>> loops;
  const io::Instant until = ctx.clock().now() + a->commit_time;
  for (auto& m : members) loops.push_back(commit_loop(&ctx, m.get(), until, &total));
  co_await io::when_all(std::move(loops));
  r.commits_all = static_cast<double>(total) / seconds;
  for (auto& m : members) co_await m->member.leave();
  r.code = 0;
  co_return r;
}

void print(const GroupBenchArgs& a, const GroupBenchResult& r, const char* clock) {
  std::printf("members: %d, %s protocol, heartbeat.interval.ms %lld (%s)\n", a.members,
              a.consumer_protocol ? "consumer" : "classic",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(a.heartbeat).count()),
              clock);
  std::printf("formation: %d members joined an empty group in %.1f ms\n", a.members - 1, r.formation_ms);
  std::printf("rebalance: member %d joined; all %d had their assignment after %.1f ms\n", a.members, a.members,
              r.rebalance_ms);
  std::printf("commits: %.0f/s from one member, %.0f/s from %d members at once\n", r.commits_one, r.commits_all,
              a.members);
}

}  // namespace

int group_bench_main(Args args) {
  GroupBenchArgs a;
  bool have_bootstrap = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view name = args[i];
    auto value = [&]() -> std::string_view { return i + 1 < args.size() ? args[++i] : std::string_view(); };
    if (name == "--sim") {
      a.sim = true;
    } else if (name == "--bootstrap-server") {
      have_bootstrap = parse_bootstrap(value(), &a.client).ok();
    } else if (name == "--members") {
      a.members = std::max(2, std::atoi(std::string(value()).c_str()));
    } else if (name == "--heartbeat-ms") {
      a.heartbeat = std::chrono::milliseconds(std::max(1, std::atoi(std::string(value()).c_str())));
    } else if (name == "--protocol") {
      const std::string_view protocol = value();
      if (protocol != "consumer" && protocol != "classic") {
        std::fprintf(stderr, "brook bench groups: --protocol classic or --protocol consumer\n");
        return 2;
      }
      a.consumer_protocol = protocol == "consumer";
    } else if (name == "--commit-seconds") {
      a.commit_time = std::chrono::seconds(std::max(1, std::atoi(std::string(value()).c_str())));
    } else {
      std::fprintf(stderr,
                   "usage: brook bench groups (--bootstrap-server H:P | --sim) [--members N] [--heartbeat-ms MS] "
                   "[--commit-seconds S] [--protocol classic|consumer]\n");
      return 2;
    }
  }
  a.client.request_timeout = 30s;
  if (!a.sim) {
    if (!have_bootstrap) {
      std::fprintf(stderr, "brook bench groups: --bootstrap-server or --sim\n");
      return 2;
    }
    GroupBenchResult r;
    const int code = run_client_tool("bench groups", [&](io::Context& ctx) -> io::Task<int> {
      r = co_await bench(ctx, &a);
      co_return r.code;
    });
    if (code == 0) print(a, r, "real time");
    return code;
  }
  // One `brook server` node and one client node in the simulator, no faults.
  sim::World world(1);
  sim::Node& server = world.add_node();
  sim::Node& client = world.add_node();
  const io::Address broker = server.address(9092);
  const io::Address controller = server.address(9093);
  server.start([&](io::Context& ctx) {
    sim::ServerNodeOptions o;
    o.brokers = {broker};
    o.controllers = {controller};
    o.offsets_partitions = 50;
    o.group_initial_delay = 3s;
    o.group_consumer_heartbeat_interval = a.heartbeat;
    return sim::server_node_main(&ctx, o);
  });
  a.client.bootstrap = {broker};
  GroupBenchResult r;
  bool done = false;
  client.start([&](io::Context& ctx) -> io::Task<void> {
    co_await ctx.clock().sleep_for(2s);  // the node formats and elects itself
    r = co_await bench(ctx, &a);
    done = true;
  });
  const auto wall_start = std::chrono::steady_clock::now();
  world.run_until([&] { return done; }, 600s);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  if (!done || r.code != 0) {
    std::fprintf(stderr, "brook bench groups: the simulated run did not finish\n");
    return 1;
  }
  print(a, r, "simulated time");
  std::printf("simulated %.1f s in %.2f s of wall time\n",
              std::chrono::duration<double>(world.elapsed()).count(), wall);
  return 0;
}

}  // namespace brook::tools
