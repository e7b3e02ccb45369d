// sim/world.h
//
// World: one simulated cluster on one thread. It owns the single scheduler
// (an io::EventQueue) whose events run in (virtual time, sequence) order;
// virtual time jumps straight to the next event, so idle time costs nothing.
// A simulation is a pure function of the World's seed: every random choice
// comes from io::Random streams forked from it, nothing reads real time, and
// nothing iterates in hash or pointer order.
//
// Nodes. add_node() makes a Node with its own Executor and Clock (the world's
// virtual time seen through a per-node drift and offset; its wall clock may
// also jump, its monotonic clock never goes back), its own SimDisk, network
// host ("10.0.0.<index + 1>"), Random stream, Logger, Buggify and an
// io::Context bundling them. start(main) spawns the node's main task in the
// node's root TaskScope; crash() destroys every task of the node, resets its
// connections and powers its disk off (SimDisk::crash); restart() runs the
// main task again on the surviving disk.
//
// Events carry a tag: node index, kind and the node's incarnation. crash()
// bumps the incarnation, so any event of a dead incarnation that was not
// cancelled is dropped instead of run.
//
// Trace. Every event that runs is folded into trace_hash() (see
// sim/trace.h), and faults applied by the World are recorded too; with
// WorldOptions::trace set, every record is also written out.
//
// While run_*() executes, an io::AssertContext naming the seed and the replay
// command is installed, so any failed BROOK_ASSERT prints how to replay.
//
// Not thread-safe. A World outlives every task, connection and file its nodes
// use. Node references stay valid for the World's lifetime.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/context.h"
#include "io/event_queue.h"
#include "io/executor.h"
#include "io/log.h"
#include "io/random.h"
#include "io/scope.h"
#include "io/task.h"
#include "sim/buggify.h"
#include "sim/disk.h"
#include "sim/network.h"
#include "sim/trace.h"

namespace brook::sim {

class World;
class Node;

// Limits of the tag layout (node index bits, incarnation bits).
inline constexpr uint32_t kNodesMax = 1000;
inline constexpr uint32_t kIncarnationsMax = (1u << 18) - 1;

struct WorldOptions {
  // The scenario name used in the replay command ("demo" is the default and
  // is left out of the command, as is the log level but for debug).
  std::string scenario = "demo";
  // Overrides the whole replay command when not empty.
  std::string replay_command;
  BuggifyMode buggify = BuggifyMode::kSeeded;
  NetworkOptions network;
  // Where node log lines go (nullptr: dropped) and the least level kept.
  io::LogSink* log_sink = nullptr;
  io::LogLevel log_level = io::LogLevel::kInfo;
  // Every trace record is written here when set (not owned).
  TraceSink* trace = nullptr;
  // Wall-clock time of virtual time zero (2024-01-01T00:00:00Z).
  int64_t wall_epoch_ns = 1'704'067'200'000'000'000;
};

struct NodeOptions {
  DiskFaults disk_faults;
  // Rate error of the node's clocks in parts per million, |ppm| <= 100'000.
  int64_t drift_ppm = 0;
  // The node's monotonic clock reads this at virtual time zero (its uptime).
  io::Duration monotonic_offset{0};
  // Wall-clock skew against the world's epoch.
  io::Duration wall_offset{0};
};

// The node's clocks: local = base_local + d + d * drift_ppm / 1e6 with
// d = global - base_global. Drift changes only between incarnations (a
// pending timer was placed with the old rate), so timers never fire early.
// Without drift both conversions are one addition (the common case, kept
// inline); with drift they stay in 64-bit arithmetic while the products fit.
class NodeClock final : public io::Clock {
 public:
  NodeClock(const World* world, const NodeOptions& options, int64_t wall_epoch_ns);

  io::Instant now() const override;
  io::WallTime wall_now() const override;

  // Local monotonic time at a global virtual time (global >= base).
  int64_t local_at(int64_t global_ns) const {
    if (drift_ppm_ == 0) [[likely]] return base_local_ns_ + (global_ns - base_global_ns_);
    return local_at_drifting(global_ns);
  }
  // The earliest global time at which the local clock reads >= local_ns.
  int64_t global_for(int64_t local_ns) const;
  bool drifting() const { return drift_ppm_ != 0; }

  // REQUIRES: no task of the node is alive (the node is crashed or not
  // started). Continues the monotonic clock from the current reading.
  void set_drift_ppm(int64_t ppm);
  int64_t drift_ppm() const { return drift_ppm_; }
  // Steps the wall clock (forward or back); monotonic time is unaffected.
  void jump_wall(io::Duration delta) { wall_minus_local_ns_ += delta.count(); }

 private:
  int64_t local_at_drifting(int64_t global_ns) const;
  int64_t global_for_drifting(int64_t local_ns, int64_t now) const;

  const World* world_;
  int64_t base_global_ns_ = 0;
  int64_t base_local_ns_ = 0;
  int64_t drift_ppm_ = 0;
  int64_t wall_minus_local_ns_ = 0;
};

// A node's executor: every event goes to the World's one queue, tagged with
// the node, the kind and the current incarnation.
class NodeExecutor final : public io::Executor {
 public:
  NodeExecutor(World* world, Node* node) : world_(world), node_(node) {}
  io::EventId post(io::Callback cb) override;
  io::EventId call_at(io::Instant deadline, io::Callback cb) override;
  void cancel(io::EventId id) override;
  io::Instant now() const override;

  // Schedules at a global virtual time with a given kind (network steps,
  // disk completions); same incarnation rules as post/call_at.
  io::EventId schedule_global(int64_t global_ns, TraceKind kind, io::Callback cb);
  Node& node() const { return *node_; }

 private:
  io::EventId call_at_drifting(io::Instant deadline, io::Callback cb);

  World* world_;
  Node* node_;
};

using MainFn = std::function<io::Task<void>(io::Context&)>;

class Node {
 public:
  Node(World* world, int index, uint64_t random_seed, uint64_t disk_seed,
       const NodeOptions& options);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  int index() const { return index_; }
  const std::string& host() const { return host_; }
  io::Address address(uint16_t port) const { return io::Address{host_, port}; }
  io::Context& context() { return context_; }
  NodeExecutor& executor() { return executor_; }
  NodeClock& clock() { return clock_; }
  SimDisk& disk() { return disk_; }
  io::Random& random() { return random_; }
  io::Logger& log() { return logger_; }
  NodeBuggify& buggify() { return buggify_; }

  // Powers the node on: a new root scope runs main(context()). `main` is
  // remembered for restart(). REQUIRES: the node is down (never started, or
  // crashed).
  void start(MainFn main);
  // Spawns an extra task in the node's root scope (it dies with the node).
  // REQUIRES: the node is up.
  void spawn(io::Task<void> task);
  // Power loss: destroys every task, resets connections and listeners,
  // crashes the disk. Deferred to a world event when called from one of this
  // node's own tasks. No-op when already down.
  void crash();
  // Powers the node back on and runs the remembered main task again; crashes
  // it first when it is still up. REQUIRES: start() was called before.
  void restart();

  // Up: powered on (started and not crashed since). The main task may have
  // returned while the node stays up.
  bool up() const { return root_ != nullptr; }
  bool main_done() const { return main_done_; }
  uint32_t incarnation() const { return incarnation_; }
  uint32_t crashes() const { return crashes_; }

  // Drift applies from the next start/restart when the node is up.
  void set_drift_ppm(int64_t ppm);
  void jump_wall_clock(io::Duration delta);

  // The tag every event of the current incarnation carries: node index in
  // bits 0-9, kind in bits 10-13, incarnation (never 0) in bits 14-31.
  uint32_t tag(TraceKind kind) const {
    return tag_base_ | (static_cast<uint32_t>(kind) << kTagKindShift);
  }
  static constexpr uint32_t kTagNodeMask = 0x3FF;
  static constexpr uint32_t kTagKindShift = 10;
  static constexpr uint32_t kTagIncarnationShift = 14;

 private:
  friend class World;
  static io::Task<void> run_main(Node* node, uint32_t incarnation, io::Task<void> main);
  void crash_now();
  void boot();

  World* world_;
  int index_;
  std::string host_;
  NodeExecutor executor_;
  NodeClock clock_;
  io::Random random_;
  SimDisk disk_;
  io::Logger logger_;
  NodeBuggify buggify_;
  SimNetwork network_;
  io::Context context_;
  std::unique_ptr<io::TaskScope> root_;
  MainFn main_;
  uint32_t incarnation_ = 1;
  uint32_t tag_base_ = 0;
  uint32_t crashes_ = 0;
  bool main_done_ = false;
  int64_t pending_drift_ppm_ = 0;
  bool drift_pending_ = false;
};

class World {
 public:
  explicit World(uint64_t seed, WorldOptions options = {});
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  uint64_t seed() const { return seed_; }
  const WorldOptions& options() const { return options_; }
  const std::string& replay_command() const { return replay_command_; }

  // REQUIRES: fewer than kNodesMax nodes.
  Node& add_node(const NodeOptions& options = {});
  Node& node(int index) { return *nodes_.at(static_cast<size_t>(index)); }
  int node_count() const { return static_cast<int>(nodes_.size()); }

  // Virtual time since the start of the run.
  int64_t now_ns() const { return queue_.now_ns(); }
  io::Duration elapsed() const { return io::Duration(now_ns()); }

  // Runs events until `done()` holds (checked before the first event and
  // after each one) or no event is left. Returns done().
  bool run_until(const std::function<bool()>& done);
  // Like run_until, but also stops before the first event later than
  // elapsed() + limit (time then advances to that bound).
  bool run_until(const std::function<bool()>& done, io::Duration limit);
  // Runs every event due within `d`, then sets the time to elapsed() + d.
  void run_for(io::Duration d);
  // Runs until no event is left. Returns the number of events run.
  uint64_t run_until_idle();

  // A world-level callback after `delay` (fault schedules, drivers). It runs
  // outside every node. Returns an id for cancel().
  io::EventId schedule(io::Duration delay, std::function<void()> fn);
  void cancel(io::EventId id);

  // Faults. Node sets are node indices.
  void partition(const std::vector<int>& a, const std::vector<int>& b, PartitionMode mode);
  void heal();
  void reset_connections(int node);
  void set_latency(const LatencyModel& latency);
  void set_link_latency(int from, int to, const LatencyModel& latency);
  // Holds all traffic from and to `node` for `d` (a clogged interface).
  void clog(int node, io::Duration d);
  void set_disk_faults(int node, const DiskFaults& faults);

  // A random stream for world-level decisions (fault schedules).
  io::Random& random() { return random_; }
  NetworkFabric& network() { return fabric_; }
  BuggifyState& buggify() { return buggify_; }
  const BuggifyState& buggify() const { return buggify_; }

  uint64_t trace_hash() const { return hash_.value(); }
  uint64_t events_run() const { return events_run_; }
  uint64_t events_dropped() const { return events_dropped_; }
  // Appends a record (a fault, a lifecycle step, a note from a test) to the
  // trace and its hash. node -1 is the world.
  void record(TraceKind kind, int node, std::string_view detail);

  // The world running on this thread, or nullptr outside run_*().
  static World* running();

 private:
  friend class NodeExecutor;
  friend class Node;
  friend class NetworkFabric;
  struct Pending;  // a world-level callback

  void run_event(const io::EventQueue::Due& due);
  bool node_event_live(uint32_t tag) const {
    const uint32_t incarnation = tag >> Node::kTagIncarnationShift;
    return incarnation == 0 ||  // fabric and world events
           incarnation == incarnations_[tag & Node::kTagNodeMask];
  }
  // A network step at a global time; never dropped by the incarnation check
  // (the fabric cancels its own events). `node` labels the trace record.
  io::EventId schedule_fabric(int64_t at_ns, int node, io::Callback cb);
  static void run_pending(void* arg);
  void cancel_event(io::EventId id) { queue_.cancel(id); }
  class RunScope;
  io::EventQueue& queue() { return queue_; }
  int current_node() const {
    return current_node_ == Node::kTagNodeMask ? -1 : static_cast<int>(current_node_);
  }

  uint64_t seed_;
  WorldOptions options_;
  std::string replay_command_;
  std::string assert_text_;
  io::Random random_;
  io::EventQueue queue_;
  TraceHash hash_;
  BuggifyState buggify_;
  NetworkFabric fabric_;
  std::vector<std::unique_ptr<Node>> nodes_;
  // Each node's current incarnation, by index: the liveness check of every
  // event reads it.
  std::vector<uint32_t> incarnations_;
  std::map<io::EventId, std::unique_ptr<Pending>> pending_;
  uint64_t records_ = 0;
  uint64_t events_run_ = 0;
  uint64_t events_dropped_ = 0;
  uint32_t current_node_ = Node::kTagNodeMask;  // the running event's tag node field
};

inline int64_t NodeClock::global_for(int64_t local_ns) const {
  const int64_t now = world_->now_ns();
  if (drift_ppm_ != 0) [[unlikely]] return global_for_drifting(local_ns, now);
  const int64_t g = base_global_ns_ + (local_ns - base_local_ns_);
  return g < now ? now : g;
}

inline io::Instant NodeClock::now() const {
  return io::instant_from_ns(local_at(world_->now_ns()));
}

// The replay command for a scenario and seed: "brook sim --seed N" plus
// "--scenario NAME" when the scenario is not the default.
std::string replay_command_for(std::string_view scenario, uint64_t seed);

}  // namespace brook::sim
