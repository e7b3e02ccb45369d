// sim/demo.cc
//
// The demo scenario's harness: draws the swarm configuration from the seed,
// builds the World, runs the fault schedule during the workload phase, then
// the quiet (liveness) phase, the final power loss and the checks. See
// sim/demo.h for the invariants.
#include "sim/demo.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "io/assert.h"
#include "sim/world.h"

namespace brook::sim {

namespace {

using namespace std::chrono_literals;

constexpr uint16_t kDemoPort = 7000;
constexpr uint64_t kConfigSalt = 0xD3E0C0F16ULL;
constexpr io::Duration kReviveInterval = 500ms;
constexpr io::Duration kFinalReadLimit = 1min;
constexpr size_t kFailuresMax = 20;

io::Duration uniform_duration(io::Random& r, io::Duration lo, io::Duration hi) {
  return io::Duration(r.uniform_range(lo.count(), hi.count()));
}

// Off with probability `off`, else uniform in [lo, hi].
io::Duration maybe_interval(io::Random& r, double off, io::Duration lo, io::Duration hi) {
  if (r.bernoulli(off)) return io::Duration(0);
  return uniform_duration(r, lo, hi);
}

double maybe_probability(io::Random& r, double off, double lo, double hi) {
  if (r.bernoulli(off)) return 0;
  return lo + (hi - lo) * r.unit();
}

std::string seconds(io::Duration d) {
  return fmt::format("{:.2f}s", static_cast<double>(d.count()) / 1e9);
}

std::string every(io::Duration d) { return d.count() == 0 ? "off" : "every ~" + seconds(d); }

void draw_network(io::Random& r, DemoConfig& c) {
  NetworkOptions& n = c.network;
  n.latency.min = uniform_duration(r, 10us, 500us);
  n.latency.jitter = uniform_duration(r, 0us, 2ms);
  n.latency.stall_probability = maybe_probability(r, 0.5, 1e-4, 1e-2);
  n.latency.stall_min = 10ms;
  n.latency.stall_max = uniform_duration(r, 20ms, 500ms);
  n.bandwidth_bytes_per_s =
      r.bernoulli(0.7) ? 0 : static_cast<uint64_t>(r.uniform_range(10'000'000, 1'000'000'000));
  n.window_bytes = static_cast<size_t>(r.uniform_range(16 << 10, 1 << 20));
  n.partition_reset_after = uniform_duration(r, 500ms, 10s);
  n.connect_timeout = uniform_duration(r, 1s, 10s);
}

void draw_disk(io::Random& r, DemoConfig& c) {
  DiskFaults& d = c.disk;
  d.crash_lose_unsynced_probability = 0.2 + 0.8 * r.unit();
  d.latency_min = uniform_duration(r, 0us, 100us);
  d.latency_max = d.latency_min + uniform_duration(r, 0us, 5ms);
  d.read_error_probability = maybe_probability(r, 0.5, 1e-4, 1e-3);
  d.write_error_probability = maybe_probability(r, 0.5, 1e-4, 1e-3);
  d.sync_error_probability = maybe_probability(r, 0.5, 1e-4, 1e-3);
  d.metadata_error_probability = maybe_probability(r, 0.5, 1e-4, 1e-2);
  d.read_corruption_probability = maybe_probability(r, 0.5, 1e-4, 1e-2);
}

}  // namespace

DemoConfig DemoConfig::draw(uint64_t seed) {
  io::Random r(seed ^ kConfigSalt);
  DemoConfig c;
  c.nodes = 3 + static_cast<int>(r.uniform(3));
  c.append_interval_min = uniform_duration(r, 2ms, 20ms);
  c.append_interval_max = c.append_interval_min * r.uniform_range(1, 5);
  c.payload_bytes_min = static_cast<size_t>(r.uniform_range(8, 64));
  c.payload_bytes_max = c.payload_bytes_min + static_cast<size_t>(r.uniform_range(0, 1024));
  c.workload = 30s;
  c.quiet_max = 60s;
  c.crash_interval = maybe_interval(r, 0.2, 2s, 20s);
  c.restart_delay_max = uniform_duration(r, 100ms, 5s);
  c.crash_all_probability = maybe_probability(r, 0.5, 0.05, 0.3);
  c.partition_interval = maybe_interval(r, 0.25, 1s, 15s);
  c.partition_duration_max = uniform_duration(r, 500ms, 15s);
  c.clog_interval = maybe_interval(r, 0.5, 1s, 10s);
  c.clog_duration_max = uniform_duration(r, 100ms, 3s);
  c.reset_interval = maybe_interval(r, 0.5, 1s, 15s);
  c.wall_jump_interval = maybe_interval(r, 0.5, 2s, 20s);
  c.wall_jump_max = uniform_duration(r, 100ms, 60s);
  c.drift_ppm_max = r.bernoulli(0.3) ? 0 : r.uniform_range(1, 500);
  c.wall_offset_max = uniform_duration(r, 0s, 10s);
  draw_network(r, c);
  draw_disk(r, c);
  return c;
}

std::string DemoConfig::describe() const {
  const DiskFaults& d = disk;
  const LatencyModel& l = network.latency;
  return fmt::format(
      "swarm: nodes={} append every {}..{} payload={}..{}B workload={} quiet<={}\n"
      "faults: crash {} (restart within {}, all nodes {:.0f}%); partition {} for <={}; "
      "clog {} for <={}; reset {}; wall jump {} up to {}; drift <={}ppm; wall offset <={}\n"
      "network: latency {}us+<={}us, stall {:.3f}% x {}..{}, window {}B, bandwidth {}, "
      "partition reset after {}, connect timeout {}\n"
      "disk: lose unsynced {:.0f}%, latency {}..{}us, errors read={:.3f}% write={:.3f}% "
      "sync={:.3f}% meta={:.3f}% corrupt-read={:.3f}%",
      nodes, seconds(append_interval_min), seconds(append_interval_max), payload_bytes_min,
      payload_bytes_max, seconds(workload), seconds(quiet_max), every(crash_interval),
      seconds(restart_delay_max), crash_all_probability * 100, every(partition_interval),
      seconds(partition_duration_max), every(clog_interval), seconds(clog_duration_max),
      every(reset_interval), every(wall_jump_interval), seconds(wall_jump_max), drift_ppm_max,
      seconds(wall_offset_max), l.min.count() / 1000, l.jitter.count() / 1000,
      l.stall_probability * 100, seconds(l.stall_min), seconds(l.stall_max), network.window_bytes,
      network.bandwidth_bytes_per_s == 0 ? std::string("unlimited")
                                         : fmt::format("{}B/s", network.bandwidth_bytes_per_s),
      seconds(network.partition_reset_after), seconds(network.connect_timeout),
      d.crash_lose_unsynced_probability * 100, d.latency_min.count() / 1000,
      d.latency_max.count() / 1000, d.read_error_probability * 100, d.write_error_probability * 100,
      d.sync_error_probability * 100, d.metadata_error_probability * 100,
      d.read_corruption_probability * 100);
}

namespace {

// The fault schedule: independent chains of world events, one per fault
// class, each re-arming itself while the workload phase lasts.
class DemoFaults {
 public:
  DemoFaults(World& world, const DemoConfig& config) : world_(world), config_(config) {}

  void start() {
    arm(config_.crash_interval, [this] { crash_tick(); });
    arm(config_.partition_interval, [this] { partition_tick(); });
    arm(config_.clog_interval, [this] { clog_tick(); });
    arm(config_.reset_interval, [this] { reset_tick(); });
    arm(config_.wall_jump_interval, [this] { wall_jump_tick(); });
    world_.schedule(kReviveInterval, [this] { revive_tick(); });
  }

  // The final read begins: supervision stops.
  void finish() { final_ = true; }

  // Ends the fault phase: heal everything and bring every node back.
  void stop() {
    active_ = false;
    world_.heal();
    for (int i = 0; i < world_.node_count(); ++i) {
      world_.set_disk_faults(i, DiskFaults{});
      if (!world_.node(i).up()) world_.node(i).restart();
    }
  }

  uint64_t crashes = 0;
  uint64_t partitions = 0;
  uint64_t clogs = 0;
  uint64_t resets = 0;
  uint64_t wall_jumps = 0;
  uint64_t revivals = 0;

 private:
  io::Random& random() { return world_.random(); }

  void arm(io::Duration interval, std::function<void()> tick) {
    if (interval.count() == 0 || !active_) return;
    world_.schedule(uniform_duration(random(), interval / 2, interval * 3 / 2), std::move(tick));
  }

  int random_node() {
    return static_cast<int>(random().uniform(static_cast<uint64_t>(world_.node_count())));
  }

  void crash_one(int i) {
    Node& node = world_.node(i);
    if (!node.up()) return;
    node.crash();
    ++crashes;
    if (config_.drift_ppm_max > 0) {
      node.set_drift_ppm(random().uniform_range(-config_.drift_ppm_max, config_.drift_ppm_max));
    }
    world_.schedule(uniform_duration(random(), 0s, config_.restart_delay_max), [this, i] {
      if (!world_.node(i).up()) world_.node(i).restart();
    });
  }

  void crash_tick() {
    if (!active_) return;
    if (random().bernoulli(config_.crash_all_probability)) {
      for (int i = 0; i < world_.node_count(); ++i) crash_one(i);  // correlated power loss
    } else {
      crash_one(random_node());
    }
    arm(config_.crash_interval, [this] { crash_tick(); });
  }

  void partition_tick() {
    if (!active_) return;
    std::vector<int> a;
    std::vector<int> b;
    const uint64_t shape = random().uniform(3);
    const int isolated = random_node();
    for (int i = 0; i < world_.node_count(); ++i) {
      const bool side = shape == 1 ? i == isolated : random().bernoulli(0.5);
      (side ? a : b).push_back(i);
    }
    world_.partition(a, b, shape == 2 ? PartitionMode::kOneWay : PartitionMode::kSymmetric);
    ++partitions;
    world_.schedule(uniform_duration(random(), 100ms, config_.partition_duration_max), [this] {
      world_.heal();
      arm(config_.partition_interval, [this] { partition_tick(); });
    });
  }

  void clog_tick() {
    if (!active_) return;
    world_.clog(random_node(), uniform_duration(random(), 10ms, config_.clog_duration_max));
    ++clogs;
    arm(config_.clog_interval, [this] { clog_tick(); });
  }

  void reset_tick() {
    if (!active_) return;
    world_.reset_connections(random_node());
    ++resets;
    arm(config_.reset_interval, [this] { reset_tick(); });
  }

  void wall_jump_tick() {
    if (!active_) return;
    const int64_t max = config_.wall_jump_max.count();
    world_.node(random_node()).jump_wall_clock(io::Duration(random().uniform_range(-max, max)));
    ++wall_jumps;
    arm(config_.wall_jump_interval, [this] { wall_jump_tick(); });
  }

  // A node whose main task stopped (a disk error) is power-cycled, in both
  // phases, as a supervisor would; not once the final read has begun.
  void revive_tick() {
    if (final_) return;
    for (int i = 0; i < world_.node_count(); ++i) {
      Node& node = world_.node(i);
      if (node.up() && node.main_done()) {
        node.restart();
        ++revivals;
      }
    }
    world_.schedule(kReviveInterval, [this] { revive_tick(); });
  }

  World& world_;
  const DemoConfig& config_;
  bool active_ = true;
  bool final_ = false;
};

bool converged(const DemoOracle& oracle, int nodes) {
  for (int n = 0; n < nodes; ++n) {
    for (int o = 0; o < nodes; ++o) {
      if (oracle.held_max[n][o] < oracle.acked_max[o][o]) return false;
    }
  }
  return true;
}

void add_failure(std::vector<std::string>& failures, std::string what) {
  if (failures.size() < kFailuresMax) failures.push_back(std::move(what));
}

// Durability and agreement over the final read-back.
void check_records(const DemoOracle& oracle, int nodes, std::vector<std::string>& failures) {
  std::map<DemoOracle::Key, uint64_t> first_copy;
  for (int n = 0; n < nodes; ++n) {
    if (!oracle.final_read[n]) add_failure(failures, fmt::format("node {}: final read failed", n));
    const auto& final = oracle.final_records[n];
    for (const auto& [key, sum] : oracle.acked[n]) {
      auto it = final.find(key);
      if (it == final.end() || it->second != sum) {
        add_failure(failures, fmt::format("durability: node {} lost synced record ({}, {})", n,
                                          key.first, key.second));
      }
    }
    for (const auto& [key, sum] : final) {
      auto [it, fresh] = first_copy.emplace(key, sum);
      if (!fresh && it->second != sum) {
        add_failure(failures, fmt::format("agreement: copies of record ({}, {}) differ (node {})",
                                          key.first, key.second, n));
      }
    }
  }
}

void check_liveness(const DemoOracle& oracle, int nodes, std::vector<std::string>& failures) {
  for (int n = 0; n < nodes; ++n) {
    for (int o = 0; o < nodes; ++o) {
      const uint64_t due = oracle.acked_max[o][o];
      const auto& final = oracle.final_records[n];
      for (uint64_t s = 1; s <= due; ++s) {
        if (!final.contains({o, s})) {
          add_failure(failures, fmt::format("liveness: node {} never got record ({}, {}) of {}", n,
                                            o, s, due));
          break;
        }
      }
    }
  }
}

std::string summarize(World& world, const DemoOracle& oracle, const DemoFaults& faults) {
  uint64_t torn = 0;
  uint64_t lost = 0;
  uint64_t disk_errors = 0;
  for (int i = 0; i < world.node_count(); ++i) {
    const DiskStats& s = world.node(i).disk().stats();
    torn += s.torn_writes;
    lost += s.lost_writes;
    disk_errors += s.read_errors + s.write_errors + s.sync_errors + s.metadata_errors;
  }
  const NetworkStats& net = world.network().stats();
  return fmt::format(
      "records appended={} replicated={} connections={} recoveries={} torn-tails={}; "
      "faults: crashes={} partitions={} clogs={} resets={} wall-jumps={} revivals={} "
      "disk-errors={} torn-writes={} lost-writes={} net-resets={} hold-timeouts={} "
      "buggify-fired={}",
      oracle.records_appended, oracle.records_replicated, oracle.connections, oracle.recoveries,
      oracle.torn_tails, faults.crashes, faults.partitions, faults.clogs, faults.resets,
      faults.wall_jumps, faults.revivals, disk_errors, torn, lost, net.resets, net.hold_timeouts,
      world.buggify().fired());
}

NodeOptions node_options(io::Random& r, const DemoConfig& c) {
  NodeOptions o;
  o.disk_faults = c.disk;
  o.drift_ppm = c.drift_ppm_max == 0 ? 0 : r.uniform_range(-c.drift_ppm_max, c.drift_ppm_max);
  o.monotonic_offset = uniform_duration(r, 1s, 1000s);
  const int64_t w = c.wall_offset_max.count();
  o.wall_offset = io::Duration(r.uniform_range(-w, w));
  return o;
}

// Power loss everywhere, then every node reads its log back.
void final_read(World& world, DemoShared& shared, DemoFaults& faults) {
  faults.finish();
  for (int i = 0; i < world.node_count(); ++i) world.node(i).crash();
  DemoShared* s = &shared;
  for (int i = 0; i < world.node_count(); ++i) {
    world.node(i).start([s](io::Context& ctx) { return demo_check_main(&ctx, s); });
  }
  world.run_until(
      [&] {
        for (int i = 0; i < world.node_count(); ++i) {
          if (!world.node(i).main_done()) return false;
        }
        return true;
      },
      kFinalReadLimit);
}

}  // namespace

absl::StatusOr<ScenarioResult> run_demo(const ScenarioOptions& options) {
  const DemoConfig config = DemoConfig::draw(options.seed);
  WorldOptions world_options;
  world_options.scenario = "demo";
  world_options.network = config.network;
  world_options.trace = options.trace;
  world_options.log_sink = options.log_sink;
  World world(options.seed, world_options);
  if (options.out != nullptr) {
    fmt::print(options.out, "brook sim: scenario=demo seed={}\n{}\nbuggify: {}\n", options.seed,
               config.describe(), world.buggify().enabled() ? "on" : "off");
  }
  std::vector<io::Address> addresses;
  io::Random node_random(options.seed ^ (kConfigSalt << 1));
  for (int i = 0; i < config.nodes; ++i) {
    addresses.push_back(world.add_node(node_options(node_random, config)).address(kDemoPort));
  }
  DemoShared shared(config, addresses);
  DemoShared* s = &shared;
  for (int i = 0; i < config.nodes; ++i) {
    world.node(i).start([s](io::Context& ctx) { return demo_node_main(&ctx, s); });
  }
  DemoFaults faults(world, config);
  faults.start();
  world.run_for(config.workload);
  shared.writing = false;
  faults.stop();
  const bool live =
      world.run_until([&] { return converged(shared.oracle, config.nodes); }, config.quiet_max);
  final_read(world, shared, faults);

  ScenarioResult result;
  for (const std::string& v : shared.oracle.violations) add_failure(result.failures, v);
  check_records(shared.oracle, config.nodes, result.failures);
  if (!live) check_liveness(shared.oracle, config.nodes, result.failures);
  if (!live && result.failures.empty()) add_failure(result.failures, "liveness: no convergence");
  result.passed = result.failures.empty();
  result.trace_hash = world.trace_hash();
  result.events = world.events_run();
  result.simulated = world.elapsed();
  result.replay_command = world.replay_command();
  result.summary = summarize(world, shared.oracle, faults);
  return result;
}

}  // namespace brook::sim
