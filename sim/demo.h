// sim/demo.h
//
// The "demo" scenario: every node keeps an append-only log file of records.
// A node appends its own records (origin = itself, sequence 1, 2, ...) with
// datasync, and only then counts them acknowledged; it streams them to every
// peer over one connection per peer; a peer appends each record it receives
// in sequence order, with datasync, and only then acknowledges it. On
// restart a node recovers its log, truncating a torn tail. Faults are drawn
// per seed (swarm testing) and run until the workload phase ends; then the
// network heals, disk faults stop, every node comes back, and the cluster
// must converge (liveness). Finally every node loses power at once and its
// log is read back.
//
// Invariants checked:
// - durability: every record a node acknowledged as synced is on its disk
//   after the final power loss, byte for byte (by checksum);
// - agreement: all copies of a record (origin, sequence) are identical;
// - order: each log holds each origin's records gap-free from 1;
// - TCP semantics: each connection delivers its frames in order, once,
//   intact (frame numbers and checksums), and never skips a sequence;
// - liveness: after the heal, every node holds every record its origin
//   acknowledged, within the quiet phase.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "io/context.h"
#include "io/network.h"
#include "io/time.h"
#include "sim/disk.h"
#include "sim/faults.h"
#include "sim/network.h"
#include "sim/scenario.h"

namespace brook::sim {

// The swarm configuration of one seed. Interval 0 switches a fault off.
struct DemoConfig {
  int nodes = 3;
  io::Duration append_interval_min{0};
  io::Duration append_interval_max{0};
  size_t payload_bytes_min = 0;
  size_t payload_bytes_max = 0;
  io::Duration workload{0};
  io::Duration quiet_max{0};
  FaultConfig faults;

  static DemoConfig draw(uint64_t seed);
  // Several lines, one per area, for printing at the start of a run.
  std::string describe() const;
};

// Ground truth kept outside the nodes (it survives crashes): what each node
// acknowledged, what the checkers found, and counters for the summary.
struct DemoOracle {
  using Key = std::pair<int, uint64_t>;  // origin, sequence
  explicit DemoOracle(int nodes);

  void acknowledge(int node, int origin, uint64_t seq, uint64_t checksum);
  // A node recovered records of `origin` up to `seq` (durable: they survived
  // a power loss), acknowledged or not.
  void recovered(int node, int origin, uint64_t seq);
  void violation(std::string what);

  std::vector<std::map<Key, uint64_t>> acked;          // per node: record -> checksum
  std::vector<std::vector<uint64_t>> acked_max;        // [node][origin]
  std::vector<std::vector<uint64_t>> held_max;         // [node][origin]: acked or recovered
  std::vector<std::map<Key, uint64_t>> final_records;  // read back at the end
  std::vector<uint64_t> final_torn_bytes;
  std::vector<uint8_t> final_read;      // per node: the final read completed
  std::vector<std::string> violations;  // first kViolationsMax
  uint64_t violation_count = 0;
  uint64_t records_appended = 0;
  uint64_t records_replicated = 0;
  uint64_t connections = 0;
  uint64_t recoveries = 0;
  uint64_t torn_tails = 0;
  uint64_t disk_failures = 0;
};

// What the nodes share with the harness.
struct DemoShared {
  DemoShared(const DemoConfig& config, std::vector<io::Address> addresses)
      : config(config), addresses(std::move(addresses)), oracle(config.nodes) {}
  DemoConfig config;
  std::vector<io::Address> addresses;  // listener of each node
  bool writing = true;                 // the workload phase is on
  DemoOracle oracle;
};

// The node programs (sim/demo_node.cc).
io::Task<void> demo_node_main(io::Context* ctx, DemoShared* shared);
// Reads the node's log back into oracle.final_records (no writes).
io::Task<void> demo_check_main(io::Context* ctx, DemoShared* shared);

// Runs the whole scenario (sim/demo.cc).
absl::StatusOr<ScenarioResult> run_demo(const ScenarioOptions& options);

}  // namespace brook::sim
