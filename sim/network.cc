// sim/network.cc
//
// The fabric's state: connections (Conn) of two ends and two pipes, owned by
// the fabric and keyed by id; user handles (Connection, Listener) point into
// it. A Conn is freed when both of its ends have been released by their
// handles (or by the listener that never handed one out), so a handle never
// dangles and a scheduled event never outlives its Conn.
#include "sim/network.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "io/assert.h"
#include "io/sync.h"
#include "sim/world.h"

namespace brook::sim {

namespace {

constexpr int kClient = 0;
constexpr int kServer = 1;
constexpr uint16_t kEphemeralFirst = 32768;
constexpr uint16_t kEphemeralLast = 60999;

enum SegmentKind : uint8_t { kData, kFin, kRst };

// Suspends the awaiting task for a virtual-time delay. On a node executor the
// wake-up is a kNet event at an exact world time; on any other executor it
// is an ordinary timer.
class NetDelay {
 public:
  NetDelay(World* world, int64_t delay_ns) : world_(world), delay_ns_(delay_ns) {}
  NetDelay(NetDelay&& o) noexcept
      : world_(o.world_),
        delay_ns_(o.delay_ns_),
        ex_(o.ex_),
        id_(std::exchange(o.id_, io::kNoEvent)) {}
  NetDelay& operator=(NetDelay&&) = delete;
  ~NetDelay() {
    if (id_ != io::kNoEvent) ex_->cancel(id_);
  }
  bool await_ready() const noexcept { return false; }
  template <typename P>
  void await_suspend(std::coroutine_handle<P> h) {
    ex_ = io::detail::executor_of(h);
    if (auto* node_ex = dynamic_cast<NodeExecutor*>(ex_)) {
      id_ = node_ex->schedule_global(world_->now_ns() + delay_ns_, TraceKind::kNet,
                                     io::Callback::resume(h));
    } else {
      id_ = ex_->call_at(ex_->now() + io::Duration(delay_ns_), io::Callback::resume(h));
    }
  }
  void await_resume() noexcept { id_ = io::kNoEvent; }

 private:
  World* world_;
  int64_t delay_ns_;
  io::Executor* ex_ = nullptr;
  io::EventId id_ = io::kNoEvent;
};

}  // namespace

// The reader parked on an end. A delivery resumes it directly, as the last
// step of the delivery event (the event is the I/O completion); every other
// wake-up (close, reset, fault) posts its resumption to the reader's
// executor. Destroying the awaiter (a cancelled read) unparks it.
class NetworkFabric::ReadWait {
 public:
  explicit ReadWait(End* end) : end_(end) {}
  ReadWait(ReadWait&& o) noexcept : end_(o.end_) { BROOK_ASSERT(o.handle_ == nullptr); }
  ReadWait& operator=(ReadWait&&) = delete;
  ~ReadWait();
  bool await_ready() const noexcept { return false; }
  template <typename P>
  void await_suspend(std::coroutine_handle<P> h);
  void await_resume() noexcept { posted_ = io::kNoEvent; }

 private:
  friend class NetworkFabric;
  End* end_;
  std::coroutine_handle<> handle_;
  io::Executor* executor_ = nullptr;
  io::EventId posted_ = io::kNoEvent;
};

struct NetworkFabric::Segment {
  int64_t deliver_ns;
  uint8_t kind;
  io::BufferChain data;
};

struct NetworkFabric::Pipe {
  NetworkFabric* fabric = nullptr;
  Conn* conn = nullptr;
  uint64_t id = 0;
  int from_side = 0;
  int src = 0;
  int dst = 0;
  std::deque<Segment> in_flight;  // bounded by the window plus FIN/RST
  int64_t last_deliver_ns = 0;
  int64_t link_free_ns = 0;
  io::EventId event = io::kNoEvent;
  bool held = false;
  io::EventId hold_timer = io::kNoEvent;
  size_t outstanding = 0;  // bytes written, not yet read or discarded
  io::WaitList writers;
};

struct NetworkFabric::End {
  enum class State { kOpen, kClosed, kReset };
  enum class Owner { kPending, kUser, kReleased };
  State state = State::kOpen;
  Owner owner = Owner::kPending;
  const char* reset_reason = "";
  bool eof = false;
  bool rst_sent = false;
  std::deque<io::Buffer> readable;
  size_t readable_bytes = 0;
  ReadWait* reader = nullptr;  // the parked reader, if any
  io::WaitList more_readers;   // concurrent readers beyond the first (rare)
  int node = 0;
  io::Address local;
  io::Address peer;
};

struct NetworkFabric::Conn {
  uint64_t id = 0;
  End ends[2];
  Pipe pipes[2];  // pipes[s] carries bytes from ends[s] to ends[1 - s]
};

NetworkFabric::ReadWait::~ReadWait() {
  if (end_->reader == this) end_->reader = nullptr;
  if (posted_ != io::kNoEvent) executor_->cancel(posted_);
}

template <typename P>
void NetworkFabric::ReadWait::await_suspend(std::coroutine_handle<P> h) {
  BROOK_ASSERT(end_->reader == nullptr);
  handle_ = h;
  executor_ = io::detail::executor_of(h);
  end_->reader = this;
}

// A user's handle on one end.
class NetworkFabric::Connection final : public io::Connection {
 public:
  Connection(NetworkFabric* fabric, Conn* conn, int side)
      : fabric_(fabric), conn_(conn), side_(side) {
    conn_->ends[side_].owner = End::Owner::kUser;
  }
  ~Connection() override { fabric_->release_end(*conn_, side_); }

  io::Task<absl::StatusOr<io::Buffer>> read_some(size_t bytes_max) override;
  io::Task<absl::Status> write_all(io::BufferChain data) override;
  void close() override { fabric_->close_end(*conn_, side_); }
  io::Address local_address() const override { return conn_->ends[side_].local; }
  io::Address peer_address() const override { return conn_->ends[side_].peer; }

 private:
  NetworkFabric* fabric_;
  Conn* conn_;
  int side_;
};

class NetworkFabric::Listener final : public io::Listener {
 public:
  Listener(NetworkFabric* fabric, int node, io::Address address)
      : fabric_(fabric), node_(node), address_(std::move(address)) {}
  ~Listener() override { close(); }

  io::Task<absl::StatusOr<std::unique_ptr<io::Connection>>> accept() override;
  io::Address address() const override { return address_; }
  void close() override { fabric_->close_listener(*this); }

 private:
  friend class NetworkFabric;
  NetworkFabric* fabric_;
  int node_;
  io::Address address_;
  bool closed_ = false;
  std::deque<Conn*> backlog_;  // bounded by accept_backlog
  io::WaitList acceptors_;
};

io::Task<absl::StatusOr<io::Buffer>> NetworkFabric::Connection::read_some(size_t bytes_max) {
  if (bytes_max == 0) co_return absl::InvalidArgumentError("read_some of 0 bytes");
  for (;;) {
    End& end = conn_->ends[side_];
    if (end.state == End::State::kClosed) co_return absl::CancelledError("connection closed");
    if (end.state == End::State::kReset) co_return absl::UnavailableError(end.reset_reason);
    if (end.readable_bytes > 0) co_return fabric_->take_readable(*conn_, side_, bytes_max);
    if (end.eof) co_return io::Buffer();
    if (end.reader != nullptr) {
      co_await end.more_readers.wait();
    } else {
      co_await ReadWait(&end);
    }
  }
}

io::Task<absl::Status> NetworkFabric::Connection::write_all(io::BufferChain data) {
  for (;;) {
    End& end = conn_->ends[side_];
    Pipe& pipe = conn_->pipes[side_];
    if (end.state == End::State::kClosed) co_return absl::CancelledError("connection closed");
    if (end.state == End::State::kReset) co_return absl::UnavailableError(end.reset_reason);
    if (data.empty()) co_return absl::OkStatus();
    const size_t window = fabric_->options_.window_bytes;
    if (pipe.outstanding >= window) {
      co_await pipe.writers.wait();
      continue;
    }
    const size_t room = window - pipe.outstanding;
    if (data.size() <= room) {
      fabric_->push_segment(pipe, kData, std::move(data));
      co_return absl::OkStatus();
    }
    io::BufferChain chunk = data.slice(0, room);
    data.consume(room);
    fabric_->push_segment(pipe, kData, std::move(chunk));
  }
}

io::Task<absl::StatusOr<std::unique_ptr<io::Connection>>> NetworkFabric::Listener::accept() {
  for (;;) {
    if (closed_) co_return absl::CancelledError("listener closed");
    if (!backlog_.empty()) {
      Conn* conn = backlog_.front();
      backlog_.pop_front();
      co_return std::unique_ptr<io::Connection>(
          std::make_unique<Connection>(fabric_, conn, kServer));
    }
    co_await acceptors_.wait();
  }
}

NetworkFabric::NetworkFabric(World* world, io::Random random, NetworkOptions options)
    : world_(world), random_(random), options_(std::move(options)) {
  BROOK_ASSERT_GT(options_.window_bytes, 0u);
  BROOK_ASSERT_GT(options_.accept_backlog, 0u);
}

NetworkFabric::~NetworkFabric() {
  // Every handle must be gone by now (the World destroys node tasks first);
  // free what is left without touching handles.
  for (auto& [id, conn] : conns_) {
    for (Pipe& p : conn->pipes) {
      world_->cancel_event(p.event);
      world_->cancel_event(p.hold_timer);
    }
  }
}

void NetworkFabric::add_node(int index, std::string host) {
  BROOK_ASSERT_EQ(static_cast<size_t>(index), hosts_.size());
  host_index_[host] = index;
  hosts_.push_back(std::move(host));
  for (auto& row : blocked_) row.push_back(0);
  blocked_.emplace_back(hosts_.size(), 0);
  clog_until_ns_.push_back(0);
  next_port_.push_back(kEphemeralFirst);
}

int NetworkFabric::node_of_host(const std::string& host, int self) const {
  if (host == "0.0.0.0" || host == "127.0.0.1" || host == "localhost" || host == "::" ||
      host == "::1" || host.empty()) {
    return self;
  }
  auto it = host_index_.find(host);
  return it == host_index_.end() ? -1 : it->second;
}

bool NetworkFabric::node_up(int node) const { return world_->node(node).up(); }

// --- faults ---------------------------------------------------------------

void NetworkFabric::partition(const std::vector<int>& a, const std::vector<int>& b,
                              PartitionMode mode) {
  for (int x : a) {
    for (int y : b) {
      if (x == y) continue;
      blocked_.at(x).at(y) = 1;
      if (mode == PartitionMode::kSymmetric) blocked_.at(y).at(x) = 1;
    }
  }
}

void NetworkFabric::heal() {
  for (auto& row : blocked_) std::fill(row.begin(), row.end(), 0);
  // Unhold in pipe-id order; unhold() erases from held_.
  while (!held_.empty()) unhold(*held_.begin()->second);
}

bool NetworkFabric::blocked(int from, int to) const {
  return blocked_[static_cast<size_t>(from)][static_cast<size_t>(to)] != 0;
}

void NetworkFabric::reset_node(int node) {
  for (auto& [id, conn] : conns_) {
    for (int side = 0; side < 2; ++side) {
      if (conn->ends[side].node == node) {
        reset_end(*conn, side, "connection reset", true);
      }
    }
  }
}

void NetworkFabric::crash_node(int node) {
  std::vector<Listener*> closing;
  for (auto& [key, listener] : listeners_) {
    if (key.first == node) closing.push_back(listener);
  }
  for (Listener* l : closing) close_listener(*l);
  reset_node(node);
}

void NetworkFabric::clog(int node, int64_t until_ns) {
  int64_t& until = clog_until_ns_.at(static_cast<size_t>(node));
  until = std::max(until, until_ns);
}

int64_t NetworkFabric::clog_end(int a, int b) const {
  return std::max(clog_until_ns_[static_cast<size_t>(a)], clog_until_ns_[static_cast<size_t>(b)]);
}

void NetworkFabric::set_latency(const LatencyModel& latency) { options_.latency = latency; }

void NetworkFabric::set_link_latency(int from, int to, const LatencyModel& latency) {
  link_latency_[{from, to}] = latency;
}

int64_t NetworkFabric::sample_latency(int from, int to) {
  const LatencyModel* model = &options_.latency;
  if (!link_latency_.empty()) {
    auto it = link_latency_.find({from, to});
    if (it != link_latency_.end()) model = &it->second;
  }
  int64_t delay = model->min.count();
  if (model->jitter.count() > 0) delay += random_.uniform_range(0, model->jitter.count());
  if (model->stall_probability > 0 && random_.bernoulli(model->stall_probability)) {
    delay += random_.uniform_range(model->stall_min.count(), model->stall_max.count());
  }
  return delay;
}

// --- pipes ----------------------------------------------------------------

void NetworkFabric::push_segment(Pipe& pipe, uint8_t kind, io::BufferChain data) {
  const int64_t now = world_->now_ns();
  int64_t sent = now;
  const size_t bytes = data.size();
  if (options_.bandwidth_bytes_per_s > 0 && bytes > 0) {
    const int64_t start = std::max(now, pipe.link_free_ns);
    const auto wire_ns = static_cast<int64_t>(
        (static_cast<unsigned __int128>(bytes) * 1'000'000'000) / options_.bandwidth_bytes_per_s);
    pipe.link_free_ns = start + wire_ns;
    sent = pipe.link_free_ns;
  }
  const int64_t deliver = std::max(sent + sample_latency(pipe.src, pipe.dst), pipe.last_deliver_ns);
  pipe.last_deliver_ns = deliver;
  pipe.outstanding += bytes;
  ++stats_.segments;
  stats_.bytes_sent += bytes;
  pipe.in_flight.push_back(Segment{deliver, kind, std::move(data)});
  if (!pipe.held && pipe.event == io::kNoEvent) schedule_pipe(pipe, deliver);
}

void NetworkFabric::schedule_pipe(Pipe& pipe, int64_t at_ns) {
  BROOK_ASSERT(pipe.event == io::kNoEvent);
  pipe.event = world_->schedule_fabric(at_ns, pipe.dst, io::Callback{&on_pipe_due, &pipe});
}

void NetworkFabric::on_pipe_due(void* arg) {
  Pipe& pipe = *static_cast<Pipe*>(arg);
  NetworkFabric& fabric = *pipe.fabric;
  pipe.event = io::kNoEvent;
  End& to = pipe.conn->ends[1 - pipe.from_side];
  fabric.delivering_ = &to;
  fabric.direct_wake_ = false;
  fabric.deliver_due(pipe);
  fabric.delivering_ = nullptr;
  if (!fabric.direct_wake_ || to.reader == nullptr) return;
  ReadWait* reader = to.reader;
  to.reader = nullptr;
  if (reader->executor_ == &fabric.world_->node(pipe.dst).executor()) {
    // Last step of the event: the reader may close or free the connection.
    reader->handle_.resume();
  } else {
    reader->posted_ = reader->executor_->post(io::Callback::resume(reader->handle_));
  }
}

void NetworkFabric::wake_readers(End& end) {
  end.more_readers.notify_all();
  if (end.reader == nullptr) return;
  if (&end == delivering_) {
    direct_wake_ = true;  // resumed at the end of the delivery event
    return;
  }
  ReadWait* reader = end.reader;
  end.reader = nullptr;
  reader->posted_ = reader->executor_->post(io::Callback::resume(reader->handle_));
}

void NetworkFabric::deliver_due(Pipe& pipe) {
  if (blocked(pipe.src, pipe.dst)) {
    hold(pipe);
    return;
  }
  const int64_t now = world_->now_ns();
  const int64_t clogged = clog_end(pipe.src, pipe.dst);
  if (clogged > now) {
    schedule_pipe(pipe, clogged);
    return;
  }
  while (!pipe.in_flight.empty() && pipe.in_flight.front().deliver_ns <= now) {
    Segment segment = std::move(pipe.in_flight.front());
    pipe.in_flight.pop_front();
    deliver(pipe, segment);
  }
  if (!pipe.in_flight.empty() && pipe.event == io::kNoEvent && !pipe.held) {
    schedule_pipe(pipe, pipe.in_flight.front().deliver_ns);
  }
}

void NetworkFabric::deliver(Pipe& pipe, Segment& segment) {
  Conn& conn = *pipe.conn;
  const int to_side = 1 - pipe.from_side;
  End& to = conn.ends[to_side];
  End& from = conn.ends[pipe.from_side];
  const bool live = to.state == End::State::kOpen && to.owner != End::Owner::kReleased;
  switch (segment.kind) {
    case kData: {
      const size_t bytes = segment.data.size();
      if (!live) {
        // Every segment reaching a dead end is answered with a reset, as TCP
        // does: an earlier reset may have been lost in a partition.
        pipe.outstanding -= bytes;
        pipe.writers.notify_all();
        if (from.state == End::State::kOpen) push_segment(conn.pipes[to_side], kRst, {});
        return;
      }
      for (const io::Buffer& part : segment.data.parts()) to.readable.push_back(part);
      to.readable_bytes += bytes;
      stats_.bytes_delivered += bytes;
      wake_readers(to);
      return;
    }
    case kFin:
      if (live) {
        to.eof = true;
        wake_readers(to);
      }
      return;
    case kRst:
      // Never answered: a reset reaching a dead end is dropped.
      to.rst_sent = true;
      reset_end(conn, to_side, "connection reset by peer", false);
      return;
  }
  BROOK_UNREACHABLE();
}

void NetworkFabric::hold(Pipe& pipe) {
  if (pipe.held) return;
  pipe.held = true;
  held_[pipe.id] = &pipe;
  pipe.hold_timer =
      world_->schedule_fabric(world_->now_ns() + options_.partition_reset_after.count(), pipe.src,
                              io::Callback{&on_hold_timeout, &pipe});
}

void NetworkFabric::unhold(Pipe& pipe) {
  BROOK_ASSERT(pipe.held);
  pipe.held = false;
  held_.erase(pipe.id);
  world_->cancel_event(pipe.hold_timer);
  pipe.hold_timer = io::kNoEvent;
  // Fresh latencies for everything held, still in order.
  int64_t previous = world_->now_ns();
  for (Segment& s : pipe.in_flight) {
    s.deliver_ns = std::max(world_->now_ns() + sample_latency(pipe.src, pipe.dst), previous);
    previous = s.deliver_ns;
  }
  pipe.last_deliver_ns = std::max(pipe.last_deliver_ns, previous);
  if (!pipe.in_flight.empty() && pipe.event == io::kNoEvent) {
    schedule_pipe(pipe, pipe.in_flight.front().deliver_ns);
  }
}

void NetworkFabric::on_hold_timeout(void* arg) {
  Pipe& pipe = *static_cast<Pipe*>(arg);
  pipe.hold_timer = io::kNoEvent;
  NetworkFabric& fabric = *pipe.fabric;
  if (!pipe.held) return;
  ++fabric.stats_.hold_timeouts;
  fabric.held_.erase(pipe.id);
  pipe.held = false;
  // The sender gives up (TCP retransmission timeout): its end is reset and
  // its queue dropped; the peer is not told.
  fabric.clear_in_flight(pipe);
  fabric.reset_end(*pipe.conn, pipe.from_side, "connection timed out", false);
}

void NetworkFabric::clear_in_flight(Pipe& pipe) {
  for (const Segment& s : pipe.in_flight) pipe.outstanding -= s.data.size();
  pipe.in_flight.clear();
  world_->cancel_event(pipe.event);
  pipe.event = io::kNoEvent;
  if (pipe.held) {
    pipe.held = false;
    held_.erase(pipe.id);
    world_->cancel_event(pipe.hold_timer);
    pipe.hold_timer = io::kNoEvent;
  }
  pipe.writers.notify_all();
}

// --- ends -----------------------------------------------------------------

void NetworkFabric::discard_readable(Conn& conn, int side) {
  End& end = conn.ends[side];
  Pipe& incoming = conn.pipes[1 - side];
  incoming.outstanding -= end.readable_bytes;
  end.readable.clear();
  end.readable_bytes = 0;
  incoming.writers.notify_all();
}

void NetworkFabric::reset_end(Conn& conn, int side, const char* reason, bool send_rst) {
  End& end = conn.ends[side];
  if (end.state != End::State::kOpen) return;
  end.state = End::State::kReset;
  end.reset_reason = reason;
  ++stats_.resets;
  discard_readable(conn, side);
  Pipe& out = conn.pipes[side];
  clear_in_flight(out);
  wake_readers(end);
  if (send_rst && !end.rst_sent) {
    end.rst_sent = true;
    push_segment(out, kRst, {});
  }
}

void NetworkFabric::close_end(Conn& conn, int side) {
  End& end = conn.ends[side];
  if (end.state == End::State::kClosed) return;
  const bool was_open = end.state == End::State::kOpen;
  const bool had_unread = end.readable_bytes > 0;
  end.state = End::State::kClosed;
  discard_readable(conn, side);
  wake_readers(end);
  Pipe& out = conn.pipes[side];
  out.writers.notify_all();
  if (!was_open) return;
  if (had_unread) {
    // Linux answers a close with unread data by a reset, dropping its queue.
    clear_in_flight(out);
    end.rst_sent = true;
    push_segment(out, kRst, {});
  } else {
    push_segment(out, kFin, {});
  }
}

void NetworkFabric::release_end(Conn& conn, int side) {
  close_end(conn, side);
  conn.ends[side].owner = End::Owner::kReleased;
  if (conn.ends[1 - side].owner == End::Owner::kReleased) destroy_conn(conn);
}

void NetworkFabric::destroy_conn(Conn& conn) {
  for (Pipe& p : conn.pipes) {
    world_->cancel_event(p.event);
    world_->cancel_event(p.hold_timer);
    if (p.held) held_.erase(p.id);
  }
  conns_.erase(conn.id);  // frees conn
}

io::Buffer NetworkFabric::take_readable(Conn& conn, int side, size_t bytes_max) {
  End& end = conn.ends[side];
  BROOK_ASSERT(!end.readable.empty());
  io::Buffer& front = end.readable.front();
  io::Buffer out;
  if (front.size() <= bytes_max) {
    out = std::move(front);
    end.readable.pop_front();
  } else {
    out = front.slice(0, bytes_max);
    front.trim_front(bytes_max);
  }
  end.readable_bytes -= out.size();
  Pipe& incoming = conn.pipes[1 - side];
  incoming.outstanding -= out.size();
  incoming.writers.notify_all();
  return out;
}

// --- connect / listen -----------------------------------------------------

NetworkFabric::Conn& NetworkFabric::new_conn(int client, int server,
                                             const io::Address& server_address) {
  auto owned = std::make_unique<Conn>();
  Conn& conn = *owned;
  conn.id = next_conn_id_++;
  conn.ends[kClient].node = client;
  conn.ends[kClient].local =
      io::Address{hosts_[static_cast<size_t>(client)], ephemeral_port(client)};
  conn.ends[kClient].peer = server_address;
  conn.ends[kServer].node = server;
  conn.ends[kServer].local = server_address;
  conn.ends[kServer].peer = conn.ends[kClient].local;
  for (int side = 0; side < 2; ++side) {
    Pipe& p = conn.pipes[side];
    p.fabric = this;
    p.conn = &conn;
    p.id = conn.id * 2 + static_cast<uint64_t>(side);
    p.from_side = side;
    p.src = conn.ends[side].node;
    p.dst = conn.ends[1 - side].node;
  }
  conns_.emplace(conn.id, std::move(owned));
  ++stats_.connects;
  return conn;
}

uint16_t NetworkFabric::ephemeral_port(int node) {
  uint16_t& next = next_port_[static_cast<size_t>(node)];
  for (int tries = 0; tries <= kEphemeralLast - kEphemeralFirst; ++tries) {
    const uint16_t port = next;
    next = next == kEphemeralLast ? kEphemeralFirst : static_cast<uint16_t>(next + 1);
    if (!listeners_.contains({node, port})) return port;
  }
  BROOK_UNREACHABLE();
}

io::Task<absl::StatusOr<std::unique_ptr<io::Listener>>> NetworkFabric::listen(int node,
                                                                              io::Address address) {
  if (node_of_host(address.host, node) != node) {
    co_return absl::InvalidArgumentError(
        fmt::format("cannot listen on {}: not an address of node {}", address.to_string(), node));
  }
  uint16_t port = address.port;
  if (port == 0) port = ephemeral_port(node);
  if (listeners_.contains({node, port})) {
    co_return absl::AlreadyExistsError(fmt::format("address in use: {}", address.to_string()));
  }
  auto listener =
      std::make_unique<Listener>(this, node, io::Address{hosts_[static_cast<size_t>(node)], port});
  listeners_[{node, port}] = listener.get();
  co_return std::unique_ptr<io::Listener>(std::move(listener));
}

void NetworkFabric::close_listener(Listener& listener) {
  if (listener.closed_) return;
  listener.closed_ = true;
  listeners_.erase({listener.node_, listener.address_.port});
  while (!listener.backlog_.empty()) {
    Conn* conn = listener.backlog_.front();
    listener.backlog_.pop_front();
    reset_end(*conn, kServer, "listener closed", true);
    release_end(*conn, kServer);
  }
  listener.acceptors_.notify_all();
}

io::Task<absl::StatusOr<std::unique_ptr<io::Connection>>> NetworkFabric::connect(
    int node, io::Address address) {
  const int target = node_of_host(address.host, node);
  const int64_t deadline = world_->now_ns() + options_.connect_timeout.count();
  int64_t retry_ns = options_.syn_retry_initial.count();
  for (;;) {
    // The SYN leaves; it gets through only when the path is open both ways
    // (the SYN-ACK must return), the host is up and its backlog has room.
    const bool path = target >= 0 && path_open(node, target) && node_up(target);
    if (path) {
      const int64_t wait = std::max<int64_t>(clog_end(node, target) - world_->now_ns(), 0);
      co_await NetDelay(world_, wait + sample_latency(node, target));
    }
    const bool arrived = path && target >= 0 && path_open(node, target) && node_up(target);
    if (arrived) {
      auto it = listeners_.find({target, address.port});
      if (it == listeners_.end()) {
        ++stats_.refused;
        co_await NetDelay(world_, sample_latency(target, node));
        co_return absl::UnavailableError(
            fmt::format("connection refused: {}", address.to_string()));
      }
      Listener& listener = *it->second;
      if (listener.backlog_.size() < options_.accept_backlog &&
          conns_.size() < options_.connections_max) {
        Conn& conn = new_conn(node, target, listener.address_);
        auto handle = std::make_unique<Connection>(this, &conn, kClient);
        listener.backlog_.push_back(&conn);
        listener.acceptors_.notify_one();
        co_await NetDelay(world_, sample_latency(target, node));
        co_return std::unique_ptr<io::Connection>(std::move(handle));
      }
    }
    // The SYN was lost: retransmit after a backoff, up to the deadline.
    const int64_t now = world_->now_ns();
    if (now + retry_ns >= deadline) {
      if (deadline > now) co_await NetDelay(world_, deadline - now);
      ++stats_.connect_timeouts;
      co_return absl::DeadlineExceededError(
          fmt::format("connect to {} timed out", address.to_string()));
    }
    co_await NetDelay(world_, retry_ns);
    retry_ns *= 2;
  }
}

}  // namespace brook::sim
