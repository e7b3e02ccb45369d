// tests/backends/sim_backend.cc
//
// Conformance harness factory for the sim backend.
#include "tests/io_conformance.h"

namespace brook::testing {

std::unique_ptr<Backend> make_sim_backend() { return nullptr; }

}  // namespace brook::testing
