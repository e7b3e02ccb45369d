// io/time.h
//
// Time types. Durations and instants carry their unit in the type
// (nanoseconds), so names keep only their qualifier. Instant is a point on a
// node's monotonic clock; WallTime is milliseconds-precision-or-better time
// since the Unix epoch, used only for record timestamps and logs. Neither can
// be read here: only a Clock (io/clock.h) tells the time.
#pragma once

#include <chrono>
#include <cstdint>

namespace brook::io {

using Duration = std::chrono::nanoseconds;

// Tag types: time points on distinct clocks cannot be mixed by accident.
struct MonotonicTag {
  using rep = int64_t;
  using period = std::nano;
  using duration = Duration;
  static constexpr bool is_steady = true;
};
struct WallTag {
  using rep = int64_t;
  using period = std::nano;
  using duration = Duration;
  static constexpr bool is_steady = false;
};

using Instant = std::chrono::time_point<MonotonicTag, Duration>;
using WallTime = std::chrono::time_point<WallTag, Duration>;

inline constexpr int64_t to_ns(Duration d) { return d.count(); }
inline constexpr int64_t to_ns(Instant t) { return t.time_since_epoch().count(); }
inline constexpr int64_t to_ms(WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             t.time_since_epoch())
      .count();
}
inline constexpr Instant instant_from_ns(int64_t ns) { return Instant(Duration(ns)); }

}  // namespace brook::io
