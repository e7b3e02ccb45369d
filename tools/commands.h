// tools/commands.h
//
// The subcommands of the `brook` binary. Each takes the arguments after its
// own name and returns the process exit code.
#pragma once

#include <span>
#include <string_view>

namespace brook::tools {

using Args = std::span<const std::string_view>;

// brook sim --seed N | --seeds A..B [--trace FILE] [--scenario NAME]
int sim_main(Args args);
// brook bench net|file ... (real-backend benchmarks)
int bench_main(Args args);
// brook controller --node-id N --controller-quorum-voters ... --data-dir D
int controller_main(Args args);

}  // namespace brook::tools
