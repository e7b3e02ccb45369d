// sim/network.h
//
// The simulated network: one NetworkFabric per World carries every
// connection between nodes; each node sees it through a SimNetwork (its
// io::Network). Contract: io/network.h exactly (ordered byte streams, no
// duplicates; EOF is an empty Buffer; reset, refused or unreachable is
// Unavailable; a closed local endpoint is Cancelled; a connect timeout is
// DeadlineExceeded).
//
// Model (all times are the world's virtual time):
// - A connection is two pipes, one per direction. A write becomes one segment
//   (its Buffers travel as they are; no payload byte is copied) delivered
//   after a latency drawn from the link's LatencyModel, but never before the
//   segment written ahead of it: latency varies, order within a connection
//   never does. An optional bandwidth serialises segments per pipe.
// - The delivery event resumes the receiving end's waiting reader itself,
//   as its last step (it is the I/O completion); every other wake-up (close,
//   reset, fault) is posted to the reader's executor.
// - Flow control: a pipe accepts at most window_bytes that the reader has not
//   consumed yet; write_all waits for room (back-pressure), as a full TCP
//   socket buffer does. write_all returns once its bytes are in the window.
// - connect: the SYN takes one latency, the answer another. A listener on
//   the port accepts (the connection waits in its backlog for accept());
//   a host that is up without a listener refuses (Unavailable); a host that
//   is down, an unknown host, a full backlog or a partition in either
//   direction drops the SYN, which is retried with exponential backoff from
//   syn_retry_initial until connect_timeout (DeadlineExceeded).
// - Partitions block directions between node sets (symmetric: both ways;
//   one-way: a -> b only). A segment due on a blocked direction is held, with
//   everything behind it on that pipe. When the partition heals, held
//   segments are delivered after fresh latencies, in order. When a pipe has
//   been held for partition_reset_after, its sending end times out as TCP
//   retransmission does: that end is reset (Unavailable) and its queued bytes
//   are dropped; the other end learns of it only when its own bytes reach
//   the dead end (which answers with a reset), as with real TCP. Only the
//   direction of the data matters: lost acknowledgements are not modelled.
// - clog(node, d): every segment from or to the node waits until the clog
//   ends (a stalled interface); nothing is lost.
// - Stalls: with the latency model's stall_probability a segment takes an
//   extra stall delay (and, by ordering, so does everything behind it).
// - Resets: reset_node() resets every connection of a node: its ends fail at
//   once with Unavailable, their queued bytes are dropped, and a reset
//   segment travels to each peer like data. A crash does the same and closes
//   the node's listeners (a crashed host's kernel is modelled as sending the
//   resets; partition it first to model a host that vanishes silently).
// - close() sends FIN after the queued data (the peer reads to EOF), or a
//   reset when unread bytes were discarded (as Linux does). Bytes that reach
//   a closed or reset end are dropped, each answered with a reset (never a
//   reset answering a reset).
//
// Not thread-safe; lives on the simulation's thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "io/executor.h"
#include "io/network.h"
#include "io/random.h"
#include "io/time.h"

namespace brook::sim {

class World;

// One-way delay of a segment: min + uniform[0, jitter] and, with
// stall_probability, an extra uniform[stall_min, stall_max]. Integer
// arithmetic only, so every platform draws the same values.
struct LatencyModel {
  io::Duration min{50'000};      // 50 us
  io::Duration jitter{100'000};  // 100 us
  double stall_probability = 0;
  io::Duration stall_min{50'000'000};   // 50 ms
  io::Duration stall_max{500'000'000};  // 500 ms
};

struct NetworkOptions {
  LatencyModel latency;
  // Per pipe; 0 means unlimited.
  uint64_t bandwidth_bytes_per_s = 0;
  // Bytes written to a pipe and not yet read by the peer (socket buffers).
  size_t window_bytes = size_t{256} << 10;
  io::Duration partition_reset_after{10'000'000'000};  // 10 s
  io::Duration connect_timeout{10'000'000'000};        // 10 s
  io::Duration syn_retry_initial{200'000'000};         // 200 ms
  uint32_t accept_backlog = 128;
  size_t connections_max = 100'000;
};

enum class PartitionMode {
  kSymmetric,  // a -> b and b -> a blocked
  kOneWay,     // a -> b blocked, b -> a open
};

struct NetworkStats {
  uint64_t connects = 0;  // connections established
  uint64_t refused = 0;   // connects answered with a refusal
  uint64_t connect_timeouts = 0;
  uint64_t resets = 0;         // ends reset (crash, reset_node, timeout, RST)
  uint64_t hold_timeouts = 0;  // pipes reset after a long partition
  uint64_t segments = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_delivered = 0;
};

class NetworkFabric {
 public:
  NetworkFabric(World* world, io::Random random, NetworkOptions options);
  ~NetworkFabric();
  NetworkFabric(const NetworkFabric&) = delete;
  NetworkFabric& operator=(const NetworkFabric&) = delete;

  // Called by the World for each new node, in index order.
  void add_node(int index, std::string host);
  // The node owning `host` ("0.0.0.0", "127.0.0.1" and "localhost" mean
  // `self`), or -1.
  int node_of_host(const std::string& host, int self) const;

  // Faults (see the header comment).
  void partition(const std::vector<int>& a, const std::vector<int>& b, PartitionMode mode);
  void heal();
  bool blocked(int from, int to) const;
  void reset_node(int node);
  void crash_node(int node);
  void clog(int node, int64_t until_ns);
  void set_latency(const LatencyModel& latency);
  void set_link_latency(int from, int to, const LatencyModel& latency);

  const NetworkOptions& options() const { return options_; }
  const NetworkStats& stats() const { return stats_; }
  size_t open_connections() const { return conns_.size(); }

  // Used by SimNetwork.
  io::Task<absl::StatusOr<std::unique_ptr<io::Listener>>> listen(int node, io::Address address);
  io::Task<absl::StatusOr<std::unique_ptr<io::Connection>>> connect(int node, io::Address address);

  struct Conn;
  struct Pipe;
  struct End;
  class Listener;
  class Connection;
  class ReadWait;

 private:
  struct Segment;

  int64_t sample_latency(int from, int to);
  bool path_open(int a, int b) const { return !blocked(a, b) && !blocked(b, a); }
  int64_t clog_end(int a, int b) const;
  void push_segment(Pipe& pipe, uint8_t kind, io::BufferChain data);
  void schedule_pipe(Pipe& pipe, int64_t at_ns);
  static void on_pipe_due(void* arg);
  static void on_hold_timeout(void* arg);
  void deliver_due(Pipe& pipe);
  void deliver(Pipe& pipe, Segment& segment);
  void hold(Pipe& pipe);
  void unhold(Pipe& pipe);
  void clear_in_flight(Pipe& pipe);
  void discard_readable(Conn& conn, int side);
  void wake_readers(End& end);
  void reset_end(Conn& conn, int side, const char* reason, bool send_rst);
  void close_end(Conn& conn, int side);
  void release_end(Conn& conn, int side);
  void destroy_conn(Conn& conn);
  io::Buffer take_readable(Conn& conn, int side, size_t bytes_max);
  Conn& new_conn(int client, int server, const io::Address& server_address);
  uint16_t ephemeral_port(int node);
  void close_listener(Listener& listener);
  bool node_up(int node) const;

  World* world_;
  io::Random random_;
  NetworkOptions options_;
  NetworkStats stats_;
  std::vector<std::string> hosts_;
  std::map<std::string, int> host_index_;
  std::vector<std::vector<uint8_t>> blocked_;  // [from][to]
  std::vector<int64_t> clog_until_ns_;
  std::map<std::pair<int, int>, LatencyModel> link_latency_;
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;  // by id: deterministic order
  std::map<std::pair<int, uint16_t>, Listener*> listeners_;
  std::map<uint64_t, Pipe*> held_;  // by pipe id
  std::vector<uint16_t> next_port_;
  uint64_t next_conn_id_ = 1;
  End* delivering_ = nullptr;  // the end a delivery event is filling
  bool direct_wake_ = false;   // its reader is to be resumed at the event's end
};

// A node's io::Network.
class SimNetwork final : public io::Network {
 public:
  SimNetwork(NetworkFabric* fabric, int node) : fabric_(fabric), node_(node) {}
  io::Task<absl::StatusOr<std::unique_ptr<io::Listener>>> listen(io::Address address) override {
    return fabric_->listen(node_, std::move(address));
  }
  io::Task<absl::StatusOr<std::unique_ptr<io::Connection>>> connect(io::Address address) override {
    return fabric_->connect(node_, std::move(address));
  }

 private:
  NetworkFabric* fabric_;
  int node_;
};

}  // namespace brook::sim
