// storage/producer_state_test.cc
//
// Tests of the producer state: each validation rule with its exact Kafka
// error code, duplicate detection over the retained batches, sequence wrap,
// all-or-nothing appends, transaction markers and the last stable offset,
// expiry and truncation, the snapshot format (layout, round trip, rejection
// of every corruption) and the snapshot files on a simulated disk. Two
// RapidCheck properties drive random appends against a small reference model
// written from the rules in producer_state.h, and check what a snapshot
// round trip preserves.
#include "storage/producer_state.h"

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "io/random.h"
#include "net/codec/crc32c.h"
#include "sim/disk.h"
#include "sim/test_executor.h"

namespace brook::storage {
namespace {

using net::ControlRecordType;
using net::Error;
using net::RecordBatchHeader;

constexpr int32_t kIntMax = std::numeric_limits<int32_t>::max();

// A data batch header as the log would hand it over (offsets assigned).
RecordBatchHeader data_batch(int64_t pid, int16_t epoch, int32_t seq, int64_t base_offset,
                             int32_t records = 1, bool transactional = false,
                             int64_t timestamp_ms = 1000) {
  RecordBatchHeader h;
  h.base_offset = base_offset;
  h.last_offset_delta = records - 1;
  h.records_count = records;
  h.producer_id = pid;
  h.producer_epoch = epoch;
  h.base_sequence = seq;
  h.base_timestamp = timestamp_ms;
  h.max_timestamp = timestamp_ms;
  if (transactional) h.attributes |= net::kBatchTransactionalBit;
  return h;
}

RecordBatchHeader marker_batch(int64_t pid, int16_t epoch, int64_t offset,
                               int64_t timestamp_ms = 1000) {
  RecordBatchHeader h = data_batch(pid, epoch, net::kNoSequence, offset, 1, true, timestamp_ms);
  h.attributes |= net::kBatchControlBit;
  return h;
}

EndTxnMarkerInfo commit_marker(int32_t coordinator_epoch = 0) {
  return EndTxnMarkerInfo{ControlRecordType::kCommit, coordinator_epoch};
}
EndTxnMarkerInfo abort_marker(int32_t coordinator_epoch = 0) {
  return EndTxnMarkerInfo{ControlRecordType::kAbort, coordinator_epoch};
}

// Appends one batch and commits it when accepted, as the log does.
AddBatchResult append_one(ProducerStateManager& m, AppendOrigin origin,
                          const RecordBatchHeader& h,
                          std::optional<EndTxnMarkerInfo> marker = std::nullopt) {
  ProducerAppend append = m.begin_append(origin);
  AddBatchResult result = append.add_batch(h, marker);
  if (result.ok()) {
    m.commit(std::move(append));
    m.update_map_end_offset(h.next_offset());
  }
  return result;
}

AddBatchResult client(ProducerStateManager& m, const RecordBatchHeader& h) {
  return append_one(m, AppendOrigin::kClient, h);
}

// --- sequences ----------------------------------------------------------------

// The last sequence of a batch wraps past INT32_MAX to 0 like Kafka's
// DefaultRecordBatch.incrementSequence, and decrement undoes it.
TEST(ProducerStateTest, SequenceArithmeticWraps) {
  EXPECT_EQ(batch_last_sequence(data_batch(1, 0, 5, 0, 3)), 7);
  EXPECT_EQ(batch_last_sequence(data_batch(1, 0, kIntMax, 0, 1)), kIntMax);
  EXPECT_EQ(batch_last_sequence(data_batch(1, 0, kIntMax, 0, 2)), 0);
  EXPECT_EQ(batch_last_sequence(data_batch(1, 0, kIntMax - 1, 0, 4)), 1);
  EXPECT_EQ(batch_last_sequence(data_batch(1, 0, net::kNoSequence, 0, 4)), net::kNoSequence);
  EXPECT_EQ(decrement_sequence(1, 3), kIntMax - 1);
  EXPECT_EQ(decrement_sequence(7, 2), 5);
  for (int32_t seq : {0, 1, 100, kIntMax - 2, kIntMax}) {
    for (int32_t d : {0, 1, 2, 5}) EXPECT_EQ(decrement_sequence(increment_sequence(seq, d), d), seq);
  }
  BatchMetadata b{.last_sequence = 1, .last_offset = 10, .offset_delta = 3, .timestamp_ms = 0};
  EXPECT_EQ(b.first_sequence(), kIntMax - 1);
  EXPECT_EQ(b.first_offset(), 7);
}

// KIP-360: a producer the partition does not know may start at any sequence.
TEST(ProducerStateTest, UnknownProducerAcceptsAnySequence) {
  ProducerStateManager m;
  EXPECT_TRUE(client(m, data_batch(7, 3, 42, 0, 2)).ok());
  const ProducerStateEntry* e = m.last_entry(7);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->producer_epoch, 3);
  EXPECT_EQ(e->last_sequence(), 43);
  EXPECT_EQ(e->last_data_offset(), 1);
  EXPECT_EQ(m.last_entry(8), nullptr);
}

// Within an epoch each batch must start right after the previous one.
TEST(ProducerStateTest, SameEpochRequiresNextSequence) {
  ProducerStateManager m;
  ASSERT_TRUE(client(m, data_batch(1, 0, 0, 0, 3)).ok());  // seq 0..2
  AddBatchResult gap = client(m, data_batch(1, 0, 4, 3));
  EXPECT_EQ(gap.error, Error::kOutOfOrderSequenceNumber);
  EXPECT_FALSE(gap.message.empty());
  EXPECT_EQ(client(m, data_batch(1, 0, 2, 3)).error, Error::kOutOfOrderSequenceNumber);
  EXPECT_EQ(client(m, data_batch(1, 0, 0, 3)).error, Error::kOutOfOrderSequenceNumber);
  EXPECT_TRUE(client(m, data_batch(1, 0, 3, 3)).ok());
  EXPECT_EQ(m.last_entry(1)->last_sequence(), 3);
}

// After INT32_MAX the next sequence is 0.
TEST(ProducerStateTest, SequenceWrapsToZero) {
  ProducerStateManager m;
  ASSERT_TRUE(client(m, data_batch(1, 0, kIntMax - 2, 0, 3)).ok());  // ends at INT32_MAX
  EXPECT_EQ(m.last_entry(1)->last_sequence(), kIntMax);
  EXPECT_EQ(client(m, data_batch(1, 0, 1, 3)).error, Error::kOutOfOrderSequenceNumber);
  ASSERT_TRUE(client(m, data_batch(1, 0, 0, 3, 2)).ok());
  // A batch that itself straddles the wrap.
  ASSERT_TRUE(client(m, data_batch(2, 0, kIntMax - 1, 5, 4)).ok());
  EXPECT_EQ(m.last_entry(2)->last_sequence(), 1);
  EXPECT_EQ(m.last_entry(2)->batches.back().first_sequence(), kIntMax - 1);
  EXPECT_TRUE(client(m, data_batch(2, 0, 2, 9)).ok());
}

// A lower epoch is a zombie: INVALID_PRODUCER_EPOCH for client and
// coordinator appends; replication applies what the leader wrote.
TEST(ProducerStateTest, LowerEpochIsRejected) {
  ProducerStateManager m;
  ASSERT_TRUE(client(m, data_batch(1, 5, 0, 0)).ok());
  EXPECT_EQ(client(m, data_batch(1, 4, 1, 1)).error, Error::kInvalidProducerEpoch);
  EXPECT_EQ(append_one(m, AppendOrigin::kCoordinator, data_batch(1, 4, 1, 1)).error,
            Error::kInvalidProducerEpoch);
  EXPECT_EQ(m.last_entry(1)->producer_epoch, 5);
  for (AppendOrigin origin : {AppendOrigin::kReplication, AppendOrigin::kRecovery}) {
    EXPECT_TRUE(append_one(m, origin, data_batch(1, 4, 9, 1)).ok());
    EXPECT_EQ(m.last_entry(1)->producer_epoch, 4);
    EXPECT_EQ(m.last_entry(1)->batches.size(), 1u);
    ASSERT_TRUE(append_one(m, AppendOrigin::kReplication, data_batch(1, 5, 0, 2)).ok());
  }
}

// A new epoch starts at sequence 0 and forgets the old epoch's batches.
TEST(ProducerStateTest, NewEpochMustStartAtZero) {
  ProducerStateManager m;
  ASSERT_TRUE(client(m, data_batch(1, 0, 0, 0)).ok());
  ASSERT_TRUE(client(m, data_batch(1, 0, 1, 1)).ok());
  for (int32_t seq : {1, 2, 5}) {
    EXPECT_EQ(client(m, data_batch(1, 1, seq, 2)).error, Error::kOutOfOrderSequenceNumber) << seq;
  }
  ASSERT_TRUE(client(m, data_batch(1, 1, 0, 2)).ok());
  EXPECT_EQ(m.last_entry(1)->producer_epoch, 1);
  EXPECT_EQ(m.last_entry(1)->batches.size(), 1u);
  // The coordinator does not use sequences.
  EXPECT_TRUE(append_one(m, AppendOrigin::kCoordinator, data_batch(1, 2, 17, 3)).ok());
  EXPECT_TRUE(append_one(m, AppendOrigin::kCoordinator, data_batch(1, 2, 3, 4)).ok());
}

// An epoch with no batch yet (a marker bumped it) must start at sequence 0.
TEST(ProducerStateTest, EpochWithoutBatchesRequiresZero) {
  ProducerStateManager m;
  ASSERT_TRUE(client(m, data_batch(1, 0, 0, 0, 1, true)).ok());
  ASSERT_TRUE(append_one(m, AppendOrigin::kCoordinator, marker_batch(1, 1, 1), abort_marker()).ok());
  const ProducerStateEntry* e = m.last_entry(1);
  EXPECT_EQ(e->producer_epoch, 1);
  EXPECT_TRUE(e->batches.empty());
  EXPECT_EQ(client(m, data_batch(1, 1, 1, 2)).error, Error::kOutOfOrderSequenceNumber);
  EXPECT_TRUE(client(m, data_batch(1, 1, 0, 2)).ok());
}

// Up to five batches are retained; a retry of any of them is a duplicate,
// and a sixth batch evicts the oldest.
TEST(ProducerStateTest, DuplicatesOverRetainedBatches) {
  ProducerStateManager m;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client(m, data_batch(1, 0, i * 2, i * 2, 2)).ok());
  for (int i = 0; i < 5; ++i) {
    std::optional<BatchMetadata> dup = m.find_duplicate(data_batch(1, 0, i * 2, 100, 2));
    ASSERT_TRUE(dup.has_value()) << i;
    EXPECT_EQ(dup->first_offset(), i * 2);
    EXPECT_EQ(dup->last_offset, i * 2 + 1);
    EXPECT_EQ(dup->last_sequence, i * 2 + 1);
  }
  // Same first sequence, other last sequence; other epoch; other producer.
  EXPECT_FALSE(m.find_duplicate(data_batch(1, 0, 0, 100, 1)).has_value());
  EXPECT_FALSE(m.find_duplicate(data_batch(1, 1, 0, 100, 2)).has_value());
  EXPECT_FALSE(m.find_duplicate(data_batch(2, 0, 0, 100, 2)).has_value());
  EXPECT_FALSE(m.find_duplicate(data_batch(-1, 0, 0, 100, 2)).has_value());
  ASSERT_TRUE(client(m, data_batch(1, 0, 10, 10, 2)).ok());
  EXPECT_EQ(m.last_entry(1)->batches.size(), kProducerBatchesRetained);
  EXPECT_FALSE(m.find_duplicate(data_batch(1, 0, 0, 100, 2)).has_value());
  EXPECT_TRUE(m.find_duplicate(data_batch(1, 0, 2, 100, 2)).has_value());
  EXPECT_TRUE(m.find_duplicate(data_batch(1, 0, 10, 100, 2)).has_value());
  // A retried batch is not in sequence either, if the log missed the check.
  EXPECT_EQ(client(m, data_batch(1, 0, 10, 12, 2)).error, Error::kOutOfOrderSequenceNumber);
}

// The batches of one append are checked against each other, and an append
// with a failing batch changes nothing.
TEST(ProducerStateTest, MultiBatchAppendIsAllOrNothing) {
  ProducerStateManager m;
  ASSERT_TRUE(client(m, data_batch(1, 0, 0, 0)).ok());
  {
    ProducerAppend append = m.begin_append(AppendOrigin::kClient);
    EXPECT_TRUE(append.add_batch(data_batch(1, 0, 1, 1, 2), std::nullopt).ok());
    EXPECT_TRUE(append.add_batch(data_batch(2, 0, 9, 3), std::nullopt).ok());
    EXPECT_TRUE(append.add_batch(data_batch(1, 0, 3, 4), std::nullopt).ok());
    AddBatchResult bad = append.add_batch(data_batch(1, 0, 3, 5), std::nullopt);
    EXPECT_EQ(bad.error, Error::kOutOfOrderSequenceNumber);
    EXPECT_TRUE(append.failed());
    // The failed batch left nothing behind; the others are staged only.
    EXPECT_EQ(append.updated_entries().at(1).last_sequence(), 3);
    EXPECT_EQ(m.last_entry(1)->last_sequence(), 0);
    EXPECT_EQ(m.last_entry(2), nullptr);
  }
  ProducerAppend append = m.begin_append(AppendOrigin::kClient);
  ASSERT_TRUE(append.add_batch(data_batch(1, 0, 1, 1, 2), std::nullopt).ok());
  ASSERT_TRUE(append.add_batch(data_batch(1, 0, 3, 3, 1, true), std::nullopt).ok());
  ASSERT_TRUE(append.add_batch(data_batch(1, 0, 4, 4, 1, true), std::nullopt).ok());
  EXPECT_EQ(append.add_batch(data_batch(1, 0, 5, 5), std::nullopt).error, Error::kInvalidTxnState);
  ProducerAppend good = m.begin_append(AppendOrigin::kClient);
  ASSERT_TRUE(good.add_batch(data_batch(1, 0, 1, 1, 2), std::nullopt).ok());
  ASSERT_TRUE(good.add_batch(data_batch(1, 0, 3, 3, 1, true), std::nullopt).ok());
  EXPECT_EQ(good.started_transactions(), (std::vector<OngoingTxn>{{1, 3}}));
  m.commit(std::move(good));
  EXPECT_EQ(m.last_entry(1)->last_sequence(), 3);
  EXPECT_EQ(m.last_entry(1)->batches.size(), 3u);
  EXPECT_EQ(m.first_unstable_offset(), 3);
}

// Batches without a producer id and control batches that are not commit or
// abort markers leave no producer state.
TEST(ProducerStateTest, IgnoresBatchesWithoutProducerState) {
  ProducerStateManager m;
  EXPECT_TRUE(client(m, data_batch(net::kNoProducerId, -1, -1, 0)).ok());
  RecordBatchHeader leader_change = marker_batch(5, 0, 1);
  EXPECT_TRUE(append_one(m, AppendOrigin::kReplication, leader_change).ok());
  EXPECT_TRUE(m.producers().empty());
}

// A transactional batch opens a transaction; non-transactional data inside
// it is INVALID_TXN_STATE; markers close it with a CompletedTxn.
TEST(ProducerStateTest, TransactionsAndMarkers) {
  ProducerStateManager m;
  ASSERT_TRUE(client(m, data_batch(1, 0, 0, 10, 2, true)).ok());
  ASSERT_TRUE(client(m, data_batch(2, 0, 0, 12, 1, true)).ok());
  ASSERT_TRUE(client(m, data_batch(1, 0, 2, 13, 1, true)).ok());
  EXPECT_EQ(m.last_entry(1)->current_txn_first_offset, 10);
  EXPECT_TRUE(m.has_ongoing_transaction(1));
  EXPECT_FALSE(m.has_ongoing_transaction(3));
  EXPECT_EQ(m.first_unstable_offset(), 10);
  EXPECT_EQ(m.ongoing_transactions().size(), 2u);
  EXPECT_EQ(client(m, data_batch(1, 0, 3, 14)).error, Error::kInvalidTxnState);

  AddBatchResult commit =
      append_one(m, AppendOrigin::kCoordinator, marker_batch(1, 0, 14, 2000), commit_marker(3));
  ASSERT_TRUE(commit.ok());
  const CompletedTxn expected1{.producer_id = 1, .first_offset = 10, .last_offset = 14,
                               .aborted = false};
  EXPECT_EQ(commit.completed, expected1);
  EXPECT_FALSE(m.has_ongoing_transaction(1));
  EXPECT_EQ(m.last_entry(1)->coordinator_epoch, 3);
  EXPECT_EQ(m.last_entry(1)->last_timestamp_ms, 2000);
  // Still open until complete_txn; the LSO after it is producer 2's start.
  EXPECT_EQ(m.first_unstable_offset(), 10);
  EXPECT_EQ(m.last_stable_offset(expected1), 12);
  m.complete_txn(expected1);
  EXPECT_EQ(m.first_unstable_offset(), 12);

  AddBatchResult abort =
      append_one(m, AppendOrigin::kCoordinator, marker_batch(2, 0, 15), abort_marker(3));
  const CompletedTxn expected2{.producer_id = 2, .first_offset = 12, .last_offset = 15,
                               .aborted = true};
  EXPECT_EQ(abort.completed, expected2);
  EXPECT_EQ(m.last_stable_offset(expected2), 16);
  m.complete_txn(expected2);
  EXPECT_EQ(m.first_unstable_offset(), std::nullopt);
  EXPECT_TRUE(m.ongoing_transactions().empty());

  // A marker without transaction data completes nothing (KAFKA-10702).
  AddBatchResult empty =
      append_one(m, AppendOrigin::kCoordinator, marker_batch(2, 0, 16), commit_marker(3));
  EXPECT_TRUE(empty.ok());
  EXPECT_EQ(empty.completed, std::nullopt);
  // Non-transactional data is fine again after the marker.
  EXPECT_TRUE(client(m, data_batch(1, 0, 3, 17)).ok());
}

// Markers: a lower producer epoch is INVALID_PRODUCER_EPOCH (as for data,
// Kafka since 2.7), a lower coordinator epoch TRANSACTION_COORDINATOR_FENCED;
// a higher epoch is taken and clears the retained batches, the same epoch
// keeps them.
TEST(ProducerStateTest, MarkerEpochChecks) {
  ProducerStateManager m;
  ASSERT_TRUE(client(m, data_batch(1, 2, 0, 0, 1, true)).ok());
  ASSERT_TRUE(append_one(m, AppendOrigin::kCoordinator, marker_batch(1, 2, 1), commit_marker(5)).ok());
  ASSERT_TRUE(client(m, data_batch(1, 2, 1, 2, 1, true)).ok());
  EXPECT_EQ(append_one(m, AppendOrigin::kCoordinator, marker_batch(1, 1, 3), commit_marker(5)).error,
            Error::kInvalidProducerEpoch);
  AddBatchResult fenced =
      append_one(m, AppendOrigin::kCoordinator, marker_batch(1, 2, 3), commit_marker(4));
  EXPECT_EQ(fenced.error, Error::kTransactionCoordinatorFenced);
  EXPECT_TRUE(m.has_ongoing_transaction(1));
  // Epoch first: both wrong gives the epoch error, as Kafka checks it first.
  EXPECT_EQ(append_one(m, AppendOrigin::kCoordinator, marker_batch(1, 1, 3), commit_marker(4)).error,
            Error::kInvalidProducerEpoch);
  // Same epoch: the retained batches stay (a retry is still a duplicate).
  ASSERT_TRUE(append_one(m, AppendOrigin::kCoordinator, marker_batch(1, 2, 3), commit_marker(5)).ok());
  EXPECT_EQ(m.last_entry(1)->batches.size(), 2u);
  EXPECT_TRUE(m.find_duplicate(data_batch(1, 2, 1, 50)).has_value());
  // A higher epoch (an abort after an epoch bump) clears them.
  ASSERT_TRUE(client(m, data_batch(1, 2, 2, 4, 1, true)).ok());
  AddBatchResult bump =
      append_one(m, AppendOrigin::kCoordinator, marker_batch(1, 3, 5), abort_marker(6));
  ASSERT_TRUE(bump.ok());
  EXPECT_TRUE(bump.completed.has_value());
  EXPECT_EQ(m.last_entry(1)->producer_epoch, 3);
  EXPECT_TRUE(m.last_entry(1)->batches.empty());
  EXPECT_EQ(m.last_entry(1)->coordinator_epoch, 6);
  // Replication applies a lower coordinator epoch as written.
  EXPECT_TRUE(append_one(m, AppendOrigin::kReplication, marker_batch(1, 3, 6), commit_marker(1)).ok());
  EXPECT_EQ(m.last_entry(1)->coordinator_epoch, 1);
}

// Replicated non-transactional data inside a transaction is applied and the
// transaction stays open for its marker.
TEST(ProducerStateTest, ReplicationKeepsTransactionOpen) {
  ProducerStateManager m;
  ASSERT_TRUE(append_one(m, AppendOrigin::kReplication, data_batch(1, 0, 0, 0, 1, true)).ok());
  ASSERT_TRUE(append_one(m, AppendOrigin::kReplication, data_batch(1, 0, 5, 1)).ok());
  EXPECT_EQ(m.last_entry(1)->current_txn_first_offset, 0);
  AddBatchResult end =
      append_one(m, AppendOrigin::kReplication, marker_batch(1, 0, 2), commit_marker());
  EXPECT_EQ(end.completed, (CompletedTxn{1, 0, 2, false}));
}

// A coordinator's transactional batch (the group coordinator's
// TxnOffsetCommit: no sequence numbers) opens its producer's transaction in
// the partition, and the marker WriteTxnMarkers appends later ends it.
TEST(ProducerStateTest, CoordinatorTransactionalBatchOpensATransaction) {
  ProducerStateManager m;
  ProducerAppend append = m.begin_append(AppendOrigin::kCoordinator);
  ASSERT_TRUE(append.add_batch(data_batch(4, 2, net::kNoSequence, 7, 2, true), std::nullopt).ok());
  EXPECT_EQ(append.started_transactions(), (std::vector<OngoingTxn>{{4, 7}}));
  m.commit(std::move(append));
  m.update_map_end_offset(9);
  EXPECT_TRUE(m.has_ongoing_transaction(4));
  EXPECT_EQ(m.first_unstable_offset(), 7);
  EXPECT_EQ(m.last_entry(4)->current_txn_first_offset, 7);
  // A second batch of the same transaction (no sequences either) joins it.
  ASSERT_TRUE(append_one(m, AppendOrigin::kCoordinator, data_batch(4, 2, net::kNoSequence, 9, 1, true)).ok());
  EXPECT_EQ(m.ongoing_transactions().size(), 1u);
  AddBatchResult end = append_one(m, AppendOrigin::kCoordinator, marker_batch(4, 2, 10), commit_marker());
  EXPECT_EQ(end.completed, (CompletedTxn{4, 7, 10, false}));
  m.complete_txn(*end.completed);
  EXPECT_FALSE(m.has_ongoing_transaction(4));
  EXPECT_EQ(m.first_unstable_offset(), std::nullopt);
}

// A transaction opened and ended in one append completes like any other.
TEST(ProducerStateTest, TransactionWithinOneAppend) {
  ProducerStateManager m;
  ProducerAppend append = m.begin_append(AppendOrigin::kReplication);
  ASSERT_TRUE(append.add_batch(data_batch(1, 0, 0, 0, 1, true), std::nullopt).ok());
  ASSERT_TRUE(append.add_batch(data_batch(2, 0, 0, 1, 1, true), std::nullopt).ok());
  AddBatchResult end = append.add_batch(marker_batch(1, 0, 2), abort_marker());
  ASSERT_TRUE(end.completed.has_value());
  m.commit(std::move(append));
  EXPECT_EQ(m.first_unstable_offset(), 0);
  EXPECT_EQ(m.last_stable_offset(*end.completed), 1);
  m.complete_txn(*end.completed);
  EXPECT_EQ(m.first_unstable_offset(), 1);
}

// producer.id.expiration.ms: idle producers are forgotten, except with an
// open transaction; a forgotten producer may restart at any sequence.
TEST(ProducerStateTest, ExpiresIdleProducers) {
  ProducerStateManager m(ProducerStateConfig{.producer_id_expiration_ms = 1000});
  ASSERT_TRUE(client(m, data_batch(1, 0, 0, 0, 1, false, 5000)).ok());
  ASSERT_TRUE(client(m, data_batch(2, 0, 0, 1, 1, true, 5000)).ok());
  ASSERT_TRUE(client(m, data_batch(3, 0, 0, 2, 1, false, 5500)).ok());
  m.remove_expired_producers(5999);
  EXPECT_EQ(m.producers().size(), 3u);
  m.remove_expired_producers(6000);
  EXPECT_EQ(m.last_entry(1), nullptr);
  EXPECT_NE(m.last_entry(2), nullptr);
  EXPECT_NE(m.last_entry(3), nullptr);
  EXPECT_TRUE(client(m, data_batch(1, 0, 77, 3)).ok());
  // Extreme timestamps do not overflow.
  ASSERT_TRUE(client(m, data_batch(4, 0, 0, 4, 1, false, std::numeric_limits<int64_t>::min())).ok());
  m.remove_expired_producers(std::numeric_limits<int64_t>::max());
  EXPECT_EQ(m.last_entry(4), nullptr);
  EXPECT_EQ(ProducerStateConfig{}.producer_id_expiration_ms, 86'400'000);
}

// truncate_head keeps producers (KIP-360); evict_producers_before drops
// those whose last batch is below the new start, with their transactions.
TEST(ProducerStateTest, HeadTruncation) {
  ProducerStateManager m;
  ASSERT_TRUE(client(m, data_batch(1, 0, 0, 0, 5)).ok());
  ASSERT_TRUE(client(m, data_batch(2, 0, 0, 5, 1, true)).ok());
  ASSERT_TRUE(client(m, data_batch(3, 0, 0, 6, 4)).ok());
  m.truncate_head(8);
  EXPECT_EQ(m.producers().size(), 3u);
  EXPECT_EQ(m.map_end_offset(), 10);
  m.truncate_head(12);
  EXPECT_EQ(m.map_end_offset(), 12);
  m.update_map_end_offset(10);
  m.evict_producers_before(9);
  EXPECT_EQ(m.last_entry(1), nullptr);
  EXPECT_EQ(m.last_entry(2), nullptr);
  EXPECT_NE(m.last_entry(3), nullptr);
  EXPECT_TRUE(m.ongoing_transactions().empty());
  EXPECT_EQ(m.map_end_offset(), 10);
  m.truncate_fully_and_start_at(40);
  EXPECT_TRUE(m.producers().empty());
  EXPECT_EQ(m.map_end_offset(), 40);
  ASSERT_TRUE(client(m, data_batch(1, 0, 0, 40, 1, true)).ok());
  m.clear();
  EXPECT_TRUE(m.producers().empty());
  EXPECT_TRUE(m.ongoing_transactions().empty());
  EXPECT_EQ(m.map_end_offset(), 0);
}

// Committing an append after the manager changed is a programming error.
TEST(ProducerStateDeathTest, StaleAppendAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ProducerStateManager m;
  ProducerAppend append = m.begin_append(AppendOrigin::kClient);
  ASSERT_TRUE(append.add_batch(data_batch(1, 0, 0, 0), std::nullopt).ok());
  m.update_map_end_offset(5);
  EXPECT_DEATH(m.commit(std::move(append)), "generation");
}

// --- snapshots ----------------------------------------------------------------

std::vector<std::byte> to_vector(const io::Buffer& b) {
  return std::vector<std::byte>(b.span().begin(), b.span().end());
}

void put_be(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// Builds a snapshot by hand (valid CRC unless told otherwise).
std::vector<std::byte> handmade_snapshot(int16_t version, int32_t count,
                                         const std::vector<uint8_t>& entries) {
  std::vector<uint8_t> body;
  put_be(body, static_cast<uint32_t>(count), 4);
  body.insert(body.end(), entries.begin(), entries.end());
  std::vector<uint8_t> out;
  put_be(out, static_cast<uint16_t>(version), 2);
  put_be(out, codec::crc32c(0, body.data(), body.size()), 4);
  out.insert(out.end(), body.begin(), body.end());
  std::vector<std::byte> bytes(out.size());
  for (size_t i = 0; i < out.size(); ++i) bytes[i] = static_cast<std::byte>(out[i]);
  return bytes;
}

std::vector<uint8_t> handmade_entry(int64_t pid, int16_t epoch, int32_t last_seq,
                                    int64_t last_offset, int32_t delta, int64_t ts,
                                    int32_t coord, int64_t txn) {
  std::vector<uint8_t> e;
  put_be(e, static_cast<uint64_t>(pid), 8);
  put_be(e, static_cast<uint16_t>(epoch), 2);
  put_be(e, static_cast<uint32_t>(last_seq), 4);
  put_be(e, static_cast<uint64_t>(last_offset), 8);
  put_be(e, static_cast<uint32_t>(delta), 4);
  put_be(e, static_cast<uint64_t>(ts), 8);
  put_be(e, static_cast<uint32_t>(coord), 4);
  put_be(e, static_cast<uint64_t>(txn), 8);
  return e;
}

// A manager with three kinds of producers: plain, in a transaction, and
// with no retained batch (its epoch was bumped by a marker).
ProducerStateManager sample_state() {
  ProducerStateManager m;
  BROOK_ASSERT(client(m, data_batch(3, 1, 10, 0, 3, false, 111)).ok());
  BROOK_ASSERT(client(m, data_batch(3, 1, 13, 3, 2, false, 112)).ok());
  BROOK_ASSERT(client(m, data_batch(9, 0, 0, 5, 1, true, 113)).ok());
  BROOK_ASSERT(client(m, data_batch(4, 7, 0, 6, 1, true, 114)).ok());
  BROOK_ASSERT(append_one(m, AppendOrigin::kCoordinator, marker_batch(4, 8, 7, 115),
                          abort_marker(2))
                   .completed.has_value());
  m.complete_txn(CompletedTxn{4, 6, 7, true});
  return m;
}

// The encoding is Kafka's ProducerSnapshot v1 byte for byte, every producer
// included, in producer id order.
TEST(ProducerSnapshotTest, LayoutMatchesKafka) {
  ProducerStateManager m = sample_state();
  std::vector<uint8_t> entries;
  for (auto part : {handmade_entry(3, 1, 14, 4, 1, 112, -1, -1),
                    handmade_entry(4, 8, -1, -1, 0, 115, 2, -1),
                    handmade_entry(9, 0, 0, 5, 0, 113, -1, 5)}) {
    entries.insert(entries.end(), part.begin(), part.end());
  }
  EXPECT_EQ(to_vector(m.encode_snapshot()), handmade_snapshot(1, 3, entries));
  ProducerStateManager empty;
  EXPECT_EQ(to_vector(empty.encode_snapshot()), handmade_snapshot(1, 0, {}));
  EXPECT_EQ(empty.encode_snapshot().size(), kSnapshotEntriesOffset);
}

// Loading a snapshot restores what it carries: the last batch, epochs,
// timestamps, open transactions, and the map end offset.
TEST(ProducerSnapshotTest, RoundTrip) {
  ProducerStateManager m = sample_state();
  ProducerStateManager loaded;
  ASSERT_TRUE(client(loaded, data_batch(77, 0, 0, 0)).ok());
  ASSERT_TRUE(loaded.load_snapshot(m.encode_snapshot().span(), 8).ok());
  EXPECT_EQ(loaded.map_end_offset(), 8);
  EXPECT_EQ(loaded.last_entry(77), nullptr);
  ASSERT_EQ(loaded.producers().size(), 3u);
  const ProducerStateEntry& p3 = *loaded.last_entry(3);
  EXPECT_EQ(p3.producer_epoch, 1);
  ASSERT_EQ(p3.batches.size(), 1u);
  EXPECT_EQ(p3.batches[0], (BatchMetadata{14, 4, 1, 112}));
  EXPECT_TRUE(loaded.find_duplicate(data_batch(3, 1, 13, 50, 2)).has_value());
  EXPECT_FALSE(loaded.find_duplicate(data_batch(3, 1, 10, 50, 3)).has_value());
  EXPECT_TRUE(client(loaded, data_batch(3, 1, 15, 8)).ok());
  const ProducerStateEntry& p4 = *loaded.last_entry(4);
  EXPECT_EQ(p4.producer_epoch, 8);
  EXPECT_EQ(p4.coordinator_epoch, 2);
  EXPECT_TRUE(p4.batches.empty());
  EXPECT_EQ(p4.last_timestamp_ms, 115);
  EXPECT_EQ(loaded.last_entry(9)->current_txn_first_offset, 5);
  EXPECT_EQ(loaded.ongoing_transactions(), (std::map<int64_t, OngoingTxn>{{5, {9, 5}}}));
  EXPECT_EQ(loaded.first_unstable_offset(), 5);
}

// Any corruption is DataLoss and leaves the state as it was: every byte
// flipped, every truncation, extra bytes, a wrong version.
TEST(ProducerSnapshotTest, RejectsCorruption) {
  const std::vector<std::byte> good = to_vector(sample_state().encode_snapshot());
  ProducerStateManager m;
  ASSERT_TRUE(client(m, data_batch(1, 0, 0, 0)).ok());
  m.update_map_end_offset(33);
  const auto before = m.producers();
  auto expect_rejected = [&](const std::vector<std::byte>& bytes, const std::string& what) {
    absl::Status s = m.load_snapshot(bytes, 99);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << what << ": " << s;
    EXPECT_FALSE(s.message().empty());
    EXPECT_EQ(m.producers(), before) << what;
    EXPECT_EQ(m.map_end_offset(), 33) << what;
  };
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::vector<std::byte> bad = good;
      bad[i] ^= static_cast<std::byte>(mask);
      expect_rejected(bad, "flip at " + std::to_string(i));
    }
  }
  for (size_t n = 0; n < good.size(); ++n) {
    expect_rejected(std::vector<std::byte>(good.begin(), good.begin() + n),
                    "truncated to " + std::to_string(n));
  }
  std::vector<std::byte> longer = good;
  longer.push_back(std::byte{0});
  expect_rejected(longer, "extra byte");
}

// Frames with a valid CRC but impossible contents are DataLoss too, and a
// huge claimed count is refused before anything is allocated for it.
TEST(ProducerSnapshotTest, RejectsImpossibleContents) {
  ProducerStateManager m;
  auto code = [&](const std::vector<std::byte>& bytes) { return m.load_snapshot(bytes, 0).code(); };
  const auto e1 = handmade_entry(1, 0, 0, 0, 0, 0, -1, -1);
  const auto e1_txn = handmade_entry(1, 0, 0, 5, 0, 0, -1, 5);
  const auto e2_txn = handmade_entry(2, 0, 0, 6, 0, 0, -1, 5);
  auto cat = [](std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  EXPECT_EQ(code(handmade_snapshot(2, 1, e1)), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(handmade_snapshot(0, 1, e1)), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(handmade_snapshot(1, -1, {})), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(handmade_snapshot(1, 2, e1)), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(handmade_snapshot(1, 0, e1)), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(handmade_snapshot(1, std::numeric_limits<int32_t>::max(), e1)),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(handmade_snapshot(1, 2, cat(e1, e1))), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(handmade_snapshot(1, 2, cat(e1_txn, e2_txn))), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(handmade_snapshot(1, 1, handmade_entry(-5, 0, 0, 0, 0, 0, -1, -1))),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(handmade_snapshot(1, 1, handmade_entry(1, 0, 0, 4, -1, 0, -1, -1))),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(handmade_snapshot(1, 1, handmade_entry(1, 0, 0, 4, 5, 0, -1, -1))),
            absl::StatusCode::kDataLoss);
  EXPECT_TRUE(m.producers().empty());
  EXPECT_TRUE(m.load_snapshot(handmade_snapshot(1, 1, e1), 0).ok());
  EXPECT_EQ(m.producers().size(), 1u);
}

TEST(ProducerSnapshotTest, FileNames) {
  EXPECT_EQ(snapshot_file_name(0), "00000000000000000000.snapshot");
  EXPECT_EQ(snapshot_file_name(42), "00000000000000000042.snapshot");
  EXPECT_EQ(snapshot_file_name(std::numeric_limits<int64_t>::max()),
            "09223372036854775807.snapshot");
  for (int64_t offset : {int64_t{0}, int64_t{42}, int64_t{1} << 40,
                         std::numeric_limits<int64_t>::max()}) {
    EXPECT_EQ(parse_snapshot_file_name(snapshot_file_name(offset)), offset);
  }
  for (std::string_view bad :
       {"42.snapshot", "00000000000000000042.snapshot.tmp", "00000000000000000042.snapshot.deleted",
        "00000000000000000042.log", "0000000000000000004x.snapshot", "-0000000000000000042.snapshot",
        "99999999999999999999.snapshot", "09223372036854775808.snapshot", ".snapshot", ""}) {
    EXPECT_EQ(parse_snapshot_file_name(bad), std::nullopt) << bad;
  }
}

io::BufferChain chain_of(std::string_view text) {
  return io::BufferChain(io::Buffer::copy_of(text));
}

// Snapshot files on the simulated disk: written durably (a power loss right
// after the write keeps them), read back, listed; an old temporary file left
// by a crash does not leak into the next snapshot.
TEST(ProducerSnapshotTest, FilesOnDisk) {
  sim::TestExecutor ex;
  sim::SimDisk disk(io::Random(7));
  ASSERT_TRUE(sim::run(ex, disk.make_dir("p-0")).ok());
  ASSERT_TRUE(sim::run(ex, disk.sync_dir("")).ok());
  ProducerStateManager m = sample_state();
  {
    // A longer stale temporary file from an earlier crash.
    auto f = sim::run(ex, disk.open("p-0/00000000000000000008.snapshot.tmp", io::OpenMode::kCreate));
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(sim::run(ex, (*f)->append(chain_of(std::string(500, 'x')))).ok());
  }
  ASSERT_TRUE(sim::run(ex, m.write_snapshot_file(disk, "p-0", 8)).ok());
  ASSERT_TRUE(sim::run(ex, write_snapshot_file(disk, "p-0", 3, ProducerStateManager().encode_snapshot())).ok());
  disk.crash();
  auto offsets = sim::run(ex, list_snapshot_offsets(disk, "p-0"));
  ASSERT_TRUE(offsets.ok()) << offsets.status();
  EXPECT_EQ(*offsets, (std::vector<int64_t>{3, 8}));
  auto bytes = sim::run(ex, read_snapshot_file(disk, "p-0", 8));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, m.encode_snapshot());
  ProducerStateManager loaded;
  ASSERT_TRUE(loaded.load_snapshot(bytes->span(), 8).ok());
  EXPECT_EQ(loaded.encode_snapshot(), m.encode_snapshot());
  EXPECT_EQ(sim::run(ex, read_snapshot_file(disk, "p-0", 9)).status().code(),
            absl::StatusCode::kNotFound);
  // Bit rot at rest is caught by load_snapshot.
  ASSERT_TRUE(disk.inject_bit_rot("p-0/00000000000000000008.snapshot", 20).ok());
  auto rotten = sim::run(ex, read_snapshot_file(disk, "p-0", 8));
  ASSERT_TRUE(rotten.ok());
  EXPECT_EQ(loaded.load_snapshot(rotten->span(), 8).code(), absl::StatusCode::kDataLoss);
}

// --- reference model ----------------------------------------------------------
//
// Written from the rules in producer_state.h, independently of the code: it
// keeps sequence ranges explicitly and wraps with 64-bit arithmetic.

struct ModelBatch {
  int32_t first_seq = 0;
  int32_t last_seq = 0;
  int64_t first_offset = 0;
  int64_t last_offset = 0;
  int64_t timestamp_ms = 0;
};

struct ModelProducer {
  int16_t epoch = -1;
  int32_t coordinator_epoch = -1;
  int64_t timestamp_ms = -1;
  std::optional<int64_t> txn_first_offset;
  std::deque<ModelBatch> recent;
};

struct ModelState {
  std::map<int64_t, ModelProducer> producers;
  std::map<int64_t, int64_t> open_txns;  // first offset -> producer id
};

// A batch the generator made; offsets are assigned by the driver.
struct GenBatch {
  int64_t pid = 1;
  int16_t epoch = 0;
  int32_t seq = 0;
  int32_t records = 1;
  bool transactional = false;
  std::optional<EndTxnMarkerInfo> marker;
  int64_t timestamp_ms = 0;
};

int32_t model_last_seq(int32_t seq, int32_t records) {
  if (seq == -1) return -1;
  int64_t last = int64_t{seq} + records - 1;
  if (last > kIntMax) last -= int64_t{1} << 31;
  return static_cast<int32_t>(last);
}

std::optional<ModelBatch> model_duplicate(const ModelState& s, const GenBatch& b) {
  auto it = s.producers.find(b.pid);
  if (it == s.producers.end() || it->second.epoch != b.epoch) return std::nullopt;
  for (const ModelBatch& r : it->second.recent) {
    if (r.first_seq == b.seq && r.last_seq == model_last_seq(b.seq, b.records)) return r;
  }
  return std::nullopt;
}

struct ModelOutcome {
  Error error = Error::kNone;
  std::optional<CompletedTxn> completed;
};

ModelOutcome model_apply(ModelState& s, std::vector<std::pair<int64_t, int64_t>>& started,
                         AppendOrigin origin, const GenBatch& b, int64_t offset) {
  const bool checked = origin == AppendOrigin::kClient || origin == AppendOrigin::kCoordinator;
  ModelProducer& p = s.producers[b.pid];
  ModelOutcome out;
  if (checked && b.epoch < p.epoch) return {Error::kInvalidProducerEpoch, {}};
  if (b.marker) {
    if (checked && b.marker->coordinator_epoch < p.coordinator_epoch) {
      return {Error::kTransactionCoordinatorFenced, {}};
    }
    if (p.txn_first_offset) {
      out.completed = CompletedTxn{b.pid, *p.txn_first_offset, offset,
                                   b.marker->type == ControlRecordType::kAbort};
    }
    if (b.epoch != p.epoch) p.recent.clear();
    p.epoch = b.epoch;
    p.coordinator_epoch = b.marker->coordinator_epoch;
    p.txn_first_offset.reset();
    p.timestamp_ms = b.timestamp_ms;
    return out;
  }
  if (origin == AppendOrigin::kClient && p.epoch != -1) {
    int64_t expected = 0;
    if (b.epoch == p.epoch && !p.recent.empty()) {
      expected = int64_t{p.recent.back().last_seq} + 1;
      if (expected > kIntMax) expected = 0;
    }
    if (b.seq != expected) return {Error::kOutOfOrderSequenceNumber, {}};
  }
  if (checked && p.txn_first_offset && !b.transactional) return {Error::kInvalidTxnState, {}};
  if (b.epoch != p.epoch) p.recent.clear();
  p.epoch = b.epoch;
  p.recent.push_back(ModelBatch{b.seq, model_last_seq(b.seq, b.records), offset,
                                offset + b.records - 1, b.timestamp_ms});
  if (p.recent.size() > 5) p.recent.pop_front();
  p.timestamp_ms = b.timestamp_ms;
  if (b.transactional && !p.txn_first_offset) {
    p.txn_first_offset = offset;
    started.emplace_back(offset, b.pid);
  }
  return out;
}

std::map<int64_t, ProducerStateEntry> model_entries(const ModelState& s) {
  std::map<int64_t, ProducerStateEntry> out;
  for (const auto& [pid, p] : s.producers) {
    ProducerStateEntry& e = out[pid];
    e.producer_id = pid;
    e.producer_epoch = p.epoch;
    e.coordinator_epoch = p.coordinator_epoch;
    e.last_timestamp_ms = p.timestamp_ms;
    e.current_txn_first_offset = p.txn_first_offset;
    for (const ModelBatch& r : p.recent) {
      e.batches.push_back(BatchMetadata{r.last_seq, r.last_offset,
                                        static_cast<int32_t>(r.last_offset - r.first_offset),
                                        r.timestamp_ms});
    }
  }
  return out;
}

RecordBatchHeader header_of(const GenBatch& b, int64_t offset) {
  if (b.marker) return marker_batch(b.pid, b.epoch, offset, b.timestamp_ms);
  return data_batch(b.pid, b.epoch, b.seq, offset, b.records, b.transactional, b.timestamp_ms);
}

// Draws a batch near the model's state, so most are valid and the rest
// probe each rule: epochs one off, sequences one off, retries, markers with
// stale coordinator epochs, transactions, wraps near INT32_MAX.
GenBatch gen_batch(const ModelState& s, std::map<int64_t, int32_t>& next_seq,
                   std::vector<GenBatch>& history, int64_t& clock_ms) {
  GenBatch b;
  b.pid = *rc::gen::inRange<int64_t>(1, 4);
  clock_ms += *rc::gen::inRange<int64_t>(0, 400);
  b.timestamp_ms = clock_ms;
  auto it = s.producers.find(b.pid);
  const ModelProducer* p = it == s.producers.end() ? nullptr : &it->second;
  const int16_t epoch = p ? std::max<int16_t>(p->epoch, 0) : 0;
  const int kind = *rc::gen::inRange(0, 100);
  if (kind < 10 && !history.empty()) {
    GenBatch retry = history[*rc::gen::inRange<size_t>(0, history.size())];
    retry.timestamp_ms = clock_ms;
    return retry;
  }
  const int epoch_delta = *rc::gen::element(0, 0, 0, 0, 1, -1);
  b.epoch = static_cast<int16_t>(std::max(0, epoch + epoch_delta));
  if (kind < 25) {
    const int32_t coord = p ? p->coordinator_epoch : 0;
    b.marker = EndTxnMarkerInfo{*rc::gen::element(ControlRecordType::kCommit, ControlRecordType::kAbort),
                                std::max(0, coord + *rc::gen::element(0, 0, 0, 1, -1))};
    b.seq = -1;
    return b;
  }
  b.records = *rc::gen::inRange(1, 4);
  b.transactional = *rc::gen::element(false, false, true);
  int32_t expected = 0;
  if (auto n = next_seq.find(b.pid); n != next_seq.end() && epoch_delta == 0) expected = n->second;
  const int choice = *rc::gen::inRange(0, 10);
  if (choice < 6) b.seq = expected;
  else if (choice == 6) b.seq = 0;
  else if (choice == 7) b.seq = expected == kIntMax ? 0 : expected + 1;
  else if (choice == 8) b.seq = kIntMax - *rc::gen::inRange(0, 3);
  else b.seq = *rc::gen::inRange(0, 20);
  next_seq[b.pid] = model_last_seq(b.seq, b.records) == kIntMax ? 0 : model_last_seq(b.seq, b.records) + 1;
  history.push_back(b);
  return b;
}

void expect_same_state(const ProducerStateManager& m, const ModelState& s) {
  const std::map<int64_t, ProducerStateEntry> expected = model_entries(s);
  RC_ASSERT(m.producers() == expected);
  for (const auto& [pid, p] : s.producers) {
    const ProducerStateEntry& e = m.producers().at(pid);
    for (size_t i = 0; i < p.recent.size(); ++i) {
      RC_ASSERT(e.batches[i].first_sequence() == p.recent[i].first_seq);
    }
  }
  std::map<int64_t, int64_t> open;
  for (const auto& [first, txn] : m.ongoing_transactions()) open[first] = txn.producer_id;
  RC_ASSERT(open == s.open_txns);
  const int64_t first = s.open_txns.empty() ? -1 : s.open_txns.begin()->first;
  RC_ASSERT(m.first_unstable_offset().value_or(-1) == first);
}

// One append as the log drives it: duplicate check, batches, commit,
// completed transactions.
void run_append(ProducerStateManager& m, ModelState& s, AppendOrigin origin,
                const std::vector<GenBatch>& batches) {
  if (origin == AppendOrigin::kClient) {
    for (const GenBatch& b : batches) {
      std::optional<BatchMetadata> dup = m.find_duplicate(header_of(b, 0));
      std::optional<ModelBatch> model_dup = b.marker ? std::nullopt : model_duplicate(s, b);
      RC_ASSERT(dup.has_value() == model_dup.has_value());
      if (dup) {
        RC_ASSERT(dup->last_offset == model_dup->last_offset);
        RC_ASSERT(dup->first_offset() == model_dup->first_offset);
        return;  // answered with the original offsets; nothing written
      }
    }
  }
  ModelState scratch = s;
  std::vector<std::pair<int64_t, int64_t>> started;
  std::vector<CompletedTxn> completed;
  ProducerAppend append = m.begin_append(origin);
  int64_t offset = m.map_end_offset();
  for (const GenBatch& b : batches) {
    const AddBatchResult got = append.add_batch(header_of(b, offset), b.marker);
    const ModelOutcome want = model_apply(scratch, started, origin, b, offset);
    RC_ASSERT(got.error == want.error);
    RC_ASSERT(got.completed == want.completed);
    if (!got.ok()) return;
    if (got.completed) completed.push_back(*got.completed);
    offset += b.marker ? 1 : b.records;
  }
  m.commit(std::move(append));
  m.update_map_end_offset(offset);
  s = std::move(scratch);
  for (const auto& [first, pid] : started) s.open_txns[first] = pid;
  for (const CompletedTxn& c : completed) {
    int64_t lso = c.last_offset + 1;
    for (const auto& [first, pid] : s.open_txns) {
      if (first != c.first_offset) {
        lso = first;
        break;
      }
    }
    RC_ASSERT(m.last_stable_offset(c) == lso);
    m.complete_txn(c);
    s.open_txns.erase(c.first_offset);
  }
}

void model_expire(ModelState& s, int64_t now_ms, int64_t expiration_ms) {
  std::erase_if(s.producers, [&](const auto& item) {
    return !item.second.txn_first_offset && now_ms - item.second.timestamp_ms >= expiration_ms;
  });
}

constexpr int64_t kModelExpirationMs = 3000;

// Random appends from a few producers, run through the manager and the
// model: every batch's verdict, completed transaction and LSO, every
// duplicate answer, and the whole state after each step agree.
void run_random_appends(ProducerStateManager& m, ModelState& s, int steps) {
  std::map<int64_t, int32_t> next_seq;
  std::vector<GenBatch> history;
  int64_t clock_ms = 0;
  for (int step = 0; step < steps; ++step) {
    if (*rc::gen::inRange(0, 20) == 0) {
      const int64_t now_ms = clock_ms + *rc::gen::inRange<int64_t>(0, 2 * kModelExpirationMs);
      m.remove_expired_producers(now_ms);
      model_expire(s, now_ms, kModelExpirationMs);
      expect_same_state(m, s);
      continue;
    }
    const AppendOrigin origin = *rc::gen::element(AppendOrigin::kClient, AppendOrigin::kClient,
                                                  AppendOrigin::kClient, AppendOrigin::kCoordinator,
                                                  AppendOrigin::kReplication);
    std::vector<GenBatch> batches;
    const int count = *rc::gen::element(1, 1, 1, 2, 3);
    for (int i = 0; i < count; ++i) batches.push_back(gen_batch(s, next_seq, history, clock_ms));
    run_append(m, s, origin, batches);
    expect_same_state(m, s);
  }
}

RC_GTEST_PROP(ProducerStateProperty, MatchesReferenceModel, ()) {
  ProducerStateManager m(ProducerStateConfig{.producer_id_expiration_ms = kModelExpirationMs});
  ModelState s;
  run_random_appends(m, s, *rc::gen::inRange(1, 150));
}

// A snapshot carries, per producer, the epoch, coordinator epoch, last
// timestamp, open transaction and last batch (stamped with the producer's
// last timestamp); loading it and encoding again gives the same bytes.
RC_GTEST_PROP(ProducerStateProperty, SnapshotRoundTrip, ()) {
  ProducerStateManager m(ProducerStateConfig{.producer_id_expiration_ms = kModelExpirationMs});
  ModelState s;
  run_random_appends(m, s, *rc::gen::inRange(0, 40));
  const io::Buffer bytes = m.encode_snapshot();
  RC_ASSERT(bytes.size() == kSnapshotEntriesOffset + m.producers().size() * kSnapshotEntryBytes);
  ProducerStateManager loaded;
  const int64_t offset = *rc::gen::inRange<int64_t>(0, 1'000'000);
  RC_ASSERT(loaded.load_snapshot(bytes.span(), offset).ok());
  RC_ASSERT(loaded.map_end_offset() == offset);
  std::map<int64_t, ProducerStateEntry> expected = m.producers();
  for (auto& [pid, e] : expected) {
    if (e.batches.empty()) continue;
    BatchMetadata last = e.batches.back();
    last.timestamp_ms = e.last_timestamp_ms;
    e.batches = {last};
  }
  RC_ASSERT(loaded.producers() == expected);
  RC_ASSERT(loaded.ongoing_transactions() == m.ongoing_transactions());
  RC_ASSERT(loaded.encode_snapshot() == bytes);
  // And any single flipped byte is refused.
  std::vector<std::byte> bad = to_vector(bytes);
  const size_t at = *rc::gen::inRange<size_t>(0, bad.size());
  bad[at] ^= static_cast<std::byte>(*rc::gen::inRange(1, 256));
  RC_ASSERT(loaded.load_snapshot(bad, 0).code() == absl::StatusCode::kDataLoss);
  RC_ASSERT(loaded.producers() == expected);
}

}  // namespace
}  // namespace brook::storage
