// storage/log_manager.cc
#include "storage/log_manager.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <set>
#include <utility>

#include "fmt/format.h"
#include "io/assert.h"
#include "io/status.h"
#include "io/when.h"
#include "storage/segment.h"

namespace brook::storage {

// --- Directory names -------------------------------------------------------

std::string partition_dir_name(const TopicPartition& tp) {
  return fmt::format("{}-{}", tp.topic, tp.partition);
}

std::optional<TopicPartition> parse_partition_dir_name(std::string_view name) {
  if (name.ends_with(kDeleteDirSuffix)) return std::nullopt;
  const size_t dash = name.rfind('-');
  if (dash == std::string_view::npos) return std::nullopt;
  const std::string_view topic = name.substr(0, dash);
  const std::string_view digits = name.substr(dash + 1);
  if (!is_legal_topic_name(topic)) return std::nullopt;
  const std::optional<int32_t> partition = parse_decimal_int32(digits);
  if (!partition.has_value() || *partition < 0) return std::nullopt;
  // "t-01" and "t-1" must not both name partition 1.
  if (fmt::format("{}", *partition) != digits) return std::nullopt;
  return TopicPartition{std::string(topic), *partition};
}

std::string deleted_partition_dir_name(const TopicPartition& tp, std::string_view id) {
  BROOK_ASSERT_EQ(id.size(), kDeleteDirIdHexBytes);
  BROOK_ASSERT(std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  }));
  return fmt::format("{}-{}.{}{}", tp.topic, tp.partition, id, kDeleteDirSuffix);
}

io::Task<absl::Status> remove_tree(io::Disk& disk, std::string path) {
  absl::StatusOr<std::vector<std::string>> children = co_await disk.list(path);
  if (children.ok()) {
    for (const std::string& child : *children) {
      const std::string child_path = join_path(path, child);
      absl::Status removed = co_await disk.remove(child_path);
      if (!removed.ok() && removed.code() != absl::StatusCode::kNotFound) {
        co_return annotate_with_path(removed, child_path);
      }
    }
  } else if (children.status().code() != absl::StatusCode::kNotFound) {
    co_return annotate_with_path(children.status(), path);
  }
  absl::Status removed = co_await disk.remove(path);
  if (!removed.ok() && removed.code() != absl::StatusCode::kNotFound) {
    co_return annotate_with_path(removed, path);
  }
  co_return absl::OkStatus();
}

absl::Status validate_log_manager_config(const LogManagerConfig& config) {
  if (config.num_recovery_threads_per_data_dir < 1 ||
      config.num_recovery_threads_per_data_dir > kRecoveryThreadsPerDirMax) {
    return absl::InvalidArgumentError(
        fmt::format("num.recovery.threads.per.data.dir must be in [1, {}], got {}",
                    kRecoveryThreadsPerDirMax, config.num_recovery_threads_per_data_dir));
  }
  if (config.log_initial_task_delay_ms < 0) {
    return absl::InvalidArgumentError(
        fmt::format("log.initial.task.delay.ms must not be negative, got {}",
                    config.log_initial_task_delay_ms));
  }
  const std::array<std::pair<std::string_view, int64_t>, 6> intervals = {{
      {"log.retention.check.interval.ms", config.log_retention_check_interval_ms},
      {"log.cleaner.backoff.ms", config.log_cleaner_backoff_ms},
      {"log.flush.scheduler.interval.ms", config.log_flush_scheduler_interval_ms},
      {"log.flush.offset.checkpoint.interval.ms", config.log_flush_offset_checkpoint_interval_ms},
      {"log.flush.start.offset.checkpoint.interval.ms",
       config.log_flush_start_offset_checkpoint_interval_ms},
      {"replica.high.watermark.checkpoint.interval.ms",
       config.replica_high_watermark_checkpoint_interval_ms},
  }};
  for (const auto& [name, ms] : intervals) {
    if (ms <= 0) {
      return absl::InvalidArgumentError(fmt::format("{} must be positive, got {}", name, ms));
    }
  }
  return absl::OkStatus();
}

namespace {

constexpr std::array<std::string_view, 4> kCheckpointFileNames = {
    kRecoveryPointCheckpointFileName, kLogStartOffsetCheckpointFileName,
    kReplicationOffsetCheckpointFileName, kCleanerOffsetCheckpointFileName};

bool is_checkpoint_temp_file(std::string_view name) {
  if (!name.ends_with(kTempFileSuffix)) return false;
  const std::string_view base = name.substr(0, name.size() - kTempFileSuffix.size());
  return std::find(kCheckpointFileNames.begin(), kCheckpointFileNames.end(), base) !=
         kCheckpointFileNames.end();
}

// The period of a background job; nullopt for never.
std::optional<io::Duration> period_of(int64_t ms) {
  if (ms == kNoLimit || ms > kIntervalMsMax) return std::nullopt;
  return std::chrono::milliseconds(ms);
}

int64_t offset_or_zero(const OffsetCheckpoint& offsets, const TopicPartition& tp) {
  const auto it = offsets.find(tp);
  return it == offsets.end() ? 0 : std::max<int64_t>(it->second, 0);
}

// Shared state of the workers of run_bounded().
struct BoundedWork {
  size_t next = 0;
  size_t count = 0;
  const std::function<io::Task<void>(size_t)>* job = nullptr;
};

io::Task<void> bounded_worker(BoundedWork* work) {
  while (work->next < work->count) {
    const size_t index = work->next++;
    co_await (*work->job)(index);
  }
}

// Runs job(0) .. job(count - 1), in order of start, at most `parallelism` at
// once: that many workers pull the next index until none is left.
io::Task<void> run_bounded(size_t parallelism, size_t count,
                           std::function<io::Task<void>(size_t)> job) {
  BROOK_ASSERT(parallelism > 0);
  BoundedWork work{0, count, &job};
  std::vector<io::Task<void>> workers;
  for (size_t w = 0; w < std::min(parallelism, count); ++w) {
    workers.push_back(bounded_worker(&work));
  }
  co_await io::when_all(std::move(workers));
  BROOK_ASSERT_EQ(work.next, count);
}

io::Task<void> close_into(Log* log, absl::Status* result) { *result = co_await log->close(); }

// Status messages are absl::string_view, which fmt does not know.
std::string message_of(const absl::Status& status) { return std::string(status.message()); }

absl::Status first_failure(const std::vector<absl::Status>& results) {
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

// --- State -----------------------------------------------------------------

struct LogManager::LogDir {
  explicit LogDir(LogDirSpec spec_in) : spec(std::move(spec_in)) {}
  bool online() const { return failure.ok(); }

  LogDirSpec spec;
  absl::Status failure;        // OK while online
  io::Mutex checkpoint_mutex;  // the checkpoint writers share `<name>.tmp`
};

struct LogManager::DirScan {
  std::vector<TopicPartition> partitions;  // sorted
  OffsetCheckpoint recovery_points;
  OffsetCheckpoint log_start_offsets;
  OffsetCheckpoint high_watermarks;
};

LogManager::LogManager(io::Context& ctx, std::vector<LogDirSpec> dirs, LogManagerConfig config)
    : ctx_(&ctx), config_(std::move(config)) {
  BROOK_ASSERT(!dirs.empty());
  std::set<std::string> paths;
  for (LogDirSpec& spec : dirs) {
    BROOK_ASSERT(spec.disk != nullptr);
    BROOK_ASSERT(paths.insert(spec.path).second);
    dirs_.push_back(std::make_unique<LogDir>(std::move(spec)));
  }
}

LogManager::~LogManager() = default;

size_t LogManager::recovery_threads() const {
  return static_cast<size_t>(std::max<int32_t>(config_.num_recovery_threads_per_data_dir, 1));
}

LogConfig LogManager::config_for(const std::string& topic) const {
  return config_.topic_config ? config_.topic_config(topic) : config_.default_config;
}

std::optional<size_t> LogManager::dir_index(std::string_view dir) const {
  for (size_t d = 0; d < dirs_.size(); ++d) {
    if (dirs_[d]->spec.path == dir) return d;
  }
  return std::nullopt;
}

bool LogManager::is_current(const TopicPartition& tp, const Log* log) const {
  const auto it = logs_.find(tp);
  return it != logs_.end() && it->second.log.get() == log;
}

// --- Startup ---------------------------------------------------------------

io::Task<absl::Status> LogManager::startup() {
  BROOK_ASSERT(state_ == State::kCreated);
  CO_RETURN_IF_ERROR(validate_log_manager_config(config_));
  state_ = State::kStarting;
  std::vector<io::Task<absl::StatusOr<DirScan>>> scan_tasks;
  for (size_t d = 0; d < dirs_.size(); ++d) scan_tasks.push_back(scan_dir(d));
  std::vector<absl::StatusOr<DirScan>> scans = co_await io::when_all(std::move(scan_tasks));
  for (size_t d = 0; d < dirs_.size(); ++d) {
    if (scans[d].ok()) continue;
    const std::vector<std::shared_ptr<Log>> loaded = fail_dir(d, scans[d].status());
    BROOK_ASSERT(loaded.empty());  // nothing is loaded yet
  }
  fail_duplicate_dirs(scans);

  std::vector<std::vector<TopicPartition>> found(dirs_.size());
  std::vector<io::Task<void>> loads;
  for (size_t d = 0; d < dirs_.size(); ++d) {
    if (!scans[d].ok()) continue;
    found[d] = scans[d]->partitions;
    if (dirs_[d]->online()) loads.push_back(load_dir(d, std::move(*scans[d])));
  }
  co_await io::when_all(std::move(loads));
  // Partitions of a directory that failed before all its logs were loaded
  // must not be recreated elsewhere either.
  for (size_t d = 0; d < dirs_.size(); ++d) {
    if (dirs_[d]->online()) continue;
    for (const TopicPartition& tp : found[d]) {
      if (!logs_.contains(tp)) offline_partitions_.try_emplace(tp, d);
    }
  }
  // Drops entries of partitions that are gone (a deletion interrupted before
  // its checkpoint rewrite) and records the recovered recovery points.
  std::vector<io::Task<absl::Status>> writes;
  for (size_t d = 0; d < dirs_.size(); ++d) writes.push_back(write_all_checkpoints(d));
  // A failed write has taken its directory offline; that is checked next.
  (void)co_await io::when_all(std::move(writes));

  const std::vector<std::string> offline = offline_dirs();
  if (offline.size() == dirs_.size()) {
    state_ = State::kShutDown;
    std::string causes;
    for (const std::unique_ptr<LogDir>& dir : dirs_) {
      causes += fmt::format("{}{}", causes.empty() ? "" : "; ", message_of(dir->failure));
    }
    co_return absl::UnavailableError(fmt::format("every log directory is offline: {}", causes));
  }
  state_ = State::kRunning;
  ctx_->log().info("loaded {} logs from {} log directories ({} offline)", logs_.size(),
                   dirs_.size(), offline.size());
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<LogManager::DirScan>> LogManager::scan_dir(size_t d) {
  io::Disk& disk = *dirs_[d]->spec.disk;
  absl::StatusOr<std::vector<std::string>> names = co_await disk.list("");
  if (!names.ok()) {
    co_return absl::Status(names.status().code(),
                           fmt::format("cannot list it: {}", message_of(names.status())));
  }
  CO_RETURN_IF_ERROR(co_await remove_leftovers(d, *names));
  DirScan scan;
  for (const std::string& name : *names) {
    if (std::optional<TopicPartition> tp = parse_partition_dir_name(name)) {
      scan.partitions.push_back(std::move(*tp));
    }
  }
  std::sort(scan.partitions.begin(), scan.partitions.end());
  const std::array<std::pair<std::string_view, OffsetCheckpoint*>, 3> files = {{
      {kRecoveryPointCheckpointFileName, &scan.recovery_points},
      {kLogStartOffsetCheckpointFileName, &scan.log_start_offsets},
      {kReplicationOffsetCheckpointFileName, &scan.high_watermarks},
  }};
  for (const auto& [name, out] : files) {
    absl::StatusOr<OffsetCheckpoint> read =
        co_await read_offset_checkpoint(disk, std::string(name));
    if (read.ok()) {
      *out = std::move(*read);
    } else if (read.status().code() == absl::StatusCode::kDataLoss) {
      // Kafka's choice: a corrupt checkpoint reads as empty, so recovery
      // starts from the first segment (safe, only slower).
      ctx_->log().warn("log directory {}: ignoring corrupt checkpoint: {}", dirs_[d]->spec.path,
                       message_of(read.status()));
    } else {
      co_return read.status();
    }
  }
  co_return scan;
}

io::Task<absl::Status> LogManager::remove_leftovers(size_t d, std::vector<std::string> names) {
  io::Disk& disk = *dirs_[d]->spec.disk;
  bool removed = false;
  for (const std::string& name : names) {
    if (name.ends_with(kDeleteDirSuffix)) {
      ctx_->log().info("log directory {}: removing deleted partition {}", dirs_[d]->spec.path,
                       name);
      CO_RETURN_IF_ERROR(co_await remove_tree(disk, name));
      removed = true;
    } else if (is_checkpoint_temp_file(name)) {
      absl::Status s = co_await disk.remove(name);
      if (!s.ok() && s.code() != absl::StatusCode::kNotFound) co_return annotate_with_path(s, name);
      removed = true;
    }
  }
  if (removed) {
    absl::Status synced = co_await disk.sync_dir("");
    if (!synced.ok()) co_return annotate_with_path(synced, "sync of the directory");
  }
  co_return absl::OkStatus();
}

void LogManager::fail_duplicate_dirs(const std::vector<absl::StatusOr<DirScan>>& scans) {
  // Kafka refuses to start; here the later directory goes offline alone.
  std::map<TopicPartition, size_t> owner;
  for (size_t d = 0; d < dirs_.size(); ++d) {
    if (!scans[d].ok() || !dirs_[d]->online()) continue;
    std::optional<absl::Status> duplicate;
    for (const TopicPartition& tp : scans[d]->partitions) {
      if (const auto it = owner.find(tp); it != owner.end()) {
        duplicate = absl::FailedPreconditionError(
            fmt::format("partition {} is in both log directories {} and {}", tp,
                        dirs_[it->second]->spec.path, dirs_[d]->spec.path));
        break;
      }
    }
    if (duplicate.has_value()) {
      const std::vector<std::shared_ptr<Log>> loaded = fail_dir(d, *duplicate);
      BROOK_ASSERT(loaded.empty());  // nothing is loaded yet
      continue;
    }
    for (const TopicPartition& tp : scans[d]->partitions) owner.emplace(tp, d);
  }
}

io::Task<void> LogManager::load_dir(size_t d, DirScan scan) {
  const std::function<io::Task<void>(size_t)> job = [this, d, &scan](size_t i) {
    const TopicPartition& tp = scan.partitions[i];
    LogOptions options;
    options.dir = partition_dir_name(tp);
    options.config = config_for(tp.topic);
    options.recovery_point = offset_or_zero(scan.recovery_points, tp);
    options.log_start_offset = offset_or_zero(scan.log_start_offsets, tp);
    options.high_watermark = offset_or_zero(scan.high_watermarks, tp);
    return open_existing_log(d, tp, std::move(options));
  };
  co_await run_bounded(recovery_threads(), scan.partitions.size(), job);
}

io::Task<void> LogManager::open_existing_log(size_t d, TopicPartition tp, LogOptions options) {
  LogDir& dir = *dirs_[d];
  if (!dir.online()) co_return;  // another log of the directory failed
  absl::StatusOr<std::unique_ptr<Log>> opened =
      co_await Log::open(*dir.spec.disk, ctx_->clock(), std::move(options));
  if (!opened.ok()) {
    co_await take_dir_offline(
        d, absl::Status(opened.status().code(), fmt::format("cannot load log {}: {}", tp,
                                                            message_of(opened.status()))));
    co_return;
  }
  std::shared_ptr<Log> log = std::move(*opened);
  if (!dir.online()) {
    // The directory failed while this log was loading: it is not served.
    std::vector<std::shared_ptr<Log>> unserved;
    unserved.push_back(std::move(log));
    (void)co_await close_logs(std::move(unserved));
    co_return;
  }
  const bool inserted = logs_.emplace(std::move(tp), LogEntry{std::move(log), d}).second;
  BROOK_ASSERT(inserted);
}

// --- Lookup ----------------------------------------------------------------

Log* LogManager::get_log(const TopicPartition& tp) const {
  const auto it = logs_.find(tp);
  return it == logs_.end() ? nullptr : it->second.log.get();
}

std::vector<std::pair<TopicPartition, Log*>> LogManager::all_logs() const {
  std::vector<std::pair<TopicPartition, Log*>> out;
  out.reserve(logs_.size());
  for (const auto& [tp, entry] : logs_) out.emplace_back(tp, entry.log.get());
  return out;
}

std::vector<std::string> LogManager::offline_dirs() const {
  std::vector<std::string> out;
  for (const std::unique_ptr<LogDir>& dir : dirs_) {
    if (!dir->online()) out.push_back(dir->spec.path);
  }
  return out;
}

bool LogManager::is_online(std::string_view dir) const {
  const std::optional<size_t> d = dir_index(dir);
  return d.has_value() && dirs_[*d]->online();
}

absl::Status LogManager::dir_failure(std::string_view dir) const {
  const std::optional<size_t> d = dir_index(dir);
  if (!d.has_value()) return absl::NotFoundError(fmt::format("no log directory {}", dir));
  return dirs_[*d]->failure;
}

std::optional<std::string> LogManager::dir_of(const TopicPartition& tp) const {
  const auto it = logs_.find(tp);
  if (it == logs_.end()) return std::nullopt;
  return dirs_[it->second.dir]->spec.path;
}

size_t LogManager::partition_count(std::string_view dir) const {
  const std::optional<size_t> d = dir_index(dir);
  if (!d.has_value()) return 0;
  return static_cast<size_t>(std::count_if(logs_.begin(), logs_.end(), [&](const auto& entry) {
    return entry.second.dir == *d;
  }));
}

std::optional<size_t> LogManager::least_loaded_dir() const {
  std::vector<size_t> counts(dirs_.size(), 0);
  for (const auto& [tp, entry] : logs_) ++counts[entry.dir];
  std::optional<size_t> best;
  for (size_t d = 0; d < dirs_.size(); ++d) {
    if (!dirs_[d]->online()) continue;
    if (!best.has_value() || counts[d] < counts[*best]) best = d;
  }
  return best;
}

// --- Creation and deletion -------------------------------------------------

io::Task<absl::StatusOr<Log*>> LogManager::get_or_create_log(TopicPartition tp,
                                                             std::optional<LogConfig> config,
                                                             PartitionOrigin origin) {
  if (!is_legal_topic_name(tp.topic) || tp.partition < 0) {
    co_return absl::InvalidArgumentError(fmt::format("illegal partition {}", tp));
  }
  if (Log* log = get_log(tp)) co_return log;
  auto lock = co_await lifecycle_mutex_.lock();
  if (Log* log = get_log(tp)) co_return log;  // created while we waited
  if (state_ != State::kRunning) {
    co_return absl::FailedPreconditionError("the log manager is not running");
  }
  if (const auto it = offline_partitions_.find(tp); it != offline_partitions_.end()) {
    co_return absl::UnavailableError(fmt::format("cannot create log {}: {}", tp,
                                                 message_of(dirs_[it->second]->failure)));
  }
  if (origin == PartitionOrigin::kExisting && !offline_dirs().empty()) {
    // Its old log may sit in an offline directory: a new one elsewhere
    // would come up empty and diverge.
    co_return absl::UnavailableError(fmt::format(
        "cannot create log {} for an existing partition while log directories are offline", tp));
  }
  LogConfig log_config = config.has_value() ? *config : config_for(tp.topic);
  co_return co_await create_log(std::move(tp), std::move(log_config));
}

io::Task<absl::StatusOr<Log*>> LogManager::create_log(TopicPartition tp, LogConfig config) {
  const std::optional<size_t> chosen = least_loaded_dir();
  if (!chosen.has_value()) {
    co_return absl::UnavailableError(fmt::format("no online log directory for {}", tp));
  }
  const size_t d = *chosen;
  LogDir& dir = *dirs_[d];
  io::Disk& disk = *dir.spec.disk;
  const std::string name = partition_dir_name(tp);
  // The partition directory must be durable before its log is handed out.
  absl::Status made = co_await disk.make_dir(name);
  if (made.ok()) made = co_await disk.sync_dir("");
  if (!made.ok()) {
    co_await take_dir_offline(d, annotate_with_path(made, name));
    co_return dir.failure;
  }
  if (!dir.online()) co_return dir.failure;
  LogOptions options;
  options.dir = name;
  options.config = std::move(config);
  absl::StatusOr<std::unique_ptr<Log>> opened =
      co_await Log::open(disk, ctx_->clock(), std::move(options));
  if (!opened.ok()) {
    co_await take_dir_offline(d, absl::Status(opened.status().code(),
                                              fmt::format("cannot create log {}: {}", tp,
                                                          message_of(opened.status()))));
    co_return dir.failure;
  }
  std::shared_ptr<Log> log = std::move(*opened);
  if (!dir.online()) {
    std::vector<std::shared_ptr<Log>> unserved;
    unserved.push_back(std::move(log));
    (void)co_await close_logs(std::move(unserved));  // the directory's failure is what counts
    co_return dir.failure;
  }
  Log* raw = log.get();
  ctx_->log().info("created log {} in {}", tp, dir.spec.path);
  logs_.emplace(std::move(tp), LogEntry{std::move(log), d});
  co_return raw;
}

io::Task<absl::Status> LogManager::delete_log(TopicPartition tp) {
  auto lock = co_await lifecycle_mutex_.lock();
  if (state_ != State::kRunning) {
    co_return absl::FailedPreconditionError("the log manager is not running");
  }
  const auto it = logs_.find(tp);
  if (it == logs_.end()) {
    if (const auto off = offline_partitions_.find(tp); off != offline_partitions_.end()) {
      co_return absl::UnavailableError(fmt::format("cannot delete log {}: {}", tp,
                                                   message_of(dirs_[off->second]->failure)));
    }
    co_return absl::NotFoundError(fmt::format("no log {}", tp));
  }
  const size_t d = it->second.dir;
  std::shared_ptr<Log> log = std::move(it->second.log);
  logs_.erase(it);
  const absl::Status closed = co_await log->close();
  log.reset();
  if (!closed.ok()) {
    offline_partitions_[tp] = d;  // its files stay in the failed directory
    co_await take_dir_offline(d, closed);
    co_return dirs_[d]->failure;
  }
  co_return co_await remove_deleted_dir(d, std::move(tp));
}

io::Task<absl::Status> LogManager::remove_deleted_dir(size_t d, TopicPartition tp) {
  LogDir& dir = *dirs_[d];
  io::Disk& disk = *dir.spec.disk;
  if (!dir.online()) {
    offline_partitions_[tp] = d;
    co_return dir.failure;
  }
  const std::string name = partition_dir_name(tp);
  const uint64_t id_high = ctx_->random().next_u64();
  const uint64_t id_low = ctx_->random().next_u64();
  const std::string deleted =
      deleted_partition_dir_name(tp, fmt::format("{:016x}{:016x}", id_high, id_low));
  // 1. The rename is the deletion: once durable, startup finishes the job.
  absl::Status renamed = co_await disk.rename(name, deleted);
  if (renamed.ok()) renamed = co_await disk.sync_dir("");
  if (!renamed.ok()) {
    offline_partitions_[tp] = d;
    co_await take_dir_offline(d, annotate_with_path(renamed, name));
    co_return dir.failure;
  }
  // 2. Forget the partition's offsets before a log of the same name can be
  //    created again.
  CO_RETURN_IF_ERROR(co_await write_all_checkpoints(d));
  if (!dir.online()) co_return dir.failure;
  // 3. Remove the files.
  absl::Status removed = co_await remove_tree(disk, deleted);
  if (removed.ok()) removed = co_await disk.sync_dir("");
  if (!removed.ok()) {
    co_await take_dir_offline(d, removed);
    co_return dir.failure;
  }
  ctx_->log().info("deleted log {} from {}", tp, dir.spec.path);
  co_return absl::OkStatus();
}

// --- Truncation ------------------------------------------------------------

io::Task<absl::Status> LogManager::truncate_to(std::map<TopicPartition, int64_t> offsets) {
  std::set<size_t> affected;
  absl::Status first;
  for (const auto& [tp, offset] : offsets) {
    BROOK_ASSERT(offset >= 0);
    const auto it = logs_.find(tp);
    if (it == logs_.end()) continue;
    const std::shared_ptr<Log> log = it->second.log;
    const size_t d = it->second.dir;
    if (offset >= log->log_end_offset()) continue;  // nothing to remove
    const absl::Status s = co_await log->truncate_to(offset);
    if (!is_current(tp, log.get())) continue;  // deleted or failed meanwhile
    if (!s.ok()) {
      if (first.ok()) first = s;
      co_await take_dir_offline(d, s);
      continue;
    }
    affected.insert(d);
  }
  for (const size_t d : affected) {
    const absl::Status s =
        co_await write_checkpoint(d, CheckpointKind::kRecoveryPoint, std::nullopt);
    if (first.ok()) first = s;
  }
  co_return first;
}

// --- Checkpoints -----------------------------------------------------------

namespace {

std::string_view checkpoint_file_name(uint8_t kind) {
  constexpr std::array<std::string_view, 3> kNames = {kRecoveryPointCheckpointFileName,
                                                      kLogStartOffsetCheckpointFileName,
                                                      kReplicationOffsetCheckpointFileName};
  BROOK_ASSERT_LT(kind, kNames.size());
  return kNames[kind];
}

}  // namespace

OffsetCheckpoint LogManager::checkpoint_values(size_t d, CheckpointKind kind) const {
  OffsetCheckpoint values;
  for (const auto& [tp, entry] : logs_) {
    if (entry.dir != d) continue;
    const Log& log = *entry.log;
    switch (kind) {
      case CheckpointKind::kRecoveryPoint:
        values.emplace(tp, log.recovery_point());
        break;
      case CheckpointKind::kLogStartOffset:
        values.emplace(tp, log.log_start_offset());
        break;
      case CheckpointKind::kHighWatermark:
        values.emplace(tp, log.high_watermark());
        break;
    }
  }
  return values;
}

io::Task<absl::Status> LogManager::write_checkpoint(size_t d, CheckpointKind kind,
                                                    std::optional<OffsetCheckpoint> values) {
  LogDir& dir = *dirs_[d];
  if (!dir.online()) co_return absl::OkStatus();
  auto lock = co_await dir.checkpoint_mutex.lock();
  if (!dir.online()) co_return absl::OkStatus();
  // After shutdown the map no longer holds the directory's logs: a late
  // background writer must not overwrite shutdown's checkpoint with nothing.
  if (!values.has_value() && state_ == State::kShutDown) co_return absl::OkStatus();
  // Read after taking the lock: the last writer writes the newest values.
  OffsetCheckpoint offsets = values.has_value() ? std::move(*values) : checkpoint_values(d, kind);
  const std::string name(checkpoint_file_name(static_cast<uint8_t>(kind)));
  absl::Status written = co_await write_offset_checkpoint(*dir.spec.disk, name, std::move(offsets));
  if (written.ok()) co_return absl::OkStatus();
  written = absl::Status(written.code(),
                         fmt::format("cannot write {}: {}", name, message_of(written)));
  co_await take_dir_offline(d, written);
  co_return written;
}

io::Task<absl::Status> LogManager::write_all_checkpoints(size_t d) {
  for (const CheckpointKind kind : {CheckpointKind::kRecoveryPoint, CheckpointKind::kLogStartOffset,
                                    CheckpointKind::kHighWatermark}) {
    CO_RETURN_IF_ERROR(co_await write_checkpoint(d, kind, std::nullopt));
  }
  co_return absl::OkStatus();
}

io::Task<absl::Status> LogManager::checkpoint_every_dir(CheckpointKind kind) {
  absl::Status first;
  for (size_t d = 0; d < dirs_.size(); ++d) {
    const absl::Status s = co_await write_checkpoint(d, kind, std::nullopt);
    if (first.ok()) first = s;
  }
  co_return first;
}

io::Task<absl::Status> LogManager::checkpoint_recovery_points() {
  return checkpoint_every_dir(CheckpointKind::kRecoveryPoint);
}
io::Task<absl::Status> LogManager::checkpoint_log_start_offsets() {
  return checkpoint_every_dir(CheckpointKind::kLogStartOffset);
}
io::Task<absl::Status> LogManager::checkpoint_high_watermarks() {
  return checkpoint_every_dir(CheckpointKind::kHighWatermark);
}

// --- Directory failure -----------------------------------------------------

std::vector<std::shared_ptr<Log>> LogManager::fail_dir(size_t d, const absl::Status& cause) {
  BROOK_ASSERT(!cause.ok());
  LogDir& dir = *dirs_[d];
  if (!dir.online()) return {};
  dir.failure = absl::Status(cause.code(), fmt::format("log directory {} is offline: {}",
                                                       dir.spec.path, message_of(cause)));
  ctx_->log().error("{}", message_of(dir.failure));
  std::vector<std::shared_ptr<Log>> logs;
  for (auto it = logs_.begin(); it != logs_.end();) {
    if (it->second.dir != d) {
      ++it;
      continue;
    }
    offline_partitions_[it->first] = d;
    logs.push_back(std::move(it->second.log));
    it = logs_.erase(it);
  }
  if (listener_) listener_(dir.spec.path, cause);
  return logs;
}

io::Task<void> LogManager::take_dir_offline(size_t d, absl::Status cause) {
  std::vector<std::shared_ptr<Log>> logs = fail_dir(d, cause);
  if (logs.empty()) co_return;
  // Closing logs on a failed disk is expected to fail; the logs are not
  // served any more whatever happens.
  (void)co_await close_logs(std::move(logs));
}

io::Task<void> LogManager::mark_dir_offline(std::string dir, absl::Status cause) {
  const std::optional<size_t> d = dir_index(dir);
  if (!d.has_value() || cause.ok()) co_return;
  co_await take_dir_offline(*d, std::move(cause));
}

io::Task<absl::Status> LogManager::close_logs(std::vector<std::shared_ptr<Log>> logs) {
  std::vector<absl::Status> results(logs.size());
  const std::function<io::Task<void>(size_t)> job = [&logs, &results](size_t i) {
    return close_into(logs[i].get(), &results[i]);
  };
  co_await run_bounded(recovery_threads(), logs.size(), job);
  for (std::shared_ptr<Log>& log : logs) retired_.push_back(std::move(log));
  co_return first_failure(results);
}

io::Task<void> LogManager::take_failed_logs_offline() {
  std::map<size_t, absl::Status> failed;
  for (const auto& [tp, entry] : logs_) {
    if (entry.log->offline()) failed.emplace(entry.dir, entry.log->failure());
  }
  for (auto& [d, cause] : failed) co_await take_dir_offline(d, std::move(cause));
}

// --- Shutdown --------------------------------------------------------------

io::Task<absl::Status> LogManager::shutdown() {
  BROOK_ASSERT(state_ == State::kRunning);
  auto lock = co_await lifecycle_mutex_.lock();
  state_ = State::kShutDown;
  std::vector<io::Task<absl::Status>> jobs;
  for (size_t d = 0; d < dirs_.size(); ++d) jobs.push_back(shutdown_dir(d));
  const std::vector<absl::Status> results = co_await io::when_all(std::move(jobs));
  co_return first_failure(results);
}

io::Task<absl::Status> LogManager::shutdown_dir(size_t d) {
  LogDir& dir = *dirs_[d];
  if (!dir.online()) co_return absl::OkStatus();
  std::vector<std::pair<TopicPartition, Log*>> entries;
  std::vector<std::shared_ptr<Log>> logs;
  for (auto it = logs_.begin(); it != logs_.end();) {
    if (it->second.dir != d) {
      ++it;
      continue;
    }
    entries.emplace_back(it->first, it->second.log.get());
    logs.push_back(std::move(it->second.log));
    it = logs_.erase(it);
  }
  // Kafka's order: close (which flushes, so the recovery points reach the
  // log end) and then checkpoint what the closed logs report.
  const absl::Status closed = co_await close_logs(std::move(logs));
  if (!closed.ok()) {
    const std::vector<std::shared_ptr<Log>> left = fail_dir(d, closed);
    BROOK_ASSERT(left.empty());  // taken out of the map above
    co_return dir.failure;
  }
  OffsetCheckpoint recovery_points;
  OffsetCheckpoint log_start_offsets;
  OffsetCheckpoint high_watermarks;
  for (const auto& [tp, log] : entries) {  // retired_ keeps them alive
    recovery_points.emplace(tp, log->recovery_point());
    log_start_offsets.emplace(tp, log->log_start_offset());
    high_watermarks.emplace(tp, log->high_watermark());
  }
  CO_RETURN_IF_ERROR(
      co_await write_checkpoint(d, CheckpointKind::kRecoveryPoint, std::move(recovery_points)));
  CO_RETURN_IF_ERROR(
      co_await write_checkpoint(d, CheckpointKind::kLogStartOffset, std::move(log_start_offsets)));
  CO_RETURN_IF_ERROR(
      co_await write_checkpoint(d, CheckpointKind::kHighWatermark, std::move(high_watermarks)));
  co_return absl::OkStatus();
}

// --- Background jobs -------------------------------------------------------

namespace {

enum BackgroundJob : size_t {
  kRetentionJob,
  kFlushJob,
  kRecoveryPointJob,
  kLogStartOffsetJob,
  kHighWatermarkJob,
  kCleanerJob,
  kBackgroundJobs,
};

}  // namespace

io::Task<void> LogManager::run_background() {
  BROOK_ASSERT(state_ == State::kRunning);
  const io::Clock& clock = ctx_->clock();
  const std::array<int64_t, kBackgroundJobs> periods_ms = {
      config_.log_retention_check_interval_ms,
      config_.log_flush_scheduler_interval_ms,
      config_.log_flush_offset_checkpoint_interval_ms,
      config_.log_flush_start_offset_checkpoint_interval_ms,
      config_.replica_high_watermark_checkpoint_interval_ms,
      config_.log_cleaner_enable ? config_.log_cleaner_backoff_ms : kNoLimit,
  };
  std::array<std::optional<io::Instant>, kBackgroundJobs> next;
  const io::Instant first =
      clock.now() + std::chrono::milliseconds(config_.log_initial_task_delay_ms);
  for (size_t job = 0; job < kBackgroundJobs; ++job) {
    if (period_of(periods_ms[job]).has_value()) next[job] = first;
  }
  io::Event never;  // waited on when no job is scheduled: until cancelled
  while (true) {
    std::optional<io::Instant> wake;
    for (const std::optional<io::Instant>& at : next) {
      if (at.has_value() && (!wake.has_value() || *at < *wake)) wake = at;
    }
    if (!wake.has_value()) {
      co_await never.wait();
      continue;
    }
    co_await clock.sleep_until(*wake);
    if (state_ != State::kRunning) co_return;  // shut down meanwhile
    for (size_t job = 0; job < kBackgroundJobs; ++job) {
      if (!next[job].has_value() || *next[job] > clock.now()) continue;
      co_await run_job(job);
      if (state_ != State::kRunning) co_return;
      // Fixed rate; a run that overran skips the missed turns.
      const io::Duration period = *period_of(periods_ms[job]);
      *next[job] += period;
      if (*next[job] <= clock.now()) *next[job] = clock.now() + period;
    }
    co_await take_failed_logs_offline();
  }
}

io::Task<void> LogManager::run_job(size_t job) {
  switch (job) {
    case kRetentionJob:
      co_await run_retention();
      break;
    case kFlushJob:
      co_await run_flush();
      break;
    // A failed checkpoint write has taken its directory offline.
    case kRecoveryPointJob:
      (void)co_await checkpoint_recovery_points();
      break;
    case kLogStartOffsetJob:
      (void)co_await checkpoint_log_start_offsets();
      break;
    case kHighWatermarkJob:
      (void)co_await checkpoint_high_watermarks();
      break;
    case kCleanerJob:
      co_await run_cleaner();
      break;
    default:
      BROOK_UNREACHABLE();
  }
}

io::Task<void> LogManager::run_retention() {
  // The map may change at every co_await: walk a copy, re-check each log.
  std::vector<std::pair<TopicPartition, LogEntry>> snapshot(logs_.begin(), logs_.end());
  for (const auto& [tp, entry] : snapshot) {
    if (!is_current(tp, entry.log.get())) continue;
    const absl::StatusOr<size_t> deleted = co_await entry.log->delete_old_segments();
    if (!is_current(tp, entry.log.get())) continue;
    if (!deleted.ok()) {
      co_await take_dir_offline(entry.dir, deleted.status());
    } else if (*deleted > 0) {
      ctx_->log().debug("retention deleted {} segments of {}", *deleted, tp);
    }
  }
}

io::Task<void> LogManager::run_cleaner() {
  std::vector<std::pair<TopicPartition, LogEntry>> snapshot(logs_.begin(), logs_.end());
  for (const auto& [tp, entry] : snapshot) {
    if (!is_current(tp, entry.log.get())) continue;
    const LogConfig& config = entry.log->config();
    if (!config.cleanup_compact || entry.log->dirty_ratio() < config.min_cleanable_dirty_ratio) {
      continue;
    }
    const absl::StatusOr<CompactionResult> cleaned =
        co_await entry.log->compact(config_.log_cleaner_dedupe_buffer_size);
    if (!is_current(tp, entry.log.get())) continue;
    if (!cleaned.ok()) {
      co_await take_dir_offline(entry.dir, cleaned.status());
    } else if (cleaned->segments_cleaned > 0) {
      ctx_->log().debug("cleaned {} segments of {}: {} records removed, {} -> {} bytes",
                        cleaned->segments_cleaned, tp, cleaned->records_removed,
                        cleaned->bytes_before, cleaned->bytes_after);
    }
  }
}

io::Task<void> LogManager::run_flush() {
  std::vector<std::pair<TopicPartition, LogEntry>> snapshot(logs_.begin(), logs_.end());
  for (const auto& [tp, entry] : snapshot) {
    if (!is_current(tp, entry.log.get())) continue;
    const absl::Status flushed = co_await entry.log->maybe_flush_by_time();
    if (!is_current(tp, entry.log.get())) continue;
    if (!flushed.ok()) co_await take_dir_offline(entry.dir, flushed);
  }
}

}  // namespace brook::storage
