// tools/brook_main.cc
//
// The `brook` binary: dispatches to its subcommands.
#include <cstdio>
#include <string_view>
#include <vector>

#include "tools/commands.h"

namespace {

void usage() {
  std::fprintf(stderr,
               "usage: brook <command> [args]\n"
               "commands:\n"
               "  sim         run seeded simulations (--seed N, --seeds A..B, --trace FILE)\n"
               "  bench       real-backend benchmarks (net, file)\n"
               "  server      run a Kafka node: broker and controller (localhost:9092 by default)\n"
               "  controller  run one KRaft controller quorum replica\n"
               "  metadata-quorum  describe a KRaft quorum; add or remove controllers\n"
               "  topics      create, list, describe, alter and delete topics\n"
               "  configs     describe and alter topic and broker configs and users' SCRAM credentials\n"
               "  produce     send lines of standard input as records\n"
               "  consume     print the records of a topic\n"
               "  groups      list, describe and delete consumer groups; reset their offsets\n"
               "  transactions  list and describe transactions; describe a partition's producers\n"
               "  reassign-partitions  move partitions' replicas; verify, cancel and list reassignments\n"
               "  perf        producer and consumer throughput and latency (perf produce|consume)\n"
               "  format      write meta.properties into a data directory\n"
               "  random-uuid print a new cluster id\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage();
    return 2;
  }
  std::vector<std::string_view> args(argv + 2, argv + argc);
  const std::string_view command = argv[1];
  if (command == "sim") return brook::tools::sim_main(args);
  if (command == "bench") return brook::tools::bench_main(args);
  if (command == "server") return brook::tools::server_main(args);
  if (command == "controller") return brook::tools::controller_main(args);
  if (command == "format") return brook::tools::format_main(args);
  if (command == "metadata-quorum") return brook::tools::metadata_quorum_main(args);
  if (command == "topics") return brook::tools::topics_main(args);
  if (command == "configs") return brook::tools::configs_main(args);
  if (command == "produce") return brook::tools::produce_main(args);
  if (command == "consume") return brook::tools::consume_main(args);
  if (command == "perf") return brook::tools::perf_main(args);
  if (command == "groups") return brook::tools::groups_main(args);
  if (command == "transactions") return brook::tools::transactions_main(args);
  if (command == "reassign-partitions") return brook::tools::reassign_partitions_main(args);
  if (command == "random-uuid") return brook::tools::random_uuid_main(args);
  if (command == "help" || command == "--help" || command == "-h") {
    usage();
    return 0;
  }
  std::fprintf(stderr, "brook: unknown command '%.*s'\n", static_cast<int>(command.size()),
               command.data());
  usage();
  return 2;
}
