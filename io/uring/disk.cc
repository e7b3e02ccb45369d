// io/uring/disk.cc
#include "io/uring/disk.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "io/status.h"
#include "io/errno_status.h"

namespace brook::io::uring {
namespace {

constexpr mode_t kFileMode = 0644;
constexpr mode_t kDirMode = 0755;

// The state of one open file, shared by the File and its running calls, so a
// call still suspended when the File is destroyed touches no freed memory.
struct FileState {
  Loop* loop;
  SharedFd fd;
  std::string path;
  uint64_t size;
  bool writable;
  size_t inline_write_bytes_max;
  // write_inline's vectors, kept between calls so an append allocates none
  // (an inline write finishes before the loop runs anything else).
  std::vector<iovec> inline_iovecs{};
};

absl::Status closed_error(const FileState& f) {
  return absl::FailedPreconditionError(fmt::format("file closed: {}", f.path));
}

// OK when the file is open for writing.
absl::Status check_writable(const FileState& f) {
  if (!f.fd.valid()) return closed_error(f);
  if (!f.writable) return absl::FailedPreconditionError(fmt::format("read-only: {}", f.path));
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

Task<absl::StatusOr<Buffer>> read_at_impl(std::shared_ptr<FileState> f, uint64_t offset,
                                          size_t length) {
  if (!f->fd.valid()) co_return closed_error(*f);
  if (length > kReadBytesMax) {
    co_return absl::InvalidArgumentError(fmt::format("read of {} bytes is too large", length));
  }
  if (length == 0) co_return Buffer();
  Operation op(*f->loop);
  op.op().fd = f->fd;
  op.op().buffer = Buffer::allocate(length);
  size_t done = 0;
  while (done < length) {
    io_uring_sqe* sqe = op.prepare();
    io_uring_prep_read(sqe, op.op().fd.get(), op.op().buffer.mutable_data() + done,
                       static_cast<unsigned>(length - done), offset + done);
    const int32_t res = co_await op;
    if (res == -EINTR || res == -EAGAIN) continue;
    if (res < 0) co_return disk_error(-res, fmt::format("read {}", f->path));
    if (res == 0) break;  // end of file
    done += static_cast<size_t>(res);
  }
  Buffer out = std::move(op.op().buffer);
  out.trim_back(length - done);
  co_return out;
}

// Writes `data` at `offset` with pwritev(2) on this thread (DiskOptions).
absl::Status write_inline(FileState& f, uint64_t offset, BufferChain& data) {
  std::vector<iovec>& iovecs = f.inline_iovecs;
  uint64_t position = offset;
  while (!data.empty()) {
    const size_t count = fill_iovecs(data, iovecs);
    const ssize_t res = ::pwritev(f.fd.get(), iovecs.data(), static_cast<int>(count),
                                  static_cast<off_t>(position));
    if (res < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (res < 0) return disk_error(errno, fmt::format("write {}", f.path));
    if (res == 0) return absl::InternalError(fmt::format("write {}: no progress", f.path));
    data.consume(static_cast<size_t>(res));
    position += static_cast<uint64_t>(res);
    f.size = std::max(f.size, position);
  }
  return absl::OkStatus();
}

Task<absl::Status> write_at_impl(std::shared_ptr<FileState> f, uint64_t offset,
                                 BufferChain data) {
  CO_RETURN_IF_ERROR(check_writable(*f));
  if (data.empty()) co_return absl::OkStatus();
  if (data.size() <= f->inline_write_bytes_max) co_return write_inline(*f, offset, data);
  Operation op(*f->loop);
  Op& o = op.op();
  o.fd = f->fd;
  o.chain = std::move(data);
  uint64_t position = offset;
  while (!o.chain.empty()) {
    const size_t count = fill_iovecs(o.chain, o.iovecs);
    io_uring_sqe* sqe = op.prepare();
    io_uring_prep_writev(sqe, o.fd.get(), o.iovecs.data(), static_cast<unsigned>(count),
                         position);
    const int32_t res = co_await op;
    if (res == -EINTR || res == -EAGAIN) continue;
    if (res < 0) co_return disk_error(-res, fmt::format("write {}", f->path));
    if (res == 0) co_return absl::InternalError(fmt::format("write {}: no progress", f->path));
    o.chain.consume(static_cast<size_t>(res));
    position += static_cast<uint64_t>(res);
    f->size = std::max(f->size, position);
  }
  co_return absl::OkStatus();
}

Task<absl::Status> append_impl(std::shared_ptr<FileState> f, BufferChain data) {
  const uint64_t offset = f->size;
  co_return co_await write_at_impl(std::move(f), offset, std::move(data));
}

// One operation on `fd` that reports only success or an errno, prepared by
// `prepare` and retried on EINTR/EAGAIN.
using FdOpPrepare = std::function<void(io_uring_sqe*, int)>;
Task<absl::Status> fd_op(Loop* loop, SharedFd fd, FdOpPrepare prepare, std::string what) {
  Operation op(*loop);
  op.op().fd = fd;
  for (;;) {
    prepare(op.prepare(), fd.get());
    const int32_t res = co_await op;
    if (res == -EINTR || res == -EAGAIN) continue;
    if (res < 0) co_return disk_error(-res, what);
    co_return absl::OkStatus();
  }
}

// fsync (or fdatasync) of `fd` through the ring.
Task<absl::Status> sync_fd(Loop* loop, SharedFd fd, unsigned flags, std::string what) {
  const FdOpPrepare prepare = [flags](io_uring_sqe* sqe, int raw) { io_uring_prep_fsync(sqe, raw, flags); };
  co_return co_await fd_op(loop, std::move(fd), prepare, std::move(what));
}

Task<absl::Status> datasync_impl(std::shared_ptr<FileState> f) {
  if (!f->fd.valid()) co_return closed_error(*f);
  co_return co_await sync_fd(f->loop, f->fd, IORING_FSYNC_DATASYNC,
                             fmt::format("datasync {}", f->path));
}

// sync_file_range(SYNC_FILE_RANGE_WRITE) through the ring: the kernel's
// worker submits the writeback, the loop does not wait on the device.
Task<absl::Status> start_writeback_impl(std::shared_ptr<FileState> f, uint64_t offset,
                                        uint64_t length) {
  CO_RETURN_IF_ERROR(check_writable(*f));
  constexpr uint64_t kMaxPiece = uint64_t{1} << 30;  // the SQE's length is 32 bits
  while (length > 0) {
    const unsigned piece = static_cast<unsigned>(std::min(length, kMaxPiece));
    const FdOpPrepare prepare = [piece, offset](io_uring_sqe* sqe, int raw) {
      io_uring_prep_sync_file_range(sqe, raw, piece, offset, SYNC_FILE_RANGE_WRITE);
    };
    CO_RETURN_IF_ERROR(
        co_await fd_op(f->loop, f->fd, prepare, fmt::format("sync_file_range {}", f->path)));
    offset += piece;
    length -= piece;
  }
  co_return absl::OkStatus();
}

Task<absl::Status> preallocate_impl(std::shared_ptr<FileState> f, uint64_t offset,
                                    uint64_t length) {
  CO_RETURN_IF_ERROR(check_writable(*f));
  const FdOpPrepare prepare = [offset, length](io_uring_sqe* sqe, int raw) {
    io_uring_prep_fallocate(sqe, raw, FALLOC_FL_KEEP_SIZE, offset, length);
  };
  co_return co_await fd_op(f->loop, f->fd, prepare, fmt::format("fallocate {}", f->path));
}

class UringFile final : public io::File {
 public:
  explicit UringFile(std::shared_ptr<FileState> state) : state_(std::move(state)) {}
  ~UringFile() override { state_->fd.reset(); }

  Task<absl::StatusOr<Buffer>> read_at(uint64_t offset, size_t length) override {
    return read_at_impl(state_, offset, length);
  }
  Task<absl::Status> write_at(uint64_t offset, BufferChain data) override {
    return write_at_impl(state_, offset, std::move(data));
  }
  Task<absl::Status> append(BufferChain data) override {
    return append_impl(state_, std::move(data));
  }
  Task<absl::Status> datasync() override { return datasync_impl(state_); }
  Task<absl::Status> start_writeback(uint64_t offset, uint64_t length) override {
    return start_writeback_impl(state_, offset, length);
  }
  Task<absl::Status> preallocate(uint64_t offset, uint64_t length) override {
    return preallocate_impl(state_, offset, length);
  }
  Task<absl::Status> truncate(uint64_t size) override { return truncate_impl(state_, size); }
  uint64_t size() const override { return state_->size; }
  Task<absl::Status> close() override { return close_impl(state_); }

 private:
  static Task<absl::Status> truncate_impl(std::shared_ptr<FileState> f, uint64_t size) {
    CO_RETURN_IF_ERROR(check_writable(*f));
    if (::ftruncate(f->fd.get(), static_cast<off_t>(size)) != 0) {
      co_return disk_error(errno, fmt::format("truncate {}", f->path));
    }
    f->size = size;
    co_return absl::OkStatus();
  }
  static Task<absl::Status> close_impl(std::shared_ptr<FileState> f) {
    // The descriptor closes once no operation in flight holds it.
    f->fd.reset();
    co_return absl::OkStatus();
  }

  std::shared_ptr<FileState> state_;
};

// OK when the root is usable and `path` is a valid Disk path ("" is the root).
absl::Status check_root(const absl::Status& root_status, const std::string& path) {
  if (!root_status.ok()) return root_status;
  return validate_disk_path(path);
}

// The same, for calls that name an entry: the root itself is not one.
absl::Status check_named_path(const absl::Status& root_status, const std::string& path) {
  RETURN_IF_ERROR(check_root(root_status, path));
  if (path.empty()) return absl::InvalidArgumentError("empty path");
  return absl::OkStatus();
}

Task<absl::StatusOr<std::unique_ptr<io::File>>> open_impl(Loop* loop, SharedFd root,
                                                          std::string path, OpenMode mode,
                                                          DiskOptions options) {
  Operation op(*loop);
  op.op().fd = root;
  op.op().path = path;
  op.op().result_is_fd = true;
  int32_t res;
  do {
    io_uring_sqe* sqe = op.prepare();
    io_uring_prep_openat(sqe, root.get(), op.op().path.c_str(), open_flags(mode) | O_CLOEXEC,
                         kFileMode);
    res = co_await op;
  } while (res == -EINTR || res == -EAGAIN);
  if (res < 0) co_return disk_error(-res, fmt::format("open {}", path));
  SharedFd fd = SharedFd::adopt(op.take_fd());
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) co_return disk_error(errno, fmt::format("stat {}", path));
  if (!S_ISREG(st.st_mode)) {
    co_return absl::FailedPreconditionError(fmt::format("not a regular file: {}", path));
  }
  auto state = std::make_shared<FileState>(FileState{loop, std::move(fd), std::move(path),
                                                     static_cast<uint64_t>(st.st_size),
                                                     mode != OpenMode::kReadOnly,
                                                     options.inline_write_bytes_max});
  co_return std::unique_ptr<io::File>(std::make_unique<UringFile>(std::move(state)));
}

// One path operation through the ring: renameat, unlinkat or mkdirat.
enum class PathOp { kRename, kUnlink, kRemoveDir, kMakeDir };

Task<int32_t> path_op(Loop* loop, SharedFd root, PathOp kind, std::string path,
                      std::string other) {
  Operation op(*loop);
  Op& o = op.op();
  o.fd = root;
  o.path = std::move(path);
  o.path_other = std::move(other);
  int32_t res;
  do {
    io_uring_sqe* sqe = op.prepare();
    switch (kind) {
      case PathOp::kRename:
        io_uring_prep_renameat(sqe, root.get(), o.path.c_str(), root.get(),
                               o.path_other.c_str(), 0);
        break;
      case PathOp::kUnlink:
        io_uring_prep_unlinkat(sqe, root.get(), o.path.c_str(), 0);
        break;
      case PathOp::kRemoveDir:
        io_uring_prep_unlinkat(sqe, root.get(), o.path.c_str(), AT_REMOVEDIR);
        break;
      case PathOp::kMakeDir:
        io_uring_prep_mkdirat(sqe, root.get(), o.path.c_str(), kDirMode);
        break;
    }
    res = co_await op;
  } while (res == -EINTR || res == -EAGAIN);
  co_return res;
}

Task<absl::Status> rename_impl(Loop* loop, SharedFd root, std::string from, std::string to) {
  const int32_t res = co_await path_op(loop, root, PathOp::kRename, from, to);
  if (res < 0) co_return disk_error(-res, fmt::format("rename {} to {}", from, to));
  co_return absl::OkStatus();
}

Task<absl::Status> remove_impl(Loop* loop, SharedFd root, std::string path) {
  int32_t res = co_await path_op(loop, root, PathOp::kUnlink, path, "");
  if (res == -EISDIR) res = co_await path_op(loop, root, PathOp::kRemoveDir, path, "");
  if (res < 0) co_return disk_error(-res, fmt::format("remove {}", path));
  co_return absl::OkStatus();
}

Task<absl::Status> make_dir_impl(Loop* loop, SharedFd root, std::string path) {
  const int32_t res = co_await path_op(loop, root, PathOp::kMakeDir, path, "");
  if (res < 0 && res != -EEXIST) co_return disk_error(-res, fmt::format("mkdir {}", path));
  co_return absl::OkStatus();
}

// Opens a directory under the root with a plain openat (cheap, non-blocking
// in practice). "" names the root itself.
absl::StatusOr<int> open_dir(const SharedFd& root, const std::string& dir) {
  const int fd = ::openat(root.get(), dir.empty() ? "." : dir.c_str(),
                          O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return disk_error(errno, fmt::format("open directory '{}'", dir));
  return fd;
}

absl::StatusOr<std::vector<std::string>> list_names(const SharedFd& root,
                                                    const std::string& dir) {
  ASSIGN_OR_RETURN(const int fd, open_dir(root, dir));
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    const int err = errno;
    ::close(fd);
    return disk_error(err, fmt::format("list '{}'", dir));
  }
  std::vector<std::string> names;
  absl::Status status;
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(d);
    if (entry == nullptr) {
      if (errno != 0) status = disk_error(errno, fmt::format("list '{}'", dir));
      break;
    }
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (names.size() == kListEntriesMax) {
      status = absl::ResourceExhaustedError(fmt::format("list '{}': too many entries", dir));
      break;
    }
    names.emplace_back(name);
  }
  ::closedir(d);
  RETURN_IF_ERROR(status);
  std::sort(names.begin(), names.end());
  return names;
}

Task<absl::Status> sync_dir_impl(Loop* loop, SharedFd root, std::string dir) {
  CO_ASSIGN_OR_RETURN(const int fd, open_dir(root, dir));
  co_return co_await sync_fd(loop, SharedFd::adopt(fd), 0, fmt::format("sync dir '{}'", dir));
}

}  // namespace

Disk::Disk(Loop& loop, std::string root, DiskOptions options)
    : loop_(&loop), root_(std::move(root)), options_(options) {
  if (::mkdir(root_.c_str(), kDirMode) != 0 && errno != EEXIST) {
    root_status_ = disk_error(errno, fmt::format("create disk root {}", root_));
    return;
  }
  const int fd = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    root_status_ = disk_error(errno, fmt::format("open disk root {}", root_));
    return;
  }
  root_fd_ = SharedFd::adopt(fd);
}

Task<absl::StatusOr<std::unique_ptr<File>>> Disk::open(std::string path, OpenMode mode) {
  CO_RETURN_IF_ERROR(check_named_path(root_status_, path));
  co_return co_await open_impl(loop_, root_fd_, std::move(path), mode, options_);
}

Task<absl::Status> Disk::rename(std::string from, std::string to) {
  CO_RETURN_IF_ERROR(check_named_path(root_status_, from));
  CO_RETURN_IF_ERROR(check_named_path(root_status_, to));
  co_return co_await rename_impl(loop_, root_fd_, std::move(from), std::move(to));
}

Task<absl::Status> Disk::remove(std::string path) {
  CO_RETURN_IF_ERROR(check_named_path(root_status_, path));
  co_return co_await remove_impl(loop_, root_fd_, std::move(path));
}

Task<absl::Status> Disk::make_dir(std::string path) {
  CO_RETURN_IF_ERROR(check_named_path(root_status_, path));
  co_return co_await make_dir_impl(loop_, root_fd_, std::move(path));
}

Task<absl::StatusOr<std::vector<std::string>>> Disk::list(std::string dir) {
  CO_RETURN_IF_ERROR(check_root(root_status_, dir));
  co_return list_names(root_fd_, dir);
}

Task<absl::Status> Disk::sync_dir(std::string dir) {
  CO_RETURN_IF_ERROR(check_root(root_status_, dir));
  co_return co_await sync_dir_impl(loop_, root_fd_, std::move(dir));
}

}  // namespace brook::io::uring
