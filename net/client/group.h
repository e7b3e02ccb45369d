// net/client/group.h
//
// GroupMember: the consumer's side of Kafka's classic group protocol, as
// the Java consumer's ConsumerCoordinator does it with the "consumer"
// protocol type and the range assignor:
//
// - join(): finds the coordinator (FindCoordinator), joins (JoinGroup,
//   answering MEMBER_ID_REQUIRED by joining again with the id given), and
//   when elected leader computes the range assignment of the members'
//   subscriptions; then SyncGroup hands every member its partitions. The
//   result is one generation's assignment.
// - heartbeat(): one Heartbeat; an error means the member must join again
//   (REBALANCE_IN_PROGRESS) or was dropped (UNKNOWN_MEMBER_ID,
//   ILLEGAL_GENERATION, FENCED_INSTANCE_ID).
// - commit() / committed(): OffsetCommit in the member's generation and
//   OffsetFetch. leave(): LeaveGroup.
//
// A coordinator error (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
// COORDINATOR_LOAD_IN_PROGRESS) or a broken connection makes the member
// look the coordinator up again; join() retries those until its deadline.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/task.h"
#include "io/time.h"
#include "net/client/cluster.h"
#include "net/kafka/errors.h"

namespace brook::client {

struct GroupOptions {
  std::string group_id;
  std::vector<std::string> topics;  // the subscription
  // session.timeout.ms, max.poll.interval.ms (the rebalance timeout),
  // heartbeat.interval.ms, group.instance.id
  io::Duration session_timeout = std::chrono::milliseconds(10000);
  io::Duration rebalance_timeout = std::chrono::milliseconds(30000);
  io::Duration heartbeat_interval = std::chrono::milliseconds(3000);
  std::optional<std::string> instance_id;
  // group.protocol: "classic" (JoinGroup/SyncGroup) or "consumer"
  // (KIP-848's ConsumerGroupHeartbeat, the broker assigning).
  bool consumer_protocol = false;
};

// One ConsumerGroupHeartbeat's answer.
struct ConsumerHeartbeat {
  int32_t member_epoch = 0;
  io::Duration heartbeat_interval{};
  // The partitions the member may own now, when the answer carried them
  // (otherwise the assignment did not change).
  std::optional<std::vector<TopicPartition>> assignment;
};

struct GroupAssignment {
  int32_t generation = -1;
  std::string member_id;
  bool leader = false;
  std::vector<TopicPartition> partitions;
};

// The range assignor (Kafka's RangeAssignor): per topic, the members
// subscribed to it in member id order take consecutive ranges of its
// partitions, the first (count % members) one more each.
std::map<std::string, std::vector<TopicPartition>> range_assign(
    const std::map<std::string, std::vector<std::string>>& subscriptions,
    const std::map<std::string, int32_t>& partition_counts);

// The consumer protocol's subscription and assignment bytes (version 0).
io::Buffer encode_subscription(const std::vector<std::string>& topics);
io::Buffer encode_assignment(const std::vector<TopicPartition>& partitions);
absl::StatusOr<std::vector<std::string>> decode_subscription(const io::Buffer& bytes);
absl::StatusOr<std::vector<TopicPartition>> decode_assignment(const io::Buffer& bytes);

// The coordinator of `key`: a group id (key type 0) or a transactional id
// (1). FindCoordinator, then its connection.
io::Task<absl::StatusOr<std::pair<int32_t, net::Peer*>>> find_coordinator(Cluster& cluster, const std::string& key,
                                                                          int8_t key_type = 0);

// NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS:
// look the coordinator up again and retry.
inline bool coordinator_error(int16_t code) {
  return code == net::code(net::Error::kNotCoordinator) || code == net::code(net::Error::kCoordinatorNotAvailable) ||
         code == net::code(net::Error::kCoordinatorLoadInProgress);
}

// One coordinator request, sent once more when the connection closed before
// an answer came: brokers close idle connections (connections.max.idle.ms),
// which a heartbeat interval can outlast, and the client's pooled
// connection does not see that before it sends. For requests that are
// safe to repeat (every group request is).
template <typename Resp, typename Req>
io::Task<absl::StatusOr<Resp>> coordinator_call(net::Peer* peer, const Req& request, int16_t version,
                                                io::Duration timeout) {
  absl::StatusOr<Resp> r = co_await peer->call<Resp>(request, version, timeout);
  if (!r.ok() && absl::IsUnavailable(r.status()) &&
      std::string(r.status().message()) == "connection closed by the peer") {
    r = co_await peer->call<Resp>(request, version, timeout);
  }
  co_return r;
}

// Admin calls (Kafka's AdminClient): the groups every broker coordinates
// (ListGroups to each), one group's description (DescribeGroups to its
// coordinator), and DeleteGroups.
struct GroupListing {
  std::string group_id;
  std::string protocol_type;
  std::string state;
  int32_t coordinator = -1;
};
io::Task<absl::StatusOr<std::vector<GroupListing>>> list_groups(Cluster& cluster);
struct GroupMemberDescription {
  std::string member_id;
  std::optional<std::string> instance_id;
  std::string client_id;
  std::string client_host;
  std::vector<TopicPartition> assignment;  // "consumer" groups
};
struct GroupDescription {
  std::string group_id;
  std::string state;
  std::string protocol_type;
  std::string protocol;
  int32_t coordinator = -1;
  std::vector<GroupMemberDescription> members;
};
io::Task<absl::StatusOr<GroupDescription>> describe_group(Cluster& cluster, const std::string& group_id);
io::Task<absl::Status> delete_group(Cluster& cluster, const std::string& group_id);

class GroupMember {
 public:
  GroupMember(Cluster& cluster, GroupOptions options);

  // Joins (or rejoins) the group; retries retriable errors until `deadline`.
  io::Task<absl::StatusOr<GroupAssignment>> join(io::Instant deadline);
  // One heartbeat in the current generation.
  io::Task<absl::Status> heartbeat();
  // Commits `offsets` in the current generation (generation -1 and no
  // member id when the member never joined: manual assignment).
  io::Task<absl::Status> commit(const std::map<TopicPartition, int64_t>& offsets);
  // The committed offsets (-1 where none).
  io::Task<absl::StatusOr<std::map<TopicPartition, int64_t>>> committed(const std::vector<TopicPartition>& partitions);
  // Every committed offset of the group.
  io::Task<absl::StatusOr<std::map<TopicPartition, int64_t>>> committed_all();
  // Leaves the group (best effort) and forgets the member id.
  io::Task<void> leave();

  // The consumer protocol (KIP-848). One ConsumerGroupHeartbeat reporting
  // `owned` (the partitions the member still holds; it must have stopped
  // using the ones it no longer lists): the first one joins (member epoch
  // 0, with the subscription), later ones carry the member epoch. The
  // answer's epoch becomes the member's (commit() commits in it).
  // FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, or GROUP_ID_NOT_FOUND after
  // joining (the group was emptied and cleaned up) come back as Aborted:
  // the member lost its partitions and joins again with the next heartbeat;
  // coordinator errors as Unavailable.
  io::Task<absl::StatusOr<ConsumerHeartbeat>> consumer_heartbeat(const std::vector<TopicPartition>& owned);

  const std::string& member_id() const { return member_id_; }
  int32_t generation() const { return generation_; }
  // The coordinator's broker id, -1 while unknown.
  int32_t coordinator() const { return coordinator_; }

 private:
  // The coordinator's connection, found with FindCoordinator when unknown.
  io::Task<absl::StatusOr<net::Peer*>> coordinator_peer();
  // Forgets the coordinator after `code` (or a transport error) says so.
  void maybe_forget_coordinator(int16_t code);
  io::Task<absl::StatusOr<GroupAssignment>> join_once();
  // OffsetFetch for the partitions, or for all of the group's (nullopt).
  io::Task<absl::StatusOr<std::map<TopicPartition, int64_t>>> fetch_committed(
      std::optional<std::vector<TopicPartition>> partitions);

  // Topic ids <-> names for the consumer protocol (from Metadata).
  io::Task<absl::Status> learn_topic_ids(const std::vector<net::Uuid>& ids);

  Cluster* cluster_;
  GroupOptions options_;
  std::map<std::string, net::Uuid> topic_ids_;
  std::string member_id_;
  int32_t generation_ = -1;
  int32_t coordinator_ = -1;
};

}  // namespace brook::client
