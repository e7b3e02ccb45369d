// io/uring/disk.h
//
// Disk on io_uring, rooted at a real directory. Opens, reads, large
// vectored writes, datasyncs, renames, removes and directory creation are
// ring operations resolved relative to the root's descriptor (openat-style),
// so the root can be moved without confusing open files. Writes of up to
// DiskOptions::inline_write_bytes_max, truncation, listing and the size of a
// freshly opened file use plain system calls (they are cheap, and liburing
// 2.3 has no ring op for some of them).
//
// Contract: io/disk.h. Errors map through disk_error() in io/uring/errors.h.
// Calls on a closed File, writes through a read-only one, and opening
// anything but a regular file fail with FailedPrecondition.
// Owned by the node; uses its Loop, which must outlive it and its Files.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/disk.h"
#include "io/uring/loop.h"

namespace brook::io::uring {

// Largest single read_at; larger reads are a caller bug reported as
// InvalidArgument rather than a giant allocation.
inline constexpr size_t kReadBytesMax = size_t{256} << 20;
// Entries one list() returns at most.
inline constexpr size_t kListEntriesMax = size_t{1} << 20;

// Writes of at most this many bytes are made on the loop's thread with
// pwritev(2) instead of through the ring (see DiskOptions).
inline constexpr size_t kInlineWriteBytesDefault = size_t{1} << 20;

struct DiskOptions {
  // Buffered writes only copy into the page cache, but io_uring cannot
  // issue them without blocking on ext4 (it refuses RWF_NOWAIT for
  // buffered writes), so the ring hands each one to an io-wq worker
  // thread: a wake-up and a context switch per write, which costs more
  // than the copy itself (a 16 KiB append: 7–9 µs with pwrite, 12–21 µs
  // through the ring). Writes up to this size are therefore made inline,
  // as the posix backend makes them; larger ones, which may wait longer
  // for memory or dirty-page throttling, still go through the ring so the
  // loop keeps serving sockets meanwhile. 0 sends every write through the
  // ring.
  size_t inline_write_bytes_max = kInlineWriteBytesDefault;
};

class Disk final : public io::Disk {
 public:
  // Creates `root` (one level) when missing. A root that cannot be opened
  // makes every call fail with the reason.
  Disk(Loop& loop, std::string root, DiskOptions options = {});
  Disk(const Disk&) = delete;
  Disk& operator=(const Disk&) = delete;
  ~Disk() override = default;

  Task<absl::StatusOr<std::unique_ptr<File>>> open(std::string path, OpenMode mode) override;
  Task<absl::Status> rename(std::string from, std::string to) override;
  Task<absl::Status> remove(std::string path) override;
  Task<absl::Status> make_dir(std::string path) override;
  Task<absl::StatusOr<std::vector<std::string>>> list(std::string dir) override;
  Task<absl::Status> sync_dir(std::string dir) override;

  const std::string& root() const { return root_; }

 private:
  Loop* loop_;
  std::string root_;
  DiskOptions options_;
  SharedFd root_fd_;
  absl::Status root_status_;
};

}  // namespace brook::io::uring
