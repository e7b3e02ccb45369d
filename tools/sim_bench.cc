// tools/sim_bench.cc
//
// brook-sim-bench: speed figures of the simulator, printed one per line.
//
//   scheduler/queue   events per second through io::EventQueue alone: a
//                     steady state of 1,000 pending timers, each pop
//                     re-arming a timer and, every other pop, posting a
//                     callback (the post+timer mix of an event loop).
//   scheduler/world   events per second through World: 5 nodes x 20 tasks,
//                     each looping over a random sleep (timer) and a
//                     yield_now (post).
//   idle-cluster      simulated seconds per wall second for 5 idle nodes,
//                     each with 3 periodic heartbeat timers (100 ms, 1 s,
//                     10 s): 55.5 events per simulated second. Goal 1e6x.
//   mesh-1KiB         simulated seconds per wall second for 5 nodes, every
//                     node streaming 1 KiB messages to each of its 4 peers
//                     every 1 ms (20 connections, 20,000 messages and
//                     20 MB per simulated second), latency 50 us + U[0,100 us].
//                     Goal 100x.
//   demo              the demo scenario (brook sim): seeds per second and
//                     simulated seconds per wall second over a sweep.
//
// Usage: brook-sim-bench [--quick] [queue|world|idle|mesh|demo ...]
//   --quick: shorter runs (smoke tests); names pick benchmarks (default: all).
//
// This is measurement tooling: it reads the real (steady) clock to time the
// runs, which simulated code never does.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "io/event_queue.h"
#include "io/random.h"
#include "sim/mesh.h"
#include "sim/scenario.h"
#include "sim/world.h"

namespace {

using namespace std::chrono_literals;
using brook::io::Duration;
using Stopwatch = std::chrono::steady_clock;

double seconds_since(Stopwatch::time_point start) {
  return std::chrono::duration<double>(Stopwatch::now() - start).count();
}

// Wall and process CPU time of a run. On a shared, loaded machine the CPU
// time shows what one dedicated core would do; both are printed.
struct Timer {
  Stopwatch::time_point wall_start = Stopwatch::now();
  std::clock_t cpu_start = std::clock();
  double wall() const { return seconds_since(wall_start); }
  double cpu() const { return static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC; }
};

// "rate per wall second (rate per CPU second)" for `amount` of work.
std::string rates(double amount, const Timer& t, double scale, const char* format) {
  return fmt::format(fmt::runtime(format), amount / t.wall() / scale) + " wall, " +
         fmt::format(fmt::runtime(format), amount / t.cpu() / scale) + " cpu";
}

double sim_seconds(Duration d) { return static_cast<double>(d.count()) / 1e9; }

// --- scheduler/queue ------------------------------------------------------

uint64_t g_sink = 0;
void count_event(void* arg) { g_sink += reinterpret_cast<uintptr_t>(arg); }

void bench_queue(double budget_s) {
  brook::io::EventQueue queue;
  brook::io::Random random(1);
  constexpr int kPending = 1000;
  const brook::io::Callback cb{&count_event, nullptr};
  for (int i = 0; i < kPending; ++i) queue.schedule(random.uniform_range(1, 1'000'000), cb);
  uint64_t events = 0;
  const Timer timer;
  while (timer.wall() < budget_s) {
    for (int i = 0; i < 1'000'000; ++i) {
      auto due = queue.pop_due(INT64_MAX);
      due->callback();
      ++events;
      if (due->tag == 0) {
        queue.schedule(due->time_ns + random.uniform_range(1, 1'000'000), cb, 0);
        if ((events & 1) == 0) queue.post(cb, 1);
      }
    }
  }
  fmt::print("scheduler/queue: {} M events/s (1,000 pending timers, a post every other pop)\n",
             rates(static_cast<double>(events), timer, 1e6, "{:.1f}"));
}

// --- scheduler/world ------------------------------------------------------

brook::io::Task<void> sleep_and_yield(brook::io::Context* ctx) {
  for (;;) {
    co_await ctx->clock().sleep_for(Duration(ctx->random().uniform_range(1, 1'000'000)));
    co_await brook::io::yield_now();
  }
}

brook::io::Task<void> many_tasks(brook::io::Context* ctx, int tasks) {
  brook::io::TaskScope scope(ctx->executor());
  for (int i = 0; i < tasks; ++i) scope.spawn(sleep_and_yield(ctx));
  co_await scope.join();
}

void bench_world(double budget_s) {
  brook::sim::World world(1);
  for (int i = 0; i < 5; ++i) {
    world.add_node().start([](brook::io::Context& ctx) { return many_tasks(&ctx, 20); });
  }
  world.run_for(1ms);
  const uint64_t before = world.events_run();
  const Timer timer;
  while (timer.wall() < budget_s) world.run_for(100ms);
  fmt::print("scheduler/world: {} M events/s (5 nodes x 20 tasks: random sleep + yield)\n",
             rates(static_cast<double>(world.events_run() - before), timer, 1e6, "{:.1f}"));
}

// --- idle cluster ---------------------------------------------------------

brook::io::Task<void> heartbeat(brook::io::Context* ctx, Duration period) {
  for (;;) co_await ctx->clock().sleep_for(period);
}

brook::io::Task<void> idle_node(brook::io::Context* ctx) {
  brook::io::TaskScope scope(ctx->executor());
  scope.spawn(heartbeat(ctx, 100ms));
  scope.spawn(heartbeat(ctx, 1s));
  scope.spawn(heartbeat(ctx, 10s));
  co_await scope.join();
}

void bench_idle(double budget_s) {
  brook::sim::World world(2);
  for (int i = 0; i < 5; ++i) {
    world.add_node().start([](brook::io::Context& ctx) { return idle_node(&ctx); });
  }
  const uint64_t before = world.events_run();
  const Timer timer;
  while (timer.wall() < budget_s) world.run_for(24h);
  const double simulated = sim_seconds(world.elapsed());
  fmt::print(
      "idle-cluster: {} simulated/real (5 nodes x heartbeats 100ms/1s/10s = 55.5 events per "
      "simulated s; {:.0f} simulated s; {} M events/s)\n",
      rates(simulated, timer, 1, "{:.0f}x"), simulated,
      rates(static_cast<double>(world.events_run() - before), timer, 1e6, "{:.1f}"));
}

// --- mesh -----------------------------------------------------------------

void bench_mesh(double budget_s) {
  brook::sim::WorldOptions options;
  options.buggify = brook::sim::BuggifyMode::kOff;
  options.network.latency.min = 50us;
  options.network.latency.jitter = 100us;
  brook::sim::World world(3, options);
  for (int i = 0; i < 5; ++i) world.add_node();
  brook::sim::MeshStats stats;
  brook::sim::MeshOptions mesh;
  mesh.message_bytes = 1024;
  mesh.interval = 1ms;
  brook::sim::start_mesh(world, mesh, &stats);
  world.run_for(10ms);  // connections established
  const uint64_t messages = stats.messages_received;
  const uint64_t events = world.events_run();
  const Duration sim_start = world.elapsed();
  const Timer timer;
  while (timer.wall() < budget_s) world.run_for(100ms);
  const double simulated = sim_seconds(world.elapsed() - sim_start);
  const double received = static_cast<double>(stats.messages_received - messages);
  fmt::print(
      "mesh-1KiB: {} simulated/real (5 nodes, 20 connections, 1 KiB every 1 ms each, latency "
      "50us+U[0,100us]; {:.0f} messages per simulated s; {} M messages/s; {} M events/s; "
      "violations {})\n",
      rates(simulated, timer, 1, "{:.0f}x"), received / simulated,
      rates(received, timer, 1e6, "{:.2f}"),
      rates(static_cast<double>(world.events_run() - events), timer, 1e6, "{:.1f}"),
      stats.violations.size());
}

// --- demo -----------------------------------------------------------------

void bench_demo(uint64_t seeds) {
  double simulated = 0;
  uint64_t events = 0;
  uint64_t failed = 0;
  const Timer timer;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    brook::sim::ScenarioOptions options;
    options.seed = seed;
    auto result = brook::sim::run_scenario(options);
    if (!result.ok() || !result->passed) ++failed;
    if (!result.ok()) continue;
    simulated += sim_seconds(result->simulated);
    events += result->events;
  }
  fmt::print(
      "demo: {} seeds/s, {} simulated/real ({} seeds, {:.0f} simulated s, {} M events/s, "
      "{} failed)\n",
      rates(static_cast<double>(seeds), timer, 1, "{:.2f}"), rates(simulated, timer, 1, "{:.0f}x"),
      seeds, simulated, rates(static_cast<double>(events), timer, 1e6, "{:.2f}"), failed);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::vector<std::string_view> only;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else {
      only.push_back(arg);
    }
  }
  auto wanted = [&](std::string_view name) {
    return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
  };
  const double budget = quick ? 0.2 : 2.0;
  if (wanted("queue")) bench_queue(budget);
  if (wanted("world")) bench_world(budget);
  if (wanted("idle")) bench_idle(budget);
  if (wanted("mesh")) bench_mesh(budget);
  if (wanted("demo")) bench_demo(quick ? 3 : 30);
  return g_sink == 1 ? 1 : 0;  // keeps the callbacks' side effect alive
}
