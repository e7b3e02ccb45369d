// tests/backends/posix_backend.cc
//
// Conformance harness factory for the posix backend.
#include "tests/io_conformance.h"

namespace brook::testing {

std::unique_ptr<Backend> make_posix_backend() { return nullptr; }

}  // namespace brook::testing
