// tests/io_conformance_test.cc
//
// The io conformance suite: one set of tests of the Clock, Disk and Network
// contracts (io/clock.h, io/disk.h, io/network.h) run against every backend —
// the simulator, io_uring and epoll — through tests/io_conformance.h. A
// backend whose factory returns nullptr is skipped with the reason.
//
// Rules that keep the suite valid on every backend:
// - Time is read only through a node's Clock and never compared with wall
//   time: in the simulator time is virtual.
// - Node 0 and node 1 are different hosts. Work for node 1 runs in a task
//   spawned on node 1's executor (on_node / TaskScope); the two nodes share
//   nothing but the network and the test's own bookkeeping.
// - Assertions inside coroutines use EXPECT_* or the CO_ASSERT_* macros below
//   (ASSERT_* would `return` from a coroutine).
// - Aggregate temporaries (io::Address{...}) are never built inside a
//   co_await expression: GCC 12 miscompiles them there.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "io/clock.h"
#include "io/context.h"
#include "io/scope.h"
#include "io/status.h"
#include "io/sync.h"
#include "io/task.h"
#include "io/when.h"
#include "tests/io_conformance.h"

namespace brook::io {
// Readable addresses in failure messages (found by argument-dependent lookup).
inline void PrintTo(const Address& address, std::ostream* out) { *out << address.to_string(); }
}  // namespace brook::io

namespace brook::testing {
namespace {

using namespace std::chrono_literals;
using io::Buffer;
using io::BufferChain;
using io::OpenMode;
using io::Task;

// Fails the test and leaves the coroutine when `cond` is false.
#define CO_ASSERT_TRUE(cond)                     \
  do {                                           \
    if (!(cond)) {                               \
      ADD_FAILURE() << "expected true: " #cond;  \
      co_return;                                 \
    }                                            \
  } while (0)

// Fails the test and leaves the coroutine when `expr` (a Status) is not OK.
#define CO_ASSERT_OK(expr)                                  \
  do {                                                      \
    const ::absl::Status conf_status_ = (expr);             \
    if (!conf_status_.ok()) {                               \
      ADD_FAILURE() << #expr << " failed: " << conf_status_; \
      co_return;                                            \
    }                                                       \
  } while (0)

// Moves the value of `expr` (a StatusOr) into `lhs`, or fails the test and
// leaves the coroutine.
#define CO_ASSERT_OK_AND_ASSIGN(lhs, expr) \
  CO_ASSERT_OK_AND_ASSIGN_IMPL_(BROOK_CONCAT_(conf_statusor_, __LINE__), lhs, expr)
#define CO_ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, expr)                 \
  auto tmp = (expr);                                                  \
  if (!tmp.ok()) {                                                    \
    ADD_FAILURE() << #expr << " failed: " << tmp.status();            \
    co_return;                                                        \
  }                                                                   \
  lhs = std::move(*tmp)

// ---------------------------------------------------------------------------
// Helpers.

// Deterministic bytes, different for each salt.
std::string pattern(size_t size, uint32_t salt) {
  std::string out(size, '\0');
  uint32_t x = salt * 2654435761u + 1;
  for (char& c : out) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 16);
  }
  return out;
}

// `text` as a chain of parts of `part_bytes` (the last may be shorter).
BufferChain chain_of(std::string_view text, size_t part_bytes) {
  BufferChain chain;
  for (size_t at = 0; at < text.size(); at += part_bytes) {
    chain.append(Buffer::copy_of(text.substr(at, part_bytes)));
  }
  return chain;
}

// Where two byte strings first differ (for readable failures on megabytes).
size_t first_difference(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return i;
  }
  return n;
}

#define EXPECT_SAME_BYTES(a, b)                                                 \
  EXPECT_TRUE((a) == (b)) << "sizes " << (a).size() << " and " << (b).size()   \
                          << ", first difference at " << first_difference(a, b)

// Reads exactly `size` bytes; each read_some must respect its bytes_max.
Task<absl::StatusOr<std::string>> read_exactly(io::Connection* conn, size_t size) {
  std::string out;
  out.reserve(size);
  while (out.size() < size) {
    const size_t want = size - out.size();
    CO_ASSIGN_OR_RETURN(Buffer data, co_await conn->read_some(want));
    if (data.empty()) {
      co_return absl::OutOfRangeError(fmt::format("end of stream after {} of {} bytes",
                                                  out.size(), size));
    }
    if (data.size() > want) {
      co_return absl::InternalError(fmt::format("read_some({}) yielded {}", want, data.size()));
    }
    out.append(data.view());
  }
  co_return out;
}

Task<absl::Status> write_string(io::Connection* conn, std::string text, size_t part_bytes) {
  co_return co_await conn->write_all(chain_of(text, part_bytes));
}

// Runs `task` on node `ctx`'s executor and waits for it.
Task<void> on_node(io::Context* ctx, Task<void> task) {
  io::TaskScope scope(ctx->executor());
  scope.spawn(std::move(task));
  co_await scope.join();
}

Task<absl::Status> write_file(io::Disk* disk, std::string path, std::string contents) {
  CO_ASSIGN_OR_RETURN(auto file, co_await disk->open(path, OpenMode::kCreate));
  CO_RETURN_IF_ERROR(co_await file->truncate(0));
  CO_RETURN_IF_ERROR(co_await file->write_at(0, chain_of(contents, 4096)));
  co_return co_await file->close();
}

Task<absl::StatusOr<std::string>> read_file(io::Disk* disk, std::string path) {
  CO_ASSIGN_OR_RETURN(auto file, co_await disk->open(path, OpenMode::kReadOnly));
  CO_ASSIGN_OR_RETURN(Buffer data, co_await file->read_at(0, file->size()));
  CO_RETURN_IF_ERROR(co_await file->close());
  co_return std::string(data.view());
}

Task<absl::Status> open_status(io::Disk* disk, std::string path, OpenMode mode) {
  auto file = co_await disk->open(path, mode);
  co_return file.status();
}

Task<void> sleep_until(const io::Clock* clock, io::Instant deadline) {
  co_await clock->sleep_until(deadline);
}

// ---------------------------------------------------------------------------
// The fixture.

struct BackendFactory {
  const char* name;
  std::unique_ptr<Backend> (*make)();
};

class IoConformance : public ::testing::TestWithParam<BackendFactory> {
 protected:
  void SetUp() override {
    backend_ = GetParam().make();
    if (backend_ == nullptr) {
      GTEST_SKIP() << "the " << GetParam().name
                   << " backend is unavailable: its factory returned nullptr (not built "
                      "into this binary, or refused by this machine)";
    }
  }

  // Runs `body` on node 0 and fails the test when it cannot complete.
  void run(Task<void> body) {
    ASSERT_TRUE(backend_->run(std::move(body)))
        << backend_->name() << ": the test body did not complete (deadlock or time limit)";
  }

  Backend* backend() { return backend_.get(); }

 private:
  std::unique_ptr<Backend> backend_;
};

// ---------------------------------------------------------------------------
// Timers.

Task<void> note_after_sleep(const io::Clock* clock, io::Duration d, std::vector<int>* order,
                            int id) {
  const io::Instant deadline = clock->now() + d;
  co_await clock->sleep_for(d);
  EXPECT_GE(clock->now(), deadline) << "sleeper " << id << " woke early";
  order->push_back(id);
}

Task<void> sleepers_wake_in_deadline_order(Backend* b) {
  io::Context& ctx = b->node(0);
  std::vector<int> order;
  {
    io::TaskScope scope(ctx.executor());
    scope.spawn(note_after_sleep(&ctx.clock(), 30ms, &order, 3));
    scope.spawn(note_after_sleep(&ctx.clock(), 10ms, &order, 1));
    scope.spawn(note_after_sleep(&ctx.clock(), 20ms, &order, 2));
    scope.spawn(note_after_sleep(&ctx.clock(), 0ms, &order, 0));
    co_await scope.join();
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

// Sleepers started together wake in the order of their deadlines, never
// before them.
TEST_P(IoConformance, SleepersWakeInDeadlineOrder) {
  run(sleepers_wake_in_deadline_order(backend()));
}

Task<void> past_deadline_completes_at_once(Backend* b) {
  const io::Clock& clock = b->node(0).clock();
  const io::Instant start = clock.now();
  auto winner = co_await io::when_first(sleep_until(&clock, start - 1s),
                                        sleep_until(&clock, start + 5s));
  EXPECT_EQ(winner.index(), 0u) << "a deadline in the past lost to one 5 s away";
  auto zero = co_await io::when_first(sleep_until(&clock, clock.now()),
                                      sleep_until(&clock, clock.now() + 5s));
  EXPECT_EQ(zero.index(), 0u) << "a deadline of now lost to one 5 s away";
}

// A deadline at or before now is already due: the sleep completes at once.
TEST_P(IoConformance, PastDeadlineCompletesAtOnce) {
  run(past_deadline_completes_at_once(backend()));
}

struct SleepProbe {
  bool started = false;
  bool woke = false;
  bool unwound = false;
};

struct UnwindMark {
  SleepProbe* probe;
  ~UnwindMark() { probe->unwound = true; }
};

Task<void> sleep_and_mark(const io::Clock* clock, io::Duration d, SleepProbe* probe) {
  UnwindMark mark{probe};
  probe->started = true;
  co_await clock->sleep_for(d);
  probe->woke = true;
}

Task<void> cancelled_sleeper_never_wakes(Backend* b) {
  io::Context& ctx = b->node(0);
  SleepProbe probe;
  {
    io::TaskScope scope(ctx.executor());
    scope.spawn(sleep_and_mark(&ctx.clock(), 20ms, &probe));
    for (int i = 0; i < 100 && !probe.started; ++i) co_await io::yield_now();
    CO_ASSERT_TRUE(probe.started);
    EXPECT_FALSE(probe.unwound);
  }  // destroying the scope cancels the sleeper
  EXPECT_TRUE(probe.unwound);
  co_await ctx.clock().sleep_for(60ms);
  EXPECT_FALSE(probe.woke);
}

// Destroying the scope of a sleeping task unwinds it, and its timer never
// resumes it.
TEST_P(IoConformance, CancelledSleeperNeverWakes) {
  run(cancelled_sleeper_never_wakes(backend()));
}

Task<int> value_after(const io::Clock* clock, io::Duration d, int value) {
  co_await clock->sleep_for(d);
  co_return value;
}

Task<absl::Status> status_after(const io::Clock* clock, io::Duration d) {
  co_await clock->sleep_for(d);
  co_return absl::OkStatus();
}

Task<void> with_timeout_bounds_waits(Backend* b) {
  const io::Clock& clock = b->node(0).clock();
  auto slow = co_await io::with_timeout(clock, 20ms, value_after(&clock, 1h, 1));
  EXPECT_FALSE(slow.has_value());
  auto fast = co_await io::with_timeout(clock, 1h, value_after(&clock, 1ms, 7));
  EXPECT_EQ(fast, std::optional<int>(7));
  absl::Status late = co_await io::with_timeout_status(clock, 10ms, status_after(&clock, 1h));
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
}

// with_timeout yields the task's result when it finishes first, and nothing
// (DeadlineExceeded for status tasks) when the timeout does.
TEST_P(IoConformance, WithTimeoutBoundsWaits) { run(with_timeout_bounds_waits(backend())); }

// ---------------------------------------------------------------------------
// Files.

Task<void> open_modes(Backend* b) {
  io::Disk& disk = b->node(0).disk();
  for (OpenMode mode : {OpenMode::kReadOnly, OpenMode::kReadWrite}) {
    absl::Status missing = co_await open_status(&disk, "f", mode);
    EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  }
  {
    CO_ASSERT_OK_AND_ASSIGN(auto file, co_await disk.open("f", OpenMode::kCreateExclusive));
    EXPECT_EQ(file->size(), 0u);
    CO_ASSERT_OK(co_await file->append(chain_of("abc", 2)));
    CO_ASSERT_OK(co_await file->close());
  }
  absl::Status exclusive = co_await open_status(&disk, "f", OpenMode::kCreateExclusive);
  EXPECT_EQ(exclusive.code(), absl::StatusCode::kAlreadyExists) << exclusive;
  {
    // kCreate opens an existing file without truncating it.
    CO_ASSERT_OK_AND_ASSIGN(auto file, co_await disk.open("f", OpenMode::kCreate));
    EXPECT_EQ(file->size(), 3u);
  }
  CO_ASSERT_OK_AND_ASSIGN(auto read_only, co_await disk.open("f", OpenMode::kReadOnly));
  EXPECT_EQ(read_only->size(), 3u);
  CO_ASSERT_OK_AND_ASSIGN(Buffer data, co_await read_only->read_at(0, 3));
  EXPECT_EQ(data.view(), "abc");
  absl::Status write = co_await read_only->write_at(0, chain_of("x", 1));
  EXPECT_FALSE(write.ok()) << "wrote through a read-only handle";
  CO_ASSERT_OK(co_await read_only->close());
  auto after_close = co_await read_only->read_at(0, 3);
  EXPECT_FALSE(after_close.ok()) << "read through a closed file";
  CO_ASSERT_OK_AND_ASSIGN(std::string contents, co_await read_file(&disk, "f"));
  EXPECT_EQ(contents, "abc");
}

// Each OpenMode requires, creates or refuses as io/disk.h says; a read-only
// or closed file refuses further calls.
TEST_P(IoConformance, OpenModes) { run(open_modes(backend())); }

Task<void> write_append_and_read_at(Backend* b) {
  io::Disk& disk = b->node(0).disk();
  CO_ASSERT_OK_AND_ASSIGN(auto file, co_await disk.open("log", OpenMode::kCreateExclusive));
  CO_ASSERT_OK(co_await file->write_at(0, chain_of("hello", 5)));
  CO_ASSERT_OK(co_await file->append(chain_of(" brave new world", 3)));  // several parts
  EXPECT_EQ(file->size(), 21u);
  CO_ASSERT_OK(co_await file->write_at(6, chain_of("BRAVE", 5)));  // overwrite inside
  EXPECT_EQ(file->size(), 21u);
  CO_ASSERT_OK(co_await file->datasync());
  CO_ASSERT_OK_AND_ASSIGN(Buffer all, co_await file->read_at(0, 21));
  EXPECT_EQ(all.view(), "hello BRAVE new world");
  CO_ASSERT_OK_AND_ASSIGN(Buffer tail, co_await file->read_at(16, 100));
  EXPECT_EQ(tail.view(), "world") << "a read across the end is short";
  CO_ASSERT_OK_AND_ASSIGN(Buffer at_end, co_await file->read_at(21, 5));
  EXPECT_TRUE(at_end.empty());
  CO_ASSERT_OK_AND_ASSIGN(Buffer beyond, co_await file->read_at(1000, 5));
  EXPECT_TRUE(beyond.empty());

  // A write past the end leaves a hole that reads as zeros.
  CO_ASSERT_OK_AND_ASSIGN(auto sparse, co_await disk.open("sparse", OpenMode::kCreate));
  CO_ASSERT_OK(co_await sparse->write_at(4096, chain_of("x", 1)));
  EXPECT_EQ(sparse->size(), 4097u);
  CO_ASSERT_OK(co_await sparse->append(chain_of("y", 1)));
  CO_ASSERT_OK_AND_ASSIGN(Buffer holey, co_await sparse->read_at(0, 10000));
  EXPECT_SAME_BYTES(std::string(holey.view()), std::string(4096, '\0') + "xy");
  CO_ASSERT_OK(co_await sparse->datasync());
}

// write_at, append and read_at place and return bytes exactly, reads past the
// end are short or empty, and holes read as zeros.
TEST_P(IoConformance, WriteAppendAndReadAt) { run(write_append_and_read_at(backend())); }

Task<void> truncate_shrinks_and_grows(Backend* b) {
  io::Disk& disk = b->node(0).disk();
  CO_ASSERT_OK_AND_ASSIGN(auto file, co_await disk.open("t", OpenMode::kCreate));
  const std::string bytes = pattern(100, 1);
  CO_ASSERT_OK(co_await file->write_at(0, chain_of(bytes, 100)));
  CO_ASSERT_OK(co_await file->truncate(10));
  EXPECT_EQ(file->size(), 10u);
  CO_ASSERT_OK_AND_ASSIGN(Buffer shrunk, co_await file->read_at(0, 100));
  EXPECT_EQ(shrunk.view(), bytes.substr(0, 10));
  CO_ASSERT_OK(co_await file->truncate(50));
  EXPECT_EQ(file->size(), 50u);
  CO_ASSERT_OK_AND_ASSIGN(Buffer grown, co_await file->read_at(0, 100));
  EXPECT_SAME_BYTES(std::string(grown.view()), bytes.substr(0, 10) + std::string(40, '\0'));
  CO_ASSERT_OK(co_await file->append(chain_of("end", 3)));
  EXPECT_EQ(file->size(), 53u) << "append writes at the truncated size";
  CO_ASSERT_OK(co_await file->datasync());
  CO_ASSERT_OK(co_await file->close());
  CO_ASSERT_OK_AND_ASSIGN(auto reopened, co_await disk.open("t", OpenMode::kReadOnly));
  EXPECT_EQ(reopened->size(), 53u);
}

// truncate() cuts bytes off and extends with zeros; size() and append()
// follow it.
TEST_P(IoConformance, TruncateShrinksAndGrows) { run(truncate_shrinks_and_grows(backend())); }

Task<void> writeback_hints_change_nothing(Backend* b) {
  io::Disk& disk = b->node(0).disk();
  CO_ASSERT_OK_AND_ASSIGN(auto file, co_await disk.open("w", OpenMode::kCreate));
  const std::string bytes = pattern(3 << 20, 7);
  CO_ASSERT_OK(co_await file->append(chain_of(bytes, bytes.size())));
  CO_ASSERT_OK(co_await file->start_writeback(0, 1 << 20));
  CO_ASSERT_OK(co_await file->start_writeback(1 << 20, bytes.size() - (1 << 20)));
  // Preallocation is optional, but where it exists it never shows.
  const absl::Status reserved = co_await file->preallocate(file->size(), 8 << 20);
  EXPECT_TRUE(reserved.ok() || absl::IsUnimplemented(reserved)) << reserved;
  EXPECT_EQ(file->size(), bytes.size());
  CO_ASSERT_OK(co_await file->append(chain_of("tail", 4)));
  EXPECT_EQ(file->size(), bytes.size() + 4) << "append writes at the end, not past the reservation";
  CO_ASSERT_OK(co_await file->truncate(file->size()));  // gives the reservation back
  CO_ASSERT_OK(co_await file->datasync());
  CO_ASSERT_OK(co_await file->close());
  CO_ASSERT_OK_AND_ASSIGN(auto reopened, co_await disk.open("w", OpenMode::kReadOnly));
  EXPECT_EQ(reopened->size(), bytes.size() + 4);
  CO_ASSERT_OK_AND_ASSIGN(Buffer back, co_await reopened->read_at(0, bytes.size() + 100));
  EXPECT_SAME_BYTES(std::string(back.view()), bytes + "tail");
}

// start_writeback() and preallocate() are hints: neither changes a file's
// size or bytes, and appends still land at the end.
TEST_P(IoConformance, WritebackHintsChangeNothing) { run(writeback_hints_change_nothing(backend())); }

Task<void> rename_replaces_and_remove_deletes(Backend* b) {
  io::Disk& disk = b->node(0).disk();
  CO_ASSERT_OK(co_await write_file(&disk, "a", "new contents"));
  CO_ASSERT_OK(co_await write_file(&disk, "b", "old"));
  CO_ASSERT_OK(co_await disk.rename("a", "b"));
  CO_ASSERT_OK(co_await disk.sync_dir(""));
  CO_ASSERT_OK_AND_ASSIGN(std::string b_contents, co_await read_file(&disk, "b"));
  EXPECT_EQ(b_contents, "new contents");
  absl::Status gone = co_await open_status(&disk, "a", OpenMode::kReadOnly);
  EXPECT_EQ(gone.code(), absl::StatusCode::kNotFound) << gone;
  CO_ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, co_await disk.list(""));
  EXPECT_EQ(names, (std::vector<std::string>{"b"}));
  absl::Status missing_rename = co_await disk.rename("a", "c");
  EXPECT_EQ(missing_rename.code(), absl::StatusCode::kNotFound) << missing_rename;

  CO_ASSERT_OK(co_await disk.remove("b"));
  CO_ASSERT_OK(co_await disk.sync_dir(""));
  CO_ASSERT_OK_AND_ASSIGN(std::vector<std::string> after, co_await disk.list(""));
  EXPECT_TRUE(after.empty());
  absl::Status missing_remove = co_await disk.remove("b");
  EXPECT_EQ(missing_remove.code(), absl::StatusCode::kNotFound) << missing_remove;
}

// rename() atomically replaces an existing target; remove() deletes; both
// report NotFound for a missing source.
TEST_P(IoConformance, RenameReplacesAndRemoveDeletes) {
  run(rename_replaces_and_remove_deletes(backend()));
}

Task<void> directories_list_sorted(Backend* b) {
  io::Disk& disk = b->node(0).disk();
  CO_ASSERT_OK(co_await disk.make_dir("d"));
  CO_ASSERT_OK(co_await disk.make_dir("d"));  // already there: fine
  CO_ASSERT_OK(co_await disk.make_dir("d/e"));
  for (const char* name : {"d/z", "d/a", "d/m", "d/e/x", "top"}) {
    CO_ASSERT_OK(co_await write_file(&disk, name, name));
  }
  CO_ASSERT_OK(co_await disk.sync_dir("d/e"));
  CO_ASSERT_OK(co_await disk.sync_dir("d"));
  CO_ASSERT_OK(co_await disk.sync_dir(""));
  CO_ASSERT_OK_AND_ASSIGN(std::vector<std::string> d, co_await disk.list("d"));
  EXPECT_EQ(d, (std::vector<std::string>{"a", "e", "m", "z"}));
  CO_ASSERT_OK_AND_ASSIGN(std::vector<std::string> e, co_await disk.list("d/e"));
  EXPECT_EQ(e, (std::vector<std::string>{"x"}));
  CO_ASSERT_OK_AND_ASSIGN(std::vector<std::string> root, co_await disk.list(""));
  EXPECT_EQ(root, (std::vector<std::string>{"d", "top"}));
  CO_ASSERT_OK_AND_ASSIGN(std::string x, co_await read_file(&disk, "d/e/x"));
  EXPECT_EQ(x, "d/e/x");

  absl::Status orphan = co_await disk.make_dir("p/q");
  EXPECT_EQ(orphan.code(), absl::StatusCode::kNotFound) << orphan;
  auto missing = co_await disk.list("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  CO_ASSERT_OK(co_await disk.remove("d/a"));
  CO_ASSERT_OK_AND_ASSIGN(std::vector<std::string> d_after, co_await disk.list("d"));
  EXPECT_EQ(d_after, (std::vector<std::string>{"e", "m", "z"}));
}

// make_dir nests, list() names a directory's entries sorted (files and
// directories alike), sync_dir() works at every level.
TEST_P(IoConformance, DirectoriesListSorted) { run(directories_list_sorted(backend())); }

Task<void> bad_paths_are_invalid(Backend* b) {
  io::Disk& disk = b->node(0).disk();
  CO_ASSERT_OK(co_await write_file(&disk, "ok", "x"));
  std::vector<absl::Status> results;
  for (const char* bad : {"../x", "/abs", "a/../b", "a//b", "./x"}) {
    results.push_back(co_await open_status(&disk, bad, OpenMode::kCreate));
    results.push_back(co_await disk.rename("ok", bad));
    results.push_back(co_await disk.rename(bad, "ok2"));
    results.push_back(co_await disk.remove(bad));
    results.push_back(co_await disk.make_dir(bad));
    results.push_back((co_await disk.list(bad)).status());
    results.push_back(co_await disk.sync_dir(bad));
  }
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].code(), absl::StatusCode::kInvalidArgument)
        << "call " << i << ": " << results[i];
  }
  CO_ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, co_await disk.list(""));
  EXPECT_EQ(names, (std::vector<std::string>{"ok"}));
}

// Paths with "..", a leading '/', or empty or "." components are refused
// with InvalidArgument by every Disk call, and nothing is touched.
TEST_P(IoConformance, BadPathsAreInvalid) { run(bad_paths_are_invalid(backend())); }

Task<void> large_file_round_trip(Backend* b) {
  io::Disk& disk = b->node(0).disk();
  constexpr size_t kBytes = 8 << 20;
  const std::string bytes = pattern(kBytes, 8);
  {
    CO_ASSERT_OK_AND_ASSIGN(auto file, co_await disk.open("big", OpenMode::kCreateExclusive));
    CO_ASSERT_OK(co_await file->append(chain_of(std::string_view(bytes).substr(0, 3 << 20),
                                                (1 << 20) + 7)));
    CO_ASSERT_OK(co_await file->write_at(3 << 20, chain_of(std::string_view(bytes).substr(3 << 20),
                                                           1 << 20)));
    EXPECT_EQ(file->size(), kBytes);
    CO_ASSERT_OK(co_await file->datasync());
    CO_ASSERT_OK(co_await file->close());
  }
  CO_ASSERT_OK_AND_ASSIGN(auto file, co_await disk.open("big", OpenMode::kReadOnly));
  EXPECT_EQ(file->size(), kBytes);
  CO_ASSERT_OK_AND_ASSIGN(Buffer whole, co_await file->read_at(0, kBytes));
  EXPECT_SAME_BYTES(std::string(whole.view()), bytes);
  constexpr size_t kChunk = 1'000'003;  // not a divisor: the last read is short
  for (size_t at = 0; at < kBytes; at += kChunk) {
    CO_ASSERT_OK_AND_ASSIGN(Buffer part, co_await file->read_at(at, kChunk));
    const std::string_view expected = std::string_view(bytes).substr(at, kChunk);
    CO_ASSERT_TRUE(part.view() == expected);
  }
}

// 8 MiB written in uneven vectored parts reads back byte-exact, whole and in
// chunks.
TEST_P(IoConformance, LargeFileRoundTrip) { run(large_file_round_trip(backend())); }

Task<void> note_listing(io::Disk* disk, std::vector<std::string>* names, absl::Status* status) {
  auto r = co_await disk->list("");
  *status = r.status();
  if (r.ok()) *names = std::move(*r);
}

Task<void> nodes_have_separate_disks(Backend* b) {
  io::Disk& disk0 = b->node(0).disk();
  CO_ASSERT_OK(co_await write_file(&disk0, "only-on-0", "x"));
  std::vector<std::string> names1 = {"not listed"};
  absl::Status status1 = absl::UnknownError("not run");
  co_await on_node(&b->node(1), note_listing(&b->node(1).disk(), &names1, &status1));
  CO_ASSERT_OK(status1);
  EXPECT_TRUE(names1.empty());
}

// Each node's Disk starts empty and is its own: node 1 does not see node 0's
// files.
TEST_P(IoConformance, NodesHaveSeparateDisks) { run(nodes_have_separate_disks(backend())); }

// ---------------------------------------------------------------------------
// TCP.

struct ClientReport {
  absl::Status status = absl::UnknownError("client did not finish");
  io::Address local;
  io::Address peer;
  std::string received;
  absl::Status second_read = absl::UnknownError("not read");
};

// Node 1's side of PingPongAndEof: connect, ping, expect pong, close.
Task<void> ping_client(io::Context* ctx, io::Address server, ClientReport* report) {
  CO_ASSERT_OK_AND_ASSIGN(auto conn, co_await ctx->network().connect(server));
  report->local = conn->local_address();
  report->peer = conn->peer_address();
  CO_ASSERT_OK(co_await write_string(conn.get(), "ping", 2));
  CO_ASSERT_OK_AND_ASSIGN(report->received, co_await read_exactly(conn.get(), 4));
  conn->close();
  report->status = absl::OkStatus();
}

Task<void> ping_pong_and_eof(Backend* b) {
  io::Context& ctx = b->node(0);
  const io::Address any = b->any_address(0);
  CO_ASSERT_OK_AND_ASSIGN(auto listener, co_await ctx.network().listen(any));
  const io::Address address = listener->address();
  EXPECT_NE(address.port, 0) << "port 0 must be replaced by the bound port";
  ClientReport report;
  io::TaskScope client(b->node(1).executor());
  client.spawn(ping_client(&b->node(1), address, &report));
  CO_ASSERT_OK_AND_ASSIGN(auto conn, co_await listener->accept());
  CO_ASSERT_OK_AND_ASSIGN(std::string ping, co_await read_exactly(conn.get(), 4));
  EXPECT_EQ(ping, "ping");
  CO_ASSERT_OK(co_await write_string(conn.get(), "pong", 4));
  CO_ASSERT_OK_AND_ASSIGN(Buffer eof, co_await conn->read_some(100));
  EXPECT_TRUE(eof.empty()) << "expected end of stream, got " << eof.size() << " bytes";
  CO_ASSERT_OK_AND_ASSIGN(Buffer eof_again, co_await conn->read_some(100));
  EXPECT_TRUE(eof_again.empty());
  co_await client.join();
  CO_ASSERT_OK(report.status);
  EXPECT_EQ(report.received, "pong");
  EXPECT_EQ(report.peer, address);
  EXPECT_EQ(conn->peer_address(), report.local);
  EXPECT_EQ(conn->local_address().port, address.port);
}

// Listening on port 0 binds a real port; a connection carries bytes both
// ways with consistent addresses; after the peer closes, read_some yields an
// empty Buffer (end of stream), again and again.
TEST_P(IoConformance, PingPongAndEof) { run(ping_pong_and_eof(backend())); }

// Node 1's side of LargePayloads: send one pattern, receive another.
Task<void> bulk_client(io::Context* ctx, io::Address server, size_t bytes, ClientReport* report) {
  CO_ASSERT_OK_AND_ASSIGN(auto conn, co_await ctx->network().connect(server));
  CO_ASSERT_OK(co_await write_string(conn.get(), pattern(bytes, 1), (1 << 20) + 13));
  CO_ASSERT_OK_AND_ASSIGN(report->received, co_await read_exactly(conn.get(), bytes));
  CO_ASSERT_OK_AND_ASSIGN(Buffer eof, co_await conn->read_some(1));
  EXPECT_TRUE(eof.empty());
  report->status = absl::OkStatus();
}

Task<void> large_payloads(Backend* b) {
  constexpr size_t kBytes = 16 << 20;
  const io::Address any = b->any_address(0);
  CO_ASSERT_OK_AND_ASSIGN(auto listener, co_await b->node(0).network().listen(any));
  ClientReport report;
  io::TaskScope client(b->node(1).executor());
  client.spawn(bulk_client(&b->node(1), listener->address(), kBytes, &report));
  CO_ASSERT_OK_AND_ASSIGN(auto conn, co_await listener->accept());
  CO_ASSERT_OK_AND_ASSIGN(std::string got, co_await read_exactly(conn.get(), kBytes));
  EXPECT_SAME_BYTES(got, pattern(kBytes, 1));
  const std::string reply = pattern(kBytes, 2);
  CO_ASSERT_OK(co_await conn->write_all(chain_of(reply, 3 << 20)));
  conn->close();
  co_await client.join();
  CO_ASSERT_OK(report.status);
  EXPECT_SAME_BYTES(report.received, reply);
}

// 16 MiB each way arrive byte-exact, whatever the write chain's shape and
// however the reader's read_some calls cut the stream.
TEST_P(IoConformance, LargePayloads) { run(large_payloads(backend())); }

Task<void> connect_and_report(io::Context* ctx, io::Address server, absl::Status* status) {
  auto conn = co_await io::with_timeout(ctx->clock(), 10s, ctx->network().connect(server));
  if (!conn.has_value()) {
    *status = absl::DeadlineExceededError("connect did not finish in 10 s");
  } else {
    *status = conn->status();
  }
}

Task<void> connect_to_closed_port(Backend* b) {
  const io::Address any = b->any_address(0);
  CO_ASSERT_OK_AND_ASSIGN(auto listener, co_await b->node(0).network().listen(any));
  const io::Address address = listener->address();
  listener->close();
  listener.reset();
  absl::Status status = absl::UnknownError("not run");
  co_await on_node(&b->node(1), connect_and_report(&b->node(1), address, &status));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
}

// Connecting to a port nobody listens on is Unavailable.
TEST_P(IoConformance, ConnectToClosedPortIsUnavailable) { run(connect_to_closed_port(backend())); }

struct ResetReport {
  absl::Status status = absl::UnknownError("client did not finish");
  absl::StatusOr<Buffer> read = absl::UnknownError("not read");
  absl::Status write = absl::UnknownError("not written");
};

// Node 1's side of PeerReset: send more than the server reads, wait for the
// server's abortive close, then read and write.
Task<void> reset_client(io::Context* ctx, io::Address server, io::Event* server_closed,
                        ResetReport* report) {
  CO_ASSERT_OK_AND_ASSIGN(auto conn, co_await ctx->network().connect(server));
  CO_ASSERT_OK(co_await write_string(conn.get(), pattern(1000, 3), 1000));
  co_await server_closed->wait();
  report->read = co_await conn->read_some(100);
  report->write = co_await write_string(conn.get(), pattern(1000, 4), 1000);
  report->status = absl::OkStatus();
}

Task<void> peer_reset(Backend* b) {
  const io::Address any = b->any_address(0);
  CO_ASSERT_OK_AND_ASSIGN(auto listener, co_await b->node(0).network().listen(any));
  io::Event server_closed;
  ResetReport report;
  io::TaskScope client(b->node(1).executor());
  client.spawn(reset_client(&b->node(1), listener->address(), &server_closed, &report));
  CO_ASSERT_OK_AND_ASSIGN(auto conn, co_await listener->accept());
  CO_ASSERT_OK_AND_ASSIGN(std::string head, co_await read_exactly(conn.get(), 10));
  EXPECT_EQ(head, pattern(1000, 3).substr(0, 10));
  conn->close();  // 990 bytes unread: an abortive close (a reset)
  server_closed.set();
  co_await client.join();
  CO_ASSERT_OK(report.status);
  // io/network.h: a reset peer is Unavailable. A backend whose close sends a
  // clean end of stream yields an empty Buffer instead; data never.
  if (report.read.ok()) {
    EXPECT_TRUE(report.read->empty()) << "read " << report.read->size() << " bytes after reset";
  } else {
    EXPECT_EQ(report.read.status().code(), absl::StatusCode::kUnavailable) << report.read.status();
    EXPECT_EQ(report.write.code(), absl::StatusCode::kUnavailable)
        << "a write on a reset connection: " << report.write;
  }
}

// A peer that closes with unread data resets the connection: the other side
// reads Unavailable (or end of stream) and writes fail Unavailable.
TEST_P(IoConformance, PeerResetIsUnavailableOrEof) { run(peer_reset(backend())); }

// Node 1's side of tests that only need an open connection: connect, write
// what `to_send` says when `go` is set, then hold the connection until the
// server closes it.
struct HoldingClient {
  io::Event go;
  std::string to_send;
  absl::Status status = absl::UnknownError("client did not finish");
};

Task<void> holding_client(io::Context* ctx, io::Address server, HoldingClient* client) {
  CO_ASSERT_OK_AND_ASSIGN(auto conn, co_await ctx->network().connect(server));
  co_await client->go.wait();
  CO_ASSERT_OK(co_await write_string(conn.get(), client->to_send, 2));
  CO_ASSERT_OK_AND_ASSIGN(Buffer eof, co_await conn->read_some(10));
  EXPECT_TRUE(eof.empty());
  client->status = absl::OkStatus();
}

struct ReadProbe {
  bool started = false;
  absl::StatusOr<Buffer> result = absl::UnknownError("read did not complete");
};

Task<void> probe_read(io::Connection* conn, ReadProbe* probe) {
  probe->started = true;
  probe->result = co_await conn->read_some(10);
}

Task<void> close_cancels_pending_read(Backend* b) {
  const io::Address any = b->any_address(0);
  CO_ASSERT_OK_AND_ASSIGN(auto listener, co_await b->node(0).network().listen(any));
  HoldingClient holder;
  holder.go.set();  // nothing to send
  io::TaskScope client(b->node(1).executor());
  client.spawn(holding_client(&b->node(1), listener->address(), &holder));
  CO_ASSERT_OK_AND_ASSIGN(auto conn, co_await listener->accept());
  ReadProbe probe;
  io::TaskScope reader(b->node(0).executor());
  reader.spawn(probe_read(conn.get(), &probe));
  for (int i = 0; i < 100 && !probe.started; ++i) co_await io::yield_now();
  co_await io::yield_now();
  CO_ASSERT_TRUE(probe.started);
  conn->close();
  conn->close();  // idempotent
  co_await reader.join();
  EXPECT_EQ(probe.result.status().code(), absl::StatusCode::kCancelled) << probe.result.status();
  auto later_read = co_await conn->read_some(10);
  EXPECT_EQ(later_read.status().code(), absl::StatusCode::kCancelled) << later_read.status();
  absl::Status later_write = co_await write_string(conn.get(), "x", 1);
  EXPECT_EQ(later_write.code(), absl::StatusCode::kCancelled) << later_write;
  co_await client.join();
  CO_ASSERT_OK(holder.status);
}

// close() makes a pending read_some on the same connection complete
// Cancelled, and later reads and writes fail Cancelled too; the peer sees
// end of stream.
TEST_P(IoConformance, CloseCancelsPendingRead) { run(close_cancels_pending_read(backend())); }

Task<void> cancelled_read_leaves_connection_usable(Backend* b) {
  const io::Address any = b->any_address(0);
  CO_ASSERT_OK_AND_ASSIGN(auto listener, co_await b->node(0).network().listen(any));
  HoldingClient holder;
  holder.to_send = "after";
  io::TaskScope client(b->node(1).executor());
  client.spawn(holding_client(&b->node(1), listener->address(), &holder));
  CO_ASSERT_OK_AND_ASSIGN(auto conn, co_await listener->accept());
  ReadProbe probe;
  {
    io::TaskScope reader(b->node(0).executor());
    reader.spawn(probe_read(conn.get(), &probe));
    for (int i = 0; i < 100 && !probe.started; ++i) co_await io::yield_now();
    co_await io::yield_now();
    CO_ASSERT_TRUE(probe.started);
  }  // the pending read is destroyed with its task
  EXPECT_EQ(probe.result.status().code(), absl::StatusCode::kUnknown) << "the read completed";
  co_await b->node(0).clock().sleep_for(5ms);  // the loop carries on normally
  holder.go.set();
  CO_ASSERT_OK_AND_ASSIGN(std::string got, co_await read_exactly(conn.get(), 5));
  EXPECT_EQ(got, "after");
  conn->close();
  co_await client.join();
  CO_ASSERT_OK(holder.status);
}

// Destroying a task while its read_some is pending cancels just that read:
// the connection, timers and the loop keep working, and later bytes are
// delivered to the next read.
TEST_P(IoConformance, CancelledReadLeavesConnectionUsable) {
  run(cancelled_read_leaves_connection_usable(backend()));
}

Task<void> echo_until_eof(std::unique_ptr<io::Connection> conn) {
  for (;;) {
    CO_ASSERT_OK_AND_ASSIGN(Buffer data, co_await conn->read_some(64 << 10));
    if (data.empty()) co_return;
    CO_ASSERT_OK(co_await conn->write_all(BufferChain(data)));
  }
}

Task<void> accept_and_echo(io::Listener* listener, int connections, io::TaskScope* handlers) {
  for (int i = 0; i < connections; ++i) {
    CO_ASSERT_OK_AND_ASSIGN(auto conn, co_await listener->accept());
    handlers->spawn(echo_until_eof(std::move(conn)));
  }
}

Task<void> echo_client(io::Context* ctx, io::Address server, int index, int* ok_count) {
  CO_ASSERT_OK_AND_ASSIGN(auto conn, co_await ctx->network().connect(server));
  const std::string message =
      fmt::format("client {} says ", index) + pattern(1000 + 37 * static_cast<size_t>(index),
                                                      static_cast<uint32_t>(index));
  CO_ASSERT_OK(co_await write_string(conn.get(), message, 700));
  CO_ASSERT_OK_AND_ASSIGN(std::string echoed, co_await read_exactly(conn.get(), message.size()));
  EXPECT_SAME_BYTES(echoed, message);
  if (echoed == message) ++*ok_count;
  conn->close();
}

Task<void> hundred_concurrent_echoes(Backend* b) {
  constexpr int kClients = 100;
  const io::Address any = b->any_address(0);
  CO_ASSERT_OK_AND_ASSIGN(auto listener, co_await b->node(0).network().listen(any));
  const io::Address address = listener->address();
  io::TaskScope handlers(b->node(0).executor());
  io::TaskScope acceptor(b->node(0).executor());
  acceptor.spawn(accept_and_echo(listener.get(), kClients, &handlers));
  int ok_count = 0;
  {
    io::TaskScope clients(b->node(1).executor());
    for (int i = 0; i < kClients; ++i) {
      clients.spawn(echo_client(&b->node(1), address, i, &ok_count));
    }
    co_await clients.join();
  }
  co_await acceptor.join();
  co_await handlers.join();
  EXPECT_EQ(ok_count, kClients);
}

// 100 clients connect at once and each gets back exactly its own message
// from an echo server handling them concurrently.
TEST_P(IoConformance, HundredConcurrentEchoes) { run(hundred_concurrent_echoes(backend())); }

// ---------------------------------------------------------------------------

INSTANTIATE_TEST_SUITE_P(Backends, IoConformance,
                         ::testing::Values(BackendFactory{"sim", make_sim_backend},
                                           BackendFactory{"uring", make_uring_backend},
                                           BackendFactory{"epoll", make_posix_backend}),
                         [](const ::testing::TestParamInfo<BackendFactory>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace brook::testing
