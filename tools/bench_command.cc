// tools/bench_command.cc
//
// `brook bench`: throughput of the real io backends next to the same work
// done with plain blocking system calls, measured in the same run so the
// ratio means something on a shared machine.
//
//   brook bench net  [--backend uring|epoll|all] [--seconds S]
//                    [--connections 1,16] [--loops 1,2] [--message-bytes N]
//                    [--rounds R] [--pin-cpus C,S] [--verbose 1]
//   brook bench file [--backend uring|epoll|all] [--total-mib N]
//                    [--chunk-kib K] [--sync-kib 1024] [--dir D] [--rounds R]
//                    [--pin-cpu C] [--ring-writes 1]
//
// net: a loopback TCP pump between two brook processes. This process is the
// client; it re-executes itself as `brook bench net-server` (hidden) with the
// same backend, which counts the bytes it receives until every connection
// ends and reports them. The plain pump is one thread per connection on each
// side doing blocking send()/read() loops. --loops L (a list, 1 by default)
// runs each backend side as L loops, each on a thread of its own with its
// share of the connections: one loop per core, as shards would be.
// --pin-cpus C,S pins the client process to CPU C and the server to S
// (every contestant alike), taking the scheduler's placement out of the
// comparison.
// file: sequential appends with a datasync after every MiB (--sync-kib),
// through io::File on each backend, beside write()+fdatasync(). io_uring
// makes writes of up to 1 MiB inline (io::uring::DiskOptions);
// --ring-writes 1 sends them all through the ring instead.
//
// With --rounds R every case runs R times, interleaved, and the median is
// printed. Tools are not logic code: threads, clocks and syscalls are fine.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "io/buffer.h"
#include "io/real/affinity.h"
#include "io/scope.h"
#include "io/status.h"
#include "io/task.h"
#include "tools/commands.h"

#if __has_include("io/uring/loop.h")
#include "io/uring/disk.h"
#include "io/uring/loop.h"
#include "io/uring/network.h"
#define BROOK_BENCH_HAS_URING 1
#endif
#if __has_include("io/posix/loop.h")
#include "io/posix/disk.h"
#include "io/posix/loop.h"
#include "io/posix/network.h"
#define BROOK_BENCH_HAS_EPOLL 1
#endif

namespace brook::tools {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadBytes = 64 << 10;        // per read on the server side
constexpr uint64_t kSyncKibDefault = 1024;  // file bench: datasync every MiB
constexpr int kConnectionsMax = 1024;
constexpr int kLoopsMax = 64;  // net: loops (threads) per side

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double mb_per_s(uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / 1e6 / seconds : 0.0;
}

// CPU time (user + system) this process has used, in microseconds.
uint64_t process_cpu_us() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto us = [](const timeval& t) {
    return static_cast<uint64_t>(t.tv_sec) * 1'000'000 + static_cast<uint64_t>(t.tv_usec);
  };
  return us(usage.ru_utime) + us(usage.ru_stime);
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// ------------------------------------------------------------------ options

struct Options {
  std::map<std::string, std::string, std::less<>> values;

  std::string get(std::string_view key, std::string fallback) const {
    auto it = values.find(key);
    return it == values.end() ? fallback : it->second;
  }
  std::optional<uint64_t> number(std::string_view key, uint64_t fallback) const {
    auto it = values.find(key);
    if (it == values.end()) return fallback;
    uint64_t v = 0;
    const char* end = it->second.data() + it->second.size();
    auto [ptr, ec] = std::from_chars(it->second.data(), end, v);
    if (ec != std::errc() || ptr != end) return std::nullopt;
    return v;
  }
};

std::optional<Options> parse_options(Args args) {
  Options out;
  for (size_t i = 0; i < args.size(); i += 2) {
    if (!args[i].starts_with("--") || i + 1 == args.size()) {
      std::fprintf(stderr, "brook bench: bad argument '%.*s'\n", static_cast<int>(args[i].size()),
                   args[i].data());
      return std::nullopt;
    }
    out.values[std::string(args[i].substr(2))] = std::string(args[i + 1]);
  }
  return out;
}

// A comma-separated list of numbers in [1, max].
std::optional<std::vector<int>> parse_list(const std::string& text, int max = kConnectionsMax) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    int v = 0;
    auto [ptr, ec] = std::from_chars(text.data() + start, text.data() + end, v);
    if (ec != std::errc() || ptr != text.data() + end || v <= 0 || v > max) {
      return std::nullopt;
    }
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

// -------------------------------------------------------------- backends

// The io backends this build has, by name; each knows how to make its loop.
struct BackendInfo {
  std::string name;     // as printed
  std::string flag;     // as given to --backend
  std::function<std::string()> unavailable;  // "" when usable
};

// The backends --backend names ("all" for every one built in); empty when
// the name is unknown or not built into this binary.
std::vector<BackendInfo> available_backends(const std::string& selected) {
  std::vector<BackendInfo> out;
#ifdef BROOK_BENCH_HAS_URING
  if (selected == "all" || selected == "uring") {
    out.push_back({"io_uring", "uring", [] {
                     auto loop = io::uring::Loop::create();
                     return loop.ok() ? std::string() : loop.status().ToString();
                   }});
  }
#endif
#ifdef BROOK_BENCH_HAS_EPOLL
  if (selected == "all" || selected == "epoll") {
    out.push_back({"epoll", "epoll", [] { return std::string(); }});
  }
#endif
  return out;
}

// Runs `body` against the named backend's loop, network and a disk rooted at
// `dir` (when not empty). The template keeps the benchmark code identical
// for every backend.
template <typename Loop, typename Network, typename Disk, typename Body, typename... DiskArgs>
absl::Status with_backend(absl::StatusOr<std::unique_ptr<Loop>> made, const std::string& dir,
                          Body&& body, DiskArgs... disk_args) {
  if (!made.ok()) return made.status();
  Loop& loop = **made;
  Network network(loop);
  std::unique_ptr<Disk> disk;
  if (!dir.empty()) disk = std::make_unique<Disk>(loop, dir, disk_args...);
  io::TaskScope scope(loop);
  absl::Status status = body(scope, static_cast<io::Clock&>(loop), network, disk.get());
  loop.run_until([&] { return scope.empty(); });
  return status;
}

// `ring_writes` sends every io_uring file write through the ring instead of
// making small ones inline (io::uring::DiskOptions).
template <typename Body>
absl::Status run_on(const std::string& flag, const std::string& dir, Body&& body,
                    bool ring_writes = false) {
#ifdef BROOK_BENCH_HAS_URING
  if (flag == "uring") {
    io::uring::DiskOptions disk_options;
    if (ring_writes) disk_options.inline_write_bytes_max = 0;
    return with_backend<io::uring::Loop, io::uring::Network, io::uring::Disk>(
        io::uring::Loop::create(), dir, body, disk_options);
  }
#else
  (void)ring_writes;
#endif
#ifdef BROOK_BENCH_HAS_EPOLL
  if (flag == "epoll") {
    return with_backend<io::posix::Loop, io::posix::Network, io::posix::Disk>(
        io::posix::Loop::create(), dir, body);
  }
#endif
  return absl::InvalidArgumentError(fmt::format("unknown backend '{}'", flag));
}

// ------------------------------------------------------- net: backend side

struct ServerTally {
  uint64_t bytes = 0;
  absl::Status status;
};

io::Task<void> drain(std::unique_ptr<io::Connection> conn, ServerTally* tally) {
  for (;;) {
    auto chunk = co_await conn->read_some(kReadBytes);
    if (!chunk.ok()) {
      tally->status.Update(chunk.status());
      co_return;
    }
    if (chunk->empty()) co_return;
    tally->bytes += chunk->size();
  }
}

// Where a server loop says which port it listens on: 0 until it knows, -1
// when it failed to listen.
struct PortSlot {
  std::atomic<int> port{0};
  void set(int value) {
    int unset = 0;
    port.compare_exchange_strong(unset, value);
    port.notify_all();
  }
  int wait() {
    port.wait(0);
    return port.load();
  }
};

// Listens on a port of its own (told to `port`) and drains `connections`
// connections.
io::Task<void> serve(io::Network* net, int connections, PortSlot* port, ServerTally* tally) {
  const io::Address any{"127.0.0.1", 0};
  auto listener = co_await net->listen(any);
  if (!listener.ok()) {
    tally->status = listener.status();
    port->set(-1);
    co_return;
  }
  port->set((*listener)->address().port);
  io::TaskScope drains(co_await io::this_executor());
  for (int i = 0; i < connections; ++i) {
    auto conn = co_await (*listener)->accept();
    if (!conn.ok()) {
      tally->status = conn.status();
      co_return;
    }
    drains.spawn(drain(std::move(*conn), tally));
  }
  co_await drains.join();
}

struct ClientTally {
  uint64_t bytes = 0;
  absl::Status status;
};

io::Task<void> pump(io::Network* net, io::Address server, io::Buffer message,
                    const io::Clock* clock, io::Instant deadline, ClientTally* tally) {
  auto conn = co_await net->connect(server);
  if (!conn.ok()) {
    tally->status.Update(conn.status());
    co_return;
  }
  while (clock->now() < deadline) {
    absl::Status s = co_await (*conn)->write_all(io::BufferChain(message));
    if (!s.ok()) {
      tally->status.Update(s);
      break;
    }
    tally->bytes += message.size();
  }
  (*conn)->close();
}

// Pins this process (and the threads it starts afterwards) to one CPU;
// complains and returns false when it cannot.
bool pin_to_cpu(const std::string& cpu) {
  if (absl::Status pinned = io::real::pin_to_cpu(cpu); !pinned.ok()) {
    std::fprintf(stderr, "brook bench: %s\n", std::string(pinned.message()).c_str());
    return false;
  }
  return true;
}

// ----------------------------------------------------- net: plain sockets

int plain_listen(uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, 1024) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

int plain_net_server(int connections) {
  uint16_t port = 0;
  const int listener = plain_listen(&port);
  if (listener < 0) {
    std::perror("listen");
    return 1;
  }
  std::printf("port %u\n", port);
  std::fflush(stdout);
  std::atomic<uint64_t> total{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < connections; ++i) {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      std::perror("accept");
      return 1;
    }
    readers.emplace_back([fd, &total] {
      std::vector<char> buf(kReadBytes);
      uint64_t bytes = 0;
      for (;;) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n <= 0) break;
        bytes += static_cast<uint64_t>(n);
      }
      total += bytes;
      ::close(fd);
    });
  }
  for (auto& t : readers) t.join();
  ::close(listener);
  std::printf("bytes %llu\n", static_cast<unsigned long long>(total.load()));
  std::printf("cpu_us %llu\n", static_cast<unsigned long long>(process_cpu_us()));
  std::fflush(stdout);
  return 0;
}

absl::StatusOr<uint64_t> plain_net_client(uint16_t port, int connections, double seconds,
                                          size_t message_bytes) {
  std::atomic<uint64_t> total{0};
  std::atomic<int> failures{0};
  const std::vector<char> message(message_bytes, 'b');
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> writers;
  for (int i = 0; i < connections; ++i) {
    writers.emplace_back([&] {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(port);
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        ++failures;
        ::close(fd);
        return;
      }
      uint64_t bytes = 0;
      while (Clock::now() < deadline) {
        size_t sent = 0;
        while (sent < message.size()) {
          const ssize_t n = ::send(fd, message.data() + sent, message.size() - sent, MSG_NOSIGNAL);
          if (n <= 0) break;
          sent += static_cast<size_t>(n);
        }
        if (sent < message.size()) {
          ++failures;
          break;
        }
        bytes += sent;
      }
      total += bytes;
      ::close(fd);
    });
  }
  for (auto& t : writers) t.join();
  if (failures > 0) return absl::UnavailableError("plain client: send or connect failed");
  return total.load();
}

// ------------------------------------------------------ net: the two sides

// How many of `connections` the loop `index` of `loops` takes.
int loop_share(int connections, int loops, int index) {
  return connections / loops + (index < connections % loops ? 1 : 0);
}

// The server process, started by the client: `brook bench net-server`.
// With --loops L it runs L loops, each on a thread and port of its own
// (printed in order, one "port" line each), taking loop_share() of the
// connections.
int net_server_main(const Options& options) {
  const std::string backend = options.get("backend", "plain");
  const auto connections = options.number("connections", 1);
  const auto loops = options.number("loops", 1);
  if (!connections || *connections == 0 || *connections > kConnectionsMax || !loops ||
      *loops == 0 || *loops > *connections || *loops > kLoopsMax) {
    return 2;
  }
  if (const std::string cpu = options.get("pin-cpu", ""); !cpu.empty() && !pin_to_cpu(cpu)) {
    return 1;
  }
  const int n = static_cast<int>(*connections);
  if (backend == "plain") return plain_net_server(n);
  const int l = static_cast<int>(*loops);
  std::vector<ServerTally> tallies(l);
  std::vector<PortSlot> ports(l);
  std::vector<absl::Status> statuses(l);
  std::vector<std::thread> threads;
  for (int t = 0; t < l; ++t) {
    threads.emplace_back([&, t] {
      statuses[t] = run_on(backend, "", [&](io::TaskScope& scope, io::Clock&, io::Network& net,
                                            auto*) {
        scope.spawn(serve(&net, loop_share(n, l, t), &ports[t], &tallies[t]));
        return absl::OkStatus();
      });
      ports[t].set(-1);  // the loop ended before it listened
    });
  }
  for (int t = 0; t < l; ++t) {
    const int port = ports[t].wait();
    if (port < 0) {
      threads[t].join();  // its loop has ended
      statuses[t].Update(tallies[t].status);
      std::fprintf(stderr, "net-server: %s\n", statuses[t].ToString().c_str());
      std::_Exit(1);  // the other loops wait in accept()
    }
    std::printf("port %d\n", port);
  }
  std::fflush(stdout);
  for (auto& thread : threads) thread.join();
  absl::Status status;
  uint64_t bytes = 0;
  for (int t = 0; t < l; ++t) {
    status.Update(statuses[t]);
    status.Update(tallies[t].status);
    bytes += tallies[t].bytes;
  }
  if (!status.ok()) {
    std::fprintf(stderr, "net-server: %s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("bytes %llu\n", static_cast<unsigned long long>(bytes));
  std::printf("cpu_us %llu\n", static_cast<unsigned long long>(process_cpu_us()));
  std::fflush(stdout);
  return 0;
}

// A child `brook bench net-server` process whose stdout we read.
class ServerProcess {
 public:
  // `cpu`: the CPU the server pins itself to; empty for none.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> start(const std::string& backend,
                                                              int connections, int loops,
                                                              const std::string& cpu) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe");
    const std::string count = std::to_string(connections);
    const std::string loop_count = std::to_string(loops);
    const pid_t pid = ::fork();
    if (pid < 0) return absl::InternalError("fork");
    if (pid == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      std::vector<const char*> argv = {"brook",         "bench",   "net-server",
                                       "--backend",     backend.c_str(),
                                       "--connections", count.c_str(),
                                       "--loops",       loop_count.c_str()};
      if (!cpu.empty()) argv.insert(argv.end(), {"--pin-cpu", cpu.c_str()});
      argv.push_back(nullptr);
      ::execv("/proc/self/exe", const_cast<char* const*>(argv.data()));
      ::_exit(127);
    }
    ::close(fds[1]);
    auto p = std::unique_ptr<ServerProcess>(new ServerProcess(pid, ::fdopen(fds[0], "r")));
    return p;
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ != nullptr) std::fclose(out_);
  }

  // Reads "<key> <number>" from the child.
  absl::StatusOr<uint64_t> read_value(const std::string& key) {
    char line[128];
    if (out_ == nullptr || std::fgets(line, sizeof(line), out_) == nullptr) {
      return absl::UnavailableError("net-server ended early");
    }
    unsigned long long v = 0;
    const std::string format = key + " %llu";
    if (std::sscanf(line, format.c_str(), &v) != 1) {
      return absl::InternalError(fmt::format("net-server said: {}", line));
    }
    return v;
  }
  // Waits for the child to exit; true when it exited with status 0.
  bool wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }

 private:
  ServerProcess(pid_t pid, FILE* out) : pid_(pid), out_(out) {}
  pid_t pid_;
  FILE* out_;
};

struct NetCase {
  int connections;
  int loops;  // of each backend side; plain pumps are a thread per connection
  std::string server_cpu;  // the server process's CPU; empty: not pinned
  double seconds;
  size_t message_bytes;
};

// One measured pump: throughput the server saw, and the CPU each side used
// per second of wall time (1.0 is one core busy).
struct NetSample {
  double mb_per_s;
  double client_cores;
  double server_cores;
};

// Pumps from this process with the backend's io::Network: one loop per
// server port, each on a thread of its own, connecting loop_share() of the
// connections to its port.
absl::Status pump_with_backend(const std::string& backend, const std::vector<int>& ports,
                               const NetCase& c) {
  const int loops = static_cast<int>(ports.size());
  std::vector<ClientTally> tallies(loops);
  std::vector<absl::Status> statuses(loops);
  std::vector<std::thread> threads;
  for (int t = 0; t < loops; ++t) {
    threads.emplace_back([&, t] {
      io::Buffer message = io::Buffer::allocate(c.message_bytes);
      std::memset(message.mutable_data(), 'b', c.message_bytes);
      const io::Address server_address{"127.0.0.1", static_cast<uint16_t>(ports[t])};
      statuses[t] = run_on(backend, "", [&](io::TaskScope& scope, io::Clock& clock,
                                            io::Network& net, auto*) {
        const io::Instant deadline =
            clock.now() +
            std::chrono::duration_cast<io::Duration>(std::chrono::duration<double>(c.seconds));
        for (int i = 0; i < loop_share(c.connections, loops, t); ++i) {
          scope.spawn(pump(&net, server_address, message, &clock, deadline, &tallies[t]));
        }
        return absl::OkStatus();
      });
    });
  }
  for (auto& thread : threads) thread.join();
  absl::Status status;
  for (int t = 0; t < loops; ++t) {
    status.Update(statuses[t]);
    status.Update(tallies[t].status);
  }
  return status;
}

// Runs one case: a server process of the same backend, this process pumping.
absl::StatusOr<NetSample> run_net_case(const std::string& backend, const NetCase& c) {
  const int loops = backend == "plain" ? 1 : c.loops;
  ASSIGN_OR_RETURN(auto server,
                   ServerProcess::start(backend, c.connections, loops, c.server_cpu));
  std::vector<int> ports;
  for (int t = 0; t < loops; ++t) {
    ASSIGN_OR_RETURN(const uint64_t port, server->read_value("port"));
    ports.push_back(static_cast<int>(port));
  }
  const auto start = Clock::now();
  const uint64_t cpu_start_us = process_cpu_us();
  if (backend == "plain") {
    auto sent = plain_net_client(static_cast<uint16_t>(ports[0]), c.connections, c.seconds,
                                 c.message_bytes);
    if (!sent.ok()) return sent.status();
  } else {
    RETURN_IF_ERROR(pump_with_backend(backend, ports, c));
  }
  const uint64_t client_cpu_us = process_cpu_us() - cpu_start_us;
  ASSIGN_OR_RETURN(const uint64_t received, server->read_value("bytes"));
  const double elapsed = seconds_since(start);
  ASSIGN_OR_RETURN(const uint64_t server_cpu_us, server->read_value("cpu_us"));
  if (!server->wait()) return absl::InternalError("net-server failed");
  return NetSample{mb_per_s(received, elapsed), static_cast<double>(client_cpu_us) / 1e6 / elapsed,
                   static_cast<double>(server_cpu_us) / 1e6 / elapsed};
}

struct NetSamples {
  std::vector<double> mb_per_s;
  std::vector<double> client_cores;
  std::vector<double> server_cores;
  void add(const NetSample& s) {
    mb_per_s.push_back(s.mb_per_s);
    client_cores.push_back(s.client_cores);
    server_cores.push_back(s.server_cores);
  }
};

// One pump to measure: a backend (or "plain") and its loops per side.
struct Contestant {
  std::string flag;
  int loops;
  bool operator<(const Contestant& o) const {
    return std::tie(flag, loops) < std::tie(o.flag, o.loops);
  }
};

// Measures plain and every usable backend with each of `loops` that is at
// most the connection count, interleaved, `rounds` times.
std::map<Contestant, NetSamples> measure_net(const std::vector<BackendInfo>& backends,
                                             const std::vector<int>& loops, const NetCase& c,
                                             uint64_t rounds, bool verbose, int* failures) {
  std::vector<Contestant> contestants = {{"plain", 1}};
  for (const BackendInfo& b : backends) {
    if (!b.unavailable().empty()) continue;
    for (const int l : loops) {
      if (l <= c.connections) contestants.push_back({b.flag, l});
    }
  }
  std::map<Contestant, NetSamples> samples;
  for (uint64_t round = 0; round < rounds; ++round) {
    // Each round starts with a different contestant, so none always runs
    // first (or right after the same one).
    for (size_t k = 0; k < contestants.size(); ++k) {
      const Contestant& who = contestants[(k + round) % contestants.size()];
      NetCase mine = c;
      mine.loops = who.loops;
      auto r = run_net_case(who.flag, mine);
      if (!r.ok()) {
        std::fprintf(stderr, "%s: %s\n", who.flag.c_str(), r.status().ToString().c_str());
        ++*failures;
        continue;
      }
      samples[who].add(*r);
      if (verbose) {
        std::fprintf(stderr, "  round %llu %-6s %5d conns %2d loops %9.1f MB/s  cores %.2f/%.2f\n",
                     static_cast<unsigned long long>(round), who.flag.c_str(), c.connections,
                     who.loops, r->mb_per_s, r->client_cores, r->server_cores);
      }
    }
  }
  return samples;
}

// `brook bench net-client --backend B --port P[,P2...] [...]` (hidden): one
// pump against a server started by hand (`brook bench net-server`, which
// prints its ports), for profiling each side separately; one loop per port.
int net_client_main(const Options& options) {
  const std::string backend = options.get("backend", "plain");
  const auto ports = parse_list(options.get("port", ""), 65535);
  const auto seconds = options.number("seconds", 3);
  const auto message_bytes = options.number("message-bytes", 64 << 10);
  const auto connections = options.number("connections", 1);
  if (!ports || !seconds || !message_bytes || *message_bytes == 0 || !connections ||
      *connections < ports->size() || *connections > kConnectionsMax ||
      (backend == "plain" && ports->size() != 1)) {
    std::fprintf(stderr, "brook bench net-client: bad option value\n");
    return 2;
  }
  const NetCase c{static_cast<int>(*connections), static_cast<int>(ports->size()), "",
                  static_cast<double>(*seconds), static_cast<size_t>(*message_bytes)};
  absl::Status status;
  if (backend == "plain") {
    status = plain_net_client(static_cast<uint16_t>(ports->front()), c.connections, c.seconds,
                              c.message_bytes)
                 .status();
  } else {
    status = pump_with_backend(backend, *ports, c);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "net-client: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

int net_main(const Options& options) {
  const auto seconds = options.number("seconds", 3);
  const auto message_bytes = options.number("message-bytes", 64 << 10);
  const auto rounds = options.number("rounds", 1);
  const auto connections = parse_list(options.get("connections", "1,16"));
  const auto loops = parse_list(options.get("loops", "1"), kLoopsMax);
  const std::string pin = options.get("pin-cpus", "");
  const size_t comma = pin.find(',');
  auto is_cpu = [](std::string_view text) { return io::real::parse_cpu(text).ok(); };
  if (!seconds || !message_bytes || *message_bytes == 0 || *message_bytes > (64u << 20) ||
      !rounds || *rounds == 0 || !connections || !loops ||
      (!pin.empty() && (comma == std::string::npos || !is_cpu(pin.substr(0, comma)) ||
                        !is_cpu(pin.substr(comma + 1))))) {
    std::fprintf(stderr, "brook bench net: bad option value\n");
    return 2;
  }
  // --pin-cpus C,S: this process (every client thread) on CPU C, the server on S.
  const std::string server_cpu = pin.empty() ? "" : pin.substr(comma + 1);
  if (!pin.empty() && !pin_to_cpu(pin.substr(0, comma))) return 1;
  const auto backends = available_backends(options.get("backend", "all"));
  if (backends.empty()) {
    std::fprintf(stderr, "brook bench net: no such backend in this build\n");
    return 2;
  }
  std::printf("bench net: loopback TCP, client and server in separate processes, %llu s per "
              "case, %llu-byte messages, median of %llu round(s)\n",
              static_cast<unsigned long long>(*seconds),
              static_cast<unsigned long long>(*message_bytes),
              static_cast<unsigned long long>(*rounds));
  std::printf("%-9s %5s %5s %10s %12s %7s   %-22s %s\n", "backend", "conns", "loops", "MB/s",
              "plain MB/s", "ratio", "cores client/server", "plain cores client/server");
  int failures = 0;
  for (const int conns : *connections) {
    const NetCase c{conns, 1, server_cpu, static_cast<double>(*seconds),
                    static_cast<size_t>(*message_bytes)};
    auto samples =
        measure_net(backends, *loops, c, *rounds, options.get("verbose", "0") != "0", &failures);
    const NetSamples& plain = samples[{"plain", 1}];
    for (const BackendInfo& b : backends) {
      if (const std::string why = b.unavailable(); !why.empty()) {
        std::printf("%-9s %5d  unavailable: %s\n", b.name.c_str(), conns, why.c_str());
        continue;
      }
      for (const int l : *loops) {
        if (l > conns) continue;
        const NetSamples& mine = samples[{b.flag, l}];
        const double mbs = median(mine.mb_per_s);
        const double plain_mbs = median(plain.mb_per_s);
        std::printf("%-9s %5d %5d %10.1f %12.1f %6.1f%%   %4.2f/%-17.2f %4.2f/%.2f\n",
                    b.name.c_str(), conns, l, mbs, plain_mbs,
                    plain_mbs > 0 ? 100.0 * mbs / plain_mbs : 0.0, median(mine.client_cores),
                    median(mine.server_cores), median(plain.client_cores),
                    median(plain.server_cores));
      }
    }
    std::fflush(stdout);
  }
  return failures == 0 ? 0 : 1;
}

// --------------------------------------------------------------- file bench

struct FileCase {
  std::string dir;
  uint64_t total_bytes;
  size_t chunk_bytes;
  uint64_t sync_every_bytes;  // 0: never (page-cache writes only)
  bool ring_writes = false;   // io_uring: no inline writes

  bool sync_due(uint64_t written) const {
    return sync_every_bytes > 0 && written % sync_every_bytes == 0;
  }
};

struct FileRun {
  absl::Status status;
  double seconds = 0;  // open to close; removing the file is not timed
};

io::Task<void> append_file(io::Disk* disk, std::string name, FileCase c, FileRun* out) {
  io::Buffer chunk = io::Buffer::allocate(c.chunk_bytes);
  std::memset(chunk.mutable_data(), 'f', c.chunk_bytes);
  const auto start = Clock::now();
  auto file = co_await disk->open(name, io::OpenMode::kCreateExclusive);
  if (!file.ok()) {
    out->status = file.status();
    co_return;
  }
  uint64_t written = 0;
  while (written < c.total_bytes) {
    absl::Status s = co_await (*file)->append(io::BufferChain(chunk));
    written += c.chunk_bytes;
    if (s.ok() && c.sync_due(written)) s = co_await (*file)->datasync();
    if (!s.ok()) {
      out->status = s;
      co_return;
    }
  }
  out->status = co_await (*file)->close();
  out->seconds = seconds_since(start);
  if (out->status.ok()) out->status = co_await disk->remove(name);
}

absl::StatusOr<double> run_file_backend(const std::string& flag, const FileCase& c) {
  FileRun run;
  RETURN_IF_ERROR(run_on(flag, c.dir, [&](io::TaskScope& scope, io::Clock&, io::Network&,
                                          auto* disk) {
    scope.spawn(append_file(disk, "bench-" + flag + ".log", c, &run));
    return absl::OkStatus();
  }, c.ring_writes));
  RETURN_IF_ERROR(run.status);
  return mb_per_s(c.total_bytes, run.seconds);
}

absl::StatusOr<double> run_file_plain(const FileCase& c) {
  const std::string path = c.dir + "/bench-plain.log";
  const std::vector<char> chunk(c.chunk_bytes, 'f');
  const auto start = Clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(fmt::format("open {}: {}", path, std::strerror(errno)));
  uint64_t written = 0;
  absl::Status status;
  while (written < c.total_bytes && status.ok()) {
    size_t done = 0;
    while (done < chunk.size()) {
      const ssize_t n = ::write(fd, chunk.data() + done, chunk.size() - done);
      if (n <= 0) {
        status = absl::InternalError(fmt::format("write: {}", std::strerror(errno)));
        break;
      }
      done += static_cast<size_t>(n);
    }
    written += c.chunk_bytes;
    if (status.ok() && c.sync_due(written) && ::fdatasync(fd) != 0) {
      status = absl::InternalError(fmt::format("fdatasync: {}", std::strerror(errno)));
    }
  }
  ::close(fd);
  const double elapsed = seconds_since(start);
  ::unlink(path.c_str());
  RETURN_IF_ERROR(status);
  return mb_per_s(c.total_bytes, elapsed);
}

// Measures plain and every usable backend, in rotating order, `rounds` times.
std::map<std::string, std::vector<double>> measure_file(const std::vector<BackendInfo>& backends,
                                                        const FileCase& c, uint64_t rounds,
                                                        int* failures) {
  std::vector<std::string> flags = {"plain"};
  for (const BackendInfo& b : backends) {
    if (b.unavailable().empty()) flags.push_back(b.flag);
  }
  std::map<std::string, std::vector<double>> samples;
  for (uint64_t round = 0; round < rounds; ++round) {
    for (size_t k = 0; k < flags.size(); ++k) {
      const std::string& flag = flags[(k + round) % flags.size()];
      auto r = flag == "plain" ? run_file_plain(c) : run_file_backend(flag, c);
      if (!r.ok()) {
        std::fprintf(stderr, "%s: %s\n", flag.c_str(), r.status().ToString().c_str());
        ++*failures;
        continue;
      }
      samples[flag].push_back(*r);
    }
  }
  return samples;
}

int file_main(const Options& options) {
  const auto total_mib = options.number("total-mib", 64);
  const auto chunk_kib = options.number("chunk-kib", 64);
  const auto sync_kib = options.number("sync-kib", kSyncKibDefault);
  const auto rounds = options.number("rounds", 1);
  if (!total_mib || *total_mib == 0 || !chunk_kib || *chunk_kib == 0 || !sync_kib ||
      (*sync_kib % *chunk_kib) != 0 || ((*total_mib << 10) % *chunk_kib) != 0 || !rounds ||
      *rounds == 0) {
    std::fprintf(stderr,
                 "brook bench file: bad option value (chunks must divide the sync interval "
                 "and the total)\n");
    return 2;
  }
  const auto backends = available_backends(options.get("backend", "all"));
  if (backends.empty()) {
    std::fprintf(stderr, "brook bench file: no such backend in this build\n");
    return 2;
  }
  if (const std::string cpu = options.get("pin-cpu", ""); !cpu.empty() && !pin_to_cpu(cpu)) {
    return 1;
  }
  std::string pattern = options.get("dir", "/tmp") + "/brook-bench-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const FileCase c{pattern, *total_mib << 20, static_cast<size_t>(*chunk_kib << 10),
                   *sync_kib << 10, options.get("ring-writes", "0") == "1"};
  std::printf("bench file: %llu MiB appended in %llu KiB chunks, datasync every %llu KiB "
              "(0: never), in %s, median of %llu round(s)\n",
              static_cast<unsigned long long>(*total_mib),
              static_cast<unsigned long long>(*chunk_kib),
              static_cast<unsigned long long>(*sync_kib), c.dir.c_str(),
              static_cast<unsigned long long>(*rounds));
  std::printf("%-9s %10s %12s %7s\n", "backend", "MB/s", "plain MB/s", "ratio");
  int failures = 0;
  auto samples = measure_file(backends, c, *rounds, &failures);
  const double plain = median(samples["plain"]);
  for (const BackendInfo& b : backends) {
    if (const std::string why = b.unavailable(); !why.empty()) {
      std::printf("%-9s unavailable: %s\n", b.name.c_str(), why.c_str());
      continue;
    }
    const double mbs = median(samples[b.flag]);
    std::printf("%-9s %10.1f %12.1f %6.1f%%\n", b.name.c_str(), mbs, plain,
                plain > 0 ? 100.0 * mbs / plain : 0.0);
  }
  std::error_code ignored;
  std::filesystem::remove_all(c.dir, ignored);
  return failures == 0 ? 0 : 1;
}

void usage() {
  std::fprintf(stderr,
               "usage: brook bench net  [--backend uring|epoll|all] [--seconds S]\n"
               "                        [--connections 1,16] [--loops 1,2] [--message-bytes N]\n"
               "                        [--rounds R] [--pin-cpus C,S] [--verbose 1]\n"
               "       brook bench file [--backend uring|epoll|all] [--total-mib N]\n"
               "                        [--chunk-kib K] [--sync-kib 1024] [--dir D] [--rounds R]\n"
               "                        [--pin-cpu C] [--ring-writes 1]\n"
               "       brook bench groups (--bootstrap-server H:P | --sim) [--members N]\n"
               "                        [--heartbeat-ms MS] [--commit-seconds S]\n");
}

}  // namespace

int bench_main(Args args) {
  if (args.empty()) {
    usage();
    return 2;
  }
  const std::string_view what = args[0];
  if (what == "groups") return group_bench_main(args.subspan(1));
  const std::optional<Options> options = parse_options(args.subspan(1));
  if (!options) {
    usage();
    return 2;
  }
  if (what == "net") return net_main(*options);
  if (what == "net-server") return net_server_main(*options);
  if (what == "net-client") return net_client_main(*options);
  if (what == "file") return file_main(*options);
  usage();
  return 2;
}

}  // namespace brook::tools
