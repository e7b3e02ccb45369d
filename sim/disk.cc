// sim/disk.cc
//
// The simulated disk's state machine. The model is documented in sim/disk.h;
// the invariants kept here are:
// - current namespace == durable namespace with every pending directory
//   operation applied, in order (operations are validated against the
//   current namespace before they are recorded, so replaying a prefix of
//   them onto the durable namespace is always valid);
// - for each file, its current contents are its durable contents with every
//   pending write applied, except after a failed datasync (fsyncgate), which
//   forgets pending writes that stay in the current contents;
// - an inode lives while a namespace, a pending directory operation or an
//   open handle of the current generation refers to it.
#include "sim/disk.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <set>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "io/clock.h"
#include "io/status.h"

namespace brook::sim {
namespace {

constexpr uint64_t kRootId = 1;

struct Entry {
  bool is_dir = false;
  uint64_t id = 0;  // the inode of a file, or the identity of a directory
};
using Namespace = std::map<std::string, Entry>;

enum class DirOpKind { kCreate, kMakeDir, kRemove, kRename };

struct DirOp {
  DirOpKind kind = DirOpKind::kCreate;
  std::string path;  // created or removed path, or the rename source
  std::string to;    // the rename target
  Entry entry;       // the entry created, removed or moved
  uint64_t dir = 0;     // the directory whose entries changed
  uint64_t to_dir = 0;  // for a rename, the target's directory
};

// A write, or a truncation to `offset` when `truncate` is set.
struct PendingWrite {
  uint64_t offset = 0;
  std::string bytes;
  bool truncate = false;
};

struct Inode {
  std::string durable;
  std::string current;
  std::deque<PendingWrite> pending;
  uint32_t open_handles = 0;
};

std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

std::string child_prefix(const std::string& dir) { return dir.empty() ? dir : dir + "/"; }

std::optional<Entry> lookup(const Namespace& ns, const std::string& path) {
  if (path.empty()) return Entry{true, kRootId};
  auto it = ns.find(path);
  if (it == ns.end()) return std::nullopt;
  return it->second;
}

bool has_children(const Namespace& ns, const std::string& dir) {
  const std::string prefix = child_prefix(dir);
  auto it = ns.lower_bound(prefix);
  return it != ns.end() && it->first.starts_with(prefix);
}

// The directory that holds `path`. NotFound when it is missing or a file
// (ENOENT / ENOTDIR, mapped as the real backends map them).
absl::StatusOr<uint64_t> parent_dir(const Namespace& ns, const std::string& path) {
  const std::string parent = parent_of(path);
  const std::optional<Entry> entry = lookup(ns, parent);
  if (!entry) return absl::NotFoundError(fmt::format("{}: no such directory: {}", path, parent));
  if (!entry->is_dir) {
    return absl::NotFoundError(fmt::format("{}: not a directory: {}", path, parent));
  }
  return entry->id;
}

// Re-keys every entry below `from` to lie below `to`.
void move_subtree(Namespace& ns, const std::string& from, const std::string& to) {
  const std::string prefix = from + "/";
  std::vector<std::pair<std::string, Entry>> moved;
  for (auto it = ns.lower_bound(prefix); it != ns.end() && it->first.starts_with(prefix);) {
    moved.emplace_back(to + it->first.substr(from.size()), it->second);
    it = ns.erase(it);
  }
  for (auto& [path, entry] : moved) {
    const bool inserted = ns.emplace(std::move(path), entry).second;
    BROOK_ASSERT(inserted);
  }
}

// REQUIRES: `op` is valid for `ns` (it was validated against the namespace
// it was first applied to, and `ns` is that namespace replayed).
void apply_dir_op(Namespace& ns, const DirOp& op) {
  switch (op.kind) {
    case DirOpKind::kCreate:
    case DirOpKind::kMakeDir: {
      const bool inserted = ns.emplace(op.path, op.entry).second;
      BROOK_ASSERT(inserted);
      return;
    }
    case DirOpKind::kRemove: {
      BROOK_ASSERT(!op.entry.is_dir || !has_children(ns, op.path));
      BROOK_ASSERT_EQ(ns.erase(op.path), 1u);
      return;
    }
    case DirOpKind::kRename: {
      auto it = ns.find(op.path);
      BROOK_ASSERT(it != ns.end());
      BROOK_ASSERT_EQ(it->second.id, op.entry.id);
      ns.erase(it);
      if (auto target = ns.find(op.to); target != ns.end()) {
        BROOK_ASSERT(!target->second.is_dir || !has_children(ns, op.to));
        ns.erase(target);
      }
      ns.emplace(op.to, op.entry);
      if (op.entry.is_dir) move_subtree(ns, op.path, op.to);
      return;
    }
  }
  BROOK_UNREACHABLE();
}

void write_bytes(std::string& bytes, uint64_t offset, std::string_view data) {
  const uint64_t end = offset + data.size();
  if (bytes.size() < end) bytes.resize(end, '\0');
  bytes.replace(offset, data.size(), data);
}

void apply_write(std::string& bytes, const PendingWrite& write) {
  if (write.truncate) {
    bytes.resize(write.offset, '\0');
  } else {
    write_bytes(bytes, write.offset, write.bytes);
  }
}

// Applies an independent random subset of the sectors `write` covers.
void apply_torn(std::string& bytes, const PendingWrite& write, io::Random& random) {
  BROOK_ASSERT(!write.truncate);
  const uint64_t end = write.offset + write.bytes.size();
  for (uint64_t lo = write.offset; lo < end;) {
    const uint64_t hi = std::min(end, (lo / kSectorBytes + 1) * kSectorBytes);
    if (random.bernoulli(0.5)) {
      write_bytes(bytes, lo, std::string_view(write.bytes).substr(lo - write.offset, hi - lo));
    }
    lo = hi;
  }
}

io::Task<void> wait_latency(io::Duration delay) {
  io::Executor& executor = co_await io::this_executor();
  co_await io::SleepAwaiter(executor.now() + delay);
}

void check_faults(const DiskFaults& f) {
  for (double p : {f.read_error_probability, f.write_error_probability,
                   f.metadata_error_probability, f.sync_error_probability,
                   f.sync_dir_error_probability,
                   f.read_corruption_probability, f.crash_lose_unsynced_probability}) {
    BROOK_ASSERT(p >= 0 && p <= 1);
  }
  BROOK_ASSERT(f.latency_min >= io::Duration::zero());
  BROOK_ASSERT(f.latency_min <= f.latency_max);
}

absl::Status eio(std::string_view what, const std::string& path) {
  return absl::InternalError(fmt::format("{} {}: input/output error (injected)", what, path));
}

}  // namespace

struct SimDisk::State : std::enable_shared_from_this<SimDisk::State> {
  State(io::Random r, const DiskFaults& f) : random(std::move(r)), faults(f) {}

  io::Random random;
  DiskFaults faults;
  DiskStats stats;
  uint64_t generation = 1;
  uint64_t next_id = kRootId + 1;
  Namespace current;
  Namespace durable;
  std::deque<DirOp> dir_ops;  // pending, oldest first
  std::map<uint64_t, std::shared_ptr<Inode>> inodes;
  struct PlannedCorruption {
    std::string path;
    uint64_t offset = 0;
    uint8_t mask = 0;
  };
  std::vector<PlannedCorruption> planned;  // corrupt_next_read()

  // Draws nothing when p is 0, so fault-free runs use no randomness on it.
  bool chance(double p) { return p > 0 && random.bernoulli(p); }

  io::Duration latency() {
    if (faults.latency_max <= io::Duration::zero()) return io::Duration::zero();
    return io::Duration(random.uniform_range(faults.latency_min.count(),
                                             faults.latency_max.count()));
  }

  const Namespace& names(DiskView view) const {
    return view == DiskView::kCurrent ? current : durable;
  }

  // O(files): called only for growing writes under a finite capacity, and a
  // simulated node holds few files. Keep a running total if that changes.
  uint64_t used_bytes() const {
    uint64_t used = 0;
    std::set<uint64_t> counted;
    for (const auto& [path, entry] : current) {
      if (entry.is_dir) continue;
      counted.insert(entry.id);
      used += inodes.at(entry.id)->current.size();
    }
    for (const auto& [id, inode] : inodes) {
      if (inode->open_handles > 0 && !counted.contains(id)) used += inode->current.size();
    }
    return used;
  }

  absl::Status check_space(uint64_t growth, const std::string& path) {
    if (growth == 0 || faults.capacity_bytes == UINT64_MAX) return absl::OkStatus();
    const uint64_t used = used_bytes();
    if (used <= faults.capacity_bytes && growth <= faults.capacity_bytes - used) {
      return absl::OkStatus();
    }
    ++stats.no_space_errors;
    return absl::ResourceExhaustedError(fmt::format(
        "{}: no space left on device ({} used, {} more, capacity {})", path, used, growth,
        faults.capacity_bytes));
  }

  // Applies `op` to the current namespace and journals it.
  void record(DirOp op) {
    apply_dir_op(current, op);
    dir_ops.push_back(std::move(op));
    if (dir_ops.size() > kPendingDirOpsMax) {
      ++stats.written_back;
      commit_dir_ops(1);
    }
  }

  // Makes the oldest `count` pending directory operations durable.
  void commit_dir_ops(size_t count) {
    BROOK_ASSERT_LE(count, dir_ops.size());
    for (size_t i = 0; i < count; ++i) apply_dir_op(durable, dir_ops[i]);
    dir_ops.erase(dir_ops.begin(), dir_ops.begin() + static_cast<ptrdiff_t>(count));
    collect_garbage();
  }

  void add_pending(Inode& inode, PendingWrite write) {
    inode.pending.push_back(std::move(write));
    if (inode.pending.size() > kPendingWritesMax) {
      ++stats.written_back;
      apply_write(inode.durable, inode.pending.front());
      inode.pending.pop_front();
    }
  }

  // Makes pending[0, keep) durable, tears pending[keep] when it is a write,
  // and forgets every pending write.
  void persist_prefix(Inode& inode, size_t keep) {
    BROOK_ASSERT_LE(keep, inode.pending.size());
    for (size_t i = 0; i < keep; ++i) apply_write(inode.durable, inode.pending[i]);
    if (keep < inode.pending.size()) {
      const PendingWrite& cut = inode.pending[keep];
      if (!cut.truncate) {
        apply_torn(inode.durable, cut, random);
        ++stats.torn_writes;
      }
      stats.lost_writes += inode.pending.size() - keep;
    }
    inode.pending.clear();
  }

  void collect_garbage() {
    std::set<uint64_t> live;
    for (const Namespace* ns : {&current, &durable}) {
      for (const auto& [path, entry] : *ns) {
        if (!entry.is_dir) live.insert(entry.id);
      }
    }
    for (const DirOp& op : dir_ops) {
      if (!op.entry.is_dir) live.insert(op.entry.id);
    }
    for (auto it = inodes.begin(); it != inodes.end();) {
      const bool dead = !live.contains(it->first) && it->second->open_handles == 0;
      it = dead ? inodes.erase(it) : std::next(it);
    }
  }

  void crash() {
    ++generation;
    ++stats.crashes;
    size_t keep = dir_ops.size();
    if (keep > 0 && chance(faults.crash_lose_unsynced_probability)) {
      keep = random.uniform(keep + 1);
    }
    stats.lost_dir_ops += dir_ops.size() - keep;
    for (size_t i = 0; i < keep; ++i) apply_dir_op(durable, dir_ops[i]);
    dir_ops.clear();
    current = durable;
    for (auto& [id, inode] : inodes) inode->open_handles = 0;
    collect_garbage();
    for (auto& [id, inode] : inodes) {
      size_t kept = inode->pending.size();
      if (kept > 0 && chance(faults.crash_lose_unsynced_probability)) {
        kept = random.uniform(kept + 1);
      }
      persist_prefix(*inode, kept);
      inode->current = inode->durable;
    }
  }

  absl::StatusOr<std::unique_ptr<io::File>> open_now(const std::string& path, io::OpenMode mode);
  absl::Status rename_now(const std::string& from, const std::string& to);
  absl::Status remove_now(const std::string& path);
  absl::Status make_dir_now(const std::string& path);
  absl::StatusOr<std::vector<std::string>> list_now(const std::string& dir) const;
  absl::Status sync_dir_now(const std::string& dir);
};

namespace {

using State = SimDisk::State;

class SimFile final : public io::File {
 public:
  SimFile(std::shared_ptr<State> state, std::shared_ptr<Inode> inode, std::string path,
          bool writable)
      : state_(std::move(state)),
        inode_(std::move(inode)),
        path_(std::move(path)),
        generation_(state_->generation),
        writable_(writable) {
    ++inode_->open_handles;
  }
  ~SimFile() override { release(); }
  SimFile(const SimFile&) = delete;
  SimFile& operator=(const SimFile&) = delete;

  io::Task<absl::StatusOr<io::Buffer>> read_at(uint64_t offset, size_t length) override;
  io::Task<absl::Status> write_at(uint64_t offset, io::BufferChain data) override {
    return write(false, offset, std::move(data));
  }
  io::Task<absl::Status> append(io::BufferChain data) override {
    return write(true, 0, std::move(data));
  }
  io::Task<absl::Status> datasync() override;
  io::Task<absl::Status> truncate(uint64_t size) override;
  uint64_t size() const override { return inode_->current.size(); }
  io::Task<absl::Status> close() override {
    const absl::Status status = usable();
    release();
    co_return status;
  }

 private:
  absl::Status usable() const {
    if (closed_) return absl::FailedPreconditionError(fmt::format("{}: file is closed", path_));
    if (generation_ != state_->generation) {
      return absl::FailedPreconditionError(fmt::format(
          "{}: stale file handle: the simulated disk crashed or its process died after "
          "the file was opened (generation {}, now {})",
          path_, generation_, state_->generation));
    }
    return absl::OkStatus();
  }
  absl::Status usable_for_writing() const {
    if (!writable_) {
      return absl::FailedPreconditionError(fmt::format("{}: file is open read-only", path_));
    }
    return usable();
  }
  // A write at `offset`, or at the end when `at_end`.
  io::Task<absl::Status> write(bool at_end, uint64_t offset, io::BufferChain data);
  absl::Status write_now(bool at_end, uint64_t offset, const io::BufferChain& data);
  absl::Status truncate_now(uint64_t size);
  void release() {
    if (closed_) return;
    closed_ = true;
    if (generation_ != state_->generation) return;  // the crash already dropped the handle
    BROOK_ASSERT_GT(inode_->open_handles, 0u);
    if (--inode_->open_handles == 0) state_->collect_garbage();
  }

  std::shared_ptr<State> state_;
  std::shared_ptr<Inode> inode_;
  std::string path_;  // as opened, for messages
  uint64_t generation_;
  bool writable_;
  bool closed_ = false;
};

io::Task<absl::StatusOr<io::Buffer>> SimFile::read_at(uint64_t offset, size_t length) {
  CO_RETURN_IF_ERROR(usable());
  if (length > kIoBytesMax) {
    co_return absl::InvalidArgumentError(
        fmt::format("{}: read of {} bytes exceeds {}", path_, length, kIoBytesMax));
  }
  if (const io::Duration d = state_->latency(); d > io::Duration::zero()) {
    co_await wait_latency(d);
  }
  CO_RETURN_IF_ERROR(usable());
  if (state_->chance(state_->faults.read_error_probability)) {
    ++state_->stats.read_errors;
    co_return eio("read", path_);
  }
  const std::string& bytes = inode_->current;
  if (offset >= bytes.size() || length == 0) co_return io::Buffer();
  const size_t n = std::min<uint64_t>(length, bytes.size() - offset);
  io::Buffer out = io::Buffer::allocate(n);
  std::memcpy(out.mutable_data(), bytes.data() + offset, n);
  for (auto it = state_->planned.begin(); it != state_->planned.end(); ++it) {
    if (it->path == path_ && it->offset >= offset && it->offset < offset + n) {
      ++state_->stats.read_corruptions;
      out.mutable_data()[it->offset - offset] ^= std::byte{it->mask};
      state_->planned.erase(it);
      break;
    }
  }
  if (state_->chance(state_->faults.read_corruption_probability)) {
    ++state_->stats.read_corruptions;
    const uint64_t bit = state_->random.uniform(n * 8);
    out.mutable_data()[bit / 8] ^= std::byte{static_cast<uint8_t>(1u << (bit % 8))};
  }
  co_return out;
}

io::Task<absl::Status> SimFile::write(bool at_end, uint64_t offset, io::BufferChain data) {
  CO_RETURN_IF_ERROR(usable_for_writing());
  if (data.size() > kIoBytesMax) {
    co_return absl::InvalidArgumentError(
        fmt::format("{}: write of {} bytes exceeds {}", path_, data.size(), kIoBytesMax));
  }
  if (const io::Duration d = state_->latency(); d > io::Duration::zero()) {
    co_await wait_latency(d);
  }
  co_return write_now(at_end, offset, data);
}

absl::Status SimFile::write_now(bool at_end, uint64_t offset, const io::BufferChain& data) {
  RETURN_IF_ERROR(usable_for_writing());  // re-checked: a crash may have happened
  if (state_->chance(state_->faults.write_error_probability)) {
    ++state_->stats.write_errors;
    return eio("write", path_);
  }
  if (data.empty()) return absl::OkStatus();
  const uint64_t at = at_end ? inode_->current.size() : offset;
  if (at > kFileBytesMax || data.size() > kFileBytesMax - at) {
    return absl::OutOfRangeError(
        fmt::format("{}: write at {} would exceed the file size limit {}", path_, at,
                    kFileBytesMax));
  }
  const uint64_t end = at + data.size();
  const uint64_t size = inode_->current.size();
  RETURN_IF_ERROR(state_->check_space(end > size ? end - size : 0, path_));
  PendingWrite write{at, data.to_string(), false};
  write_bytes(inode_->current, at, write.bytes);
  state_->add_pending(*inode_, std::move(write));
  return absl::OkStatus();
}

io::Task<absl::Status> SimFile::truncate(uint64_t size) {
  CO_RETURN_IF_ERROR(usable_for_writing());
  if (size > kFileBytesMax) {
    co_return absl::OutOfRangeError(
        fmt::format("{}: size {} exceeds the file size limit {}", path_, size, kFileBytesMax));
  }
  if (const io::Duration d = state_->latency(); d > io::Duration::zero()) {
    co_await wait_latency(d);
  }
  co_return truncate_now(size);
}

absl::Status SimFile::truncate_now(uint64_t size) {
  RETURN_IF_ERROR(usable_for_writing());
  if (state_->chance(state_->faults.write_error_probability)) {
    ++state_->stats.write_errors;
    return eio("truncate", path_);
  }
  const uint64_t old_size = inode_->current.size();
  RETURN_IF_ERROR(state_->check_space(size > old_size ? size - old_size : 0, path_));
  inode_->current.resize(size, '\0');
  state_->add_pending(*inode_, PendingWrite{size, {}, true});
  return absl::OkStatus();
}

io::Task<absl::Status> SimFile::datasync() {
  CO_RETURN_IF_ERROR(usable());
  if (const io::Duration d = state_->latency(); d > io::Duration::zero()) {
    co_await wait_latency(d);
  }
  CO_RETURN_IF_ERROR(usable());
  Inode& inode = *inode_;
  if (state_->chance(state_->faults.sync_error_probability)) {
    // fsyncgate: some write-back happened, the rest is marked clean and lost.
    ++state_->stats.sync_errors;
    state_->persist_prefix(inode, state_->random.uniform(inode.pending.size() + 1));
    co_return eio("datasync", path_);
  }
  state_->persist_prefix(inode, inode.pending.size());
  co_return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<io::File>> SimDisk::State::open_now(const std::string& path,
                                                                   io::OpenMode mode) {
  if (chance(faults.metadata_error_probability)) {
    ++stats.metadata_errors;
    return eio("open", path);
  }
  std::optional<Entry> entry = lookup(current, path);
  if (entry && entry->is_dir) {
    return absl::FailedPreconditionError(fmt::format("open {}: is a directory", path));
  }
  if (entry && mode == io::OpenMode::kCreateExclusive) {
    return absl::AlreadyExistsError(fmt::format("open {}: file exists", path));
  }
  if (!entry) {
    if (mode == io::OpenMode::kReadOnly || mode == io::OpenMode::kReadWrite) {
      return absl::NotFoundError(fmt::format("open {}: no such file", path));
    }
    ASSIGN_OR_RETURN(const uint64_t dir, parent_dir(current, path));
    entry = Entry{false, next_id++};
    inodes.emplace(entry->id, std::make_shared<Inode>());
    record(DirOp{DirOpKind::kCreate, path, {}, *entry, dir, dir});
  }
  return std::make_unique<SimFile>(shared_from_this(), inodes.at(entry->id), path,
                                   mode != io::OpenMode::kReadOnly);
}

absl::Status SimDisk::State::rename_now(const std::string& from, const std::string& to) {
  if (chance(faults.metadata_error_probability)) {
    ++stats.metadata_errors;
    return eio("rename", from);
  }
  const std::optional<Entry> source = lookup(current, from);
  if (!source) return absl::NotFoundError(fmt::format("rename {}: no such file", from));
  ASSIGN_OR_RETURN(const uint64_t from_dir, parent_dir(current, from));
  ASSIGN_OR_RETURN(const uint64_t to_dir, parent_dir(current, to));
  if (from == to) return absl::OkStatus();
  if (source->is_dir && to.starts_with(from + "/")) {
    return absl::InvalidArgumentError(
        fmt::format("rename {} to {}: a directory cannot move into itself", from, to));
  }
  const std::optional<Entry> target = lookup(current, to);
  if (target && target->is_dir != source->is_dir) {
    return absl::FailedPreconditionError(fmt::format(
        "rename {} to {}: cannot replace a {} with a {}", from, to,
        target->is_dir ? "directory" : "file", source->is_dir ? "directory" : "file"));
  }
  if (target && target->is_dir && has_children(current, to)) {
    return absl::FailedPreconditionError(
        fmt::format("rename {} to {}: directory not empty", from, to));
  }
  record(DirOp{DirOpKind::kRename, from, to, *source, from_dir, to_dir});
  if (target) collect_garbage();
  return absl::OkStatus();
}

absl::Status SimDisk::State::remove_now(const std::string& path) {
  if (chance(faults.metadata_error_probability)) {
    ++stats.metadata_errors;
    return eio("remove", path);
  }
  const std::optional<Entry> entry = lookup(current, path);
  if (!entry) return absl::NotFoundError(fmt::format("remove {}: no such file", path));
  if (entry->is_dir && has_children(current, path)) {
    return absl::FailedPreconditionError(fmt::format("remove {}: directory not empty", path));
  }
  ASSIGN_OR_RETURN(const uint64_t dir, parent_dir(current, path));
  record(DirOp{DirOpKind::kRemove, path, {}, *entry, dir, dir});
  collect_garbage();
  return absl::OkStatus();
}

absl::Status SimDisk::State::make_dir_now(const std::string& path) {
  if (chance(faults.metadata_error_probability)) {
    ++stats.metadata_errors;
    return eio("make_dir", path);
  }
  if (const std::optional<Entry> entry = lookup(current, path)) {
    if (entry->is_dir) return absl::OkStatus();
    return absl::AlreadyExistsError(fmt::format("make_dir {}: a file has this name", path));
  }
  ASSIGN_OR_RETURN(const uint64_t dir, parent_dir(current, path));
  record(DirOp{DirOpKind::kMakeDir, path, {}, Entry{true, next_id++}, dir, dir});
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> SimDisk::State::list_now(const std::string& dir) const {
  const std::optional<Entry> entry = lookup(current, dir);
  if (!entry) return absl::NotFoundError(fmt::format("list {}: no such directory", dir));
  if (!entry->is_dir) return absl::NotFoundError(fmt::format("list {}: not a directory", dir));
  // Entries sharing a prefix are contiguous in the map and come in name order.
  const std::string prefix = child_prefix(dir);
  std::vector<std::string> names;
  for (auto it = current.lower_bound(prefix);
       it != current.end() && it->first.starts_with(prefix); ++it) {
    std::string name = it->first.substr(prefix.size());
    if (name.find('/') == std::string::npos) names.push_back(std::move(name));
  }
  return names;
}

absl::Status SimDisk::State::sync_dir_now(const std::string& dir) {
  const std::optional<Entry> entry = lookup(current, dir);
  if (!entry) return absl::NotFoundError(fmt::format("sync_dir {}: no such directory", dir));
  if (!entry->is_dir) return absl::NotFoundError(fmt::format("sync_dir {}: not a directory", dir));
  if (chance(faults.sync_dir_error_probability)) {
    ++stats.sync_dir_errors;
    commit_dir_ops(random.uniform(dir_ops.size() + 1));
    return eio("sync_dir", dir);
  }
  size_t count = 0;  // journal order: commit through the last change to `dir`
  for (size_t i = 0; i < dir_ops.size(); ++i) {
    if (dir_ops[i].dir == entry->id || dir_ops[i].to_dir == entry->id) count = i + 1;
  }
  commit_dir_ops(count);
  return absl::OkStatus();
}

SimDisk::SimDisk(io::Random random, DiskFaults faults)
    : state_(std::make_shared<State>(std::move(random), faults)) {
  check_faults(faults);
}

SimDisk::~SimDisk() {
  ++state_->generation;  // files that outlive the disk fail cleanly
}

io::Task<absl::StatusOr<std::unique_ptr<io::File>>> SimDisk::open(std::string path,
                                                                  io::OpenMode mode) {
  CO_RETURN_IF_ERROR(io::validate_disk_path(path));
  if (path.empty()) co_return absl::FailedPreconditionError("open: the root is a directory");
  const std::shared_ptr<State> state = state_;
  if (const io::Duration d = state->latency(); d > io::Duration::zero()) {
    co_await wait_latency(d);
  }
  co_return state->open_now(path, mode);
}

io::Task<absl::Status> SimDisk::rename(std::string from, std::string to) {
  CO_RETURN_IF_ERROR(io::validate_disk_path(from));
  CO_RETURN_IF_ERROR(io::validate_disk_path(to));
  if (from.empty() || to.empty()) {
    co_return absl::InvalidArgumentError("rename: the root cannot be renamed or replaced");
  }
  const std::shared_ptr<State> state = state_;
  if (const io::Duration d = state->latency(); d > io::Duration::zero()) {
    co_await wait_latency(d);
  }
  co_return state->rename_now(from, to);
}

io::Task<absl::Status> SimDisk::remove(std::string path) {
  CO_RETURN_IF_ERROR(io::validate_disk_path(path));
  if (path.empty()) co_return absl::InvalidArgumentError("remove: the root cannot be removed");
  const std::shared_ptr<State> state = state_;
  if (const io::Duration d = state->latency(); d > io::Duration::zero()) {
    co_await wait_latency(d);
  }
  co_return state->remove_now(path);
}

io::Task<absl::Status> SimDisk::make_dir(std::string path) {
  CO_RETURN_IF_ERROR(io::validate_disk_path(path));
  const std::shared_ptr<State> state = state_;
  if (const io::Duration d = state->latency(); d > io::Duration::zero()) {
    co_await wait_latency(d);
  }
  co_return state->make_dir_now(path);
}

io::Task<absl::StatusOr<std::vector<std::string>>> SimDisk::list(std::string dir) {
  CO_RETURN_IF_ERROR(io::validate_disk_path(dir));
  const std::shared_ptr<State> state = state_;
  if (const io::Duration d = state->latency(); d > io::Duration::zero()) {
    co_await wait_latency(d);
  }
  if (state->chance(state->faults.metadata_error_probability)) {
    ++state->stats.metadata_errors;
    co_return eio("list", dir);
  }
  co_return state->list_now(dir);
}

io::Task<absl::Status> SimDisk::sync_dir(std::string dir) {
  CO_RETURN_IF_ERROR(io::validate_disk_path(dir));
  const std::shared_ptr<State> state = state_;
  if (const io::Duration d = state->latency(); d > io::Duration::zero()) {
    co_await wait_latency(d);
  }
  co_return state->sync_dir_now(dir);
}

void SimDisk::set_faults(const DiskFaults& faults) {
  check_faults(faults);
  state_->faults = faults;
}

const DiskFaults& SimDisk::faults() const { return state_->faults; }

void SimDisk::crash() { state_->crash(); }

void SimDisk::kill_process() {
  ++state_->generation;
  for (auto& [id, inode] : state_->inodes) inode->open_handles = 0;
  state_->collect_garbage();
}

absl::Status SimDisk::inject_bit_rot(const std::string& path, uint64_t offset) {
  const std::optional<Entry> entry = lookup(state_->current, path);
  if (!entry || entry->is_dir) {
    return absl::NotFoundError(fmt::format("inject_bit_rot {}: no such file", path));
  }
  Inode& inode = *state_->inodes.at(entry->id);
  if (offset >= inode.durable.size() && offset >= inode.current.size()) {
    return absl::OutOfRangeError(fmt::format("inject_bit_rot {}: offset {} past the end", path,
                                             offset));
  }
  const char mask = static_cast<char>(1u << state_->random.uniform(8));
  if (offset < inode.durable.size()) inode.durable[offset] ^= mask;
  if (offset < inode.current.size()) inode.current[offset] ^= mask;
  return absl::OkStatus();
}

void SimDisk::corrupt_next_read(const std::string& path, uint64_t offset, uint8_t mask) {
  state_->planned.push_back(State::PlannedCorruption{.path = path, .offset = offset, .mask = mask});
}

std::map<std::string, std::string> SimDisk::files(DiskView view) const {
  std::map<std::string, std::string> out;
  for (const auto& [path, entry] : state_->names(view)) {
    if (entry.is_dir) continue;
    const Inode& inode = *state_->inodes.at(entry.id);
    out.emplace(path, view == DiskView::kCurrent ? inode.current : inode.durable);
  }
  return out;
}

std::vector<std::string> SimDisk::directories(DiskView view) const {
  std::vector<std::string> out;
  for (const auto& [path, entry] : state_->names(view)) {
    if (entry.is_dir) out.push_back(path);
  }
  return out;
}

std::optional<std::string> SimDisk::contents(DiskView view, const std::string& path) const {
  const std::optional<Entry> entry = lookup(state_->names(view), path);
  if (!entry || entry->is_dir) return std::nullopt;
  const Inode& inode = *state_->inodes.at(entry->id);
  return view == DiskView::kCurrent ? inode.current : inode.durable;
}

size_t SimDisk::pending_writes(const std::string& path) const {
  const std::optional<Entry> entry = lookup(state_->current, path);
  if (!entry || entry->is_dir) return 0;
  return state_->inodes.at(entry->id)->pending.size();
}

size_t SimDisk::pending_dir_ops() const { return state_->dir_ops.size(); }

uint64_t SimDisk::used_bytes() const { return state_->used_bytes(); }

uint64_t SimDisk::generation() const { return state_->generation; }

const DiskStats& SimDisk::stats() const { return state_->stats; }

}  // namespace brook::sim
