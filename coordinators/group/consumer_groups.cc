// coordinators/group/consumer_groups.cc
//
// The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat,
// ConsumerGroupDescribe), following Kafka's GroupMetadataManager:
//
// - A member joins with epoch 0 and then heartbeats with the epoch it was
//   given; -1 leaves, -2 leaves as a static member that comes back (its
//   partitions wait for it until its session times out).
// - A change of the members' subscriptions, of the subscribed topics'
//   partitions, or of the members bumps the group epoch; a group epoch
//   beyond the target assignment's makes the next heartbeat compute a new
//   target with the group's assignor.
// - Each member moves to its target through reconcile(): it gives up what
//   it must revoke first, gets partitions only once no other member holds
//   them, and takes the target epoch when it has nothing left to revoke. A
//   member that does not revoke within its rebalance timeout, or stops
//   heartbeating for the session timeout, is fenced (removed).
// - Epochs fence zombies: a heartbeat with an epoch the coordinator does not
//   know gets FENCED_MEMBER_EPOCH (except the previous epoch with a subset
//   of the assignment: the member lost the response that moved it on), and
//   OffsetCommit from a member not at its current epoch gets
//   STALE_MEMBER_EPOCH.
//
// Every change is a set of ConsumerGroup* records written to the group's
// partition; the state is changed only once they are committed. The
// heartbeats of one partition are serialized, so each computes its change
// from committed state. A write that fails may still land later, so the
// group's next write then carries its whole state again: replaying the
// partition always ends in the state the coordinator served.
#include <algorithm>
#include <optional>
#include <set>
#include <string>

#include <fmt/format.h>
#include <re2/re2.h>

#include "coordinators/group/group_coordinator.h"
#include "io/assert.h"
#include "net/kafka/messages/consumer_group_current_member_assignment_key.h"
#include "net/kafka/messages/consumer_group_current_member_assignment_value.h"
#include "net/kafka/messages/consumer_group_member_metadata_key.h"
#include "net/kafka/messages/consumer_group_member_metadata_value.h"
#include "net/kafka/messages/consumer_group_metadata_key.h"
#include "net/kafka/messages/consumer_group_metadata_value.h"
#include "net/kafka/messages/consumer_group_partition_metadata_key.h"
#include "net/kafka/messages/consumer_group_partition_metadata_value.h"
#include "net/kafka/messages/consumer_group_target_assignment_member_key.h"
#include "net/kafka/messages/consumer_group_target_assignment_member_value.h"
#include "net/kafka/messages/consumer_group_target_assignment_metadata_key.h"
#include "net/kafka/messages/consumer_group_target_assignment_metadata_value.h"
#include "net/kafka/versioned.h"

namespace brook::group {

namespace {

using net::code;
using net::Error;
using namespace std::chrono_literals;

constexpr int32_t kLeaveEpoch = -1;
constexpr int32_t kStaticLeaveEpoch = -2;
// The record types (key versions) of the consumer protocol's records.
constexpr int16_t kGroupEpochType = 3;
constexpr int16_t kPartitionMetadataType = 4;
constexpr int16_t kMemberMetadataType = 5;
constexpr int16_t kTargetEpochType = 6;
constexpr int16_t kTargetMemberType = 7;
constexpr int16_t kCurrentAssignmentType = 8;
// READ, DELETE, DESCRIBE (AclOperation codes 3, 6, 8).
constexpr int32_t kGroupOperationsAll = (1 << 3) | (1 << 6) | (1 << 8);
// How long a fence that could not be written waits before it is retried.
constexpr io::Duration kFenceRetry = 500ms;

template <typename M>
io::Buffer record_bytes(const M& m, int16_t version) {
  absl::StatusOr<io::Buffer> out = net::encode_versioned(m, version);
  BROOK_ASSERT(out.ok());
  return *std::move(out);
}

template <typename K>
io::Buffer group_key(const std::string& group_id, int16_t type) {
  K k;
  k.group_id = group_id;
  return record_bytes(k, type);
}

template <typename K>
io::Buffer member_key(const std::string& group_id, const std::string& member_id, int16_t type) {
  K k;
  k.group_id = group_id;
  k.member_id = member_id;
  return record_bytes(k, type);
}

template <typename T>
std::vector<T> to_wire(const TopicPartitions& tps) {
  std::vector<T> out;
  for (const auto& [id, partitions] : tps) {
    if (partitions.empty()) continue;
    T& t = out.emplace_back();
    t.topic_id = id;
    t.partitions.assign(partitions.begin(), partitions.end());
  }
  return out;
}

template <typename T>
TopicPartitions from_wire(const std::vector<T>& v) {
  TopicPartitions out;
  for (const T& t : v) {
    if (t.partitions.empty()) continue;
    out[t.topic_id].insert(t.partitions.begin(), t.partitions.end());
  }
  return out;
}

bool subset(const TopicPartitions& a, const TopicPartitions& of) {
  for (const auto& [id, partitions] : a) {
    auto it = of.find(id);
    for (int32_t p : partitions) {
      if (it == of.end() || !it->second.contains(p)) return false;
    }
  }
  return true;
}

// Kafka's internal topics, which subscription patterns do not match (as a
// classic consumer's default exclude.internal.topics=true has it).
bool internal_topic(std::string_view name) { return name == "__consumer_offsets" || name == "__transaction_state"; }

// Subscription regular expressions are RE2's syntax and semantics, as
// Kafka's coordinator compiles them with RE2/J: linear time in the topic
// name whatever the pattern (a client's pattern cannot stall the
// coordinator's thread with backtracking), and the same patterns accepted
// and refused as on Kafka.
RE2::Options regex_options() {
  RE2::Options options;
  options.set_log_errors(false);
  return options;
}

// Why `regex` does not compile, or nullopt when it does.
std::optional<std::string> regex_error(const std::string& regex) {
  const RE2 re(regex, regex_options());
  if (re.ok()) return std::nullopt;
  return re.error();
}

// The topics `regex` matches in full (an invalid one matches nothing; the
// heartbeat that sets it is refused).
std::vector<std::string> matching(const std::string& regex, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  const RE2 re(regex, regex_options());
  if (!re.ok()) return out;
  for (const std::string& n : names) {
    if (!internal_topic(n) && RE2::FullMatch(n, re)) out.push_back(n);
  }
  return out;
}

MemberState member_state_of(int8_t v) {
  switch (v) {
    case 1:
      return MemberState::kUnrevokedPartitions;
    case 2:
      return MemberState::kUnreleasedPartitions;
    default:
      return MemberState::kStable;
  }
}

int8_t member_state_byte(MemberState s) {
  switch (s) {
    case MemberState::kStable:
      return 0;
    case MemberState::kUnrevokedPartitions:
      return 1;
    case MemberState::kUnreleasedPartitions:
      return 2;
  }
  return 127;
}

// A member's ConsumerGroupMemberMetadata record (Member: the coordinator's
// ConsumerMember).
template <typename Member>
CoordinatorRecord member_metadata_record(const std::string& group_id, const Member& m) {
  net::ConsumerGroupMemberMetadataValue md;
  md.instance_id = m.instance_id;
  md.rack_id = m.rack_id;
  md.client_id = m.client_id;
  md.client_host = m.client_host;
  md.subscribed_topic_names = m.subscribed_topic_names;
  md.subscribed_topic_regex = m.subscribed_topic_regex;
  md.rebalance_timeout_ms = m.rebalance_timeout_ms;
  md.server_assignor = m.server_assignor;
  if (m.classic.has_value()) {
    // emplace(T{}), not emplace(): clang 14 finds these nested structs not
    // default-constructible there.
    auto& c = md.classic_member_metadata.emplace(net::ConsumerGroupMemberMetadataValue::ClassicMemberMetadata{});
    c.session_timeout_ms = m.classic->session_timeout_ms;
    for (const auto& [name, metadata] : m.classic->protocols) {
      auto& p = c.supported_protocols.emplace_back();
      p.name = name;
      p.metadata = metadata;
    }
  }
  return CoordinatorRecord{member_key<net::ConsumerGroupMemberMetadataKey>(group_id, m.id, kMemberMetadataType),
                           record_bytes(md, 0)};
}

// A heartbeat carrying everything a joining member sends (after a lost
// response the client sends it again): it is answered with the whole
// assignment.
bool full_request(const net::ConsumerGroupHeartbeatRequest& r) {
  return r.rebalance_timeout_ms != -1 && r.subscribed_topic_names.has_value() && r.topic_partitions.has_value();
}

}  // namespace

bool GroupCoordinator::ConsumerMember::same_metadata(const ConsumerMember& o) const {
  return instance_id == o.instance_id && rack_id == o.rack_id && client_id == o.client_id &&
         client_host == o.client_host && subscribed_topic_names == o.subscribed_topic_names &&
         subscribed_topic_regex == o.subscribed_topic_regex && rebalance_timeout_ms == o.rebalance_timeout_ms &&
         server_assignor == o.server_assignor && classic == o.classic;
}

bool GroupCoordinator::ClassicMetadata::operator==(const ClassicMetadata& o) const {
  return session_timeout_ms == o.session_timeout_ms &&
         std::equal(protocols.begin(), protocols.end(), o.protocols.begin(), o.protocols.end(),
                    [](const auto& a, const auto& b) { return a.first == b.first && a.second.view() == b.second.view(); });
}

std::string GroupCoordinator::consumer_state(const ConsumerGroup& cg) const {
  if (cg.members.empty()) return "Empty";
  if (cg.group_epoch > cg.assignment_epoch) return "Assigning";
  for (const auto& [id, m] : cg.members) {
    if (m.current.state != MemberState::kStable || m.current.member_epoch != cg.assignment_epoch) {
      return "Reconciling";
    }
  }
  return "Stable";
}

std::string GroupCoordinator::preferred_assignor(const ConsumerGroup& cg) const {
  std::map<std::string, int> counts;
  for (const auto& [id, m] : cg.members) {
    if (m.server_assignor.has_value()) ++counts[*m.server_assignor];
  }
  std::string best;
  int best_count = 0;
  for (const auto& [name, n] : counts) {
    if (n > best_count) {
      best = name;
      best_count = n;
    }
  }
  if (best_count > 0) return best;
  return config_.consumer_assignors.empty() ? std::string("uniform") : config_.consumer_assignors.front();
}

std::set<TopicId, TopicIdLess> GroupCoordinator::subscribed_ids(const ConsumerGroup& cg,
                                                                const ConsumerMember& m) const {
  std::set<TopicId, TopicIdLess> out;
  for (const std::string& name : m.subscribed_topic_names) {
    if (auto it = cg.subscribed.find(name); it != cg.subscribed.end()) out.insert(it->second.first);
  }
  if (m.subscribed_topic_regex.has_value()) {
    std::vector<std::string> names;
    for (const auto& [name, meta] : cg.subscribed) names.push_back(name);
    for (const std::string& name : matching(*m.subscribed_topic_regex, names)) out.insert(cg.subscribed.at(name).first);
  }
  return out;
}

// --- records -----------------------------------------------------------------------------

void GroupCoordinator::member_records(const std::string& group_id, const ConsumerGroup& cg, const ConsumerMember& m,
                                      std::vector<CoordinatorRecord>& out) {
  out.push_back(member_metadata_record(group_id, m));
  if (auto t = cg.target.find(m.id); t != cg.target.end()) {
    net::ConsumerGroupTargetAssignmentMemberValue tv;
    tv.topic_partitions = to_wire<net::ConsumerGroupTargetAssignmentMemberValue::TopicPartition>(t->second);
    out.push_back(CoordinatorRecord{
        member_key<net::ConsumerGroupTargetAssignmentMemberKey>(group_id, m.id, kTargetMemberType),
        record_bytes(tv, 0)});
  }
  out.push_back(current_assignment_record(group_id, m));
}

CoordinatorRecord GroupCoordinator::current_assignment_record(const std::string& group_id, const ConsumerMember& m) {
  using V = net::ConsumerGroupCurrentMemberAssignmentValue;
  V v;
  v.member_epoch = m.current.member_epoch;
  v.previous_member_epoch = m.previous_member_epoch;
  v.state = member_state_byte(m.current.state);
  v.assigned_partitions = to_wire<V::TopicPartitions>(m.current.assigned);
  v.partitions_pending_revocation = to_wire<V::TopicPartitions>(m.current.pending_revocation);
  return CoordinatorRecord{
      member_key<net::ConsumerGroupCurrentMemberAssignmentKey>(group_id, m.id, kCurrentAssignmentType),
      record_bytes(v, 0)};
}

CoordinatorRecord GroupCoordinator::group_epoch_record(const std::string& group_id, int32_t epoch) {
  net::ConsumerGroupMetadataValue v;
  v.epoch = epoch;
  return CoordinatorRecord{group_key<net::ConsumerGroupMetadataKey>(group_id, kGroupEpochType), record_bytes(v, 0)};
}

CoordinatorRecord GroupCoordinator::subscription_record(const std::string& group_id, const ConsumerGroup& cg) {
  net::ConsumerGroupPartitionMetadataValue v;
  for (const auto& [name, meta] : cg.subscribed) {
    auto& t = v.topics.emplace_back();
    t.topic_id = meta.first;
    t.topic_name = name;
    t.num_partitions = meta.second;
  }
  return CoordinatorRecord{group_key<net::ConsumerGroupPartitionMetadataKey>(group_id, kPartitionMetadataType),
                           record_bytes(v, 0)};
}

CoordinatorRecord GroupCoordinator::target_epoch_record(const std::string& group_id, int32_t epoch) {
  net::ConsumerGroupTargetAssignmentMetadataValue v;
  v.assignment_epoch = epoch;
  return CoordinatorRecord{group_key<net::ConsumerGroupTargetAssignmentMetadataKey>(group_id, kTargetEpochType),
                           record_bytes(v, 0)};
}

std::vector<CoordinatorRecord> GroupCoordinator::consumer_group_records(const std::string& group_id,
                                                                        const ConsumerGroup& cg) {
  std::vector<CoordinatorRecord> out;
  out.push_back(group_epoch_record(group_id, cg.group_epoch));
  out.push_back(subscription_record(group_id, cg));
  for (const auto& [id, m] : cg.members) member_records(group_id, cg, m, out);
  out.push_back(target_epoch_record(group_id, cg.assignment_epoch));
  return out;
}

std::vector<CoordinatorRecord> GroupCoordinator::rewrite_records(const std::string& group_id,
                                                                 const ConsumerGroup* committed, ConsumerGroup& next) {
  // `next` is a copy of `committed`: it carries its maybe_logged.
  std::set<std::string> logged = next.maybe_logged;
  if (committed != nullptr) {
    for (const auto& [id, m] : committed->members) logged.insert(id);
  }
  std::vector<CoordinatorRecord> out;
  for (const std::string& id : logged) {
    if (!next.members.contains(id)) member_tombstones(group_id, id, out);
  }
  for (CoordinatorRecord& r : consumer_group_records(group_id, next)) out.push_back(std::move(r));
  next.rewrite = false;
  next.maybe_logged.clear();
  return out;
}

void GroupCoordinator::member_tombstones(const std::string& group_id, const std::string& member_id,
                                         std::vector<CoordinatorRecord>& out) {
  out.push_back(CoordinatorRecord{
      member_key<net::ConsumerGroupCurrentMemberAssignmentKey>(group_id, member_id, kCurrentAssignmentType),
      std::nullopt});
  out.push_back(CoordinatorRecord{
      member_key<net::ConsumerGroupTargetAssignmentMemberKey>(group_id, member_id, kTargetMemberType), std::nullopt});
  out.push_back(CoordinatorRecord{
      member_key<net::ConsumerGroupMemberMetadataKey>(group_id, member_id, kMemberMetadataType), std::nullopt});
}

std::vector<CoordinatorRecord> GroupCoordinator::consumer_group_tombstones(const std::string& group_id) {
  return {
      CoordinatorRecord{group_key<net::ConsumerGroupTargetAssignmentMetadataKey>(group_id, kTargetEpochType),
                        std::nullopt},
      CoordinatorRecord{group_key<net::ConsumerGroupPartitionMetadataKey>(group_id, kPartitionMetadataType),
                        std::nullopt},
      CoordinatorRecord{group_key<net::ConsumerGroupMetadataKey>(group_id, kGroupEpochType), std::nullopt},
  };
}

std::set<std::string> GroupCoordinator::conversion_tombstones(const Group& g, std::vector<CoordinatorRecord>& out) {
  if (g.consumer != nullptr || g.conversion_maybe_logged.empty()) return {};
  for (const std::string& id : g.conversion_maybe_logged) member_tombstones(g.id, id, out);
  for (CoordinatorRecord& r : consumer_group_tombstones(g.id)) out.push_back(std::move(r));
  return g.conversion_maybe_logged;
}

void GroupCoordinator::conversion_tombstones_written(const std::string& group_id,
                                                     const std::set<std::string>& covered) {
  if (covered.empty()) return;
  if (Group* g = find(group_id); g != nullptr) {
    for (const std::string& id : covered) g->conversion_maybe_logged.erase(id);
  }
}

namespace {

// Decodes a record's key and (unless it is a tombstone) value and hands
// them to `apply(key, value-or-null)`. Values of newer versions are read
// as the newest this code knows.
template <typename Key, typename Value, typename Apply>
absl::Status replay_record(const io::Buffer& key, const std::optional<io::Buffer>& value, Apply&& apply) {
  absl::StatusOr<Key> k = net::decode_versioned<Key>(key);
  if (!k.ok()) return k.status();
  if (!value.has_value()) {
    apply(*k, static_cast<const Value*>(nullptr));
    return absl::OkStatus();
  }
  absl::StatusOr<Value> v = net::decode_versioned<Value>(*value, /*tolerant=*/true);
  if (!v.ok()) return v.status();
  apply(*k, &*v);
  return absl::OkStatus();
}

}  // namespace

void GroupCoordinator::become_consumer_group(Group& g) {
  // Classic members waiting in a join or sync rejoin the consumer group.
  for (auto& [id, m] : g.members) {
    answer_join(g, m, Error::kRebalanceInProgress);
    answer_sync(m, Error::kRebalanceInProgress);
  }
  g.members.clear();
  g.join_order.clear();
  g.static_members.clear();
  g.pending_members.clear();
  g.protocol.reset();
  g.leader.reset();
  g.protocol_type = "consumer";
  transition(g, State::kEmpty);
}

absl::Status GroupCoordinator::replay_consumer(int16_t type, const io::Buffer& key,
                                               const std::optional<io::Buffer>& value) {
  // The group (made a consumer protocol group) a record with a value
  // belongs to; a tombstone of an unknown group changes nothing.
  auto group_for = [&](const std::string& group_id) -> ConsumerGroup* {
    Group* g = find(group_id);
    if (g == nullptr) {
      if (!value.has_value()) return nullptr;
      g = &create(group_id);
    }
    if (g->consumer == nullptr) {
      if (!value.has_value()) return nullptr;
      // A classic group that emptied and was taken over by the consumer
      // protocol.
      become_consumer_group(*g);
      g->consumer = std::make_shared<ConsumerGroup>();
    }
    return g->consumer.get();
  };
  switch (type) {
    case kGroupEpochType:
      return replay_record<net::ConsumerGroupMetadataKey, net::ConsumerGroupMetadataValue>(
          key, value, [&](const auto& k, const auto* v) {
            if (v == nullptr) {
              // The consumer group is gone; its committed offsets (deleted
              // by their own tombstones) stay, as does a classic group that
              // took the id over (a downgrade).
              if (Group* g = find(k.group_id); g != nullptr && g->consumer != nullptr) {
                if (g->offsets.empty() && g->txn_offsets.empty()) {
                  groups_.erase(k.group_id);
                } else {
                  g->consumer.reset();
                  g->protocol_type.reset();
                }
              }
            } else {
              group_for(k.group_id)->group_epoch = v->epoch;
            }
          });
    case kPartitionMetadataType:
      return replay_record<net::ConsumerGroupPartitionMetadataKey, net::ConsumerGroupPartitionMetadataValue>(
          key, value, [&](const auto& k, const auto* v) {
            ConsumerGroup* cg = group_for(k.group_id);
            if (cg == nullptr) return;
            cg->subscribed.clear();
            if (v == nullptr) return;
            for (const auto& t : v->topics) cg->subscribed[t.topic_name] = {t.topic_id, t.num_partitions};
          });
    case kMemberMetadataType:
      return replay_record<net::ConsumerGroupMemberMetadataKey, net::ConsumerGroupMemberMetadataValue>(
          key, value, [&](const auto& k, const auto* v) {
            ConsumerGroup* cg = group_for(k.group_id);
            if (cg == nullptr) return;
            if (v == nullptr) {
              cg->members.erase(k.member_id);
              return;
            }
            ConsumerMember& m = cg->members[k.member_id];
            m.id = k.member_id;
            m.instance_id = v->instance_id;
            m.rack_id = v->rack_id;
            m.client_id = v->client_id;
            m.client_host = v->client_host;
            m.subscribed_topic_names = v->subscribed_topic_names;
            std::sort(m.subscribed_topic_names.begin(), m.subscribed_topic_names.end());
            m.subscribed_topic_regex = v->subscribed_topic_regex;
            m.rebalance_timeout_ms = v->rebalance_timeout_ms;
            m.server_assignor = v->server_assignor;
            m.classic.reset();
            if (v->classic_member_metadata.has_value()) {
              ClassicMetadata& c = m.classic.emplace(ClassicMetadata{});  // (not emplace(): clang 14)
              c.session_timeout_ms = v->classic_member_metadata->session_timeout_ms;
              for (const auto& p : v->classic_member_metadata->supported_protocols) {
                c.protocols.emplace_back(p.name, p.metadata);
              }
            }
          });
    case kTargetEpochType:
      return replay_record<net::ConsumerGroupTargetAssignmentMetadataKey,
                           net::ConsumerGroupTargetAssignmentMetadataValue>(
          key, value, [&](const auto& k, const auto* v) {
            if (ConsumerGroup* cg = group_for(k.group_id); cg != nullptr) {
              cg->assignment_epoch = v == nullptr ? 0 : v->assignment_epoch;
            }
          });
    case kTargetMemberType:
      return replay_record<net::ConsumerGroupTargetAssignmentMemberKey,
                           net::ConsumerGroupTargetAssignmentMemberValue>(
          key, value, [&](const auto& k, const auto* v) {
            ConsumerGroup* cg = group_for(k.group_id);
            if (cg == nullptr) return;
            if (v == nullptr) {
              cg->target.erase(k.member_id);
            } else {
              cg->target[k.member_id] = from_wire(v->topic_partitions);
            }
          });
    case kCurrentAssignmentType:
      return replay_record<net::ConsumerGroupCurrentMemberAssignmentKey,
                           net::ConsumerGroupCurrentMemberAssignmentValue>(
          key, value, [&](const auto& k, const auto* v) {
            ConsumerGroup* cg = group_for(k.group_id);
            if (cg == nullptr) return;
            if (v == nullptr) {
              if (auto it = cg->members.find(k.member_id); it != cg->members.end()) {
                it->second.current = ReconciledMember{};
                it->second.previous_member_epoch = 0;
              }
              return;
            }
            ConsumerMember& m = cg->members[k.member_id];
            m.id = k.member_id;
            m.current.member_epoch = v->member_epoch;
            m.previous_member_epoch = v->previous_member_epoch;
            m.current.state = member_state_of(v->state);
            m.current.assigned = from_wire(v->assigned_partitions);
            m.current.pending_revocation = from_wire(v->partitions_pending_revocation);
          });
    default:
      return absl::OkStatus();
  }
}

// --- the state machine ----------------------------------------------------------------------

bool GroupCoordinator::refresh_subscriptions(const std::string& group_id, ConsumerGroup& next,
                                             std::vector<CoordinatorRecord>& records) const {
  std::set<std::string> names;
  bool regex = false;
  for (const auto& [id, m] : next.members) {
    names.insert(m.subscribed_topic_names.begin(), m.subscribed_topic_names.end());
    regex |= m.subscribed_topic_regex.has_value();
  }
  if (regex) {
    const std::vector<std::string> all = log_->topic_names();
    for (const auto& [id, m] : next.members) {
      if (!m.subscribed_topic_regex.has_value()) continue;
      for (std::string& n : matching(*m.subscribed_topic_regex, all)) names.insert(std::move(n));
    }
  }
  std::map<std::string, std::pair<TopicId, int32_t>> now;
  for (const std::string& name : names) {
    if (std::optional<CoordinatorLog::Topic> t = log_->topic(name)) now[name] = {t->id, t->partitions};
  }
  if (now == next.subscribed) return false;
  next.subscribed = std::move(now);
  records.push_back(subscription_record(group_id, next));
  return true;
}

// `member_id` is a copy: callers pass the id held by the member entry this
// erases.
void GroupCoordinator::remove_consumer_member(const std::string& group_id, ConsumerGroup& next,
                                              std::string member_id,
                                              std::vector<CoordinatorRecord>& records) const {
  member_tombstones(group_id, member_id, records);
  next.members.erase(member_id);
  next.target.erase(member_id);
  refresh_subscriptions(group_id, next, records);
  ++next.group_epoch;
  records.push_back(group_epoch_record(group_id, next.group_epoch));
}

void GroupCoordinator::consumer_heartbeat_step(const std::string& group_id, ConsumerGroup& next,
                                               const net::ConsumerGroupHeartbeatRequest& r, int16_t version,
                                               const std::string& client_id, const std::string& client_host,
                                               HeartbeatResult& out, const ClassicMetadata* classic) {
  (void)version;
  const io::Instant now = ctx_->clock().now();
  std::vector<CoordinatorRecord>& records = out.records;
  auto fail = [&](Error e, std::string message) {
    out.error = e;
    out.message = std::move(message);
  };
  // The static member of `instance_id`, if any.
  auto static_member = [&](const std::string& instance_id) -> ConsumerMember* {
    for (auto& [id, m] : next.members) {
      if (m.instance_id == instance_id) return &m;
    }
    return nullptr;
  };

  if (r.member_epoch == kLeaveEpoch || r.member_epoch == kStaticLeaveEpoch) {
    ConsumerMember* m = nullptr;
    if (!r.instance_id.has_value()) {
      auto it = next.members.find(r.member_id);
      if (it == next.members.end()) {
        return fail(Error::kUnknownMemberId,
                    fmt::format("Member {} is not a member of group {}.", r.member_id, group_id));
      }
      m = &it->second;
    } else {
      m = static_member(*r.instance_id);
      if (m == nullptr) return fail(Error::kUnknownMemberId, fmt::format("Instance id {} is unknown.", *r.instance_id));
      if (m->id != r.member_id) {
        return fail(Error::kFencedInstanceId, fmt::format("Static member {} with instance id {} was fenced by member {}.",
                                                          r.member_id, *r.instance_id, m->id));
      }
    }
    out.member_id = r.member_id;
    out.member_epoch = r.member_epoch;
    if (r.member_epoch == kStaticLeaveEpoch && r.instance_id.has_value()) {
      // It comes back within its session timeout, as the same instance.
      m->current.member_epoch = kStaticLeaveEpoch;
      m->current.pending_revocation.clear();
      m->revocation_deadline.reset();
      records.push_back(current_assignment_record(group_id, *m));
    } else {
      ctx_->log().info("group coordinator: member {} left consumer group {}", m->id, group_id);
      remove_consumer_member(group_id, next, m->id, records);
    }
    return;
  }

  const bool joining = r.member_epoch == 0;
  const std::string member_id = r.member_id.empty() ? new_uuid() : r.member_id;
  if (joining && static_cast<int64_t>(next.members.size()) >= config_.consumer_max_group_size &&
      !next.members.contains(member_id)) {
    return fail(Error::kGroupMaxSizeReached, fmt::format("The consumer group has reached its maximum capacity of {} members.",
                                                         config_.consumer_max_group_size));
  }
  // The owned partitions the heartbeat reports, if it does.
  std::optional<TopicPartitions> owned;
  if (r.topic_partitions.has_value()) owned = from_wire(*r.topic_partitions);
  auto check_epoch = [&](const ConsumerMember& m) {
    if (r.member_epoch > m.current.member_epoch) {
      fail(Error::kFencedMemberEpoch,
           fmt::format("The consumer group member has a greater member epoch ({}) than the one known by the group "
                       "coordinator ({}). The member must abandon all its partitions and rejoin.",
                       r.member_epoch, m.current.member_epoch));
      return false;
    }
    if (r.member_epoch < m.current.member_epoch &&
        (r.member_epoch != m.previous_member_epoch || !owned.has_value() || !subset(*owned, m.current.assigned))) {
      fail(Error::kFencedMemberEpoch,
           fmt::format("The consumer group member has a smaller member epoch ({}) than the one known by the group "
                       "coordinator ({}). The member must abandon all its partitions and rejoin.",
                       r.member_epoch, m.current.member_epoch));
      return false;
    }
    return true;
  };

  ConsumerMember member;  // as it was (a new member: empty)
  bool existed = false;
  if (!r.instance_id.has_value()) {
    auto it = next.members.find(member_id);
    if (it != next.members.end()) {
      member = it->second;
      existed = true;
      // A member rejoining with epoch 0 reports owning nothing: it keeps
      // its place and is handed its assignment again.
      if (!joining && !check_epoch(member)) return;
    } else if (!joining) {
      return fail(Error::kUnknownMemberId,
                  fmt::format("Member {} is not a member of group {}.", member_id, group_id));
    }
  } else {
    ConsumerMember* old = static_member(*r.instance_id);
    if (joining) {
      if (old != nullptr && old->id == member_id) {
        member = *old;
        existed = true;
      } else if (old != nullptr) {
        // (A classic member taking over an instance id replaces the old
        // member whatever it does, as the classic protocol's static members
        // do.)
        if (old->current.member_epoch != kStaticLeaveEpoch && classic == nullptr) {
          return fail(Error::kUnreleasedInstanceId,
                      fmt::format("Static member {} with instance id {} cannot join the group because the instance "
                                  "id is owned by member {}.",
                                  member_id, *r.instance_id, old->id));
        }
        // The instance is back under a new member id: it takes over the old
        // member's assignment.
        member = *old;
        member.id = member_id;
        member.current.member_epoch = 0;
        member.previous_member_epoch = 0;
        member.revocation_deadline.reset();
        TopicPartitions target;
        if (auto t = next.target.find(old->id); t != next.target.end()) target = t->second;
        const std::string old_id = old->id;
        member_tombstones(group_id, old_id, records);
        next.members.erase(old_id);
        next.target.erase(old_id);
        next.target[member_id] = std::move(target);
        next.members[member_id] = member;
        member_records(group_id, next, member, records);
        existed = true;
        ctx_->log().info("group coordinator: static member {} of consumer group {} is back as {}", *r.instance_id,
                         group_id, member_id);
      }
    } else {
      if (old == nullptr) return fail(Error::kUnknownMemberId, fmt::format("Instance id {} is unknown.", *r.instance_id));
      if (old->id != member_id) {
        return fail(Error::kFencedInstanceId, fmt::format("Static member {} with instance id {} was fenced by member {}.",
                                                          member_id, *r.instance_id, old->id));
      }
      member = *old;
      existed = true;
      if (!check_epoch(member)) return;
    }
  }
  if (!existed) member.id = member_id;

  // 1. The member's subscription and metadata.
  ConsumerMember updated = member;
  if (r.instance_id.has_value()) updated.instance_id = r.instance_id;
  if (r.rack_id.has_value()) updated.rack_id = r.rack_id;
  if (r.rebalance_timeout_ms != -1) updated.rebalance_timeout_ms = r.rebalance_timeout_ms;
  if (r.server_assignor.has_value()) updated.server_assignor = r.server_assignor;
  if (r.subscribed_topic_names.has_value()) {
    std::set<std::string> names(r.subscribed_topic_names->begin(), r.subscribed_topic_names->end());
    updated.subscribed_topic_names.assign(names.begin(), names.end());
  }
  if (r.subscribed_topic_regex.has_value()) {
    updated.subscribed_topic_regex =
        r.subscribed_topic_regex->empty() ? std::nullopt : std::optional<std::string>(*r.subscribed_topic_regex);
  }
  updated.client_id = client_id;
  updated.client_host = client_host;
  if (classic != nullptr) {
    updated.classic = *classic;
  } else {
    updated.classic.reset();
  }
  bool bump = !existed;
  if (!existed || !updated.same_metadata(member)) {
    bump |= updated.subscribed_topic_names != member.subscribed_topic_names ||
            updated.subscribed_topic_regex != member.subscribed_topic_regex;
    records.push_back(member_metadata_record(group_id, updated));
  }
  next.members[member_id] = updated;

  // 2. The group epoch: bumped when subscriptions, members or the
  // subscribed topics' partitions changed.
  if (refresh_subscriptions(group_id, next, records)) bump = true;
  if (bump) {
    ++next.group_epoch;
    records.push_back(group_epoch_record(group_id, next.group_epoch));
  }

  // 3. A new target assignment when the group epoch moved past it.
  if (next.group_epoch > next.assignment_epoch) {
    std::vector<AssignorMember> members;
    members.reserve(next.members.size());
    for (const auto& [id, m] : next.members) {
      members.push_back(AssignorMember{id, subscribed_ids(next, m), m.current.assigned});
    }
    TopicPartitionCounts counts;
    for (const auto& [name, meta] : next.subscribed) counts[meta.first] = meta.second;
    const std::string assignor_name = preferred_assignor(next);
    std::optional<Assignor> assignor = find_assignor(assignor_name);
    if (!assignor.has_value()) assignor = find_assignor("uniform");
    GroupAssignment target = (**assignor)(members, counts);
    for (auto& [id, partitions] : target) {
      auto old = next.target.find(id);
      if (old != next.target.end() && old->second == partitions) continue;
      net::ConsumerGroupTargetAssignmentMemberValue tv;
      tv.topic_partitions = to_wire<net::ConsumerGroupTargetAssignmentMemberValue::TopicPartition>(partitions);
      records.push_back(CoordinatorRecord{
          member_key<net::ConsumerGroupTargetAssignmentMemberKey>(group_id, id, kTargetMemberType),
          record_bytes(tv, 0)});
    }
    next.target = std::move(target);
    next.assignment_epoch = next.group_epoch;
    records.push_back(target_epoch_record(group_id, next.assignment_epoch));
  }

  // 4. The member moves towards its target.
  ConsumerMember& cur = next.members.at(member_id);
  if (cur.current.state != MemberState::kStable || cur.current.member_epoch != next.assignment_epoch) {
    std::set<std::pair<TopicId, int32_t>, bool (*)(const std::pair<TopicId, int32_t>&,
                                                   const std::pair<TopicId, int32_t>&)>
        held([](const std::pair<TopicId, int32_t>& a, const std::pair<TopicId, int32_t>& b) {
          return a.first.bytes != b.first.bytes ? a.first.bytes < b.first.bytes : a.second < b.second;
        });
    for (const auto& [id, m] : next.members) {
      if (id == member_id) continue;
      for (const TopicPartitions* tps : {&m.current.assigned, &m.current.pending_revocation}) {
        for (const auto& [topic, partitions] : *tps) {
          for (int32_t p : partitions) held.insert({topic, p});
        }
      }
    }
    static const TopicPartitions kNothing;
    auto t = next.target.find(member_id);
    const ReconciledMember reconciled =
        reconcile(cur.current, subscribed_ids(next, cur), next.assignment_epoch,
                  t == next.target.end() ? kNothing : t->second, owned,
                  [&](const TopicId& topic, int32_t p) { return held.contains({topic, p}); });
    if (reconciled != cur.current) {
      if (reconciled.member_epoch != cur.current.member_epoch) cur.previous_member_epoch = cur.current.member_epoch;
      cur.current = reconciled;
      records.push_back(current_assignment_record(group_id, cur));
      // (A classic member revokes by rejoining: its join and sync timers
      // bound it instead.)
      if (cur.current.state == MemberState::kUnrevokedPartitions && !cur.classic.has_value()) {
        cur.revocation_deadline = now + std::chrono::milliseconds(std::max(cur.rebalance_timeout_ms, 0));
      } else {
        cur.revocation_deadline.reset();
      }
    }
  } else if (!existed || joining) {
    records.push_back(current_assignment_record(group_id, cur));
  }
  cur.session_deadline =
      now + (cur.classic.has_value() ? io::Duration(std::chrono::milliseconds(cur.classic->session_timeout_ms))
                                     : config_.consumer_session_timeout);

  out.member_id = member_id;
  out.member_epoch = cur.current.member_epoch;
  out.send_assignment = joining || full_request(r) || cur.current.assigned != member.current.assigned;
}

// --- the APIs ---------------------------------------------------------------------------------

io::Task<net::ConsumerGroupHeartbeatResponse> GroupCoordinator::consumer_group_heartbeat(
    net::ConsumerGroupHeartbeatRequest r, int16_t version, std::string client_id, std::string client_host) {
  net::ConsumerGroupHeartbeatResponse out;
  auto fail = [&](Error e, std::string message) {
    out.error_code = code(e);
    out.error_message = message.empty() ? std::nullopt : std::optional<std::string>(std::move(message));
    return out;
  };
  // Kafka's request validation.
  if (r.group_id.empty()) co_return fail(Error::kInvalidRequest, "GroupId can't be empty.");
  if (r.instance_id.has_value() && r.instance_id->empty()) {
    co_return fail(Error::kInvalidRequest, "InstanceId can't be empty.");
  }
  if (r.rack_id.has_value() && r.rack_id->empty()) co_return fail(Error::kInvalidRequest, "RackId can't be empty.");
  if (version >= 1 && r.member_id.empty()) co_return fail(Error::kInvalidRequest, "MemberId can't be empty.");
  if (r.member_epoch > 0 || r.member_epoch == kLeaveEpoch) {
    if (r.member_id.empty()) co_return fail(Error::kInvalidRequest, "MemberId can't be empty.");
  } else if (r.member_epoch == 0) {
    if (r.rebalance_timeout_ms == -1) {
      co_return fail(Error::kInvalidRequest, "RebalanceTimeoutMs must be provided in first request.");
    }
    if (!r.topic_partitions.has_value() || !r.topic_partitions->empty()) {
      co_return fail(Error::kInvalidRequest, "TopicPartitions must be empty when (re-)joining.");
    }
    if (!r.subscribed_topic_names.has_value() && !r.subscribed_topic_regex.has_value()) {
      co_return fail(Error::kInvalidRequest,
                     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.");
    }
  } else if (r.member_epoch == kStaticLeaveEpoch) {
    if (r.member_id.empty()) co_return fail(Error::kInvalidRequest, "MemberId can't be empty.");
    if (!r.instance_id.has_value()) co_return fail(Error::kInvalidRequest, "InstanceId can't be null.");
  } else {
    co_return fail(Error::kInvalidRequest, "MemberEpoch is invalid.");
  }
  if (r.server_assignor.has_value() &&
      std::find(config_.consumer_assignors.begin(), config_.consumer_assignors.end(), *r.server_assignor) ==
          config_.consumer_assignors.end()) {
    co_return fail(Error::kUnsupportedAssignor, fmt::format("ServerAssignor {} is not supported.", *r.server_assignor));
  }
  if (r.subscribed_topic_regex.has_value() && !r.subscribed_topic_regex->empty()) {
    if (std::optional<std::string> why = regex_error(*r.subscribed_topic_regex)) {
      co_return fail(Error::kInvalidRegularExpression,
                     fmt::format("SubscribedTopicRegex `{}` is not a valid regular expression: {}.",
                                 *r.subscribed_topic_regex, *why));
    }
  }
  if (Error e = check_coordinator(r.group_id); e != Error::kNone) co_return fail(e, "");

  const std::string group_id = r.group_id;
  const int32_t partition = partition_for(group_id);
  io::Mutex& mutex = shards_.lock(partition);
  auto lock = co_await mutex.lock();
  if (Error e = check_coordinator(group_id); e != Error::kNone) co_return fail(e, "");
  const int32_t epoch = *shards_.epoch(partition);
  Group* g = find(group_id);
  if (g != nullptr && g->consumer != nullptr && steady_heartbeat(*g->consumer, r, client_id, client_host, out)) {
    co_return out;
  }
  std::shared_ptr<ConsumerGroup> next;
  // The records that convert a classic group with members (online upgrade).
  std::vector<CoordinatorRecord> conversion;
  if (g == nullptr) {
    if (r.member_epoch != 0) co_return fail(Error::kGroupIdNotFound, fmt::format("Consumer group {} not found.", group_id));
    next = std::make_shared<ConsumerGroup>();
  } else if (g->consumer == nullptr) {
    // An empty classic group is taken over (its offsets stay); one with
    // members is converted when the migration policy allows it.
    if (r.member_epoch != 0) {
      co_return fail(Error::kGroupIdNotFound, fmt::format("Group {} is not a consumer group.", group_id));
    }
    if (g->members.empty() && g->state == State::kEmpty) {
      // Epochs go on from the classic generation, so no member epoch of
      // the consumer group repeats one of the classic group's (Kafka
      // starts again at 1; a zombie of the classic group could then share
      // an epoch with a consumer member).
      next = std::make_shared<ConsumerGroup>();
      next->group_epoch = g->generation;
      next->assignment_epoch = g->generation;
    } else {
      if (!upgrade_allowed(*g)) {
        co_return fail(Error::kGroupIdNotFound, fmt::format("Group {} is not a consumer group.", group_id));
      }
      std::optional<ConsumerGroup> converted = consumer_group_from_classic(*g, conversion);
      if (!converted.has_value()) {
        co_return fail(Error::kGroupIdNotFound,
                       fmt::format("Cannot upgrade the classic group {} to consumer group because the embedded "
                                   "consumer protocol is malformed.",
                                   group_id));
      }
      next = std::make_shared<ConsumerGroup>(*std::move(converted));
    }
  } else if (r.member_epoch == kLeaveEpoch && downgrade_allowed(*g->consumer, r.member_id) &&
             (!r.instance_id.has_value() || g->consumer->members.at(r.member_id).instance_id == r.instance_id)) {
    // The last consumer protocol member leaves a group of classic members:
    // the group goes back to the classic protocol.
    const Error e =
        co_await commit_downgrade(group_id, partition, epoch, std::make_shared<ConsumerGroup>(*g->consumer), r.member_id);
    if (e != Error::kNone) co_return fail(e, "");
    wake_timers();
    out.member_id = r.member_id;
    out.member_epoch = kLeaveEpoch;
    out.heartbeat_interval_ms = heartbeat_interval_ms();
    co_return out;
  } else {
    next = std::make_shared<ConsumerGroup>(*g->consumer);
  }
  HeartbeatResult result;
  consumer_heartbeat_step(group_id, *next, r, version, client_id, client_host, result);
  if (result.error != Error::kNone) co_return fail(result.error, std::move(result.message));
  if (!conversion.empty()) {
    for (CoordinatorRecord& rec : result.records) conversion.push_back(std::move(rec));
    result.records = std::move(conversion);
    ctx_->log().info("group coordinator: group {} upgrading from the classic to the consumer protocol", group_id);
  } else if (next->rewrite && !result.records.empty()) {
    result.records = rewrite_records(group_id, g != nullptr ? g->consumer.get() : nullptr, *next);
  }
  if (g != nullptr && g->consumer == nullptr && !result.records.empty()) {
    // Members an earlier failed conversion may have logged, gone since.
    std::vector<CoordinatorRecord> stray;
    for (const std::string& id : g->conversion_maybe_logged) {
      if (!next->members.contains(id)) member_tombstones(group_id, id, stray);
    }
    if (!stray.empty()) {
      for (CoordinatorRecord& rec : result.records) stray.push_back(std::move(rec));
      result.records = std::move(stray);
    }
  }
  if (!result.records.empty()) {
    // A new group, or a classic one becoming a consumer group: the classic
    // APIs wait until the write is done (a classic member joining meanwhile
    // would be dropped by it).
    bool created = false;
    if (g == nullptr) {
      g = &create(group_id);
      created = true;
    }
    const bool converting = g->consumer == nullptr;
    if (converting) g->converting = true;
    const Error e = co_await commit_consumer_state(group_id, partition, epoch, next, std::move(result.records));
    if (Group* now = find(group_id); now != nullptr && converting) {
      now->converting = false;
      wake_timers();
      // A group the failed write created goes again, unless the write may
      // have landed: then it stays (empty) so that the next write, or the
      // expiry of empty groups, deletes the members it held.
      if (e != Error::kNone && created && now->consumer == nullptr && now->members.empty() &&
          now->pending_members.empty() && now->offsets.empty() && now->txn_offsets.empty() &&
          now->conversion_maybe_logged.empty()) {
        groups_.erase(group_id);
      }
    }
    if (e != Error::kNone) co_return fail(e, "");
  } else {
    g->consumer = next;
  }
  if (Group* now = find(group_id); now != nullptr) sync_classic_timers(*now);
  wake_timers();

  out.member_id = result.member_id;
  out.member_epoch = result.member_epoch;
  out.heartbeat_interval_ms = heartbeat_interval_ms();
  if (auto m = next->members.find(result.member_id); result.send_assignment && m != next->members.end()) {
    net::ConsumerGroupHeartbeatResponse::Assignment a;
    a.topic_partitions = to_wire<net::ConsumerGroupHeartbeatResponse::TopicPartitions>(m->second.current.assigned);
    out.assignment = std::move(a);
  }
  co_return out;
}

int32_t GroupCoordinator::heartbeat_interval_ms() const {
  return static_cast<int32_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.consumer_heartbeat_interval).count());
}

bool GroupCoordinator::steady_heartbeat(ConsumerGroup& cg, const net::ConsumerGroupHeartbeatRequest& r,
                                        const std::string& client_id, const std::string& client_host,
                                        net::ConsumerGroupHeartbeatResponse& out) {
  if (r.member_epoch <= 0 || cg.group_epoch != cg.assignment_epoch) return false;
  auto it = cg.members.find(r.member_id);
  if (it == cg.members.end()) return false;
  ConsumerMember& m = it->second;
  if (m.classic.has_value() || m.instance_id != r.instance_id) return false;
  if (m.current.member_epoch != r.member_epoch || m.current.member_epoch != cg.assignment_epoch ||
      m.current.state != MemberState::kStable) {
    return false;
  }
  // Nothing of its metadata changes.
  if ((r.rebalance_timeout_ms != -1 && r.rebalance_timeout_ms != m.rebalance_timeout_ms) ||
      (r.rack_id.has_value() && r.rack_id != m.rack_id) ||
      (r.server_assignor.has_value() && r.server_assignor != m.server_assignor) || client_id != m.client_id ||
      client_host != m.client_host) {
    return false;
  }
  if (r.subscribed_topic_names.has_value()) {
    std::set<std::string> names(r.subscribed_topic_names->begin(), r.subscribed_topic_names->end());
    if (!std::equal(names.begin(), names.end(), m.subscribed_topic_names.begin(), m.subscribed_topic_names.end())) {
      return false;
    }
  }
  if (r.subscribed_topic_regex.has_value() &&
      (r.subscribed_topic_regex->empty() ? m.subscribed_topic_regex.has_value()
                                         : m.subscribed_topic_regex != r.subscribed_topic_regex)) {
    return false;
  }
  // (A regular expression may match topics created since: the full path
  // looks.)
  if (m.subscribed_topic_regex.has_value()) return false;
  // It owns what it was given.
  if (r.topic_partitions.has_value() && from_wire(*r.topic_partitions) != m.current.assigned) return false;
  // Its topics are as the group last saw them (other members' topics are
  // looked at on their own heartbeats).
  for (const std::string& name : m.subscribed_topic_names) {
    std::optional<CoordinatorLog::Topic> now = log_->topic(name);
    auto known = cg.subscribed.find(name);
    if (now.has_value() != (known != cg.subscribed.end())) return false;
    if (now.has_value() && (now->id != known->second.first || now->partitions != known->second.second)) return false;
  }
  m.session_deadline = ctx_->clock().now() + config_.consumer_session_timeout;
  ++steady_heartbeats_;
  out.member_id = m.id;
  out.member_epoch = m.current.member_epoch;
  out.heartbeat_interval_ms = heartbeat_interval_ms();
  if (full_request(r)) {
    net::ConsumerGroupHeartbeatResponse::Assignment a;
    a.topic_partitions = to_wire<net::ConsumerGroupHeartbeatResponse::TopicPartitions>(m.current.assigned);
    out.assignment = std::move(a);
  }
  return true;
}

io::Task<Error> GroupCoordinator::write_consumer_records(const std::string& group_id, int32_t partition,
                                                         int32_t epoch, std::vector<CoordinatorRecord> records) {
  const CoordinatorLog::Written w = co_await log_->write(partition, epoch, std::move(records));
  if (loaded_epoch(partition) != epoch || loading(partition)) co_return Error::kNotCoordinator;
  if (w.error != Error::kNone) {
    if (Group* g = find(group_id); g != nullptr && g->consumer != nullptr) g->consumer->rewrite = true;
    co_return coordinator_write_error(w.error);
  }
  co_return Error::kNone;
}

io::Task<Error> GroupCoordinator::commit_consumer_state(std::string group_id, int32_t partition, int32_t epoch,
                                                        std::shared_ptr<ConsumerGroup> next,
                                                        std::vector<CoordinatorRecord> records) {
  if (Error e = co_await write_consumer_records(group_id, partition, epoch, std::move(records)); e != Error::kNone) {
    // The write may land all the same: the members it would have added
    // are deleted by the next write (a rewrite) unless the group has them.
    if (Group* g = find(group_id); g != nullptr && g->consumer != nullptr) {
      for (const auto& [id, m] : next->members) {
        if (!g->consumer->members.contains(id)) g->consumer->maybe_logged.insert(id);
      }
    } else if (g != nullptr) {
      // A classic group stays one; its next write deletes them.
      for (const auto& [id, m] : next->members) g->conversion_maybe_logged.insert(id);
    }
    co_return e;
  }
  Group* g = find(group_id);
  if (g == nullptr) g = &create(group_id);
  if (g->consumer == nullptr) become_consumer_group(*g);
  // (The write deleted the members of earlier failed conversions that
  // `next` does not have.)
  g->conversion_maybe_logged.clear();
  g->consumer = std::move(next);
  sync_classic_timers(*g);
  co_return Error::kNone;
}

void GroupCoordinator::expire_consumer_members(Group& g, io::Instant now) {
  for (const auto& [id, m] : g.consumer->members) {
    const char* why = consumer_member_expired(g, m, now);
    if (why == nullptr || fencing_.contains({g.id, id}) || scope_ == nullptr) continue;
    fencing_.insert({g.id, id});
    scope_->spawn(fence_consumer_member(g.id, id, why));
  }
}

io::Task<void> GroupCoordinator::fence_consumer_member(std::string group_id, std::string member_id,
                                                       std::string reason) {
  struct Done {
    GroupCoordinator* self;
    std::pair<std::string, std::string> key;
    // The timer loop leaves members being fenced out of its next deadline:
    // it looks again (a failed fence is retried; a member that came back
    // expires later).
    ~Done() {
      self->fencing_.erase(key);
      self->wake_timers();
    }
  } done{this, {group_id, member_id}};
  const int32_t partition = partition_for(group_id);
  auto lock = co_await shards_.lock(partition).lock();
  if (check_coordinator(group_id) != Error::kNone) co_return;
  Group* g = find(group_id);
  if (g == nullptr || g->consumer == nullptr) co_return;
  auto it = g->consumer->members.find(member_id);
  if (it == g->consumer->members.end()) co_return;
  const io::Instant now = ctx_->clock().now();
  if (consumer_member_expired(*g, it->second, now) == nullptr) co_return;
  const int32_t epoch = *shards_.epoch(partition);
  Error e = Error::kNone;
  if (downgrade_allowed(*g->consumer, member_id)) {
    // The last consumer protocol member of a group of classic members.
    e = co_await commit_downgrade(group_id, partition, epoch, std::make_shared<ConsumerGroup>(*g->consumer), member_id);
  } else {
    auto next = std::make_shared<ConsumerGroup>(*g->consumer);
    std::vector<CoordinatorRecord> records;
    remove_consumer_member(group_id, *next, member_id, records);
    if (next->rewrite) records = rewrite_records(group_id, g->consumer.get(), *next);
    e = co_await commit_consumer_state(group_id, partition, epoch, next, std::move(records));
  }
  if (e != Error::kNone) {
    ctx_->log().warn("group coordinator: fencing member {} of consumer group {} failed: {}", member_id, group_id,
                     net::error_name(code(e)));
    if (Group* now_g = find(group_id); now_g != nullptr && now_g->consumer != nullptr) {
      if (auto m2 = now_g->consumer->members.find(member_id); m2 != now_g->consumer->members.end()) {
        m2->second.session_deadline = std::max(m2->second.session_deadline, now + kFenceRetry);
        if (m2->second.revocation_deadline.has_value()) {
          m2->second.revocation_deadline = std::max(*m2->second.revocation_deadline, now + kFenceRetry);
        }
      }
      if (auto t = now_g->classic_timers.find(member_id); t != now_g->classic_timers.end()) {
        Group::ClassicTimers& timers = t->second;
        timers.session_deadline = std::max(timers.session_deadline, now + kFenceRetry);
        if (timers.join_deadline.has_value()) timers.join_deadline = std::max(*timers.join_deadline, now + kFenceRetry);
        if (timers.sync_deadline.has_value()) timers.sync_deadline = std::max(*timers.sync_deadline, now + kFenceRetry);
      }
    }
    co_return;
  }
  ctx_->log().info("group coordinator: member {} fenced from consumer group {} because {}", member_id, group_id,
                   reason);
  wake_timers();
}

net::ConsumerGroupDescribeResponse GroupCoordinator::consumer_group_describe(
    const net::ConsumerGroupDescribeRequest& r, int16_t version) const {
  (void)version;
  net::ConsumerGroupDescribeResponse out;
  for (const std::string& id : r.group_ids) {
    auto& d = out.groups.emplace_back();
    d.group_id = id;
    if (r.include_authorized_operations) d.authorized_operations = kGroupOperationsAll;
    if (Error e = check_group(id); e != Error::kNone) {
      d.error_code = code(e);
      continue;
    }
    const Group* g = find(id);
    if (g == nullptr || g->consumer == nullptr) {
      d.error_code = code(Error::kGroupIdNotFound);
      d.error_message = g == nullptr ? fmt::format("Group {} not found.", id)
                                     : fmt::format("Group {} is not a consumer group.", id);
      continue;
    }
    const ConsumerGroup& cg = *g->consumer;
    d.group_state = consumer_state(cg);
    d.group_epoch = cg.group_epoch;
    d.assignment_epoch = cg.assignment_epoch;
    d.assignor_name = preferred_assignor(cg);
    auto describe = [&](const TopicPartitions& tps) {
      net::ConsumerGroupDescribeResponse::Assignment a;
      for (const auto& [topic, partitions] : tps) {
        if (partitions.empty()) continue;
        auto& t = a.topic_partitions.emplace_back();
        t.topic_id = topic;
        std::optional<CoordinatorLog::Topic> known = log_->topic(topic);
        t.topic_name = known.has_value() ? known->name : "";
        t.partitions.assign(partitions.begin(), partitions.end());
      }
      return a;
    };
    for (const auto& [mid, m] : cg.members) {
      auto& dm = d.members.emplace_back();
      dm.member_id = mid;
      dm.instance_id = m.instance_id;
      dm.rack_id = m.rack_id;
      dm.member_epoch = m.current.member_epoch;
      dm.client_id = m.client_id;
      dm.client_host = m.client_host;
      dm.subscribed_topic_names = m.subscribed_topic_names;
      dm.subscribed_topic_regex = m.subscribed_topic_regex;
      dm.assignment = describe(m.current.assigned);
      auto t = cg.target.find(mid);
      dm.target_assignment = describe(t == cg.target.end() ? TopicPartitions{} : t->second);
    }
  }
  return out;
}

}  // namespace brook::group
