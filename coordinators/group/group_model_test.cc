// coordinators/group/group_model_test.cc
//
// RapidCheck: random sequences of JoinGroup, SyncGroup, Heartbeat,
// OffsetCommit, LeaveGroup, member crashes and passing time from a few
// clients against the coordinator in the simulator. A reference model of
// the classic protocol's decisions says what each Heartbeat and
// OffsetCommit must answer from the group's state when it is made, and the
// run must keep the protocol's invariants:
// - a generation's SyncGroup answers never give one partition to two
//   members, and generations only grow;
// - OffsetFetch returns the last commit that was accepted;
// - when the clients still alive keep heartbeating and rejoining, the
//   group ends Stable with exactly them as members.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <fmt/format.h>

#include <array>
#include <set>

#include "coordinators/group/group_coordinator.h"
#include "sim/world.h"

namespace brook::group {
namespace {

using namespace std::chrono_literals;
using net::Error;

class MemoryLog final : public CoordinatorLog {
 public:
  explicit MemoryLog(io::Context& ctx) : ctx_(&ctx) {}
  io::Task<Written> write(int32_t, int32_t, std::vector<CoordinatorRecord> records) override {
    co_await ctx_->clock().sleep_for(1ms);
    const int64_t base = next_;
    next_ += static_cast<int64_t>(records.size());
    co_return Written{Error::kNone, base};
  }
  io::Task<Written> write_transactional(int32_t partition, int32_t epoch, int64_t, int16_t, uint64_t,
                                        std::vector<CoordinatorRecord> records) override {
    co_return co_await write(partition, epoch, std::move(records));
  }
  bool partition_exists(const std::string&, int32_t) const override { return true; }
  std::optional<Topic> topic(const std::string&) const override { return std::nullopt; }
  std::optional<Topic> topic(const TopicId&) const override { return std::nullopt; }
  std::vector<std::string> topic_names() const override { return {}; }

 private:
  io::Context* ctx_;
  int64_t next_ = 0;
};

constexpr int kClients = 3;
constexpr const char* kGroup = "g";

struct Client {
  std::string member_id;
  int32_t generation = -1;
  bool leader = false;
  std::vector<std::string> members;  // the leader's join answer
  bool crashed = false;
  std::shared_ptr<std::optional<net::JoinGroupResponse>> join;
  std::shared_ptr<std::optional<net::SyncGroupResponse>> sync;
};

struct Model {
  Model() : world(11) {
    node = &world.add_node();
    node->start([this](io::Context& ctx) -> io::Task<void> {
      log = std::make_unique<MemoryLog>(ctx);
      GroupCoordinatorConfig c;
      c.offsets_topic_partitions = 1;
      c.initial_rebalance_delay = 0ms;
      c.min_session_timeout = 1s;
      coordinator = std::make_unique<GroupCoordinator>(ctx, *log, c);
      coordinator->begin_load(0, 0);
      coordinator->finish_load(0, 0);
      co_await coordinator->run();
    });
    world.run_for(1ms);
  }
  ~Model() {
    node->crash();
    world.run_for(1ms);
  }

  template <typename T>
  static io::Task<void> capture(io::Task<T> task, std::shared_ptr<std::optional<T>> out) {
    *out = co_await std::move(task);
  }

  void join(Client& c) {
    if (c.join) return;
    net::JoinGroupRequest r;
    r.group_id = kGroup;
    r.session_timeout_ms = 3000;
    r.rebalance_timeout_ms = 5000;
    r.member_id = c.member_id;
    r.protocol_type = "consumer";
    auto& p = r.protocols.emplace_back();
    p.name = "range";
    p.metadata = io::Buffer::copy_of(std::string_view("m"));
    c.join = std::make_shared<std::optional<net::JoinGroupResponse>>();
    node->spawn(capture(coordinator->join_group(std::move(r), 5, "client", ""), c.join));
  }
  void sync(Client& c) {
    if (c.sync || c.generation < 0) return;
    net::SyncGroupRequest r;
    r.group_id = kGroup;
    r.generation_id = c.generation;
    r.member_id = c.member_id;
    if (c.leader) {
      // Partition i to the i-th member: disjoint by construction.
      for (size_t i = 0; i < c.members.size(); ++i) {
        auto& a = r.assignments.emplace_back();
        a.member_id = c.members[i];
        a.assignment = io::Buffer::copy_of(std::to_string(i));
      }
    }
    c.sync = std::make_shared<std::optional<net::SyncGroupResponse>>();
    node->spawn(capture(coordinator->sync_group(std::move(r), 3), c.sync));
  }
  // What the model says a Heartbeat / OffsetCommit in (member, generation)
  // must answer now.
  Error expect_heartbeat(const Client& c) const {
    const std::string state = coordinator->group_state(kGroup);
    const auto members = coordinator->group_members(kGroup);
    const bool member = std::find(members.begin(), members.end(), c.member_id) != members.end();
    if (state == "Dead" || state == "Empty" || !member) return Error::kUnknownMemberId;
    if (c.generation != coordinator->group_generation(kGroup)) return Error::kIllegalGeneration;
    if (state == "PreparingRebalance") return Error::kRebalanceInProgress;
    return Error::kNone;
  }
  Error expect_commit(const Client& c) const {
    const std::string state = coordinator->group_state(kGroup);
    const auto members = coordinator->group_members(kGroup);
    const bool member = std::find(members.begin(), members.end(), c.member_id) != members.end();
    // Generation -1 is a commit without group management: allowed while the
    // group has no members (or does not exist yet).
    if (c.generation < 0 && (state == "Dead" || state == "Empty")) return Error::kNone;
    if (state == "Dead") return Error::kIllegalGeneration;
    if (state == "CompletingRebalance") return Error::kRebalanceInProgress;
    if (!member) return Error::kUnknownMemberId;
    if (c.generation != coordinator->group_generation(kGroup)) return Error::kIllegalGeneration;
    return Error::kNone;
  }
  // Runs the commit right away (its checks happen before its first
  // suspension), comparing with the model's answer taken just before.
  static io::Task<void> commit_checked(Model* m, Client* c, int64_t offset, bool* mismatch, std::string* why) {
    const Error expected = m->expect_commit(*c);
    net::OffsetCommitRequest r;
    r.group_id = kGroup;
    r.generation_id_or_member_epoch = c->generation;
    r.member_id = c->member_id;
    auto& t = r.topics.emplace_back();
    t.name = "t";
    auto& p = t.partitions.emplace_back();
    p.partition_index = 0;
    p.committed_offset = offset;
    net::OffsetCommitResponse out = co_await m->coordinator->commit_offsets(std::move(r), 8);
    const int16_t got = out.topics[0].partitions[0].error_code;
    if (got != net::code(expected)) {
      *mismatch = true;
      *why = fmt::format("commit by {} in generation {}: expected {}, got {}", c->member_id, c->generation,
                         net::error_name(net::code(expected)), net::error_name(got));
    }
    if (got == 0) m->last_commit = offset;
  }
  int64_t fetched() const {
    net::OffsetFetchRequest r;
    r.group_id = kGroup;
    auto& t = r.topics->emplace_back();
    t.name = "t";
    t.partition_indexes = {0};
    return coordinator->fetch_offsets(r, 7).topics[0].partitions[0].committed_offset;
  }
  // Collects finished joins and syncs; checks SyncGroup answers.
  void settle(std::array<Client, kClients>& clients) {
    for (Client& c : clients) {
      if (c.join && c.join->has_value()) {
        const net::JoinGroupResponse& r = **c.join;
        if (r.error_code == net::code(Error::kMemberIdRequired)) {
          c.member_id = r.member_id;
        } else if (r.error_code == 0) {
          c.member_id = r.member_id;
          c.generation = r.generation_id;
          c.leader = r.leader == r.member_id;
          c.members.clear();
          for (const auto& m : r.members) c.members.push_back(m.member_id);
        } else if (r.error_code == net::code(Error::kUnknownMemberId)) {
          c.member_id.clear();
          c.generation = -1;
        }
        c.join.reset();
      }
      if (c.sync && c.sync->has_value()) {
        const net::SyncGroupResponse& r = **c.sync;
        if (r.error_code == 0 && !r.assignment.empty()) {
          auto [it, fresh] = owners[c.generation].emplace(std::string(r.assignment.view()), c.member_id);
          RC_ASSERT(fresh || it->second == c.member_id);
        }
        c.sync.reset();
      }
    }
  }

  sim::World world;
  sim::Node* node = nullptr;
  std::unique_ptr<MemoryLog> log;
  std::unique_ptr<GroupCoordinator> coordinator;
  std::map<int32_t, std::map<std::string, std::string>> owners;  // generation -> partition -> member
  int64_t last_commit = -1;
};

RC_GTEST_PROP(GroupModel, ClassicProtocolKeepsItsInvariants, ()) {
  const auto ops = *rc::gen::container<std::vector<std::tuple<int, int, int>>>(rc::gen::tuple(
      rc::gen::inRange(0, 7), rc::gen::inRange(0, kClients), rc::gen::inRange(0, 50)));
  Model m;
  std::array<Client, kClients> clients;
  int32_t last_generation = 0;
  for (const auto& [kind, who, value] : ops) {
    Client& c = clients[static_cast<size_t>(who)];
    if (c.crashed && kind != 6) continue;
    switch (kind) {
      case 0:
        m.join(c);
        break;
      case 1:
        m.sync(c);
        break;
      case 2: {
        net::HeartbeatRequest r;
        r.group_id = kGroup;
        r.generation_id = c.generation;
        r.member_id = c.member_id;
        const Error expected = m.expect_heartbeat(c);
        const int16_t got = m.coordinator->heartbeat(r, 3).error_code;
        RC_ASSERT(got == net::code(expected));
        break;
      }
      case 3: {
        bool mismatch = false;
        std::string why;
        m.node->spawn(Model::commit_checked(&m, &c, value, &mismatch, &why));
        m.world.run_for(5ms);
        if (mismatch) RC_FAIL(why);
        break;
      }
      case 4: {
        net::LeaveGroupRequest r;
        r.group_id = kGroup;
        r.member_id = c.member_id;
        auto done = std::make_shared<std::optional<net::LeaveGroupResponse>>();
        m.node->spawn(Model::capture(m.coordinator->leave_group(std::move(r), 1), done));
        m.world.run_for(1ms);
        c.member_id.clear();
        c.generation = -1;
        break;
      }
      case 5:
        m.world.run_for(std::chrono::milliseconds(100 * value));
        break;
      case 6:
        c.crashed = !c.crashed;  // stops (or resumes) taking part
        if (!c.crashed) c = Client{};
        break;
    }
    m.world.run_for(2ms);
    m.settle(clients);
    const int32_t generation = m.coordinator->group_generation(kGroup);
    if (m.coordinator->group_state(kGroup) != "Dead") {
      RC_ASSERT(generation >= last_generation);
      last_generation = generation;
    }
    if (m.last_commit >= 0) RC_ASSERT(m.fetched() == m.last_commit);
  }
  // Liveness: the clients still alive keep at it; the group settles with
  // exactly them.
  std::set<std::string> alive;
  for (int round = 0; round < 200; ++round) {
    for (Client& c : clients) {
      if (c.crashed) continue;
      if (c.join || c.sync) continue;
      net::HeartbeatRequest r;
      r.group_id = kGroup;
      r.generation_id = c.generation;
      r.member_id = c.member_id;
      const int16_t hb = c.generation < 0 ? -1 : m.coordinator->heartbeat(r, 3).error_code;
      if (hb == 0) continue;
      if (hb == net::code(Error::kRebalanceInProgress) || hb == -1 || hb == net::code(Error::kUnknownMemberId) ||
          hb == net::code(Error::kIllegalGeneration)) {
        m.join(c);
      }
    }
    m.world.run_for(200ms);
    m.settle(clients);
    for (Client& c : clients) {
      if (!c.crashed && c.generation >= 0 && !c.join && !c.sync &&
          m.coordinator->group_state(kGroup) == "CompletingRebalance") {
        m.sync(c);
      }
    }
    m.world.run_for(50ms);
    m.settle(clients);
  }
  for (const Client& c : clients) {
    if (!c.crashed) alive.insert(c.member_id);
  }
  const auto members = m.coordinator->group_members(kGroup);
  if (alive.empty()) {
    RC_ASSERT(members.empty());
  } else {
    RC_ASSERT(m.coordinator->group_state(kGroup) == "Stable");
    RC_ASSERT(std::set<std::string>(members.begin(), members.end()) == alive);
  }
}

}  // namespace
}  // namespace brook::group
