// sim/faults.cc
#include "sim/faults.h"

#include <fmt/format.h>

#include <vector>

namespace brook::sim {

namespace {

using namespace std::chrono_literals;

constexpr io::Duration kReviveInterval = 500ms;

void draw_network(io::Random& r, FaultConfig& c) {
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

void draw_disk(io::Random& r, FaultConfig& c) {
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

io::Duration uniform_duration(io::Random& r, io::Duration lo, io::Duration hi) {
  return io::Duration(r.uniform_range(lo.count(), hi.count()));
}

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

FaultConfig FaultConfig::draw(io::Random& r) {
  FaultConfig c;
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

void FaultConfig::draw_graceful_stops(uint64_t seed) {
  io::Random r(seed ^ kGracefulStopSalt);
  stop_interval = maybe_interval(r, 0.5, 2s, 20s);
}

void FaultConfig::draw_full_disks(uint64_t seed) {
  io::Random r(seed ^ kFullDiskSalt);
  full_disk_interval = maybe_interval(r, 0.5, 1s, 10s);
  full_disk_duration_max = uniform_duration(r, 200ms, 10s);
  full_disk_headroom_max = static_cast<uint64_t>(r.uniform_range(0, r.bernoulli(0.5) ? 4 << 10 : 64 << 10));
}

void FaultConfig::draw_node_loss(uint64_t seed) {
  io::Random r(seed ^ kNodeLossSalt);
  node_loss_after = uniform_duration(r, 1s, 25s);
}

std::string FaultConfig::describe() const {
  const DiskFaults& d = disk;
  const LatencyModel& l = network.latency;
  return fmt::format(
      "faults: crash {} (restart within {}, all nodes {:.0f}%); partition {} for <={}; "
      "clog {} for <={}; reset {}; wall jump {} up to {}; drift <={}ppm; wall offset <={}{}{}{}\n"
      "network: latency {}us+<={}us, stall {:.3f}% x {}..{}, window {}B, bandwidth {}, "
      "partition reset after {}, connect timeout {}\n"
      "disk: lose unsynced {:.0f}%, latency {}..{}us, errors read={:.3f}% write={:.3f}% "
      "sync={:.3f}% meta={:.3f}% corrupt-read={:.3f}%",
      every(crash_interval), seconds(restart_delay_max), crash_all_probability * 100,
      every(partition_interval), seconds(partition_duration_max), every(clog_interval),
      seconds(clog_duration_max), every(reset_interval), every(wall_jump_interval),
      seconds(wall_jump_max), drift_ppm_max, seconds(wall_offset_max),
      stop_interval.count() == 0 ? std::string() : "; graceful stop " + every(stop_interval),
      full_disk_interval.count() == 0
          ? std::string()
          : fmt::format("; full disk {} for <={} (<={}B free)", every(full_disk_interval),
                        seconds(full_disk_duration_max), full_disk_headroom_max),
      node_loss_after.count() == 0 ? std::string()
                                   : "; a node lost for good after " + seconds(node_loss_after),
      l.min.count() / 1000,
      l.jitter.count() / 1000, l.stall_probability * 100, seconds(l.stall_min),
      seconds(l.stall_max), network.window_bytes,
      network.bandwidth_bytes_per_s == 0 ? std::string("unlimited")
                                         : fmt::format("{}B/s", network.bandwidth_bytes_per_s),
      seconds(network.partition_reset_after), seconds(network.connect_timeout),
      d.crash_lose_unsynced_probability * 100, d.latency_min.count() / 1000,
      d.latency_max.count() / 1000, d.read_error_probability * 100, d.write_error_probability * 100,
      d.sync_error_probability * 100, d.metadata_error_probability * 100,
      d.read_corruption_probability * 100);
}

NodeOptions FaultConfig::node_options(io::Random& r) const {
  NodeOptions o;
  o.disk_faults = disk;
  o.drift_ppm = drift_ppm_max == 0 ? 0 : r.uniform_range(-drift_ppm_max, drift_ppm_max);
  o.monotonic_offset = uniform_duration(r, 1s, 1000s);
  const int64_t w = wall_offset_max.count();
  o.wall_offset = io::Duration(r.uniform_range(-w, w));
  return o;
}

void FaultSchedule::start() {
  arm(config_.crash_interval, [this] { crash_tick(); });
  arm(config_.partition_interval, [this] { partition_tick(); });
  arm(config_.clog_interval, [this] { clog_tick(); });
  arm(config_.reset_interval, [this] { reset_tick(); });
  arm(config_.wall_jump_interval, [this] { wall_jump_tick(); });
  if (graceful_stop) arm(config_.stop_interval, [this] { stop_tick(); });
  arm(config_.full_disk_interval, [this] { full_disk_tick(); });
  if (pick_lost && config_.node_loss_after.count() > 0) {
    world_.schedule(config_.node_loss_after, [this] { loss_tick(); });
  }
  world_.schedule(kReviveInterval, [this] { revive_tick(); });
}

void FaultSchedule::stop() {
  active_ = false;
  world_.heal();
  for (int i = 0; i < world_.node_count(); ++i) {
    world_.set_disk_faults(i, DiskFaults{});
    if (!world_.node(i).up() && !lost(i)) world_.node(i).restart();
  }
}

void FaultSchedule::lose(int i) {
  lost_ = i;
  world_.node(i).crash();
}

void FaultSchedule::loss_tick() {
  if (!active_ || lost_ >= 0) return;
  if (const std::optional<int> i = pick_lost(); i.has_value()) {
    lose(*i);
  } else {
    world_.schedule(500ms, [this] { loss_tick(); });
  }
}

void FaultSchedule::arm(io::Duration interval, std::function<void()> tick) {
  if (interval.count() == 0 || !active_) return;
  world_.schedule(uniform_duration(random(), interval / 2, interval * 3 / 2), std::move(tick));
}

int FaultSchedule::random_node() {
  return static_cast<int>(random().uniform(static_cast<uint64_t>(world_.node_count())));
}

void FaultSchedule::crash_one(int i) {
  Node& node = world_.node(i);
  if (!node.up()) return;
  node.crash();
  ++crashes;
  if (config_.drift_ppm_max > 0) {
    node.set_drift_ppm(random().uniform_range(-config_.drift_ppm_max, config_.drift_ppm_max));
  }
  world_.schedule(uniform_duration(random(), 0s, config_.restart_delay_max), [this, i] {
    if (!world_.node(i).up() && !lost(i)) world_.node(i).restart();
  });
}

void FaultSchedule::crash_tick() {
  if (!active_) return;
  if (random().bernoulli(config_.crash_all_probability)) {
    for (int i = 0; i < world_.node_count(); ++i) crash_one(i);  // correlated power loss
  } else {
    crash_one(random_node());
  }
  arm(config_.crash_interval, [this] { crash_tick(); });
}

void FaultSchedule::partition_tick() {
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

void FaultSchedule::clog_tick() {
  if (!active_) return;
  // One draw after the other, in this order: as two arguments of one call
  // their order would be the compiler's choice (g++ and clang differ).
  const io::Duration duration = uniform_duration(random(), 10ms, config_.clog_duration_max);
  const int node = random_node();
  world_.clog(node, duration);
  ++clogs;
  arm(config_.clog_interval, [this] { clog_tick(); });
}

void FaultSchedule::reset_tick() {
  if (!active_) return;
  world_.reset_connections(random_node());
  ++resets;
  arm(config_.reset_interval, [this] { reset_tick(); });
}

void FaultSchedule::wall_jump_tick() {
  if (!active_) return;
  const int64_t max = config_.wall_jump_max.count();
  world_.node(random_node()).jump_wall_clock(io::Duration(random().uniform_range(-max, max)));
  ++wall_jumps;
  arm(config_.wall_jump_interval, [this] { wall_jump_tick(); });
}

// A graceful stop of a running node: its main returns when done, and
// revive_tick() power-cycles it.
void FaultSchedule::stop_tick() {
  if (!active_) return;
  const int i = random_node();
  const Node& node = world_.node(i);
  if (node.up() && !node.main_done() && graceful_stop(i)) ++graceful_stops;
  arm(config_.stop_interval, [this] { stop_tick(); });
}

std::string FaultSchedule::counters() const {
  return fmt::format("crashes={}{} full-disks={} partitions={} clogs={} resets={} wall-jumps={} revivals={}{}",
                     crashes, graceful_stop ? fmt::format(" graceful-stops={}", graceful_stops) : std::string(),
                     full_disks, partitions, clogs, resets, wall_jumps, revivals,
                     lost_ < 0 ? std::string() : fmt::format(" lost=node {}", lost_ + 1));
}

// The disk of one node that has written to it (a server; a workload
// client's disk stays empty) and is not lost for good fills up to within
// a few bytes of what it holds now, and is given its space back later
// (stop() gives it back too).
// Writes that need more space than is left fail with ENOSPC meanwhile.
void FaultSchedule::full_disk_tick() {
  if (!active_) return;
  std::vector<int> written;
  for (int n = 0; n < world_.node_count(); ++n) {
    if (world_.node(n).disk().used_bytes() > 0 && !lost(n)) written.push_back(n);
  }
  const int i = written.empty() ? -1 : written[random().uniform(written.size())];
  if (i >= 0 && world_.node(i).disk().faults().capacity_bytes == UINT64_MAX) {
    SimDisk& disk = world_.node(i).disk();
    DiskFaults full = disk.faults();
    full.capacity_bytes = disk.used_bytes() + random().uniform(config_.full_disk_headroom_max + 1);
    world_.set_disk_faults(i, full);
    ++full_disks;
    world_.schedule(uniform_duration(random(), 100ms, config_.full_disk_duration_max), [this, i] {
      DiskFaults freed = world_.node(i).disk().faults();
      freed.capacity_bytes = UINT64_MAX;
      world_.set_disk_faults(i, freed);
    });
  }
  arm(config_.full_disk_interval, [this] { full_disk_tick(); });
}

// A node whose main task stopped (a disk error) is power-cycled, in both
// phases, as a supervisor would; not once the final read has begun.
void FaultSchedule::revive_tick() {
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

}  // namespace brook::sim
