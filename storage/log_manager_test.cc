// storage/log_manager_test.cc
//
// Tests of LogManager on the simulator's disks (one SimDisk per log
// directory) and a virtual clock: placement, restart from the checkpoints,
// crash recovery, directory failures at startup and at run time, deletion
// (with crashes in the middle), bounded parallel loading, background
// retention, truncation checkpoints, and a property test against a model of
// the partitions a broker holds.
#include "storage/log_manager.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "fmt/format.h"
#include "io/context.h"
#include "io/log.h"
#include "io/random.h"
#include "io/scope.h"
#include "io/when.h"
#include "net/kafka/record_batch.h"
#include "sim/disk.h"
#include "sim/test_executor.h"
#include "storage/checkpoint.h"
#include "storage/segment.h"

namespace brook::storage {

// For test failure messages.
std::ostream& operator<<(std::ostream& os, const TopicPartition& p) {
  return os << fmt::format("{}", p);
}

namespace {

using std::chrono::milliseconds;

// Logic under test never touches the network.
class NoNetwork final : public io::Network {
 public:
  io::Task<absl::StatusOr<std::unique_ptr<io::Listener>>> listen(io::Address) override {
    co_return absl::UnimplementedError("no network in this test");
  }
  io::Task<absl::StatusOr<std::unique_ptr<io::Connection>>> connect(io::Address) override {
    co_return absl::UnimplementedError("no network in this test");
  }
};

class CaptureSink final : public io::LogSink {
 public:
  void write(io::LogLevel, std::string_view line) override { lines.emplace_back(line); }
  std::vector<std::string> lines;
};

// A Disk that forwards to another and records, per partition directory,
// how many of its operations are in flight; `max_partitions_busy` is the
// most partitions with an operation in flight at once.
class CountingDisk final : public io::Disk {
 public:
  explicit CountingDisk(io::Disk* inner) : inner_(inner) {}

  io::Task<absl::StatusOr<std::unique_ptr<io::File>>> open(std::string path,
                                                           io::OpenMode mode) override {
    Busy busy(this, path);
    co_return co_await inner_->open(path, mode);
  }
  io::Task<absl::Status> rename(std::string from, std::string to) override {
    Busy busy(this, from);
    co_return co_await inner_->rename(from, to);
  }
  io::Task<absl::Status> remove(std::string path) override {
    Busy busy(this, path);
    co_return co_await inner_->remove(path);
  }
  io::Task<absl::Status> make_dir(std::string path) override {
    Busy busy(this, path);
    co_return co_await inner_->make_dir(path);
  }
  io::Task<absl::StatusOr<std::vector<std::string>>> list(std::string dir) override {
    Busy busy(this, dir);
    co_return co_await inner_->list(dir);
  }
  io::Task<absl::Status> sync_dir(std::string dir) override {
    Busy busy(this, dir);
    co_return co_await inner_->sync_dir(dir);
  }

  size_t max_partitions_busy = 0;
  void reset() { max_partitions_busy = 0; }

 private:
  class Busy {
   public:
    Busy(CountingDisk* disk, const std::string& path) : disk_(disk) {
      const std::string first = path.substr(0, path.find('/'));
      if (parse_partition_dir_name(first).has_value()) key_ = first;
      if (!key_.empty()) {
        ++disk_->in_flight_[key_];
        disk_->max_partitions_busy = std::max(disk_->max_partitions_busy, disk_->in_flight_.size());
      }
    }
    ~Busy() {
      if (key_.empty()) return;
      if (--disk_->in_flight_[key_] == 0) disk_->in_flight_.erase(key_);
    }
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

   private:
    CountingDisk* disk_;
    std::string key_;
  };

  io::Disk* inner_;
  std::map<std::string, int> in_flight_;
};

io::Buffer make_batch(int records, char fill, int64_t timestamp_ms, size_t value_bytes = 40) {
  net::RecordBatchBuilder builder(net::RecordBatchOptions{});
  for (int i = 0; i < records; ++i) {
    net::NewRecord r;
    r.timestamp_ms = timestamp_ms;
    r.key = io::Buffer::copy_of(fmt::format("k{}", i));
    r.value = io::Buffer::copy_of(std::string(value_bytes, fill));
    builder.append(std::move(r));
  }
  absl::StatusOr<io::Buffer> built = builder.build();
  BROOK_ASSERT(built.ok());
  return *built;
}

TopicPartition tp(std::string topic, int32_t partition) {
  return TopicPartition{std::move(topic), partition};
}

// One broker: an executor, a clock, its log directories (SimDisks) and,
// while started, a LogManager.
class Broker {
 public:
  explicit Broker(uint64_t seed, size_t dir_count = 2, sim::DiskFaults faults = {})
      : clock_(ex_), random_(seed), logger_(0, clock_, sink_, io::LogLevel::kDebug) {
    for (size_t i = 0; i < dir_count; ++i) {
      disks_.push_back(std::make_unique<sim::SimDisk>(io::Random(seed * 7919 + i), faults));
      paths_.push_back(fmt::format("/data/d{}", i));
    }
    ctx_ = std::make_unique<io::Context>(io::NodeId{1}, ex_, clock_, *disks_[0], network_, random_,
                                         logger_);
  }
  ~Broker() {
    background_.reset();
    work_.reset();
    manager_.reset();
  }

  // Runs `task` to completion, letting virtual time pass (and the
  // background task run) meanwhile.
  template <typename T>
  T run(io::Task<T> task) {
    std::optional<io::detail::ResultOf<T>> result;
    {
      io::TaskScope scope(ex_);
      scope.spawn(io::detail::store_into(std::move(task), &result));
      for (int step = 0; step < 10'000'000 && !result.has_value(); ++step) advance(milliseconds(1));
      BROOK_ASSERT(result.has_value());
    }
    if constexpr (!std::is_void_v<T>) return std::move(*result);
  }
  void advance(io::Duration d) {
    cursor_ = std::max(cursor_, ex_.now()) + d;
    ex_.run_until(cursor_);
  }

  std::vector<LogDirSpec> specs(std::vector<io::Disk*> disks = {}) {
    std::vector<LogDirSpec> out;
    for (size_t i = 0; i < disks_.size(); ++i) {
      out.push_back({paths_[i], i < disks.size() ? disks[i] : disks_[i].get()});
    }
    return out;
  }
  absl::Status start(LogManagerConfig config = {}, std::vector<io::Disk*> disks = {}) {
    BROOK_ASSERT(manager_ == nullptr);
    manager_ = std::make_unique<LogManager>(*ctx_, specs(std::move(disks)), std::move(config));
    manager_->set_dir_failure_listener([this](const std::string& dir, const absl::Status& cause) {
      failures.emplace_back(dir, cause);
    });
    return run(manager_->startup());
  }
  void stop() {
    background_.reset();
    const absl::Status s = run(manager_->shutdown());
    EXPECT_TRUE(s.ok()) << s;
    manager_.reset();
  }
  // Power loss of every disk; the manager dies with the process.
  void crash() {
    background_.reset();
    work_.reset();
    for (auto& disk : disks_) disk->crash();
    manager_.reset();
  }
  // Runs a status task alongside; spawned_result() once it finished.
  void spawn(io::Task<absl::Status> task) {
    spawned_result_.reset();
    work_ = std::make_unique<io::TaskScope>(ex_);
    work_->spawn(io::detail::store_into(std::move(task), &spawned_result_));
  }
  std::optional<absl::Status> spawned_result() const { return spawned_result_; }
  bool background_running() const { return background_ != nullptr && !background_->empty(); }
  void start_background() {
    background_ = std::make_unique<io::TaskScope>(ex_);
    background_->spawn(manager_->run_background());
  }

  Log* create(const TopicPartition& p, std::optional<LogConfig> config = std::nullopt) {
    absl::StatusOr<Log*> log = run(manager_->get_or_create_log(p, config));
    EXPECT_TRUE(log.ok()) << log.status();
    return log.ok() ? *log : nullptr;
  }
  absl::Status append(Log& log, char fill, int records = 1) {
    absl::StatusOr<AppendResult> r = run(
        log.append_as_leader(make_batch(records, fill, io::to_ms(clock_.wall_now())), 0));
    if (!r.ok()) return r.status();
    EXPECT_TRUE(r->ok()) << r->error_message;
    return absl::OkStatus();
  }
  // The first value byte of every record from `from` to the log end.
  std::string fills(Log& log, int64_t from = -1) {
    std::string out;
    int64_t next = from < 0 ? log.log_start_offset() : from;
    while (next < log.log_end_offset()) {
      absl::StatusOr<ReadResult> r = run(log.read(next, 1 << 20, ReadBound::kLogEnd, true));
      if (!r.ok() || r->records.empty()) {
        ADD_FAILURE() << "read at " << next << ": " << (r.ok() ? "empty" : r.status().ToString());
        break;
      }
      net::BatchIterator it(r->records);
      while (true) {
        absl::StatusOr<std::optional<net::BatchView>> batch = it.next();
        EXPECT_TRUE(batch.ok()) << batch.status();
        if (!batch.ok() || !batch->has_value()) break;
        absl::StatusOr<std::vector<net::Record>> records =
            net::decode_records((*batch)->bytes, size_t{1} << 20);
        EXPECT_TRUE(records.ok()) << records.status();
        if (!records.ok()) break;
        for (const net::Record& rec : *records) {
          const int64_t offset = net::record_offset((*batch)->header, rec);
          if (offset < next) continue;
          out.push_back(rec.value.has_value() && !rec.value->empty() ? rec.value->view()[0] : '?');
          next = offset + 1;
        }
      }
    }
    return out;
  }
  OffsetCheckpoint checkpoint(size_t dir, std::string_view name) {
    absl::StatusOr<OffsetCheckpoint> read =
        run(read_offset_checkpoint(*disks_[dir], std::string(name)));
    EXPECT_TRUE(read.ok()) << read.status();
    return read.ok() ? *read : OffsetCheckpoint{};
  }
  const std::string& path(size_t dir) const { return paths_[dir]; }
  sim::SimDisk& disk(size_t dir) { return *disks_[dir]; }
  LogManager& manager() { return *manager_; }
  bool started() const { return manager_ != nullptr; }
  sim::TestClock& clock() { return clock_; }
  const std::vector<std::string>& log_lines() const { return sink_.lines; }

  std::vector<std::pair<std::string, absl::Status>> failures;

 private:
  sim::TestExecutor ex_;
  sim::TestClock clock_;
  io::Random random_;
  NoNetwork network_;
  CaptureSink sink_;
  io::Logger logger_;
  std::vector<std::unique_ptr<sim::SimDisk>> disks_;
  std::vector<std::string> paths_;
  std::unique_ptr<io::Context> ctx_;
  std::unique_ptr<LogManager> manager_;
  std::unique_ptr<io::TaskScope> background_;
  std::unique_ptr<io::TaskScope> work_;
  std::optional<absl::Status> spawned_result_;
  io::Instant cursor_{};
};

bool has_path_with(const std::map<std::string, std::string>& files, std::string_view needle) {
  return std::any_of(files.begin(), files.end(),
                     [&](const auto& f) { return f.first.find(needle) != std::string::npos; });
}
bool has_dir_with(const std::vector<std::string>& dirs, std::string_view needle) {
  return std::any_of(dirs.begin(), dirs.end(),
                     [&](const std::string& d) { return d.find(needle) != std::string::npos; });
}

// --- Directory names -------------------------------------------------------

// Partition directory names split at the right-most '-' and are canonical.
TEST(LogDirNames, ParseAndFormat) {
  EXPECT_EQ(partition_dir_name(tp("orders", 3)), "orders-3");
  EXPECT_EQ(parse_partition_dir_name("orders-3"), tp("orders", 3));
  EXPECT_EQ(parse_partition_dir_name("my-topic.v2-17"), tp("my-topic.v2", 17));
  EXPECT_EQ(parse_partition_dir_name("t--1"), tp("t-", 1));
  for (std::string_view bad :
       {"orders", "orders-", "-3", "orders-03", "orders-+3", "orders-x", "orders-2147483648",
        "recovery-point-offset-checkpoint", "replication-offset-checkpoint",
        "orders-3.0123456789abcdef0123456789abcdef-delete", "bad topic-1", "..-1"}) {
    EXPECT_EQ(parse_partition_dir_name(bad), std::nullopt) << bad;
  }
  const std::string deleted =
      deleted_partition_dir_name(tp("orders", 3), "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(deleted, "orders-3.0123456789abcdef0123456789abcdef-delete");
}

RC_GTEST_PROP(LogDirNames, RoundTripAndDeletedNamesNeverParse, ()) {
  const std::string alphabet = "abcXYZ019._-";
  const size_t length = *rc::gen::inRange<size_t>(1, 30);
  std::string topic;
  for (size_t i = 0; i < length; ++i) {
    topic.push_back(alphabet[*rc::gen::inRange<size_t>(0, alphabet.size())]);
  }
  RC_PRE(is_legal_topic_name(topic));
  const int32_t partition = *rc::gen::inRange<int32_t>(0, std::numeric_limits<int32_t>::max());
  const TopicPartition p{topic, partition};
  RC_ASSERT(parse_partition_dir_name(partition_dir_name(p)) == std::optional(p));
  RC_ASSERT(!parse_partition_dir_name(
                 deleted_partition_dir_name(p, "00000000000000000000000000000000"))
                 .has_value());
}

TEST(LogManagerConfigTest, RejectsBadSettings) {
  EXPECT_TRUE(validate_log_manager_config({}).ok());
  LogManagerConfig c;
  c.num_recovery_threads_per_data_dir = 0;
  EXPECT_EQ(validate_log_manager_config(c).code(), absl::StatusCode::kInvalidArgument);
  c = {};
  c.log_retention_check_interval_ms = 0;
  EXPECT_EQ(validate_log_manager_config(c).code(), absl::StatusCode::kInvalidArgument);
  c = {};
  c.log_initial_task_delay_ms = -1;
  EXPECT_EQ(validate_log_manager_config(c).code(), absl::StatusCode::kInvalidArgument);
}

// --- Placement, restart, checkpoints ----------------------------------------

// New logs go to the directory with the fewest partitions (first on a tie);
// a clean shutdown checkpoints recovery points (= log ends), log start
// offsets and high watermarks, and a restart serves the same logs with
// the offsets read back from those files.
TEST(LogManagerTest, PlacementBalancesAndRestartRestoresOffsets) {
  Broker b(1);
  ASSERT_TRUE(b.start().ok());
  const std::vector<TopicPartition> parts = {tp("t", 0), tp("t", 1), tp("t", 2), tp("t", 3),
                                             tp("u", 0)};
  std::map<TopicPartition, int64_t> leo;
  for (size_t i = 0; i < parts.size(); ++i) {
    Log* log = b.create(parts[i]);
    ASSERT_NE(log, nullptr);
    EXPECT_EQ(b.manager().dir_of(parts[i]), b.path(i % 2)) << parts[i];
    for (size_t n = 0; n < 4 + i; ++n) ASSERT_TRUE(b.append(*log, static_cast<char>('a' + n)).ok());
    leo[parts[i]] = log->log_end_offset();
  }
  EXPECT_EQ(b.manager().partition_count(b.path(0)), 3u);
  EXPECT_EQ(b.manager().partition_count(b.path(1)), 2u);
  // The same partition again is the same log.
  EXPECT_EQ(b.create(parts[0]), b.manager().get_log(parts[0]));
  Log* t1 = b.manager().get_log(tp("t", 1));
  t1->set_high_watermark(4);
  ASSERT_EQ(b.run(t1->delete_records_before(3)).value(), net::Error::kNone);
  b.manager().get_log(tp("u", 0))->set_high_watermark(6);
  b.stop();

  const OffsetCheckpoint rp0 = b.checkpoint(0, kRecoveryPointCheckpointFileName);
  const OffsetCheckpoint rp1 = b.checkpoint(1, kRecoveryPointCheckpointFileName);
  EXPECT_EQ(rp0, (OffsetCheckpoint{{tp("t", 0), 4}, {tp("t", 2), 6}, {tp("u", 0), 8}}));
  EXPECT_EQ(rp1, (OffsetCheckpoint{{tp("t", 1), 5}, {tp("t", 3), 7}}));
  EXPECT_EQ(b.checkpoint(1, kLogStartOffsetCheckpointFileName).at(tp("t", 1)), 3);
  EXPECT_EQ(b.checkpoint(0, kReplicationOffsetCheckpointFileName).at(tp("u", 0)), 6);

  ASSERT_TRUE(b.start().ok());
  std::vector<TopicPartition> served;
  for (const auto& [p, log] : b.manager().all_logs()) {
    served.push_back(p);
    EXPECT_EQ(log->log_end_offset(), leo[p]) << p;
  }
  EXPECT_EQ(served, (std::vector<TopicPartition>{tp("t", 0), tp("t", 1), tp("t", 2), tp("t", 3),
                                                 tp("u", 0)}));
  for (size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ(b.manager().dir_of(parts[i]), b.path(i % 2));
  }
  EXPECT_EQ(b.manager().get_log(tp("t", 1))->log_start_offset(), 3);
  EXPECT_EQ(b.manager().get_log(tp("u", 0))->high_watermark(), 6);
  EXPECT_EQ(b.fills(*b.manager().get_log(tp("t", 2))), "abcdef");
  EXPECT_TRUE(b.failures.empty());
  b.stop();
}

// The recovery point read from the checkpoint is what Log::open trusts: a
// corrupted byte in a segment below it goes unnoticed (no rescan), while
// without the checkpoint recovery scans that segment and cuts the log there.
TEST(LogManagerTest, RecoveryPointComesFromTheCheckpoint) {
  for (const bool drop_checkpoint : {false, true}) {
    SCOPED_TRACE(drop_checkpoint ? "checkpoint removed" : "checkpoint kept");
    Broker b(2, 1);
    LogManagerConfig config;
    config.default_config.segment_bytes = 1024;
    ASSERT_TRUE(b.start(config).ok());
    Log* log = b.create(tp("t", 0));
    for (int i = 0; i < 30; ++i) ASSERT_TRUE(b.append(*log, 'v').ok());
    ASSERT_GT(log->segment_count(), 2u);
    const int64_t leo = log->log_end_offset();
    b.stop();
    const size_t batch_bytes = make_batch(1, 'v', 0).size();
    // A byte of the first record's value, inside the CRC-covered part.
    ASSERT_TRUE(b.disk(0).inject_bit_rot("t-0/00000000000000000000.log", batch_bytes - 10).ok());
    if (drop_checkpoint) {
      ASSERT_TRUE(b.run(b.disk(0).remove(std::string(kRecoveryPointCheckpointFileName))).ok());
    }
    ASSERT_TRUE(b.start(config).ok());
    Log* reopened = b.manager().get_log(tp("t", 0));
    ASSERT_NE(reopened, nullptr);
    if (drop_checkpoint) {
      EXPECT_EQ(reopened->log_end_offset(), 0) << "recovery must cut at the corrupt first batch";
    } else {
      EXPECT_EQ(reopened->log_end_offset(), leo);
    }
    b.stop();
  }
}

// After a power loss between appends, every log recovers: it keeps at least
// what was flushed, at most what was appended, and the records it keeps are
// the ones appended.
TEST(LogManagerTest, CrashBetweenAppendsRecovers) {
  for (uint64_t seed = 10; seed < 40; ++seed) {
    SCOPED_TRACE(seed);
    Broker b(seed);
    LogManagerConfig config;
    config.default_config.segment_bytes = 600;
    ASSERT_TRUE(b.start(config).ok());
    std::map<TopicPartition, std::string> appended;
    std::map<TopicPartition, int64_t> flushed;
    io::Random choose(seed);
    for (int32_t p = 0; p < 4; ++p) {
      Log* log = b.create(tp("t", p));
      std::string& fills = appended[tp("t", p)];
      const int first = 3 + static_cast<int>(choose.uniform(8));
      for (int i = 0; i < first; ++i) {
        fills.push_back(static_cast<char>('a' + choose.uniform(26)));
        ASSERT_TRUE(b.append(*log, fills.back()).ok());
      }
      ASSERT_TRUE(b.run(log->flush()).ok());
      flushed[tp("t", p)] = log->log_end_offset();
      const int second = static_cast<int>(choose.uniform(8));
      for (int i = 0; i < second; ++i) {
        fills.push_back(static_cast<char>('a' + choose.uniform(26)));
        ASSERT_TRUE(b.append(*log, fills.back()).ok());
      }
    }
    if (seed % 2 == 0) {
      ASSERT_TRUE(b.run(b.manager().checkpoint_recovery_points()).ok());
    }
    b.crash();
    ASSERT_TRUE(b.start(config).ok());
    for (const auto& [p, fills] : appended) {
      Log* log = b.manager().get_log(p);
      ASSERT_NE(log, nullptr) << p;
      EXPECT_GE(log->log_end_offset(), flushed[p]) << p;
      EXPECT_LE(log->log_end_offset(), static_cast<int64_t>(fills.size())) << p;
      EXPECT_EQ(b.fills(*log), fills.substr(0, static_cast<size_t>(log->log_end_offset()))) << p;
    }
    b.stop();
  }
}

// --- Directory failures ----------------------------------------------------

// A directory whose disk fails every metadata operation goes offline at
// startup with a message naming it and the cause; the other one serves.
TEST(LogManagerTest, DirectoryFailingAtStartupGoesOfflineAlone) {
  Broker b(3);
  ASSERT_TRUE(b.start().ok());
  for (int32_t p = 0; p < 4; ++p) ASSERT_TRUE(b.append(*b.create(tp("t", p)), 'x').ok());
  b.stop();
  sim::DiskFaults faults;
  faults.metadata_error_probability = 1;
  b.disk(1).set_faults(faults);

  ASSERT_TRUE(b.start().ok());
  EXPECT_EQ(b.manager().offline_dirs(), std::vector<std::string>{b.path(1)});
  EXPECT_TRUE(b.manager().is_online(b.path(0)));
  EXPECT_FALSE(b.manager().is_online(b.path(1)));
  const absl::Status failure = b.manager().dir_failure(b.path(1));
  EXPECT_FALSE(failure.ok());
  EXPECT_NE(failure.message().find(b.path(1)), std::string::npos) << failure;
  EXPECT_NE(failure.message().find("cannot list"), std::string::npos) << failure;
  EXPECT_TRUE(std::any_of(b.log_lines().begin(), b.log_lines().end(), [&](const std::string& l) {
    return l.find(b.path(1)) != std::string::npos && l.find("offline") != std::string::npos;
  }));
  ASSERT_EQ(b.failures.size(), 1u);
  EXPECT_EQ(b.failures[0].first, b.path(1));

  EXPECT_NE(b.manager().get_log(tp("t", 0)), nullptr);
  EXPECT_NE(b.manager().get_log(tp("t", 2)), nullptr);
  EXPECT_EQ(b.manager().get_log(tp("t", 1)), nullptr);
  EXPECT_EQ(b.manager().get_log(tp("t", 3)), nullptr);
  // An existing partition may have lived in the offline directory.
  EXPECT_EQ(b.run(b.manager().get_or_create_log(tp("t", 1), std::nullopt,
                                                PartitionOrigin::kExisting))
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
  // A new one goes to the online directory.
  ASSERT_NE(b.create(tp("new", 0)), nullptr);
  EXPECT_EQ(b.manager().dir_of(tp("new", 0)), b.path(0));
  EXPECT_TRUE(b.run(b.manager().checkpoint_recovery_points()).ok());
  b.stop();
}

TEST(LogManagerTest, StartupFailsWhenEveryDirectoryIsOffline) {
  sim::DiskFaults faults;
  faults.metadata_error_probability = 1;
  Broker b(4, 2, faults);
  const absl::Status s = b.start();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find(b.path(0)), std::string::npos) << s;
  EXPECT_NE(s.message().find(b.path(1)), std::string::npos) << s;
  EXPECT_EQ(b.failures.size(), 2u);
}

// A partition found in two directories takes the later one offline.
TEST(LogManagerTest, PartitionInTwoDirectoriesTakesTheLaterOffline) {
  Broker b(5);
  ASSERT_TRUE(b.start().ok());
  ASSERT_TRUE(b.append(*b.create(tp("t", 0)), 'a').ok());  // dir 0
  ASSERT_TRUE(b.append(*b.create(tp("x", 0)), 'b').ok());  // dir 1
  b.stop();
  {
    LogOptions options;
    options.dir = "t-0";
    absl::StatusOr<std::unique_ptr<Log>> stray = b.run(Log::open(b.disk(1), b.clock(), options));
    ASSERT_TRUE(stray.ok()) << stray.status();
    ASSERT_TRUE(b.run((*stray)->close()).ok());
  }
  ASSERT_TRUE(b.start().ok());
  EXPECT_EQ(b.manager().offline_dirs(), std::vector<std::string>{b.path(1)});
  const absl::Status failure = b.manager().dir_failure(b.path(1));
  EXPECT_NE(failure.message().find("t-0"), std::string::npos) << failure;
  EXPECT_NE(failure.message().find(b.path(0)), std::string::npos) << failure;
  ASSERT_NE(b.manager().get_log(tp("t", 0)), nullptr);
  EXPECT_EQ(b.manager().dir_of(tp("t", 0)), b.path(0));
  EXPECT_EQ(b.manager().get_log(tp("t", 0))->log_end_offset(), 1);
  EXPECT_EQ(b.manager().get_log(tp("x", 0)), nullptr);
  // Its partitions are known from the listing: not recreated elsewhere.
  EXPECT_EQ(b.run(b.manager().get_or_create_log(tp("x", 0))).status().code(),
            absl::StatusCode::kUnavailable);
  b.stop();
}

// Write errors at run time make a log offline; the background task notices
// and takes the whole directory offline once; the other directory goes on.
TEST(LogManagerTest, RuntimeWriteErrorsTakeTheDirectoryOfflineOnce) {
  for (const bool checkpoints : {false, true}) {
    SCOPED_TRACE(checkpoints ? "with checkpoints" : "offline scan only");
    Broker b(6);
    LogManagerConfig config;
    config.log_initial_task_delay_ms = 1000;
    config.log_flush_scheduler_interval_ms = 1000;  // flush.ms is never: a no-op job
    config.log_retention_check_interval_ms = kNoLimit;
    config.replica_high_watermark_checkpoint_interval_ms = kNoLimit;
    config.log_flush_start_offset_checkpoint_interval_ms = kNoLimit;
    config.log_flush_offset_checkpoint_interval_ms = checkpoints ? 1000 : kNoLimit;
    ASSERT_TRUE(b.start(config).ok());
    Log* t0 = b.create(tp("t", 0));  // dir 0
    Log* t1 = b.create(tp("t", 1));  // dir 1
    Log* t2 = b.create(tp("t", 2));  // dir 0
    for (Log* log : {t0, t1, t2}) ASSERT_TRUE(b.append(*log, 'a').ok());
    b.start_background();
    b.advance(milliseconds(1500));
    EXPECT_TRUE(b.failures.empty());

    sim::DiskFaults faults;
    faults.write_error_probability = 1;
    b.disk(0).set_faults(faults);
    EXPECT_FALSE(b.append(*t0, 'b').ok());
    EXPECT_TRUE(t0->offline());
    EXPECT_TRUE(b.manager().is_online(b.path(0)));  // not yet noticed
    b.advance(milliseconds(5000));

    ASSERT_EQ(b.failures.size(), 1u);
    EXPECT_EQ(b.failures[0].first, b.path(0));
    EXPECT_FALSE(b.manager().is_online(b.path(0)));
    EXPECT_EQ(b.manager().get_log(tp("t", 0)), nullptr);
    EXPECT_EQ(b.manager().get_log(tp("t", 2)), nullptr);
    ASSERT_EQ(b.manager().get_log(tp("t", 1)), t1);
    EXPECT_TRUE(b.append(*t1, 'c').ok());
    EXPECT_EQ(b.run(b.manager().get_or_create_log(tp("t", 0))).status().code(),
              absl::StatusCode::kUnavailable);
    EXPECT_EQ(b.run(b.manager().delete_log(tp("t", 2))).code(), absl::StatusCode::kUnavailable);
    ASSERT_NE(b.create(tp("t", 3)), nullptr);
    EXPECT_EQ(b.manager().dir_of(tp("t", 3)), b.path(1));
    ASSERT_TRUE(b.run(t1->flush()).ok());
    ASSERT_TRUE(b.run(b.manager().checkpoint_recovery_points()).ok());
    EXPECT_EQ(b.checkpoint(1, kRecoveryPointCheckpointFileName),
              (OffsetCheckpoint{{tp("t", 1), 2}, {tp("t", 3), 0}}));
    b.advance(milliseconds(5000));
    EXPECT_EQ(b.failures.size(), 1u);
    b.stop();
  }
}

// --- Deletion --------------------------------------------------------------

// delete_log removes every file of the partition and its checkpoint entries;
// the partition can then be created anew, empty.
TEST(LogManagerTest, DeleteLogLeavesNoFiles) {
  Broker b(7);
  LogManagerConfig config;
  config.default_config.segment_bytes = 600;
  ASSERT_TRUE(b.start(config).ok());
  Log* log = b.create(tp("gone", 0));
  Log* kept = b.create(tp("kept", 0));
  Log* also = b.create(tp("gone2", 0));  // dir 0, with "gone"
  for (int i = 0; i < 12; ++i) {
    for (Log* l : {log, kept, also}) ASSERT_TRUE(b.append(*l, 'z').ok());
  }
  ASSERT_TRUE(b.run(b.manager().checkpoint_recovery_points()).ok());
  ASSERT_TRUE(b.checkpoint(0, kRecoveryPointCheckpointFileName).contains(tp("gone", 0)));

  ASSERT_TRUE(b.run(b.manager().delete_log(tp("gone", 0))).ok());
  EXPECT_EQ(b.manager().get_log(tp("gone", 0)), nullptr);
  for (const sim::DiskView view : {sim::DiskView::kCurrent, sim::DiskView::kDurable}) {
    EXPECT_FALSE(has_path_with(b.disk(0).files(view), "gone-0"));
    EXPECT_FALSE(has_dir_with(b.disk(0).directories(view), "gone-0"));
    EXPECT_FALSE(has_dir_with(b.disk(0).directories(view), "-delete"));
    EXPECT_TRUE(has_dir_with(b.disk(0).directories(view), "gone2-0"));
  }
  for (std::string_view name : {kRecoveryPointCheckpointFileName, kLogStartOffsetCheckpointFileName,
                                kReplicationOffsetCheckpointFileName}) {
    const OffsetCheckpoint c = b.checkpoint(0, name);
    EXPECT_FALSE(c.contains(tp("gone", 0))) << name;
    EXPECT_TRUE(c.contains(tp("gone2", 0))) << name;
  }
  EXPECT_EQ(b.run(b.manager().delete_log(tp("gone", 0))).code(), absl::StatusCode::kNotFound);
  Log* again = b.create(tp("gone", 0));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->log_end_offset(), 0);
  EXPECT_EQ(b.fills(*kept).size(), 12u);
  b.stop();
}

// A crash anywhere inside delete_log leaves either the whole old partition
// or nothing; a `-delete` directory left behind is removed by startup.
TEST(LogManagerTest, CrashDuringDeleteLeavesOldPartitionOrNothing) {
  sim::DiskFaults slow;
  slow.latency_min = std::chrono::microseconds(100);
  slow.latency_max = std::chrono::microseconds(900);
  int kept = 0;
  int gone = 0;
  int leftover_dirs = 0;
  for (int crash_after_us = 0; crash_after_us < 40'000; crash_after_us += 400) {
    SCOPED_TRACE(crash_after_us);
    Broker b(100 + static_cast<uint64_t>(crash_after_us), 1, slow);
    ASSERT_TRUE(b.start().ok());
    Log* log = b.create(tp("t", 0));
    ASSERT_NE(b.create(tp("other", 0)), nullptr);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(b.append(*log, 'q').ok());
    ASSERT_TRUE(b.run(log->flush()).ok());
    b.spawn(b.manager().delete_log(tp("t", 0)));
    b.advance(std::chrono::microseconds(crash_after_us));
    const std::optional<absl::Status> finished = b.spawned_result();
    b.crash();
    leftover_dirs += has_dir_with(b.disk(0).directories(sim::DiskView::kCurrent), "-delete");

    ASSERT_TRUE(b.start().ok());
    EXPECT_FALSE(has_dir_with(b.disk(0).directories(sim::DiskView::kCurrent), "-delete"));
    EXPECT_NE(b.manager().get_log(tp("other", 0)), nullptr);
    Log* after = b.manager().get_log(tp("t", 0));
    if (after != nullptr) {
      ++kept;
      EXPECT_FALSE(finished.has_value()) << "a completed deletion came back";
      EXPECT_EQ(b.fills(*after), "qqqqq");
    } else {
      ++gone;
      EXPECT_FALSE(has_path_with(b.disk(0).files(sim::DiskView::kCurrent), "t-0/"));
      EXPECT_FALSE(has_dir_with(b.disk(0).directories(sim::DiskView::kCurrent), "t-0"));
    }
    if (finished.has_value()) {
      EXPECT_TRUE(finished->ok()) << *finished;
    }
    b.stop();
  }
  // The sweep crossed the whole deletion.
  EXPECT_GT(kept, 0);
  EXPECT_GT(gone, 0);
  EXPECT_GT(leftover_dirs, 0);
}

// --- Loading in bounded parallel ------------------------------------------

// At most num.recovery.threads.per.data.dir logs of a directory are opened
// (and closed) at once, and that many do run together.
TEST(LogManagerTest, LoadingIsBoundedPerDirectory) {
  for (const int32_t threads : {1, 2, 3}) {
    SCOPED_TRACE(threads);
    Broker b(8);
    ASSERT_TRUE(b.start().ok());
    for (int32_t p = 0; p < 14; ++p) ASSERT_TRUE(b.append(*b.create(tp("t", p)), 'a').ok());
    b.stop();
    sim::DiskFaults slow;
    slow.latency_min = std::chrono::microseconds(200);
    slow.latency_max = std::chrono::microseconds(2000);
    b.disk(0).set_faults(slow);
    b.disk(1).set_faults(slow);
    CountingDisk counting0(&b.disk(0));
    CountingDisk counting1(&b.disk(1));
    LogManagerConfig config;
    config.num_recovery_threads_per_data_dir = threads;
    ASSERT_TRUE(b.start(config, {&counting0, &counting1}).ok());
    EXPECT_EQ(b.manager().all_logs().size(), 14u);
    EXPECT_EQ(counting0.max_partitions_busy, static_cast<size_t>(threads));
    EXPECT_EQ(counting1.max_partitions_busy, static_cast<size_t>(threads));
    counting0.reset();
    counting1.reset();
    b.stop();
    EXPECT_EQ(counting0.max_partitions_busy, static_cast<size_t>(threads));
    EXPECT_EQ(counting1.max_partitions_busy, static_cast<size_t>(threads));
  }
}

// --- Background jobs -------------------------------------------------------

// The background task deletes segments once they pass retention.ms as
// virtual time goes by, and checkpoints the raised log start offset.
TEST(LogManagerTest, BackgroundRetentionDeletesExpiredSegments) {
  Broker b(9);
  LogManagerConfig config;
  config.default_config.segment_bytes = 600;
  config.default_config.retention_ms = 60'000;
  config.log_initial_task_delay_ms = 10'000;
  config.log_retention_check_interval_ms = 10'000;
  config.log_flush_start_offset_checkpoint_interval_ms = 10'000;
  ASSERT_TRUE(b.start(config).ok());
  Log* log = b.create(tp("t", 0));
  LogConfig forever = config.default_config;
  forever.retention_ms = -1;
  Log* kept = b.create(tp("keep", 0), forever);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(b.append(*log, 'r').ok());
    ASSERT_TRUE(b.append(*kept, 'k').ok());
  }
  const size_t segments = log->segment_count();
  ASSERT_GT(segments, 3u);
  log->set_high_watermark(log->log_end_offset());
  kept->set_high_watermark(kept->log_end_offset());
  b.start_background();

  b.advance(milliseconds(55'000));
  EXPECT_EQ(log->segment_count(), segments);
  EXPECT_EQ(log->log_start_offset(), 0);
  b.advance(milliseconds(20'000));
  EXPECT_EQ(log->segment_count(), 1u);
  EXPECT_EQ(log->log_start_offset(), 20);
  EXPECT_EQ(log->log_end_offset(), 20);
  EXPECT_EQ(kept->log_start_offset(), 0);
  EXPECT_EQ(b.fills(*kept).size(), 20u);
  b.advance(milliseconds(10'000));
  const size_t dir = b.manager().dir_of(tp("t", 0)) == b.path(0) ? 0 : 1;
  EXPECT_EQ(b.checkpoint(dir, kLogStartOffsetCheckpointFileName).at(tp("t", 0)), 20);
  b.stop();
}

// The cleaner job compacts logs whose dirty ratio is high enough, and
// leaves the others alone.
TEST(LogManagerTest, BackgroundCleanerCompactsDirtyLogs) {
  Broker b(13);
  LogManagerConfig config;
  config.default_config.segment_bytes = 400;
  config.default_config.cleanup_compact = true;
  config.default_config.cleanup_delete = false;
  config.log_initial_task_delay_ms = 1'000;
  config.log_cleaner_backoff_ms = 1'000;
  ASSERT_TRUE(b.start(config).ok());
  Log* log = b.create(tp("compacted", 0));
  LogConfig plain = config.default_config;
  plain.cleanup_compact = false;
  plain.cleanup_delete = true;
  Log* kept = b.create(tp("plain", 0), plain);
  const std::string letters = "abcdefghijklmnopqrstuvwxyz";
  for (char c : letters) {
    ASSERT_TRUE(b.append(*log, c).ok());  // one record, key "k0", every time
    ASSERT_TRUE(b.append(*kept, c).ok());
  }
  ASSERT_GT(log->segment_count(), 3u);
  // Replicated: nothing at or past the high watermark is cleaned.
  log->set_high_watermark(log->log_end_offset());
  const uint64_t before = log->size_bytes();
  b.start_background();
  b.advance(milliseconds(2'500));
  EXPECT_LT(log->size_bytes(), before / 2);
  const std::string left = b.fills(*log);
  EXPECT_LT(left.size(), letters.size());
  EXPECT_EQ(left.back(), 'z');
  EXPECT_EQ(b.fills(*kept), letters);
  b.stop();
}

// Shutting down while the background task runs: the task stops and no
// later checkpoint overwrites what shutdown wrote.
TEST(LogManagerTest, ShutdownWithBackgroundRunningKeepsCheckpoints) {
  Broker b(11);
  LogManagerConfig config;
  config.log_initial_task_delay_ms = 100;
  config.log_flush_offset_checkpoint_interval_ms = 100;
  config.log_flush_start_offset_checkpoint_interval_ms = 100;
  config.replica_high_watermark_checkpoint_interval_ms = 100;
  ASSERT_TRUE(b.start(config).ok());
  Log* log = b.create(tp("t", 0));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(b.append(*log, 'a').ok());
  b.start_background();
  b.advance(milliseconds(250));
  ASSERT_TRUE(b.background_running());
  ASSERT_TRUE(b.run(b.manager().shutdown()).ok());
  b.advance(milliseconds(1000));
  EXPECT_FALSE(b.background_running());
  EXPECT_EQ(b.checkpoint(0, kRecoveryPointCheckpointFileName),
            (OffsetCheckpoint{{tp("t", 0), 3}}));
  EXPECT_EQ(b.checkpoint(0, kLogStartOffsetCheckpointFileName),
            (OffsetCheckpoint{{tp("t", 0), 0}}));
}

// A truncation immediately rewrites the recovery point checkpoint of the
// log's directory with the lowered value.
TEST(LogManagerTest, TruncateToCheckpointsTheLoweredRecoveryPoint) {
  Broker b(10);
  ASSERT_TRUE(b.start().ok());
  Log* t0 = b.create(tp("t", 0));  // dir 0
  Log* t1 = b.create(tp("t", 1));  // dir 1
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(b.append(*t0, static_cast<char>('a' + i)).ok());
    ASSERT_TRUE(b.append(*t1, 'b').ok());
  }
  ASSERT_TRUE(b.run(t0->flush()).ok());
  ASSERT_TRUE(b.run(t1->flush()).ok());
  ASSERT_TRUE(b.run(b.manager().checkpoint_recovery_points()).ok());
  ASSERT_EQ(b.checkpoint(0, kRecoveryPointCheckpointFileName).at(tp("t", 0)), 10);

  const absl::Status s = b.run(b.manager().truncate_to({{tp("t", 0), 4}, {tp("t", 1), 20},
                                                        {tp("unknown", 0), 1}}));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(t0->log_end_offset(), 4);
  EXPECT_EQ(t1->log_end_offset(), 10);
  EXPECT_EQ(b.checkpoint(0, kRecoveryPointCheckpointFileName).at(tp("t", 0)), 4);
  EXPECT_EQ(b.checkpoint(1, kRecoveryPointCheckpointFileName).at(tp("t", 1)), 10);
  EXPECT_EQ(b.fills(*t0), "abcd");
  b.stop();
}

// --- Property: the manager against a model ----------------------------------

// A model of the broker's partitions: where each lives, what it holds (one
// record per batch, identified by its fill byte) and how much is durable.
struct ModelLog {
  size_t dir = 0;
  std::string fills;
  size_t durable = 0;
};

// Uniform whatever RapidCheck's current size (inRange skews small sizes
// towards the low end, which would make most operations creations).
template <typename T>
T pick(T low, T high) {
  return *rc::gen::resize(100, rc::gen::inRange<T>(low, high));
}

RC_GTEST_PROP(LogManagerProperty, MatchesModelAcrossRestartsAndCrashes, ()) {
  const uint64_t seed = pick<uint64_t>(1, 1'000'000);
  Broker b(seed);
  LogManagerConfig config;
  config.default_config.segment_bytes = 400;  // a roll every few batches
  RC_ASSERT(b.start(config).ok());
  std::map<TopicPartition, ModelLog> model;
  const size_t ops = pick<size_t>(1, 60);
  char next_fill = 'a';
  int crashes = 0;
  int deletes = 0;
  int truncations = 0;
  for (size_t step = 0; step < ops; ++step) {
    const int op = pick<int>(0, 100);
    // Mostly a partition the model holds, sometimes any.
    TopicPartition p = tp(*rc::gen::element<std::string>("a", "b.c", "d-e"),
                          pick<int32_t>(0, 3));
    if (op >= 20 && !model.empty() && pick<int>(0, 10) < 9) {
      p = std::next(model.begin(), pick<long>(0, static_cast<long>(model.size())))->first;
    }
    auto it = model.find(p);
    if (op < 20) {  // create
      Log* log = b.create(p);
      RC_ASSERT(log != nullptr);
      if (it == model.end()) {
        std::array<size_t, 2> counts = {0, 0};
        for (const auto& [q, m] : model) ++counts[m.dir];
        model[p] = ModelLog{counts[1] < counts[0] ? size_t{1} : size_t{0}, "", 0};
      }
      RC_ASSERT(b.manager().dir_of(p) == std::optional(b.path(model[p].dir)));
    } else if (op < 55) {  // append
      if (it == model.end()) continue;
      next_fill = next_fill == 'z' ? 'a' : static_cast<char>(next_fill + 1);
      RC_ASSERT(b.append(*b.manager().get_log(p), next_fill).ok());
      it->second.fills.push_back(next_fill);
    } else if (op < 65) {  // flush
      if (it == model.end()) continue;
      RC_ASSERT(b.run(b.manager().get_log(p)->flush()).ok());
      it->second.durable = it->second.fills.size();
    } else if (op < 72) {  // delete
      const absl::Status s = b.run(b.manager().delete_log(p));
      RC_ASSERT((it == model.end() ? s.code() == absl::StatusCode::kNotFound : s.ok()));
      if (it != model.end()) {
        model.erase(it);
        ++deletes;
      }
    } else if (op < 82) {  // truncate
      if (it == model.end()) continue;
      const size_t to = pick<size_t>(0, it->second.fills.size() + 2);
      RC_ASSERT(b.run(b.manager().truncate_to({{p, static_cast<int64_t>(to)}})).ok());
      if (to < it->second.fills.size()) {
        it->second.fills.resize(to);
        ++truncations;
      }
      it->second.durable = std::min(it->second.durable, it->second.fills.size());
    } else if (op < 91) {  // clean restart
      b.stop();
      RC_ASSERT(b.start(config).ok());
      for (auto& [q, m] : model) m.durable = m.fills.size();
    } else {  // power loss
      ++crashes;
      b.crash();
      RC_ASSERT(b.start(config).ok());
      for (auto& [q, m] : model) {
        Log* log = b.manager().get_log(q);
        RC_ASSERT(log != nullptr);
        const size_t leo = static_cast<size_t>(log->log_end_offset());
        RC_ASSERT(leo >= m.durable);
        RC_ASSERT(leo <= m.fills.size());
        m.fills.resize(leo);
        m.durable = leo;
      }
    }
    // The manager serves exactly the model's logs, where the model says,
    // with the model's records.
    std::vector<TopicPartition> served;
    for (const auto& [q, log] : b.manager().all_logs()) {
      served.push_back(q);
      const auto m = model.find(q);
      RC_ASSERT(m != model.end());
      RC_ASSERT(b.manager().dir_of(q) == std::optional(b.path(m->second.dir)));
      RC_ASSERT(b.fills(*log) == m->second.fills);
    }
    RC_ASSERT(served.size() == model.size());
  }
  RC_ASSERT(b.failures.empty());
  RC_CLASSIFY(crashes > 0, "crashed");
  RC_CLASSIFY(deletes > 0, "deleted");
  RC_CLASSIFY(truncations > 0, "truncated");
  b.stop();
}

}  // namespace
}  // namespace brook::storage
