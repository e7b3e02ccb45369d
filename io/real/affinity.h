// io/real/affinity.h
//
// CPU affinity for the benchmark programs, which pin a process to one CPU
// (thread-per-core, as a production shard would run) before it starts
// threads: those inherit the pin, as do io_uring's io-wq workers, which carry
// buffered file writes.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace brook::io::real {

// A CPU number as a command line gives it: decimal digits only, below the
// kernel's CPU_SETSIZE. InvalidArgument otherwise.
absl::StatusOr<int> parse_cpu(std::string_view text);

// Pins the calling thread, and so the threads it starts afterwards, to `cpu`
// (parsed as parse_cpu does). InvalidArgument for a bad number or a CPU this
// process may not run on.
absl::Status pin_to_cpu(std::string_view cpu);

}  // namespace brook::io::real
