// storage/log_manager.h
//
// LogManager: every partition log of one broker, across its log directories
// (Kafka's `log.dirs`; Kafka's LogManager). It loads the logs at startup,
// places new ones, deletes them, writes the per-directory offset checkpoints,
// runs retention and time-based flushing in the background, and takes a whole
// directory offline when its disk fails, while the other directories keep
// serving (Kafka's JBOD failure handling, KIP-112).
//
// On-disk layout of one log directory (each directory is its own io::Disk
// rooted there):
//
//   <topic>-<partition>/                   a partition's log (storage/log.h)
//   <topic>-<partition>.<id>-delete/       a partition being deleted; <id> is
//                                          kDeleteDirIdHexBytes hex digits
//   recovery-point-offset-checkpoint       Log::recovery_point() per partition
//   log-start-offset-checkpoint            Log::log_start_offset()
//   replication-offset-checkpoint          Log::high_watermark()
//   <checkpoint>.tmp                       leftover of an interrupted write
//
// The checkpoint files use Kafka's offset checkpoint format and are replaced
// atomically (storage/checkpoint.h). A partition directory name splits at its
// right-most '-': the topic before it (a legal topic name), the partition
// after it (canonical decimal, >= 0). Other names are ignored.
//
// Durability. A created partition directory is durable (its parent synced)
// before the log is handed out. A deletion renames the directory to its
// `-delete` name and syncs the root before removing anything, then rewrites
// the directory's checkpoints without the partition, so a crash leaves either
// the whole old partition or a `-delete` directory that startup removes.
// truncate_to() rewrites the recovery point checkpoint before it returns: a
// truncation lowers a recovery point, and a stale higher one would make the
// next recovery trust unsynced data written after the truncation.
//
// Failure. An I/O error from a directory (listing, checkpoint reading or
// writing, creating, opening, deleting a log) or a log of it that reports
// offline() takes the directory offline for good: its failure is logged, its
// logs are dropped from the map (get_log() no longer finds them) and closed,
// partitions it held cannot be recreated elsewhere, and the dir-failure
// listener is called once. Startup fails only when every directory is offline.
// A corrupt checkpoint file is not a failure: it is logged and read as empty
// (recovery then starts from the first segment), as Kafka does.
//
// Concurrency. Single event loop. Creation and deletion are serialised;
// checkpoint writes are serialised per directory (they share `<name>.tmp`).
// Every step re-checks, after each co_await, that the log it works on is
// still in the map and its directory still online.
//
// Lifetime. A Log* from get_log()/get_or_create_log() stays valid until
// delete_log() of that partition returns, or until the LogManager is
// destroyed (logs of a failed directory and logs closed by shutdown() are
// kept, closed, until then). The LogManager outlives every task that uses it,
// run_background() included (cancel it by destroying the scope running it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/context.h"
#include "io/disk.h"
#include "io/sync.h"
#include "io/task.h"
#include "storage/checkpoint.h"
#include "storage/log.h"
#include "storage/log_config.h"

namespace brook::storage {

// One entry of `log.dirs`.
struct LogDirSpec {
  std::string path;           // names the directory in messages and to the listener
  io::Disk* disk = nullptr;   // rooted at the directory; outlives the LogManager
};

// Broker-level settings, under Kafka's names. Intervals are milliseconds;
// kNoLimit means never.
struct LogManagerConfig {
  // The log.* defaults of every topic.
  LogConfig default_config;
  // Per-topic overrides: the whole LogConfig of a topic (empty: the default
  // for every topic).
  std::function<LogConfig(const std::string& topic)> topic_config;
  // num.recovery.threads.per.data.dir: logs opened (and closed at shutdown)
  // at once per directory. At least 1.
  int32_t num_recovery_threads_per_data_dir = 2;
  // log.initial.task.delay.ms: the first run of every background job.
  int64_t log_initial_task_delay_ms = 30'000;
  // log.retention.check.interval.ms: how often retention runs.
  int64_t log_retention_check_interval_ms = 300'000;
  // log.cleaner.enable / log.cleaner.backoff.ms / log.cleaner.dedupe.buffer.size:
  // compacted logs whose dirty ratio reached min.cleanable.dirty.ratio get
  // a cleaning pass this often, with a key map of this many bytes.
  bool log_cleaner_enable = true;
  int64_t log_cleaner_backoff_ms = 15'000;
  size_t log_cleaner_dedupe_buffer_size = size_t{128} << 20;
  // log.flush.scheduler.interval.ms: how often flush.ms is checked.
  int64_t log_flush_scheduler_interval_ms = kNoLimit;
  // log.flush.offset.checkpoint.interval.ms: recovery-point-offset-checkpoint.
  int64_t log_flush_offset_checkpoint_interval_ms = 60'000;
  // log.flush.start.offset.checkpoint.interval.ms: log-start-offset-checkpoint.
  int64_t log_flush_start_offset_checkpoint_interval_ms = 60'000;
  // replica.high.watermark.checkpoint.interval.ms: replication-offset-checkpoint
  // (Kafka's ReplicaManager writes it; kNoLimit leaves it to the broker).
  int64_t replica_high_watermark_checkpoint_interval_ms = 5'000;
};

// Intervals beyond this (about 31 years) count as never.
inline constexpr int64_t kIntervalMsMax = int64_t{1'000'000'000'000};
// Most logs opened or closed at once per directory.
inline constexpr int32_t kRecoveryThreadsPerDirMax = 1024;

// InvalidArgument naming the first bad setting: a non-positive interval or
// thread count, a negative initial delay, more threads than allowed.
absl::Status validate_log_manager_config(const LogManagerConfig& config);

// --- Directory names -------------------------------------------------------

inline constexpr std::string_view kDeleteDirSuffix = "-delete";
inline constexpr size_t kDeleteDirIdHexBytes = 32;

// "topic-3".
std::string partition_dir_name(const TopicPartition& tp);
// The partition a directory name names; nullopt for any other name (a
// `-delete` directory, a checkpoint file, a non-canonical partition number).
std::optional<TopicPartition> parse_partition_dir_name(std::string_view name);
// "topic-3.<id>-delete". REQUIRES: id is kDeleteDirIdHexBytes hex digits.
std::string deleted_partition_dir_name(const TopicPartition& tp, std::string_view id);
// Removes a flat directory (its files, then itself), or a file of that name.
// A name that is already gone is not an error.
io::Task<absl::Status> remove_tree(io::Disk& disk, std::string path);

// Kafka's isNew of getOrCreateLog: a partition the controller just created
// may be placed anywhere; one that existed before must not be recreated while
// a directory that may hold it is offline.
enum class PartitionOrigin : uint8_t { kNew, kExisting };

using DirFailureListener = std::function<void(const std::string& dir, const absl::Status& cause)>;

class LogManager {
 public:
  // REQUIRES: dirs is not empty; every disk is set; paths are distinct.
  LogManager(io::Context& ctx, std::vector<LogDirSpec> dirs, LogManagerConfig config);
  ~LogManager();
  LogManager(const LogManager&) = delete;
  LogManager& operator=(const LogManager&) = delete;

  // Called once per failed directory, with the cause (also at startup).
  void set_dir_failure_listener(DirFailureListener listener) { listener_ = std::move(listener); }

  // Cleans up leftovers (`-delete` directories, checkpoint `.tmp` files),
  // reads the checkpoints and opens every partition log, at most
  // num_recovery_threads_per_data_dir at once per directory, then rewrites
  // the checkpoints of every online directory. A partition found in two
  // directories takes the later one (in `dirs` order) offline. Unavailable
  // when every directory is offline; InvalidArgument for a bad config.
  // REQUIRES: called once, first.
  io::Task<absl::Status> startup();

  // Closes every log (flushing it), in bounded parallel per directory, then
  // writes the checkpoints of every directory still online. Returns the
  // first failure (whose directory is then offline). REQUIRES: after a
  // successful startup(); at most once; no other call in progress or after.
  io::Task<absl::Status> shutdown();

  // Background jobs on ctx.clock(), forever: retention every
  // log_retention_check_interval_ms, Log::maybe_flush_by_time() every
  // log_flush_scheduler_interval_ms, each checkpoint at its interval, all
  // first after log_initial_task_delay_ms; after every wake-up, any log that
  // reports offline() takes its directory offline. Cancel by destroying the
  // scope that runs it. REQUIRES: after a successful startup().
  io::Task<void> run_background();

  // nullptr when no online directory holds the partition.
  Log* get_log(const TopicPartition& tp) const;
  // The existing log, or a new one in the online directory with the fewest
  // partitions (ties: the first); `config` overrides the topic's config.
  // InvalidArgument for an illegal topic name or a negative partition;
  // Unavailable when the partition was in an offline directory, when no
  // directory is online, or for kExisting while any directory is offline;
  // the directory's failure when creating fails.
  io::Task<absl::StatusOr<Log*>> get_or_create_log(TopicPartition tp,
                                                   std::optional<LogConfig> config = std::nullopt,
                                                   PartitionOrigin origin = PartitionOrigin::kNew);
  // Closes the log and removes its directory durably (see the header
  // comment). NotFound when there is no such log; Unavailable when its
  // directory is offline. REQUIRES: no task outside the LogManager uses the
  // log any more.
  io::Task<absl::Status> delete_log(TopicPartition tp);
  // Truncates each listed log (unknown partitions are skipped) and then
  // rewrites the recovery point checkpoint of every directory where a log
  // was truncated. Returns the first failure. REQUIRES: offsets >= 0.
  io::Task<absl::Status> truncate_to(std::map<TopicPartition, int64_t> offsets);

  // Each writes its file in every online directory; a write error takes that
  // directory offline. Returns the first failure.
  io::Task<absl::Status> checkpoint_recovery_points();
  io::Task<absl::Status> checkpoint_log_start_offsets();
  io::Task<absl::Status> checkpoint_high_watermarks();

  // Takes a directory offline (Kafka's handleLogDirFailure); no-op when it is
  // already offline or unknown. For callers that saw an I/O error from a log.
  io::Task<void> mark_dir_offline(std::string dir, absl::Status cause);

  // Every served log, ordered by partition.
  std::vector<std::pair<TopicPartition, Log*>> all_logs() const;
  // Offline directories in `dirs` order.
  std::vector<std::string> offline_dirs() const;
  bool is_online(std::string_view dir) const;
  // Why a directory is offline (OK while online; NotFound for an unknown one).
  absl::Status dir_failure(std::string_view dir) const;
  // The directory holding a served log.
  std::optional<std::string> dir_of(const TopicPartition& tp) const;
  // Served logs in a directory.
  size_t partition_count(std::string_view dir) const;

 private:
  struct LogDir;
  struct LogEntry {
    std::shared_ptr<Log> log;
    size_t dir = 0;
  };
  struct DirScan;
  enum class CheckpointKind : uint8_t { kRecoveryPoint, kLogStartOffset, kHighWatermark };
  enum class State : uint8_t { kCreated, kStarting, kRunning, kShutDown };

  io::Task<absl::StatusOr<DirScan>> scan_dir(size_t dir);
  io::Task<absl::Status> remove_leftovers(size_t dir, std::vector<std::string> names);
  void fail_duplicate_dirs(const std::vector<absl::StatusOr<DirScan>>& scans);
  io::Task<void> load_dir(size_t dir, DirScan scan);
  io::Task<void> open_existing_log(size_t dir, TopicPartition tp, LogOptions options);
  io::Task<absl::StatusOr<Log*>> create_log(TopicPartition tp, LogConfig config);
  io::Task<absl::Status> remove_deleted_dir(size_t dir, TopicPartition tp);
  io::Task<absl::Status> shutdown_dir(size_t dir);
  io::Task<void> run_job(size_t job);

  io::Task<absl::Status> write_checkpoint(size_t dir, CheckpointKind kind,
                                          std::optional<OffsetCheckpoint> values);
  io::Task<absl::Status> write_all_checkpoints(size_t dir);
  io::Task<absl::Status> checkpoint_every_dir(CheckpointKind kind);
  OffsetCheckpoint checkpoint_values(size_t dir, CheckpointKind kind) const;

  // Marks the directory offline and hands back its logs (removed from the
  // map), without awaiting; the caller closes them.
  std::vector<std::shared_ptr<Log>> fail_dir(size_t dir, const absl::Status& cause);
  // fail_dir, then closes the logs.
  io::Task<void> take_dir_offline(size_t dir, absl::Status cause);
  io::Task<absl::Status> close_logs(std::vector<std::shared_ptr<Log>> logs);
  io::Task<void> take_failed_logs_offline();
  io::Task<void> run_retention();
  io::Task<void> run_cleaner();
  io::Task<void> run_flush();

  bool is_current(const TopicPartition& tp, const Log* log) const;
  std::optional<size_t> dir_index(std::string_view dir) const;
  std::optional<size_t> least_loaded_dir() const;
  LogConfig config_for(const std::string& topic) const;
  size_t recovery_threads() const;

  io::Context* ctx_;
  LogManagerConfig config_;
  std::vector<std::unique_ptr<LogDir>> dirs_;
  std::map<TopicPartition, LogEntry> logs_;
  // Partitions lost with a failed directory: never recreated elsewhere.
  std::map<TopicPartition, size_t> offline_partitions_;
  // Closed logs kept alive for holders of their Log* (see Lifetime); at most
  // one per partition ever loaded or created.
  std::vector<std::shared_ptr<Log>> retired_;
  io::Mutex lifecycle_mutex_;  // creation and deletion
  DirFailureListener listener_;
  State state_ = State::kCreated;
};

}  // namespace brook::storage
