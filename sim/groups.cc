// sim/groups.cc: the "groups" scenario (see groups.h).
#include "sim/groups.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "coordinators/group/group_coordinator.h"
#include "coordinators/runtime/record_log.h"
#include "net/client/admin.h"
#include "net/client/group.h"
#include "sim/broker.h"
#include "sim/faults.h"
#include "sim/world.h"

namespace brook::sim {

namespace {

using namespace std::chrono_literals;

constexpr uint64_t kConfigSalt = 0x6772'6f75'7073'0001ULL;  // "groups"
constexpr std::string_view kTopic = "events";
constexpr std::string_view kGroup = "workers";
constexpr size_t kFailuresMax = 10;

struct GroupsSimConfig {
  FaultConfig faults;
  int nodes = 3;
  int partitions = 4;
  int members = 3;
  int offsets_partitions = 3;
  io::Duration initial_delay{0};
  io::Duration session_timeout = 6s;
  io::Duration rebalance_timeout = 10s;
  io::Duration heartbeat_interval = 1s;
  io::Duration commit_interval_max = 2s;
  io::Duration workload = 40s;
  io::Duration quiet_max = 120s;
  bool mutant_unfenced_commits = false;
  // The consumer protocol (KIP-848) instead of JoinGroup/SyncGroup.
  bool consumer_protocol = false;
  // Each run of a member picks its protocol at random, so the group keeps
  // converting between the two and holds members of both.
  bool mixed = false;

  static GroupsSimConfig draw(uint64_t seed) {
    io::Random r(seed ^ kConfigSalt);
    GroupsSimConfig c;
    c.faults = FaultConfig::draw(r);
    c.partitions = static_cast<int>(r.uniform_range(1, 6));
    c.members = static_cast<int>(r.uniform_range(1, 4));
    c.offsets_partitions = static_cast<int>(r.uniform_range(1, 4));
    c.initial_delay = r.uniform(2) == 0 ? 0ms : uniform_duration(r, 10ms, 1s);
    c.session_timeout = uniform_duration(r, 2s, 8s);
    c.rebalance_timeout = uniform_duration(r, 3s, 12s);
    c.heartbeat_interval = c.session_timeout / 4;
    c.commit_interval_max = uniform_duration(r, 100ms, 3s);
    c.faults.draw_graceful_stops(seed);
    c.faults.draw_full_disks(seed);
    return c;
  }
  std::string describe() const {
    return fmt::format(
        "{}: nodes={} partitions={} members={} offsets-partitions={} initial-delay={} session={} "
        "rebalance={} heartbeat={} commit-interval<={}\n{}",
        mixed ? "mixed-groups" : consumer_protocol ? "consumer-groups" : "groups", nodes, partitions, members, offsets_partitions,
        seconds(initial_delay), seconds(session_timeout),
        seconds(rebalance_timeout), seconds(heartbeat_interval), seconds(commit_interval_max), faults.describe());
  }
};

// What one member last learnt: its generation and partitions, and whether
// a heartbeat in that generation has succeeded since.
struct MemberView {
  int32_t generation = -1;
  std::string member_id;
  std::vector<int32_t> partitions;
  bool confirmed = false;
  bool up = false;
};

struct Shared {
  explicit Shared(GroupsSimConfig c)
      : config(std::move(c)), members(static_cast<size_t>(config.members)), stops(config.nodes),
        running(static_cast<size_t>(config.nodes), nullptr) {}

  GroupsSimConfig config;
  std::vector<io::Address> brokers;
  std::vector<io::Address> controllers;
  std::vector<MemberView> members;
  GracefulStops stops;
  // The running brokers (null while a node is down).
  std::vector<broker::Broker*> running;
  // Generation -> partition -> the member id SyncGroup gave it to.
  std::map<int32_t, std::map<int32_t, std::string>> owners;
  // Partition -> the largest committed offset a commit was acknowledged for.
  std::map<int32_t, int64_t> acked_commit;
  std::vector<std::string> violations;
  bool topic_ready = false;
  bool final_checked = false;
  uint64_t joins = 0;
  uint64_t generations = 0;
  uint64_t commits_acked = 0;
  uint64_t commits_failed = 0;
  uint64_t takeovers_checked = 0;
  uint64_t broker_starts = 0;
  uint64_t member_starts = 0;

  void violation(std::string what) {
    if (violations.size() < kFailuresMax) violations.push_back(std::move(what));
  }
};

client::ClientOptions client_options(Shared* s, std::string name) {
  return sim_client_options(s->brokers, std::move(name));
}

client::GroupOptions group_options(Shared* s, bool consumer_protocol) {
  client::GroupOptions g;
  g.group_id = std::string(kGroup);
  g.topics = {std::string(kTopic)};
  g.session_timeout = s->config.session_timeout;
  g.rebalance_timeout = s->config.rebalance_timeout;
  g.heartbeat_interval = s->config.heartbeat_interval;
  g.consumer_protocol = consumer_protocol;
  return g;
}

io::Task<void> server_main(io::Context* ctx, Shared* s, int index) {
  ++s->broker_starts;
  ServerNodeOptions o;
  o.index = index;
  o.brokers = s->brokers;
  o.controllers = s->controllers;
  o.partitions = s->config.partitions;
  o.replication_factor = s->config.nodes;
  o.min_insync = std::min(2, s->config.nodes);
  o.offsets_partitions = s->config.offsets_partitions;
  o.offsets_replication_factor = s->config.nodes;
  o.group_initial_delay = s->config.initial_delay;
  o.group_min_session_timeout = 1s;
  o.group_mutant_unfenced_commits = s->config.mutant_unfenced_commits;
  o.group_consumer_session_timeout = s->config.session_timeout;
  o.group_consumer_heartbeat_interval = s->config.heartbeat_interval;
  o.on_broker = [s, index](broker::Broker* b) { s->running[static_cast<size_t>(index)] = b; };
  s->stops.wire(s->config.faults, index, o, [s](std::string what) { s->violation(std::move(what)); });
  co_await server_node_main(ctx, std::move(o));
}

io::Task<void> ensure_topic(io::Context* ctx, Shared* s, client::Cluster* cluster) {
  if (s->topic_ready) co_return;
  co_await create_topic_until_done(ctx, cluster, std::string(kTopic), s->config.partitions, s->config.nodes);
  s->topic_ready = true;
}

// A commit was acknowledged: its offsets are the least each partition's
// committed offset may be from now on.
void record_acked(Shared* s, const std::map<client::TopicPartition, int64_t>& committed) {
  ++s->commits_acked;
  for (const auto& [tp, off] : committed) {
    int64_t& high = s->acked_commit[tp.partition];
    high = std::max(high, off);
  }
}

// One run of member `index`: counted, and its view fresh and marked up
// until the run ends (a crash destroys it).
struct MemberUp {
  MemberUp(Shared* s, int index) : view(s->members[static_cast<size_t>(index)]) {
    ++s->member_starts;
    view = MemberView{};
    view.up = true;
  }
  ~MemberUp() { view.up = false; }
  MemberUp(const MemberUp&) = delete;
  MemberUp& operator=(const MemberUp&) = delete;
  MemberView& view;
};

// One group member: joins, checks where it starts against the commits
// acknowledged so far, then "consumes" (advances its positions), commits
// and heartbeats until the group rebalances, and joins again.
io::Task<void> member_main(io::Context* ctx, Shared* s, int index) {
  MemberUp up(s, index);
  MemberView& view = up.view;
  client::Cluster cluster(*ctx, client_options(s, fmt::format("member-{}", index)));
  co_await ensure_topic(ctx, s, &cluster);
  client::GroupMember member(cluster, group_options(s, false));
  const io::Duration hb = s->config.heartbeat_interval;
  while (true) {
    view.confirmed = false;
    absl::StatusOr<client::GroupAssignment> joined = co_await member.join(ctx->clock().now() + 30s);
    if (!joined.ok()) {
      ctx->log().debug("groups-sim: member {} join: {}", index, joined.status().ToString());
      co_await ctx->clock().sleep_for(200ms);
      continue;
    }
    ++s->joins;
    const client::GroupAssignment& a = *joined;
    ctx->log().info("groups-sim: member {} is {} in generation {} with {} partitions", index, a.member_id,
                    a.generation, a.partitions.size());
    view.generation = a.generation;
    view.member_id = a.member_id;
    view.partitions.clear();
    // No two members of one generation own the same partition.
    std::map<int32_t, std::string>& owned = s->owners[a.generation];
    if (owned.empty()) ++s->generations;
    for (const client::TopicPartition& tp : a.partitions) {
      view.partitions.push_back(tp.partition);
      auto [it, fresh] = owned.emplace(tp.partition, a.member_id);
      if (!fresh && it->second != a.member_id) {
        s->violation(fmt::format("generation {}: partition {} assigned to both {} and {}", a.generation,
                                 tp.partition, it->second, a.member_id));
      }
    }
    // Where the member starts: never below a commit acknowledged before it
    // asked.
    const std::map<int32_t, int64_t> acked_before = s->acked_commit;
    absl::StatusOr<std::map<client::TopicPartition, int64_t>> starts = co_await member.committed(a.partitions);
    if (!starts.ok()) continue;
    std::map<client::TopicPartition, int64_t> positions;
    for (const auto& [tp, committed] : *starts) {
      ++s->takeovers_checked;
      auto acked = acked_before.find(tp.partition);
      if (acked != acked_before.end() && committed < acked->second) {
        s->violation(fmt::format("member {} (generation {}) took over partition {} at committed offset {}, "
                                 "below the acknowledged commit {}",
                                 a.member_id, a.generation, tp.partition, committed, acked->second));
      }
      positions[tp] = std::max<int64_t>(committed, 0);
    }
    io::Instant next_commit = ctx->clock().now();
    bool rebalancing = false;
    while (true) {
      co_await ctx->clock().sleep_for(hb);
      for (auto& [tp, pos] : positions) pos += static_cast<int64_t>(ctx->random().uniform(10));
      if (!positions.empty() && ctx->clock().now() >= next_commit) {
        next_commit = ctx->clock().now() + uniform_duration(ctx->random(), 0ms, s->config.commit_interval_max);
        const std::map<client::TopicPartition, int64_t> committing = positions;
        absl::Status c = co_await member.commit(committing);
        std::vector<int64_t> values;
        for (const auto& [tp, off] : committing) values.push_back(off);
        ctx->log().debug("groups-sim: member {} generation {} commit [{}]: {}", index, a.generation,
                         fmt::join(values, ","), c.ToString());
        if (c.ok()) {
          record_acked(s, committing);
        } else {
          ++s->commits_failed;
        }
      }
      absl::Status h = co_await member.heartbeat();
      if (h.ok()) {
        view.confirmed = true;
        continue;
      }
      ctx->log().info("groups-sim: member {} heartbeat in generation {}: {}", index, a.generation, h.ToString());
      // A coordinator that moved or did not answer is looked up again and
      // the heartbeat retried; the member rejoins when the group says so.
      if (absl::IsUnavailable(h) || absl::IsDeadlineExceeded(h)) {
        if (!absl::StrContains(h.message(), "REBALANCE_IN_PROGRESS")) continue;
      }
      rebalancing = absl::StrContains(h.message(), "REBALANCE_IN_PROGRESS");
      break;
    }
    view.confirmed = false;
    if (rebalancing && !positions.empty()) {
      // Like a consumer's revocation: commit what was consumed, then rejoin.
      absl::Status c = co_await member.commit(positions);
      if (c.ok()) record_acked(s, positions);
    }
  }
}

// One member of the consumer protocol (KIP-848): heartbeats report what it
// owns; a new assignment first has the member commit and drop the
// partitions taken away, then read where to start on the ones added. A
// fenced member (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) drops everything
// without committing and joins again.
io::Task<void> consumer_member_main(io::Context* ctx, Shared* s, int index) {
  MemberUp up(s, index);
  MemberView& view = up.view;
  client::Cluster cluster(*ctx, client_options(s, fmt::format("member-{}", index)));
  co_await ensure_topic(ctx, s, &cluster);
  client::GroupMember member(cluster, group_options(s, true));
  std::map<client::TopicPartition, int64_t> positions;
  io::Instant next_commit = ctx->clock().now();
  int32_t epoch = 0;
  // Consumes for `wait`, then commits when it is time.
  auto consume_and_commit = [&](io::Duration wait) -> io::Task<void> {
    co_await ctx->clock().sleep_for(wait);
    for (auto& [tp, pos] : positions) pos += static_cast<int64_t>(ctx->random().uniform(10));
    if (positions.empty() || ctx->clock().now() < next_commit) co_return;
    next_commit = ctx->clock().now() + uniform_duration(ctx->random(), 0ms, s->config.commit_interval_max);
    const std::map<client::TopicPartition, int64_t> committing = positions;
    absl::Status c = co_await member.commit(committing);
    ctx->log().debug("groups-sim: member {} epoch {} commit: {}", index, epoch, c.ToString());
    if (c.ok()) {
      record_acked(s, committing);
    } else {
      ++s->commits_failed;
    }
  };
  auto owned = [&] {
    std::vector<client::TopicPartition> out;
    for (const auto& [tp, pos] : positions) out.push_back(tp);
    return out;
  };
  while (true) {
    absl::StatusOr<client::ConsumerHeartbeat> h = co_await member.consumer_heartbeat(owned());
    if (!h.ok()) {
      ctx->log().info("groups-sim: member {} heartbeat at epoch {}: {}", index, epoch, h.status().ToString());
      view.confirmed = false;
      if (absl::IsAborted(h.status())) {
        positions.clear();  // fenced: the partitions are someone else's now
        view.partitions.clear();
        epoch = 0;
        continue;
      }
      // Not fenced as far as the member knows: it goes on consuming and
      // committing (a zombie's commits must be refused).
      co_await consume_and_commit(s->config.heartbeat_interval / 2);
      continue;
    }
    if (epoch == 0) ++s->joins;
    epoch = h->member_epoch;
    view.member_id = member.member_id();
    if (h->assignment.has_value()) {
      std::set<client::TopicPartition> next(h->assignment->begin(), h->assignment->end());
      // Revoked: commit what was consumed, then let them go.
      std::map<client::TopicPartition, int64_t> revoked;
      for (const auto& [tp, pos] : positions) {
        if (!next.contains(tp)) revoked[tp] = pos;
      }
      if (!revoked.empty()) {
        absl::Status c = co_await member.commit(revoked);
        if (c.ok()) {
          record_acked(s, revoked);
        } else {
          ++s->commits_failed;
        }
        for (const auto& [tp, pos] : revoked) positions.erase(tp);
      }
      // No two members own a partition at one member epoch.
      std::map<int32_t, std::string>& owners = s->owners[epoch];
      if (owners.empty()) ++s->generations;
      for (const client::TopicPartition& tp : next) {
        auto [it, fresh] = owners.emplace(tp.partition, view.member_id);
        if (!fresh && it->second != view.member_id) {
          s->violation(fmt::format("member epoch {}: partition {} assigned to both {} and {}", epoch, tp.partition,
                                   it->second, view.member_id));
        }
      }
      // Added: start at the committed offset, never below a commit
      // acknowledged before asking.
      std::vector<client::TopicPartition> added;
      for (const client::TopicPartition& tp : next) {
        if (!positions.contains(tp)) added.push_back(tp);
      }
      if (!added.empty()) {
        const std::map<int32_t, int64_t> acked_before = s->acked_commit;
        absl::StatusOr<std::map<client::TopicPartition, int64_t>> starts = co_await member.committed(added);
        if (!starts.ok()) {
          // Not taken yet: the next heartbeat reports them not owned and
          // the coordinator hands them over again.
          view.confirmed = false;
          view.partitions.clear();
          for (const auto& [tp, pos] : positions) view.partitions.push_back(tp.partition);
          co_await ctx->clock().sleep_for(s->config.heartbeat_interval / 4);
          continue;
        }
        for (const auto& [tp, committed] : *starts) {
          ++s->takeovers_checked;
          auto acked = acked_before.find(tp.partition);
          if (acked != acked_before.end() && committed < acked->second) {
            s->violation(fmt::format("member {} (epoch {}) took over partition {} at committed offset {}, "
                                     "below the acknowledged commit {}",
                                     view.member_id, epoch, tp.partition, committed, acked->second));
          }
          positions[tp] = std::max<int64_t>(committed, 0);
        }
      }
    }
    view.generation = epoch;
    view.partitions.clear();
    for (const auto& [tp, pos] : positions) view.partitions.push_back(tp.partition);
    view.confirmed = true;
    co_await consume_and_commit(std::min(h->heartbeat_interval, s->config.heartbeat_interval));
  }
}

// After the heal: the group settled on one generation that every member
// is in (confirmed by a heartbeat), owning every partition once.
bool settled(const Shared& s, std::string* why) {
  int32_t generation = -1;
  std::set<int32_t> owned;
  size_t count = 0;
  for (size_t i = 0; i < s.members.size(); ++i) {
    const MemberView& m = s.members[i];
    if (!m.up || !m.confirmed) {
      *why = fmt::format("member {} ({}) is not in a confirmed generation (last {})", i, m.up ? "up" : "down",
                         m.generation);
      return false;
    }
    if (generation >= 0 && m.generation != generation) {
      *why = fmt::format("members are in generations {} and {}", generation, m.generation);
      return false;
    }
    generation = m.generation;
    owned.insert(m.partitions.begin(), m.partitions.end());
    count += m.partitions.size();
  }
  if (static_cast<int>(owned.size()) != s.config.partitions || count != owned.size()) {
    *why = fmt::format("generation {} owns partitions [{}] ({} assignments) of {}", generation, fmt::join(owned, ","),
                       count, s.config.partitions);
    return false;
  }
  return true;
}

// The committed offsets after the heal hold every acknowledged commit.
io::Task<void> final_check_main(io::Context* ctx, Shared* s) {
  client::Cluster cluster(*ctx, client_options(s, "checker"));
  client::GroupMember reader(cluster, group_options(s, s->config.consumer_protocol));
  std::vector<client::TopicPartition> all;
  for (int32_t p = 0; p < s->config.partitions; ++p) all.emplace_back(std::string(kTopic), p);
  while (true) {
    // Commits acknowledged after this snapshot may be newer than the answer.
    const std::map<int32_t, int64_t> acked_before = s->acked_commit;
    absl::StatusOr<std::map<client::TopicPartition, int64_t>> committed = co_await reader.committed(all);
    if (committed.ok()) {
      for (const auto& [tp, off] : *committed) {
        auto acked = acked_before.find(tp.partition);
        if (acked != acked_before.end() && off < acked->second) {
          s->violation(fmt::format("partition {}: committed offset {} is below the acknowledged commit {}",
                                   tp.partition, off, acked->second));
        }
      }
      s->final_checked = true;
      co_return;
    }
    co_await ctx->clock().sleep_for(200ms);
  }
}

}  // namespace

absl::StatusOr<ScenarioResult> run_groups(const ScenarioOptions& options) {
  GroupsSimConfig config = GroupsSimConfig::draw(options.seed);
  config.consumer_protocol = options.name.starts_with("consumer-groups");
  config.mixed = options.name.starts_with("mixed-groups");
  config.mutant_unfenced_commits = options.name.ends_with("-mutant-fence");
  if (options.name.ends_with("-loss")) config.faults.draw_node_loss(options.seed);
  const WorldOptions world_options = scenario_world_options(options, config.faults.network);
  Shared shared(config);  // before the World: dying tasks touch it
  World world(options.seed, world_options);
  print_run_start(options, world, config.describe());
  io::Random node_random(options.seed ^ (kConfigSalt << 1));
  const std::vector<Node*> servers =
      add_server_nodes(world, config.faults, node_random, config.nodes, &shared.brokers, &shared.controllers);
  std::vector<Node*> clients;
  for (int i = 0; i < config.members; ++i) clients.push_back(&world.add_node(config.faults.node_options(node_random)));
  Shared* s = &shared;
  for (int i = 0; i < config.nodes; ++i) {
    servers[static_cast<size_t>(i)]->start([s, i](io::Context& ctx) { return server_main(&ctx, s, i); });
  }
  for (int i = 0; i < config.members; ++i) {
    clients[static_cast<size_t>(i)]->start([s, i](io::Context& ctx) {
      // (A restart draws again: members move between the protocols.)
      const bool consumer = s->config.mixed ? ctx.random().uniform(2) == 0 : s->config.consumer_protocol;
      return consumer ? consumer_member_main(&ctx, s, i) : member_main(&ctx, s, i);
    });
  }
  FaultSchedule faults(world, config.faults);
  shared.stops.attach(faults);
  // The group's coordinator partition (as Kafka places a group).
  const int32_t coordinator_partition = runtime::partition_for_key(kGroup, config.offsets_partitions);
  if (config.faults.node_loss_after.count() > 0) {
    // A server whose loss the group's topic and the offsets topic can take
    // (both exist once a member has joined).
    faults.pick_lost = [&] {
      return spare_server(world, shared.running, 2,
                          {{std::string(kTopic), config.partitions},
                           {std::string(group::kOffsetsTopic), config.offsets_partitions}});
    };
  }
  // The group's coordinator partition has no leader for good: its only
  // in-sync replica is the server lost for good (offline_with_lost_server).
  // Nothing can then answer for the group, as in Kafka with unclean leader
  // election off: the liveness and final checks are left out.
  auto coordinator_offline = [&] {
    return offline_with_lost_server(shared.running, faults.lost_node(), group::kOffsetsTopic,
                                    coordinator_partition);
  };
  faults.start();
  world.run_for(config.workload);
  faults.stop();
  // Liveness: the group settles, and stays settled on one generation for
  // three session timeouts (a view can look settled on a generation the
  // coordinator already left; that does not last).
  std::string why = "not checked";
  int32_t settled_generation = -1;
  int64_t settled_since_ns = -1;
  const int64_t hold_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(3 * config.session_timeout).count();
  bool offline = false;
  const bool live = world.run_until(
      [&] {
        if (coordinator_offline()) {
          offline = true;
          return true;
        }
        if (!settled(shared, &why)) {
          settled_since_ns = -1;
          return false;
        }
        const int32_t generation = shared.members.front().generation;
        if (settled_since_ns < 0 || generation != settled_generation) {
          settled_generation = generation;
          settled_since_ns = world.now_ns();
        }
        if (world.now_ns() - settled_since_ns < hold_ns) {
          why = fmt::format("settled on generation {} for less than {}", generation,
                            seconds(3 * config.session_timeout));
          return false;
        }
        return true;
      },
      config.quiet_max);
  faults.finish();
  Node& checker = *clients.front();
  checker.crash();
  if (!offline) {
    checker.start([s](io::Context& ctx) { return final_check_main(&ctx, s); });
    world.run_until([&] { return shared.final_checked; }, 60s);
  }

  ScenarioResult result;
  result.failures = shared.violations;
  if (!live && result.failures.size() < kFailuresMax) {
    result.failures.push_back(
        fmt::format("liveness: the group did not settle within {} of the heal: {}", seconds(config.quiet_max), why));
  }
  if (!offline && !shared.final_checked && result.failures.size() < kFailuresMax) {
    result.failures.push_back("the final offset check did not finish");
  }
  result.passed = result.failures.empty();
  result.trace_hash = world.trace_hash();
  result.events = world.events_run();
  result.simulated = world.elapsed();
  result.replay_command = world.replay_command();
  result.summary = fmt::format(
      "{}: joins={} generations={} commits acked={} failed={} takeovers-checked={} member-starts={} "
      "broker-starts={}{}; faults: {} buggify-fired={}",
      options.name, shared.joins, shared.generations, shared.commits_acked, shared.commits_failed, shared.takeovers_checked,
      shared.member_starts, shared.broker_starts,
      offline ? fmt::format(" coordinator partition {} offline with the lost node", coordinator_partition) : "",
      faults.counters(), world.buggify().fired());
  return result;
}

}  // namespace brook::sim
