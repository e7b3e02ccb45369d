// io/uring/disk_test.cc
//
// Tests of the io_uring Disk and File against a real temporary directory:
// write/read/datasync round trips, vectored and large writes, names
// (rename, remove, list, make_dir, sync_dir) and error codes.
#include "io/uring/disk.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/status.h"
#include "io/uring/test_support.h"

namespace brook::io::uring {
namespace {

class DiskTest : public LoopTest {
 protected:
  void SetUp() override {
    LoopTest::SetUp();
    if (loop_ != nullptr) disk_ = std::make_unique<Disk>(*loop_, dir_.path() + "/root");
  }
  void TearDown() override { disk_.reset(); }

  std::string host_path(const std::string& name) const { return dir_.path() + "/root/" + name; }

  TempDir dir_;
  std::unique_ptr<Disk> disk_;
};

template <typename... Parts>
BufferChain chain_of(const Parts&... parts) {
  BufferChain chain;
  (chain.append(Buffer::copy_of(std::string_view(parts))), ...);
  return chain;
}

Task<absl::StatusOr<std::string>> write_sync_read(Disk* disk) {
  CO_ASSIGN_OR_RETURN(auto file, co_await disk->open("a.log", OpenMode::kCreate));
  CO_RETURN_IF_ERROR(co_await file->append(chain_of("hello ", "vectored ", "world")));
  CO_RETURN_IF_ERROR(co_await file->datasync());
  if (file->size() != 20) co_return absl::InternalError("bad size");
  CO_ASSIGN_OR_RETURN(Buffer head, co_await file->read_at(0, 5));
  CO_ASSIGN_OR_RETURN(Buffer tail, co_await file->read_at(15, 100));  // short at EOF
  CO_RETURN_IF_ERROR(co_await file->close());
  co_return std::string(head.view()) + "|" + std::string(tail.view());
}

// Bytes appended from several buffers and synced read back exactly, and a
// read past the end is short rather than an error.
TEST_F(DiskTest, WriteDatasyncReadRoundTrip) {
  auto r = run(write_sync_read(disk_.get()));
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->ok()) << r->status();
  EXPECT_EQ(**r, "hello|world");
  std::ifstream in(host_path("a.log"));
  std::string on_disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(on_disk, "hello vectored world");
}

Task<absl::StatusOr<std::string>> large_write(Disk* disk, size_t parts, size_t part_bytes) {
  CO_ASSIGN_OR_RETURN(auto file, co_await disk->open("big", OpenMode::kCreateExclusive));
  BufferChain chain;
  std::string expected;
  for (size_t i = 0; i < parts; ++i) {
    std::string part(part_bytes, static_cast<char>('a' + i % 26));
    expected += part;
    chain.append(Buffer::copy_of(part));
  }
  CO_RETURN_IF_ERROR(co_await file->write_at(0, std::move(chain)));
  CO_ASSIGN_OR_RETURN(Buffer back, co_await file->read_at(0, expected.size()));
  if (back.view() != expected) co_return absl::DataLossError("mismatch");
  co_return fmt::format("{}", file->size());
}

// A chain with more parts than one writev takes is written completely.
TEST_F(DiskTest, WritesMoreVectorsThanOneCallTakes) {
  auto r = run(large_write(disk_.get(), 3000, 100));
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->ok()) << r->status();
  EXPECT_EQ(**r, "300000");
}

// Writes larger than DiskOptions::inline_write_bytes_max go through the
// ring, smaller ones are made inline; both land the same bytes, and a chain
// longer than one call's vector is written whole either way.
TEST_F(DiskTest, WritesInlineAndThroughTheRing) {
  for (const size_t inline_max : {size_t{0}, size_t{1000}, kInlineWriteBytesDefault}) {
    SCOPED_TRACE(inline_max);
    Disk disk(*loop_, dir_.path() + fmt::format("/root-{}", inline_max),
              DiskOptions{.inline_write_bytes_max = inline_max});
    auto small = run(write_sync_read(&disk));
    ASSERT_TRUE(small.has_value());
    ASSERT_TRUE(small->ok()) << small->status();
    EXPECT_EQ(**small, "hello|world");
    auto big = run(large_write(&disk, 3000, 100));
    ASSERT_TRUE(big.has_value());
    ASSERT_TRUE(big->ok()) << big->status();
    EXPECT_EQ(**big, "300000");
  }
}

// Sets RLIMIT_FSIZE for the process (SIGXFSZ ignored, so a write past it
// fails with EFBIG instead of killing the test) and restores both.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGXFSZ, &ignore, &old_action_);
    getrlimit(RLIMIT_FSIZE, &old_limit_);
    rlimit limit = old_limit_;
    limit.rlim_cur = bytes;
    ok_ = bytes <= old_limit_.rlim_max && setrlimit(RLIMIT_FSIZE, &limit) == 0;
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_limit_);
    sigaction(SIGXFSZ, &old_action_, nullptr);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
  bool ok() const { return ok_; }

 private:
  struct sigaction old_action_ {};
  rlimit old_limit_{};
  bool ok_ = false;
};

// Appends two 40,000-byte pieces to a file that may not grow past 64 KiB:
// the first lands, the second lands in part and then fails. Returns the
// second append's status, the size the file reports and the bytes it holds.
struct RefusedWrite {
  absl::Status second;
  uint64_t size = 0;
  std::string contents;
};
Task<absl::StatusOr<RefusedWrite>> refused_write(Disk* disk) {
  CO_ASSIGN_OR_RETURN(auto file, co_await disk->open("big.log", OpenMode::kCreate));
  CO_RETURN_IF_ERROR(co_await file->append(chain_of(std::string(40'000, 'a'))));
  RefusedWrite out;
  out.second = co_await file->append(chain_of(std::string(20'000, 'b'), std::string(20'000, 'c')));
  out.size = file->size();
  CO_ASSIGN_OR_RETURN(Buffer all, co_await file->read_at(0, 100'000));
  out.contents = std::string(all.view());
  co_return out;
}

// A write the file system refuses partway reports why, made inline or
// through the ring, and the file's size counts the bytes that did land.
TEST_F(DiskTest, RefusedWriteReportsItsError) {
  for (const size_t inline_max : {size_t{0}, kInlineWriteBytesDefault}) {
    SCOPED_TRACE(inline_max);
    Disk disk(*loop_, dir_.path() + fmt::format("/limited-{}", inline_max),
              DiskOptions{.inline_write_bytes_max = inline_max});
    std::optional<absl::StatusOr<RefusedWrite>> r;
    {
      FileSizeLimit limit(65'536);
      if (!limit.ok()) GTEST_SKIP() << "cannot lower RLIMIT_FSIZE";
      r = run(refused_write(&disk));
    }
    ASSERT_TRUE(r.has_value());
    ASSERT_TRUE(r->ok()) << r->status();
    const RefusedWrite& w = **r;
    EXPECT_EQ(w.second.code(), absl::StatusCode::kResourceExhausted) << w.second;
    EXPECT_NE(w.second.message().find("big.log"), std::string::npos) << w.second;
    EXPECT_EQ(w.size, 65'536u);
    EXPECT_EQ(w.contents, std::string(40'000, 'a') + std::string(20'000, 'b') +
                              std::string(5'536, 'c'));
  }
}

Task<absl::Status> truncate_and_reopen(Disk* disk) {
  {
    CO_ASSIGN_OR_RETURN(auto file, co_await disk->open("t", OpenMode::kCreate));
    CO_RETURN_IF_ERROR(co_await file->write_at(0, chain_of("0123456789")));
    CO_RETURN_IF_ERROR(co_await file->truncate(4));
    if (file->size() != 4) co_return absl::InternalError("size after truncate");
  }
  CO_ASSIGN_OR_RETURN(auto file, co_await disk->open("t", OpenMode::kReadOnly));
  if (file->size() != 4) co_return absl::InternalError("size after reopen");
  CO_ASSIGN_OR_RETURN(Buffer all, co_await file->read_at(0, 10));
  if (all.view() != "0123") co_return absl::InternalError(std::string(all.view()));
  co_return absl::OkStatus();
}

// Truncation shrinks the file, and a reopened file learns its size.
TEST_F(DiskTest, TruncateAndReopen) {
  auto r = run(truncate_and_reopen(disk_.get()));
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->ok()) << *r;
}

Task<absl::StatusOr<std::vector<std::string>>> names_dance(Disk* disk) {
  CO_RETURN_IF_ERROR(co_await disk->make_dir("sub"));
  CO_RETURN_IF_ERROR(co_await disk->make_dir("sub"));  // already there: fine
  for (const char* name : {"sub/b", "sub/a", "sub/c"}) {
    CO_ASSIGN_OR_RETURN(auto f, co_await disk->open(name, OpenMode::kCreate));
    CO_RETURN_IF_ERROR(co_await f->close());
  }
  CO_RETURN_IF_ERROR(co_await disk->rename("sub/c", "sub/d"));
  CO_RETURN_IF_ERROR(co_await disk->remove("sub/a"));
  CO_RETURN_IF_ERROR(co_await disk->sync_dir("sub"));
  CO_RETURN_IF_ERROR(co_await disk->sync_dir(""));
  co_return co_await disk->list("sub");
}

// Names created, renamed and removed show in a sorted listing.
TEST_F(DiskTest, RenameRemoveListSyncDir) {
  auto r = run(names_dance(disk_.get()));
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->ok()) << r->status();
  EXPECT_EQ(**r, (std::vector<std::string>{"b", "d"}));
}

struct Codes {
  absl::StatusCode read_only_write;
  absl::StatusCode directory_open;
  absl::StatusCode missing_open;
  absl::StatusCode exclusive_twice;
  absl::StatusCode bad_path;
  absl::StatusCode missing_remove;
  absl::StatusCode after_close;
  absl::StatusCode missing_list;
};

Task<Codes> error_codes(Disk* disk) {
  Codes c{};
  c.missing_open = (co_await disk->open("nope", OpenMode::kReadOnly)).status().code();
  {
    auto first = co_await disk->open("x", OpenMode::kCreateExclusive);
    c.exclusive_twice = (co_await disk->open("x", OpenMode::kCreateExclusive)).status().code();
    if (first.ok()) {
      (void)co_await (*first)->close();  // closing cannot fail here
      c.after_close = (co_await (*first)->append(chain_of("z"))).code();
    }
  }
  c.bad_path = (co_await disk->open("../escape", OpenMode::kCreate)).status().code();
  if (auto ro = co_await disk->open("x", OpenMode::kReadOnly); ro.ok()) {
    c.read_only_write = (co_await (*ro)->append(chain_of("z"))).code();
  }
  if ((co_await disk->make_dir("d")).ok()) {
    c.directory_open = (co_await disk->open("d", OpenMode::kReadOnly)).status().code();
  }
  c.missing_remove = (co_await disk->remove("nope")).code();
  c.missing_list = (co_await disk->list("nope")).status().code();
  co_return c;
}

// Errors carry the codes io/disk.h promises.
TEST_F(DiskTest, ErrorCodes) {
  auto c = run(error_codes(disk_.get()));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->missing_open, absl::StatusCode::kNotFound);
  EXPECT_EQ(c->exclusive_twice, absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(c->bad_path, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->missing_remove, absl::StatusCode::kNotFound);
  EXPECT_EQ(c->after_close, absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c->missing_list, absl::StatusCode::kNotFound);
  EXPECT_EQ(c->read_only_write, absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c->directory_open, absl::StatusCode::kFailedPrecondition);
}

// A Disk whose root cannot be created reports why on every call.
TEST_F(DiskTest, UnusableRootFailsEveryCall) {
  Disk bad(*loop_, dir_.path() + "/missing/parent/root");
  auto r = run(bad.list(""));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace brook::io::uring
