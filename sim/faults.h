// sim/faults.h
//
// Swarm fault configuration and the fault schedule shared by the
// scenarios. FaultConfig::draw() picks, from a seeded Random, which fault
// classes a run has and how hard they hit (swarm testing: each seed its own
// mix); FaultSchedule runs them against a World as independent chains of
// world events, one per class, while the fault phase lasts: crashes
// (single or all nodes at once, with a restart after a delay and new clock
// drift), symmetric, one-way and isolating partitions, clogged nodes,
// connection resets, wall-clock jumps and, where the scenario can ask its
// nodes for one, graceful stops (SIGTERM) and full disks (a node's disk
// has no room left for a while; writes that need more fail with ENOSPC)
// and, where the scenario can say which node the cluster can spare, the
// loss of one node for good (powered off and never restarted, as a machine
// that died). A node whose main task stopped (a disk error, or a graceful
// stop) is power-cycled as a supervisor would.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "io/random.h"
#include "io/time.h"
#include "sim/disk.h"
#include "sim/network.h"
#include "sim/world.h"

namespace brook::sim {

// Graceful stops and full disks are each drawn (draw_graceful_stops,
// draw_full_disks) from a stream of their own, seeded with the scenario's
// seed ^ one of these, so the rest of each seed's draws stay as they were.
inline constexpr uint64_t kGracefulStopSalt = 0x7369'6774'6572'6d01ULL;  // "sigterm"
inline constexpr uint64_t kFullDiskSalt = 0x656e'6f73'7063'0001ULL;      // "enospc"
inline constexpr uint64_t kNodeLossSalt = 0x6465'6164'0000'0001ULL;      // "dead"

// Interval 0 switches a fault class off.
struct FaultConfig {
  io::Duration crash_interval{0};
  io::Duration restart_delay_max{0};
  double crash_all_probability = 0;
  io::Duration partition_interval{0};
  io::Duration partition_duration_max{0};
  io::Duration clog_interval{0};
  io::Duration clog_duration_max{0};
  io::Duration reset_interval{0};
  io::Duration wall_jump_interval{0};
  io::Duration wall_jump_max{0};
  int64_t drift_ppm_max = 0;
  io::Duration wall_offset_max{0};
  // Graceful stops: not drawn by draw() (only scenarios whose nodes can
  // stop gracefully draw it, with draw_graceful_stops()).
  io::Duration stop_interval{0};
  // Full disks: not drawn by draw() either (a scenario opts in with
  // draw_full_disks()). Now and then one node's disk is left with at most
  // full_disk_headroom_max free bytes for up to full_disk_duration_max, as
  // when something else on the machine fills it and an operator then
  // frees space.
  io::Duration full_disk_interval{0};
  io::Duration full_disk_duration_max{0};
  uint64_t full_disk_headroom_max = 0;
  // The loss of a node for good: not drawn by draw() (a scenario opts in
  // with draw_node_loss()). From node_loss_after on, once the scenario
  // names a node it can spare (FaultSchedule::pick_lost), that node is
  // powered off and never comes back.
  io::Duration node_loss_after{0};
  NetworkOptions network;
  DiskFaults disk;

  static FaultConfig draw(io::Random& r);
  // From the scenario's seed (salted, above).
  void draw_graceful_stops(uint64_t seed);
  void draw_full_disks(uint64_t seed);
  void draw_node_loss(uint64_t seed);
  // Three lines: faults, network, disk.
  std::string describe() const;
  // A node's clocks and disk faults, drawn from `r`.
  NodeOptions node_options(io::Random& r) const;
};

// Helpers for drawing configurations.
io::Duration uniform_duration(io::Random& r, io::Duration lo, io::Duration hi);
// Off (0) with probability `off`, else uniform in [lo, hi].
io::Duration maybe_interval(io::Random& r, double off, io::Duration lo, io::Duration hi);
double maybe_probability(io::Random& r, double off, double lo, double hi);
std::string seconds(io::Duration d);
// "off" for 0, else "every ~Xs".
std::string every(io::Duration d);

class FaultSchedule {
 public:
  FaultSchedule(World& world, const FaultConfig& config) : world_(world), config_(config) {}

  // Asks node i for a graceful stop; false when node i cannot stop so (a
  // client). Set before start() to have stop_interval's stops.
  std::function<bool(int)> graceful_stop;
  // The node the cluster can lose for good now (none: not yet; asked again
  // every 500 ms while the fault phase lasts). Set before start() to have
  // node_loss_after's loss.
  std::function<std::optional<int>()> pick_lost;

  void start();
  // Supervision stops (a final power loss and read-back follow).
  void finish() { final_ = true; }
  // Ends the fault phase: heals the network, clears disk faults and brings
  // every node back (but a lost one).
  void stop();
  // Whether node i was lost for good (powered off when pick_lost named it:
  // no restart, revival or stop() brings it back).
  bool lost(int i) const { return i == lost_; }
  // The node lost for good (index), or -1.
  int lost_node() const { return lost_; }

  uint64_t crashes = 0;
  uint64_t partitions = 0;
  uint64_t clogs = 0;
  uint64_t resets = 0;
  uint64_t wall_jumps = 0;
  uint64_t revivals = 0;
  uint64_t graceful_stops = 0;
  uint64_t full_disks = 0;
  // The counters above for a run's summary: "crashes=N graceful-stops=N
  // full-disks=N partitions=N ..." (graceful stops where the scenario has
  // them, and "lost=node N" once a node was lost).
  std::string counters() const;

 private:
  io::Random& random() { return world_.random(); }
  void arm(io::Duration interval, std::function<void()> tick);
  int random_node();
  void crash_one(int i);
  void crash_tick();
  void partition_tick();
  void clog_tick();
  void reset_tick();
  void wall_jump_tick();
  void stop_tick();
  void full_disk_tick();
  void revive_tick();
  void loss_tick();
  void lose(int i);

  World& world_;
  const FaultConfig& config_;
  bool active_ = true;
  bool final_ = false;
  int lost_ = -1;
};

}  // namespace brook::sim
