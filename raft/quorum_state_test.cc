// raft/quorum_state_test.cc
#include "raft/quorum_state.h"

#include <gtest/gtest.h>

#include "io/buffer.h"
#include "sim/disk.h"
#include "sim/test_executor.h"

namespace brook::raft {
namespace {

TEST(QuorumState, EncodesKafkasVersion0Layout) {
  ElectionState s{.epoch = 5, .leader_id = 1, .voted_id = -1, .voters = {1, 2, 3}};
  EXPECT_EQ(encode_quorum_state(s),
            "{\"clusterId\":\"\",\"leaderId\":1,\"leaderEpoch\":5,\"votedId\":-1,\"appliedOffset\":0,"
            "\"currentVoters\":[{\"voterId\":1},{\"voterId\":2},{\"voterId\":3}],\"data_version\":0}");
  EXPECT_EQ(decode_quorum_state(encode_quorum_state(s)).value(), s);
}

TEST(QuorumState, ReadsWhatKafkaWrites) {
  // Version 0 (static voters) with spaces, and version 1 (KIP-853).
  auto v0 = decode_quorum_state(
      R"({"clusterId": "", "leaderId": -1, "leaderEpoch": 12, "votedId": 3, "appliedOffset": 0,
          "currentVoters": [{"voterId": 3}, {"voterId": 1}], "data_version": 0})");
  ASSERT_TRUE(v0.ok()) << v0.status();
  EXPECT_EQ(v0->epoch, 12);
  EXPECT_EQ(v0->voted_id, 3);
  EXPECT_EQ(v0->leader_id, -1);
  EXPECT_EQ(v0->voters, (std::vector<int32_t>{3, 1}));
  auto v1 = decode_quorum_state(
      R"({"leaderId":2,"leaderEpoch":7,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1})");
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(v1->epoch, 7);
  EXPECT_EQ(v1->leader_id, 2);
  EXPECT_TRUE(v1->voters.empty());
}

TEST(QuorumState, RejectsWhatIsNotAQuorumState) {
  for (const char* text : {"", "{", "[]", "{\"leaderId\":1}", "nonsense",
                           R"({"leaderId":1,"leaderEpoch":2,"votedId":-1,"data_version":9})",
                           R"({"leaderId":"1","leaderEpoch":2,"votedId":-1,"data_version":0})",
                           R"({"leaderId":1,"leaderEpoch":2,"votedId":-1,"data_version":0} x)",
                           R"({"leaderId":1,"leaderId":1,"leaderEpoch":2,"votedId":-1,"data_version":0})",
                           R"({"leaderId":99999999999,"leaderEpoch":2,"votedId":-1,"data_version":0})"}) {
    EXPECT_EQ(decode_quorum_state(text).status().code(), absl::StatusCode::kDataLoss) << text;
  }
}

// Written state is durable when the write returns; a missing file is no
// state; reads through a disk that corrupts some reads never yield a state
// that was not written.
TEST(QuorumState, DurableAndReadBackOnlyWhenReadsAgree) {
  sim::TestExecutor ex;
  sim::SimDisk disk{io::Random(7)};
  ASSERT_TRUE(sim::run(ex, disk.make_dir("meta")).ok());
  ASSERT_TRUE(sim::run(ex, disk.sync_dir("")).ok());
  ElectionState s{.epoch = 3, .leader_id = -1, .voted_id = 2, .voters = {1, 2, 3}};
  ASSERT_TRUE(sim::run(ex, write_quorum_state(disk, "meta", s)).ok());
  disk.crash();
  auto read = sim::run(ex, read_quorum_state(disk, "meta"));
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ(**read, s);
  auto missing = sim::run(ex, read_quorum_state(disk, "other"));
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());

  sim::DiskFaults faults;
  faults.read_corruption_probability = 0.3;
  disk.set_faults(faults);
  int believed = 0;
  for (int i = 0; i < 200; ++i) {
    auto r = sim::run(ex, read_quorum_state(disk, "meta"));
    if (!r.ok()) continue;  // reads never agreed, or the text did not parse
    ASSERT_TRUE(r->has_value());
    EXPECT_EQ(**r, s);
    ++believed;
  }
  EXPECT_GT(believed, 100);
}

}  // namespace
}  // namespace brook::raft
