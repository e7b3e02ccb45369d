// io/disk.h
//
// Disk and File: all file-system access of logic code. A Disk is rooted at a
// directory (a node's data directory); every path is relative to that root,
// uses '/' separators and may not contain "..". Implemented by io/uring,
// io/posix and the simulator (whose disk loses or tears unsynced writes on a
// crash, and injects EIO, ENOSPC, corruption and latency).
//
// Durability contract (the POSIX one, which the simulator enforces):
// - Bytes written to a File are durable only after datasync() on it returns.
// - A created, renamed or removed name is durable only after sync_dir() on its
//   parent directory returns.
// Errors: NotFound, AlreadyExists, ResourceExhausted (disk full, quota or
// file size limit), DataLoss (detected corruption), Internal (EIO),
// InvalidArgument (bad path).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/task.h"

namespace brook::io {

enum class OpenMode {
  kReadOnly,         // must exist
  kReadWrite,        // must exist
  kCreate,           // read-write; created empty when missing
  kCreateExclusive,  // read-write; fails with AlreadyExists when present
};

// One open file. Single writer: the File tracks its own size, so size() needs
// no system call and append() writes at the current end.
class File {
 public:
  virtual ~File() = default;

  // Reads up to `length` bytes at `offset`; fewer only at end of file.
  virtual Task<absl::StatusOr<Buffer>> read_at(uint64_t offset, size_t length) = 0;
  // Writes all of `data` at `offset`, extending the file when needed.
  virtual Task<absl::Status> write_at(uint64_t offset, BufferChain data) = 0;
  // Writes all of `data` at size().
  virtual Task<absl::Status> append(BufferChain data) = 0;
  // Makes every byte written so far durable.
  virtual Task<absl::Status> datasync() = 0;
  // A hint: asks the kernel to start writing [offset, offset + length) to
  // the device now, without waiting for it (sync_file_range with
  // SYNC_FILE_RANGE_WRITE). It promises no durability — only datasync()
  // does — but keeps dirty data from piling up, so a later datasync, or the
  // kernel's own writeback, has little left to do at once. Backends without
  // such a call do nothing.
  virtual Task<absl::Status> start_writeback(uint64_t offset, uint64_t length) {
    (void)offset;
    (void)length;
    co_return absl::OkStatus();
  }
  // A hint: reserves device blocks for [offset, offset + length) without
  // changing size() (fallocate with FALLOC_FL_KEEP_SIZE), so that appends
  // there find their blocks allocated; truncate(size()) gives back what is
  // left past the end. Unimplemented where the backend has no such call.
  virtual Task<absl::Status> preallocate(uint64_t offset, uint64_t length) {
    (void)offset;
    (void)length;
    co_return absl::UnimplementedError("preallocate");
  }
  virtual Task<absl::Status> truncate(uint64_t size) = 0;
  virtual uint64_t size() const = 0;
  // Releases the file. Further calls fail. Also done by the destructor.
  virtual Task<absl::Status> close() = 0;
};

class Disk {
 public:
  virtual ~Disk() = default;

  virtual Task<absl::StatusOr<std::unique_ptr<File>>> open(std::string path, OpenMode mode) = 0;
  // Atomically replaces `to` with `from`.
  virtual Task<absl::Status> rename(std::string from, std::string to) = 0;
  virtual Task<absl::Status> remove(std::string path) = 0;
  // Creates a directory (parents must exist); OK when it already exists.
  virtual Task<absl::Status> make_dir(std::string path) = 0;
  // Names in a directory ("" is the root), sorted, without "." and "..".
  virtual Task<absl::StatusOr<std::vector<std::string>>> list(std::string dir) = 0;
  // Makes the directory's entries (creates, renames, removes) durable.
  virtual Task<absl::Status> sync_dir(std::string dir) = 0;
};

// Validates a Disk-relative path: non-empty components, no "..", no leading
// '/'. The empty path names the root.
absl::Status validate_disk_path(const std::string& path);

}  // namespace brook::io
