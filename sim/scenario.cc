// sim/scenario.cc
#include "sim/scenario.h"

#include <fmt/format.h>

#include "sim/demo.h"

namespace brook::sim {

std::vector<std::string> scenario_names() { return {"demo"}; }

absl::StatusOr<ScenarioResult> run_scenario(const ScenarioOptions& options) {
  if (options.name == "demo") return run_demo(options);
  return absl::NotFoundError(fmt::format("unknown scenario '{}' (known: demo)", options.name));
}

}  // namespace brook::sim
