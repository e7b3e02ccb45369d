// raft/snapshot_test.cc
#include "raft/snapshot.h"

#include <gtest/gtest.h>

#include "io/buffer.h"
#include "sim/disk.h"
#include "sim/test_executor.h"

namespace brook::raft {
namespace {

TEST(Snapshot, FileNamesAreKafkas) {
  EXPECT_EQ(snapshot_file_name({.end_offset = 1234, .epoch = 7}),
            "00000000000000001234-0000000007.checkpoint");
  EXPECT_EQ(parse_snapshot_file_name("00000000000000001234-0000000007.checkpoint"),
            (SnapshotId{1234, 7}));
  for (const char* bad : {"00000000000000001234-0000000007.checkpoint.tmp", "1234-7.checkpoint",
                          "0000000000000000123x-0000000007.checkpoint",
                          "00000000000000001234_0000000007.checkpoint", "quorum-state"}) {
    EXPECT_FALSE(parse_snapshot_file_name(bad).has_value()) << bad;
  }
}

TEST(Snapshot, RoundTripAndFraming) {
  std::vector<io::Buffer> values;
  for (int i = 0; i < 2500; ++i) values.push_back(io::Buffer::copy_of("record " + std::to_string(i)));
  absl::StatusOr<io::Buffer> bytes = encode_snapshot(values, 1'700'000'000'000, 1000);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::vector<io::Buffer>> back = decode_snapshot(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ((*back)[i].view(), values[i].view());
  // An empty state is a header and a footer.
  absl::StatusOr<io::Buffer> empty = encode_snapshot({}, 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(decode_snapshot(*empty).ok());
  // Any cut or flipped byte is refused.
  for (size_t cut : {size_t{0}, size_t{10}, bytes->size() / 2, bytes->size() - 1}) {
    EXPECT_EQ(decode_snapshot(bytes->slice(0, cut)).status().code(), absl::StatusCode::kDataLoss) << cut;
  }
  io::Buffer flipped = io::Buffer::copy_of(bytes->span());
  flipped.mutable_data()[bytes->size() / 2] ^= std::byte{0x40};
  EXPECT_EQ(decode_snapshot(flipped).status().code(), absl::StatusCode::kDataLoss);
}

TEST(Snapshot, WrittenWholeListedAndRemoved) {
  sim::TestExecutor ex;
  sim::SimDisk disk{io::Random(3)};
  ASSERT_TRUE(sim::run(ex, disk.make_dir("meta")).ok());
  ASSERT_TRUE(sim::run(ex, disk.sync_dir("")).ok());
  absl::StatusOr<io::Buffer> bytes = encode_snapshot({io::Buffer::copy_of("a")}, 0);
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(sim::run(ex, write_snapshot(disk, "meta", {20, 2}, *bytes)).ok());
  ASSERT_TRUE(sim::run(ex, write_snapshot(disk, "meta", {10, 1}, *bytes)).ok());
  disk.crash();
  auto listed = sim::run(ex, list_snapshots(disk, "meta"));
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(*listed, (std::vector<SnapshotId>{{10, 1}, {20, 2}}));
  auto read = sim::run(ex, read_snapshot(disk, "meta", {20, 2}));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->view(), bytes->view());
  ASSERT_TRUE(sim::run(ex, remove_snapshot(disk, "meta", {10, 1})).ok());
  listed = sim::run(ex, list_snapshots(disk, "meta"));
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(*listed, (std::vector<SnapshotId>{{20, 2}}));
  EXPECT_EQ(sim::run(ex, read_snapshot(disk, "meta", {30, 3})).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace brook::raft
