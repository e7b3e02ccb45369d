// tools/sim_command.cc
#include <cstdio>

#include "tools/commands.h"

namespace brook::tools {

int sim_main(Args) {
  std::fprintf(stderr, "brook sim: not available in this build\n");
  return 2;
}

}  // namespace brook::tools
