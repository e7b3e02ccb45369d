// io/uring/disk.h
//
// Disk on io_uring, rooted at a real directory. Opens, reads, vectored
// writes, datasyncs, renames, removes and directory creation are ring
// operations resolved relative to the root's descriptor (openat-style), so
// the root can be moved without confusing open files. Truncation, listing
// and the size of a freshly opened file use plain system calls (they are
// cheap and liburing 2.3 has no ring op for some of them).
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

class Disk final : public io::Disk {
 public:
  // Creates `root` (one level) when missing. A root that cannot be opened
  // makes every call fail with the reason.
  Disk(Loop& loop, std::string root);
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
  SharedFd root_fd_;
  absl::Status root_status_;
};

}  // namespace brook::io::uring
