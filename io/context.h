// io/context.h
//
// Context: everything effectful a node's logic may touch, handed to it by the
// node (or shard) that owns it. Logic code reaches time, disk, network and
// randomness only through these references; there are no globals. A Context
// outlives every task that uses it.
#pragma once

#include <cstdint>
#include <string_view>

#include "io/clock.h"
#include "io/disk.h"
#include "io/executor.h"
#include "io/log.h"
#include "io/network.h"
#include "io/random.h"

namespace brook::io {

// Decides whether a buggify point fires. Only the simulator provides one.
class Buggify {
 public:
  virtual ~Buggify() = default;
  virtual bool fire(std::string_view point) = 0;
};

struct NodeId {
  int32_t value = -1;
  friend auto operator<=>(NodeId, NodeId) = default;
};

class Context {
 public:
  Context(NodeId node_id, Executor& executor, Clock& clock, Disk& disk, Network& network,
          Random& random, Logger& log, Buggify* buggify = nullptr)
      : node_id_(node_id),
        executor_(&executor),
        clock_(&clock),
        disk_(&disk),
        network_(&network),
        random_(&random),
        log_(&log),
        buggify_(buggify) {}

  NodeId node_id() const { return node_id_; }
  Executor& executor() const { return *executor_; }
  Clock& clock() const { return *clock_; }
  Disk& disk() const { return *disk_; }
  Network& network() const { return *network_; }
  Random& random() const { return *random_; }
  Logger& log() const { return *log_; }

  // True only in simulation, for a per-seed chosen subset of points, with a
  // per-seed probability: lets logic code take rare paths (tiny buffers,
  // forced retries, extra delays) under test. Always false in production.
  bool buggify(std::string_view point) const {
    return buggify_ != nullptr && buggify_->fire(point);
  }

 private:
  NodeId node_id_;
  Executor* executor_;
  Clock* clock_;
  Disk* disk_;
  Network* network_;
  Random* random_;
  Logger* log_;
  Buggify* buggify_;
};

}  // namespace brook::io

template <>
struct fmt::formatter<brook::io::NodeId> : fmt::formatter<int32_t> {
  auto format(brook::io::NodeId id, format_context& ctx) const {
    return fmt::formatter<int32_t>::format(id.value, ctx);
  }
};
