// tests/backends/uring_backend.cc
//
// Conformance harness factory for the uring backend.
#include "tests/io_conformance.h"

namespace brook::testing {

std::unique_ptr<Backend> make_uring_backend() { return nullptr; }

}  // namespace brook::testing
