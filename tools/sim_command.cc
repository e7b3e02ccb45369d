// tools/sim_command.cc
//
// `brook sim`: runs seeded simulation scenarios (sim/scenario.h).
//
//   brook sim --seed N [--scenario NAME] [--trace FILE] [--log] [--log-level L]
//       One run: prints the swarm configuration, the verdict, what the run
//       did, and ends with "trace-hash: <16 hex digits>" and
//       "replay: brook sim --seed N".
//   brook sim --seeds A..B [--scenario NAME] [--stop-on-failure] [--log-level L]
//       A sweep of seeds A to B inclusive: one line per seed with its
//       verdict and trace hash, the replay command of each failure, and
//       last "N passed, M failed".
//       --stop-on-failure ends the sweep at its first failing seed.
//   brook sim --list
//       The scenarios' names, one per line.
//
// --log-level debug|info (default info) is the least level of node log line
// formatted: --log prints those lines to stderr, and without --log they are
// formatted and dropped, so a sweep under ASan also checks what debug lines
// read. It does not change a run's events or trace hash.
//
// Exit code: 0 when every run passed, 1 when one failed, 2 on bad usage.
#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "sim/scenario.h"
#include "tools/commands.h"

namespace brook::tools {

namespace {

struct SimArgs {
  std::optional<uint64_t> seed;
  std::optional<std::pair<uint64_t, uint64_t>> seeds;
  std::string scenario = "demo";
  std::string trace_path;
  bool log = false;
  io::LogLevel log_level = io::LogLevel::kInfo;
  bool stop_on_failure = false;
};

void usage() {
  std::fprintf(stderr,
               "usage: brook sim --seed N [--scenario NAME] [--trace FILE] [--log] [--log-level debug|info]\n"
               "       brook sim --seeds A..B [--scenario NAME] [--stop-on-failure] [--log-level debug|info]\n"
               "       brook sim --list\n");
}

std::optional<uint64_t> parse_u64(std::string_view text) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<std::pair<uint64_t, uint64_t>> parse_range(std::string_view text) {
  const size_t dots = text.find("..");
  if (dots == std::string_view::npos) return std::nullopt;
  auto a = parse_u64(text.substr(0, dots));
  auto b = parse_u64(text.substr(dots + 2));
  if (!a || !b || *a > *b) return std::nullopt;
  return std::pair{*a, *b};
}

// Returns false (after printing why) on bad usage.
bool parse_args(Args args, SimArgs& out) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    const bool has_value = i + 1 < args.size();
    if (arg == "--log") {
      out.log = true;
    } else if (arg == "--stop-on-failure") {
      out.stop_on_failure = true;
    } else if (!has_value) {
      std::fprintf(stderr, "brook sim: missing value or unknown option '%.*s'\n",
                   static_cast<int>(arg.size()), arg.data());
      return false;
    } else if (arg == "--seed") {
      out.seed = parse_u64(args[++i]);
      if (!out.seed) return std::fprintf(stderr, "brook sim: bad seed\n"), false;
    } else if (arg == "--seeds") {
      out.seeds = parse_range(args[++i]);
      if (!out.seeds) return std::fprintf(stderr, "brook sim: bad range, expected A..B\n"), false;
    } else if (arg == "--scenario") {
      out.scenario = std::string(args[++i]);
    } else if (arg == "--trace") {
      out.trace_path = std::string(args[++i]);
    } else if (arg == "--log-level") {
      const std::string_view level = args[++i];
      if (level == "debug") {
        out.log_level = io::LogLevel::kDebug;
      } else if (level == "info") {
        out.log_level = io::LogLevel::kInfo;
      } else {
        return std::fprintf(stderr, "brook sim: bad log level, expected debug or info\n"), false;
      }
    } else {
      std::fprintf(stderr, "brook sim: unknown option '%.*s'\n", static_cast<int>(arg.size()),
                   arg.data());
      return false;
    }
  }
  if (out.seed.has_value() == out.seeds.has_value()) {
    std::fprintf(stderr, "brook sim: give exactly one of --seed and --seeds\n");
    return false;
  }
  if (out.seeds && (!out.trace_path.empty() || out.log)) {
    std::fprintf(stderr, "brook sim: --trace and --log need a single --seed\n");
    return false;
  }
  if (out.seed && out.stop_on_failure) {
    std::fprintf(stderr, "brook sim: --stop-on-failure needs --seeds\n");
    return false;
  }
  return true;
}

int run_one(const SimArgs& args) {
  sim::ScenarioOptions options;
  options.name = args.scenario;
  options.seed = *args.seed;
  options.out = stdout;
  if (args.log) options.log_sink = &io::stderr_log_sink();
  options.log_level = args.log_level;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> trace_file(nullptr, &std::fclose);
  std::optional<sim::JsonLinesTraceSink> trace;
  if (!args.trace_path.empty()) {
    trace_file.reset(std::fopen(args.trace_path.c_str(), "w"));
    if (!trace_file) {
      std::fprintf(stderr, "brook sim: cannot write %s\n", args.trace_path.c_str());
      return 2;
    }
    trace.emplace(trace_file.get());
    options.trace = &*trace;
  }
  auto result = sim::run_scenario(options);
  if (!result.ok()) {
    std::fprintf(stderr, "brook sim: %s\n", std::string(result.status().message()).c_str());
    return 2;
  }
  fmt::print("result: {}\n{}\nevents={} simulated={:.3f}s\n", result->passed ? "PASS" : "FAIL",
             result->summary, result->events, static_cast<double>(result->simulated.count()) / 1e9);
  for (const std::string& f : result->failures) fmt::print("failure: {}\n", f);
  fmt::print("trace-hash: {:016x}\nreplay: {}\n", result->trace_hash, result->replay_command);
  std::fflush(stdout);
  return result->passed ? 0 : 1;
}

int run_sweep(const SimArgs& args) {
  uint64_t passed = 0;
  uint64_t failed = 0;
  for (uint64_t seed = args.seeds->first;; ++seed) {
    sim::ScenarioOptions options;
    options.name = args.scenario;
    options.seed = seed;
    options.log_level = args.log_level;
    auto result = sim::run_scenario(options);
    if (!result.ok()) {
      std::fprintf(stderr, "brook sim: %s\n", std::string(result.status().message()).c_str());
      return 2;
    }
    if (result->passed) {
      ++passed;
      fmt::print("seed {}: pass trace-hash={:016x}\n", seed, result->trace_hash);
    } else {
      ++failed;
      fmt::print("seed {}: FAIL trace-hash={:016x} {}\n", seed, result->trace_hash,
                 result->failures.empty() ? "" : result->failures.front());
      for (size_t i = 1; i < result->failures.size(); ++i) fmt::print("  also: {}\n", result->failures[i]);
      fmt::print("  replay: {}\n", result->replay_command);
    }
    std::fflush(stdout);
    if (seed == args.seeds->second || (failed != 0 && args.stop_on_failure)) break;
  }
  fmt::print("{} passed, {} failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace

int sim_main(Args args) {
  if (args.size() == 1 && args[0] == "--list") {
    for (const std::string& name : sim::scenario_names()) std::printf("%s\n", name.c_str());
    return 0;
  }
  SimArgs parsed;
  if (!parse_args(args, parsed)) {
    usage();
    return 2;
  }
  return parsed.seed ? run_one(parsed) : run_sweep(parsed);
}

}  // namespace brook::tools
