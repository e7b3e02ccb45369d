// sim/demo.cc
//
// The demo scenario's harness: draws the swarm configuration from the seed,
// builds the World, runs the fault schedule during the workload phase, then
// the quiet (liveness) phase, the final power loss and the checks. See
// sim/demo.h for the invariants.
#include "sim/demo.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "io/assert.h"
#include "sim/faults.h"
#include "sim/world.h"

namespace brook::sim {

namespace {

using namespace std::chrono_literals;

constexpr uint16_t kDemoPort = 7000;
constexpr uint64_t kConfigSalt = 0xD3E0C0F16ULL;
constexpr io::Duration kFinalReadLimit = 1min;
constexpr size_t kFailuresMax = 20;

}  // namespace

DemoConfig DemoConfig::draw(uint64_t seed) {
  io::Random r(seed ^ kConfigSalt);
  DemoConfig c;
  c.nodes = 3 + static_cast<int>(r.uniform(3));
  c.append_interval_min = uniform_duration(r, 2ms, 20ms);
  c.append_interval_max = c.append_interval_min * r.uniform_range(1, 5);
  c.payload_bytes_min = static_cast<size_t>(r.uniform_range(8, 64));
  c.payload_bytes_max = c.payload_bytes_min + static_cast<size_t>(r.uniform_range(0, 1024));
  c.workload = 30s;
  c.quiet_max = 60s;
  c.faults = FaultConfig::draw(r);
  return c;
}

std::string DemoConfig::describe() const {
  return fmt::format(
      "swarm: nodes={} append every {}..{} payload={}..{}B workload={} quiet<={}\n{}", nodes,
      seconds(append_interval_min), seconds(append_interval_max), payload_bytes_min,
      payload_bytes_max, seconds(workload), seconds(quiet_max), faults.describe());
}

namespace {

bool converged(const DemoOracle& oracle, int nodes) {
  for (int n = 0; n < nodes; ++n) {
    for (int o = 0; o < nodes; ++o) {
      if (oracle.held_max[n][o] < oracle.acked_max[o][o]) return false;
    }
  }
  return true;
}

void add_failure(std::vector<std::string>& failures, std::string what) {
  if (failures.size() < kFailuresMax) failures.push_back(std::move(what));
}

// Durability and agreement over the final read-back.
void check_records(const DemoOracle& oracle, int nodes, std::vector<std::string>& failures) {
  std::map<DemoOracle::Key, uint64_t> first_copy;
  for (int n = 0; n < nodes; ++n) {
    if (!oracle.final_read[n]) add_failure(failures, fmt::format("node {}: final read failed", n));
    const auto& final = oracle.final_records[n];
    for (const auto& [key, sum] : oracle.acked[n]) {
      auto it = final.find(key);
      if (it == final.end() || it->second != sum) {
        add_failure(failures, fmt::format("durability: node {} lost synced record ({}, {})", n,
                                          key.first, key.second));
      }
    }
    for (const auto& [key, sum] : final) {
      auto [it, fresh] = first_copy.emplace(key, sum);
      if (!fresh && it->second != sum) {
        add_failure(failures, fmt::format("agreement: copies of record ({}, {}) differ (node {})",
                                          key.first, key.second, n));
      }
    }
  }
}

void check_liveness(const DemoOracle& oracle, int nodes, std::vector<std::string>& failures) {
  for (int n = 0; n < nodes; ++n) {
    for (int o = 0; o < nodes; ++o) {
      const uint64_t due = oracle.acked_max[o][o];
      const auto& final = oracle.final_records[n];
      for (uint64_t s = 1; s <= due; ++s) {
        if (!final.contains({o, s})) {
          add_failure(failures, fmt::format("liveness: node {} never got record ({}, {}) of {}", n,
                                            o, s, due));
          break;
        }
      }
    }
  }
}

std::string summarize(World& world, const DemoOracle& oracle, const FaultSchedule& faults) {
  uint64_t torn = 0;
  uint64_t lost = 0;
  uint64_t disk_errors = 0;
  for (int i = 0; i < world.node_count(); ++i) {
    const DiskStats& s = world.node(i).disk().stats();
    torn += s.torn_writes;
    lost += s.lost_writes;
    disk_errors += s.read_errors + s.write_errors + s.sync_errors + s.metadata_errors;
  }
  const NetworkStats& net = world.network().stats();
  return fmt::format(
      "records appended={} replicated={} connections={} recoveries={} torn-tails={}; "
      "faults: {} disk-errors={} torn-writes={} lost-writes={} net-resets={} hold-timeouts={} "
      "buggify-fired={}",
      oracle.records_appended, oracle.records_replicated, oracle.connections, oracle.recoveries,
      oracle.torn_tails, faults.counters(), disk_errors, torn, lost, net.resets, net.hold_timeouts,
      world.buggify().fired());
}

// Power loss everywhere, then every node reads its log back.
void final_read(World& world, DemoShared& shared, FaultSchedule& faults) {
  faults.finish();
  for (int i = 0; i < world.node_count(); ++i) world.node(i).crash();
  DemoShared* s = &shared;
  for (int i = 0; i < world.node_count(); ++i) {
    world.node(i).start([s](io::Context& ctx) { return demo_check_main(&ctx, s); });
  }
  world.run_until(
      [&] {
        for (int i = 0; i < world.node_count(); ++i) {
          if (!world.node(i).main_done()) return false;
        }
        return true;
      },
      kFinalReadLimit);
}

}  // namespace

absl::StatusOr<ScenarioResult> run_demo(const ScenarioOptions& options) {
  const DemoConfig config = DemoConfig::draw(options.seed);
  const WorldOptions world_options = scenario_world_options(options, config.faults.network);
  World world(options.seed, world_options);
  print_run_start(options, world, config.describe());
  std::vector<io::Address> addresses;
  io::Random node_random(options.seed ^ (kConfigSalt << 1));
  for (int i = 0; i < config.nodes; ++i) {
    addresses.push_back(world.add_node(config.faults.node_options(node_random)).address(kDemoPort));
  }
  DemoShared shared(config, addresses);
  DemoShared* s = &shared;
  for (int i = 0; i < config.nodes; ++i) {
    world.node(i).start([s](io::Context& ctx) { return demo_node_main(&ctx, s); });
  }
  FaultSchedule faults(world, config.faults);
  faults.start();
  world.run_for(config.workload);
  shared.writing = false;
  faults.stop();
  const bool live =
      world.run_until([&] { return converged(shared.oracle, config.nodes); }, config.quiet_max);
  final_read(world, shared, faults);

  ScenarioResult result;
  for (const std::string& v : shared.oracle.violations) add_failure(result.failures, v);
  check_records(shared.oracle, config.nodes, result.failures);
  if (!live) check_liveness(shared.oracle, config.nodes, result.failures);
  if (!live && result.failures.empty()) add_failure(result.failures, "liveness: no convergence");
  result.passed = result.failures.empty();
  result.trace_hash = world.trace_hash();
  result.events = world.events_run();
  result.simulated = world.elapsed();
  result.replay_command = world.replay_command();
  result.summary = summarize(world, shared.oracle, faults);
  return result;
}

}  // namespace brook::sim
