// io/posix/disk.cc
#include "io/posix/disk.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "io/errno_status.h"
#include "io/status.h"

namespace brook::io::posix {
namespace {

// Buffers handed to one pwritev (IOV_MAX is 1024 on Linux).
constexpr size_t kIovecsPerCallMax = 64;
constexpr mode_t kFileMode = 0644;
constexpr mode_t kDirMode = 0755;

// A path naming an entry below the root (not the root itself).
absl::Status validate_entry_path(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("empty path names the disk root");
  return validate_disk_path(path);
}

// The root as the *at calls spell it.
const char* at_path(const std::string& path) { return path.empty() ? "." : path.c_str(); }

class PosixFile final : public File {
 public:
  PosixFile(int fd, uint64_t size, std::string path, bool writable)
      : fd_(fd), size_(size), path_(std::move(path)), writable_(writable) {
    BROOK_ASSERT_GE(fd_, 0);
  }
  ~PosixFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Task<absl::StatusOr<Buffer>> read_at(uint64_t offset, size_t length) override {
    co_return read_now(offset, length);
  }
  Task<absl::Status> write_at(uint64_t offset, BufferChain data) override {
    co_return write_now(offset, std::move(data));
  }
  Task<absl::Status> append(BufferChain data) override {
    co_return write_now(size_, std::move(data));
  }
  Task<absl::Status> datasync() override { co_return datasync_now(); }
  Task<absl::Status> start_writeback(uint64_t offset, uint64_t length) override {
    CO_RETURN_IF_ERROR(check_writable());
    if (::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(length),
                          SYNC_FILE_RANGE_WRITE) != 0) {
      co_return disk_error(errno, fmt::format("sync_file_range {}", path_));
    }
    co_return absl::OkStatus();
  }
  Task<absl::Status> preallocate(uint64_t offset, uint64_t length) override {
    CO_RETURN_IF_ERROR(check_writable());
    if (::fallocate(fd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                    static_cast<off_t>(length)) != 0) {
      co_return disk_error(errno, fmt::format("fallocate {}", path_));
    }
    co_return absl::OkStatus();
  }
  Task<absl::Status> truncate(uint64_t size) override { co_return truncate_now(size); }
  uint64_t size() const override { return size_; }
  Task<absl::Status> close() override { co_return close_now(); }

 private:
  absl::Status check_open() const {
    if (fd_ < 0) return absl::FailedPreconditionError(fmt::format("file closed: {}", path_));
    return absl::OkStatus();
  }
  absl::Status check_writable() const {
    RETURN_IF_ERROR(check_open());
    if (!writable_) return absl::FailedPreconditionError(fmt::format("read-only: {}", path_));
    // After a failed fdatasync the kernel may have dropped the dirty pages;
    // a later sync could succeed without them, so the file stays failed.
    if (!sync_status_.ok()) return sync_status_;
    return absl::OkStatus();
  }

  absl::StatusOr<Buffer> read_now(uint64_t offset, size_t length);
  absl::Status write_now(uint64_t offset, BufferChain data);
  absl::Status datasync_now();
  absl::Status truncate_now(uint64_t size);
  absl::Status close_now();

  int fd_;
  uint64_t size_;
  std::string path_;
  bool writable_;
  absl::Status sync_status_;
};

absl::StatusOr<Buffer> PosixFile::read_now(uint64_t offset, size_t length) {
  RETURN_IF_ERROR(check_open());
  if (length > kReadBytesMax) {
    return absl::InvalidArgumentError(fmt::format("read of {} bytes from {}", length, path_));
  }
  // The file's real end bounds the allocation (another handle may have
  // written past this one's size).
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return disk_error(errno, fmt::format("fstat {}", path_));
  const uint64_t end = static_cast<uint64_t>(st.st_size);
  if (offset >= end || length == 0) return Buffer();
  const size_t want = static_cast<size_t>(std::min<uint64_t>(length, end - offset));
  Buffer buffer = Buffer::allocate(want);
  size_t done = 0;
  while (done < want) {
    const ssize_t n = ::pread(fd_, buffer.mutable_data() + done, want - done,
                              static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return disk_error(errno, fmt::format("read {}", path_));
    }
    if (n == 0) break;  // the file shrank meanwhile: a short read
    done += static_cast<size_t>(n);
  }
  buffer.trim_back(want - done);
  return buffer;
}

absl::Status PosixFile::write_now(uint64_t offset, BufferChain data) {
  RETURN_IF_ERROR(check_writable());
  uint64_t position = offset;
  while (!data.empty()) {
    std::array<iovec, kIovecsPerCallMax> iov;
    size_t count = 0;
    for (const Buffer& part : data.parts()) {
      if (count == iov.size()) break;
      iov[count++] = iovec{const_cast<std::byte*>(part.data()), part.size()};
    }
    const ssize_t n = ::pwritev(fd_, iov.data(), static_cast<int>(count),
                                static_cast<off_t>(position));
    if (n < 0) {
      if (errno == EINTR) continue;
      return disk_error(errno, fmt::format("write {}", path_));
    }
    if (n == 0) return absl::InternalError(fmt::format("write {}: no progress", path_));
    data.consume(static_cast<size_t>(n));
    position += static_cast<uint64_t>(n);
    size_ = std::max(size_, position);
  }
  return absl::OkStatus();
}

absl::Status PosixFile::datasync_now() {
  RETURN_IF_ERROR(check_writable());
  if (::fdatasync(fd_) != 0) {
    sync_status_ = disk_error(errno, fmt::format("fdatasync {}", path_));
    return sync_status_;
  }
  return absl::OkStatus();
}

absl::Status PosixFile::truncate_now(uint64_t size) {
  RETURN_IF_ERROR(check_writable());
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    return disk_error(errno, fmt::format("truncate {}", path_));
  }
  size_ = size;
  return absl::OkStatus();
}

absl::Status PosixFile::close_now() {
  if (fd_ < 0) return absl::OkStatus();  // idempotent
  const int rc = ::close(std::exchange(fd_, -1));  // released even on error
  if (rc != 0 && errno != EINTR) return disk_error(errno, fmt::format("close {}", path_));
  return absl::OkStatus();
}

int open_flags(OpenMode mode) {
  switch (mode) {
    case OpenMode::kReadOnly:
      return O_RDONLY;
    case OpenMode::kReadWrite:
      return O_RDWR;
    case OpenMode::kCreate:
      return O_RDWR | O_CREAT;
    case OpenMode::kCreateExclusive:
      return O_RDWR | O_CREAT | O_EXCL;
  }
  BROOK_UNREACHABLE();
}

}  // namespace

Disk::Disk(Loop& loop, std::string root) : loop_(&loop), root_(std::move(root)) {
  root_fd_ = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd_ < 0) root_errno_ = errno;
}

Disk::~Disk() {
  if (root_fd_ >= 0) ::close(root_fd_);
}

absl::Status Disk::root_status() const {
  if (root_fd_ >= 0) return absl::OkStatus();
  return disk_error(root_errno_, fmt::format("disk root {}", root_));
}

Task<absl::StatusOr<std::unique_ptr<File>>> Disk::open(std::string path, OpenMode mode) {
  co_return open_now(path, mode);
}

Task<absl::Status> Disk::rename(std::string from, std::string to) {
  co_return rename_now(from, to);
}

Task<absl::Status> Disk::remove(std::string path) { co_return remove_now(path); }

Task<absl::Status> Disk::make_dir(std::string path) { co_return make_dir_now(path); }

Task<absl::StatusOr<std::vector<std::string>>> Disk::list(std::string dir) {
  co_return list_now(dir);
}

Task<absl::Status> Disk::sync_dir(std::string dir) { co_return sync_dir_now(dir); }

absl::StatusOr<std::unique_ptr<File>> Disk::open_now(const std::string& path, OpenMode mode) {
  RETURN_IF_ERROR(validate_entry_path(path));
  RETURN_IF_ERROR(root_status());
  const int fd = ::openat(root_fd_, path.c_str(), open_flags(mode) | O_CLOEXEC, kFileMode);
  if (fd < 0) return disk_error(errno, fmt::format("open {}", path));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return disk_error(err, fmt::format("fstat {}", path));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(fmt::format("not a regular file: {}", path));
  }
  return std::unique_ptr<File>(std::make_unique<PosixFile>(
      fd, static_cast<uint64_t>(st.st_size), path, mode != OpenMode::kReadOnly));
}

absl::Status Disk::rename_now(const std::string& from, const std::string& to) {
  RETURN_IF_ERROR(validate_entry_path(from));
  RETURN_IF_ERROR(validate_entry_path(to));
  RETURN_IF_ERROR(root_status());
  if (::renameat(root_fd_, from.c_str(), root_fd_, to.c_str()) != 0) {
    return disk_error(errno, fmt::format("rename {} to {}", from, to));
  }
  return absl::OkStatus();
}

absl::Status Disk::remove_now(const std::string& path) {
  RETURN_IF_ERROR(validate_entry_path(path));
  RETURN_IF_ERROR(root_status());
  int rc = ::unlinkat(root_fd_, path.c_str(), 0);
  if (rc != 0 && errno == EISDIR) rc = ::unlinkat(root_fd_, path.c_str(), AT_REMOVEDIR);
  if (rc != 0) return disk_error(errno, fmt::format("remove {}", path));
  return absl::OkStatus();
}

absl::Status Disk::make_dir_now(const std::string& path) {
  RETURN_IF_ERROR(validate_disk_path(path));
  RETURN_IF_ERROR(root_status());
  if (path.empty()) return absl::OkStatus();  // the root exists
  if (::mkdirat(root_fd_, path.c_str(), kDirMode) == 0) return absl::OkStatus();
  const int err = errno;
  struct stat st {};
  if (err == EEXIST && ::fstatat(root_fd_, path.c_str(), &st, 0) == 0 && S_ISDIR(st.st_mode)) {
    return absl::OkStatus();
  }
  return disk_error(err, fmt::format("make_dir {}", path));
}

absl::StatusOr<std::vector<std::string>> Disk::list_now(const std::string& dir) {
  RETURN_IF_ERROR(validate_disk_path(dir));
  RETURN_IF_ERROR(root_status());
  const int fd = ::openat(root_fd_, at_path(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return disk_error(errno, fmt::format("list {}", dir));
  DIR* stream = ::fdopendir(fd);
  if (stream == nullptr) {
    const int err = errno;
    ::close(fd);
    return disk_error(err, fmt::format("list {}", dir));
  }
  std::vector<std::string> names;
  absl::Status status;
  for (;;) {  // ends at the end of the directory, an error or the limit
    errno = 0;
    const dirent* entry = ::readdir(stream);
    if (entry == nullptr) {
      if (errno != 0) status = disk_error(errno, fmt::format("list {}", dir));
      break;
    }
    const std::string_view name(entry->d_name);
    if (name == "." || name == "..") continue;
    if (names.size() == kListEntriesMax) {
      status = absl::ResourceExhaustedError(
          fmt::format("list {}: more than {} entries", dir, kListEntriesMax));
      break;
    }
    names.emplace_back(name);
  }
  ::closedir(stream);  // also closes fd
  RETURN_IF_ERROR(status);
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status Disk::sync_dir_now(const std::string& dir) {
  RETURN_IF_ERROR(validate_disk_path(dir));
  RETURN_IF_ERROR(root_status());
  const int fd = ::openat(root_fd_, at_path(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return disk_error(errno, fmt::format("sync_dir {}", dir));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return disk_error(err, fmt::format("sync_dir {}", dir));
  return absl::OkStatus();
}

}  // namespace brook::io::posix
