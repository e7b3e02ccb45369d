// io/log.h
//
// Logging through fmt. Each line carries the node's monotonic time, its wall
// time and its node id, so interleaved logs of a simulated cluster read in
// order. Lines go to a LogSink: stderr in production, a buffer or nothing in
// simulation (where the event trace is the primary record).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "io/clock.h"

namespace brook::io {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void write(LogLevel level, std::string_view line) = 0;
};

// Writes lines to standard error.
LogSink& stderr_log_sink();
// Drops every line.
LogSink& null_log_sink();

class Logger {
 public:
  Logger(int32_t node_id, const Clock& clock, LogSink& sink, LogLevel level_min = LogLevel::kInfo)
      : node_id_(node_id), clock_(&clock), sink_(&sink), level_min_(level_min) {}

  bool enabled(LogLevel level) const { return level >= level_min_; }
  void set_level_min(LogLevel level) { level_min_ = level; }

  template <typename... Args>
  void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
    if (!enabled(level)) return;
    write(level, fmt::format(format, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void debug(fmt::format_string<Args...> f, Args&&... a) { log(LogLevel::kDebug, f, std::forward<Args>(a)...); }
  template <typename... Args>
  void info(fmt::format_string<Args...> f, Args&&... a) { log(LogLevel::kInfo, f, std::forward<Args>(a)...); }
  template <typename... Args>
  void warn(fmt::format_string<Args...> f, Args&&... a) { log(LogLevel::kWarn, f, std::forward<Args>(a)...); }
  template <typename... Args>
  void error(fmt::format_string<Args...> f, Args&&... a) { log(LogLevel::kError, f, std::forward<Args>(a)...); }

 private:
  void write(LogLevel level, std::string_view message);

  int32_t node_id_;
  const Clock* clock_;
  LogSink* sink_;
  LogLevel level_min_;
};

}  // namespace brook::io
