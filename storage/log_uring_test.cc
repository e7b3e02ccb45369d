// storage/log_uring_test.cc
//
// The log on the io_uring disk, where the writeback hints are real system
// calls: segments that started writeback and reserved blocks ahead of their
// appends roll and close with every byte intact and without keeping the
// reservation (the files' allocated blocks match their sizes).
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "io/status.h"
#include "io/uring/disk.h"
#include "io/uring/test_support.h"
#include "net/kafka/record_batch.h"
#include "storage/log.h"

namespace brook::storage {
namespace {

using io::uring::LoopTest;
using io::uring::TempDir;

io::Buffer batch_of(int index, size_t value_bytes) {
  net::RecordBatchBuilder builder(net::RecordBatchOptions{});
  net::NewRecord r;
  // Now: older timestamps would roll a segment at every append (segment.ms).
  r.timestamp_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  r.key = io::Buffer::copy_of(fmt::format("k{}", index));
  r.value = io::Buffer::copy_of(std::string(value_bytes, static_cast<char>('a' + index % 26)));
  builder.append(std::move(r));
  absl::StatusOr<io::Buffer> built = builder.build();
  BROOK_ASSERT(built.ok());
  return *built;
}

// Appends `count` batches, asking for writeback after every `hint_every`;
// then closes the log.
io::Task<absl::Status> append_with_hints(io::Disk* disk, const io::Clock* clock, LogConfig config,
                                         int count, int hint_every, size_t value_bytes) {
  LogOptions options;
  options.dir = "t-0";
  options.config = config;
  CO_ASSIGN_OR_RETURN(std::unique_ptr<Log> log, co_await Log::open(*disk, *clock, options));
  for (int i = 0; i < count; ++i) {
    const io::Buffer batch = batch_of(i, value_bytes);
    absl::StatusOr<AppendResult> appended = co_await log->append_as_leader(batch, 0);
    if (!appended.ok()) co_return appended.status();
    if ((i + 1) % hint_every == 0) co_await log->start_writeback();
  }
  co_return co_await log->close();
}

// Reopens the log and reads every batch back, checking each value.
io::Task<absl::StatusOr<int>> read_back(io::Disk* disk, const io::Clock* clock, LogConfig config,
                                        size_t value_bytes) {
  LogOptions options;
  options.dir = "t-0";
  options.config = config;
  CO_ASSIGN_OR_RETURN(std::unique_ptr<Log> log, co_await Log::open(*disk, *clock, options));
  int seen = 0;
  int64_t next = 0;
  while (next < log->log_end_offset()) {
    CO_ASSIGN_OR_RETURN(ReadResult r, co_await log->read(next, 1 << 20, ReadBound::kLogEnd, true));
    net::BatchIterator it(r.records);
    bool any = false;
    while (true) {
      CO_ASSIGN_OR_RETURN(std::optional<net::BatchView> b, it.next());
      if (!b.has_value()) break;
      CO_ASSIGN_OR_RETURN(std::vector<net::Record> records,
                          net::decode_records(b->bytes, 1 << 20));
      for (const net::Record& record : records) {
        const std::string expected(value_bytes, static_cast<char>('a' + seen % 26));
        if (!record.value.has_value() || record.value->view() != expected) {
          co_return absl::DataLossError(fmt::format("record {} differs", seen));
        }
        ++seen;
      }
      next = b->header.next_offset();
      any = true;
    }
    if (!any) break;
  }
  (void)co_await log->close();
  co_return seen;
}

class LogUringTest : public LoopTest {
 protected:
  void SetUp() override {
    LoopTest::SetUp();
    if (loop_ != nullptr) disk_ = std::make_unique<io::uring::Disk>(*loop_, dir_.path());
  }
  void TearDown() override { disk_.reset(); }

  TempDir dir_;
  std::unique_ptr<io::uring::Disk> disk_;
};

// 24 MiB through 4 MiB segments with a writeback hint every 256 KiB: five
// rolls, every record reads back, and no segment keeps blocks past its end
// (at most one file-system block of slack each).
TEST_F(LogUringTest, WritebackHintsLeaveSegmentsWholeAndUnpadded) {
  LogConfig config;
  config.segment_bytes = 4 << 20;
  constexpr size_t kValueBytes = 8 << 10;
  constexpr int kCount = 3 * 1024;
  auto appended = run(append_with_hints(disk_.get(), loop_.get(), config, kCount, 32, kValueBytes));
  ASSERT_TRUE(appended.has_value());
  ASSERT_TRUE(appended->ok()) << *appended;

  int segments = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path() + "/t-0")) {
    if (entry.path().extension() != ".log") continue;
    ++segments;
    struct stat st {};
    ASSERT_EQ(::stat(entry.path().c_str(), &st), 0);
    const uint64_t allocated = static_cast<uint64_t>(st.st_blocks) * 512;
    const uint64_t slack = std::max<uint64_t>(static_cast<uint64_t>(st.st_blksize), 4096);
    EXPECT_LE(allocated, static_cast<uint64_t>(st.st_size) + slack)
        << entry.path() << " keeps " << allocated - static_cast<uint64_t>(st.st_size)
        << " bytes past its end";
  }
  EXPECT_GE(segments, 6);

  auto read = run(read_back(disk_.get(), loop_.get(), config, kValueBytes));
  ASSERT_TRUE(read.has_value());
  ASSERT_TRUE(read->ok()) << read->status();
  EXPECT_EQ(**read, kCount);
}

}  // namespace
}  // namespace brook::storage
