// tools/commands.h
//
// The subcommands of the `brook` binary. Each takes the arguments after its
// own name and returns the process exit code.
#pragma once

#include <span>
#include <string_view>

namespace brook::tools {

using Args = std::span<const std::string_view>;

// brook sim --seed N | --seeds A..B [--trace FILE] [--scenario NAME]
int sim_main(Args args);
// brook bench net|file ... (real-backend benchmarks)
int bench_main(Args args);
// brook server [--config FILE] [--override KEY=VALUE ...] [--data-dir DIR]
int server_main(Args args);
// brook controller --node-id N --controller-quorum-voters ... --data-dir D
int controller_main(Args args);
// brook metadata-quorum --bootstrap-controller H:P describe|add-controller|remove-controller
int metadata_quorum_main(Args args);
// brook format --cluster-id ID --node-id N --data-dir D [--ignore-formatted]
int format_main(Args args);
// brook topics --bootstrap-server H:P --list|--describe|--create|--delete|--alter ...
int topics_main(Args args);
// brook configs --bootstrap-server H:P --describe|--alter --entity-type users|topics|brokers ...
int configs_main(Args args);
// brook reassign-partitions --bootstrap-server H:P --execute|--verify|--cancel|--list ...
int reassign_partitions_main(Args args);
// brook produce --bootstrap-server H:P --topic T ... (lines of standard input)
int produce_main(Args args);
// brook consume --bootstrap-server H:P --topic T ...
int consume_main(Args args);
// brook groups --bootstrap-server H:P --list|--describe|--delete|--reset-offsets ...
int groups_main(Args args);
// brook transactions --bootstrap-server H:P list|describe|describe-producers ...
int transactions_main(Args args);
// brook perf produce|consume --bootstrap-server H:P --topic T ...
int perf_main(Args args);
// brook bench groups (--bootstrap-server H:P | --sim) [--members N] ...
int group_bench_main(Args args);
// brook random-uuid (a new cluster id)
int random_uuid_main(Args args);

}  // namespace brook::tools
