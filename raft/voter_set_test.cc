// raft/voter_set_test.cc
#include "raft/voter_set.h"

#include <gtest/gtest.h>

#include "net/kafka/record_batch.h"
#include "raft/snapshot.h"

namespace brook::raft {
namespace {

Voter voter(int32_t id, uint16_t port) {
  Voter v;
  v.id = id;
  v.directory_id.bytes[0] = static_cast<uint8_t>(id);
  v.endpoints.push_back(VoterEndpoint{"CONTROLLER", io::Address("127.0.0.1", port)});
  return v;
}

VoterSet set_of(std::initializer_list<int32_t> ids) {
  VoterSet out;
  for (int32_t id : ids) out.emplace(id, voter(id, static_cast<uint16_t>(9000 + id)));
  return out;
}

TEST(VotersRecord, RoundTrips) {
  VoterSet voters = set_of({1, 2, 3});
  voters.at(2).endpoints.push_back(VoterEndpoint{"INTERNAL", io::Address("::1", 7)});
  voters.at(3).min_kraft_version = 1;
  absl::StatusOr<io::Buffer> value = encode_voters_record(voters);
  ASSERT_TRUE(value.ok()) << value.status();
  absl::StatusOr<VoterSet> back = decode_voters_record(*value);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, voters);
  EXPECT_EQ(back->at(2).address("INTERNAL")->port, 7);
  EXPECT_EQ(back->at(2).address("OTHER")->port, 9002);  // the first endpoint
}

TEST(VotersRecord, RejectsEmptyRepeatedAndGarbage) {
  absl::StatusOr<io::Buffer> empty = encode_voters_record({});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(decode_voters_record(*empty).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(decode_voters_record(io::Buffer::copy_of("\x01\x02")).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(KRaftControl, ReadsVersionAndVotersFromAControlBatch) {
  net::RecordBatchOptions options;
  options.control = true;
  options.base_offset = 40;
  net::RecordBatchBuilder builder(options);
  auto add = [&](net::ControlRecordType type, io::Buffer value) {
    net::NewRecord r;
    r.key = net::encode_control_record_key({.type = type});
    r.value = std::move(value);
    builder.append(std::move(r));
  };
  add(net::ControlRecordType::kKRaftVersion, *encode_kraft_version_record(1));
  add(net::ControlRecordType::kKRaftVoters, *encode_voters_record(set_of({4, 5})));
  absl::StatusOr<io::Buffer> batch = builder.build();
  ASSERT_TRUE(batch.ok());
  absl::StatusOr<KRaftControl> control = read_kraft_control(*batch);
  ASSERT_TRUE(control.ok()) << control.status();
  EXPECT_EQ(control->kraft_version, 1);
  ASSERT_TRUE(control->voters.has_value());
  EXPECT_EQ(*control->voters, set_of({4, 5}));
}

TEST(VoterHistory, LatestBeforeAndTruncation) {
  VoterHistory h;
  h.reset(-1, 1, set_of({1}));
  KRaftControl c;
  c.voters = set_of({1, 2});
  h.add(10, c);
  c.voters = set_of({1, 2, 3});
  h.add(20, c);
  EXPECT_EQ(h.latest().voters, set_of({1, 2, 3}));
  EXPECT_EQ(h.latest().kraft_version, 1);  // kept when a record leaves it out
  EXPECT_EQ(h.before(20).voters, set_of({1, 2}));
  EXPECT_EQ(h.before(11).voters, set_of({1, 2}));
  EXPECT_EQ(h.before(10).voters, set_of({1}));
  // A truncated log falls back to the set before the cut.
  h.truncate_to(20);
  EXPECT_EQ(h.latest().voters, set_of({1, 2}));
  h.truncate_to(0);
  EXPECT_EQ(h.latest().voters, set_of({1}));
  EXPECT_EQ(h.latest().offset, -1);
  h.truncate_to(-5);  // the bootstrap entry stays
  EXPECT_FALSE(h.empty());
  // Reading the same offset again replaces it.
  c.voters = set_of({7});
  h.add(5, c);
  c.voters = set_of({8});
  h.add(5, c);
  EXPECT_EQ(h.latest().voters, set_of({8}));
  EXPECT_EQ(h.before(5).voters, set_of({1}));
}

TEST(Snapshot, CarriesTheVoters) {
  KRaftControl kraft;
  kraft.kraft_version = 1;
  kraft.voters = set_of({1, 3});
  absl::StatusOr<io::Buffer> bytes =
      encode_snapshot({io::Buffer::copy_of("a"), io::Buffer::copy_of("b")}, 5, 1000, &kraft);
  ASSERT_TRUE(bytes.ok());
  absl::StatusOr<std::vector<io::Buffer>> values = decode_snapshot(*bytes);
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), 2u);  // the state machine sees only its records
  absl::StatusOr<KRaftControl> back = snapshot_kraft_control(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kraft_version, 1);
  EXPECT_EQ(*back->voters, set_of({1, 3}));
  // Without voters nothing is written.
  absl::StatusOr<io::Buffer> plain = encode_snapshot({io::Buffer::copy_of("a")}, 5);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(snapshot_kraft_control(*plain)->voters.has_value());
}

}  // namespace
}  // namespace brook::raft
