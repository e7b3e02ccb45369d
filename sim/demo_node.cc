// sim/demo_node.cc
//
// The demo scenario's node program (see sim/demo.h for the protocol's
// purpose and invariants). Formats, little-endian:
//
//   record = magic u32 "BKRC" | body_len u32 | checksum u64 (of body) | body
//   body   = origin u32 | incarnation u32 | sequence u64 | payload
//   frame  = magic u32 "BKFM" | type u8 | 3 zero bytes | number u64 |
//            body_len u32 | 4 zero bytes | body
//
// Frames on a connection are numbered 0, 1, 2, ... per direction. The
// connecting side (an origin) sends kHello{origin}; the accepting side
// answers kHave{highest contiguous sequence of that origin it holds}; the
// origin then streams kRecord frames from the next sequence on, with
// kHeartbeat frames when idle so a half-open connection is noticed.
//
// Every record is appended under the node's log mutex and acknowledged only
// after datasync. A disk error stops the node's main task (a panic: the
// harness power-cycles the node), since after a failed datasync the page
// cache may hold bytes that will never reach the disk.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "io/scope.h"
#include "io/status.h"
#include "io/sync.h"
#include "io/when.h"
#include "sim/demo.h"

namespace brook::sim {

namespace {

using namespace std::chrono_literals;

constexpr uint32_t kRecordMagic = 0x43524B42;  // "BKRC"
constexpr uint32_t kFrameMagic = 0x4D464B42;   // "BKFM"
constexpr size_t kRecordHeaderBytes = 16;
constexpr size_t kBodyHeaderBytes = 16;
constexpr size_t kFrameHeaderBytes = 24;
constexpr size_t kPayloadBytesMax = 4096;
constexpr size_t kFrameBodyBytesMax = kRecordHeaderBytes + kBodyHeaderBytes + kPayloadBytesMax;
constexpr size_t kReadChunkBytes = 1 << 20;
constexpr size_t kRecordsPerWriteMax = 32;
constexpr int kRecoveryRereads = 3;
constexpr io::Duration kHandshakeTimeout = 5s;
constexpr io::Duration kIdleTimeout = 5s;
constexpr io::Duration kHeartbeatInterval = 1s;
constexpr char kLogName[] = "log";

enum FrameType : uint8_t { kHello = 1, kHave = 2, kRecord = 3, kHeartbeat = 4 };

void put_u32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
void put_u64(std::byte* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
uint32_t get_u32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

uint64_t checksum(const std::byte* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<uint64_t>(p[i]);
    h *= 0x100000001b3ULL;
  }
  return h ^ (h >> 29);
}

struct Record {
  int origin = 0;
  uint64_t seq = 0;
  uint64_t checksum = 0;
  size_t bytes = 0;  // the whole encoded record
};

io::Buffer encode_record(int origin, uint32_t incarnation, uint64_t seq, io::Random& random,
                         size_t payload_bytes) {
  const size_t body_bytes = kBodyHeaderBytes + payload_bytes;
  io::Buffer b = io::Buffer::allocate(kRecordHeaderBytes + body_bytes);
  std::byte* p = b.mutable_data();
  std::byte* body = p + kRecordHeaderBytes;
  put_u32(body, static_cast<uint32_t>(origin));
  put_u32(body + 4, incarnation);
  put_u64(body + 8, seq);
  for (size_t i = 0; i < payload_bytes; ++i) {
    body[kBodyHeaderBytes + i] = static_cast<std::byte>(random.next_u64());
  }
  put_u32(p, kRecordMagic);
  put_u32(p + 4, static_cast<uint32_t>(body_bytes));
  put_u64(p + 8, checksum(body, body_bytes));
  return b;
}

// Parses one record at the front of `bytes`; nullopt when it is incomplete
// or invalid (a torn or corrupt tail).
std::optional<Record> parse_record(const std::byte* p, size_t n) {
  if (n < kRecordHeaderBytes) return std::nullopt;
  if (get_u32(p) != kRecordMagic) return std::nullopt;
  const uint32_t body_bytes = get_u32(p + 4);
  if (body_bytes < kBodyHeaderBytes || body_bytes > kBodyHeaderBytes + kPayloadBytesMax) {
    return std::nullopt;
  }
  if (n - kRecordHeaderBytes < body_bytes) return std::nullopt;
  const std::byte* body = p + kRecordHeaderBytes;
  const uint64_t sum = get_u64(p + 8);
  if (checksum(body, body_bytes) != sum) return std::nullopt;
  return Record{static_cast<int>(get_u32(body)), get_u64(body + 8), sum,
                kRecordHeaderBytes + body_bytes};
}

struct ParsedLog {
  std::vector<Record> records;
  uint64_t valid_bytes = 0;
};

ParsedLog parse_log(const std::string& bytes) {
  ParsedLog out;
  const auto* p = reinterpret_cast<const std::byte*>(bytes.data());
  while (out.valid_bytes < bytes.size()) {
    auto r = parse_record(p + out.valid_bytes, bytes.size() - out.valid_bytes);
    if (!r) break;
    out.records.push_back(*r);
    out.valid_bytes += r->bytes;
  }
  return out;
}

io::Buffer encode_frame(FrameType type, uint64_t number, size_t body_bytes) {
  io::Buffer b = io::Buffer::allocate(kFrameHeaderBytes);
  std::byte* p = b.mutable_data();
  std::fill(p, p + kFrameHeaderBytes, std::byte{0});
  put_u32(p, kFrameMagic);
  p[4] = static_cast<std::byte>(type);
  put_u64(p + 8, number);
  put_u32(p + 16, static_cast<uint32_t>(body_bytes));
  return b;
}

io::BufferChain small_frame(FrameType type, uint64_t number, uint64_t value, size_t value_bytes) {
  io::BufferChain chain(encode_frame(type, number, value_bytes));
  if (value_bytes > 0) {
    io::Buffer body = io::Buffer::allocate(value_bytes);
    if (value_bytes == 4) put_u32(body.mutable_data(), static_cast<uint32_t>(value));
    if (value_bytes == 8) put_u64(body.mutable_data(), value);
    chain.append(std::move(body));
  }
  return chain;
}

struct Frame {
  FrameType type = kHeartbeat;
  uint64_t number = 0;
  io::Buffer body;
};

// --- the node's state -----------------------------------------------------

struct DemoNode {
  DemoNode(io::Context* ctx, DemoShared* shared)
      : ctx(ctx),
        shared(shared),
        self(ctx->node_id().value),
        have(static_cast<size_t>(shared->config.nodes), 0) {}

  DemoOracle& oracle() { return shared->oracle; }
  void fail(const absl::Status& status) {
    ctx->log().warn("disk failure, stopping: {}", status.ToString());
    failed.set();
  }

  io::Context* ctx;
  DemoShared* shared;
  int self;
  uint32_t incarnation = 0;
  std::unique_ptr<io::File> file;
  io::Mutex log_mutex;
  std::vector<io::Buffer> own;  // this origin's records, index seq - 1
  std::vector<uint64_t> have;   // per origin: highest contiguous sequence held
  io::WaitList appended;
  io::Event failed;
  // Set by the first failed append or datasync: after a failed datasync the
  // page cache may hold bytes that never reach the disk, so nothing written
  // after them may be acknowledged (fsyncgate).
  bool poisoned = false;
};

// Reads a frame with the whole read bounded by `timeout`; checks the frame
// numbering of the connection.
struct FrameReader {
  FrameReader(io::Connection* conn, DemoNode* node) : conn(conn), node(node) {}
  io::Connection* conn;
  DemoNode* node;
  size_t read_bytes_max = 64 << 10;
  uint64_t next_number = 0;
  io::BufferChain pending;
};

io::Task<absl::Status> fill(FrameReader* r, size_t bytes, io::Instant deadline) {
  while (r->pending.size() < bytes) {
    const io::Clock& clock = r->node->ctx->clock();
    auto read = co_await io::with_deadline(clock, deadline, r->conn->read_some(r->read_bytes_max));
    if (!read.has_value()) co_return absl::DeadlineExceededError("read timed out");
    if (!read->ok()) co_return read->status();
    if ((*read)->empty()) co_return absl::OutOfRangeError("end of stream");
    r->pending.append(std::move(**read));
  }
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<Frame>> read_frame(FrameReader* r, io::Duration timeout) {
  const io::Instant deadline = r->node->ctx->clock().now() + timeout;
  CO_RETURN_IF_ERROR(co_await fill(r, kFrameHeaderBytes, deadline));
  std::byte h[kFrameHeaderBytes];
  r->pending.copy_to(0, {h, kFrameHeaderBytes});
  const uint32_t body_bytes = get_u32(h + 16);
  Frame f{static_cast<FrameType>(h[4]), get_u64(h + 8), {}};
  if (get_u32(h) != kFrameMagic || body_bytes > kFrameBodyBytesMax || f.number != r->next_number) {
    r->node->oracle().violation(
        fmt::format("node {}: bad frame on a connection (magic {:#x}, number {} where {} was due)",
                    r->node->self, get_u32(h), f.number, r->next_number));
    co_return absl::DataLossError("bad frame");
  }
  CO_RETURN_IF_ERROR(co_await fill(r, kFrameHeaderBytes + body_bytes, deadline));
  f.body = r->pending.slice(kFrameHeaderBytes, body_bytes).linearize();
  r->pending.consume(kFrameHeaderBytes + body_bytes);
  ++r->next_number;
  co_return f;
}

// --- recovery -------------------------------------------------------------

io::Task<absl::StatusOr<std::string>> read_all(io::File* file) {
  std::string out;
  const uint64_t size = file->size();
  while (out.size() < size) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(size - out.size(), kReadChunkBytes));
    CO_ASSIGN_OR_RETURN(io::Buffer chunk, co_await file->read_at(out.size(), n));
    if (chunk.empty()) break;
    out.append(chunk.view());
  }
  co_return out;
}

// Reads the log, re-reading up to kRecoveryRereads times when a record does
// not parse (a read may be corrupted on the way; the stored bytes are not).
io::Task<absl::StatusOr<std::pair<ParsedLog, std::string>>> read_log(io::File* file) {
  ParsedLog best;
  std::string best_bytes;
  for (int attempt = 0; attempt <= kRecoveryRereads; ++attempt) {
    CO_ASSIGN_OR_RETURN(std::string bytes, co_await read_all(file));
    ParsedLog parsed = parse_log(bytes);
    if (attempt == 0 || parsed.valid_bytes > best.valid_bytes) {
      best = std::move(parsed);
      best_bytes = std::move(bytes);
    }
    if (best.valid_bytes == best_bytes.size()) break;
  }
  co_return std::pair{std::move(best), std::move(best_bytes)};
}

// Rebuilds own/have from the recovered records, checking their order.
void apply_recovered(DemoNode* n, const ParsedLog& log, const std::string& bytes) {
  uint64_t offset = 0;
  for (const Record& r : log.records) {
    const bool known = r.origin >= 0 && r.origin < n->shared->config.nodes;
    if (!known || r.seq != n->have[static_cast<size_t>(r.origin)] + 1) {
      n->oracle().violation(
          fmt::format("node {}: log holds record ({}, {}) out of order", n->self, r.origin, r.seq));
      offset += r.bytes;
      continue;
    }
    n->have[static_cast<size_t>(r.origin)] = r.seq;
    if (r.origin == n->self) {
      n->own.push_back(io::Buffer::copy_of(std::string_view(bytes).substr(offset, r.bytes)));
    }
    offset += r.bytes;
  }
  for (int o = 0; o < n->shared->config.nodes; ++o) {
    n->oracle().recovered(n->self, o, n->have[static_cast<size_t>(o)]);
  }
}

io::Task<absl::Status> recover(DemoNode* n) {
  io::Disk& disk = n->ctx->disk();
  CO_ASSIGN_OR_RETURN(n->file, co_await disk.open(kLogName, io::OpenMode::kCreate));
  CO_RETURN_IF_ERROR(co_await disk.sync_dir(""));
  CO_ASSIGN_OR_RETURN(auto log, co_await read_log(n->file.get()));
  apply_recovered(n, log.first, log.second);
  ++n->oracle().recoveries;
  if (log.first.valid_bytes < n->file->size()) {
    // A torn tail: bytes of a record whose append never completed.
    ++n->oracle().torn_tails;
    CO_RETURN_IF_ERROR(co_await n->file->truncate(log.first.valid_bytes));
    CO_RETURN_IF_ERROR(co_await n->file->datasync());
  }
  co_return absl::OkStatus();
}

// --- appending ------------------------------------------------------------

// Appends and syncs one record. REQUIRES: the log mutex is held.
io::Task<absl::Status> append_durably(DemoNode* n, io::Buffer record) {
  if (n->poisoned) co_return absl::FailedPreconditionError("log poisoned by a disk error");
  absl::Status s = co_await n->file->append(io::BufferChain(std::move(record)));
  if (s.ok()) s = co_await n->file->datasync();
  if (!s.ok()) n->poisoned = true;
  co_return s;
}

io::Task<absl::Status> append_own(DemoNode* n) {
  auto lock = co_await n->log_mutex.lock();
  const DemoConfig& cfg = n->shared->config;
  const uint64_t seq = n->own.size() + 1;
  const size_t payload = static_cast<size_t>(n->ctx->random().uniform_range(
      static_cast<int64_t>(cfg.payload_bytes_min), static_cast<int64_t>(cfg.payload_bytes_max)));
  io::Buffer record = encode_record(n->self, n->incarnation, seq, n->ctx->random(), payload);
  CO_RETURN_IF_ERROR(co_await append_durably(n, record));
  const Record parsed = *parse_record(record.data(), record.size());
  n->own.push_back(std::move(record));
  n->have[static_cast<size_t>(n->self)] = seq;
  ++n->oracle().records_appended;
  n->oracle().acknowledge(n->self, n->self, seq, parsed.checksum);
  n->appended.notify_all();
  co_return absl::OkStatus();
}

io::Task<void> writer_loop(DemoNode* n) {
  const DemoConfig& cfg = n->shared->config;
  for (;;) {
    const io::Duration wait(n->ctx->random().uniform_range(cfg.append_interval_min.count(),
                                                           cfg.append_interval_max.count()));
    co_await n->ctx->clock().sleep_for(wait);
    if (!n->shared->writing) continue;
    const int burst = n->ctx->buggify("demo.writer.burst")
                          ? 2 + static_cast<int>(n->ctx->random().uniform(6))
                          : 1;
    for (int i = 0; i < burst; ++i) {
      const absl::Status s = co_await append_own(n);
      if (!s.ok()) {
        n->fail(s);
        co_return;
      }
    }
  }
}

// Appends a record received from `origin` if it is the next one.
io::Task<absl::Status> persist_peer_record(DemoNode* n, int origin, uint64_t seq, uint64_t sum,
                                           io::Buffer record) {
  auto lock = co_await n->log_mutex.lock();
  uint64_t& have = n->have[static_cast<size_t>(origin)];
  if (seq <= have) co_return absl::OkStatus();  // already held (resent on a new connection)
  if (seq != have + 1) {
    n->oracle().violation(fmt::format("node {}: record ({}, {}) arrived after a gap (holds {})",
                                      n->self, origin, seq, have));
    co_return absl::OkStatus();
  }
  CO_RETURN_IF_ERROR(co_await append_durably(n, std::move(record)));
  have = seq;
  ++n->oracle().records_replicated;
  n->oracle().acknowledge(n->self, origin, seq, sum);
  co_return absl::OkStatus();
}

// --- receiving ------------------------------------------------------------

io::Task<absl::StatusOr<int>> receive_hello(FrameReader* r) {
  DemoNode* n = r->node;
  CO_ASSIGN_OR_RETURN(Frame hello, co_await read_frame(r, kHandshakeTimeout));
  if (hello.type != kHello || hello.body.size() != 4) {
    n->oracle().violation(fmt::format("node {}: connection opened without hello", n->self));
    co_return absl::DataLossError("no hello");
  }
  const int origin = static_cast<int>(get_u32(hello.body.data()));
  if (origin < 0 || origin >= n->shared->config.nodes || origin == n->self) {
    n->oracle().violation(fmt::format("node {}: hello from unknown origin {}", n->self, origin));
    co_return absl::DataLossError("bad origin");
  }
  co_return origin;
}

// Checks one kRecord frame of the stream from `origin`.
std::optional<Record> check_record_frame(DemoNode* n, const Frame& f, int origin,
                                         uint64_t expected_seq) {
  auto r = parse_record(f.body.data(), f.body.size());
  if (!r || r->bytes != f.body.size() || r->origin != origin || r->seq != expected_seq) {
    n->oracle().violation(
        fmt::format("node {}: stream from {} delivered a bad record (sequence {} where {} was due)",
                    n->self, origin, r ? r->seq : 0, expected_seq));
    return std::nullopt;
  }
  return r;
}

// Serves one inbound stream until it ends; returns why it ended.
io::Task<absl::Status> receive_stream(DemoNode* n, io::Connection* conn) {
  FrameReader reader(conn, n);
  if (n->ctx->buggify("demo.receiver.tiny_reads")) {
    reader.read_bytes_max = 1 + n->ctx->random().uniform(16);
  }
  CO_ASSIGN_OR_RETURN(const int origin, co_await receive_hello(&reader));
  const uint64_t have = n->have[static_cast<size_t>(origin)];
  n->ctx->log().info("from {}: hello, holding {}", origin, have);
  CO_RETURN_IF_ERROR(co_await conn->write_all(small_frame(kHave, 0, have, 8)));
  uint64_t expected_seq = have + 1;
  for (;;) {
    CO_ASSIGN_OR_RETURN(Frame frame, co_await read_frame(&reader, kIdleTimeout));
    if (frame.type == kHeartbeat) continue;
    auto record = check_record_frame(n, frame, origin, expected_seq);
    if (!record) co_return absl::DataLossError("bad record frame");
    ++expected_seq;
    const absl::Status s =
        co_await persist_peer_record(n, origin, record->seq, record->checksum, frame.body);
    if (!s.ok()) {
      n->fail(s);
      co_return s;
    }
  }
}

io::Task<void> receive_from(DemoNode* n, std::unique_ptr<io::Connection> conn) {
  const absl::Status ended = co_await receive_stream(n, conn.get());
  n->ctx->log().info("from {}: stream ended: {}", conn->peer_address().to_string(),
                     ended.ToString());
}

io::Task<void> accept_loop(DemoNode* n, io::Listener* listener) {
  io::TaskScope handlers(n->ctx->executor());
  for (;;) {
    auto conn = co_await listener->accept();
    if (!conn.ok()) co_return;
    ++n->oracle().connections;
    handlers.spawn(receive_from(n, std::move(*conn)));
  }
}

// --- sending --------------------------------------------------------------

io::Task<void> wait_appended(DemoNode* n) { co_await n->appended.wait(); }

// Sends records [next, own.size()] (at most kRecordsPerWriteMax) in one write.
io::Task<absl::Status> send_records(DemoNode* n, io::Connection* conn, uint64_t* next,
                                    uint64_t* number) {
  io::BufferChain chain;
  const uint64_t last = std::min<uint64_t>(n->own.size(), *next + kRecordsPerWriteMax - 1);
  for (; *next <= last; ++*next) {
    const io::Buffer& record = n->own[*next - 1];
    chain.append(encode_frame(kRecord, (*number)++, record.size()));
    chain.append(record);
  }
  if (n->ctx->buggify("demo.sender.split_write") && chain.size() > 1) {
    const size_t cut = 1 + n->ctx->random().uniform(chain.size() - 1);
    CO_RETURN_IF_ERROR(co_await conn->write_all(chain.slice(0, cut)));
    chain.consume(cut);
  }
  co_return co_await conn->write_all(std::move(chain));
}

// Streams this node's records to `peer` until the connection fails; returns
// why it ended.
io::Task<absl::Status> stream_to(DemoNode* n, int peer, io::Connection* conn) {
  FrameReader reader(conn, n);
  uint64_t number = 0;
  CO_RETURN_IF_ERROR(
      co_await conn->write_all(small_frame(kHello, number++, static_cast<uint64_t>(n->self), 4)));
  CO_ASSIGN_OR_RETURN(Frame reply, co_await read_frame(&reader, kHandshakeTimeout));
  if (reply.type != kHave || reply.body.size() != 8) {
    co_return absl::DataLossError("bad handshake reply");
  }
  const uint64_t have = get_u64(reply.body.data());
  if (have > n->own.size()) {
    n->oracle().violation(fmt::format("node {} holds {} records of node {}, which holds only {}",
                                      peer, have, n->self, n->own.size()));
    co_return absl::DataLossError("peer ahead of origin");
  }
  n->ctx->log().info("to {}: streaming from {}", peer, have + 1);
  uint64_t next = have + 1;
  for (;;) {
    if (next <= n->own.size()) {
      CO_RETURN_IF_ERROR(co_await send_records(n, conn, &next, &number));
      if (n->ctx->buggify("demo.sender.drop_connection")) {
        co_return absl::CancelledError("dropped (buggify)");
      }
      continue;
    }
    auto woke = co_await io::with_timeout(n->ctx->clock(), kHeartbeatInterval, wait_appended(n));
    if (!woke.has_value()) {
      CO_RETURN_IF_ERROR(co_await conn->write_all(small_frame(kHeartbeat, number++, 0, 0)));
    }
  }
}

io::Task<void> sender_loop(DemoNode* n, int peer) {
  for (;;) {
    auto conn = co_await n->ctx->network().connect(n->shared->addresses[static_cast<size_t>(peer)]);
    if (conn.ok()) {
      const absl::Status ended = co_await stream_to(n, peer, conn->get());
      n->ctx->log().info("to {}: stream ended: {}", peer, ended.ToString());
    } else {
      n->ctx->log().info("to {}: connect failed: {}", peer, conn.status().ToString());
    }
    const io::Duration backoff(n->ctx->random().uniform_range(20'000'000, 200'000'000));
    co_await n->ctx->clock().sleep_for(backoff);
  }
}

}  // namespace

// --- oracle ---------------------------------------------------------------

DemoOracle::DemoOracle(int nodes)
    : acked(static_cast<size_t>(nodes)),
      acked_max(static_cast<size_t>(nodes), std::vector<uint64_t>(static_cast<size_t>(nodes), 0)),
      held_max(acked_max),
      final_records(static_cast<size_t>(nodes)),
      final_torn_bytes(static_cast<size_t>(nodes), 0),
      final_read(static_cast<size_t>(nodes), 0) {}

void DemoOracle::acknowledge(int node, int origin, uint64_t seq, uint64_t sum) {
  acked[static_cast<size_t>(node)][{origin, seq}] = sum;
  uint64_t& max = acked_max[static_cast<size_t>(node)][static_cast<size_t>(origin)];
  max = std::max(max, seq);
  recovered(node, origin, seq);
}

void DemoOracle::recovered(int node, int origin, uint64_t seq) {
  uint64_t& max = held_max[static_cast<size_t>(node)][static_cast<size_t>(origin)];
  max = std::max(max, seq);
}

void DemoOracle::violation(std::string what) {
  constexpr size_t kViolationsMax = 20;
  ++violation_count;
  if (violations.size() < kViolationsMax) violations.push_back(std::move(what));
}

// --- mains ----------------------------------------------------------------

io::Task<void> demo_node_main(io::Context* ctx, DemoShared* shared) {
  DemoNode n(ctx, shared);
  n.incarnation = static_cast<uint32_t>(ctx->random().next_u64());
  const absl::Status recovered = co_await recover(&n);
  if (!recovered.ok()) {
    ++shared->oracle.disk_failures;
    n.fail(recovered);
    co_return;
  }
  auto listener = co_await ctx->network().listen(shared->addresses[static_cast<size_t>(n.self)]);
  BROOK_ASSERT(listener.ok());
  io::TaskScope scope(ctx->executor());
  scope.spawn(accept_loop(&n, listener->get()));
  for (int peer = 0; peer < shared->config.nodes; ++peer) {
    if (peer != n.self) scope.spawn(sender_loop(&n, peer));
  }
  scope.spawn(writer_loop(&n));
  co_await n.failed.wait();
  ++shared->oracle.disk_failures;
}

io::Task<void> demo_check_main(io::Context* ctx, DemoShared* shared) {
  const auto self = static_cast<size_t>(ctx->node_id().value);
  DemoOracle& oracle = shared->oracle;
  auto file = co_await ctx->disk().open(kLogName, io::OpenMode::kReadOnly);
  if (file.ok()) {
    auto bytes = co_await read_all(file->get());
    if (!bytes.ok()) co_return;
    const ParsedLog log = parse_log(*bytes);
    for (const Record& r : log.records) oracle.final_records[self][{r.origin, r.seq}] = r.checksum;
    oracle.final_torn_bytes[self] = bytes->size() - log.valid_bytes;
    // Order: each origin's records gap-free from 1.
    std::vector<uint64_t> last(static_cast<size_t>(shared->config.nodes), 0);
    for (const Record& r : log.records) {
      if (r.origin < 0 || r.origin >= shared->config.nodes ||
          r.seq != last[static_cast<size_t>(r.origin)] + 1) {
        oracle.violation(
            fmt::format("node {}: final log holds ({}, {}) out of order", self, r.origin, r.seq));
        break;
      }
      last[static_cast<size_t>(r.origin)] = r.seq;
    }
  } else if (file.status().code() != absl::StatusCode::kNotFound) {
    co_return;
  }
  oracle.final_read[self] = 1;
}

}  // namespace brook::sim
