// io/uring/loop.cc
#include "io/uring/loop.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include <fmt/format.h>

#include "io/assert.h"

namespace brook::io::uring {
namespace {

// user_data of SQEs whose completions carry nothing (cancellations).
constexpr uint64_t kIgnoredUserData = 0;
// Generations stay below this so no op id equals LIBURING_UDATA_TIMEOUT.
constexpr uint32_t kGenerationMax = 0x7fffffff;
// How long the destructor waits for cancelled ops to complete.
constexpr int64_t kDrainNsMax = 5'000'000'000;

int64_t clock_ns(clockid_t clock) {
  timespec ts;
  const int rc = clock_gettime(clock, &ts);
  BROOK_ASSERT_EQ(rc, 0);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

uint64_t make_op_id(uint32_t slot, uint32_t generation) {
  return (static_cast<uint64_t>(generation) << 32) | (static_cast<uint64_t>(slot) + 1);
}

uint32_t slot_of(uint64_t id) { return static_cast<uint32_t>(id) - 1; }

uint32_t next_generation(uint64_t id) {
  const uint32_t generation = static_cast<uint32_t>(id >> 32) + 1;
  return generation > kGenerationMax ? 1 : generation;
}

// Tries the flags that make a single-threaded ring cheapest first, then
// falls back for older kernels.
int init_ring(unsigned entries, io_uring* ring) {
  const unsigned flag_sets[] = {
      // 6.1+: completion work runs only when the loop asks for events, in
      // batches, never interrupting the thread.
      IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER |
          IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
      IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN |
          IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_SINGLE_ISSUER,
      IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN |
          IORING_SETUP_TASKRUN_FLAG,
      IORING_SETUP_CQSIZE,
  };
  int rc = -EINVAL;
  for (unsigned flags : flag_sets) {
    io_uring_params params;
    std::memset(&params, 0, sizeof(params));
    params.flags = flags;
    params.cq_entries = entries * kCqEntriesPerSqEntry;
    rc = io_uring_queue_init_params(entries, ring, &params);
    if (rc != -EINVAL) return rc;
  }
  return rc;
}

}  // namespace

int64_t monotonic_ns() { return clock_ns(CLOCK_MONOTONIC); }

// ---------------------------------------------------------------- SharedFd

SharedFd SharedFd::adopt(int fd) {
  BROOK_ASSERT_GE(fd, 0);
  SharedFd out;
  out.shared_ = new Shared{fd, 1};
  return out;
}

int SharedFd::get() const {
  BROOK_ASSERT(shared_ != nullptr);
  return shared_->fd;
}

void SharedFd::reset() {
  if (shared_ == nullptr) return;
  BROOK_ASSERT_GT(shared_->refs, 0u);
  if (--shared_->refs == 0) {
    ::close(shared_->fd);  // errors on close are not actionable here
    delete shared_;
  }
  shared_ = nullptr;
}

// --------------------------------------------------------------- Operation

Operation::Operation(Loop& loop) : loop_(&loop), op_(loop.allocate_op()) {}

Operation::~Operation() { loop_->release_op(op_); }

io_uring_sqe* Operation::prepare() {
  BROOK_ASSERT(!op_->in_flight);
  BROOK_ASSERT_EQ(op_->owned_fd, -1);
  io_uring_sqe* sqe = loop_->next_sqe();
  io_uring_sqe_set_data64(sqe, op_->id);
  op_->in_flight = true;
  op_->result = 0;
  ++loop_->in_flight_;
  return sqe;
}

void Operation::cancel() {
  if (op_->in_flight) loop_->submit_cancel(op_->id);
}

int Operation::take_fd() { return std::exchange(op_->owned_fd, -1); }

// -------------------------------------------------------------------- Loop

absl::StatusOr<std::unique_ptr<Loop>> Loop::create(unsigned entries) {
  BROOK_ASSERT_GT(entries, 0u);
  io_uring ring;
  const int rc = init_ring(entries, &ring);
  if (rc == -EPERM || rc == -ENOSYS || rc == -EACCES) {
    return absl::UnavailableError(
        fmt::format("io_uring refused by the kernel: {}", std::strerror(-rc)));
  }
  if (rc < 0) {
    return absl::InternalError(fmt::format("io_uring_queue_init: {}", std::strerror(-rc)));
  }
  // Saves a file-table lookup on every io_uring_enter; optional.
  (void)io_uring_register_ring_fd(&ring);
  return std::unique_ptr<Loop>(new Loop(ring));
}

bool Loop::supported() {
  io_uring ring;
  if (io_uring_queue_init(4, &ring, 0) != 0) return false;
  io_uring_queue_exit(&ring);
  return true;
}

Loop::Loop(io_uring ring) : ring_(ring) {
  skip_cancel_cqes_ = (ring_.features & IORING_FEAT_CQE_SKIP) != 0;
  turn_ns_ = monotonic_ns();
  events_.advance_to(turn_ns_);
}

Loop::~Loop() {
  BROOK_ASSERT(!running_);
  drain_in_flight();
  BROOK_ASSERT_MSG(ops_live_ == 0, "loop destroyed while {} operations are held", ops_live_);
  io_uring_queue_exit(&ring_);
}

EventId Loop::post(Callback cb) { return events_.schedule(turn_ns_, cb); }

EventId Loop::call_at(Instant deadline, Callback cb) {
  return events_.schedule(to_ns(deadline), cb);
}

void Loop::cancel(EventId id) { events_.cancel(id); }

Instant Loop::now() const { return instant_from_ns(monotonic_ns()); }

WallTime Loop::wall_now() const { return WallTime(Duration(clock_ns(CLOCK_REALTIME))); }

void Loop::run_until(std::function<bool()> done) { run_loop(done, INT64_MAX); }

bool Loop::run_until(std::function<bool()> done, Instant deadline) {
  return run_loop(done, to_ns(deadline));
}

void Loop::run_for(Duration duration) {
  run_loop([] { return false; }, monotonic_ns() + to_ns(duration));
}

bool Loop::run_loop(const std::function<bool()>& done, int64_t deadline_ns) {
  BROOK_ASSERT_MSG(!running_, "Loop::run_* is not reentrant");
  running_ = true;
  bool finished = false;
  for (;;) {
    if (done()) {
      finished = true;
      break;
    }
    const int64_t now_ns = monotonic_ns();
    if (now_ns >= deadline_ns) break;
    turn_ns_ = now_ns;
    // The queue's time follows the clock but never passes a pending event:
    // it pops events in (time, sequence) order and posts land at its time.
    const std::optional<int64_t> next_ns = events_.next_time_ns();
    events_.advance_to(next_ns.has_value() ? std::min(*next_ns, now_ns) : now_ns);
    run_due_callbacks(now_ns);
    if (done()) {
      finished = true;
      break;
    }
    wait_for_completions(deadline_ns);
    reap_completions();
  }
  // What the last batch prepared (cancellations, say) must reach the kernel.
  submit_pending();
  running_ = false;
  return finished;
}

void Loop::run_due_callbacks(int64_t now_ns) {
  for (size_t i = 0; i < kCallbacksPerTurnMax; ++i) {
    std::optional<EventQueue::Due> due = events_.pop_due(now_ns);
    if (!due) return;
    due->callback();
  }
}

// Submits what this turn prepared and, unless work is already due, sleeps in
// the kernel until a completion arrives or the next timer (or the deadline)
// is reached. One io_uring_enter per turn.
void Loop::wait_for_completions(int64_t deadline_ns) {
  const std::optional<int64_t> next_ns = events_.next_time_ns();
  const int64_t now_ns = monotonic_ns();
  const bool work_due = next_ns.has_value() && *next_ns <= now_ns;
  if (work_due || io_uring_cq_ready(&ring_) > 0) {
    // No sleeping: submit, and let the kernel post what it holds back
    // (deferred completion work, overflowed CQEs), in one call, and only
    // when there is something to submit or collect.
    if (io_uring_sq_ready(&ring_) > 0 || kernel_has_work()) {
      (void)io_uring_submit_and_get_events(&ring_);  // errors resurface on the next wait
    }
    return;
  }
  const int64_t wake_ns = std::min(next_ns.value_or(INT64_MAX), deadline_ns);
  io_uring_cqe* cqe = nullptr;
  int rc;
  if (wake_ns == INT64_MAX) {
    rc = io_uring_submit_and_wait(&ring_, 1);
  } else {
    const int64_t wait_ns = std::max<int64_t>(wake_ns - now_ns, 0);
    __kernel_timespec ts{.tv_sec = wait_ns / 1'000'000'000, .tv_nsec = wait_ns % 1'000'000'000};
    rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
  }
  BROOK_ASSERT_MSG(rc >= 0 || rc == -ETIME || rc == -EINTR || rc == -EBUSY || rc == -EAGAIN,
                   "io_uring wait: {}", std::strerror(-rc));
}

bool Loop::kernel_has_work() const {
  const unsigned flags = IO_URING_READ_ONCE(*ring_.sq.kflags);
  return (flags & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) != 0;
}

// SQEs the kernel refused for now (EBUSY) stay in the ring and go with the
// next submission: io_uring_sq_ready() still counts them.
void Loop::submit_pending() {
  if (io_uring_sq_ready(&ring_) == 0) return;
  for (;;) {
    const int rc = io_uring_submit(&ring_);
    if (rc >= 0) return;
    // EBUSY/EAGAIN: the kernel wants completions reaped first; SUBMIT_ALL
    // and NODROP make this rare. Anything else is a broken ring.
    BROOK_ASSERT_MSG(rc == -EINTR || rc == -EBUSY || rc == -EAGAIN, "io_uring_submit: {}",
                     std::strerror(-rc));
    if (rc != -EINTR) return;
  }
}

void Loop::reap_completions() {
  io_uring_cqe* cqes[kCompletionsPerTurnMax];
  const unsigned count = io_uring_peek_batch_cqe(&ring_, cqes, kCompletionsPerTurnMax);
  if (count == 0) return;
  // Copy first and release the ring slots: resumed tasks may prepare SQEs.
  struct Completion {
    uint64_t user_data;
    int32_t result;
  };
  Completion batch[kCompletionsPerTurnMax];
  for (unsigned i = 0; i < count; ++i) {
    batch[i] = Completion{cqes[i]->user_data, cqes[i]->res};
  }
  io_uring_cq_advance(&ring_, count);
  for (unsigned i = 0; i < count; ++i) complete(batch[i].user_data, batch[i].result);
}

void Loop::complete(uint64_t user_data, int32_t result) {
  if (user_data == kIgnoredUserData || user_data == LIBURING_UDATA_TIMEOUT) return;
  Op* op = find_op(user_data);
  BROOK_ASSERT_MSG(op != nullptr, "completion for unknown op {:#x}", user_data);
  BROOK_ASSERT(op->in_flight);
  op->in_flight = false;
  BROOK_ASSERT_GT(in_flight_, 0u);
  --in_flight_;
  op->result = result;
  if (op->result_is_fd && result >= 0) op->owned_fd = result;
  if (op->detached) {
    free_op(op);
    return;
  }
  if (op->waiter) std::exchange(op->waiter, {}).resume();
}

Op* Loop::allocate_op() {
  BROOK_ASSERT_LT(ops_live_, kOpsMax);
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(ops_.size());
    ops_.push_back(std::make_unique<Op>());
    ops_.back()->id = make_op_id(slot, 1);
  }
  ++ops_live_;
  return ops_[slot].get();
}

void Loop::release_op(Op* op) {
  if (!op->in_flight) {
    free_op(op);
    return;
  }
  // The task is gone but the kernel may still use the op's memory: keep it
  // until the completion arrives.
  op->detached = true;
  op->waiter = {};
  submit_cancel(op->id);
}

void Loop::free_op(Op* op) {
  BROOK_ASSERT(!op->in_flight);
  if (op->owned_fd >= 0) ::close(op->owned_fd);
  const uint32_t slot = slot_of(op->id);
  BROOK_ASSERT(ops_[slot].get() == op);
  op->id = make_op_id(slot, next_generation(op->id));
  op->waiter = {};
  op->result = 0;
  op->detached = false;
  op->result_is_fd = false;
  op->owned_fd = -1;
  op->fd.reset();
  op->buffer = Buffer();
  op->chain.clear();
  op->iovecs.clear();  // keeps capacity for the next user
  op->message = msghdr{};
  op->address_bytes = 0;
  op->path.clear();
  op->path_other.clear();
  free_slots_.push_back(slot);
  BROOK_ASSERT_GT(ops_live_, 0u);
  --ops_live_;
}

Op* Loop::find_op(uint64_t id) const {
  const uint32_t slot = slot_of(id);
  if (slot >= ops_.size()) return nullptr;
  Op* op = ops_[slot].get();
  return op->id == id ? op : nullptr;
}

io_uring_sqe* Loop::next_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    // The submission queue is full: hand it to the kernel to make room.
    submit_pending();
    sqe = io_uring_get_sqe(&ring_);
  }
  // Still full only if the kernel refused the batch because thousands of
  // completions sit unreaped; the loop reaps every turn, so that is a bug.
  BROOK_ASSERT_MSG(sqe != nullptr, "io_uring submission queue stuck full");
  return sqe;
}

void Loop::submit_cancel(uint64_t id) {
  io_uring_sqe* sqe = next_sqe();
  io_uring_prep_cancel64(sqe, id, 0);
  io_uring_sqe_set_data64(sqe, kIgnoredUserData);
  if (skip_cancel_cqes_) io_uring_sqe_set_flags(sqe, IOSQE_CQE_SKIP_SUCCESS);
}

// Cancels every op still in flight and waits (bounded) for the kernel to
// finish with their memory.
void Loop::drain_in_flight() {
  if (in_flight_ == 0) return;
  io_uring_sqe* sqe = next_sqe();
  io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
  io_uring_sqe_set_data64(sqe, kIgnoredUserData);
  const int64_t give_up_ns = monotonic_ns() + kDrainNsMax;
  while (in_flight_ > 0 && monotonic_ns() < give_up_ns) {
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec ts{.tv_sec = 0, .tv_nsec = 100'000'000};
    (void)io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
    io_uring_cqe* cqes[kCompletionsPerTurnMax];
    const unsigned count = io_uring_peek_batch_cqe(&ring_, cqes, kCompletionsPerTurnMax);
    for (unsigned i = 0; i < count; ++i) {
      const uint64_t user_data = cqes[i]->user_data;
      if (user_data == kIgnoredUserData || user_data == LIBURING_UDATA_TIMEOUT) continue;
      Op* op = find_op(user_data);
      BROOK_ASSERT(op != nullptr);
      BROOK_ASSERT_MSG(op->detached, "loop destroyed while a task awaits an operation");
      op->in_flight = false;
      --in_flight_;
      if (op->result_is_fd && cqes[i]->res >= 0) op->owned_fd = cqes[i]->res;
      free_op(op);
    }
    io_uring_cq_advance(&ring_, count);
  }
  BROOK_ASSERT_MSG(in_flight_ == 0, "{} io_uring operations never completed", in_flight_);
}

}  // namespace brook::io::uring
