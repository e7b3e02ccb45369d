// tools/client_bench.cc
//
// brook-client-bench: a librdkafka producer/consumer benchmark in the manner
// of Kafka's perf tools and the OpenMessaging Benchmark, run against a
// broker and against the ceilings (librdkafka's in-memory mock cluster and
// one loopback TCP stream).
//
//   brook-client-bench --bootstrap HOST:PORT [--broker-pid PID] [options]
//   brook-client-bench --mock [options]
//   brook-client-bench --loopback
//
// Options: --messages N (default 500000) --size BYTES (1024) --partitions P
// (6) --replication-factor R (1) --min-insync N (the topic's
// min.insync.replicas; the broker's default) --acks 0|1|all (1) --linger-ms
// MS (1) --batch-bytes B (1048576) --rate-seconds S (10) --rate-timeline
// (the rate phase's p99 and maximum per 100 ms) --topic NAME (a fresh one)
// --consume-only (only the consume phase, over the whole of an existing
// --topic of --partitions partitions) --consumers N (the consume phase with
// N consumers, partitions split among them; 1). --broker-pid may be given once per broker: the peak line
// prints MB produced per CPU-second of one broker (their mean) and of all
// of them together.
//
// Phases, each printing one line:
//   peak:     N messages as fast as the producer goes: MB/s and msgs/s
//             (and, with --broker-pid, the broker's CPU seconds per MB,
//             from /proc/PID/stat);
//   rate:     for S seconds at one third of the peak, each message timed
//             from its intended send time to its delivery report (so
//             queueing behind a stall counts): p50/p99/p99.9/max;
//   consume:  every message from the start of the topic: MB/s.
// --loopback prints the single-stream TCP ceiling instead: one thread
// writes 1 GiB to a loopback socket, another reads it.
//
// Tools are not logic code: threads, sockets and the real clock are fine.
#include <arpa/inet.h>
#include <sched.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string bootstrap;
  bool mock = false;
  bool loopback = false;
  std::vector<long> broker_pids;
  int replication_factor = 1;
  int min_insync = 0;
  long messages = 500000;
  long size = 1024;
  int partitions = 6;
  std::string acks = "1";
  int linger_ms = 1;
  long batch_bytes = 1 << 20;
  int rate_seconds = 10;
  bool rate_timeline = false;
  bool consume_only = false;
  int consumers = 1;
  std::string topic;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "brook-client-bench: %s\n", what.c_str());
  std::exit(1);
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// utime + stime of a process, in seconds.
std::optional<double> cpu_seconds(long pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<std::string> fields;
  size_t pos = close + 2;
  while (pos < line.size()) {
    const size_t sp = line.find(' ', pos);
    fields.push_back(line.substr(pos, sp - pos));
    if (sp == std::string::npos) break;
    pos = sp + 1;
  }
  // fields[0] is field 3 (state); utime is field 14, stime 15.
  if (fields.size() < 13) return std::nullopt;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  return (std::stod(fields[11]) + std::stod(fields[12])) / ticks;
}

void set(rd_kafka_conf_t* conf, const char* key, const std::string& value) {
  char err[512];
  if (rd_kafka_conf_set(conf, key, value.c_str(), err, sizeof(err)) != RD_KAFKA_CONF_OK) {
    die(std::string(key) + ": " + err);
  }
}

struct Delivery {
  std::atomic<long> done{0};
  std::atomic<long> failed{0};
  std::vector<int64_t>* latencies_us = nullptr;  // rate phase only
  // With --rate-timeline: (intended send time since the phase began, latency)
  // per message, both in microseconds.
  std::vector<std::pair<int64_t, int64_t>>* timeline = nullptr;
  Clock::time_point phase_start;
};

void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* d = static_cast<Delivery*>(opaque);
  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (d->failed++ < 5) std::fprintf(stderr, "delivery failed: %s\n", rd_kafka_err2str(m->err));
  } else if (d->latencies_us != nullptr && m->_private != nullptr) {
    const auto intended = Clock::time_point(Clock::duration(reinterpret_cast<intptr_t>(m->_private)));
    const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - intended).count();
    d->latencies_us->push_back(us);
    if (d->timeline != nullptr) {
      d->timeline->emplace_back(
          std::chrono::duration_cast<std::chrono::microseconds>(intended - d->phase_start).count(), us);
    }
  }
  d->done++;
}

rd_kafka_t* new_producer(const Options& o, const std::string& bootstrap, Delivery* d) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  set(conf, "bootstrap.servers", bootstrap);
  set(conf, "acks", o.acks);
  set(conf, "linger.ms", std::to_string(o.linger_ms));
  set(conf, "batch.size", std::to_string(o.batch_bytes));
  set(conf, "queue.buffering.max.kbytes", "1048576");
  set(conf, "queue.buffering.max.messages", "1000000");
  set(conf, "message.max.bytes", std::to_string(std::max<long>(1000000, o.batch_bytes + 1024)));
  rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  rd_kafka_conf_set_opaque(conf, d);
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
  if (rk == nullptr) die(err);
  return rk;
}

void create_topic(rd_kafka_t* rk, const Options& o) {
  char err[512];
  rd_kafka_NewTopic_t* nt =
      rd_kafka_NewTopic_new(o.topic.c_str(), o.partitions, o.replication_factor, err, sizeof(err));
  if (nt == nullptr) die(err);
  if (o.min_insync > 0) {
    const std::string v = std::to_string(o.min_insync);
    if (rd_kafka_NewTopic_set_config(nt, "min.insync.replicas", v.c_str()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      die("min.insync.replicas");
    }
  }
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_CreateTopics(rk, &nt, 1, nullptr, q);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 30000);
  if (ev == nullptr) die("CreateTopics: no answer");
  const rd_kafka_CreateTopics_result_t* res = rd_kafka_event_CreateTopics_result(ev);
  size_t n = 0;
  const rd_kafka_topic_result_t** topics = rd_kafka_CreateTopics_result_topics(res, &n);
  for (size_t i = 0; i < n; ++i) {
    if (rd_kafka_topic_result_error(topics[i]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      die(std::string("CreateTopics: ") + rd_kafka_topic_result_error_string(topics[i]));
    }
  }
  rd_kafka_event_destroy(ev);
  rd_kafka_queue_destroy(q);
  rd_kafka_NewTopic_destroy(nt);
}

void produce_one(rd_kafka_t* rk, rd_kafka_topic_t* t, std::vector<char>& payload, void* opaque) {
  while (rd_kafka_produce(t, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, payload.data(), payload.size(), nullptr, 0,
                          opaque) != 0) {
    if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) die(rd_kafka_err2str(rd_kafka_last_error()));
    rd_kafka_poll(rk, 1);
  }
}

std::optional<double> cpu_seconds_all(const std::vector<long>& pids) {
  if (pids.empty()) return std::nullopt;
  double sum = 0;
  for (long pid : pids) {
    std::optional<double> c = cpu_seconds(pid);
    if (!c) return std::nullopt;
    sum += *c;
  }
  return sum;
}

int64_t pct(std::vector<int64_t>& v, double q) {
  if (v.empty()) return 0;
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// One line per 100 ms of the rate phase (by intended send time): how many
// messages, their p99 and their maximum latency, so that a tail can be told
// apart as spread out or as a few stalls.
void print_timeline(std::vector<std::pair<int64_t, int64_t>>& timeline) {
  std::sort(timeline.begin(), timeline.end());
  size_t i = 0;
  while (i < timeline.size()) {
    const int64_t slot = timeline[i].first / 100000;
    std::vector<int64_t> in_slot;
    for (; i < timeline.size() && timeline[i].first / 100000 == slot; ++i) in_slot.push_back(timeline[i].second);
    std::sort(in_slot.begin(), in_slot.end());
    std::printf("timeline: at-ms=%ld messages=%zu p99-ms=%.2f max-ms=%.2f\n", static_cast<long>(slot * 100),
                in_slot.size(), static_cast<double>(pct(in_slot, 0.99)) / 1000,
                static_cast<double>(in_slot.back()) / 1000);
  }
}

void run_consume(const Options& o, const std::string& bootstrap, long total);

void run_kafka(const Options& o, const std::string& bootstrap) {
  Delivery d;
  rd_kafka_t* rk = new_producer(o, bootstrap, &d);
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk, o.topic.c_str(), nullptr);
  std::vector<char> payload(static_cast<size_t>(o.size), 'x');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>('a' + i % 26);
  const double mb = static_cast<double>(o.messages) * static_cast<double>(o.size) / 1e6;

  // Peak.
  const std::optional<double> cpu0 = cpu_seconds_all(o.broker_pids);
  auto t0 = Clock::now();
  for (long i = 0; i < o.messages; ++i) {
    produce_one(rk, t, payload, nullptr);
    if ((i & 1023) == 0) rd_kafka_poll(rk, 0);
  }
  rd_kafka_flush(rk, 120000);
  const double peak_s = seconds_since(t0);
  const std::optional<double> cpu1 = cpu_seconds_all(o.broker_pids);
  const double peak_rate = static_cast<double>(o.messages) / peak_s;
  std::printf("peak: messages=%ld size=%ld partitions=%d rf=%d acks=%s seconds=%.2f MB/s=%.1f msgs/s=%.0f failed=%ld",
              o.messages, o.size, o.partitions, o.replication_factor, o.acks.c_str(), peak_s, mb / peak_s, peak_rate, d.failed.load());
  if (cpu0 && cpu1) {
    const double cpu = *cpu1 - *cpu0;
    // Per broker: the MB produced over one broker's mean CPU seconds; all
    // brokers: over their sum.
    const double n = static_cast<double>(o.broker_pids.size());
    std::printf(" brokers=%zu broker-cpu-s=%.2f MB-per-broker-cpu-s=%.1f MB-per-all-brokers-cpu-s=%.1f",
                o.broker_pids.size(), cpu, cpu > 0 ? mb / (cpu / n) : 0.0, cpu > 0 ? mb / cpu : 0.0);
  }
  std::printf("\n");
  std::fflush(stdout);

  // Fixed rate at a third of the peak, timed from the intended send time.
  std::vector<int64_t> latencies;
  latencies.reserve(static_cast<size_t>(peak_rate / 3 * o.rate_seconds) + 16);
  d.latencies_us = &latencies;
  const double rate = peak_rate / 3;
  const auto interval = std::chrono::duration<double>(1.0 / rate);
  long sent = 0;
  std::vector<std::pair<int64_t, int64_t>> timeline;
  if (o.rate_timeline) {
    timeline.reserve(latencies.capacity());
    d.timeline = &timeline;
  }
  t0 = Clock::now();
  d.phase_start = t0;
  const auto end = t0 + std::chrono::seconds(o.rate_seconds);
  while (true) {
    const auto intended = t0 + std::chrono::duration_cast<Clock::duration>(interval * static_cast<double>(sent));
    if (intended >= end) break;
    // Waiting for the next message's time, the thread serves delivery
    // reports and yields the CPU to any other thread that can run: spinning
    // without yielding, it took one of the machine's cores from the brokers
    // it measures.
    while (Clock::now() < intended) {
      rd_kafka_poll(rk, 0);
      sched_yield();
    }
    produce_one(rk, t, payload, reinterpret_cast<void*>(static_cast<intptr_t>(intended.time_since_epoch().count())));
    ++sent;
    if ((sent & 63) == 0) rd_kafka_poll(rk, 0);
  }
  rd_kafka_flush(rk, 120000);
  std::sort(latencies.begin(), latencies.end());
  std::printf("rate: msgs/s=%.0f MB/s=%.1f sent=%ld latency-ms p50=%.2f p99=%.2f p99.9=%.2f max=%.2f\n", rate,
              rate * static_cast<double>(o.size) / 1e6, sent, static_cast<double>(pct(latencies, 0.5)) / 1000,
              static_cast<double>(pct(latencies, 0.99)) / 1000, static_cast<double>(pct(latencies, 0.999)) / 1000,
              latencies.empty() ? 0.0 : static_cast<double>(latencies.back()) / 1000);
  std::fflush(stdout);
  d.latencies_us = nullptr;
  d.timeline = nullptr;
  if (o.rate_timeline) print_timeline(timeline);
  const long total = o.messages + sent;
  rd_kafka_topic_destroy(t);
  rd_kafka_destroy(rk);
  run_consume(o, bootstrap, total);
}

// Consumes the whole topic from the start: `total` messages, or (total < 0)
// until every partition reports its end. With --consumers N, N librdkafka
// consumers (each its own connection and thread, as N group members would
// be) split the partitions round-robin; the figure is their sum.
void run_consume(const Options& o, const std::string& bootstrap, long total) {
  std::atomic<long> got{0};
  std::atomic<size_t> bytes{0};
  const auto t0 = Clock::now();
  // When each consumer had read its share (before it closes).
  std::vector<Clock::time_point> done(static_cast<size_t>(o.consumers), t0);
  auto consume = [&](int index) {
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", bootstrap);
    set(conf, "group.id", "brook-client-bench");
    set(conf, "enable.auto.commit", "false");
    set(conf, "enable.partition.eof", "true");
    // The fetch sizes are librdkafka's (and Kafka's) defaults, as the perf
    // tools run them: fetch.max.bytes 50 MiB, max.partition.fetch.bytes
    // 1 MiB. (Larger partition fetches make librdkafka, not the broker, the
    // bottleneck: its queue fills and it backs off.)
    char err[512];
    rd_kafka_t* consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    if (consumer == nullptr) die(err);
    rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(o.partitions);
    int mine = 0;
    for (int p = index; p < o.partitions; p += o.consumers) {
      rd_kafka_topic_partition_list_add(parts, o.topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
      ++mine;
    }
    rd_kafka_assign(consumer, parts);
    rd_kafka_topic_partition_list_destroy(parts);
    auto last = Clock::now();
    // Until each partition reports its end (librdkafka's mock cluster keeps
    // only the newest few MB of each partition, so it ends early).
    std::vector<bool> at_end(static_cast<size_t>(o.partitions), false);
    int ended = 0;
    // Messages are taken from the consumer queue in batches, which costs
    // librdkafka less per message than one poll each.
    rd_kafka_queue_t* queue = rd_kafka_queue_get_consumer(consumer);
    std::vector<rd_kafka_message_t*> batch(10000);
    while ((total < 0 || got.load(std::memory_order_relaxed) < total) && ended < mine &&
           seconds_since(last) < 20) {
      const ssize_t n = rd_kafka_consume_batch_queue(queue, 100, batch.data(), batch.size());
      long n_got = 0;
      size_t n_bytes = 0;
      for (ssize_t i = 0; i < n; ++i) {
        rd_kafka_message_t* m = batch[static_cast<size_t>(i)];
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
          ++n_got;
          n_bytes += m->len;
        } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF && m->partition >= 0 &&
                   m->partition < o.partitions && !at_end[static_cast<size_t>(m->partition)]) {
          at_end[static_cast<size_t>(m->partition)] = true;
          ++ended;
        }
        rd_kafka_message_destroy(m);
      }
      if (n_got > 0) {
        got.fetch_add(n_got, std::memory_order_relaxed);
        bytes.fetch_add(n_bytes, std::memory_order_relaxed);
        last = Clock::now();
      }
    }
    done[static_cast<size_t>(index)] = Clock::now();
    rd_kafka_queue_destroy(queue);
    rd_kafka_consumer_close(consumer);
    rd_kafka_destroy(consumer);
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < o.consumers; ++i) threads.emplace_back(consume, i);
  consume(0);
  for (std::thread& t : threads) t.join();
  const double consume_s = std::chrono::duration<double>(*std::max_element(done.begin(), done.end()) - t0).count();
  const long n = got.load();
  const double mb = static_cast<double>(bytes.load()) / 1e6;
  if (total < 0) total = n;
  std::printf("consume: consumers=%d messages=%ld of %ld MB=%.1f seconds=%.2f MB/s=%.1f msgs/s=%.0f\n",
              o.consumers, n, total, mb, consume_s, mb / consume_s, static_cast<double>(n) / consume_s);
  std::fflush(stdout);
  if (n < total && !o.mock) std::exit(1);
}

void run_loopback() {
  const int server = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(server, 1) != 0) die("bind");
  socklen_t len = sizeof(addr);
  getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len);
  constexpr size_t kTotal = size_t{1} << 30;
  std::thread writer([addr] {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) die("connect");
    std::vector<char> buf(1 << 20, 'x');
    size_t sent = 0;
    while (sent < kTotal) {
      const ssize_t n = write(fd, buf.data(), std::min(buf.size(), kTotal - sent));
      if (n <= 0) die("write");
      sent += static_cast<size_t>(n);
    }
    close(fd);
  });
  const int conn = accept(server, nullptr, nullptr);
  std::vector<char> buf(1 << 20);
  size_t got = 0;
  const auto t0 = Clock::now();
  while (true) {
    const ssize_t n = read(conn, buf.data(), buf.size());
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  const double s = seconds_since(t0);
  writer.join();
  close(conn);
  close(server);
  std::printf("loopback: bytes=%zu seconds=%.2f MB/s=%.0f\n", got, s, static_cast<double>(got) / 1e6 / s);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value for " + a);
      return argv[++i];
    };
    if (a == "--bootstrap") {
      o.bootstrap = value();
    } else if (a == "--mock") {
      o.mock = true;
    } else if (a == "--loopback") {
      o.loopback = true;
    } else if (a == "--broker-pid") {
      o.broker_pids.push_back(std::stol(value()));
    } else if (a == "--replication-factor") {
      o.replication_factor = std::stoi(value());
    } else if (a == "--min-insync") {
      o.min_insync = std::stoi(value());
    } else if (a == "--messages") {
      o.messages = std::stol(value());
    } else if (a == "--size") {
      o.size = std::stol(value());
    } else if (a == "--partitions") {
      o.partitions = std::stoi(value());
    } else if (a == "--acks") {
      o.acks = value();
    } else if (a == "--linger-ms") {
      o.linger_ms = std::stoi(value());
    } else if (a == "--batch-bytes") {
      o.batch_bytes = std::stol(value());
    } else if (a == "--rate-timeline") {
      o.rate_timeline = true;
    } else if (a == "--consume-only") {
      o.consume_only = true;
    } else if (a == "--consumers") {
      o.consumers = std::max(1, std::stoi(value()));
    } else if (a == "--rate-seconds") {
      o.rate_seconds = std::stoi(value());
    } else if (a == "--topic") {
      o.topic = value();
    } else {
      die("unknown option " + a);
    }
  }
  if (o.loopback) {
    run_loopback();
    return 0;
  }
  if (o.topic.empty()) {
    o.topic = "bench-" + std::to_string(std::chrono::system_clock::now().time_since_epoch().count() % 1000000000);
  }
  if (o.mock) {
    // librdkafka's in-memory mock cluster: the same client with a broker
    // that does no I/O.
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    char err[512];
    rd_kafka_t* holder = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    if (holder == nullptr) die(err);
    rd_kafka_mock_cluster_t* mc = rd_kafka_mock_cluster_new(holder, 1);
    if (mc == nullptr) die("mock cluster");
    rd_kafka_mock_topic_create(mc, o.topic.c_str(), o.partitions, 1);
    run_kafka(o, rd_kafka_mock_cluster_bootstraps(mc));
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(holder);
    return 0;
  }
  if (o.bootstrap.empty()) die("--bootstrap HOST:PORT, --mock or --loopback");
  if (o.consume_only) {
    if (o.topic.empty()) die("--consume-only needs --topic");
    run_consume(o, o.bootstrap, -1);
    return 0;
  }
  {
    Delivery d;
    rd_kafka_t* admin = new_producer(o, o.bootstrap, &d);
    create_topic(admin, o);
    rd_kafka_destroy(admin);
  }
  run_kafka(o, o.bootstrap);
  return 0;
}
