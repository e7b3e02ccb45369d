// sim/world.cc
#include "sim/world.h"

#include <fmt/format.h>

#include <limits>
#include <utility>

#include "io/assert.h"

namespace brook::sim {

namespace {

constexpr uint32_t kWorldNode = Node::kTagNodeMask;  // the tag's node field for the world
constexpr int64_t kPpmDenominator = 1'000'000;
constexpr int64_t kDriftPpmMax = 100'000;

thread_local World* g_running_world = nullptr;

uint32_t world_tag(TraceKind kind) {
  return kWorldNode | (static_cast<uint32_t>(kind) << Node::kTagKindShift);
}

bool seeded_buggify_on(uint64_t seed) {
  io::Random r(seed ^ 0xB0661F1ED5EEDULL);
  return r.bernoulli(kBuggifySeededOnRatio);
}

bool buggify_enabled(BuggifyMode mode, uint64_t seed) {
  switch (mode) {
    case BuggifyMode::kOff:
      return false;
    case BuggifyMode::kOn:
      return true;
    case BuggifyMode::kSeeded:
      return seeded_buggify_on(seed);
  }
  BROOK_UNREACHABLE();
}

std::string host_of(int index) {
  const int n = index + 1;
  return fmt::format("10.0.{}.{}", n / 256, n % 256);
}

}  // namespace

std::string replay_command_for(std::string_view scenario, uint64_t seed) {
  if (scenario.empty() || scenario == "demo") return fmt::format("brook sim --seed {}", seed);
  return fmt::format("brook sim --seed {} --scenario {}", seed, scenario);
}

// --- NodeClock ------------------------------------------------------------

NodeClock::NodeClock(const World* world, const NodeOptions& options, int64_t wall_epoch_ns)
    : world_(world),
      base_global_ns_(world->now_ns()),
      base_local_ns_(options.monotonic_offset.count()),
      drift_ppm_(options.drift_ppm) {
  BROOK_ASSERT_LE(drift_ppm_, kDriftPpmMax);
  BROOK_ASSERT_GE(drift_ppm_, -kDriftPpmMax);
  BROOK_ASSERT_GE(base_local_ns_, 0);
  wall_minus_local_ns_ =
      wall_epoch_ns + options.wall_offset.count() + base_global_ns_ - base_local_ns_;
}

namespace {
// |d| at most this keeps d * ppm (|ppm| <= kDriftPpmMax) and d * 1e6 in 64 bits.
constexpr int64_t kDriftSkewExactMax = std::numeric_limits<int64_t>::max() / kPpmDenominator;
}  // namespace

int64_t NodeClock::local_at_drifting(int64_t global_ns) const {
  const int64_t d = global_ns - base_global_ns_;
  // Truncates toward zero either way: the 64-bit path gives the same value.
  const int64_t skew = d <= kDriftSkewExactMax && d >= -kDriftSkewExactMax
                           ? d * drift_ppm_ / kPpmDenominator
                           : static_cast<int64_t>(static_cast<__int128>(d) * drift_ppm_ /
                                                  kPpmDenominator);
  return base_local_ns_ + d + skew;
}

int64_t NodeClock::global_for_drifting(int64_t local_ns, int64_t now) const {
  if (local_ns <= local_at(now)) return now;
  const int64_t d_local = local_ns - base_local_ns_;
  const int64_t rate = kPpmDenominator + drift_ppm_;
  const int64_t estimate =
      d_local <= kDriftSkewExactMax && d_local >= -kDriftSkewExactMax
          ? d_local * kPpmDenominator / rate
          : static_cast<int64_t>(static_cast<__int128>(d_local) * kPpmDenominator / rate);
  int64_t g = base_global_ns_ + estimate;
  if (g < now) g = now;
  // Integer rounding leaves g within a step or two of the answer.
  while (local_at(g) < local_ns) ++g;
  while (g > now && local_at(g - 1) >= local_ns) --g;
  return g;
}

io::WallTime NodeClock::wall_now() const {
  return io::WallTime(io::Duration(local_at(world_->now_ns()) + wall_minus_local_ns_));
}

void NodeClock::set_drift_ppm(int64_t ppm) {
  BROOK_ASSERT_LE(ppm, kDriftPpmMax);
  BROOK_ASSERT_GE(ppm, -kDriftPpmMax);
  const int64_t now = world_->now_ns();
  base_local_ns_ = local_at(now);
  base_global_ns_ = now;
  drift_ppm_ = ppm;
}

// --- NodeExecutor ---------------------------------------------------------

io::EventId NodeExecutor::post(io::Callback cb) {
  return world_->queue_.post(cb, node_->tag(TraceKind::kPost));
}

io::EventId NodeExecutor::call_at(io::Instant deadline, io::Callback cb) {
  // The drift-free conversion is inline; with drift, one call away.
  if (node_->clock().drifting()) [[unlikely]] return call_at_drifting(deadline, cb);
  const int64_t at = node_->clock().global_for(io::to_ns(deadline));
  return world_->queue_.schedule(at, cb, node_->tag(TraceKind::kTimer));
}

[[gnu::noinline]] io::EventId NodeExecutor::call_at_drifting(io::Instant deadline,
                                                             io::Callback cb) {
  const int64_t at = node_->clock().global_for(io::to_ns(deadline));
  return world_->queue_.schedule(at, cb, node_->tag(TraceKind::kTimer));
}

void NodeExecutor::cancel(io::EventId id) { world_->queue_.cancel(id); }

io::Instant NodeExecutor::now() const { return node_->clock().now(); }

io::EventId NodeExecutor::schedule_global(int64_t global_ns, TraceKind kind, io::Callback cb) {
  return world_->queue_.schedule(global_ns, cb, node_->tag(kind));
}

// --- Node -----------------------------------------------------------------

Node::Node(World* world, int index, uint64_t random_seed, uint64_t disk_seed,
           const NodeOptions& options)
    : world_(world),
      index_(index),
      host_(host_of(index)),
      executor_(world, this),
      clock_(world, options, world->options().wall_epoch_ns),
      random_(random_seed),
      disk_(io::Random(disk_seed), options.disk_faults),
      logger_(
          index, clock_,
          world->options().log_sink != nullptr ? *world->options().log_sink : io::null_log_sink(),
          world->options().log_level),
      buggify_(&world->buggify_),
      network_(&world->fabric_, index),
      context_(io::NodeId{index}, executor_, clock_, disk_, network_, random_, logger_, &buggify_) {
  tag_base_ = static_cast<uint32_t>(index_) | (incarnation_ << kTagIncarnationShift);
}

Node::~Node() { root_.reset(); }

io::Task<void> Node::run_main(Node* node, uint32_t incarnation, io::Task<void> main) {
  co_await std::move(main);
  if (node->incarnation_ == incarnation) node->main_done_ = true;
}

void Node::boot() {
  BROOK_ASSERT(root_ == nullptr);
  BROOK_ASSERT(main_ != nullptr);
  root_ = std::make_unique<io::TaskScope>(executor_);
  main_done_ = false;
  root_->spawn(run_main(this, incarnation_, main_(context_)));
}

void Node::start(MainFn main) {
  BROOK_ASSERT(!up());
  BROOK_ASSERT(main != nullptr);
  main_ = std::move(main);
  world_->record(TraceKind::kStart, index_, "");
  boot();
}

void Node::spawn(io::Task<void> task) {
  BROOK_ASSERT(up());
  root_->spawn(std::move(task));
}

void Node::crash() {
  if (!up()) return;
  if (world_->current_node() == index_) {
    // A task of this node cannot destroy its own frame: crash from the world.
    world_->schedule(io::Duration(0), [this] { crash_now(); });
    return;
  }
  crash_now();
}

void Node::crash_now() {
  if (!up()) return;
  world_->record(TraceKind::kCrash, index_, "");
  world_->fabric_.crash_node(index_);
  root_.reset();  // destroys every task of the node
  // Events of the dead incarnation that nobody cancelled are dropped.
  ++incarnation_;
  BROOK_ASSERT_LE(incarnation_, kIncarnationsMax);
  world_->incarnations_[static_cast<size_t>(index_)] = incarnation_;
  tag_base_ = static_cast<uint32_t>(index_) | (incarnation_ << kTagIncarnationShift);
  ++crashes_;
  main_done_ = false;
  if (drift_pending_) {
    clock_.set_drift_ppm(pending_drift_ppm_);
    drift_pending_ = false;
  }
  disk_.crash();
}

void Node::restart() {
  BROOK_ASSERT(main_ != nullptr);
  if (up()) {
    if (world_->current_node() == index_) {
      world_->schedule(io::Duration(0), [this] { restart(); });
      return;
    }
    crash_now();
  }
  world_->record(TraceKind::kRestart, index_, "");
  boot();
}

void Node::set_drift_ppm(int64_t ppm) {
  world_->record(TraceKind::kClock, index_, fmt::format("drift_ppm={}", ppm));
  if (up()) {
    pending_drift_ppm_ = ppm;
    drift_pending_ = true;
  } else {
    clock_.set_drift_ppm(ppm);
  }
}

void Node::jump_wall_clock(io::Duration delta) {
  world_->record(TraceKind::kClock, index_, fmt::format("wall_jump_ns={}", delta.count()));
  clock_.jump_wall(delta);
}

// --- World ----------------------------------------------------------------

struct World::Pending {
  World* world;
  io::EventId id = io::kNoEvent;
  std::function<void()> fn;
};

class World::RunScope {
 public:
  explicit RunScope(World* world) : previous_(g_running_world), context_(world->assert_text_) {
    g_running_world = world;
  }
  ~RunScope() { g_running_world = previous_; }
  RunScope(const RunScope&) = delete;
  RunScope& operator=(const RunScope&) = delete;

 private:
  World* previous_;
  io::AssertContext context_;
};

World::World(uint64_t seed, WorldOptions options)
    : seed_(seed),
      options_(std::move(options)),
      replay_command_(!options_.replay_command.empty() ? options_.replay_command
                      : options_.log_level == io::LogLevel::kDebug
                          ? replay_command_for(options_.scenario, seed) + " --log-level debug"
                          : replay_command_for(options_.scenario, seed)),
      assert_text_(fmt::format("simulation seed: {}\nreplay: {}", seed, replay_command_)),
      random_(seed),
      buggify_(random_.fork(), buggify_enabled(options_.buggify, seed)),
      fabric_(this, random_.fork(), options_.network) {
  hash_.add(seed);
}

World::~World() {
  // Tasks first: they hold connections, files and timers of the fabric and
  // the queue.
  for (auto& node : nodes_) node->root_.reset();
  nodes_.clear();
}

World* World::running() { return g_running_world; }

Node& World::add_node(const NodeOptions& options) {
  const int index = static_cast<int>(nodes_.size());
  BROOK_ASSERT_LT(nodes_.size(), size_t{kNodesMax});
  const uint64_t random_seed = random_.next_u64();
  const uint64_t disk_seed = random_.next_u64();
  fabric_.add_node(index, host_of(index));
  nodes_.push_back(std::make_unique<Node>(this, index, random_seed, disk_seed, options));
  incarnations_.push_back(nodes_.back()->incarnation_);
  return *nodes_.back();
}

[[gnu::always_inline]] inline void World::run_event(const io::EventQueue::Due& due) {
  if (!node_event_live(due.tag)) [[unlikely]] {
    ++events_dropped_;
    return;
  }
  hash_.add_record(due.time_ns, due.sequence, due.tag);
  const uint32_t node = due.tag & Node::kTagNodeMask;
  if (options_.trace != nullptr) [[unlikely]] {
    const auto kind = static_cast<TraceKind>((due.tag >> Node::kTagKindShift) & 0xF);
    options_.trace->write(TraceRecord{
        due.time_ns, due.sequence, node == kWorldNode ? -1 : static_cast<int32_t>(node), kind, {}});
  }
  current_node_ = node;
  due.callback();
  current_node_ = kWorldNode;
  ++events_run_;
}

bool World::run_until(const std::function<bool()>& done) {
  RunScope scope(this);
  for (;;) {
    if (done()) return true;
    auto due = queue_.pop_due(std::numeric_limits<int64_t>::max());
    if (!due) return done();
    run_event(*due);
  }
}

bool World::run_until(const std::function<bool()>& done, io::Duration limit) {
  RunScope scope(this);
  const int64_t until = now_ns() + limit.count();
  for (;;) {
    if (done()) return true;
    auto due = queue_.pop_due(until);
    if (!due) break;
    run_event(*due);
  }
  queue_.advance_to(until);
  return done();
}

void World::run_for(io::Duration d) {
  RunScope scope(this);
  const int64_t until = now_ns() + d.count();
  while (auto due = queue_.pop_due(until)) run_event(*due);
  queue_.advance_to(until);
}

uint64_t World::run_until_idle() {
  RunScope scope(this);
  const uint64_t before = events_run_;
  while (auto due = queue_.pop_due(std::numeric_limits<int64_t>::max())) run_event(*due);
  return events_run_ - before;
}

io::EventId World::schedule(io::Duration delay, std::function<void()> fn) {
  auto pending = std::make_unique<Pending>();
  pending->world = this;
  pending->fn = std::move(fn);
  const io::EventId id =
      queue_.schedule(now_ns() + delay.count(), io::Callback{&run_pending, pending.get()},
                      world_tag(TraceKind::kWorld));
  pending->id = id;
  pending_.emplace(id, std::move(pending));
  return id;
}

void World::run_pending(void* arg) {
  auto* pending = static_cast<Pending*>(arg);
  World* world = pending->world;
  auto it = world->pending_.find(pending->id);
  BROOK_ASSERT(it != world->pending_.end());
  std::unique_ptr<Pending> owned = std::move(it->second);
  world->pending_.erase(it);
  owned->fn();
}

void World::cancel(io::EventId id) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  queue_.cancel(id);
  pending_.erase(it);
}

io::EventId World::schedule_fabric(int64_t at_ns, int node, io::Callback cb) {
  const uint32_t tag =
      static_cast<uint32_t>(node) | (static_cast<uint32_t>(TraceKind::kNet) << Node::kTagKindShift);
  return queue_.schedule(at_ns, cb, tag);
}

void World::record(TraceKind kind, int node, std::string_view detail) {
  const uint64_t sequence = records_++;
  hash_.add(static_cast<uint64_t>(now_ns()));
  hash_.add((sequence << 16) ^ (static_cast<uint64_t>(kind) << 8) ^
            static_cast<uint64_t>(static_cast<uint32_t>(node) & Node::kTagNodeMask));
  hash_.add_bytes(detail);
  if (options_.trace != nullptr) {
    options_.trace->write(TraceRecord{now_ns(), sequence, node, kind, detail});
  }
}

// --- faults ---------------------------------------------------------------

namespace {
std::string join_nodes(const std::vector<int>& nodes) {
  std::string out;
  for (int n : nodes) out += fmt::format("{}{}", out.empty() ? "" : ",", n);
  return out;
}
}  // namespace

void World::partition(const std::vector<int>& a, const std::vector<int>& b, PartitionMode mode) {
  record(TraceKind::kPartition, -1,
         fmt::format("{}{}{}", join_nodes(a), mode == PartitionMode::kSymmetric ? "<->" : "->",
                     join_nodes(b)));
  fabric_.partition(a, b, mode);
}

void World::heal() {
  record(TraceKind::kHeal, -1, "");
  fabric_.heal();
}

void World::reset_connections(int node) {
  record(TraceKind::kReset, node, "");
  fabric_.reset_node(node);
}

void World::set_latency(const LatencyModel& latency) {
  record(TraceKind::kNote, -1,
         fmt::format("latency min={} jitter={} stall_p={}", latency.min.count(),
                     latency.jitter.count(), latency.stall_probability));
  fabric_.set_latency(latency);
}

void World::set_link_latency(int from, int to, const LatencyModel& latency) {
  record(TraceKind::kNote, from,
         fmt::format("link latency to={} min={} jitter={}", to, latency.min.count(),
                     latency.jitter.count()));
  fabric_.set_link_latency(from, to, latency);
}

void World::clog(int node, io::Duration d) {
  record(TraceKind::kClog, node, fmt::format("for_ns={}", d.count()));
  fabric_.clog(node, now_ns() + d.count());
}

void World::set_disk_faults(int node, const DiskFaults& faults) {
  record(TraceKind::kDiskFaults, node, "");
  this->node(node).disk().set_faults(faults);
}

}  // namespace brook::sim
