// io/executor.h
//
// The executor is a node's (or shard's) single-threaded event loop as seen by
// the runtime: it runs callbacks posted to it in FIFO order and callbacks due
// at an instant of the node's monotonic clock. Coroutines are resumed only
// through it, never from another thread.
//
// Implemented by the simulator (one scheduler for the whole world, events
// ordered by virtual time and sequence) and by the real backends (io/uring,
// io/posix). An EventId names one pending callback; cancelling a callback that
// already ran or was cancelled is a no-op, so awaiters may cancel blindly in
// their destructors.
#pragma once

#include <coroutine>
#include <cstdint>

#include "io/time.h"

namespace brook::io {

// A plain function pointer and argument: no allocation per event.
struct Callback {
  void (*fn)(void* arg) = nullptr;
  void* arg = nullptr;

  void operator()() const { fn(arg); }
  static Callback resume(std::coroutine_handle<> h) {
    return Callback{[](void* a) { std::coroutine_handle<>::from_address(a).resume(); },
                    h.address()};
  }
};

// 0 is "no event". Implementations pack a slot and a generation so that a
// stale id never cancels a newer event.
using EventId = uint64_t;
inline constexpr EventId kNoEvent = 0;

class Executor {
 public:
  virtual ~Executor() = default;

  // Runs `cb` after every callback already posted, at the current instant.
  virtual EventId post(Callback cb) = 0;

  // Runs `cb` once the monotonic clock reaches `deadline`.
  virtual EventId call_at(Instant deadline, Callback cb) = 0;

  // Forgets a pending callback. No-op for kNoEvent, run or cancelled ids.
  virtual void cancel(EventId id) = 0;

  // The monotonic clock of the node this executor serves.
  virtual Instant now() const = 0;
};

}  // namespace brook::io
