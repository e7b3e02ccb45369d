// sim/kraft_test.cc
//
// The kraft scenario's own guarantees: a seed replays to the same trace,
// and the checkers fail the deliberately broken replicas (a checker that
// cannot fail proves nothing). The long sweep of the healthy quorum is a
// ctest of its own (sim_kraft_sweep).
#include <gtest/gtest.h>

#include <string>

#include "sim/kraft.h"
#include "sim/scenario.h"

namespace brook::sim {
namespace {

// The long mutant searches prove the checkers' logic, which the release
// build's run of this test already does; the sanitizer build would repeat
// them several times slower, so it runs only the short ones.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

ScenarioResult run(const std::string& name, uint64_t seed) {
  ScenarioOptions options;
  options.name = name;
  options.seed = seed;
  absl::StatusOr<ScenarioResult> result = run_scenario(options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : ScenarioResult{};
}

TEST(KraftScenario, SameSeedSameTrace) {
  for (uint64_t seed : {3u, 11u}) {
    const ScenarioResult a = run("kraft", seed);
    const ScenarioResult b = run("kraft", seed);
    EXPECT_TRUE(a.passed) << a.summary << "\n" << (a.failures.empty() ? "" : a.failures[0]);
    EXPECT_EQ(a.trace_hash, b.trace_hash) << "seed " << seed;
    EXPECT_EQ(a.events, b.events);
    EXPECT_EQ(a.summary, b.summary);
    EXPECT_EQ(a.replay_command, "brook sim --seed " + std::to_string(seed) + " --scenario kraft");
  }
}

// The first failing seed of a mutant within `seeds`, and what failed.
std::pair<uint64_t, std::string> first_failure(const std::string& name, uint64_t seeds) {
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const ScenarioResult r = run(name, seed);
    if (!r.passed) return {seed, r.failures.empty() ? "" : r.failures[0]};
  }
  return {0, ""};
}

// Followers that report offsets before flushing them: committed entries
// vanish in the final power loss.
TEST(KraftScenario, CatchesAcknowledgingBeforeFlush) {
  const auto [seed, failure] = first_failure("kraft-mutant-flush", 50);
  ASSERT_NE(seed, 0u) << "no seed of 50 caught the mutant";
  EXPECT_TRUE(failure.starts_with("agreement") || failure.starts_with("durability") ||
              failure.starts_with("committed entry changed"))
      << failure;
}

// Voters that forget their votes in a crash vote twice in one epoch.
TEST(KraftScenario, CatchesUnpersistedVotes) {
  if (kSanitized) GTEST_SKIP() << "a long mutant search; run by the release build";
  const auto [seed, failure] = first_failure("kraft-mutant-vote", 1000);
  ASSERT_NE(seed, 0u) << "no seed of 1000 caught the mutant";
  EXPECT_TRUE(failure.starts_with("vote safety") || failure.starts_with("election safety"))
      << failure;
}

// The first seed of `name` within `seeds` with a failure starting with
// `prefix`.
uint64_t first_failure_with(const std::string& name, uint64_t seeds, std::string_view prefix) {
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const ScenarioResult r = run(name, seed);
    for (const std::string& f : r.failures) {
      if (f.starts_with(prefix)) return seed;
    }
  }
  return 0;
}

// The leader loses power and stays down: the voters elect another, and an
// observer (a broker, in a cluster) that followed the old leader finds the
// new one by asking the other voters, as Kafka's observers do once their
// leader stops answering, and sees its writes commit.
TEST(KraftFailover, ObserversFindTheNextLeaderWhenTheLeaderStaysDown) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    absl::StatusOr<io::Duration> took = simulated_failover(seed, 3, 2);
    ASSERT_TRUE(took.ok()) << "seed " << seed << ": " << took.status();
    // Fetch timeout 2 s, election timeout 1 s: a new leader and the
    // observers' next fetch well within 10 s.
    EXPECT_LT(*took, std::chrono::seconds(10)) << "seed " << seed;
  }
}

// A dynamic quorum grown from one node and reshaped under faults replays
// to the same trace, and changes its voters.
TEST(ReconfigScenario, SameSeedSameTrace) {
  const ScenarioResult a = run("kraft-reconfig", 4);
  const ScenarioResult b = run("kraft-reconfig", 4);
  EXPECT_TRUE(a.passed) << a.summary << "\n" << (a.failures.empty() ? "" : a.failures[0]);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.summary, b.summary);
  EXPECT_TRUE(a.summary.starts_with("reconfig:")) << a.summary;
  EXPECT_EQ(a.summary.find("added=0 "), std::string::npos) << a.summary;
  EXPECT_EQ(a.replay_command, "brook sim --seed 4 --scenario kraft-reconfig");
}

// A leader that lets a second voter change start before the first one
// commits: majorities of the two sets need not overlap, and two leaders
// commit different entries at one offset.
TEST(ReconfigScenario, CatchesConcurrentVoterChanges) {
  if (kSanitized) GTEST_SKIP() << "a long mutant search; run by the release build";
  const auto [seed, failure] = first_failure("kraft-reconfig-mutant-concurrent", 120);
  ASSERT_NE(seed, 0u) << "no seed of 120 caught the mutant";
  EXPECT_TRUE(failure.starts_with("committed entry changed") || failure.starts_with("election safety") ||
              failure.starts_with("durability") || failure.starts_with("agreement"))
      << failure;
}

TEST(ControllerScenario, SameSeedSameTrace) {
  for (uint64_t seed : {2u, 7u}) {
    const ScenarioResult a = run("controller", seed);
    const ScenarioResult b = run("controller", seed);
    EXPECT_TRUE(a.passed) << a.summary << "\n" << (a.failures.empty() ? "" : a.failures[0]);
    EXPECT_EQ(a.trace_hash, b.trace_hash) << "seed " << seed;
    EXPECT_EQ(a.summary, b.summary);
    EXPECT_EQ(a.replay_command, "brook sim --seed " + std::to_string(seed) + " --scenario controller");
  }
}

// A controller that answers writes before they commit: an answer outlives
// a leadership change that drops the write, so an acknowledged write goes
// missing, and the next controller hands out the same producer ids again.
TEST(ControllerScenario, CatchesAnsweringBeforeCommit) {
  if (kSanitized) GTEST_SKIP() << "a long mutant search; run by the release build";
  EXPECT_NE(first_failure_with("controller-mutant-commit", 50, "acknowledged write"), 0u);
  EXPECT_NE(first_failure_with("controller-mutant-commit", 100, "producer ids"), 0u);
}

}  // namespace
}  // namespace brook::sim
