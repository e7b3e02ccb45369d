// sim/world_test.cc
//
// Tests of the World: virtual time, per-node clocks, crash and restart,
// dropped events of dead incarnations, the trace hash, buggify, the replay
// context and the fault schedule's full disks. Each test states what it
// proves.
#include "sim/world.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "io/scope.h"
#include "io/status.h"
#include "sim/faults.h"

namespace brook::sim {
namespace {

using namespace std::chrono_literals;

io::Task<void> sleep_then_mark(io::Context* ctx, io::Duration d, bool* done) {
  co_await ctx->clock().sleep_for(d);
  *done = true;
}

// Virtual time jumps to the next event: an hour-long sleep completes at once
// in wall terms and leaves the world clock exactly an hour later.
TEST(World, VirtualTimeJumpsToTheNextEvent) {
  World world(1);
  Node& node = world.add_node();
  bool done = false;
  node.start([&](io::Context& ctx) { return sleep_then_mark(&ctx, 1h, &done); });
  world.run_until_idle();
  EXPECT_TRUE(done);
  EXPECT_TRUE(node.main_done());
  EXPECT_EQ(world.elapsed(), io::Duration(1h));
}

io::Task<void> random_sleeps(io::Context* ctx, int count) {
  for (int i = 0; i < count; ++i) {
    co_await ctx->clock().sleep_for(io::Duration(ctx->random().uniform_range(1, 1'000'000)));
  }
}

uint64_t random_sleeps_hash(uint64_t seed) {
  World world(seed);
  for (int i = 0; i < 3; ++i) {
    world.add_node().start([](io::Context& ctx) { return random_sleeps(&ctx, 100); });
  }
  world.run_until_idle();
  return world.trace_hash();
}

// The trace hash is a pure function of the seed: equal for equal seeds,
// different for different ones.
TEST(World, TraceHashIsAFunctionOfTheSeed) {
  EXPECT_EQ(random_sleeps_hash(7), random_sleeps_hash(7));
  EXPECT_NE(random_sleeps_hash(7), random_sleeps_hash(8));
}

struct Guard {
  int* destroyed;
  ~Guard() { ++*destroyed; }
};

io::Task<void> guarded_forever(io::Context* ctx, int* started, int* destroyed) {
  Guard guard{destroyed};
  ++*started;
  for (;;) co_await ctx->clock().sleep_for(1s);
}

// crash() destroys every task of the node (their RAII guards run) and
// restart() runs the main task again.
TEST(World, CrashDestroysTasksAndRestartRunsMainAgain) {
  World world(2);
  Node& node = world.add_node();
  int started = 0;
  int destroyed = 0;
  node.start([&](io::Context& ctx) { return guarded_forever(&ctx, &started, &destroyed); });
  world.run_for(10s);
  EXPECT_EQ(started, 1);
  EXPECT_EQ(destroyed, 0);
  node.crash();
  EXPECT_FALSE(node.up());
  EXPECT_EQ(destroyed, 1);
  world.run_for(10s);
  EXPECT_EQ(started, 1);
  node.restart();
  world.run_for(10s);
  EXPECT_EQ(started, 2);
  EXPECT_EQ(node.incarnation(), 2u);
  EXPECT_EQ(node.crashes(), 1u);
}

struct RawEvent {
  int* ran;
  static void fire(void* arg) { ++*static_cast<RawEvent*>(arg)->ran; }
};

io::Task<void> schedule_raw(io::Context* ctx, RawEvent* event) {
  // A callback no awaiter owns: nothing cancels it at a crash.
  ctx->executor().call_at(ctx->clock().now() + 5s, io::Callback{&RawEvent::fire, event});
  ctx->executor().post(io::Callback{&RawEvent::fire, event});
  co_await ctx->clock().sleep_for(1h);
}

// An event of a dead incarnation is dropped, never run, even when nothing
// cancelled it.
TEST(World, EventsOfADeadIncarnationNeverRun) {
  World world(3);
  Node& node = world.add_node();
  int ran = 0;
  RawEvent event{&ran};
  node.start([&](io::Context& ctx) { return schedule_raw(&ctx, &event); });
  // Run the main task's first step only: it schedules both raw events.
  world.run_until([&] { return world.events_run() >= 1; });
  EXPECT_EQ(ran, 0);
  node.crash();
  world.run_for(1min);
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(world.events_dropped(), 2u);
}

io::Task<void> crash_myself(io::Context* ctx, Node* self, int* after) {
  co_await ctx->clock().sleep_for(1s);
  self->crash();  // deferred: a task cannot destroy its own frame
  ++*after;
  co_await ctx->clock().sleep_for(1s);
  ++*after;
}

// A node may crash itself from one of its own tasks: the crash is deferred to
// a world event, so the running frame is not destroyed under its feet.
TEST(World, ANodeCanCrashItself) {
  World world(4);
  Node& node = world.add_node();
  int after = 0;
  node.start([&](io::Context& ctx) { return crash_myself(&ctx, &node, &after); });
  world.run_for(10s);
  EXPECT_FALSE(node.up());
  EXPECT_EQ(after, 1);
}

io::Task<void> write_then_sync(io::Context* ctx, bool sync) {
  auto file = co_await ctx->disk().open("data", io::OpenMode::kCreate);
  BROOK_ASSERT(file.ok());
  BROOK_ASSERT((co_await (*file)->append(io::BufferChain(io::Buffer::copy_of("durable")))).ok());
  if (sync) BROOK_ASSERT((co_await (*file)->datasync()).ok());
  BROOK_ASSERT((co_await ctx->disk().sync_dir("")).ok());
  co_await ctx->clock().sleep_for(1h);
}

io::Task<void> read_back(io::Context* ctx, std::string* out) {
  auto file = co_await ctx->disk().open("data", io::OpenMode::kReadOnly);
  if (!file.ok()) co_return;
  auto bytes = co_await (*file)->read_at(0, 100);
  if (bytes.ok()) *out = std::string(bytes->view());
}

// restart() runs on the surviving disk: synced bytes are there after a crash.
TEST(World, RestartKeepsSyncedData) {
  World world(5);
  Node& node = world.add_node();
  node.start([](io::Context& ctx) { return write_then_sync(&ctx, true); });
  world.run_for(1s);
  node.crash();
  std::string got;
  node.start([&](io::Context& ctx) { return read_back(&ctx, &got); });
  world.run_for(1s);
  EXPECT_EQ(got, "durable");
}

// Appends 1 KiB to a file every 10 ms, noting each ENOSPC, each write that
// went through after one before `after` (virtual time: the fill ended on its
// own), and each write that went through after `after`.
struct FullDiskTally {
  int no_space = 0;
  int other_errors = 0;
  int recovered = 0;
  int written_after = 0;
};
io::Task<void> keep_appending(io::Context* ctx, World* world, io::Duration after, FullDiskTally* tally) {
  auto file = co_await ctx->disk().open("data", io::OpenMode::kCreate);
  BROOK_ASSERT(file.ok());
  bool full = false;
  while (true) {
    const absl::Status s = co_await (*file)->append(io::BufferChain(io::Buffer::allocate(1024)));
    if (absl::IsResourceExhausted(s)) {
      ++tally->no_space;
      full = true;
    } else if (!s.ok()) {
      ++tally->other_errors;
    } else if (world->elapsed() > after) {
      ++tally->written_after;
    } else if (full) {
      ++tally->recovered;
      full = false;
    }
    co_await ctx->clock().sleep_for(10ms);
  }
}

// Looks at its own node's disk every 10 ms, writing nothing (a workload
// client), and counts the looks that found it full.
io::Task<void> watch_own_disk(io::Context* ctx, World* world, int self, int* found_full) {
  while (true) {
    if (world->node(self).disk().faults().capacity_bytes != UINT64_MAX) ++*found_full;
    co_await ctx->clock().sleep_for(10ms);
  }
}

// The full-disk fault class: only disks that hold something fill up; while
// a node's disk is full its writes fail with ENOSPC (and nothing else does);
// each fill ends on its own, and stop() gives every disk its space back.
TEST(FaultSchedule, FullDisksFailWritesUntilTheSpaceComesBack) {
  World world(11);
  FaultConfig config;
  config.full_disk_interval = 1s;
  config.full_disk_duration_max = 2s;
  config.full_disk_headroom_max = 4096;
  std::vector<FullDiskTally> tallies(2);
  for (FullDiskTally& tally : tallies) {
    world.add_node().start([&](io::Context& ctx) { return keep_appending(&ctx, &world, 29s, &tally); });
  }
  int client_found_full = 0;
  world.add_node().start([&](io::Context& ctx) { return watch_own_disk(&ctx, &world, 2, &client_found_full); });
  FaultSchedule schedule(world, config);
  schedule.start();
  world.run_for(29s);
  schedule.stop();
  world.run_for(2s);
  EXPECT_GE(schedule.full_disks, 10u);
  EXPECT_EQ(client_found_full, 0);  // every fill landed on a disk with data
  for (int i = 0; i < 2; ++i) {
    EXPECT_GT(tallies[i].no_space, 0) << "node " << i;
    EXPECT_EQ(tallies[i].other_errors, 0) << "node " << i;
    // Fills last at most 2 s, so most end well before stop().
    EXPECT_GE(tallies[i].recovered, 3) << "node " << i;
    EXPECT_GE(tallies[i].written_after, 190) << "node " << i;  // every write once the space is back
    EXPECT_EQ(world.node(i).disk().faults().capacity_bytes, UINT64_MAX);
  }
}

io::Task<void> idle_forever(io::Context* ctx) {
  while (true) co_await ctx->clock().sleep_for(1s);
}

// The loss of a node for good: not before node_loss_after, only once the
// scenario names a node it can spare, and then no crash restart, revival
// or stop() brings that node back, while the others keep crashing and
// coming back. (Node 1 is named while it is down from a crash, its
// restart pending: that restart must not happen either.)
TEST(FaultSchedule, ALostNodeNeverComesBack) {
  World world(12);
  FaultConfig config;
  config.crash_interval = 1s;
  config.restart_delay_max = 500ms;
  config.crash_all_probability = 0.3;
  config.node_loss_after = 5s;
  for (int i = 0; i < 3; ++i) world.add_node().start([](io::Context& ctx) { return idle_forever(&ctx); });
  FaultSchedule schedule(world, config);
  int asked = 0;
  int64_t asked_first_ns = -1;
  uint32_t crashes_at_loss = 0;
  schedule.pick_lost = [&]() -> std::optional<int> {
    if (asked++ == 0) asked_first_ns = world.now_ns();
    if (asked < 4 || world.node(1).up()) return std::nullopt;  // not yet: asked again 500 ms on
    crashes_at_loss = world.node(1).crashes();
    return 1;
  };
  schedule.start();
  world.run_for(30s);
  EXPECT_EQ(asked_first_ns, io::to_ns(5s));
  EXPECT_GE(asked, 4);
  EXPECT_TRUE(schedule.lost(1));
  EXPECT_FALSE(schedule.lost(0));
  const uint64_t crashes_before_stop = world.node(0).crashes() + world.node(2).crashes();
  EXPECT_GE(crashes_before_stop, 10u);
  schedule.stop();
  world.run_for(10s);
  EXPECT_FALSE(world.node(1).up());
  EXPECT_EQ(world.node(1).crashes(), crashes_at_loss);
  EXPECT_TRUE(world.node(0).up());
  EXPECT_TRUE(world.node(2).up());
  EXPECT_NE(schedule.counters().find("lost=node 2"), std::string::npos) << schedule.counters();
}

io::Task<void> sample_clock(io::Context* ctx, std::vector<int64_t>* early) {
  for (int i = 0; i < 1000; ++i) {
    const io::Duration d(ctx->random().uniform_range(1, 10'000'000));
    const io::Instant deadline = ctx->clock().now() + d;
    co_await ctx->clock().sleep_until(deadline);
    if (ctx->clock().now() < deadline) early->push_back(io::to_ns(deadline - ctx->clock().now()));
  }
}

// Drift makes a node's monotonic clock run fast or slow against virtual time
// by the given ppm, and timers never fire before their deadline on it.
TEST(World, DriftSkewsTheClockAndTimersNeverFireEarly) {
  for (int64_t ppm : {-250, 0, 173, 5000}) {
    World world(6);
    NodeOptions options;
    options.drift_ppm = ppm;
    options.monotonic_offset = 100s;
    Node& node = world.add_node(options);
    std::vector<int64_t> early;
    node.start([&](io::Context& ctx) { return sample_clock(&ctx, &early); });
    world.run_until_idle();
    EXPECT_TRUE(early.empty()) << "ppm " << ppm << ": " << early.size() << " early wake-ups";
    const int64_t global = world.now_ns();
    const int64_t local = io::to_ns(node.clock().now()) - 100'000'000'000;
    EXPECT_NEAR(static_cast<double>(local - global), static_cast<double>(global) * ppm / 1e6, 2.0)
        << "ppm " << ppm;
  }
}

// A wall-clock jump moves wall_now() (also backwards) and leaves the
// monotonic clock alone.
TEST(World, WallJumpsLeaveMonotonicTimeAlone) {
  World world(7);
  NodeOptions options;
  options.wall_offset = 3s;
  Node& node = world.add_node(options);
  const io::Instant mono = node.clock().now();
  const io::WallTime wall = node.clock().wall_now();
  EXPECT_EQ(io::to_ms(wall), world.options().wall_epoch_ns / 1'000'000 + 3000);
  node.jump_wall_clock(-10s);
  EXPECT_EQ(node.clock().now(), mono);
  EXPECT_EQ(node.clock().wall_now() - wall, io::Duration(-10s));
}

// Buggify follows FoundationDB's rule: a quarter of the points are active
// in a run, active ones fire about a quarter of the time, decisions repeat
// for a seed, and kOff never fires.
TEST(Buggify, ActivatesAQuarterOfPointsAndFiresAQuarterOfCalls) {
  auto sample = [](uint64_t seed, BuggifyMode mode) {
    WorldOptions options;
    options.buggify = mode;
    World world(seed, options);
    std::vector<int> fired;
    for (int p = 0; p < 2000; ++p) {
      int n = 0;
      for (int call = 0; call < 40; ++call) n += world.buggify().fire(fmt::format("p{}", p));
      fired.push_back(n);
    }
    return fired;
  };
  const std::vector<int> a = sample(11, BuggifyMode::kOn);
  EXPECT_EQ(a, sample(11, BuggifyMode::kOn));
  int active = 0;
  int fires = 0;
  for (int n : a) {
    active += n > 0;
    fires += n;
  }
  EXPECT_NEAR(active / 2000.0, 0.25, 0.04);
  EXPECT_NEAR(fires / (active * 40.0), 0.25, 0.03);
  for (int n : sample(11, BuggifyMode::kOff)) EXPECT_EQ(n, 0);
}

// kSeeded switches buggify off entirely for about a fifth of seeds.
TEST(Buggify, SeededModeIsOffForSomeSeeds) {
  int on = 0;
  for (uint64_t seed = 0; seed < 1000; ++seed) on += World(seed).buggify().enabled();
  EXPECT_NEAR(on / 1000.0, kBuggifySeededOnRatio, 0.05);
}

io::Task<void> read_assert_context(std::string* text, bool* running) {
  *text = io::AssertContext::current() != nullptr ? io::AssertContext::current()->text() : "";
  *running = World::running() != nullptr;
  co_return;
}

// While the world runs, a failed assertion would print the seed and the
// exact replay command; outside run_*() nothing is installed.
TEST(World, InstallsTheReplayCommandAsAssertContext) {
  WorldOptions options;
  options.scenario = "partition";
  World world(42, options);
  Node& node = world.add_node();
  std::string text;
  bool running = false;
  node.start([&](io::Context&) { return read_assert_context(&text, &running); });
  world.run_until_idle();
  EXPECT_NE(text.find("brook sim --seed 42 --scenario partition"), std::string::npos) << text;
  EXPECT_TRUE(running);
  EXPECT_EQ(World::running(), nullptr);
  EXPECT_EQ(io::AssertContext::current(), nullptr);
}

}  // namespace
}  // namespace brook::sim
