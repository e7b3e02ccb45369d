// coordinators/group/test_harness.h
//
// For the group coordinator's tests: a coordinator in the simulator over an
// in-memory coordinator log, and helpers that drive its requests.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "coordinators/group/group_coordinator.h"
#include "sim/world.h"

namespace brook::group {

using namespace std::chrono_literals;

inline constexpr int16_t kJoinVersion = 5;

// The records of every partition, committed after `delay`; a write can be
// made to fail. Transactional records carry their producer id, and markers
// are entries of their own.
class MemoryLog final : public CoordinatorLog {
 public:
  struct Entry {
    int64_t offset;
    CoordinatorRecord record;
    // A transactional record's producer (-1: none), or a marker's.
    int64_t producer_id;
    // Set for a commit (true) or abort marker (`record` is then unused).
    std::optional<bool> marker;
  };
  explicit MemoryLog(io::Context& ctx) : ctx_(&ctx) {}

  io::Task<Written> write(int32_t partition, int32_t epoch, std::vector<CoordinatorRecord> records) override {
    co_return co_await append(partition, epoch, -1, std::move(records));
  }
  io::Task<Written> write_transactional(int32_t partition, int32_t epoch, int64_t producer_id, int16_t producer_epoch,
                                        uint64_t verification, std::vector<CoordinatorRecord> records) override {
    (void)producer_epoch;
    (void)verification;
    ++transactional_writes;
    co_return co_await append(partition, epoch, producer_id, std::move(records));
  }
  // A commit or abort marker of `producer_id`, as WriteTxnMarkers appends it.
  void append_marker(int32_t partition, int64_t producer_id, bool commit) {
    std::vector<Entry>& log = partitions[partition];
    log.push_back(Entry{static_cast<int64_t>(log.size()), CoordinatorRecord{}, producer_id, commit});
  }
  io::Task<Written> append(int32_t partition, int32_t epoch, int64_t producer_id,
                           std::vector<CoordinatorRecord> records) {
    (void)epoch;
    ++writes;
    // (With no delay the write completes without suspending, as a refused
    // append does.)
    if (delay > io::Duration::zero()) co_await ctx_->clock().sleep_for(delay);
    if (fail_next != net::Error::kNone) {
      // A write that times out may still land (it was appended; the
      // replicas had not caught up when the wait ended).
      if (std::exchange(failed_write_lands, false)) {
        std::vector<Entry>& log = partitions[partition];
        for (auto& r : records) {
          log.push_back(Entry{static_cast<int64_t>(log.size()), std::move(r), producer_id, std::nullopt});
        }
      }
      Written w{std::exchange(fail_next, net::Error::kNone), -1};
      co_return w;
    }
    if (fail_writes > 0) {
      --fail_writes;
      Written w{net::Error::kNotEnoughReplicas, -1};
      co_return w;
    }
    std::vector<Entry>& log = partitions[partition];
    const int64_t base = static_cast<int64_t>(log.size());
    for (auto& r : records) {
      log.push_back(Entry{static_cast<int64_t>(log.size()), std::move(r), producer_id, std::nullopt});
    }
    co_return Written{net::Error::kNone, base};
  }
  bool partition_exists(const std::string& topic, int32_t partition) const override {
    return topic != "missing" && partition >= 0 && partition < 8;
  }
  std::optional<Topic> topic(const std::string& name) const override {
    auto it = topics.find(name);
    return it == topics.end() ? std::nullopt : std::optional<Topic>(it->second);
  }
  std::optional<Topic> topic(const TopicId& id) const override {
    for (const auto& [name, t] : topics) {
      if (t.id == id) return t;
    }
    return std::nullopt;
  }
  std::vector<std::string> topic_names() const override {
    std::vector<std::string> out;
    for (const auto& [name, t] : topics) out.push_back(name);
    return out;
  }
  // A topic of the consumer protocol's metadata (its id: its first byte).
  void add_topic(const std::string& name, int32_t partitions) {
    Topic t{TopicId{}, name, partitions};
    t.id.bytes[0] = static_cast<uint8_t>(topics.size() + 1);
    topics[name] = t;
  }

  io::Context* ctx_;
  io::Duration delay = 2ms;
  net::Error fail_next = net::Error::kNone;
  // The write that fail_next fails lands in the log all the same.
  bool failed_write_lands = false;
  // The next this many writes fail with NOT_ENOUGH_REPLICAS.
  int fail_writes = 0;
  int writes = 0;
  int transactional_writes = 0;
  std::map<int32_t, std::vector<Entry>> partitions;
  std::map<std::string, Topic> topics;
};

inline io::Buffer bytes(std::string_view s) { return io::Buffer::copy_of(s); }

struct Harness {
  // `configure` adjusts the coordinator's configuration.
  explicit Harness(std::function<void(GroupCoordinatorConfig&)> configure = {}) : world(7) {
    node = &world.add_node();
    node->start([this, configure](io::Context& ctx) -> io::Task<void> {
      log = std::make_unique<MemoryLog>(ctx);
      GroupCoordinatorConfig c;
      c.offsets_topic_partitions = 4;
      c.initial_rebalance_delay = 100ms;
      c.offsets_retention = 1h;
      c.offsets_retention_check_interval = 1min;
      if (configure) configure(c);
      coordinator = std::make_unique<GroupCoordinator>(ctx, *log, c);
      for (int32_t p = 0; p < 4; ++p) {
        coordinator->begin_load(p, 1);
        coordinator->finish_load(p, 1);
      }
      co_await coordinator->run();
    });
    world.run_for(1ms);
  }
  ~Harness() {
    node->crash();
    world.run_for(1ms);
  }

  template <typename T>
  static io::Task<void> capture(io::Task<T> task, std::optional<T>* out) {
    *out = co_await std::move(task);
  }
  // Starts a request; its answer lands in the returned slot.
  template <typename T>
  std::shared_ptr<std::optional<T>> start(io::Task<T> task) {
    auto slot = std::make_shared<std::optional<T>>();
    node->spawn(capture(std::move(task), slot.get()));
    world.run_for(1ms);  // the request reaches the coordinator
    return slot;
  }
  template <typename T>
  T await(const std::shared_ptr<std::optional<T>>& slot, io::Duration limit = 60s) {
    EXPECT_TRUE(world.run_until([&] { return slot->has_value(); }, limit));
    return std::move(**slot);
  }
  template <typename T>
  T call(io::Task<T> task) {
    return await(start(std::move(task)));
  }

  net::JoinGroupRequest join_request(const std::string& group, const std::string& member_id,
                                     std::optional<std::string> instance = std::nullopt,
                                     std::string metadata = "sub") {
    net::JoinGroupRequest r;
    r.group_id = group;
    r.session_timeout_ms = 10000;
    r.rebalance_timeout_ms = 20000;
    r.member_id = member_id;
    r.group_instance_id = std::move(instance);
    r.protocol_type = "consumer";
    auto& p = r.protocols.emplace_back();
    p.name = "range";
    p.metadata = bytes(metadata);
    return r;
  }
  std::shared_ptr<std::optional<net::JoinGroupResponse>> join(const std::string& group, const std::string& member_id,
                                                             std::optional<std::string> instance = std::nullopt,
                                                             std::string metadata = "sub") {
    return start(coordinator->join_group(join_request(group, member_id, std::move(instance), std::move(metadata)),
                                         kJoinVersion, "client", "/127.0.0.1"));
  }
  std::shared_ptr<std::optional<net::SyncGroupResponse>> sync(const std::string& group, int32_t generation,
                                                             const std::string& member_id,
                                                             std::map<std::string, std::string> assignments = {}) {
    net::SyncGroupRequest r;
    r.group_id = group;
    r.generation_id = generation;
    r.member_id = member_id;
    for (auto& [id, a] : assignments) {
      auto& x = r.assignments.emplace_back();
      x.member_id = id;
      x.assignment = bytes(a);
    }
    return start(coordinator->sync_group(std::move(r), 3));
  }
  int16_t heartbeat(const std::string& group, int32_t generation, const std::string& member_id) {
    net::HeartbeatRequest r;
    r.group_id = group;
    r.generation_id = generation;
    r.member_id = member_id;
    return coordinator->heartbeat(r, 3).error_code;
  }
  // Runs the world for `d` with `members` of `group` heartbeating every 5 s.
  void heartbeat_for(io::Duration d, const std::string& group, int32_t generation,
                     const std::vector<std::string>& members) {
    for (io::Duration t{0}; t < d; t += 5s) {
      world.run_for(5s);
      for (const std::string& m : members) EXPECT_EQ(heartbeat(group, generation, m), 0);
    }
  }
  // An OffsetCommit of one partition.
  static net::OffsetCommitRequest commit_request(const std::string& group, int32_t generation,
                                                 const std::string& member_id, const std::string& topic,
                                                 int32_t partition, int64_t offset) {
    net::OffsetCommitRequest r;
    r.group_id = group;
    r.generation_id_or_member_epoch = generation;
    r.member_id = member_id;
    auto& t = r.topics.emplace_back();
    t.name = topic;
    auto& p = t.partitions.emplace_back();
    p.partition_index = partition;
    p.committed_offset = offset;
    return r;
  }
  net::OffsetCommitResponse commit(const std::string& group, int32_t generation, const std::string& member_id,
                                   const std::string& topic, int32_t partition, int64_t offset) {
    net::OffsetCommitRequest r = commit_request(group, generation, member_id, topic, partition, offset);
    r.topics[0].partitions[0].committed_leader_epoch = 3;
    r.topics[0].partitions[0].committed_metadata = "meta";
    return call(coordinator->commit_offsets(std::move(r), 8));
  }
  // The committed offset of one partition (-1 when none), or the error.
  int64_t fetched(const std::string& group, const std::string& topic, int32_t partition, int16_t* error = nullptr) {
    net::OffsetFetchRequest r;
    r.group_id = group;
    auto& t = r.topics->emplace_back();
    t.name = topic;
    t.partition_indexes = {partition};
    net::OffsetFetchResponse out = coordinator->fetch_offsets(r, 7);
    if (error != nullptr) *error = out.error_code;
    if (out.topics.empty() || out.topics[0].partitions.empty()) return -2;
    return out.topics[0].partitions[0].committed_offset;
  }
  // Two dynamic members in one group, through MEMBER_ID_REQUIRED, the
  // join and the sync: {leader id, follower id, generation}.
  std::tuple<std::string, std::string, int32_t> form_group(const std::string& group, const std::string& metadata = "sub") {
    net::JoinGroupResponse a0 = await(join(group, "", std::nullopt, metadata));
    EXPECT_EQ(a0.error_code, net::code(net::Error::kMemberIdRequired));
    net::JoinGroupResponse b0 = await(join(group, "", std::nullopt, metadata));
    auto a = join(group, a0.member_id, std::nullopt, metadata);
    auto b = join(group, b0.member_id, std::nullopt, metadata);
    net::JoinGroupResponse ja = await(a);
    net::JoinGroupResponse jb = await(b);
    EXPECT_EQ(ja.error_code, 0);
    EXPECT_EQ(jb.error_code, 0);
    EXPECT_EQ(ja.generation_id, jb.generation_id);
    EXPECT_EQ(ja.leader, a0.member_id) << "the first member to join leads";
    EXPECT_EQ(ja.members.size(), 2u);
    EXPECT_TRUE(jb.members.empty());
    auto sb = sync(group, jb.generation_id, jb.member_id);
    auto sa = sync(group, ja.generation_id, ja.member_id, {{ja.member_id, "A"}, {jb.member_id, "B"}});
    net::SyncGroupResponse ra = await(sa);
    net::SyncGroupResponse rb = await(sb);
    EXPECT_EQ(ra.error_code, 0);
    EXPECT_EQ(rb.error_code, 0);
    EXPECT_EQ(ra.assignment.view(), "A");
    EXPECT_EQ(rb.assignment.view(), "B");
    return {ja.member_id, jb.member_id, ja.generation_id};
  }
  // Drops every partition and loads it again from the log.
  void reload() {
    ++epoch;
    for (int32_t p = 0; p < 4; ++p) {
      coordinator->begin_load(p, epoch);
      for (const auto& e : log->partitions[p]) {
        if (e.marker.has_value()) {
          coordinator->replay_marker(p, e.offset, e.producer_id, *e.marker);
        } else if (e.producer_id >= 0) {
          ASSERT_TRUE(coordinator->replay_transactional(p, e.offset, e.producer_id, e.record.key, e.record.value).ok());
        } else {
          ASSERT_TRUE(coordinator->replay(p, e.offset, e.record.key, e.record.value).ok());
        }
      }
      coordinator->finish_load(p, epoch);
    }
  }

  sim::World world;
  int32_t epoch = 1;
  sim::Node* node = nullptr;
  std::unique_ptr<MemoryLog> log;
  std::unique_ptr<GroupCoordinator> coordinator;
};

}  // namespace brook::group
