// io/posix/loop.cc
#include "io/posix/loop.h"

#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace brook::io::posix {
namespace {

int64_t clock_ns(clockid_t id) {
  timespec ts{};
  const int rc = ::clock_gettime(id, &ts);
  BROOK_ASSERT_EQ(rc, 0);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

constexpr uint32_t kReadEvents = EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR;
constexpr uint32_t kWriteEvents = EPOLLOUT | EPOLLHUP | EPOLLERR;

}  // namespace

void FdWaiters::notify(uint32_t events) {
  if ((events & kReadEvents) != 0) readers_.notify_all();
  if ((events & kWriteEvents) != 0) writers_.notify_all();
}

absl::StatusOr<std::unique_ptr<Loop>> Loop::create() {
  const int fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return absl::ResourceExhaustedError(
        fmt::format("epoll_create1: {}", std::strerror(err)));
  }
  return std::unique_ptr<Loop>(new Loop(fd));
}

Loop::Loop(int epoll_fd)
    : epoll_fd_(epoll_fd), scratch_(std::make_unique<std::byte[]>(kReadScratchBytes)) {
  BROOK_ASSERT_GE(epoll_fd_, 0);
}

Loop::~Loop() {
  BROOK_ASSERT(!running_);
  ::close(epoll_fd_);
}

EventId Loop::post(Callback cb) {
  BROOK_ASSERT(cb.fn != nullptr);
  // Stamped with the turn's time, not the last popped event's: a timer that
  // fell due before this turn then runs before the post, so a task that
  // yields in a loop cannot starve timers.
  return queue_.schedule(turn_ns_, cb);
}

EventId Loop::call_at(Instant deadline, Callback cb) {
  BROOK_ASSERT(cb.fn != nullptr);
  return queue_.schedule(to_ns(deadline), cb);
}

void Loop::cancel(EventId id) { queue_.cancel(id); }

Instant Loop::now() const { return instant_from_ns(clock_ns(CLOCK_MONOTONIC)); }

WallTime Loop::wall_now() const { return WallTime(Duration(clock_ns(CLOCK_REALTIME))); }

void Loop::run_until(std::function<bool()> done) {
  BROOK_ASSERT(!running_);
  running_ = true;
  turn_ns_ = clock_ns(CLOCK_MONOTONIC);
  // An event loop: it ends only when the caller's condition holds.
  while (!done()) {
    const std::optional<int64_t> next_ns = queue_.next_time_ns();
    int64_t timeout_ns = -1;
    if (next_ns.has_value()) {
      timeout_ns = std::max<int64_t>(0, *next_ns - clock_ns(CLOCK_MONOTONIC));
    }
    poll(timeout_ns);
    run_due();
  }
  running_ = false;
}

bool Loop::run_until(std::function<bool()> done, Instant deadline) {
  bool expired = false;
  const EventId timer =
      call_at(deadline, Callback{[](void* a) { *static_cast<bool*>(a) = true; }, &expired});
  bool finished = false;
  run_until([&] {
    finished = done();
    return finished || expired;
  });
  cancel(timer);  // a no-op when it ran
  return finished;
}

void Loop::run_for(Duration duration) {
  const bool reached = run_until([] { return false; }, now() + duration);
  BROOK_ASSERT(!reached);
}

absl::Status Loop::watch(int fd, FdWaiters* waiters) {
  BROOK_ASSERT_GE(fd, 0);
  BROOK_ASSERT(waiters != nullptr);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = waiters;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    const int err = errno;
    if (err == ENOMEM || err == ENOSPC) {
      return absl::ResourceExhaustedError(fmt::format("epoll_ctl add: {}", std::strerror(err)));
    }
    return absl::InternalError(fmt::format("epoll_ctl add: {}", std::strerror(err)));
  }
  return absl::OkStatus();
}

void Loop::unwatch(int fd) {
  const int rc = ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  BROOK_ASSERT_MSG(rc == 0, "epoll_ctl del fd {}: {}", fd, std::strerror(errno));
}

void Loop::poll(int64_t timeout_ns) {
  const int n = wait(timeout_ns);
  const int err = errno;
  turn_ns_ = clock_ns(CLOCK_MONOTONIC);
  if (n < 0) {
    BROOK_ASSERT_MSG(err == EINTR, "epoll wait: {}", std::strerror(err));
    return;
  }
  BROOK_ASSERT_LE(static_cast<size_t>(n), events_.size());
  // Waking only posts resumptions, so no task runs (and no FdWaiters can be
  // destroyed) while this batch is being dispatched.
  for (int i = 0; i < n; ++i) {
    static_cast<FdWaiters*>(events_[i].data.ptr)->notify(events_[i].events);
  }
}

int Loop::wait(int64_t timeout_ns) {
  const int events_max = static_cast<int>(events_.size());
  if (pwait2_available_) {
    timespec ts{};
    ts.tv_sec = timeout_ns / 1'000'000'000;
    ts.tv_nsec = timeout_ns % 1'000'000'000;
    const int n = ::epoll_pwait2(epoll_fd_, events_.data(), events_max,
                                 timeout_ns < 0 ? nullptr : &ts, nullptr);
    // Older kernels lack the call; seccomp profiles may refuse it.
    if (n >= 0 || (errno != ENOSYS && errno != EPERM)) return n;
    pwait2_available_ = false;
  }
  int timeout_ms = -1;
  if (timeout_ns >= 0) {
    // Round up so a timer never fires early.
    timeout_ms = static_cast<int>(std::min<int64_t>((timeout_ns + 999'999) / 1'000'000, INT_MAX));
  }
  return ::epoll_wait(epoll_fd_, events_.data(), events_max, timeout_ms);
}

void Loop::run_due() {
  for (size_t i = 0; i < kCallbacksPerTurnMax; ++i) {
    std::optional<EventQueue::Due> due = queue_.pop_due(turn_ns_);
    if (!due.has_value()) return;
    due->callback();
  }
}

}  // namespace brook::io::posix
