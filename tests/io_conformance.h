// tests/io_conformance.h
//
// The io interface conformance harness: one suite (io_conformance_test.cc)
// runs against every backend — the simulator, io_uring and epoll — through
// this small interface. Each backend provides its factory in
// tests/backends/<name>_backend.cc.
#pragma once

#include <memory>
#include <string>

#include "io/context.h"
#include "io/task.h"

namespace brook::testing {

// Two nodes, each with its own Disk rooted at an empty directory, able to
// reach each other over the backend's Network.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // REQUIRES: index is 0 or 1.
  virtual io::Context& node(int index) = 0;

  // An address node `index` can listen on, with port 0 (the listener picks a
  // free port; Listener::address() tells which).
  virtual io::Address any_address(int index) = 0;

  // Runs `task` on node 0 until it completes. Returns false when it cannot
  // complete: the simulated world ran out of events (a deadlock) or a real
  // backend passed a generous wall-clock limit.
  virtual bool run(io::Task<void> task) = 0;
};

// nullptr when the backend is unavailable on this machine (io_uring refused
// by a seccomp profile, say); the suite then skips it and says why.
std::unique_ptr<Backend> make_sim_backend();
std::unique_ptr<Backend> make_uring_backend();
std::unique_ptr<Backend> make_posix_backend();

}  // namespace brook::testing
