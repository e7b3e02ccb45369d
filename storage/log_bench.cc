// storage/log_bench.cc
//
// brook-log-bench: figures for the partition log on the real io_uring
// backend, in a fresh directory under --dir (default /tmp), each beside the
// same work done with plain blocking system calls in the same run:
//
//   append    Log::append_as_leader of pre-built batches (distinct bytes, so
//             the CRC check and record validation do real work), without
//             sync and with Log::flush() after every --sync-kib, beside a
//             write()/fdatasync() loop of the same bytes, and beside
//             io::File::append on the same loop (what the log adds over the
//             backend, and the backend over plain calls);
//   read      sequential Log::read of 1 MiB chunks from the page cache,
//             beside pread() of the same chunks;
//   lookup    Log::read of the batch holding a random offset, and
//             Log::offset_for_timestamp of a random timestamp (ns each);
//   recovery  Log::open of a log closed cleanly, with recovery point 0 (every
//             segment scanned), and with the recovery point close left;
//   compact   storage::build_offset_map + clean_segment over an in-memory
//             segment of keyed records with many overwrites.
//
// Usage: brook-log-bench [--dir D] [--append-mib 128] [--record-bytes 1024]
//          [--batch-kib 16] [--sync-kib 1024] [--rounds 3] [--lookups 2000]
//          [--recovery-mib 1024] [--segment-mib 128] [--compact-mib 64]
//          [--compact-keys 10000] [--compact-value-bytes 256] [--pin-cpu C]
//          [--only append,read,lookup,recovery,compact] [--breakdown 1]
//          [--ring-writes 1] [--contestants log,file,plain]
//
// --breakdown 1 adds where the time goes: the log's CPU per batch for each
// step of an append, what one io::File::read_at costs by size, and a plain
// scan (and scan + rewrite + fdatasync) of the recovered files. --pin-cpu
// pins the process (and io_uring's workers) to one CPU, as `brook bench
// file` does. --ring-writes 1 sends every write through the ring rather
// than making small ones inline (io::uring::DiskOptions). --contestants
// runs only some of the append case's contestants (the others print -), so
// that a profiler sees one at a time. Results: docs/benchmarks.md.
//
// Timed cases interleave their contestants round by round (the order
// rotates) and print medians, so load from other processes falls on all of
// them alike. A bench is not logic code: clocks, threads and syscalls are
// fine here.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fmt/format.h"
#include "io/buffer.h"
#include "io/real/affinity.h"
#include "io/scope.h"
#include "io/status.h"
#include "io/task.h"
#include "io/time.h"
#include "io/uring/disk.h"
#include "io/uring/loop.h"
#include "net/codec/endian.h"
#include "net/kafka/record_batch.h"
#include "storage/compaction.h"
#include "storage/log.h"

namespace brook::storage {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr const char* kLogDir = "t-0";

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}
double mb_per_s(uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / 1e6 / seconds : 0.0;
}
double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}
double percent(double a, double b) { return b > 0 ? 100.0 * a / b : 0.0; }

uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Keeps the compiler from discarding a computation whose result is unused.
template <typename T>
void keep(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

// ------------------------------------------------------------------ options

struct Options {
  std::string dir = "/tmp";
  uint64_t append_mib = 128;
  uint64_t record_bytes = 1024;
  uint64_t batch_kib = 16;
  uint64_t sync_kib = 1024;
  uint64_t rounds = 3;
  uint64_t lookups = 2000;
  uint64_t recovery_mib = 1024;
  uint64_t segment_mib = 128;
  uint64_t compact_mib = 64;
  uint64_t compact_keys = 10000;
  uint64_t compact_value_bytes = 256;
  std::string pin_cpu;
  std::string only = "append,read,lookup,recovery,compact";
  std::string contestants = "log,file,plain";
  bool breakdown = false;
  bool ring_writes = false;  // every write through the ring (DiskOptions)

  io::uring::DiskOptions disk_options() const {
    io::uring::DiskOptions d;
    if (ring_writes) d.inline_write_bytes_max = 0;
    return d;
  }

  bool runs(std::string_view what) const { return listed(only, what); }
  bool competes(std::string_view who) const { return listed(contestants, who); }

  static bool listed(std::string_view list, std::string_view what) {
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(',', start);
      if (end == std::string::npos) end = list.size();
      if (list.substr(start, end - start) == what) return true;
      start = end + 1;
    }
    return false;
  }
};

void usage() {
  std::fprintf(stderr,
               "usage: brook-log-bench [--dir D] [--append-mib 128] [--record-bytes 1024]\n"
               "         [--batch-kib 16] [--sync-kib 1024] [--rounds 3] [--lookups 2000]\n"
               "         [--recovery-mib 1024] [--segment-mib 128] [--compact-mib 64]\n"
               "         [--compact-keys 10000] [--compact-value-bytes 256] [--pin-cpu C]\n"
               "         [--only append,read,lookup,recovery,compact] [--breakdown 1]\n"
               "         [--ring-writes 1] [--contestants log,file,plain]\n");
}

std::optional<Options> parse_options(int argc, char** argv) {
  Options o;
  const std::map<std::string_view, uint64_t*> numbers = {
      {"append-mib", &o.append_mib},     {"record-bytes", &o.record_bytes},
      {"batch-kib", &o.batch_kib},       {"sync-kib", &o.sync_kib},
      {"rounds", &o.rounds},             {"lookups", &o.lookups},
      {"recovery-mib", &o.recovery_mib}, {"segment-mib", &o.segment_mib},
      {"compact-mib", &o.compact_mib},   {"compact-keys", &o.compact_keys},
      {"compact-value-bytes", &o.compact_value_bytes},
  };
  for (int i = 1; i < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (!flag.starts_with("--") || i + 1 >= argc) return std::nullopt;
    const std::string_view key = flag.substr(2);
    const std::string_view value = argv[i + 1];
    if (key == "dir") {
      o.dir = value;
    } else if (key == "pin-cpu") {
      o.pin_cpu = value;
    } else if (key == "only") {
      o.only = value;
    } else if (key == "contestants") {
      o.contestants = value;
    } else if (key == "breakdown") {
      o.breakdown = value != "0";
    } else if (key == "ring-writes") {
      o.ring_writes = value != "0";
    } else if (auto it = numbers.find(key); it != numbers.end()) {
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), *it->second);
      if (ec != std::errc() || ptr != value.data() + value.size()) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  if (o.record_bytes == 0 || o.batch_kib == 0 || o.rounds == 0 || o.append_mib == 0 ||
      o.segment_mib == 0 || o.compact_keys == 0 || o.record_bytes > (o.batch_kib << 10) ||
      !(o.competes("log") || o.competes("file") || o.competes("plain"))) {
    return std::nullopt;
  }
  return o;
}

// ------------------------------------------------------------------ runtime

// Drives one task to completion on the loop.
template <typename T>
io::Task<void> store_into(io::Task<T> task, std::optional<T>* out) {
  *out = co_await std::move(task);
}

template <typename T>
T run(io::uring::Loop& loop, io::Task<T> task) {
  std::optional<T> out;
  {
    io::TaskScope scope(loop);
    scope.spawn(store_into(std::move(task), &out));
    loop.run_until([&] { return scope.empty(); });
  }
  if (!out.has_value()) {
    std::fprintf(stderr, "brook-log-bench: a task did not finish\n");
    std::exit(1);
  }
  return std::move(*out);
}

[[noreturn]] void die(const absl::Status& s, const char* what) {
  std::fprintf(stderr, "brook-log-bench: %s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}
void check(const absl::Status& s, const char* what) {
  if (!s.ok()) die(s, what);
}

// A fresh directory for one case, removed (with what it holds) by the
// destructor.
class ScratchDir {
 public:
  ScratchDir(const std::string& parent, const std::string& name) {
    std::string pattern = parent + "/brook-log-bench-" + name + "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      std::exit(1);
    }
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// ------------------------------------------------------------------ batches

// `count` batches of records_per_batch records, each with a 16-byte key and
// a value of value_bytes random bytes: every batch distinct. Offsets start
// at 0 in each (the log assigns its own); timestamps increase by 1 ms per
// record across the batches.
// Record timestamps start at first_timestamp_ms, the loop's wall clock:
// segment.ms counts from the first batch's timestamp, so old timestamps
// would roll a segment at every append.
std::vector<io::Buffer> make_batches(size_t count, size_t records_per_batch, size_t value_bytes,
                                     uint64_t seed, int64_t first_timestamp_ms) {
  std::vector<io::Buffer> out;
  out.reserve(count);
  std::vector<uint64_t> words((value_bytes + 7) / 8);
  int64_t timestamp = first_timestamp_ms;
  for (size_t b = 0; b < count; ++b) {
    net::RecordBatchBuilder builder(net::RecordBatchOptions{});
    for (size_t r = 0; r < records_per_batch; ++r) {
      for (uint64_t& w : words) w = splitmix(seed);
      net::NewRecord record;
      record.timestamp_ms = timestamp++;
      record.key = io::Buffer::copy_of(fmt::format("key-{:012d}", (b * records_per_batch + r) % 1000000));
      record.value = io::Buffer::copy_of(
          std::string_view(reinterpret_cast<const char*>(words.data()), value_bytes));
      builder.append(std::move(record));
    }
    absl::StatusOr<io::Buffer> built = builder.build();
    check(built.status(), "build batch");
    out.push_back(*std::move(built));
  }
  return out;
}

uint64_t total_bytes(const std::vector<io::Buffer>& batches) {
  uint64_t n = 0;
  for (const io::Buffer& b : batches) n += b.size();
  return n;
}

// ------------------------------------------------------------------ append

LogConfig bench_config(uint64_t segment_bytes) {
  LogConfig c;
  c.segment_bytes = segment_bytes;
  return c;
}

io::Task<absl::StatusOr<std::unique_ptr<Log>>> open_log(io::Disk* disk, const io::Clock* clock,
                                                       LogConfig config, int64_t recovery_point) {
  LogOptions options;
  options.dir = kLogDir;
  options.config = config;
  options.recovery_point = recovery_point;
  co_return co_await Log::open(*disk, *clock, std::move(options));
}

// Appends every batch (in order, `repeat` times), flushing after every
// sync_every bytes (0: never). Returns the seconds the appends took; open
// and close are not timed.
io::Task<absl::StatusOr<double>> append_to_log(Log* log, const std::vector<io::Buffer>* batches,
                                               uint64_t sync_every, uint64_t repeat) {
  const auto start = SteadyClock::now();
  uint64_t unsynced = 0;
  for (uint64_t r = 0; r < repeat; ++r) {
    for (const io::Buffer& batch : *batches) {
      CO_ASSIGN_OR_RETURN(AppendResult appended, co_await log->append_as_leader(batch, 0));
      if (!appended.ok()) {
        co_return absl::InternalError(fmt::format("append rejected: {}", appended.error_message));
      }
      unsynced += batch.size();
      if (sync_every > 0 && unsynced >= sync_every) {
        CO_RETURN_IF_ERROR(co_await log->flush());
        unsynced -= sync_every;
      }
    }
  }
  co_return seconds_since(start);
}

// The same bytes through io::File::append on the same backend.
io::Task<absl::StatusOr<double>> append_to_file(io::Disk* disk,
                                                const std::vector<io::Buffer>* batches,
                                                uint64_t sync_every) {
  CO_ASSIGN_OR_RETURN(std::unique_ptr<io::File> file,
                      co_await disk->open("file.log", io::OpenMode::kCreateExclusive));
  const auto start = SteadyClock::now();
  uint64_t unsynced = 0;
  for (const io::Buffer& batch : *batches) {
    CO_RETURN_IF_ERROR(co_await file->append(io::BufferChain(batch)));
    unsynced += batch.size();
    if (sync_every > 0 && unsynced >= sync_every) {
      CO_RETURN_IF_ERROR(co_await file->datasync());
      unsynced -= sync_every;
    }
  }
  const double seconds = seconds_since(start);
  // Not timed: write back what is dirty so the next case starts clean.
  CO_RETURN_IF_ERROR(co_await file->datasync());
  CO_RETURN_IF_ERROR(co_await file->close());
  co_return seconds;
}

absl::StatusOr<double> append_plain(const std::string& dir, const std::vector<io::Buffer>& batches,
                                    uint64_t sync_every) {
  const std::string path = dir + "/plain.log";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(fmt::format("open {}: {}", path, std::strerror(errno)));
  const auto start = SteadyClock::now();
  uint64_t unsynced = 0;
  absl::Status status;
  for (const io::Buffer& batch : batches) {
    size_t done = 0;
    while (done < batch.size()) {
      const ssize_t n = ::write(fd, batch.data() + done, batch.size() - done);
      if (n <= 0) {
        status = absl::InternalError(fmt::format("write: {}", std::strerror(errno)));
        break;
      }
      done += static_cast<size_t>(n);
    }
    if (!status.ok()) break;
    unsynced += batch.size();
    if (sync_every > 0 && unsynced >= sync_every) {
      if (::fdatasync(fd) != 0) {
        status = absl::InternalError(fmt::format("fdatasync: {}", std::strerror(errno)));
        break;
      }
      unsynced -= sync_every;
    }
  }
  const double seconds = seconds_since(start);
  ::fdatasync(fd);  // not timed, as above
  ::close(fd);
  RETURN_IF_ERROR(status);
  return seconds;
}

// One contestant of the append case, in its own scratch directory.
absl::StatusOr<double> run_append(io::uring::Loop& loop, const Options& o, const std::string& who,
                                  const std::vector<io::Buffer>& batches, uint64_t sync_every) {
  ScratchDir scratch(o.dir, "append");
  if (who == "plain") return append_plain(scratch.path(), batches, sync_every);
  io::uring::Disk disk(loop, scratch.path(), o.disk_options());
  if (who == "file") return run(loop, append_to_file(&disk, &batches, sync_every));
  absl::StatusOr<std::unique_ptr<Log>> log =
      run(loop, open_log(&disk, &loop, bench_config(uint64_t{1} << 30), 0));
  RETURN_IF_ERROR(log.status());
  absl::StatusOr<double> seconds = run(loop, append_to_log(log->get(), &batches, sync_every, 1));
  RETURN_IF_ERROR(run(loop, (*log)->close()));  // flushes: not timed
  return seconds;
}

void bench_append(io::uring::Loop& loop, const Options& o, const std::vector<io::Buffer>& batches) {
  const uint64_t bytes = total_bytes(batches);
  std::printf("\nappend: %zu batches of %llu x %llu-byte records (%.1f MiB), median of %llu "
              "rounds\n",
              batches.size(), static_cast<unsigned long long>((o.batch_kib << 10) / o.record_bytes),
              static_cast<unsigned long long>(o.record_bytes),
              static_cast<double>(bytes) / (1 << 20), static_cast<unsigned long long>(o.rounds));
  std::printf("  %-22s %10s %10s %10s %8s %8s\n", "case", "log MB/s", "file MB/s", "plain MB/s",
              "log/plain", "file/plain");
  std::vector<std::string> who;
  for (const char* w : {"log", "file", "plain"}) {
    if (o.competes(w)) who.emplace_back(w);
  }
  for (const uint64_t sync_every : {uint64_t{0}, o.sync_kib << 10}) {
    std::map<std::string, std::vector<double>> samples;
    for (uint64_t round = 0; round < o.rounds; ++round) {
      for (size_t k = 0; k < who.size(); ++k) {
        const std::string& w = who[(k + round) % who.size()];
        absl::StatusOr<double> seconds = run_append(loop, o, w, batches, sync_every);
        check(seconds.status(), w.c_str());
        samples[w].push_back(mb_per_s(bytes, *seconds));
      }
    }
    // A contestant left out (--contestants), and a ratio to one, shows "-".
    auto rate = [&](const char* w) {
      return samples.contains(w) ? fmt::format("{:.1f}", median(samples[w])) : std::string("-");
    };
    auto ratio = [&](const char* w) {
      return samples.contains(w) && samples.contains("plain")
                 ? fmt::format("{:.1f}%", percent(median(samples[w]), median(samples["plain"])))
                 : std::string("-");
    };
    const std::string name = sync_every == 0
                                 ? std::string("no sync")
                                 : fmt::format("datasync every {} KiB", sync_every >> 10);
    std::printf("  %-22s %10s %10s %10s %8s %8s\n", name.c_str(), rate("log").c_str(), rate("file").c_str(),
                rate("plain").c_str(), ratio("log").c_str(), ratio("file").c_str());
    std::fflush(stdout);
  }
}

// The CPU the log spends per batch before its write, step by step as
// append_as_leader takes them on one batch after another (so later steps
// find the batch in the cache): framing and CRC, then reading the records
// for validation (net::visit_records), then the rewritten copy of the
// header that takes the assigned offset, chained before the records. Each
// line adds one step; the differences are the steps' costs.
void append_breakdown(const std::vector<io::Buffer>& batches) {
  const size_t n = batches.size();
  const uint64_t bytes = total_bytes(batches);
  auto per_batch_ns = [&](int steps) {
    std::vector<double> rounds;
    for (int r = 0; r < 3; ++r) {
      const auto start = SteadyClock::now();
      for (const io::Buffer& b : batches) {
        net::BatchIterator it(b);
        absl::StatusOr<std::optional<net::BatchView>> view = it.next();
        keep(view->has_value());
        if (steps >= 2) {
          int64_t deltas = 0;
          const absl::Status walked = net::visit_records(
              (*view)->bytes, size_t{256} << 20, [&](const net::RecordSummary& r) {
                deltas += r.offset_delta;
                return true;
              });
          keep(walked.ok() ? deltas : -1);
        }
        if (steps >= 3) {
          io::Buffer header = io::Buffer::allocate(net::kBatchHeaderBytes);
          std::memcpy(header.mutable_data(), b.data(), net::kBatchHeaderBytes);
          codec::store_be<int64_t>(header.mutable_data() + net::kBatchBaseOffsetOffset,
                                   static_cast<int64_t>(n));
          io::BufferChain chain(std::move(header));
          chain.append(b.slice(net::kBatchHeaderBytes));
          keep(chain.size());
        }
      }
      rounds.push_back(seconds_since(start) * 1e9 / static_cast<double>(n));
    }
    return *std::min_element(rounds.begin(), rounds.end());
  };
  const double crc = per_batch_ns(1);
  const double read = per_batch_ns(2);
  const double all = per_batch_ns(3);
  const double mean_bytes = static_cast<double>(bytes) / static_cast<double>(n);
  std::printf("  log CPU per batch (%.0f bytes): frame + CRC %.0f ns, + read records %.0f ns, "
              "+ header %.0f ns = %.0f ns (%.0f MB/s alone)\n",
              mean_bytes, crc, read - crc, all - read, all, mean_bytes * 1e3 / all);
}

// ------------------------------------------------------------------ read and lookups

io::Task<absl::StatusOr<uint64_t>> read_sequentially(Log* log) {
  uint64_t bytes = 0;
  int64_t next = log->log_start_offset();
  while (next < log->log_end_offset()) {
    CO_ASSIGN_OR_RETURN(ReadResult r,
                        co_await log->read(next, size_t{1} << 20, ReadBound::kLogEnd, true));
    if (r.error != net::Error::kNone || r.records.empty()) {
      co_return absl::InternalError(fmt::format("read at {} returned nothing", next));
    }
    // The next offset: after the last batch of the chunk.
    net::BatchIterator it(r.records, {net::CrcCheck::kSkip});
    while (true) {
      absl::StatusOr<std::optional<net::BatchView>> b = it.next();
      if (!b.ok() || !b->has_value()) break;
      next = (*b)->header.next_offset();
    }
    bytes += r.records.size();
  }
  co_return bytes;
}

absl::StatusOr<uint64_t> pread_sequentially(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(fmt::format("open {}: {}", path, std::strerror(errno)));
  std::vector<char> chunk(size_t{1} << 20);
  uint64_t bytes = 0;
  while (true) {
    const ssize_t n = ::pread(fd, chunk.data(), chunk.size(), static_cast<off_t>(bytes));
    if (n <= 0) break;
    bytes += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return bytes;
}

io::Task<absl::StatusOr<double>> lookup_offsets(Log* log, uint64_t count) {
  uint64_t seed = 11;
  const auto span = static_cast<uint64_t>(log->log_end_offset() - log->log_start_offset());
  const auto start = SteadyClock::now();
  for (uint64_t i = 0; i < count; ++i) {
    const int64_t offset = log->log_start_offset() + static_cast<int64_t>(splitmix(seed) % span);
    CO_ASSIGN_OR_RETURN(ReadResult r, co_await log->read(offset, 1, ReadBound::kLogEnd, true));
    absl::StatusOr<net::RecordBatchHeader> h = net::parse_batch_header(r.records.span());
    if (!h.ok() || h->base_offset > offset || h->last_offset() < offset) {
      co_return absl::InternalError(fmt::format("lookup of {} found the wrong batch", offset));
    }
  }
  co_return seconds_since(start) * 1e9 / static_cast<double>(count);
}

io::Task<absl::StatusOr<double>> lookup_timestamps(Log* log, uint64_t count, int64_t ts_first,
                                                   int64_t ts_last) {
  uint64_t seed = 13;
  const auto span = static_cast<uint64_t>(ts_last - ts_first + 1);
  const auto start = SteadyClock::now();
  for (uint64_t i = 0; i < count; ++i) {
    const int64_t ts = ts_first + static_cast<int64_t>(splitmix(seed) % span);
    CO_ASSIGN_OR_RETURN(std::optional<TimestampOffset> found, co_await log->offset_for_timestamp(ts));
    if (!found.has_value() || found->timestamp_ms != ts) {
      co_return absl::InternalError(fmt::format("timestamp {} not found", ts));
    }
  }
  co_return seconds_since(start) * 1e9 / static_cast<double>(count);
}

io::Task<absl::StatusOr<double>> time_read_at(io::Disk* disk, uint64_t file_bytes,
                                               size_t length) {
  CO_ASSIGN_OR_RETURN(std::unique_ptr<io::File> file,
                      co_await disk->open(std::string(kLogDir) + "/" + offset_file_name(0, kLogSuffix),
                                          io::OpenMode::kReadOnly));
  constexpr int kReads = 500;
  uint64_t seed = 19;
  const auto start = SteadyClock::now();
  for (int i = 0; i < kReads; ++i) {
    const uint64_t at = splitmix(seed) % (file_bytes > length ? file_bytes - length : 1);
    CO_ASSIGN_OR_RETURN(io::Buffer bytes, co_await file->read_at(at, length));
    keep(bytes.size());
  }
  const double ns = seconds_since(start) * 1e9 / kReads;
  CO_RETURN_IF_ERROR(co_await file->close());
  co_return ns;
}

void bench_read_and_lookup(io::uring::Loop& loop, const Options& o,
                           const std::vector<io::Buffer>& batches, bool reads, bool lookups) {
  ScratchDir scratch(o.dir, "read");
  io::uring::Disk disk(loop, scratch.path(), o.disk_options());
  absl::StatusOr<std::unique_ptr<Log>> opened =
      run(loop, open_log(&disk, &loop, bench_config(uint64_t{1} << 30), 0));
  check(opened.status(), "open");
  Log& log = **opened;
  check(run(loop, append_to_log(&log, &batches, 0, 1)).status(), "append");
  check(run(loop, log.flush()), "flush");
  const std::string segment_path = scratch.path() + "/" + kLogDir + "/" +
                                   offset_file_name(0, kLogSuffix);
  if (reads) {
    std::vector<double> log_mbs;
    std::vector<double> plain_mbs;
    uint64_t bytes = 0;
    for (uint64_t round = 0; round < o.rounds; ++round) {
      for (int k = 0; k < 2; ++k) {
        const bool plain = (k + round) % 2 == 1;
        const auto start = SteadyClock::now();
        absl::StatusOr<uint64_t> read =
            plain ? pread_sequentially(segment_path) : run(loop, read_sequentially(&log));
        const double seconds = seconds_since(start);
        check(read.status(), "read");
        bytes = *read;
        (plain ? plain_mbs : log_mbs).push_back(mb_per_s(*read, seconds));
      }
    }
    std::printf("\nread: %.1f MiB from the page cache in 1 MiB reads, median of %llu rounds\n",
                static_cast<double>(bytes) / (1 << 20), static_cast<unsigned long long>(o.rounds));
    std::printf("  Log::read %.1f MB/s, pread %.1f MB/s: %.1f%%\n", median(log_mbs),
                median(plain_mbs), percent(median(log_mbs), median(plain_mbs)));
  }
  if (lookups) {
    const int64_t records = log.log_end_offset();
    absl::StatusOr<net::RecordBatchHeader> first = net::parse_batch_header(batches.front().span());
    check(first.status(), "the first batch");
    const int64_t first_ms = first->base_timestamp;
    std::vector<double> by_offset;
    std::vector<double> by_time;
    for (uint64_t round = 0; round < o.rounds; ++round) {
      absl::StatusOr<double> ns = run(loop, lookup_offsets(&log, o.lookups));
      check(ns.status(), "offset lookups");
      by_offset.push_back(*ns);
      ns = run(loop, lookup_timestamps(&log, std::max<uint64_t>(o.lookups / 10, 1),
                                       first_ms, first_ms + records - 1));
      check(ns.status(), "timestamp lookups");
      by_time.push_back(*ns);
    }
    std::printf("\nlookup: %lld records in one segment, %llu random offsets and %llu random "
                "timestamps per round, median of %llu rounds\n",
                static_cast<long long>(records), static_cast<unsigned long long>(o.lookups),
                static_cast<unsigned long long>(std::max<uint64_t>(o.lookups / 10, 1)),
                static_cast<unsigned long long>(o.rounds));
    std::printf("  by offset (Log::read of the batch holding it) %.0f ns\n", median(by_offset));
    std::printf("  by timestamp (Log::offset_for_timestamp)       %.0f ns\n", median(by_time));
    if (o.breakdown) {
      // What one read of the segment file costs on this loop, by size.
      for (const size_t length : {size_t{64}, size_t{16} << 10, size_t{1} << 20}) {
        absl::StatusOr<double> ns = run(loop, time_read_at(&disk, log.size_bytes(), length));
        check(ns.status(), "read_at");
        std::printf("  io::File::read_at of %7zu bytes at a random position: %.0f ns\n", length,
                    *ns);
      }
    }
  }
  check(run(loop, log.close()), "close");
}

// ------------------------------------------------------------------ recovery

// Reads every segment file of `dir` whole into `buffer` (allocated and
// touched before the clock starts: on this VM a page fault costs more than
// reading the page), frames and CRC-checks its batches, and with `rewrite`
// writes the bytes back and syncs the file. Returns the seconds taken.
absl::StatusOr<double> plain_scan(const std::string& dir, bool rewrite) {
  std::vector<std::string> files;
  size_t largest = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".log") continue;
    files.push_back(entry.path());
    largest = std::max<size_t>(largest, std::filesystem::file_size(entry.path()));
  }
  std::sort(files.begin(), files.end());
  io::Buffer buffer = io::Buffer::allocate(largest);
  std::memset(buffer.mutable_data(), 0, largest);
  const auto start = SteadyClock::now();
  for (const std::string& path : files) {
    const int fd = ::open(path.c_str(), (rewrite ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) return absl::InternalError(fmt::format("open {}: {}", path, std::strerror(errno)));
    const auto size = static_cast<size_t>(std::filesystem::file_size(path));
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pread(fd, buffer.mutable_data() + done,
                                std::min<size_t>(size - done, 1 << 20), static_cast<off_t>(done));
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    const io::Buffer bytes = buffer.slice(0, size);
    net::BatchIterator it(bytes);
    while (true) {
      absl::StatusOr<std::optional<net::BatchView>> b = it.next();
      if (!b.ok() || !b->has_value()) break;
    }
    if (rewrite) {
      for (size_t at = 0; at < size;) {
        const ssize_t n = ::pwrite(fd, bytes.data() + at, std::min<size_t>(size - at, 1 << 20),
                                   static_cast<off_t>(at));
        if (n <= 0) break;
        at += static_cast<size_t>(n);
      }
      ::fdatasync(fd);
    }
    ::close(fd);
  }
  return seconds_since(start);
}

void bench_recovery(io::uring::Loop& loop, const Options& o,
                    const std::vector<io::Buffer>& batches) {
  ScratchDir scratch(o.dir, "recovery");
  io::uring::Disk disk(loop, scratch.path(), o.disk_options());
  const LogConfig config = bench_config(o.segment_mib << 20);
  const uint64_t batch_bytes = total_bytes(batches);
  const uint64_t repeat = std::max<uint64_t>(1, ((o.recovery_mib << 20) + batch_bytes - 1) / batch_bytes);
  int64_t end = 0;
  int64_t recovery_point = 0;
  uint64_t bytes = 0;
  size_t segments = 0;
  {
    absl::StatusOr<std::unique_ptr<Log>> log = run(loop, open_log(&disk, &loop, config, 0));
    check(log.status(), "open");
    check(run(loop, append_to_log(log->get(), &batches, 0, repeat)).status(), "append");
    end = (*log)->log_end_offset();
    bytes = (*log)->size_bytes();
    segments = (*log)->segment_count();
    check(run(loop, (*log)->close()), "close");
    recovery_point = (*log)->recovery_point();
  }
  std::vector<double> scan_all;
  std::vector<double> trusted;
  for (uint64_t round = 0; round < o.rounds; ++round) {
    for (const bool all : {true, false}) {
      const auto start = SteadyClock::now();
      absl::StatusOr<std::unique_ptr<Log>> log =
          run(loop, open_log(&disk, &loop, config, all ? 0 : recovery_point));
      const double seconds = seconds_since(start);
      check(log.status(), "reopen");
      if ((*log)->log_end_offset() != end) {
        std::fprintf(stderr, "recovery: LEO %lld after reopening, was %lld\n",
                     static_cast<long long>((*log)->log_end_offset()), static_cast<long long>(end));
        std::exit(1);
      }
      (all ? scan_all : trusted).push_back(seconds);
      check(run(loop, (*log)->close()), "close");
    }
  }
  const double gib = static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << 30);
  std::printf("\nrecovery: %.2f GiB in %zu segments of %llu MiB (page cache warm), median of %llu "
              "rounds\n",
              gib, segments, static_cast<unsigned long long>(o.segment_mib),
              static_cast<unsigned long long>(o.rounds));
  std::printf("  recovery point 0 (every segment scanned): %.3f s, %.3f s per GiB (%.0f MB/s)\n",
              median(scan_all), median(scan_all) / gib, mb_per_s(bytes, median(scan_all)));
  std::printf("  clean recovery point (last segment scanned): %.3f s\n", median(trusted));
  if (o.breakdown) {
    // The same files with plain calls: a scan (read, frame, CRC), and the
    // scan plus writing every byte back and fdatasync.
    for (const bool rewrite : {false, true}) {
      absl::StatusOr<double> scanned = plain_scan(scratch.path() + "/" + kLogDir, rewrite);
      check(scanned.status(), "plain scan");
      const double seconds = *scanned;
      std::printf("  plain %s: %.3f s per GiB (%.0f MB/s)\n",
                  rewrite ? "scan + rewrite + fdatasync" : "scan (pread, frame, CRC)",
                  seconds / gib, mb_per_s(bytes, seconds));
    }
  }
}

// ------------------------------------------------------------------ compaction

void bench_compaction(const Options& o) {
  // Keyed records, keys drawn at random: most records are overwritten.
  const size_t record_bytes_estimate = o.compact_value_bytes + 24;
  const size_t per_batch = std::max<size_t>(1, (o.batch_kib << 10) / record_bytes_estimate);
  std::vector<uint64_t> words((o.compact_value_bytes + 7) / 8);
  uint64_t seed = 17;
  std::string segment;
  int64_t offset = 0;
  // In memory only, no segment.ms: any fixed start will do.
  constexpr int64_t kFirstTimestampMs = 1'700'000'000'000;
  int64_t timestamp = kFirstTimestampMs;
  while (segment.size() < (o.compact_mib << 20)) {
    net::RecordBatchOptions options;
    options.base_offset = offset;
    net::RecordBatchBuilder builder(options);
    for (size_t r = 0; r < per_batch; ++r) {
      for (uint64_t& w : words) w = splitmix(seed);
      net::NewRecord record;
      record.timestamp_ms = timestamp++;
      record.key = io::Buffer::copy_of(fmt::format("key-{:08d}", splitmix(seed) % o.compact_keys));
      record.value = io::Buffer::copy_of(
          std::string_view(reinterpret_cast<const char*>(words.data()), o.compact_value_bytes));
      builder.append(std::move(record));
    }
    absl::StatusOr<io::Buffer> built = builder.build();
    check(built.status(), "build batch");
    segment += built->view();
    offset += static_cast<int64_t>(per_batch);
  }
  const io::Buffer bytes = io::Buffer::copy_of(segment);
  segment.clear();
  std::vector<double> map_s;
  std::vector<double> clean_s;
  CleanResult last;
  for (uint64_t round = 0; round < o.rounds; ++round) {
    OffsetMap map(size_t{128} << 20);
    TxnTracker map_txns;
    auto start = SteadyClock::now();
    absl::StatusOr<BuildMapResult> mapped =
        build_offset_map(bytes, BuildMapOptions{.start_offset = 0, .end_offset = offset}, map,
                         map_txns);
    map_s.push_back(seconds_since(start));
    check(mapped.status(), "build_offset_map");
    if (mapped->progress != MapProgress::kSegmentDone) {
      std::fprintf(stderr, "compaction: the offset map filled up\n");
      std::exit(1);
    }
    TxnTracker clean_txns;
    CleanOptions options;
    options.current_time_ms = kFirstTimestampMs + offset;
    options.delete_retention_ms = 24 * 3600 * 1000LL;
    options.round_end_offset = map.latest_offset() + 1;
    start = SteadyClock::now();
    absl::StatusOr<CleanResult> cleaned = clean_segment(bytes, map, options, clean_txns);
    clean_s.push_back(seconds_since(start));
    check(cleaned.status(), "clean_segment");
    last = *std::move(cleaned);
  }
  const double map_med = median(map_s);
  const double clean_med = median(clean_s);
  std::printf("\ncompact: %.1f MiB segment in memory, %lld records (%zu per batch, %llu-byte "
              "values) over %llu keys, median of %llu rounds\n",
              static_cast<double>(bytes.size()) / (1 << 20), static_cast<long long>(offset),
              per_batch, static_cast<unsigned long long>(o.compact_value_bytes),
              static_cast<unsigned long long>(o.compact_keys),
              static_cast<unsigned long long>(o.rounds));
  std::printf("  build_offset_map %.1f MB/s, clean_segment %.1f MB/s, both %.1f MB/s of input\n",
              mb_per_s(bytes.size(), map_med), mb_per_s(bytes.size(), clean_med),
              mb_per_s(bytes.size(), map_med + clean_med));
  std::printf("  kept %lld of %lld records in %lld of %lld batches (%.1f MiB written)\n",
              static_cast<long long>(last.records_kept), static_cast<long long>(last.records_read),
              static_cast<long long>(last.batches_kept), static_cast<long long>(last.batches_read),
              static_cast<double>(last.bytes_written) / (1 << 20));
}

int bench_main(int argc, char** argv) {
  const std::optional<Options> o = parse_options(argc, argv);
  if (!o) {
    usage();
    return 2;
  }
  if (!o->pin_cpu.empty()) {
    if (absl::Status pinned = io::real::pin_to_cpu(o->pin_cpu); !pinned.ok()) {
      std::fprintf(stderr, "brook-log-bench: %s\n", std::string(pinned.message()).c_str());
      return 1;
    }
  }
  const auto started = SteadyClock::now();
  absl::StatusOr<std::unique_ptr<io::uring::Loop>> loop = io::uring::Loop::create();
  const bool io_cases = o->runs("append") || o->runs("read") || o->runs("lookup") ||
                        o->runs("recovery");
  if (!loop.ok() && io_cases) {
    std::fprintf(stderr, "brook-log-bench: io_uring unavailable: %s\n",
                 loop.status().ToString().c_str());
    return 1;
  }
  const size_t per_batch = (o->batch_kib << 10) / o->record_bytes;
  const size_t value_bytes = o->record_bytes;
  std::printf("brook-log-bench: io_uring, %s, %llu-KiB batches of %zu records with %zu-byte "
              "values\n",
              o->dir.c_str(), static_cast<unsigned long long>(o->batch_kib), per_batch,
              value_bytes);
  std::vector<io::Buffer> batches;
  if (io_cases) {
    // Batch count for --append-mib of batch bytes (a batch is a little
    // more than batch_kib: keys and record framing).
    const size_t count = std::max<size_t>(1, (o->append_mib << 10) / o->batch_kib);
    batches = make_batches(count, per_batch, value_bytes, 5, io::to_ms((*loop)->wall_now()));
  }
  if (o->runs("append")) {
    bench_append(**loop, *o, batches);
    if (o->breakdown) append_breakdown(batches);
  }
  if (o->runs("read") || o->runs("lookup")) {
    bench_read_and_lookup(**loop, *o, batches, o->runs("read"), o->runs("lookup"));
  }
  if (o->runs("recovery")) bench_recovery(**loop, *o, batches);
  if (o->runs("compact")) bench_compaction(*o);
  std::printf("\ntotal %.1f s\n", seconds_since(started));
  return 0;
}

}  // namespace
}  // namespace brook::storage

int main(int argc, char** argv) { return brook::storage::bench_main(argc, argv); }
