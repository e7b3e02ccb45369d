// tests/backends/sim_backend.cc
//
// Conformance harness factory for the simulator: a World with two nodes
// (no faults, buggify off), each with its own SimDisk and network host.
// run() spawns the task on node 0's executor and runs the world until the
// task completes; when the world runs out of events first, the task could
// never complete (a deadlock) and run() returns false.
#include <memory>

#include "io/scope.h"
#include "io/sync.h"
#include "io/when.h"
#include "sim/world.h"
#include "tests/io_conformance.h"

namespace brook::testing {
namespace {

io::Task<void> mark_done(io::Task<void> task, bool* done) {
  co_await std::move(task);
  *done = true;
}

class SimBackend final : public Backend {
 public:
  SimBackend() : world_(1, options()) {
    for (int i = 0; i < 2; ++i) {
      // Each node's main task keeps it up (its listeners reachable) without scheduling any event.
      world_.add_node().start([this](io::Context&) { return io::wait_for(&never_); });
    }
  }

  std::string name() const override { return "sim"; }

  io::Context& node(int index) override {
    BROOK_ASSERT(index == 0 || index == 1);
    return world_.node(index).context();
  }

  io::Address any_address(int index) override { return world_.node(index).address(0); }

  bool run(io::Task<void> task) override {
    bool done = false;
    // A local scope: the task never outlives this call, even when it cannot
    // complete.
    io::TaskScope scope(world_.node(0).executor());
    scope.spawn(mark_done(std::move(task), &done));
    world_.run_until([&] { return done; });
    return done;
  }

 private:
  static sim::WorldOptions options() {
    sim::WorldOptions o;
    o.scenario = "io-conformance";
    o.replay_command = "the io conformance suite (tests/io_conformance_test.cc)";
    o.buggify = sim::BuggifyMode::kOff;
    return o;
  }

  io::Event never_;  // declared first: outlives the nodes' tasks
  sim::World world_;
};

}  // namespace

std::unique_ptr<Backend> make_sim_backend() { return std::make_unique<SimBackend>(); }

}  // namespace brook::testing
