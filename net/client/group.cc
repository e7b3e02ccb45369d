// net/client/group.cc
#include "net/client/group.h"

#include <algorithm>

#include <fmt/format.h>

#include "io/status.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/consumer_group_describe_request.h"
#include "net/kafka/messages/consumer_group_describe_response.h"
#include "net/kafka/messages/consumer_group_heartbeat_request.h"
#include "net/kafka/messages/consumer_group_heartbeat_response.h"
#include "net/kafka/messages/consumer_protocol_assignment.h"
#include "net/kafka/messages/consumer_protocol_subscription.h"
#include "net/kafka/messages/delete_groups_request.h"
#include "net/kafka/messages/delete_groups_response.h"
#include "net/kafka/messages/describe_groups_request.h"
#include "net/kafka/messages/describe_groups_response.h"
#include "net/kafka/messages/list_groups_request.h"
#include "net/kafka/messages/list_groups_response.h"
#include "net/kafka/messages/find_coordinator_request.h"
#include "net/kafka/messages/find_coordinator_response.h"
#include "net/kafka/messages/heartbeat_request.h"
#include "net/kafka/messages/heartbeat_response.h"
#include "net/kafka/messages/join_group_request.h"
#include "net/kafka/messages/join_group_response.h"
#include "net/kafka/messages/leave_group_request.h"
#include "net/kafka/messages/leave_group_response.h"
#include "net/kafka/messages/offset_commit_request.h"
#include "net/kafka/messages/offset_commit_response.h"
#include "net/kafka/messages/offset_fetch_request.h"
#include "net/kafka/messages/offset_fetch_response.h"
#include "net/kafka/messages/sync_group_request.h"
#include "net/kafka/messages/sync_group_response.h"
#include "net/kafka/versioned.h"

namespace brook::client {

namespace {

using net::Error;

constexpr int16_t kFindCoordinatorVersion = 3;
constexpr int16_t kJoinGroupVersion = 7;
constexpr int16_t kSyncGroupVersion = 5;
constexpr int16_t kHeartbeatVersion = 4;
constexpr int16_t kLeaveGroupVersion = 4;
constexpr int16_t kOffsetCommitVersion = 8;
constexpr int16_t kOffsetCommitConsumerVersion = 9;  // member epochs
constexpr int16_t kConsumerHeartbeatVersion = 1;
constexpr int16_t kOffsetFetchVersion = 7;
constexpr int16_t kListGroupsVersion = 4;
constexpr int16_t kDescribeGroupsVersion = 5;
constexpr int16_t kConsumerGroupDescribeVersion = 0;
constexpr int16_t kDeleteGroupsVersion = 2;
constexpr const char* kProtocolType = "consumer";
constexpr const char* kRangeAssignor = "range";

int32_t ms(io::Duration d) {
  return static_cast<int32_t>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

}  // namespace

std::map<std::string, std::vector<TopicPartition>> range_assign(
    const std::map<std::string, std::vector<std::string>>& subscriptions,
    const std::map<std::string, int32_t>& partition_counts) {
  std::map<std::string, std::vector<TopicPartition>> out;
  std::map<std::string, std::vector<std::string>> by_topic;  // members in id order
  for (const auto& [member, topics] : subscriptions) {
    out[member];
    for (const std::string& t : topics) by_topic[t].push_back(member);
  }
  for (auto& [topic, members] : by_topic) {
    auto count = partition_counts.find(topic);
    if (count == partition_counts.end()) continue;
    std::sort(members.begin(), members.end());
    members.erase(std::unique(members.begin(), members.end()), members.end());
    const int32_t n = static_cast<int32_t>(members.size());
    const int32_t per = count->second / n;
    const int32_t extra = count->second % n;
    for (int32_t i = 0; i < n; ++i) {
      const int32_t start = per * i + std::min(i, extra);
      const int32_t length = per + (i < extra ? 1 : 0);
      for (int32_t p = start; p < start + length; ++p) out[members[static_cast<size_t>(i)]].emplace_back(topic, p);
    }
  }
  return out;
}

io::Buffer encode_subscription(const std::vector<std::string>& topics) {
  net::ConsumerProtocolSubscription s;
  s.topics = topics;
  return *net::encode_versioned(s, 0);
}

io::Buffer encode_assignment(const std::vector<TopicPartition>& partitions) {
  net::ConsumerProtocolAssignment a;
  for (const TopicPartition& tp : partitions) {
    if (a.assigned_partitions.empty() || a.assigned_partitions.back().topic != tp.topic) {
      a.assigned_partitions.emplace_back().topic = tp.topic;
    }
    a.assigned_partitions.back().partitions.push_back(tp.partition);
  }
  return *net::encode_versioned(a, 0);
}

absl::StatusOr<std::vector<std::string>> decode_subscription(const io::Buffer& bytes) {
  absl::StatusOr<net::ConsumerProtocolSubscription> s =
      net::decode_versioned<net::ConsumerProtocolSubscription>(bytes, /*tolerant=*/true);
  if (!s.ok()) return s.status();
  return std::move(s->topics);
}

absl::StatusOr<std::vector<TopicPartition>> decode_assignment(const io::Buffer& bytes) {
  std::vector<TopicPartition> out;
  if (bytes.empty()) return out;  // no partitions for this member
  absl::StatusOr<net::ConsumerProtocolAssignment> a =
      net::decode_versioned<net::ConsumerProtocolAssignment>(bytes, /*tolerant=*/true);
  if (!a.ok()) return a.status();
  for (const auto& t : a->assigned_partitions) {
    for (int32_t p : t.partitions) out.emplace_back(t.topic, p);
  }
  return out;
}

io::Task<absl::StatusOr<std::pair<int32_t, net::Peer*>>> find_coordinator(Cluster& cluster, const std::string& key,
                                                                          int8_t key_type) {
  net::FindCoordinatorRequest r;
  r.key = key;
  r.key_type = key_type;
  absl::StatusOr<net::FindCoordinatorResponse> found = co_await cluster.any().call<net::FindCoordinatorResponse>(
      r, kFindCoordinatorVersion, cluster.options().request_timeout);
  if (!found.ok()) co_return found.status();
  if (found->error_code != 0) co_return error_status(found->error_code, "FindCoordinator");
  if (cluster.broker(found->node_id) == nullptr) {
    CO_RETURN_IF_ERROR(co_await cluster.refresh({}));
  }
  net::Peer* p = cluster.broker(found->node_id);
  if (p == nullptr) co_return absl::UnavailableError(fmt::format("coordinator {} is not a known broker", found->node_id));
  co_return std::make_pair(found->node_id, p);
}

io::Task<absl::StatusOr<std::vector<GroupListing>>> list_groups(Cluster& cluster) {
  CO_RETURN_IF_ERROR(co_await cluster.refresh({}));
  std::vector<GroupListing> out;
  std::vector<int32_t> ids;
  for (const auto& [id, b] : cluster.brokers()) ids.push_back(id);
  for (int32_t id : ids) {
    net::Peer* peer = cluster.broker(id);
    if (peer == nullptr) continue;
    net::ListGroupsRequest r;
    absl::StatusOr<net::ListGroupsResponse> listed =
        co_await coordinator_call<net::ListGroupsResponse>(peer, r, kListGroupsVersion, cluster.options().request_timeout);
    if (!listed.ok()) co_return listed.status();
    if (listed->error_code != 0) co_return error_status(listed->error_code, fmt::format("ListGroups to {}", id));
    for (const auto& g : listed->groups) {
      out.push_back(GroupListing{g.group_id, g.protocol_type, g.group_state, id});
    }
  }
  std::sort(out.begin(), out.end(), [](const GroupListing& a, const GroupListing& b) { return a.group_id < b.group_id; });
  co_return out;
}

io::Task<absl::StatusOr<GroupDescription>> describe_group(Cluster& cluster, const std::string& group_id) {
  CO_ASSIGN_OR_RETURN(auto coordinator, co_await find_coordinator(cluster, group_id));
  net::DescribeGroupsRequest r;
  r.groups = {group_id};
  absl::StatusOr<net::DescribeGroupsResponse> described = co_await coordinator_call<net::DescribeGroupsResponse>(
      coordinator.second, r, kDescribeGroupsVersion, cluster.options().request_timeout);
  if (!described.ok()) co_return described.status();
  if (described->groups.size() != 1) co_return absl::DataLossError("DescribeGroups: not one group in the answer");
  const auto& g = described->groups[0];
  if (g.error_code != 0) co_return error_status(g.error_code, "DescribeGroups");
  GroupDescription out;
  out.group_id = g.group_id;
  out.state = g.group_state;
  out.protocol_type = g.protocol_type;
  out.protocol = g.protocol_data;
  out.coordinator = coordinator.first;
  for (const auto& m : g.members) {
    GroupMemberDescription d;
    d.member_id = m.member_id;
    d.instance_id = m.group_instance_id;
    d.client_id = m.client_id;
    d.client_host = m.client_host;
    if (g.protocol_type == kProtocolType) {
      absl::StatusOr<std::vector<TopicPartition>> a = decode_assignment(m.member_assignment);
      if (a.ok()) d.assignment = std::move(*a);
    }
    out.members.push_back(std::move(d));
  }
  if (out.state != "Dead") co_return out;
  // DescribeGroups shows a consumer-protocol group as Dead; ask again with
  // ConsumerGroupDescribe (brokers without it, or no such group: Dead).
  net::ConsumerGroupDescribeRequest c;
  c.group_ids = {group_id};
  absl::StatusOr<net::ConsumerGroupDescribeResponse> cd = co_await coordinator_call<net::ConsumerGroupDescribeResponse>(
      coordinator.second, c, kConsumerGroupDescribeVersion, cluster.options().request_timeout);
  if (!cd.ok() || cd->groups.size() != 1 || cd->groups[0].error_code != 0) co_return out;
  const auto& cg = cd->groups[0];
  out.state = cg.group_state;
  out.protocol_type = kProtocolType;
  out.protocol = cg.assignor_name;
  for (const auto& m : cg.members) {
    GroupMemberDescription d;
    d.member_id = m.member_id;
    d.instance_id = m.instance_id;
    d.client_id = m.client_id;
    d.client_host = m.client_host;
    for (const auto& t : m.assignment.topic_partitions) {
      for (int32_t p : t.partitions) d.assignment.emplace_back(t.topic_name, p);
    }
    std::sort(d.assignment.begin(), d.assignment.end());
    out.members.push_back(std::move(d));
  }
  co_return out;
}

io::Task<absl::Status> delete_group(Cluster& cluster, const std::string& group_id) {
  CO_ASSIGN_OR_RETURN(auto coordinator, co_await find_coordinator(cluster, group_id));
  net::DeleteGroupsRequest r;
  r.groups_names = {group_id};
  absl::StatusOr<net::DeleteGroupsResponse> deleted = co_await coordinator_call<net::DeleteGroupsResponse>(
      coordinator.second, r, kDeleteGroupsVersion, cluster.options().request_timeout);
  if (!deleted.ok()) co_return deleted.status();
  for (const auto& res : deleted->results) {
    if (res.error_code != 0) co_return error_status(res.error_code, "DeleteGroups");
  }
  co_return absl::OkStatus();
}

GroupMember::GroupMember(Cluster& cluster, GroupOptions options)
    : cluster_(&cluster), options_(std::move(options)) {}

void GroupMember::maybe_forget_coordinator(int16_t code) {
  if (coordinator_error(code)) coordinator_ = -1;
}

io::Task<absl::StatusOr<net::Peer*>> GroupMember::coordinator_peer() {
  if (coordinator_ >= 0) {
    if (net::Peer* p = cluster_->broker(coordinator_)) co_return p;
  }
  CO_ASSIGN_OR_RETURN(auto found, co_await find_coordinator(*cluster_, options_.group_id));
  coordinator_ = found.first;
  co_return found.second;
}

io::Task<absl::StatusOr<GroupAssignment>> GroupMember::join(io::Instant deadline) {
  absl::Status last = absl::DeadlineExceededError("no time to join");
  while (cluster_->context().clock().now() < deadline) {
    absl::StatusOr<GroupAssignment> a = co_await join_once();
    if (a.ok()) co_return a;
    last = a.status();
    if (absl::IsFailedPrecondition(last) || absl::IsInvalidArgument(last)) co_return last;
    if (absl::IsAborted(last)) continue;  // join again at once (MEMBER_ID_REQUIRED)
    co_await cluster_->context().clock().sleep_for(cluster_->options().retry_backoff);
  }
  co_return last;
}

io::Task<absl::StatusOr<GroupAssignment>> GroupMember::join_once() {
  CO_ASSIGN_OR_RETURN(net::Peer * peer, co_await coordinator_peer());
  const int32_t coordinator = coordinator_;
  net::JoinGroupRequest j;
  j.group_id = options_.group_id;
  j.session_timeout_ms = ms(options_.session_timeout);
  j.rebalance_timeout_ms = ms(options_.rebalance_timeout);
  j.member_id = member_id_;
  j.group_instance_id = options_.instance_id;
  j.protocol_type = kProtocolType;
  auto& protocol = j.protocols.emplace_back();
  protocol.name = kRangeAssignor;
  protocol.metadata = encode_subscription(options_.topics);
  absl::StatusOr<net::JoinGroupResponse> joined = co_await coordinator_call<net::JoinGroupResponse>(
      peer, j, kJoinGroupVersion, options_.rebalance_timeout + cluster_->options().request_timeout);
  if (!joined.ok()) {
    coordinator_ = -1;
    cluster_->reset(coordinator);
    co_return joined.status();
  }
  const int16_t code = joined->error_code;
  if (code == net::code(Error::kMemberIdRequired)) {
    member_id_ = joined->member_id;
    co_return absl::AbortedError("MEMBER_ID_REQUIRED: joining again with the id given");
  }
  if (code == net::code(Error::kUnknownMemberId) || code == net::code(Error::kIllegalGeneration)) {
    member_id_.clear();
    generation_ = -1;
    co_return absl::AbortedError(error_text(code));
  }
  if (code == net::code(Error::kFencedInstanceId) || code == net::code(Error::kInconsistentGroupProtocol) ||
      code == net::code(Error::kInvalidSessionTimeout) || code == net::code(Error::kGroupMaxSizeReached) ||
      code == net::code(Error::kInvalidGroupId)) {
    co_return absl::FailedPreconditionError(fmt::format("JoinGroup: {}", error_text(code)));
  }
  if (code != 0) {
    maybe_forget_coordinator(code);
    co_return absl::UnavailableError(fmt::format("JoinGroup: {}", error_text(code)));
  }
  member_id_ = joined->member_id;
  generation_ = joined->generation_id;

  net::SyncGroupRequest s;
  s.group_id = options_.group_id;
  s.generation_id = generation_;
  s.member_id = member_id_;
  s.group_instance_id = options_.instance_id;
  s.protocol_type = kProtocolType;
  s.protocol_name = joined->protocol_name;
  const bool leader = joined->leader == member_id_;
  if (leader) {
    std::map<std::string, std::vector<std::string>> subscriptions;
    std::vector<std::string> topics;
    for (const auto& m : joined->members) {
      absl::StatusOr<std::vector<std::string>> sub = decode_subscription(m.metadata);
      subscriptions[m.member_id] = sub.ok() ? *sub : std::vector<std::string>{};
      if (sub.ok()) topics.insert(topics.end(), sub->begin(), sub->end());
    }
    std::sort(topics.begin(), topics.end());
    topics.erase(std::unique(topics.begin(), topics.end()), topics.end());
    CO_ASSIGN_OR_RETURN(net::MetadataResponse md, co_await cluster_->fetch_metadata(topics, false));
    std::map<std::string, int32_t> counts;
    for (const auto& t : md.topics) {
      if (t.error_code == 0 && t.name.has_value()) counts[*t.name] = static_cast<int32_t>(t.partitions.size());
    }
    for (const auto& [member, parts] : range_assign(subscriptions, counts)) {
      auto& a = s.assignments.emplace_back();
      a.member_id = member;
      a.assignment = encode_assignment(parts);
    }
  }
  absl::StatusOr<net::SyncGroupResponse> synced =
      co_await coordinator_call<net::SyncGroupResponse>(peer, s, kSyncGroupVersion, cluster_->options().request_timeout);
  if (!synced.ok()) {
    coordinator_ = -1;
    cluster_->reset(coordinator);
    co_return synced.status();
  }
  if (synced->error_code != 0) {
    const int16_t sc = synced->error_code;
    maybe_forget_coordinator(sc);
    if (sc == net::code(Error::kUnknownMemberId)) member_id_.clear();
    if (sc == net::code(Error::kFencedInstanceId)) {
      co_return absl::FailedPreconditionError(fmt::format("SyncGroup: {}", error_text(sc)));
    }
    co_return absl::UnavailableError(fmt::format("SyncGroup: {}", error_text(sc)));
  }
  CO_ASSIGN_OR_RETURN(std::vector<TopicPartition> partitions, decode_assignment(synced->assignment));
  GroupAssignment out;
  out.generation = generation_;
  out.member_id = member_id_;
  out.leader = leader;
  out.partitions = std::move(partitions);
  co_return out;
}

io::Task<absl::Status> GroupMember::heartbeat() {
  CO_ASSIGN_OR_RETURN(net::Peer * peer, co_await coordinator_peer());
  const int32_t coordinator = coordinator_;
  net::HeartbeatRequest h;
  h.group_id = options_.group_id;
  h.generation_id = generation_;
  h.member_id = member_id_;
  h.group_instance_id = options_.instance_id;
  absl::StatusOr<net::HeartbeatResponse> r =
      co_await coordinator_call<net::HeartbeatResponse>(peer, h, kHeartbeatVersion, cluster_->options().request_timeout);
  if (!r.ok()) {
    coordinator_ = -1;
    cluster_->reset(coordinator);
    co_return r.status();
  }
  maybe_forget_coordinator(r->error_code);
  co_return error_status(r->error_code, "Heartbeat");
}

io::Task<absl::Status> GroupMember::commit(const std::map<TopicPartition, int64_t>& offsets) {
  CO_ASSIGN_OR_RETURN(net::Peer * peer, co_await coordinator_peer());
  const int32_t coordinator = coordinator_;
  net::OffsetCommitRequest c;
  c.group_id = options_.group_id;
  c.generation_id_or_member_epoch = generation_;
  c.member_id = member_id_;
  c.group_instance_id = options_.instance_id;
  for (const auto& [tp, offset] : offsets) {
    if (c.topics.empty() || c.topics.back().name != tp.topic) c.topics.emplace_back().name = tp.topic;
    auto& p = c.topics.back().partitions.emplace_back();
    p.partition_index = tp.partition;
    p.committed_offset = offset;
  }
  const int16_t version = options_.consumer_protocol ? kOffsetCommitConsumerVersion : kOffsetCommitVersion;
  absl::StatusOr<net::OffsetCommitResponse> r =
      co_await coordinator_call<net::OffsetCommitResponse>(peer, c, version, cluster_->options().request_timeout);
  if (!r.ok()) {
    coordinator_ = -1;
    cluster_->reset(coordinator);
    co_return r.status();
  }
  for (const auto& t : r->topics) {
    for (const auto& p : t.partitions) {
      if (p.error_code != 0) {
        maybe_forget_coordinator(p.error_code);
        co_return error_status(p.error_code, fmt::format("OffsetCommit {}-{}", t.name, p.partition_index));
      }
    }
  }
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<std::map<TopicPartition, int64_t>>> GroupMember::committed(
    const std::vector<TopicPartition>& partitions) {
  return fetch_committed(partitions);
}

io::Task<absl::StatusOr<std::map<TopicPartition, int64_t>>> GroupMember::committed_all() {
  return fetch_committed(std::nullopt);
}

io::Task<absl::StatusOr<std::map<TopicPartition, int64_t>>> GroupMember::fetch_committed(
    std::optional<std::vector<TopicPartition>> partitions) {
  CO_ASSIGN_OR_RETURN(net::Peer * peer, co_await coordinator_peer());
  const int32_t coordinator = coordinator_;
  net::OffsetFetchRequest f;
  f.group_id = options_.group_id;
  if (partitions.has_value()) {
    f.topics.emplace();
    for (const TopicPartition& tp : *partitions) {
      if (f.topics->empty() || f.topics->back().name != tp.topic) f.topics->emplace_back().name = tp.topic;
      f.topics->back().partition_indexes.push_back(tp.partition);
    }
  } else {
    f.topics.reset();  // every partition the group has an offset for
  }
  absl::StatusOr<net::OffsetFetchResponse> r =
      co_await coordinator_call<net::OffsetFetchResponse>(peer, f, kOffsetFetchVersion, cluster_->options().request_timeout);
  if (!r.ok()) {
    coordinator_ = -1;
    cluster_->reset(coordinator);
    co_return r.status();
  }
  if (r->error_code != 0) {
    maybe_forget_coordinator(r->error_code);
    co_return error_status(r->error_code, "OffsetFetch");
  }
  std::map<TopicPartition, int64_t> out;
  for (const auto& t : r->topics) {
    for (const auto& p : t.partitions) {
      if (p.error_code != 0) co_return error_status(p.error_code, "OffsetFetch");
      out[TopicPartition(t.name, p.partition_index)] = p.committed_offset;
    }
  }
  co_return out;
}

io::Task<void> GroupMember::leave() {
  if (member_id_.empty() && !options_.instance_id.has_value()) co_return;
  absl::StatusOr<net::Peer*> peer = co_await coordinator_peer();
  if (peer.ok() && options_.consumer_protocol) {
    net::ConsumerGroupHeartbeatRequest h;
    h.group_id = options_.group_id;
    h.member_id = member_id_;
    h.member_epoch = -1;
    h.instance_id = options_.instance_id;
    (void)co_await coordinator_call<net::ConsumerGroupHeartbeatResponse>(*peer, h, kConsumerHeartbeatVersion,
                                                                   cluster_->options().request_timeout);
  } else if (peer.ok()) {
    net::LeaveGroupRequest l;
    l.group_id = options_.group_id;
    auto& who = l.members.emplace_back();
    who.member_id = member_id_;
    who.group_instance_id = options_.instance_id;
    (void)co_await coordinator_call<net::LeaveGroupResponse>(*peer, l, kLeaveGroupVersion, cluster_->options().request_timeout);
  }
  member_id_.clear();
  generation_ = -1;
}

io::Task<absl::Status> GroupMember::learn_topic_ids(const std::vector<net::Uuid>& ids) {
  bool known = true;
  for (const net::Uuid& id : ids) {
    known &= std::any_of(topic_ids_.begin(), topic_ids_.end(), [&](const auto& e) { return e.second == id; });
  }
  if (known && topic_ids_.size() >= options_.topics.size()) co_return absl::OkStatus();
  CO_ASSIGN_OR_RETURN(net::MetadataResponse md, co_await cluster_->fetch_metadata(options_.topics, false));
  for (const auto& t : md.topics) {
    if (t.error_code == 0 && t.name.has_value() && !t.topic_id.is_zero()) topic_ids_[*t.name] = t.topic_id;
  }
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<ConsumerHeartbeat>> GroupMember::consumer_heartbeat(const std::vector<TopicPartition>& owned) {
  if (member_id_.empty()) {
    // Version 1: the member names itself (a UUID in Kafka's text form).
    member_id_ = net::random_uuid(cluster_->context().random()).to_string();
  }
  CO_RETURN_IF_ERROR(co_await learn_topic_ids({}));
  CO_ASSIGN_OR_RETURN(net::Peer * peer, co_await coordinator_peer());
  const int32_t coordinator = coordinator_;
  const bool joining = generation_ <= 0;
  net::ConsumerGroupHeartbeatRequest h;
  h.group_id = options_.group_id;
  h.member_id = member_id_;
  h.member_epoch = joining ? 0 : generation_;
  h.instance_id = options_.instance_id;
  // A full request when joining; afterwards the coordinator keeps what
  // did not change, but the subscription and owned partitions are always
  // sent (a coordinator that failed over answers a full request alike).
  h.rebalance_timeout_ms = ms(options_.rebalance_timeout);
  h.subscribed_topic_names = options_.topics;
  auto& tps = h.topic_partitions.emplace();
  for (const TopicPartition& tp : owned) {
    auto id = topic_ids_.find(tp.topic);
    if (id == topic_ids_.end()) continue;
    if (tps.empty() || tps.back().topic_id != id->second) tps.emplace_back().topic_id = id->second;
    tps.back().partitions.push_back(tp.partition);
  }
  absl::StatusOr<net::ConsumerGroupHeartbeatResponse> r = co_await coordinator_call<net::ConsumerGroupHeartbeatResponse>(
      peer, h, kConsumerHeartbeatVersion, cluster_->options().request_timeout);
  if (!r.ok()) {
    coordinator_ = -1;
    cluster_->reset(coordinator);
    co_return r.status();
  }
  const int16_t code = r->error_code;
  // GROUP_ID_NOT_FOUND: the group was emptied and cleaned up meanwhile.
  if (code == net::code(Error::kFencedMemberEpoch) || code == net::code(Error::kUnknownMemberId) ||
      (code == net::code(Error::kGroupIdNotFound) && generation_ > 0)) {
    generation_ = 0;
    co_return absl::AbortedError(fmt::format("ConsumerGroupHeartbeat: {}", error_text(code)));
  }
  if (code != 0) {
    maybe_forget_coordinator(code);
    co_return error_status(code, "ConsumerGroupHeartbeat");
  }
  generation_ = r->member_epoch;
  ConsumerHeartbeat out;
  out.member_epoch = r->member_epoch;
  out.heartbeat_interval = std::chrono::milliseconds(r->heartbeat_interval_ms);
  if (r->assignment.has_value()) {
    std::vector<net::Uuid> ids;
    for (const auto& t : r->assignment->topic_partitions) ids.push_back(t.topic_id);
    CO_RETURN_IF_ERROR(co_await learn_topic_ids(ids));
    auto& parts = out.assignment.emplace();
    for (const auto& t : r->assignment->topic_partitions) {
      auto name = std::find_if(topic_ids_.begin(), topic_ids_.end(), [&](const auto& e) { return e.second == t.topic_id; });
      if (name == topic_ids_.end()) co_return absl::UnavailableError("ConsumerGroupHeartbeat: unknown topic id");
      for (int32_t p : t.partitions) parts.emplace_back(name->first, p);
    }
    std::sort(parts.begin(), parts.end());
  }
  co_return out;
}

}  // namespace brook::client
