// coordinators/group/txn_offsets_test.cc
//
// Transactional offset commits (TxnOffsetCommit, KIP-98) in the group
// coordinator: offsets pending until their producer's marker, commits and
// aborts, UNSTABLE_OFFSET_COMMIT for stable reads, the order of
// transactional and plain commits, member checks, expiry and deletion with
// open transactions, and the state rebuilt from the log.
#include <gtest/gtest.h>

#include "coordinators/group/group_coordinator.h"
#include "coordinators/group/test_harness.h"

namespace brook::group {
namespace {

using namespace std::chrono_literals;
using net::Error;

constexpr int16_t kTxnVersion = 3;

struct TxnHarness : Harness {
  using Harness::Harness;

  static net::TxnOffsetCommitRequest txn_request(const std::string& group, int64_t producer_id,
                                                 const std::string& topic, int32_t partition, int64_t offset) {
    net::TxnOffsetCommitRequest r;
    r.transactional_id = "txn";
    r.group_id = group;
    r.producer_id = producer_id;
    r.producer_epoch = 0;
    auto& t = r.topics.emplace_back();
    t.name = topic;
    auto& p = t.partitions.emplace_back();
    p.partition_index = partition;
    p.committed_offset = offset;
    p.committed_metadata = "txn-meta";
    return r;
  }
  // The error of a TxnOffsetCommit of one partition.
  int16_t txn_commit(net::TxnOffsetCommitRequest r, int16_t version = kTxnVersion) {
    net::TxnOffsetCommitResponse out = call(coordinator->txn_offset_commit(std::move(r), version));
    EXPECT_EQ(out.topics.size(), 1u);
    if (out.topics.empty() || out.topics[0].partitions.empty()) return -1;
    return out.topics[0].partitions[0].error_code;
  }
  int16_t txn_commit(const std::string& group, int64_t producer_id, const std::string& topic, int32_t partition,
                     int64_t offset) {
    return txn_commit(txn_request(group, producer_id, topic, partition, offset));
  }
  // The marker of `producer_id` reaches the group's partition.
  void end_txn(const std::string& group, int64_t producer_id, bool commit) {
    const int32_t p = coordinator->partition_for(group);
    log->append_marker(p, producer_id, commit);
    coordinator->complete_transaction(p, producer_id, commit);
  }
  // OffsetFetch v7 of one partition with require_stable: {offset, error}.
  std::pair<int64_t, int16_t> fetch_stable(const std::string& group, const std::string& topic, int32_t partition) {
    net::OffsetFetchRequest r;
    r.group_id = group;
    r.require_stable = true;
    auto& t = r.topics->emplace_back();
    t.name = topic;
    t.partition_indexes = {partition};
    net::OffsetFetchResponse out = coordinator->fetch_offsets(r, 7);
    EXPECT_EQ(out.error_code, 0);
    if (out.topics.empty() || out.topics[0].partitions.empty()) return {-2, -1};
    return {out.topics[0].partitions[0].committed_offset, out.topics[0].partitions[0].error_code};
  }
  // A plain commit outside the group's membership.
  void plain_commit(const std::string& group, const std::string& topic, int32_t partition, int64_t offset) {
    EXPECT_EQ(commit(group, -1, "", topic, partition, offset).topics[0].partitions[0].error_code, 0);
  }
};

const int16_t kUnstable = net::code(Error::kUnstableOffsetCommit);

TEST(TxnOffsets, PendingUntilTheTransactionCommits) {
  TxnHarness h;
  // The group does not exist: the commit creates it, empty.
  EXPECT_EQ(h.txn_commit("txg", 7, "t", 0, 10), 0);
  EXPECT_EQ(h.coordinator->group_state("txg"), "Empty");
  EXPECT_EQ(h.log->transactional_writes, 1);
  const std::vector<MemoryLog::Entry>& log = h.log->partitions[h.coordinator->partition_for("txg")];
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].producer_id, 7);
  // Written, not committed: OffsetFetch does not see it.
  EXPECT_EQ(h.fetched("txg", "t", 0), -1);
  // Another producer's marker changes nothing.
  h.end_txn("txg", 8, true);
  EXPECT_EQ(h.fetched("txg", "t", 0), -1);
  h.end_txn("txg", 7, true);
  EXPECT_EQ(h.fetched("txg", "t", 0), 10);
  EXPECT_EQ(h.fetch_stable("txg", "t", 0), (std::pair<int64_t, int16_t>{10, 0}));
}

TEST(TxnOffsets, AnAbortDropsThePendingOffsets) {
  TxnHarness h;
  h.plain_commit("g", "t", 0, 5);
  EXPECT_EQ(h.txn_commit("g", 7, "t", 0, 10), 0);
  EXPECT_EQ(h.txn_commit("g", 7, "t", 1, 11), 0);
  h.end_txn("g", 7, false);
  EXPECT_EQ(h.fetched("g", "t", 0), 5);
  EXPECT_EQ(h.fetched("g", "t", 1), -1);
  EXPECT_EQ(h.fetch_stable("g", "t", 0), (std::pair<int64_t, int16_t>{5, 0}));
  // A late commit marker of the aborted transaction finds nothing.
  h.coordinator->complete_transaction(h.coordinator->partition_for("g"), 7, true);
  EXPECT_EQ(h.fetched("g", "t", 0), 5);
}

TEST(TxnOffsets, RequireStableAnswersUnstableOffsetCommit) {
  TxnHarness h;
  h.plain_commit("g", "t", 0, 5);
  h.plain_commit("g", "t", 1, 6);
  EXPECT_EQ(h.txn_commit("g", 7, "t", 0, 10), 0);
  // Only the partition with a pending offset is unstable, and only for a
  // reader that asks for stable offsets.
  EXPECT_EQ(h.fetch_stable("g", "t", 0), (std::pair<int64_t, int16_t>{-1, kUnstable}));
  EXPECT_EQ(h.fetch_stable("g", "t", 1), (std::pair<int64_t, int16_t>{6, 0}));
  EXPECT_EQ(h.fetched("g", "t", 0), 5);
  // The group-shaped request (v8+), and a fetch of all the group's offsets.
  net::OffsetFetchRequest r;
  r.require_stable = true;
  auto& rg = r.groups.emplace_back();
  rg.group_id = "g";
  rg.topics = std::nullopt;
  net::OffsetFetchResponse all = h.coordinator->fetch_offsets(r, 8);
  ASSERT_EQ(all.groups.size(), 1u);
  EXPECT_EQ(all.groups[0].error_code, 0);
  ASSERT_EQ(all.groups[0].topics.size(), 1u);
  ASSERT_EQ(all.groups[0].topics[0].partitions.size(), 2u);
  EXPECT_EQ(all.groups[0].topics[0].partitions[0].error_code, kUnstable);
  EXPECT_EQ(all.groups[0].topics[0].partitions[0].committed_offset, -1);
  EXPECT_EQ(all.groups[0].topics[0].partitions[1].error_code, 0);
  EXPECT_EQ(all.groups[0].topics[0].partitions[1].committed_offset, 6);
  h.end_txn("g", 7, true);
  EXPECT_EQ(h.fetch_stable("g", "t", 0), (std::pair<int64_t, int16_t>{10, 0}));
}

TEST(TxnOffsets, AReloadRestoresCommittedAbortedAndOpenTransactions) {
  TxnHarness h;
  EXPECT_EQ(h.txn_commit("g", 1, "t", 0, 10), 0);
  EXPECT_EQ(h.txn_commit("g", 2, "t", 1, 20), 0);
  EXPECT_EQ(h.txn_commit("g", 3, "t", 2, 30), 0);
  h.plain_commit("g", "t", 3, 40);
  h.end_txn("g", 1, true);
  h.end_txn("g", 2, false);
  auto expect_state = [&] {
    EXPECT_EQ(h.fetched("g", "t", 0), 10);
    EXPECT_EQ(h.fetched("g", "t", 1), -1);
    EXPECT_EQ(h.fetched("g", "t", 2), -1);
    EXPECT_EQ(h.fetched("g", "t", 3), 40);
    EXPECT_EQ(h.fetch_stable("g", "t", 1), (std::pair<int64_t, int16_t>{-1, 0}));
    EXPECT_EQ(h.fetch_stable("g", "t", 2), (std::pair<int64_t, int16_t>{-1, kUnstable}));
  };
  expect_state();
  h.reload();
  expect_state();
  // The open transaction survived the reload: its marker commits it.
  h.end_txn("g", 3, true);
  EXPECT_EQ(h.fetched("g", "t", 2), 30);
  h.reload();
  EXPECT_EQ(h.fetched("g", "t", 2), 30);
  EXPECT_EQ(h.fetch_stable("g", "t", 2), (std::pair<int64_t, int16_t>{30, 0}));
}

TEST(TxnOffsets, ALaterPlainCommitIsNotOverwrittenByAnEarlierTransaction) {
  TxnHarness h;
  EXPECT_EQ(h.txn_commit("g", 7, "t", 0, 10), 0);
  h.plain_commit("g", "t", 0, 20);
  h.end_txn("g", 7, true);
  EXPECT_EQ(h.fetched("g", "t", 0), 20);
  h.reload();
  EXPECT_EQ(h.fetched("g", "t", 0), 20);
  // A transactional offset written after the plain one does replace it.
  EXPECT_EQ(h.txn_commit("g", 8, "t", 0, 30), 0);
  h.end_txn("g", 8, true);
  EXPECT_EQ(h.fetched("g", "t", 0), 30);
  h.reload();
  EXPECT_EQ(h.fetched("g", "t", 0), 30);
}

TEST(TxnOffsets, MembersAreCheckedWhenNamed) {
  TxnHarness h;
  auto [a, b, gen] = h.form_group("g");
  auto with_member = [&](int32_t generation, const std::string& member,
                         std::optional<std::string> instance = std::nullopt) {
    net::TxnOffsetCommitRequest r = TxnHarness::txn_request("g", 7, "t", 0, 10);
    r.generation_id = generation;
    r.member_id = member;
    r.group_instance_id = std::move(instance);
    return r;
  };
  // A producer that names no member may commit to a group with members.
  EXPECT_EQ(h.txn_commit(with_member(-1, "")), 0);
  EXPECT_EQ(h.txn_commit(with_member(gen, a)), 0);
  EXPECT_EQ(h.txn_commit(with_member(gen, "stranger")), net::code(Error::kUnknownMemberId));
  EXPECT_EQ(h.txn_commit(with_member(gen + 1, b)), net::code(Error::kIllegalGeneration));
  EXPECT_EQ(h.txn_commit(with_member(-1, b)), net::code(Error::kIllegalGeneration));
  // Before v3 the request has no member fields: whatever they hold is not
  // looked at.
  EXPECT_EQ(h.txn_commit(with_member(gen + 1, "stranger"), 2), 0);
  // A group that does not exist has no generation to match.
  net::TxnOffsetCommitRequest unknown = TxnHarness::txn_request("nobody", 7, "t", 0, 1);
  unknown.generation_id = 3;
  unknown.member_id = "m";
  EXPECT_EQ(h.txn_commit(unknown), net::code(Error::kIllegalGeneration));
  EXPECT_EQ(h.coordinator->group_state("nobody"), "Dead");

  // Static members: the instance must be known and held by the member.
  net::JoinGroupResponse s = h.await(h.join("s", "", "instance-a"));
  ASSERT_EQ(s.error_code, 0);
  auto static_request = [&](const std::string& member, const std::string& instance) {
    net::TxnOffsetCommitRequest r = TxnHarness::txn_request("s", 7, "t", 0, 10);
    r.generation_id = s.generation_id;
    r.member_id = member;
    r.group_instance_id = instance;
    return r;
  };
  EXPECT_EQ(h.txn_commit(static_request(s.member_id, "instance-a")), 0);
  EXPECT_EQ(h.txn_commit(static_request("old-incarnation", "instance-a")), net::code(Error::kFencedInstanceId));
  EXPECT_EQ(h.txn_commit(static_request(s.member_id, "instance-z")), net::code(Error::kUnknownMemberId));
}

TEST(TxnOffsets, PartitionAndGroupErrors) {
  TxnHarness h([](GroupCoordinatorConfig& c) { c.offset_metadata_max_bytes = 8; });
  net::TxnOffsetCommitRequest r = TxnHarness::txn_request("g", 7, "t", 0, 10);
  r.topics[0].partitions[0].committed_metadata = "more than eight bytes";
  auto& missing = r.topics.emplace_back();
  missing.name = "missing";
  missing.partitions.emplace_back().partition_index = 0;
  auto& good = r.topics.emplace_back();
  good.name = "t";
  auto& gp = good.partitions.emplace_back();
  gp.partition_index = 1;
  gp.committed_offset = 11;
  net::TxnOffsetCommitResponse out = h.call(h.coordinator->txn_offset_commit(r, kTxnVersion));
  ASSERT_EQ(out.topics.size(), 3u);
  EXPECT_EQ(out.topics[0].partitions[0].error_code, net::code(Error::kOffsetMetadataTooLarge));
  EXPECT_EQ(out.topics[1].partitions[0].error_code, net::code(Error::kUnknownTopicOrPartition));
  EXPECT_EQ(out.topics[2].partitions[0].error_code, 0);
  // Only the valid partition was written.
  EXPECT_EQ(h.log->partitions[h.coordinator->partition_for("g")].size(), 1u);
  h.end_txn("g", 7, true);
  EXPECT_EQ(h.fetched("g", "t", 1), 11);
  EXPECT_EQ(h.fetched("g", "t", 0), -1);

  EXPECT_EQ(h.txn_commit("", 7, "t", 0, 1), net::code(Error::kInvalidGroupId));
  const int32_t p = h.coordinator->partition_for("g");
  h.coordinator->begin_load(p, 5);
  EXPECT_EQ(h.txn_commit("g", 7, "t", 0, 1), net::code(Error::kCoordinatorLoadInProgress));
  h.coordinator->unload(p);
  EXPECT_EQ(h.txn_commit("g", 7, "t", 0, 1), net::code(Error::kNotCoordinator));
  // A failed write leaves nothing pending.
  TxnHarness f;
  f.log->fail_writes = 1;
  EXPECT_EQ(f.txn_commit("g", 7, "t", 0, 10), net::code(Error::kCoordinatorNotAvailable));
  EXPECT_EQ(f.fetch_stable("g", "t", 0), (std::pair<int64_t, int16_t>{-1, 0}));
}

TEST(TxnOffsets, AMarkerDuringTheWriteAppliesToIt) {
  // The producer gave up waiting and ended its transaction while the
  // records were being committed: the marker follows them in the log.
  for (bool commit : {true, false}) {
    TxnHarness h;
    h.log->delay = 50ms;
    auto slot = h.start(h.coordinator->txn_offset_commit(TxnHarness::txn_request("g", 7, "t", 0, 10), kTxnVersion));
    h.world.run_for(10ms);
    ASSERT_FALSE(slot->has_value());
    h.coordinator->complete_transaction(h.coordinator->partition_for("g"), 7, commit);
    net::TxnOffsetCommitResponse out = h.await(slot);
    EXPECT_EQ(out.topics[0].partitions[0].error_code, 0);
    EXPECT_EQ(h.fetch_stable("g", "t", 0), (std::pair<int64_t, int16_t>{commit ? 10 : -1, 0})) << commit;
  }
}

TEST(TxnOffsets, ATransactionalTombstoneDeletesOnlyIfCommitted) {
  for (bool commit : {true, false}) {
    TxnHarness h;
    h.plain_commit("g", "t", 0, 5);
    const int32_t p = h.coordinator->partition_for("g");
    std::vector<MemoryLog::Entry>& log = h.log->partitions[p];
    log.push_back(MemoryLog::Entry{static_cast<int64_t>(log.size()),
                                   CoordinatorRecord{offset_commit_key("g", "t", 0), std::nullopt}, 9, std::nullopt});
    h.reload();
    EXPECT_EQ(h.fetched("g", "t", 0), 5);
    EXPECT_EQ(h.fetch_stable("g", "t", 0).second, kUnstable);
    h.end_txn("g", 9, commit);
    EXPECT_EQ(h.fetched("g", "t", 0), commit ? -1 : 5) << commit;
    h.reload();
    EXPECT_EQ(h.fetched("g", "t", 0), commit ? -1 : 5) << commit;
  }
}

TEST(TxnOffsets, PendingOffsetsDoNotExpire) {
  TxnHarness h;  // offsets.retention.minutes: an hour
  h.plain_commit("manual", "t", 0, 5);
  EXPECT_EQ(h.txn_commit("manual", 7, "t", 0, 10), 0);
  EXPECT_EQ(h.txn_commit("manual", 7, "t", 1, 11), 0);
  h.world.run_for(2h);
  // The committed offset a transaction may still replace stays, and so
  // does the group.
  EXPECT_EQ(h.fetched("manual", "t", 0), 5);
  EXPECT_EQ(h.coordinator->group_state("manual"), "Empty");
  h.end_txn("manual", 7, false);
  h.world.run_for(2h);
  EXPECT_EQ(h.fetched("manual", "t", 0), -1);
  EXPECT_EQ(h.coordinator->group_state("manual"), "Dead");
}

TEST(TxnOffsets, DeletingTheGroupDeletesPendingOffsets) {
  TxnHarness h;
  h.plain_commit("manual", "t", 0, 5);
  EXPECT_EQ(h.txn_commit("manual", 7, "t", 1, 11), 0);
  net::DeleteGroupsRequest d;
  d.groups_names = {"manual"};
  net::DeleteGroupsResponse out = h.call(h.coordinator->delete_groups(d, 2));
  ASSERT_EQ(out.results.size(), 1u);
  EXPECT_EQ(out.results[0].error_code, 0);
  EXPECT_EQ(h.coordinator->group_state("manual"), "Dead");
  // The commit marker that follows finds nothing to commit, now or after
  // a reload.
  h.end_txn("manual", 7, true);
  EXPECT_EQ(h.fetched("manual", "t", 1), -1);
  h.reload();
  EXPECT_EQ(h.fetched("manual", "t", 1), -1);
  EXPECT_EQ(h.fetched("manual", "t", 0), -1);
  EXPECT_EQ(h.coordinator->group_state("manual"), "Dead");
}

TEST(TxnOffsets, UnloadingDropsPendingOffsets) {
  TxnHarness h;
  EXPECT_EQ(h.txn_commit("g", 7, "t", 0, 10), 0);
  const int32_t p = h.coordinator->partition_for("g");
  h.coordinator->unload(p);
  // Served again without its records: nothing is pending, and the marker
  // commits nothing.
  h.coordinator->begin_load(p, 9);
  h.coordinator->finish_load(p, 9);
  EXPECT_EQ(h.fetch_stable("g", "t", 0), (std::pair<int64_t, int16_t>{-1, 0}));
  h.coordinator->complete_transaction(p, 7, true);
  EXPECT_EQ(h.fetched("g", "t", 0), -1);
}

}  // namespace
}  // namespace brook::group
