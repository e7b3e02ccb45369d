// sim/disk_test.cc
//
// Tests of SimDisk: every mode and error of the io::Disk contract, each
// injected fault, and property tests of the crash model (sim/disk.h) against
// a small reference model written from that documentation. Tasks run on a
// deterministic virtual-time executor defined here.
#include "sim/disk.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "io/clock.h"
#include "io/scope.h"
#include "io/when.h"
#include "sim/test_executor.h"

namespace brook::sim {
namespace {

using namespace std::chrono_literals;
using absl::StatusCode;
using io::OpenMode;

io::BufferChain bytes_of(std::string_view text) {
  return io::BufferChain(io::Buffer::copy_of(text));
}

// Synchronous wrappers around one disk and one executor.
class Driver {
 public:
  explicit Driver(uint64_t seed = 1, DiskFaults faults = {})
      : disk(io::Random(seed), faults) {}

  absl::StatusOr<std::unique_ptr<io::File>> open(const std::string& path, OpenMode mode) {
    return run(ex, disk.open(path, mode));
  }
  std::unique_ptr<io::File> create(const std::string& path) {
    auto file = open(path, OpenMode::kCreate);
    BROOK_ASSERT(file.ok());
    return std::move(*file);
  }
  absl::Status write(io::File& f, uint64_t offset, std::string_view text) {
    return run(ex, f.write_at(offset, bytes_of(text)));
  }
  absl::Status append(io::File& f, std::string_view text) {
    return run(ex, f.append(bytes_of(text)));
  }
  absl::StatusOr<std::string> read(io::File& f, uint64_t offset, size_t length) {
    absl::StatusOr<io::Buffer> b = run(ex, f.read_at(offset, length));
    if (!b.ok()) return b.status();
    return std::string(b->view());
  }
  absl::Status sync(io::File& f) { return run(ex, f.datasync()); }
  absl::Status truncate(io::File& f, uint64_t size) { return run(ex, f.truncate(size)); }
  absl::Status close(io::File& f) { return run(ex, f.close()); }
  absl::Status sync_dir(const std::string& dir) { return run(ex, disk.sync_dir(dir)); }
  absl::Status make_dir(const std::string& dir) { return run(ex, disk.make_dir(dir)); }
  absl::Status rename(const std::string& from, const std::string& to) {
    return run(ex, disk.rename(from, to));
  }
  absl::Status remove(const std::string& path) { return run(ex, disk.remove(path)); }
  absl::StatusOr<std::vector<std::string>> list(const std::string& dir) {
    return run(ex, disk.list(dir));
  }

  TestExecutor ex;
  SimDisk disk;
};

std::string repeat(char c, size_t n) { return std::string(n, c); }

// ---------------------------------------------------------------------------
// The io::Disk contract.

// Each open mode finds, creates or refuses files as io/disk.h specifies.
TEST(SimDisk, OpenModes) {
  Driver d;
  EXPECT_EQ(d.open("a", OpenMode::kReadOnly).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(d.open("a", OpenMode::kReadWrite).status().code(), StatusCode::kNotFound);
  auto created = d.open("a", OpenMode::kCreate);
  ASSERT_TRUE(created.ok());
  EXPECT_EQ((*created)->size(), 0u);
  ASSERT_TRUE(d.write(**created, 0, "hello").ok());
  EXPECT_EQ(d.open("a", OpenMode::kCreateExclusive).status().code(), StatusCode::kAlreadyExists);
  auto again = d.open("a", OpenMode::kCreate);  // existing: opened, not truncated
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->size(), 5u);
  auto exclusive = d.open("b", OpenMode::kCreateExclusive);
  ASSERT_TRUE(exclusive.ok());
  auto read_only = d.open("a", OpenMode::kReadOnly);
  ASSERT_TRUE(read_only.ok());
  EXPECT_EQ(*d.read(**read_only, 0, 5), "hello");
  EXPECT_EQ(d.write(**read_only, 0, "x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d.truncate(**read_only, 0).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d.append(**read_only, "x").code(), StatusCode::kFailedPrecondition);
  auto read_write = d.open("a", OpenMode::kReadWrite);
  ASSERT_TRUE(read_write.ok());
  EXPECT_TRUE(d.append(**read_write, "!").ok());
  EXPECT_EQ(d.disk.contents(DiskView::kCurrent, "a"), "hello!");
}

// Bad paths, directories and missing parents are refused with the documented codes.
TEST(SimDisk, OpenRefusesBadPathsDirectoriesAndMissingParents) {
  Driver d;
  for (const char* bad : {"/a", "a/../b", "a//b", "a/", ".", "x/./y"}) {
    EXPECT_EQ(d.open(bad, OpenMode::kCreate).status().code(), StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(d.open("", OpenMode::kCreate).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(d.make_dir("dir").ok());
  EXPECT_EQ(d.open("dir", OpenMode::kReadWrite).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(d.open("missing/a", OpenMode::kCreate).status().code(), StatusCode::kNotFound);
  d.create("file");
  EXPECT_EQ(d.open("file/a", OpenMode::kCreate).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(d.open("dir/a", OpenMode::kCreate).ok());
}

// write_at, append, read_at, truncate and size() behave as on a POSIX file.
TEST(SimDisk, ReadWriteAppendTruncate) {
  Driver d;
  auto f = d.create("f");
  ASSERT_TRUE(d.write(*f, 4, "data").ok());  // a hole before it reads as zeros
  EXPECT_EQ(f->size(), 8u);
  EXPECT_EQ(*d.read(*f, 0, 8), std::string("\0\0\0\0data", 8));
  ASSERT_TRUE(d.append(*f, "++").ok());
  EXPECT_EQ(*d.read(*f, 6, 100), "ta++");  // short read at the end
  EXPECT_EQ(*d.read(*f, 10, 5), "");       // at the end
  EXPECT_EQ(*d.read(*f, 50, 5), "");       // past the end
  EXPECT_EQ(*d.read(*f, 0, 0), "");
  ASSERT_TRUE(d.write(*f, 0, "AB").ok());  // overwrite in place
  EXPECT_EQ(*d.read(*f, 0, 3), std::string("AB\0", 3));
  ASSERT_TRUE(d.truncate(*f, 3).ok());
  EXPECT_EQ(f->size(), 3u);
  ASSERT_TRUE(d.truncate(*f, 5).ok());  // growing fills with zeros
  EXPECT_EQ(*d.read(*f, 0, 10), std::string("AB\0\0\0", 5));
  EXPECT_TRUE(d.write(*f, 2, "").ok());  // empty writes are no-ops
  EXPECT_EQ(f->size(), 5u);
  EXPECT_EQ(d.read(*f, 0, kIoBytesMax + 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.write(*f, kFileBytesMax, "x").code(), StatusCode::kOutOfRange);
  EXPECT_EQ(d.truncate(*f, kFileBytesMax + 1).code(), StatusCode::kOutOfRange);
}

// After close() every call on the handle fails, close() included.
TEST(SimDisk, ClosedHandleRefusesCalls) {
  Driver d;
  auto f = d.create("f");
  ASSERT_TRUE(d.close(*f).ok());
  EXPECT_EQ(d.read(*f, 0, 1).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d.write(*f, 0, "x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d.sync(*f).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d.close(*f).code(), StatusCode::kFailedPrecondition);
}

// make_dir, list and remove follow the contract (sorted, direct children only).
TEST(SimDisk, Directories) {
  Driver d;
  EXPECT_TRUE(d.make_dir("").ok());
  ASSERT_TRUE(d.make_dir("d").ok());
  EXPECT_TRUE(d.make_dir("d").ok());  // already there
  EXPECT_EQ(d.make_dir("x/y").code(), StatusCode::kNotFound);
  ASSERT_TRUE(d.make_dir("d/sub").ok());
  for (const char* name : {"d/b", "d/a", "d/a-b", "d/sub/deep", "top"}) d.create(name);
  EXPECT_EQ(d.make_dir("top").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(*d.list("d"), (std::vector<std::string>{"a", "a-b", "b", "sub"}));
  EXPECT_EQ(*d.list(""), (std::vector<std::string>{"d", "top"}));
  EXPECT_EQ(d.list("nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(d.list("top").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(d.list("../x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.remove("d/sub").code(), StatusCode::kFailedPrecondition);  // not empty
  ASSERT_TRUE(d.remove("d/sub/deep").ok());
  ASSERT_TRUE(d.remove("d/sub").ok());
  EXPECT_EQ(d.remove("d/sub").code(), StatusCode::kNotFound);
  EXPECT_EQ(d.remove("").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*d.list("d"), (std::vector<std::string>{"a", "a-b", "b"}));
  EXPECT_EQ(d.disk.directories(DiskView::kCurrent), (std::vector<std::string>{"d"}));
}

// rename replaces its target atomically and refuses what POSIX refuses.
TEST(SimDisk, Rename) {
  Driver d;
  auto a = d.create("a");
  ASSERT_TRUE(d.write(*a, 0, "new").ok());
  auto b = d.create("b");
  ASSERT_TRUE(d.write(*b, 0, "old").ok());
  ASSERT_TRUE(d.rename("a", "b").ok());
  EXPECT_EQ(d.disk.files(DiskView::kCurrent),
            (std::map<std::string, std::string>{{"b", "new"}}));
  EXPECT_TRUE(d.write(*b, 0, "X").ok());  // the replaced file lives on while open
  EXPECT_EQ(d.rename("a", "c").code(), StatusCode::kNotFound);
  EXPECT_EQ(d.rename("b", "nodir/c").code(), StatusCode::kNotFound);
  EXPECT_TRUE(d.rename("b", "b").ok());
  ASSERT_TRUE(d.make_dir("d").ok());
  ASSERT_TRUE(d.make_dir("d/e").ok());
  d.create("d/e/f");
  EXPECT_EQ(d.rename("b", "d").code(), StatusCode::kFailedPrecondition);  // file onto dir
  EXPECT_EQ(d.rename("d", "b").code(), StatusCode::kFailedPrecondition);  // dir onto file
  EXPECT_EQ(d.rename("d", "d/e/g").code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(d.make_dir("empty").ok());
  EXPECT_EQ(d.rename("empty", "d").code(), StatusCode::kFailedPrecondition);  // not empty
  ASSERT_TRUE(d.rename("d", "empty").ok());  // a directory moves with its subtree
  EXPECT_EQ(d.disk.directories(DiskView::kCurrent),
            (std::vector<std::string>{"empty", "empty/e"}));
  EXPECT_EQ(*d.list("empty/e"), (std::vector<std::string>{"f"}));
  EXPECT_EQ(d.rename("", "x").code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Durability.

// Data is durable only after datasync; names only after sync_dir of the parent.
TEST(SimDisk, DurableViewFollowsSyncs) {
  Driver d;
  auto f = d.create("f");
  ASSERT_TRUE(d.write(*f, 0, "abc").ok());
  EXPECT_EQ(d.disk.pending_writes("f"), 1u);
  EXPECT_EQ(d.disk.files(DiskView::kDurable).size(), 0u);  // the name is not durable
  ASSERT_TRUE(d.sync(*f).ok());
  EXPECT_EQ(d.disk.pending_writes("f"), 0u);
  EXPECT_EQ(d.disk.files(DiskView::kDurable).size(), 0u);
  ASSERT_TRUE(d.sync_dir("").ok());
  EXPECT_EQ(d.disk.files(DiskView::kDurable),
            (std::map<std::string, std::string>{{"f", "abc"}}));
  ASSERT_TRUE(d.truncate(*f, 1).ok());
  EXPECT_EQ(d.disk.contents(DiskView::kDurable, "f"), "abc");  // truncation is pending
  ASSERT_TRUE(d.sync(*f).ok());
  EXPECT_EQ(d.disk.contents(DiskView::kDurable, "f"), "a");
  ASSERT_TRUE(d.rename("f", "g").ok());
  EXPECT_EQ(d.disk.contents(DiskView::kDurable, "f"), "a");  // rename is pending
  ASSERT_TRUE(d.sync_dir("").ok());
  EXPECT_EQ(d.disk.files(DiskView::kDurable),
            (std::map<std::string, std::string>{{"g", "a"}}));
}

// With crash losses off, a crash keeps every pending write and name.
TEST(SimDisk, CrashWithoutLossKeepsEverything) {
  DiskFaults faults;
  faults.crash_lose_unsynced_probability = 0;
  Driver d(7, faults);
  ASSERT_TRUE(d.make_dir("d").ok());
  auto f = d.create("d/f");
  ASSERT_TRUE(d.write(*f, 0, repeat('x', 2000)).ok());
  ASSERT_TRUE(d.rename("d/f", "d/g").ok());
  const auto before = d.disk.files(DiskView::kCurrent);
  d.disk.crash();
  EXPECT_EQ(d.disk.files(DiskView::kCurrent), before);
  EXPECT_EQ(d.disk.pending_dir_ops(), 0u);
  EXPECT_EQ(d.disk.pending_writes("d/g"), 0u);
}

// Every handle opened before a crash or process death fails afterwards, even
// when it outlives the disk; new handles work.
TEST(SimDisk, StaleHandlesAfterCrash) {
  auto d = std::make_unique<Driver>();
  auto f = d->create("f");
  ASSERT_TRUE(d->sync_dir("").ok());
  const uint64_t generation = d->disk.generation();
  d->disk.crash();
  EXPECT_EQ(d->disk.generation(), generation + 1);
  EXPECT_EQ(d->read(*f, 0, 1).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d->write(*f, 0, "x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d->append(*f, "x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d->truncate(*f, 0).code(), StatusCode::kFailedPrecondition);
  const absl::Status status = d->sync(*f);
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("stale file handle"), std::string_view::npos);
  auto fresh = d->open("f", OpenMode::kReadWrite);
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(d->write(**fresh, 0, "y").ok());
  d->disk.kill_process();
  EXPECT_EQ(d->write(**fresh, 0, "z").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d->disk.contents(DiskView::kCurrent, "f"), "y");  // a process death loses nothing
  auto survivor = d->create("g");
  d.reset();  // the disk goes away before the handle
  TestExecutor ex;
  EXPECT_EQ(run(ex, survivor->datasync()).code(), StatusCode::kFailedPrecondition);
}

// A write spanning several sectors, cut by a crash, leaves each sector old or
// new; across seeds all of torn, lost and kept outcomes occur.
TEST(SimDisk, CrashTearsWritesAtSectorGranularity) {
  const std::string old_bytes = repeat('o', 4 * kSectorBytes);
  const std::string new_bytes = repeat('n', 4 * kSectorBytes);
  std::set<std::string> outcomes;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Driver d(seed);
    auto f = d.create("f");
    ASSERT_TRUE(d.write(*f, 0, old_bytes).ok());
    ASSERT_TRUE(d.sync(*f).ok());
    ASSERT_TRUE(d.sync_dir("").ok());
    ASSERT_TRUE(d.write(*f, 0, new_bytes).ok());
    d.disk.crash();
    const std::string after = *d.disk.contents(DiskView::kCurrent, "f");
    ASSERT_EQ(after.size(), old_bytes.size());
    std::string pattern;
    for (size_t s = 0; s < 4; ++s) {
      const std::string sector = after.substr(s * kSectorBytes, kSectorBytes);
      ASSERT_TRUE(sector == old_bytes.substr(0, kSectorBytes) ||
                  sector == new_bytes.substr(0, kSectorBytes));
      pattern += sector[0];
    }
    outcomes.insert(pattern);
  }
  EXPECT_TRUE(outcomes.contains("oooo"));
  EXPECT_TRUE(outcomes.contains("nnnn"));
  EXPECT_GE(outcomes.size(), 8u);  // torn mixtures too
}

// An unsynced create may vanish and an unsynced rename may be undone; once
// the directory is synced both survive every crash.
TEST(SimDisk, CrashLosesOnlyUnsyncedNames) {
  bool create_lost = false;
  bool rename_undone = false;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    Driver d(seed);
    auto old_file = d.create("old");
    ASSERT_TRUE(d.sync_dir("").ok());
    d.create("fresh");
    ASSERT_TRUE(d.rename("old", "renamed").ok());
    d.disk.crash();
    const auto names = d.disk.files(DiskView::kCurrent);
    create_lost |= !names.contains("fresh");
    rename_undone |= names.contains("old");
    EXPECT_NE(names.contains("old"), names.contains("renamed"));  // never both, never none
    // journal order: a kept rename implies the earlier create was kept
    if (names.contains("renamed")) {
      EXPECT_TRUE(names.contains("fresh"));
    }
  }
  EXPECT_TRUE(create_lost);
  EXPECT_TRUE(rename_undone);
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Driver d(seed);
    d.create("old");
    ASSERT_TRUE(d.sync_dir("").ok());
    d.create("fresh");
    ASSERT_TRUE(d.rename("old", "renamed").ok());
    ASSERT_TRUE(d.sync_dir("").ok());
    d.disk.crash();
    EXPECT_EQ(d.disk.files(DiskView::kCurrent),
              (std::map<std::string, std::string>{{"fresh", ""}, {"renamed", ""}}));
  }
}

// sync_dir identifies a directory, not a path: syncing a directory under its
// new name commits the creates made in it under the old name.
TEST(SimDisk, SyncDirFollowsTheDirectoryAcrossRenames) {
  for (uint64_t seed = 0; seed < 30; ++seed) {
    Driver d(seed);
    ASSERT_TRUE(d.make_dir("a").ok());
    ASSERT_TRUE(d.sync_dir("").ok());
    d.create("a/x");
    ASSERT_TRUE(d.rename("a", "b").ok());
    ASSERT_TRUE(d.sync_dir("b").ok());  // commits the create of a/x (and, in order, no more)
    EXPECT_EQ(d.disk.pending_dir_ops(), 1u);  // the rename itself changed the root
    d.disk.crash();
    const auto names = d.disk.files(DiskView::kCurrent);
    EXPECT_TRUE(names.contains("a/x") || names.contains("b/x"));
  }
}

// ---------------------------------------------------------------------------
// Injected faults.

// A full disk refuses growth with ResourceExhausted and writes nothing;
// overwrites, removals and open-but-removed files are accounted.
TEST(SimDisk, NoSpace) {
  DiskFaults faults;
  faults.capacity_bytes = 1000;
  Driver d(1, faults);
  auto f = d.create("f");
  ASSERT_TRUE(d.write(*f, 0, repeat('a', 600)).ok());
  auto g = d.create("g");
  EXPECT_EQ(d.write(*g, 0, repeat('b', 500)).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(g->size(), 0u);
  EXPECT_EQ(d.disk.pending_writes("g"), 0u);
  EXPECT_TRUE(d.write(*g, 0, repeat('b', 400)).ok());  // exactly full
  EXPECT_EQ(d.disk.used_bytes(), 1000u);
  EXPECT_TRUE(d.write(*f, 100, repeat('c', 500)).ok());  // overwrite: no growth
  EXPECT_EQ(d.append(*f, "x").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(d.truncate(*f, 601).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(d.truncate(*f, 100).ok());
  EXPECT_EQ(d.disk.used_bytes(), 500u);
  ASSERT_TRUE(d.remove("g").ok());  // still open: still uses space
  EXPECT_EQ(d.disk.used_bytes(), 500u);
  ASSERT_TRUE(d.close(*g).ok());
  EXPECT_EQ(d.disk.used_bytes(), 100u);
  EXPECT_TRUE(d.append(*f, repeat('d', 900)).ok());
  EXPECT_GE(d.disk.stats().no_space_errors, 3u);
}

// Injected EIO fails reads, writes, truncates and metadata calls without
// changing anything.
TEST(SimDisk, InjectedIoErrors) {
  Driver d;
  auto f = d.create("f");
  ASSERT_TRUE(d.write(*f, 0, "good").ok());
  DiskFaults faults;
  faults.read_error_probability = 1;
  faults.write_error_probability = 1;
  faults.metadata_error_probability = 1;
  d.disk.set_faults(faults);
  EXPECT_EQ(d.read(*f, 0, 4).status().code(), StatusCode::kInternal);
  EXPECT_EQ(d.write(*f, 0, "bad!").code(), StatusCode::kInternal);
  EXPECT_EQ(d.append(*f, "bad").code(), StatusCode::kInternal);
  EXPECT_EQ(d.truncate(*f, 0).code(), StatusCode::kInternal);
  EXPECT_EQ(d.open("g", OpenMode::kCreate).status().code(), StatusCode::kInternal);
  EXPECT_EQ(d.rename("f", "h").code(), StatusCode::kInternal);
  EXPECT_EQ(d.remove("f").code(), StatusCode::kInternal);
  EXPECT_EQ(d.make_dir("d").code(), StatusCode::kInternal);
  EXPECT_EQ(d.list("").status().code(), StatusCode::kInternal);
  EXPECT_EQ(d.disk.files(DiskView::kCurrent),
            (std::map<std::string, std::string>{{"f", "good"}}));
  EXPECT_EQ(d.disk.directories(DiskView::kCurrent).size(), 0u);
  d.disk.set_faults(DiskFaults{});
  EXPECT_EQ(*d.read(*f, 0, 4), "good");
  const DiskStats& stats = d.disk.stats();
  EXPECT_EQ(stats.read_errors, 1u);
  EXPECT_EQ(stats.write_errors, 3u);
  EXPECT_EQ(stats.metadata_errors, 5u);
}

// fsyncgate: a failed datasync may lose unsynced writes for good. They stay
// readable until the crash, a retried datasync succeeds without them, and the
// crash brings back the durable contents.
TEST(SimDisk, FailedDatasyncLosesWritesForGood) {
  int lost_cases = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    Driver d(seed);
    auto f = d.create("f");
    ASSERT_TRUE(d.sync_dir("").ok());
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(d.append(*f, repeat('a' + i, 100)).ok());
    DiskFaults faults;
    faults.sync_error_probability = 1;
    d.disk.set_faults(faults);
    EXPECT_EQ(d.sync(*f).code(), StatusCode::kInternal);
    EXPECT_EQ(d.disk.pending_writes("f"), 0u);  // marked clean: never written back
    const std::string current = *d.disk.contents(DiskView::kCurrent, "f");
    EXPECT_EQ(current.size(), 400u);  // the page cache still serves them
    d.disk.set_faults(DiskFaults{});
    EXPECT_TRUE(d.sync(*f).ok());  // the retry "succeeds"
    const std::string durable = *d.disk.contents(DiskView::kDurable, "f");
    d.disk.crash();
    EXPECT_EQ(d.disk.contents(DiskView::kCurrent, "f"), durable);
    if (durable != current) ++lost_cases;
  }
  EXPECT_GT(lost_cases, 10);
}

// A failed sync_dir commits an unknown prefix of the journal; what it did
// not commit is still pending.
TEST(SimDisk, FailedSyncDirKeepsTheRestPending) {
  DiskFaults faults;
  faults.sync_dir_error_probability = 1;
  Driver d(3, faults);
  for (const char* name : {"a", "b", "c", "d"}) d.create(name);
  EXPECT_EQ(d.sync_dir("").code(), StatusCode::kInternal);
  EXPECT_LE(d.disk.pending_dir_ops(), 4u);
  EXPECT_EQ(d.disk.files(DiskView::kDurable).size() + d.disk.pending_dir_ops(), 4u);
  EXPECT_EQ(d.disk.stats().sync_dir_errors, 1u);
}

// Read corruption flips exactly one bit of what read_at returns and leaves
// the stored bytes intact.
TEST(SimDisk, ReadCorruptionIsVisibleAndTransient) {
  Driver d;
  auto f = d.create("f");
  const std::string data = repeat('\x55', 64);
  ASSERT_TRUE(d.write(*f, 0, data).ok());
  DiskFaults faults;
  faults.read_corruption_probability = 1;
  d.disk.set_faults(faults);
  const std::string corrupted = *d.read(*f, 0, 64);
  ASSERT_EQ(corrupted.size(), data.size());
  int flipped_bits = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    flipped_bits += __builtin_popcount(static_cast<uint8_t>(corrupted[i] ^ data[i]));
  }
  EXPECT_EQ(flipped_bits, 1);
  d.disk.set_faults(DiskFaults{});
  EXPECT_EQ(*d.read(*f, 0, 64), data);
  EXPECT_EQ(d.disk.stats().read_corruptions, 1u);
}

// Bit rot changes the stored byte in both views, for good.
TEST(SimDisk, BitRotPersists) {
  Driver d;
  auto f = d.create("f");
  ASSERT_TRUE(d.write(*f, 0, "abcd").ok());
  ASSERT_TRUE(d.sync(*f).ok());
  ASSERT_TRUE(d.sync_dir("").ok());
  ASSERT_TRUE(d.disk.inject_bit_rot("f", 2).ok());
  const std::string rotten = *d.disk.contents(DiskView::kDurable, "f");
  EXPECT_NE(rotten, "abcd");
  EXPECT_EQ(rotten.substr(0, 2) + rotten.substr(3), "abd");
  EXPECT_EQ(*d.read(*f, 0, 4), rotten);
  d.disk.crash();
  EXPECT_EQ(d.disk.contents(DiskView::kCurrent, "f"), rotten);
  EXPECT_EQ(d.disk.inject_bit_rot("f", 4).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(d.disk.inject_bit_rot("g", 0).code(), StatusCode::kNotFound);
}

io::Task<void> timed_write(io::File* f, std::string text, std::vector<std::string>* order,
                           TestExecutor* ex, std::vector<io::Instant>* done_at) {
  const absl::Status status = co_await f->append(bytes_of(text));
  BROOK_ASSERT(status.ok());
  order->push_back(text);
  done_at->push_back(ex->now());
}

// Operations wait a latency drawn from [latency_min, latency_max] on the
// caller's executor; concurrent operations can complete out of order.
TEST(SimDisk, LatencyDelaysAndReordersOperations) {
  DiskFaults faults;
  faults.latency_min = 1ms;
  faults.latency_max = 10ms;
  bool reordered = false;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Driver d(seed, faults);
    auto f = d.create("f");
    const io::Instant start = d.ex.now();
    std::vector<std::string> order;
    std::vector<io::Instant> done_at;
    {
      io::TaskScope scope(d.ex);
      for (const char* text : {"1", "2", "3", "4"}) {
        scope.spawn(timed_write(f.get(), text, &order, &d.ex, &done_at));
      }
      d.ex.run();
    }
    ASSERT_EQ(order.size(), 4u);
    for (io::Instant t : done_at) {
      EXPECT_GE(t - start, 1ms);
      EXPECT_LE(t - start, 10ms);
    }
    const std::string contents = *d.disk.contents(DiskView::kCurrent, "f");
    EXPECT_EQ(contents, order[0] + order[1] + order[2] + order[3]);  // applied on completion
    reordered |= contents != "1234";
  }
  EXPECT_TRUE(reordered);
}

// An operation cancelled while it waits out its latency has no effect.
TEST(SimDisk, CancelledOperationHasNoEffect) {
  DiskFaults faults;
  faults.latency_min = 5ms;
  faults.latency_max = 5ms;
  Driver d(1, faults);
  auto f = d.create("f");
  std::vector<std::string> order;
  std::vector<io::Instant> done_at;
  {
    io::TaskScope scope(d.ex);
    scope.spawn(timed_write(f.get(), "never", &order, &d.ex, &done_at));
    d.ex.run_until(io::Instant(1ms));  // the write now waits on its timer
    EXPECT_EQ(scope.size(), 1u);
  }  // the scope cancels the write
  d.ex.run();
  EXPECT_TRUE(order.empty());
  EXPECT_EQ(d.disk.contents(DiskView::kCurrent, "f"), "");
}

// Pending writes and journal entries are bounded: the oldest are written back.
TEST(SimDisk, BackgroundWriteBackBoundsPendingState) {
  Driver d;
  auto f = d.create("f");
  for (size_t i = 0; i < kPendingWritesMax + 10; ++i) ASSERT_TRUE(d.append(*f, "x").ok());
  EXPECT_EQ(d.disk.pending_writes("f"), kPendingWritesMax);
  EXPECT_EQ(d.disk.contents(DiskView::kDurable, "f"), std::nullopt);  // name not synced
  ASSERT_TRUE(d.sync_dir("").ok());
  EXPECT_EQ(d.disk.contents(DiskView::kDurable, "f")->size(), 10u);
  for (size_t i = 0; i < kPendingDirOpsMax + 5; ++i) {
    ASSERT_TRUE(d.make_dir(fmt::format("d{}", i)).ok());
  }
  EXPECT_EQ(d.disk.pending_dir_ops(), kPendingDirOpsMax);
  EXPECT_EQ(d.disk.directories(DiskView::kDurable).size(), 5u);
  EXPECT_EQ(d.disk.stats().written_back, 15u);
}


// ---------------------------------------------------------------------------
// Property tests against a reference model of sim/disk.h's crash semantics.
// The model covers files in the root and in one directory "d" (made durable
// up front), opened through three handle slots.

struct RefWrite {
  uint64_t offset = 0;
  std::string bytes;
  bool truncate = false;  // to `offset`
};

void ref_apply(std::string& contents, const RefWrite& w) {
  if (w.truncate) {
    contents.resize(w.offset, '\0');
    return;
  }
  if (contents.size() < w.offset + w.bytes.size()) contents.resize(w.offset + w.bytes.size());
  std::copy(w.bytes.begin(), w.bytes.end(), contents.begin() + static_cast<ptrdiff_t>(w.offset));
}

// Whether `actual` is `base` with some of the sectors of write `w` applied,
// i.e. each sector holds its bytes from `base` or from `full` (= base + w),
// sectors w does not touch hold `base`, and the size is between the two.
bool torn_between(const std::string& base, const std::string& full, const RefWrite& w,
                  const std::string& actual) {
  if (actual.size() < base.size() || actual.size() > std::max(base.size(), full.size())) {
    return false;
  }
  auto at = [](const std::string& s, size_t i) { return i < s.size() ? s[i] : '\0'; };
  const uint64_t first = w.offset / kSectorBytes;
  const uint64_t last = (w.offset + w.bytes.size() - 1) / kSectorBytes;
  const size_t length = std::max(actual.size(), full.size());
  for (uint64_t sector = 0; sector * kSectorBytes < length; ++sector) {
    bool as_base = true;
    bool as_full = true;
    for (uint64_t i = sector * kSectorBytes; i < (sector + 1) * kSectorBytes && i < length; ++i) {
      as_base &= at(actual, i) == at(base, i);
      as_full &= at(actual, i) == at(full, i);
    }
    const bool touched = sector >= first && sector <= last;
    if (!as_base && !(touched && as_full)) return false;
  }
  return true;
}

struct RefFile {
  std::string durable;
  std::string current;
  std::vector<RefWrite> pending;
  bool uncertain = false;  // a datasync failed: the durable contents are unknown

  // The prefix rule: some prefix of the pending writes persists, the next one
  // possibly torn.
  bool allows(const std::string& actual) const {
    if (uncertain) return true;
    std::string state = durable;
    for (size_t j = 0;; ++j) {
      if (actual == state) return true;
      if (j == pending.size()) return false;
      std::string next = state;
      ref_apply(next, pending[j]);
      if (!pending[j].truncate && torn_between(state, next, pending[j], actual)) return true;
      state = std::move(next);
    }
  }
};

std::string parent_path(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

enum class NameOp { kCreate, kRemove, kRename };

struct RefNameOp {
  NameOp kind;
  std::string path;
  std::string to;
  int id = 0;
};

class Reference {
 public:
  std::map<int, RefFile> files;
  std::map<std::string, int> durable_names;
  std::map<std::string, int> current_names;
  std::vector<RefNameOp> journal;     // pending directory operations, in order
  bool durable_names_exact = true;    // false once a sync_dir failed

  int create(const std::string& path) {
    const int id = next_id_++;
    files[id];
    record({NameOp::kCreate, path, {}, id});
    return id;
  }
  void rename(const std::string& from, const std::string& to) {
    record({NameOp::kRename, from, to, current_names.at(from)});
  }
  void remove(const std::string& path) {
    record({NameOp::kRemove, path, {}, current_names.at(path)});
  }
  void sync_dir(const std::string& dir) {
    size_t count = 0;
    for (size_t i = 0; i < journal.size(); ++i) {
      const RefNameOp& op = journal[i];
      const bool touches = parent_path(op.path) == dir ||
                           (op.kind == NameOp::kRename && parent_path(op.to) == dir);
      if (touches) count = i + 1;
    }
    for (size_t i = 0; i < count; ++i) apply(durable_names, journal[i]);
    journal.erase(journal.begin(), journal.begin() + static_cast<ptrdiff_t>(count));
  }
  void write(int id, RefWrite w) {
    RefFile& f = files.at(id);
    ref_apply(f.current, w);
    f.pending.push_back(std::move(w));
  }
  void datasync(int id) {
    RefFile& f = files.at(id);
    for (const RefWrite& w : f.pending) ref_apply(f.durable, w);
    f.pending.clear();
  }
  void datasync_failed(int id) {
    files.at(id).uncertain = true;
    files.at(id).pending.clear();
  }
  std::map<std::string, std::string> current_files() const {
    std::map<std::string, std::string> out;
    for (const auto& [path, id] : current_names) out.emplace(path, files.at(id).current);
    return out;
  }
  // Bytes of live files: named now, or open through `open_ids`.
  uint64_t used_bytes(const std::set<int>& open_ids) const {
    std::set<int> live(open_ids);
    for (const auto& [path, id] : current_names) live.insert(id);
    uint64_t used = 0;
    for (int id : live) used += files.at(id).current.size();
    return used;
  }
  // Whether the files left by a crash are an outcome the model allows: some
  // prefix of the journal persisted, and each file obeys the prefix rule.
  bool allows_crash(const std::map<std::string, std::string>& actual) const {
    std::map<std::string, int> names = durable_names;
    for (size_t k = 0;; ++k) {
      if (names_match(names, actual)) {
        bool all = true;
        for (const auto& [path, id] : names) all &= files.at(id).allows(actual.at(path));
        if (all) return true;
      }
      if (k == journal.size()) return false;
      apply(names, journal[k]);
    }
  }
  // After a crash nothing is pending: the model restarts from what survived.
  void restart_from(const std::map<std::string, std::string>& survivors) {
    files.clear();
    durable_names.clear();
    current_names.clear();
    journal.clear();
    durable_names_exact = true;
    for (const auto& [path, contents] : survivors) {
      const int id = next_id_++;
      files[id] = RefFile{contents, contents, {}, false};
      durable_names[path] = id;
      current_names[path] = id;
    }
  }

 private:
  static bool names_match(const std::map<std::string, int>& names,
                          const std::map<std::string, std::string>& actual) {
    if (names.size() != actual.size()) return false;
    for (const auto& [path, id] : names) {
      if (!actual.contains(path)) return false;
    }
    return true;
  }
  static void apply(std::map<std::string, int>& names, const RefNameOp& op) {
    switch (op.kind) {
      case NameOp::kCreate:
        names[op.path] = op.id;
        return;
      case NameOp::kRemove:
        names.erase(op.path);
        return;
      case NameOp::kRename:
        names.erase(op.path);
        names[op.to] = op.id;
        return;
    }
  }
  void record(RefNameOp op) {
    apply(current_names, op);
    journal.push_back(std::move(op));
  }

  int next_id_ = 0;
};

struct Step {
  int kind = 0;
  int slot = 0;
  int path = 0;
  int path2 = 0;
  int mode = 0;
  int offset = 0;
  int length = 0;
};

std::ostream& operator<<(std::ostream& os, const Step& s) {
  return os << "{kind " << s.kind << " slot " << s.slot << " path " << s.path << " path2 "
            << s.path2 << " mode " << s.mode << " offset " << s.offset << " length "
            << s.length << "}";
}

rc::Gen<Step> gen_step() {
  return rc::gen::build<Step>(rc::gen::set(&Step::kind, rc::gen::inRange(0, 18)),
                              rc::gen::set(&Step::slot, rc::gen::inRange(0, 3)),
                              rc::gen::set(&Step::path, rc::gen::inRange(0, 4)),
                              rc::gen::set(&Step::path2, rc::gen::inRange(0, 4)),
                              rc::gen::set(&Step::mode, rc::gen::inRange(0, 4)),
                              rc::gen::set(&Step::offset, rc::gen::inRange(0, 2600)),
                              rc::gen::set(&Step::length, rc::gen::inRange(1, 1400)));
}

// Programs long enough to open files, write, sync and crash several times.
rc::Gen<std::vector<Step>> gen_steps() {
  return rc::gen::mapcat(rc::gen::inRange(10, 150), [](int n) {
    return rc::gen::container<std::vector<Step>>(static_cast<size_t>(n), gen_step());
  });
}

DiskFaults gen_faults() {
  DiskFaults f;
  f.write_error_probability = *rc::gen::element(0.0, 0.05);
  f.metadata_error_probability = *rc::gen::element(0.0, 0.05);
  f.sync_error_probability = *rc::gen::element(0.0, 0.1);
  f.sync_dir_error_probability = *rc::gen::element(0.0, 0.1);
  f.read_error_probability = *rc::gen::element(0.0, 0.1);
  f.capacity_bytes = *rc::gen::element<uint64_t>(UINT64_MAX, 4000, 12000);
  f.crash_lose_unsynced_probability = *rc::gen::element(1.0, 0.5, 0.0);
  if (*rc::gen::arbitrary<bool>()) f.latency_max = 3ms;
  return f;
}

constexpr const char* kPaths[] = {"a", "b", "d/a", "d/b"};
constexpr OpenMode kModes[] = {OpenMode::kCreate, OpenMode::kCreateExclusive,
                               OpenMode::kReadWrite, OpenMode::kReadOnly};

struct Slot {
  std::unique_ptr<io::File> file;
  int id = -1;
  bool writable = false;
};

// Runs steps against a SimDisk and the Reference side by side, checking
// after every step that reads see the model's current contents and after
// every crash that the survivors are an outcome the model allows.
class Harness {
 public:
  Harness(uint64_t seed, const DiskFaults& faults) : d_(seed), faults_(faults) {
    BROOK_ASSERT(d_.make_dir("d").ok());
    BROOK_ASSERT(d_.sync_dir("").ok());
    d_.disk.set_faults(faults);
  }

  void step(const Step& s) {
    switch (s.kind) {
      case 0: case 1: case 17: open(s); break;
      case 2: case 3: case 4: write(s, false); break;
      case 5: case 6: write(s, true); break;
      case 7: truncate(s); break;
      case 8: case 9: datasync(s); break;
      case 10: close(s); break;
      case 11: read(s); break;
      case 12: rename(s); break;
      case 13: remove(s); break;
      case 14: case 15: sync_dir(s); break;
      case 16: crash_and_check(); break;
      default: RC_FAIL("unknown step");
    }
    RC_ASSERT(d_.disk.files(DiskView::kCurrent) == ref_.current_files());
  }

  void crash_and_check() {
    check_durable_view();
    d_.disk.crash();
    for (Slot& slot : slots_) {
      if (slot.file) RC_ASSERT(d_.sync(*slot.file).code() == StatusCode::kFailedPrecondition);
      slot = Slot{};
    }
    const auto survivors = d_.disk.files(DiskView::kCurrent);
    RC_ASSERT(d_.disk.files(DiskView::kDurable) == survivors);  // nothing is pending now
    RC_ASSERT(d_.disk.pending_dir_ops() == 0u);
    RC_ASSERT(ref_.allows_crash(survivors));
    RC_ASSERT(d_.disk.directories(DiskView::kCurrent) == std::vector<std::string>{"d"});
    trace_.push_back(survivors);
    ref_.restart_from(survivors);
  }

  const std::vector<std::map<std::string, std::string>>& trace() const { return trace_; }
  const DiskStats& stats() const { return d_.disk.stats(); }

 private:
  // Checks `status` against the model's expectation; an injected EIO is also
  // acceptable when its probability is on. Returns whether the call succeeded.
  static bool outcome(const absl::Status& status, StatusCode expected, double injected) {
    if (status.code() != expected) {
      RC_ASSERT(status.code() == StatusCode::kInternal);
      RC_ASSERT(injected > 0);
    }
    return status.ok();
  }
  StatusCode space_for(uint64_t growth) const {
    std::set<int> open_ids;
    for (const Slot& slot : slots_) {
      if (slot.file) open_ids.insert(slot.id);
    }
    const uint64_t used = ref_.used_bytes(open_ids);
    if (growth > 0 && used + growth > faults_.capacity_bytes) {
      return StatusCode::kResourceExhausted;
    }
    return StatusCode::kOk;
  }
  void open(const Step& s) {
    const std::string path = kPaths[s.path];
    const OpenMode mode = kModes[s.mode];
    const bool exists = ref_.current_names.contains(path);
    StatusCode expected = StatusCode::kOk;
    if (exists && mode == OpenMode::kCreateExclusive) expected = StatusCode::kAlreadyExists;
    if (!exists && (mode == OpenMode::kReadWrite || mode == OpenMode::kReadOnly)) {
      expected = StatusCode::kNotFound;
    }
    auto file = d_.open(path, mode);
    if (!outcome(file.status(), expected, faults_.metadata_error_probability)) return;
    const int id = exists ? ref_.current_names.at(path) : ref_.create(path);
    slots_[s.slot] = Slot{std::move(*file), id, mode != OpenMode::kReadOnly};
  }
  void write(const Step& s, bool at_end) {
    Slot& slot = slots_[s.slot];
    if (!slot.file) return;
    const std::string& current = ref_.files.at(slot.id).current;
    const uint64_t offset = at_end ? current.size() : static_cast<uint64_t>(s.offset);
    const std::string data(s.length, next_fill());
    const uint64_t end = offset + data.size();
    StatusCode expected = space_for(end > current.size() ? end - current.size() : 0);
    if (!slot.writable) expected = StatusCode::kFailedPrecondition;
    const absl::Status status =
        at_end ? d_.append(*slot.file, data) : d_.write(*slot.file, offset, data);
    if (outcome(status, expected, faults_.write_error_probability)) {
      ref_.write(slot.id, RefWrite{offset, data, false});
    }
  }
  void truncate(const Step& s) {
    Slot& slot = slots_[s.slot];
    if (!slot.file) return;
    const uint64_t size = static_cast<uint64_t>(s.offset);
    const uint64_t old_size = ref_.files.at(slot.id).current.size();
    StatusCode expected = space_for(size > old_size ? size - old_size : 0);
    if (!slot.writable) expected = StatusCode::kFailedPrecondition;
    if (outcome(d_.truncate(*slot.file, size), expected, faults_.write_error_probability)) {
      ref_.write(slot.id, RefWrite{size, {}, true});
    }
  }
  void datasync(const Step& s) {
    Slot& slot = slots_[s.slot];
    if (!slot.file) return;
    if (outcome(d_.sync(*slot.file), StatusCode::kOk, faults_.sync_error_probability)) {
      ref_.datasync(slot.id);
    } else {
      ref_.datasync_failed(slot.id);
    }
  }
  void close(const Step& s) {
    Slot& slot = slots_[s.slot];
    if (!slot.file) return;
    RC_ASSERT(d_.close(*slot.file).ok());
    slot = Slot{};
  }
  void read(const Step& s) {
    Slot& slot = slots_[s.slot];
    if (!slot.file) return;
    const std::string& current = ref_.files.at(slot.id).current;
    const auto got = d_.read(*slot.file, s.offset, s.length);
    if (!outcome(got.status(), StatusCode::kOk, faults_.read_error_probability)) return;
    const size_t offset = std::min<size_t>(s.offset, current.size());
    RC_ASSERT(*got == current.substr(offset, s.length));
  }
  void rename(const Step& s) {
    const std::string from = kPaths[s.path];
    const std::string to = kPaths[s.path2];
    const bool exists = ref_.current_names.contains(from);
    const StatusCode expected = exists ? StatusCode::kOk : StatusCode::kNotFound;
    if (outcome(d_.rename(from, to), expected, faults_.metadata_error_probability) &&
        from != to) {
      ref_.rename(from, to);
    }
  }
  void remove(const Step& s) {
    const std::string path = kPaths[s.path];
    const StatusCode expected =
        ref_.current_names.contains(path) ? StatusCode::kOk : StatusCode::kNotFound;
    if (outcome(d_.remove(path), expected, faults_.metadata_error_probability)) {
      ref_.remove(path);
    }
  }
  void sync_dir(const Step& s) {
    const std::string dir = s.path % 2 == 0 ? "" : "d";
    if (outcome(d_.sync_dir(dir), StatusCode::kOk, faults_.sync_dir_error_probability)) {
      ref_.sync_dir(dir);
    } else {
      ref_.durable_names_exact = false;
    }
  }
  // Before a crash the durable view must be exactly the model's durable state.
  void check_durable_view() const {
    if (!ref_.durable_names_exact) return;
    const auto durable = d_.disk.files(DiskView::kDurable);
    RC_ASSERT(durable.size() == ref_.durable_names.size());
    for (const auto& [path, id] : ref_.durable_names) {
      RC_ASSERT(durable.contains(path));
      const RefFile& f = ref_.files.at(id);
      if (!f.uncertain) RC_ASSERT(durable.at(path) == f.durable);
    }
  }
  // Distinct bytes per write, so a torn or lost write is told apart.
  char next_fill() {
    static constexpr char kFills[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    return kFills[fills_++ % (sizeof(kFills) - 1)];
  }

  Driver d_;
  DiskFaults faults_;
  Reference ref_;
  Slot slots_[3];
  std::vector<std::map<std::string, std::string>> trace_;
  size_t fills_ = 0;
};

// After any sequence of writes, appends, truncates, datasyncs, creates,
// renames, removes and sync_dirs (with injected errors, full disks and
// latency), reads see exactly the model's current contents, and every crash
// leaves only what the model allows: synced data and synced names survive,
// and beyond them only a prefix of the pending operations (the write at the
// cut torn by sector).
RC_GTEST_PROP(SimDiskModel, CrashOutcomesAreAllowedByTheModel, ()) {
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
  const DiskFaults faults = gen_faults();
  const auto steps = *gen_steps();
  Harness harness(seed, faults);
  for (const Step& s : steps) harness.step(s);
  harness.crash_and_check();
  const DiskStats& stats = harness.stats();
  RC_CLASSIFY(stats.torn_writes > 0, "torn write");
  RC_CLASSIFY(stats.lost_writes > 0, "lost write");
  RC_CLASSIFY(stats.lost_dir_ops > 0, "lost directory operation");
  RC_CLASSIFY(stats.sync_errors > 0, "failed datasync");
  RC_CLASSIFY(stats.no_space_errors > 0, "disk full");
}

// A run is a pure function of its seed: the same steps and seed give the
// same survivors after every crash and the same fault counts.
RC_GTEST_PROP(SimDiskModel, SameSeedSameRun, ()) {
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
  const DiskFaults faults = gen_faults();
  const auto steps = *gen_steps();
  Harness first(seed, faults);
  Harness second(seed, faults);
  for (const Step& s : steps) {
    first.step(s);
    second.step(s);
  }
  first.crash_and_check();
  second.crash_and_check();
  RC_ASSERT(first.trace() == second.trace());
  RC_ASSERT(first.stats().torn_writes == second.stats().torn_writes);
  RC_ASSERT(first.stats().lost_writes == second.stats().lost_writes);
  RC_ASSERT(first.stats().write_errors == second.stats().write_errors);
}

}  // namespace
}  // namespace brook::sim
