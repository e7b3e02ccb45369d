// io/log.cc
#include "io/log.h"

#include <cstdio>

namespace brook::io {
namespace {

class StderrSink final : public LogSink {
 public:
  void write(LogLevel, std::string_view line) override {
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fputc('\n', stderr);
  }
};

class NullSink final : public LogSink {
 public:
  void write(LogLevel, std::string_view) override {}
};

constexpr char kLevelLetters[] = {'D', 'I', 'W', 'E'};

}  // namespace

LogSink& stderr_log_sink() {
  static StderrSink sink;  // stateless
  return sink;
}

LogSink& null_log_sink() {
  static NullSink sink;  // stateless
  return sink;
}

void Logger::write(LogLevel level, std::string_view message) {
  const int64_t mono_ns = to_ns(clock_->now());
  const int64_t wall_ms = to_ms(clock_->wall_now());
  std::string line = fmt::format("{} {}.{:09d} wall={} node={} {}",
                                 kLevelLetters[static_cast<int>(level)], mono_ns / 1000000000,
                                 mono_ns % 1000000000, wall_ms, node_id_, message);
  sink_->write(level, line);
}

}  // namespace brook::io
