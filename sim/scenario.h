// sim/scenario.h
//
// Named, seeded simulation scenarios: what `brook sim` runs. A scenario
// builds a World from the seed, draws its swarm configuration (cluster
// shape, workload and every fault probability) from the seed, runs the
// workload under the drawn faults, then checks its invariants. The same
// seed gives the same run, the same verdict and the same trace hash.
//
// Scenarios: "demo" (sim/demo.h) — replicated append-only logs under
// crashes, torn writes, partitions, clogs, resets and clock skew; "kraft"
// (sim/kraft.h) — the KRaft controller quorum under the same faults, and
// "kraft-mutant", the same with a deliberately broken replica.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "io/log.h"
#include "io/time.h"
#include "sim/network.h"
#include "sim/trace.h"
#include "sim/world.h"

namespace brook::sim {

struct ScenarioOptions {
  std::string name = "demo";
  uint64_t seed = 1;
  TraceSink* trace = nullptr;       // every event, when set (not owned)
  io::LogSink* log_sink = nullptr;  // node log lines, when set (not owned)
  // The least level of line formatted, whether or not it is kept: at debug,
  // every debug line's arguments are read, so one that reads freed memory
  // shows under ASan.
  io::LogLevel log_level = io::LogLevel::kInfo;
  std::FILE* out = nullptr;         // the swarm configuration and progress; nullptr: silent
};

// A scenario's World options: its name (for the replay command), the drawn
// network faults, and the trace and log settings of `options`.
WorldOptions scenario_world_options(const ScenarioOptions& options, const NetworkOptions& network);

// Prints a run's first lines to options.out, when set: the scenario, the
// seed, the drawn configuration (`described`) and whether buggify is on.
void print_run_start(const ScenarioOptions& options, const World& world, const std::string& described);

struct ScenarioResult {
  bool passed = false;
  std::vector<std::string> failures;  // what the checkers found, first ones first
  uint64_t trace_hash = 0;
  uint64_t events = 0;
  io::Duration simulated{0};
  std::string replay_command;
  std::string summary;  // one line: what the workload and the faults did
};

// The names run_scenario() accepts, sorted.
std::vector<std::string> scenario_names();

// Runs one scenario. NotFound for an unknown name; a failed check is a
// result with passed == false, not an error.
absl::StatusOr<ScenarioResult> run_scenario(const ScenarioOptions& options);

}  // namespace brook::sim
