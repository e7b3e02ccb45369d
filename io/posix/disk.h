// io/posix/disk.h
//
// Disk: files under a root directory with plain blocking system calls
// (pread, pwritev, fdatasync, ftruncate, renameat, unlinkat, mkdirat,
// readdir, fsync of a directory), made on the loop thread. Every operation
// completes before its Task returns; nothing suspends.
//
// This is the fallback's trade-off: while a call blocks (an fsync on a busy
// disk can take tens of milliseconds) the whole loop, and with it every
// connection and timer of the node, waits. It is meant for machines where
// io_uring is refused, for tools and for tests; production uses io/uring.
//
// Paths are checked with io::validate_disk_path and resolved against the
// root directory's descriptor (the *at calls), never against the process's
// working directory. errno maps to status codes as io/disk.h says: ENOENT is
// NotFound, EEXIST AlreadyExists, ENOSPC and EDQUOT ResourceExhausted, EIO
// and everything else Internal (with the strerror text).
//
// Not thread-safe: used on the Loop's thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/disk.h"
#include "io/posix/loop.h"

namespace brook::io::posix {

// Entries list() returns at most; a larger directory is ResourceExhausted.
inline constexpr size_t kListEntriesMax = 1 << 20;
// Bytes one read_at may return, so a bad length cannot exhaust memory.
inline constexpr size_t kReadBytesMax = size_t{1} << 30;

class Disk final : public io::Disk {
 public:
  // `root` must be an existing directory; when it cannot be opened every
  // operation fails with the reason.
  Disk(Loop& loop, std::string root);
  ~Disk() override;
  Disk(const Disk&) = delete;
  Disk& operator=(const Disk&) = delete;

  Task<absl::StatusOr<std::unique_ptr<File>>> open(std::string path, OpenMode mode) override;
  Task<absl::Status> rename(std::string from, std::string to) override;
  // Removes a file or an empty directory.
  Task<absl::Status> remove(std::string path) override;
  Task<absl::Status> make_dir(std::string path) override;
  Task<absl::StatusOr<std::vector<std::string>>> list(std::string dir) override;
  Task<absl::Status> sync_dir(std::string dir) override;

  const std::string& root() const { return root_; }

 private:
  absl::StatusOr<std::unique_ptr<File>> open_now(const std::string& path, OpenMode mode);
  absl::Status rename_now(const std::string& from, const std::string& to);
  absl::Status remove_now(const std::string& path);
  absl::Status make_dir_now(const std::string& path);
  absl::StatusOr<std::vector<std::string>> list_now(const std::string& dir);
  absl::Status sync_dir_now(const std::string& dir);
  absl::Status root_status() const;

  [[maybe_unused]] Loop* loop_;  // the shape shared with io/uring; calls here block
  std::string root_;
  int root_fd_ = -1;
  int root_errno_ = 0;
};

}  // namespace brook::io::posix
