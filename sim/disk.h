// sim/disk.h
//
// SimDisk: the simulator's Disk. One per simulated node; it outlives the
// node's processes (a restarted node gets the same SimDisk back) and is used
// only on the simulation's single thread. Files and directories live in
// memory. Every choice it makes (faults, latencies, what a crash keeps) comes
// from the io::Random it was given, so a run is a pure function of its seed.
//
// Contract: io/disk.h, exactly (paths checked with io::validate_disk_path,
// sorted list(), kCreateExclusive, the POSIX durability rules). On top of it
// this file defines what the simulated hardware does. The model:
//
// Data. Each file has durable contents and a list of pending writes (write_at,
// append, truncate) made since its last datasync, in order. Reads see the
// current contents: durable contents with every pending write applied, as a
// page cache would serve them. datasync() makes every pending write of that
// file durable, including truncations and the file size.
//
// Names. create (open with kCreate/kCreateExclusive on a missing file),
// make_dir, rename and remove change the current namespace at once and append
// an operation to one ordered list of pending directory operations (the
// journal of a journaling file system). sync_dir(d) makes durable every
// pending operation up to and including the last one that changed directory
// d (identified by the directory itself, so a directory renamed after the
// operation still counts). That is the POSIX guarantee plus journal order: a
// sync of one directory may also commit earlier operations on other
// directories, as ext4 and XFS do; code that relies on that is not caught.
//
// crash() is a power loss:
// - For each file, a random prefix of its pending writes persists; the write
//   at the cut may be torn at kSectorBytes granularity (each sector it covers
//   independently keeps its old or takes its new bytes; the size grows to the
//   end of the last persisted sector); every later write is lost.
// - A random prefix of the pending directory operations persists, in order;
//   the rest is lost. A created file whose directory was never synced may
//   vanish (with its data); an unsynced rename may be undone; an unsynced
//   remove may be undone.
// - With probability 1 - crash_lose_unsynced_probability (per file, and once
//   for the directory journal) nothing pending is lost: the operating system
//   happened to write everything back before the power went.
// - Every File opened before the crash becomes stale: its calls (close too)
//   fail with FailedPrecondition. A generation counter tells stale handles
//   apart; they may outlive the crash and the SimDisk itself.
// kill_process() is a process death without power loss: handles go stale,
// nothing pending is lost (the page cache survives a process).
//
// Injected faults (DiskFaults, all off by default):
// - read errors: read_at fails with Internal (EIO); a retry may succeed.
// - write errors: write_at, append and truncate fail with Internal, nothing
//   written.
// - metadata errors: open, rename, remove, make_dir and list fail with
//   Internal, nothing changed.
// - datasync errors (fsyncgate): a failed datasync makes a random prefix of the
//   pending writes durable (the one at the cut may be torn) and forgets the
//   rest: they stay visible to reads (the page cache keeps them) but are never
//   written back, so a later datasync succeeds without them and a crash loses
//   them.
// - sync_dir errors: a failed sync_dir makes a random prefix of the pending
//   directory operations durable; the rest stay pending (and may still be
//   lost at a crash).
// - read corruption: read_at returns the right length with one bit flipped
//   (silent corruption on the read path; the stored bytes are intact).
// - bit rot at rest: inject_bit_rot() flips a stored bit for good.
// - capacity: a write, append or truncate that would make the sum of the
//   current sizes of live files exceed capacity_bytes fails with
//   ResourceExhausted (ENOSPC), nothing written. Live files are those named
//   in the current namespace or still open.
// - latency: every operation except close waits a uniform random time in
//   [latency_min, latency_max] on the awaiting task's executor, then takes
//   effect atomically. An operation cancelled while it waits has no effect.
//   With latency_max == 0 operations complete without suspending.
//
// Other error codes: NotFound (missing file, directory or parent; a parent
// that is a file; list or sync_dir of a file: ENOTDIR, as io/uring maps it),
// AlreadyExists (kCreateExclusive on an existing name,
// make_dir over a file), FailedPrecondition (opening a directory as a file,
// removing a non-empty directory, rename between a file and a directory or
// onto a non-empty directory, writing through a kReadOnly handle, any call on
// a closed or stale handle), InvalidArgument (bad path, the root where a name
// is needed, renaming a directory into itself, a read or write larger than
// kIoBytesMax), OutOfRange (a file larger than kFileBytesMax).
//
// Bounded memory: a file with more than kPendingWritesMax pending writes, or a
// journal with more than kPendingDirOpsMax operations, has its oldest made
// durable (background write-back). Files removed from every namespace and
// closed are freed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "io/disk.h"
#include "io/random.h"
#include "io/time.h"

namespace brook::sim {

// Torn writes happen at this granularity (the classic atomic sector).
inline constexpr uint64_t kSectorBytes = 512;
// Largest single read_at or write (as io/uring allows).
inline constexpr size_t kIoBytesMax = size_t{256} << 20;
// Largest simulated file: the contents live in memory.
inline constexpr uint64_t kFileBytesMax = uint64_t{4} << 30;
// Background write-back thresholds (see the header comment).
inline constexpr size_t kPendingWritesMax = 4096;
inline constexpr size_t kPendingDirOpsMax = 4096;

struct DiskFaults {
  // Probabilities per operation, in [0, 1].
  double read_error_probability = 0;
  double write_error_probability = 0;
  double metadata_error_probability = 0;
  double sync_error_probability = 0;      // datasync
  double sync_dir_error_probability = 0;
  double read_corruption_probability = 0;
  // ENOSPC threshold over the current sizes of live files.
  uint64_t capacity_bytes = UINT64_MAX;
  // Each operation waits uniformly in [latency_min, latency_max].
  io::Duration latency_min{0};
  io::Duration latency_max{0};
  // On crash, per file (and once for the directory journal): the probability
  // that pending operations are subject to loss (random prefix, torn cut);
  // otherwise they all persist.
  double crash_lose_unsynced_probability = 1;
};

// Counters of what the fault model did, so sweeps can tell that each fault
// class actually fired.
struct DiskStats {
  uint64_t read_errors = 0;
  uint64_t write_errors = 0;
  uint64_t metadata_errors = 0;
  uint64_t sync_errors = 0;
  uint64_t sync_dir_errors = 0;
  uint64_t read_corruptions = 0;
  uint64_t no_space_errors = 0;
  uint64_t crashes = 0;
  uint64_t lost_writes = 0;    // pending writes dropped by crashes and failed syncs
  uint64_t torn_writes = 0;    // writes cut at a crash or failed sync
  uint64_t lost_dir_ops = 0;   // pending directory operations dropped by crashes
  uint64_t written_back = 0;   // pending operations made durable by write-back
};

// Which state the inspection calls read.
enum class DiskView {
  kCurrent,  // what reads and list() see now
  kDurable,  // what a crash that loses everything pending would leave
};

class SimDisk final : public io::Disk {
 public:
  // Latency timers run on the executor of the task awaiting each operation,
  // so no Clock is needed here.
  // REQUIRES: faults are valid (probabilities in [0, 1], min <= max).
  explicit SimDisk(io::Random random, DiskFaults faults = {});
  ~SimDisk() override;
  SimDisk(const SimDisk&) = delete;
  SimDisk& operator=(const SimDisk&) = delete;

  io::Task<absl::StatusOr<std::unique_ptr<io::File>>> open(std::string path,
                                                           io::OpenMode mode) override;
  io::Task<absl::Status> rename(std::string from, std::string to) override;
  io::Task<absl::Status> remove(std::string path) override;
  io::Task<absl::Status> make_dir(std::string path) override;
  io::Task<absl::StatusOr<std::vector<std::string>>> list(std::string dir) override;
  io::Task<absl::Status> sync_dir(std::string dir) override;

  // REQUIRES: faults are valid. Takes effect for operations applied later.
  void set_faults(const DiskFaults& faults);
  const DiskFaults& faults() const;

  // Power loss (see the header comment).
  void crash();
  // Process death: handles go stale, nothing is lost.
  void kill_process();
  // Flips one random bit of the stored byte at `offset` of file `path`, in
  // both its durable and current contents. NotFound / OutOfRange otherwise.
  absl::Status inject_bit_rot(const std::string& path, uint64_t offset);
  // Transient corruption: the next read of file `path` that covers byte
  // `offset` returns it XORed with `mask`; the stored bytes stay intact.
  void corrupt_next_read(const std::string& path, uint64_t offset, uint8_t mask);

  // Inspection for tests and checkers: no faults, no latency.
  // Every file path with its contents.
  std::map<std::string, std::string> files(DiskView view) const;
  // Every directory path (without the root), sorted.
  std::vector<std::string> directories(DiskView view) const;
  std::optional<std::string> contents(DiskView view, const std::string& path) const;
  // Pending writes of a file (0 when missing) and pending directory operations.
  size_t pending_writes(const std::string& path) const;
  size_t pending_dir_ops() const;
  // Sum of the current sizes of live files (what capacity_bytes limits).
  uint64_t used_bytes() const;
  // Bumped by crash() and kill_process().
  uint64_t generation() const;
  const DiskStats& stats() const;

  struct State;  // shared with open files (defined in disk.cc)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace brook::sim
