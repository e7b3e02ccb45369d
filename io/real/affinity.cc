// io/real/affinity.cc
#include "io/real/affinity.h"

#include <sched.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

namespace brook::io::real {

absl::StatusOr<int> parse_cpu(std::string_view text) {
  int cpu = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), cpu);
  if (text.empty() || text.front() == '-' || ec != std::errc() ||
      end != text.data() + text.size() || cpu < 0 || cpu >= CPU_SETSIZE) {
    return absl::InvalidArgumentError(fmt::format("not a CPU number: '{}'", text));
  }
  return cpu;
}

absl::Status pin_to_cpu(std::string_view text) {
  const absl::StatusOr<int> cpu = parse_cpu(text);
  if (!cpu.ok()) return cpu.status();
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(*cpu, &set);
  if (::sched_setaffinity(0, sizeof(set), &set) != 0) {
    const int err = errno;
    return absl::InvalidArgumentError(
        fmt::format("cannot pin to CPU {}: sched_setaffinity: {}", *cpu, std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace brook::io::real
