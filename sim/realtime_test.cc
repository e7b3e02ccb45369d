// sim/realtime_test.cc
//
// Proves that no logic code reads real time or real randomness during a
// simulation. This test binary defines clock_gettime, gettimeofday, time and
// getrandom itself, so every call in the process (libstdc++'s
// std::chrono clocks included) lands here. Outside a running World each
// forwards to the kernel; while a World runs, each call is recorded as a
// violation. The tests first show the detector catches a node task that
// reads std::chrono::steady_clock, then that full simulations record none.
#include <gtest/gtest.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>

#include "sim/mesh.h"
#include "sim/scenario.h"
#include "sim/world.h"

namespace {

// Plain counters: the hooks must not allocate or lock.
uint64_t g_violations = 0;
uint64_t g_forwarded = 0;

bool in_simulation() { return brook::sim::World::running() != nullptr; }

void note_call() {
  if (in_simulation()) {
    ++g_violations;
  } else {
    ++g_forwarded;
  }
}

}  // namespace

extern "C" {

int clock_gettime(clockid_t clock, struct timespec* tp) noexcept {
  note_call();
  return static_cast<int>(syscall(SYS_clock_gettime, clock, tp));
}

int gettimeofday(struct timeval* __restrict tv, void* __restrict tz) noexcept {
  note_call();
  return static_cast<int>(syscall(SYS_gettimeofday, tv, tz));
}

time_t time(time_t* out) noexcept {
  note_call();
  struct timespec ts {};
  syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
  if (out != nullptr) *out = ts.tv_sec;
  return ts.tv_sec;
}

ssize_t getrandom(void* buffer, size_t length, unsigned int flags) {
  note_call();
  return static_cast<ssize_t>(syscall(SYS_getrandom, buffer, length, flags));
}

}  // extern "C"

namespace brook::sim {
namespace {

using namespace std::chrono_literals;

io::Task<void> reads_real_time(io::Context* ctx) {
  co_await ctx->clock().sleep_for(1s);
  const auto t = std::chrono::steady_clock::now();  // the bug the detector must catch
  (void)t;
}

// The detector works: outside a simulation calls are forwarded (and
// counted as such); a node task reading std::chrono::steady_clock during a
// run is caught, as are time(), gettimeofday() and getrandom().
TEST(RealTime, DetectorCatchesALeak) {
  const uint64_t forwarded = g_forwarded;
  const auto outside = std::chrono::steady_clock::now();
  EXPECT_GT(outside.time_since_epoch().count(), 0);
  EXPECT_GT(g_forwarded, forwarded);
  g_violations = 0;

  World world(1);
  world.add_node().start([](io::Context& ctx) { return reads_real_time(&ctx); });
  world.run_until_idle();
  EXPECT_EQ(g_violations, 1u);

  World other(2);
  other.add_node();
  other.schedule(1ms, [] {
    (void)::time(nullptr);
    struct timeval tv {};
    (void)::gettimeofday(&tv, nullptr);
    char bytes[4];
    (void)::getrandom(bytes, sizeof bytes, 0);
    (void)std::chrono::system_clock::now();
  });
  other.run_until_idle();
  EXPECT_EQ(g_violations, 5u);
}

// A full demo run (crashes, partitions, disks, timers, buggify) reads no
// real time and no real randomness.
TEST(RealTime, DemoRunRecordsNoViolation) {
  g_violations = 0;
  for (uint64_t seed : {1, 2, 3}) {
    ScenarioOptions options;
    options.seed = seed;
    auto result = run_scenario(options);
    ASSERT_TRUE(result.ok());
    EXPECT_GT(result->events, 10'000u);
  }
  EXPECT_EQ(g_violations, 0u);
}

// Nor does network-heavy mesh traffic.
TEST(RealTime, MeshRunRecordsNoViolation) {
  g_violations = 0;
  World world(3);
  for (int i = 0; i < 4; ++i) world.add_node();
  MeshStats stats;
  start_mesh(world, MeshOptions{}, &stats);
  world.run_for(1s);
  EXPECT_GT(stats.messages_received, 1000u);
  EXPECT_EQ(g_violations, 0u);
}

}  // namespace
}  // namespace brook::sim
