// sim/scenario.cc
#include "sim/scenario.h"

#include <fmt/format.h>

#include <algorithm>
#include <fmt/ranges.h>

#include "sim/broker.h"
#include "sim/demo.h"
#include "sim/groups.h"
#include "sim/kraft.h"
#include "sim/transactions.h"

namespace brook::sim {

std::vector<std::string> scenario_names() {
  return {"demo",
          "broker",
          "broker-mutant-flush",
          "replication",
          "replication-mutant-flush",
          "replication-loss",
          "groups",
          "groups-mutant-fence",
          "groups-loss",
          "consumer-groups",
          "consumer-groups-loss",
          "consumer-groups-mutant-fence",
          "mixed-groups",
          "transactions",
          "transactions-mutant-markers",
          "transactions-late",
          "transactions-late-mutant-unverified",
          "transactions-loss",
          "controller",
          "controller-mutant-commit",
          "controller-loss",
          "kraft",
          "kraft-loss",
          "kraft-harsh",
          "kraft-mutant-flush",
          "kraft-mutant-vote",
          "kraft-reconfig",
          "kraft-reconfig-harsh",
          "kraft-reconfig-mutant-concurrent"};
}

WorldOptions scenario_world_options(const ScenarioOptions& options, const NetworkOptions& network) {
  WorldOptions o;
  o.scenario = options.name;
  o.network = network;
  o.trace = options.trace;
  o.log_sink = options.log_sink;
  o.log_level = options.log_level;
  return o;
}

void print_run_start(const ScenarioOptions& options, const World& world, const std::string& described) {
  if (options.out == nullptr) return;
  fmt::print(options.out, "brook sim: scenario={} seed={}\n{}\nbuggify: {}\n", options.name, options.seed, described,
             world.buggify().enabled() ? "on" : "off");
}

absl::StatusOr<ScenarioResult> run_scenario(const ScenarioOptions& options) {
  if (options.name == "demo") return run_demo(options);
  if (options.name == "broker" || options.name == "broker-mutant-flush" || options.name == "replication" ||
      options.name == "replication-mutant-flush" || options.name == "replication-loss") {
    return run_broker(options);
  }
  if (options.name == "groups" || options.name == "groups-mutant-fence" || options.name == "consumer-groups" ||
      options.name == "consumer-groups-mutant-fence" || options.name == "mixed-groups" ||
      options.name == "groups-loss" || options.name == "consumer-groups-loss") {
    return run_groups(options);
  }
  if (options.name.starts_with("transactions")) {
    auto names = scenario_names();
    if (std::find(names.begin(), names.end(), options.name) != names.end()) return run_transactions(options);
  }
  if (options.name.starts_with("kraft") || options.name.starts_with("controller")) {
    auto names = scenario_names();
    if (std::find(names.begin(), names.end(), options.name) != names.end()) return run_kraft(options);
  }
  return absl::NotFoundError(
      fmt::format("unknown scenario '{}' (known: {})", options.name, fmt::join(scenario_names(), ", ")));
}

}  // namespace brook::sim
