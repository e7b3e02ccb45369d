// io/posix/disk_test.cc
//
// Tests of the posix Disk in a fresh temporary directory (removed after each
// test): a file round trip, the errno mapping, and that paths never escape
// the root. The cross-backend contract is tested by
// tests/io_conformance_test.cc.
#include "io/posix/disk.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "io/posix/test_support.h"
#include "io/status.h"

namespace brook::io::posix {
namespace {

class PosixDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = Loop::create();
    ASSERT_TRUE(loop.ok()) << loop.status();
    loop_ = std::move(*loop);
    std::string pattern = (std::filesystem::temp_directory_path() / "brook-disk-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    disk_ = std::make_unique<Disk>(*loop_, root_);
  }
  void TearDown() override {
    disk_.reset();
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
    EXPECT_FALSE(ec) << ec.message();
  }

  template <typename T>
  T run(Task<T> task) {
    auto r = run_task(*loop_, std::move(task));
    BROOK_ASSERT(r.has_value());
    return std::move(*r);
  }

  std::unique_ptr<Loop> loop_;
  std::string root_;
  std::unique_ptr<Disk> disk_;
};

Task<absl::StatusOr<std::string>> round_trip(Disk* disk) {
  CO_RETURN_IF_ERROR(co_await disk->make_dir("d"));
  CO_ASSIGN_OR_RETURN(auto file, co_await disk->open("d/f", OpenMode::kCreateExclusive));
  BufferChain chain;
  chain.append(Buffer::copy_of("hello, "));
  chain.append(Buffer::copy_of("world"));
  CO_RETURN_IF_ERROR(co_await file->append(std::move(chain)));
  CO_RETURN_IF_ERROR(co_await file->datasync());
  CO_RETURN_IF_ERROR(co_await file->close());
  CO_RETURN_IF_ERROR(co_await disk->sync_dir("d"));
  CO_ASSIGN_OR_RETURN(auto again, co_await disk->open("d/f", OpenMode::kReadOnly));
  if (again->size() != 12) co_return absl::InternalError("wrong size after reopen");
  CO_ASSIGN_OR_RETURN(Buffer bytes, co_await again->read_at(0, 100));
  co_return std::string(bytes.view());
}

// Bytes appended from a vectored chain, synced and closed read back
// unchanged through a new handle, and land in the root directory.
TEST_F(PosixDiskTest, FileRoundTrip) {
  auto r = run(round_trip(disk_.get()));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "hello, world");
  std::ifstream in(root_ + "/d/f");
  std::string on_disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(on_disk, "hello, world");
}

Task<absl::Status> open_status(Disk* disk, std::string path, OpenMode mode) {
  auto r = co_await disk->open(path, mode);
  co_return r.status();
}

// errno values map to the codes io/disk.h promises; writes to a read-only
// handle and calls after close() fail.
TEST_F(PosixDiskTest, ErrorsMapToStatusCodes) {
  EXPECT_EQ(run(open_status(disk_.get(), "missing", OpenMode::kReadWrite)).code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(run(open_status(disk_.get(), "x", OpenMode::kCreate)).ok());
  EXPECT_EQ(run(open_status(disk_.get(), "x", OpenMode::kCreateExclusive)).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(run(open_status(disk_.get(), "", OpenMode::kCreate)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run(disk_->remove("missing")).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(run(disk_->make_dir("x")).code(), absl::StatusCode::kAlreadyExists);  // a file

  auto read_only = run([](Disk* d) -> Task<absl::Status> {
    CO_ASSIGN_OR_RETURN(auto f, co_await d->open("x", OpenMode::kReadOnly));
    co_return co_await f->append(BufferChain(Buffer::copy_of("no")));
  }(disk_.get()));
  EXPECT_EQ(read_only.code(), absl::StatusCode::kFailedPrecondition) << read_only;

  auto after_close = run([](Disk* d) -> Task<absl::Status> {
    CO_ASSIGN_OR_RETURN(auto f, co_await d->open("x", OpenMode::kReadWrite));
    CO_RETURN_IF_ERROR(co_await f->close());
    auto r = co_await f->read_at(0, 1);
    co_return r.status();
  }(disk_.get()));
  EXPECT_EQ(after_close.code(), absl::StatusCode::kFailedPrecondition) << after_close;
}

// Paths are resolved below the root only: "..", absolute paths and empty
// components are refused before any system call.
TEST_F(PosixDiskTest, PathsStayBelowTheRoot) {
  for (const char* bad : {"../x", "/etc/passwd", "a//b", "a/../../x", "./x"}) {
    EXPECT_EQ(run(open_status(disk_.get(), bad, OpenMode::kCreate)).code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(root_).parent_path() / "x"));
}

// A Disk whose root cannot be opened fails every call with the reason.
TEST(PosixDisk, MissingRootFailsEveryCall) {
  auto loop = Loop::create();
  ASSERT_TRUE(loop.ok());
  Disk disk(**loop, "/nonexistent/brook/root");
  auto r = run_task(**loop, disk.list(""));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status().code(), absl::StatusCode::kNotFound) << r->status();
}

}  // namespace
}  // namespace brook::io::posix
