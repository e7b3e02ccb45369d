// tools/bench_command.cc
#include <cstdio>

#include "tools/commands.h"

namespace brook::tools {

int bench_main(Args) {
  std::fprintf(stderr, "brook bench: not available in this build\n");
  return 2;
}

}  // namespace brook::tools
