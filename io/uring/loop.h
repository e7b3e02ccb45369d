// io/uring/loop.h
//
// Loop: one thread's event loop on io_uring. It is the Executor and the Clock
// of the node (or shard) that runs on that thread: posted callbacks and timers
// live in an io::EventQueue ordered by (CLOCK_MONOTONIC ns, sequence), exactly
// as in the simulator; I/O is submitted to the ring as SQEs, batched and
// handed to the kernel once per loop turn, and completions resume the waiting
// coroutines directly from the loop.
//
// Operation is the awaitable every I/O call uses. The state the kernel may
// touch (buffers, iovecs, addresses, paths, the fd) lives in an Op record
// owned by the loop, not in the coroutine frame: when the awaiting task is
// destroyed while the operation is in flight, the Operation's destructor
// detaches from the Op and asks the kernel to cancel it, and the loop frees
// the Op, with everything it holds, only when its completion arrives. No
// cancellation can leave the kernel writing into freed memory.
//
// Not thread-safe: a Loop, its Ops and every Buffer they hold belong to the
// thread that created the Loop. Owned by whoever runs the node; it must
// outlive every task, Disk, File, Network, Listener and Connection using it.
#pragma once

#include <liburing.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <coroutine>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/clock.h"
#include "io/event_queue.h"
#include "io/executor.h"
#include "io/list.h"

namespace brook::io::uring {

// Default submission queue size; the completion queue is kCqEntriesPerSqEntry
// times larger so bursts of completions do not overflow it.
inline constexpr unsigned kRingEntriesDefault = 256;
inline constexpr unsigned kCqEntriesPerSqEntry = 8;
// Callbacks run per loop turn before the ring is serviced again, so a task
// that keeps posting cannot starve I/O.
inline constexpr size_t kCallbacksPerTurnMax = 256;
// Completions reaped per loop turn.
inline constexpr unsigned kCompletionsPerTurnMax = 256;
// Ops alive at once (in flight or held by an awaiting task).
inline constexpr size_t kOpsMax = size_t{1} << 20;
// Vectors per readv/writev/sendmsg call (the kernel's IOV_MAX).
inline constexpr size_t kIovecsPerCallMax = 1024;

// Replaces `out` with vectors for the front of `chain`, at most
// kIovecsPerCallMax of them, and returns how many.
inline size_t fill_iovecs(const BufferChain& chain, std::vector<iovec>& out) {
  out.clear();
  for (const Buffer& part : chain.parts()) {
    if (out.size() == kIovecsPerCallMax) break;
    out.push_back(iovec{const_cast<std::byte*>(part.data()), part.size()});
  }
  return out.size();
}

// A file descriptor shared by its owner and by the operations in flight on
// it. The descriptor is closed when the last holder lets go, so its number is
// never reused while an SQE naming it may still be submitted.
class SharedFd {
 public:
  SharedFd() = default;
  // Takes ownership of `fd`. REQUIRES: fd >= 0.
  static SharedFd adopt(int fd);
  SharedFd(const SharedFd& o) : shared_(o.shared_) {
    if (shared_ != nullptr) ++shared_->refs;
  }
  SharedFd(SharedFd&& o) noexcept : shared_(std::exchange(o.shared_, nullptr)) {}
  SharedFd& operator=(const SharedFd& o) {
    SharedFd copy(o);
    std::swap(shared_, copy.shared_);
    return *this;
  }
  SharedFd& operator=(SharedFd&& o) noexcept {
    SharedFd moved(std::move(o));
    std::swap(shared_, moved.shared_);
    return *this;
  }
  ~SharedFd() { reset(); }

  bool valid() const { return shared_ != nullptr; }
  // REQUIRES: valid().
  int get() const;
  void reset();

 private:
  struct Shared {
    int fd;
    uint32_t refs;
  };
  Shared* shared_ = nullptr;
};

// What one SQE needs to stay valid until its CQE, plus its result.
struct Op {
  uint64_t id = 0;  // the SQE's user_data: slot and generation
  std::coroutine_handle<> waiter;
  int32_t result = 0;
  bool in_flight = false;    // an SQE was prepared and its CQE not reaped
  bool detached = false;     // the Operation is gone: free on completion
  bool result_is_fd = false; // a successful result is a new descriptor
  int owned_fd = -1;         // that descriptor, until taken

  SharedFd fd;
  Buffer buffer;
  BufferChain chain;
  std::vector<iovec> iovecs;
  msghdr message{};
  sockaddr_storage address{};
  socklen_t address_bytes = 0;
  std::string path;
  std::string path_other;
};

class Loop;

// The awaitable handle of one Op. Use: `io_uring_sqe* sqe = op.prepare();`,
// fill the SQE with io_uring_prep_*, then `int32_t res = co_await op;` (a
// byte count, a descriptor, or -errno). May be prepared and awaited again
// after each completion. Destroying it while the Op is in flight detaches
// and submits IORING_OP_ASYNC_CANCEL.
class Operation : public ListNode {
 public:
  explicit Operation(Loop& loop);
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;
  ~Operation();

  Op& op() { return *op_; }
  // The SQE for this op, its user_data set. REQUIRES: not in flight.
  io_uring_sqe* prepare();
  // Asks the kernel to cancel the op if it is in flight; it still completes.
  void cancel();
  // The descriptor a completed accept/open produced; the caller owns it.
  int take_fd();

  bool await_ready() const noexcept { return !op_->in_flight; }
  void await_suspend(std::coroutine_handle<> h) noexcept { op_->waiter = h; }
  int32_t await_resume() const noexcept { return op_->result; }

 private:
  Loop* loop_;
  Op* op_;
};

class Loop final : public Executor, public Clock {
 public:
  // Unavailable when the kernel refuses io_uring (EPERM/ENOSYS, as under
  // Docker's default seccomp profile or io_uring_disabled).
  static absl::StatusOr<std::unique_ptr<Loop>> create(unsigned entries = kRingEntriesDefault);
  // Whether io_uring can be used in this process.
  static bool supported();

  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;
  // REQUIRES: no task is awaiting an Operation of this loop.
  ~Loop() override;

  // Executor.
  EventId post(Callback cb) override;
  EventId call_at(Instant deadline, Callback cb) override;
  void cancel(EventId id) override;
  // Executor and Clock: CLOCK_MONOTONIC.
  Instant now() const override;
  // CLOCK_REALTIME.
  WallTime wall_now() const override;

  // Runs callbacks and completions until done() is true; it is checked after
  // every batch. Sleeps in the kernel until the next timer when idle.
  // REQUIRES: not called from inside the loop.
  void run_until(std::function<bool()> done);
  // The same, giving up at `deadline`. True when done() became true.
  bool run_until(std::function<bool()> done, Instant deadline);
  // Runs for `duration` of monotonic time.
  void run_for(Duration duration);

  // Ops in flight in the kernel (for tests and shutdown).
  size_t ops_in_flight() const { return in_flight_; }
  // Ops allocated, in flight or held by an Operation.
  size_t ops_live() const { return ops_live_; }

 private:
  friend class Operation;
  explicit Loop(io_uring ring);

  Op* allocate_op();
  void release_op(Op* op);
  void free_op(Op* op);
  Op* find_op(uint64_t id) const;
  io_uring_sqe* next_sqe();
  void submit_cancel(uint64_t id);
  void submit_pending();
  // Completion work or overflowed CQEs wait in the kernel for an enter.
  bool kernel_has_work() const;

  bool run_loop(const std::function<bool()>& done, int64_t deadline_ns);
  void run_due_callbacks(int64_t now_ns);
  void wait_for_completions(int64_t deadline_ns);
  void reap_completions();
  void complete(uint64_t user_data, int32_t result);
  void drain_in_flight();

  io_uring ring_;
  EventQueue events_;
  std::vector<std::unique_ptr<Op>> ops_;  // indexed by slot
  std::vector<uint32_t> free_slots_;
  size_t ops_live_ = 0;
  size_t in_flight_ = 0;
  bool running_ = false;
  // The monotonic time read at the start of the current turn. Posts are
  // stamped with it, so a timer that fell due before the turn runs before
  // them and a task that keeps yielding cannot starve timers.
  int64_t turn_ns_ = 0;
  bool skip_cancel_cqes_ = false;

};

// CLOCK_MONOTONIC in nanoseconds.
int64_t monotonic_ns();

}  // namespace brook::io::uring
