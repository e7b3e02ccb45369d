// coordinators/group/group_coordinator_test.cc
//
// The group coordinator in the simulator over an in-memory coordinator log:
// the classic rebalance protocol, session expiry, static membership,
// committed offsets, and state rebuilt by replaying the partition.
#include "coordinators/group/group_coordinator.h"

#include <gtest/gtest.h>

#include "coordinators/group/test_harness.h"
#include "net/kafka/messages/consumer_protocol_subscription.h"
#include "net/kafka/versioned.h"

namespace brook::group {
namespace {

using namespace std::chrono_literals;
using net::Error;

TEST(GroupPartition, MatchesKafkasPlacement) {
  // Utils.abs(String.hashCode) % 50, as Kafka places groups: "my-group"
  // hashes to -1906497762 (clearing the sign bit instead would give 36).
  EXPECT_EQ(partition_for_group("my-group", 50), 12);
  EXPECT_EQ(partition_for_group("test-group", 50), 12);
  EXPECT_EQ(partition_for_group("console-consumer-12345", 50), 6);
}

TEST(GroupCoordinator, TwoMembersJoinSyncAndHeartbeat) {
  Harness h;
  auto [a, b, gen] = h.form_group("g");
  EXPECT_EQ(gen, 1);
  EXPECT_EQ(h.coordinator->group_state("g"), "Stable");
  EXPECT_EQ(h.heartbeat("g", gen, a), 0);
  EXPECT_EQ(h.heartbeat("g", gen, b), 0);
  EXPECT_EQ(h.heartbeat("g", gen + 1, b), net::code(Error::kIllegalGeneration));
  EXPECT_EQ(h.heartbeat("g", gen, "nobody"), net::code(Error::kUnknownMemberId));
  // The assignment was stored before it was handed out.
  EXPECT_EQ(h.log->partitions[h.coordinator->partition_for("g")].size(), 1u);
}

TEST(GroupCoordinator, ExpiredSessionRebalancesTheRest) {
  Harness h;
  auto [a, b, gen] = h.form_group("g");
  // Only `a` keeps heartbeating; `b` goes quiet past its 10 s session.
  bool rebalancing = false;
  for (int i = 0; i < 8 && !rebalancing; ++i) {
    h.world.run_for(2s);
    rebalancing = h.heartbeat("g", gen, a) == net::code(Error::kRebalanceInProgress);
  }
  ASSERT_TRUE(rebalancing);
  net::JoinGroupResponse j = h.await(h.join("g", a));
  EXPECT_EQ(j.error_code, 0);
  EXPECT_EQ(j.generation_id, gen + 1);
  ASSERT_EQ(j.members.size(), 1u);
  EXPECT_EQ(j.members[0].member_id, a);
  EXPECT_EQ(h.heartbeat("g", gen + 1, b), net::code(Error::kUnknownMemberId));
}

TEST(GroupCoordinator, NewMemberRebalancesAndLateFollowerIsDropped) {
  Harness h;
  auto [a, b, gen] = h.form_group("g");
  // A third member joins: the others learn it from their heartbeats.
  net::JoinGroupResponse c0 = h.await(h.join("g", ""));
  auto c = h.join("g", c0.member_id);
  EXPECT_EQ(h.heartbeat("g", gen, a), net::code(Error::kRebalanceInProgress));
  auto ja = h.join("g", a);
  // `b` keeps heartbeating but never rejoins: after the rebalance timeout
  // (20 s) the join completes without it.
  while (!ja->has_value()) {
    EXPECT_EQ(h.heartbeat("g", gen, b), net::code(Error::kRebalanceInProgress));
    h.world.run_for(2s);
  }
  net::JoinGroupResponse ra = h.await(ja);
  net::JoinGroupResponse rc = h.await(c);
  EXPECT_EQ(ra.generation_id, gen + 1);
  EXPECT_EQ(rc.generation_id, gen + 1);
  EXPECT_EQ(ra.members.size(), 2u);
  EXPECT_EQ(h.coordinator->group_members("g").size(), 2u);
  EXPECT_GE(h.world.elapsed(), 20s);
  // A sync from the old generation is refused.
  EXPECT_EQ(h.await(h.sync("g", gen, a)).error_code, net::code(Error::kIllegalGeneration));
}

TEST(GroupCoordinator, LeavingMembersEmptyTheGroup) {
  Harness h;
  auto [a, b, gen] = h.form_group("g");
  net::LeaveGroupRequest leave;
  leave.group_id = "g";
  auto& who = leave.members.emplace_back();
  who.member_id = b;
  auto& ghost = leave.members.emplace_back();
  ghost.member_id = "ghost";
  net::LeaveGroupResponse out = h.call(h.coordinator->leave_group(leave, 3));
  ASSERT_EQ(out.members.size(), 2u);
  EXPECT_EQ(out.members[0].error_code, 0);
  EXPECT_EQ(out.members[1].error_code, net::code(Error::kUnknownMemberId));
  EXPECT_EQ(h.coordinator->group_state("g"), "PreparingRebalance");
  net::JoinGroupResponse j = h.await(h.join("g", a));
  EXPECT_EQ(j.generation_id, gen + 1);
  net::LeaveGroupRequest leave_a;
  leave_a.group_id = "g";
  leave_a.member_id = a;
  EXPECT_EQ(h.call(h.coordinator->leave_group(leave_a, 1)).error_code, 0);
  EXPECT_EQ(h.coordinator->group_state("g"), "Empty");
  EXPECT_EQ(h.coordinator->group_generation("g"), gen + 2);
  // Empty, the group takes members of another protocol type.
  net::JoinGroupRequest other = h.join_request("g", "");
  other.protocol_type = "connect";
  net::JoinGroupResponse c = h.call(h.coordinator->join_group(other, 3, "client", ""));
  EXPECT_EQ(c.error_code, 0);
  net::DescribeGroupsRequest d;
  d.groups = {"g"};
  EXPECT_EQ(h.coordinator->describe_groups(d, 1).groups[0].protocol_type, "connect");
}

TEST(GroupCoordinator, StaticMemberRestartKeepsItsAssignmentAndFencesTheOld) {
  Harness h;
  auto sa = h.join("s", "", "instance-a");
  net::JoinGroupResponse a = h.await(sa);  // the only member: completes after the initial delay
  ASSERT_EQ(a.error_code, 0);
  auto sb = h.join("s", "", "instance-b");
  EXPECT_EQ(h.heartbeat("s", a.generation_id, a.member_id), net::code(Error::kRebalanceInProgress));
  auto ra = h.join("s", a.member_id, "instance-a");
  net::JoinGroupResponse ja = h.await(ra);
  net::JoinGroupResponse jb = h.await(sb);
  ASSERT_EQ(ja.error_code, 0);
  auto syb = h.sync("s", jb.generation_id, jb.member_id);
  EXPECT_EQ(h.await(h.sync("s", ja.generation_id, ja.member_id, {{ja.member_id, "A"}, {jb.member_id, "B"}}))
                .assignment.view(),
            "A");
  EXPECT_EQ(h.await(syb).assignment.view(), "B");
  // instance-b restarts: a new member id, the same generation, no rebalance.
  net::JoinGroupResponse jb2 = h.await(h.join("s", "", "instance-b"));
  EXPECT_EQ(jb2.error_code, 0);
  EXPECT_NE(jb2.member_id, jb.member_id);
  EXPECT_EQ(jb2.generation_id, ja.generation_id);
  EXPECT_EQ(h.coordinator->group_state("s"), "Stable");
  EXPECT_EQ(h.await(h.sync("s", jb2.generation_id, jb2.member_id)).assignment.view(), "B");
  // The old incarnation is fenced.
  net::HeartbeatRequest old;
  old.group_id = "s";
  old.generation_id = jb.generation_id;
  old.member_id = jb.member_id;
  old.group_instance_id = "instance-b";
  EXPECT_EQ(h.coordinator->heartbeat(old, 3).error_code, net::code(Error::kFencedInstanceId));
  // The leader (instance-a) restarts: no rebalance either; it gets the
  // members back and (JoinGroup v9) is told to skip the assignment.
  net::JoinGroupResponse ja2 =
      h.call(h.coordinator->join_group(h.join_request("s", "", "instance-a"), 9, "client", ""));
  EXPECT_EQ(ja2.error_code, 0);
  EXPECT_EQ(ja2.generation_id, ja.generation_id);
  EXPECT_EQ(ja2.leader, ja2.member_id);
  EXPECT_EQ(ja2.members.size(), 2u);
  EXPECT_TRUE(ja2.skip_assignment);
  EXPECT_EQ(h.coordinator->group_state("s"), "Stable");
  EXPECT_EQ(h.await(h.sync("s", ja2.generation_id, ja2.member_id)).assignment.view(), "A");
}

TEST(GroupCoordinator, OffsetsCommitWithGenerationChecksAndSurviveReload) {
  Harness h;
  auto [a, b, gen] = h.form_group("g");
  EXPECT_EQ(h.commit("g", gen, a, "t", 0, 42).topics[0].partitions[0].error_code, 0);
  EXPECT_EQ(h.commit("g", gen + 5, a, "t", 1, 7).topics[0].partitions[0].error_code,
            net::code(Error::kIllegalGeneration));
  EXPECT_EQ(h.commit("g", gen, "stranger", "t", 1, 7).topics[0].partitions[0].error_code,
            net::code(Error::kUnknownMemberId));
  EXPECT_EQ(h.commit("g", gen, a, "missing", 0, 1).topics[0].partitions[0].error_code,
            net::code(Error::kUnknownTopicOrPartition));
  // A group without members takes commits at generation -1 (manual
  // assignment), and refuses them at a generation it never had.
  EXPECT_EQ(h.commit("manual", -1, "", "t", 2, 9).topics[0].partitions[0].error_code, 0);
  EXPECT_EQ(h.commit("other", 3, "m", "t", 2, 9).topics[0].partitions[0].error_code,
            net::code(Error::kIllegalGeneration));
  EXPECT_EQ(h.fetched("g", "t", 0), 42);
  EXPECT_EQ(h.fetched("g", "t", 1), -1);
  EXPECT_EQ(h.fetched("manual", "t", 2), 9);
  EXPECT_EQ(h.fetched("nobody", "t", 2), -1);
  // A failed write changes nothing.
  h.log->fail_next = Error::kNotEnoughReplicas;
  EXPECT_EQ(h.commit("g", gen, a, "t", 0, 50).topics[0].partitions[0].error_code,
            net::code(Error::kCoordinatorNotAvailable));
  EXPECT_EQ(h.fetched("g", "t", 0), 42);
  EXPECT_EQ(h.commit("g", gen, b, "t", 0, 43).topics[0].partitions[0].error_code, 0);

  // A new leader of the partitions rebuilds everything from the records.
  h.reload();
  EXPECT_EQ(h.fetched("g", "t", 0), 43);
  EXPECT_EQ(h.fetched("manual", "t", 2), 9);
  EXPECT_EQ(h.coordinator->group_state("g"), "Stable");
  EXPECT_EQ(h.coordinator->group_generation("g"), gen);
  EXPECT_EQ(h.heartbeat("g", gen, a), 0);
  net::SyncGroupResponse again = h.await(h.sync("g", gen, b));
  EXPECT_EQ(again.assignment.view(), "B");
  // Members that never come back expire after their session timeout.
  h.world.run_for(12s);
  EXPECT_NE(h.coordinator->group_state("g"), "Stable");
}

TEST(GroupCoordinator, AnswersNotCoordinatorAndLoadInProgress) {
  Harness h;
  const int32_t p = h.coordinator->partition_for("g");
  h.coordinator->unload(p);
  EXPECT_EQ(h.await(h.join("g", "")).error_code, net::code(Error::kNotCoordinator));
  h.coordinator->begin_load(p, 5);
  EXPECT_EQ(h.await(h.join("g", "")).error_code, net::code(Error::kCoordinatorLoadInProgress));
  int16_t error = 0;
  h.fetched("g", "t", 0, &error);
  EXPECT_EQ(error, net::code(Error::kCoordinatorLoadInProgress));
  h.coordinator->finish_load(p, 4);  // an older load finishing changes nothing
  EXPECT_TRUE(h.coordinator->loading(p));
  h.coordinator->finish_load(p, 5);
  EXPECT_EQ(h.await(h.join("g", "")).error_code, net::code(Error::kMemberIdRequired));
}

TEST(GroupCoordinator, DescribeListDeleteAndOffsetDelete) {
  Harness h;
  auto [a, b, gen] = h.form_group("g");
  EXPECT_EQ(h.commit("g", gen, a, "t", 0, 5).topics[0].partitions[0].error_code, 0);
  net::DescribeGroupsRequest d;
  d.groups = {"g", "unknown"};
  net::DescribeGroupsResponse dr = h.coordinator->describe_groups(d, 5);
  ASSERT_EQ(dr.groups.size(), 2u);
  EXPECT_EQ(dr.groups[0].group_state, "Stable");
  EXPECT_EQ(dr.groups[0].protocol_data, "range");
  ASSERT_EQ(dr.groups[0].members.size(), 2u);
  // Members that joined through MEMBER_ID_REQUIRED keep their client id.
  EXPECT_EQ(dr.groups[0].members[0].client_id, "client");
  EXPECT_EQ(dr.groups[0].members[1].client_id, "client");
  EXPECT_EQ(dr.groups[1].group_state, "Dead");
  net::ListGroupsRequest l;
  l.states_filter = {"stable"};
  net::ListGroupsResponse lr = h.coordinator->list_groups(l, 4);
  ASSERT_EQ(lr.groups.size(), 1u);
  EXPECT_EQ(lr.groups[0].group_id, "g");
  net::DeleteGroupsRequest del;
  del.groups_names = {"g", "unknown"};
  net::DeleteGroupsResponse delr = h.call(h.coordinator->delete_groups(del, 2));
  EXPECT_EQ(delr.results[0].error_code, net::code(Error::kNonEmptyGroup));
  EXPECT_EQ(delr.results[1].error_code, net::code(Error::kGroupIdNotFound));
  // Emptied, the group and its offsets can go.
  net::LeaveGroupRequest leave;
  leave.group_id = "g";
  leave.members.emplace_back().member_id = a;
  leave.members.emplace_back().member_id = b;
  (void)h.call(h.coordinator->leave_group(leave, 3));
  EXPECT_EQ(h.coordinator->group_state("g"), "Empty");
  net::OffsetDeleteRequest od;
  od.group_id = "g";
  auto& ot = od.topics.emplace_back();
  ot.name = "t";
  ot.partitions.emplace_back().partition_index = 0;
  EXPECT_EQ(h.call(h.coordinator->delete_offsets(od, 0)).error_code, 0);
  EXPECT_EQ(h.fetched("g", "t", 0), -1);
  del.groups_names = {"g"};
  EXPECT_EQ(h.call(h.coordinator->delete_groups(del, 2)).results[0].error_code, 0);
  EXPECT_EQ(h.coordinator->group_state("g"), "Dead");
  h.reload();
  EXPECT_EQ(h.coordinator->group_state("g"), "Dead");
}

}  // namespace
}  // namespace brook::group

namespace brook::group {
namespace {

TEST(GroupCoordinator, OffsetsExpireAfterTheGroupEmpties) {
  Harness h;  // offsets.retention 1 h, checked every minute
  auto [a, b, gen] = h.form_group("g");
  EXPECT_EQ(h.commit("g", gen, a, "t", 0, 5).topics[0].partitions[0].error_code, 0);
  EXPECT_EQ(h.commit("manual", -1, "", "t", 1, 7).topics[0].partitions[0].error_code, 0);
  // Members keep the offsets however old they get.
  h.heartbeat_for(80min, "g", gen, {a, b});
  EXPECT_EQ(h.fetched("g", "t", 0), 5);
  // A group without members (manual commits) counts from the commit.
  EXPECT_EQ(h.fetched("manual", "t", 1), -1);
  EXPECT_EQ(h.coordinator->group_state("manual"), "Dead");
  // Emptied, the group keeps its offsets for the retention period, then
  // loses them and is gone, also after a reload.
  net::LeaveGroupRequest leave;
  leave.group_id = "g";
  leave.members.emplace_back().member_id = a;
  leave.members.emplace_back().member_id = b;
  (void)h.call(h.coordinator->leave_group(leave, 3));
  h.world.run_for(50min);
  EXPECT_EQ(h.fetched("g", "t", 0), 5);
  h.world.run_for(12min);
  EXPECT_EQ(h.fetched("g", "t", 0), -1);
  EXPECT_EQ(h.coordinator->group_state("g"), "Dead");
  h.reload();
  EXPECT_EQ(h.coordinator->group_state("g"), "Dead");
  EXPECT_EQ(h.fetched("g", "t", 0), -1);
}

TEST(GroupCoordinator, AStableGroupLosesOnlyTheOffsetsOfTopicsItNoLongerConsumes) {
  Harness h;  // offsets.retention 1 h, checked every minute
  net::ConsumerProtocolSubscription sub;
  sub.topics = {"t"};
  absl::StatusOr<io::Buffer> encoded = net::encode_versioned(sub, 1);
  ASSERT_TRUE(encoded.ok());
  auto [a, b, gen] = h.form_group("g", std::string(encoded->view()));
  EXPECT_EQ(h.commit("g", gen, a, "t", 0, 5).topics[0].partitions[0].error_code, 0);
  EXPECT_EQ(h.commit("g", gen, a, "u", 0, 9).topics[0].partitions[0].error_code, 0);
  h.heartbeat_for(62min, "g", gen, {a, b});
  EXPECT_EQ(h.fetched("g", "t", 0), 5);
  EXPECT_EQ(h.fetched("g", "u", 0), -1);
  EXPECT_EQ(h.coordinator->group_state("g"), "Stable");
  h.reload();
  EXPECT_EQ(h.fetched("g", "t", 0), 5);
  EXPECT_EQ(h.fetched("g", "u", 0), -1);
}

TEST(GroupCoordinator, ARetentionTimeOfOldCommitsIsKept) {
  Harness h;  // offsets.retention 1 h, checked every minute
  auto commit = [&](const std::string& group, int16_t version, int64_t retention_ms) {
    net::OffsetCommitRequest r = Harness::commit_request(group, -1, "", "t", 0, 11);
    r.retention_time_ms = retention_ms;
    return h.call(h.coordinator->commit_offsets(std::move(r), version)).topics[0].partitions[0].error_code;
  };
  EXPECT_EQ(commit("short", 2, 10 * 60 * 1000), 0);     // 10 minutes
  EXPECT_EQ(commit("long", 4, 3 * 60 * 60 * 1000), 0);  // 3 hours
  EXPECT_EQ(commit("default", 2, -1), 0);               // the broker's hour
  EXPECT_EQ(commit("ignored", 5, 10 * 60 * 1000), 0);   // (v5+ has no retention time)
  // The expiry time is part of the record.
  h.world.run_for(5min);
  h.reload();
  h.world.run_for(7min);
  EXPECT_EQ(h.fetched("short", "t", 0), -1);
  EXPECT_EQ(h.coordinator->group_state("short"), "Dead");
  EXPECT_EQ(h.fetched("long", "t", 0), 11);
  EXPECT_EQ(h.fetched("default", "t", 0), 11);
  EXPECT_EQ(h.fetched("ignored", "t", 0), 11);
  h.world.run_for(50min);
  EXPECT_EQ(h.fetched("long", "t", 0), 11);
  EXPECT_EQ(h.fetched("default", "t", 0), -1);
  EXPECT_EQ(h.fetched("ignored", "t", 0), -1);
  h.world.run_for(2h);
  EXPECT_EQ(h.fetched("long", "t", 0), -1);
}

TEST(GroupCoordinator, AnOffsetCommittedWhileItExpiresIsKept) {
  Harness h;
  EXPECT_EQ(h.commit("manual", -1, "", "t", 0, 7).topics[0].partitions[0].error_code, 0);
  // Just before the expiry check that removes the offset (the one after an
  // hour), a new commit of it starts: writes take 40 s meanwhile.
  h.world.run_for(60min + 40s);
  h.log->delay = 40s;
  auto recommit = h.start(h.coordinator->commit_offsets(Harness::commit_request("manual", -1, "", "t", 0, 8), 8));
  h.world.run_for(35s);
  h.log->delay = 2ms;
  net::OffsetCommitResponse out = h.await(recommit);
  EXPECT_EQ(out.topics[0].partitions[0].error_code, 0);
  h.world.run_for(1min);
  EXPECT_EQ(h.fetched("manual", "t", 0), 8);
  h.reload();
  EXPECT_EQ(h.fetched("manual", "t", 0), 8);
}

}  // namespace
}  // namespace brook::group
