// tools/format_command.cc
//
// `brook format` and `brook random-uuid`: Kafka's `kafka-storage format` and
// `kafka-storage random-uuid` (core/meta_properties.h).
//
//   brook format --cluster-id ID --node-id N --data-dir DIR [--ignore-formatted]
//                [--add-scram 'SCRAM-SHA-256=[name=U,password=P]']...
//       Writes DIR/meta.properties (version 1, a new directory id), creating
//       DIR when missing. A DIR already formatted alike is left as it is; one
//       formatted otherwise is an error unless --ignore-formatted, which
//       leaves any existing file alone. --add-scram (as kafka-storage's)
//       writes SCRAM credentials into DIR/bootstrap.records: the controller
//       that starts the cluster's metadata log writes them first
//       (core/bootstrap_records.h).
//   brook random-uuid
//       Prints a new cluster id.
//
// Exit code: 0 on success, 1 on failure, 2 on bad usage. Tools are not logic
// code: the operating system's randomness and system calls are fine here.
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/bootstrap_records.h"
#include "core/meta_properties.h"
#include "io/real/real_node.h"
#include "storage/checkpoint.h"
#include "tools/commands.h"

namespace brook::tools {

namespace {

struct FormatArgs {
  std::string cluster_id;
  int32_t node_id = -1;
  std::string data_dir;
  bool ignore_formatted = false;
  std::vector<std::string> add_scram;
};

void format_usage() {
  std::fprintf(stderr,
               "usage: brook format --cluster-id ID --node-id N --data-dir DIR "
               "[--ignore-formatted]\n"
               "       [--add-scram 'SCRAM-SHA-256=[name=U,password=P]' (or SCRAM-SHA-512; iterations=N)]...\n"
               "       (a cluster id comes from `brook random-uuid`)\n");
}

std::optional<FormatArgs> parse(Args args) {
  FormatArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--ignore-formatted") {
      out.ignore_formatted = true;
      continue;
    }
    if (i + 1 >= args.size()) return std::nullopt;
    const std::string_view value = args[++i];
    if (arg == "--cluster-id") {
      out.cluster_id = std::string(value);
    } else if (arg == "--node-id") {
      int64_t v = 0;
      const auto r = std::from_chars(value.data(), value.data() + value.size(), v);
      if (r.ec != std::errc() || r.ptr != value.data() + value.size() || v < 0 || v > INT32_MAX) {
        return std::nullopt;
      }
      out.node_id = static_cast<int32_t>(v);
    } else if (arg == "--data-dir") {
      out.data_dir = std::string(value);
    } else if (arg == "--add-scram") {
      out.add_scram.emplace_back(value);
    } else {
      return std::nullopt;
    }
  }
  if (out.cluster_id.empty() || out.node_id < 0 || out.data_dir.empty()) return std::nullopt;
  return out;
}

uint64_t os_random_seed() {
  uint64_t seed = 0;
  if (::getrandom(&seed, sizeof(seed), 0) != static_cast<ssize_t>(sizeof(seed))) {
    seed = static_cast<uint64_t>(::time(nullptr)) ^ (static_cast<uint64_t>(::getpid()) << 32);
  }
  return seed;
}

// Makes DIR's own name durable in its parent (the Disk cannot reach above its
// root, DIR).
void sync_parent_of(const std::string& dir) {
  std::string parent = dir;
  while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
  const size_t slash = parent.rfind('/');
  parent = slash == std::string::npos ? "." : slash == 0 ? "/" : parent.substr(0, slash);
  const int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

io::Task<void> format_task(io::Context* ctx, const FormatArgs* args, int* exit_code, bool* done) {
  absl::StatusOr<std::optional<io::Buffer>> existing =
      co_await storage::read_whole_file(ctx->disk(), core::meta_properties_path(""));
  if (existing.ok() && existing->has_value() && args->ignore_formatted) {
    std::printf("%s is already formatted.\n", args->data_dir.c_str());
    *exit_code = 0;
    *done = true;
    co_return;
  }
  core::MetaProperties meta;
  meta.version = core::kMetaPropertiesVersion1;
  meta.cluster_id = args->cluster_id;
  meta.node_id = args->node_id;
  std::vector<metadata::MetadataRecord> bootstrap;
  for (const std::string& argument : args->add_scram) {
    absl::StatusOr<net::UserScramCredentialRecord> record = core::parse_add_scram(argument, ctx->random());
    if (!record.ok()) {
      std::fprintf(stderr, "brook format: %s\n", std::string(record.status().message()).c_str());
      *exit_code = 2;
      *done = true;
      co_return;
    }
    bootstrap.emplace_back(std::move(*record));
  }
  absl::Status status = co_await core::format_directory(
      ctx->disk(), "", std::move(meta), ctx->random(), args->ignore_formatted);
  if (status.ok() && !bootstrap.empty()) {
    status = co_await core::write_bootstrap_records(ctx->disk(), "", std::move(bootstrap));
  }
  if (!status.ok()) {
    std::fprintf(stderr, "brook format: %s: %s\n", args->data_dir.c_str(),
                 std::string(status.message()).c_str());
    *exit_code = 1;
  } else {
    std::printf("Formatted %s with cluster.id %s and node.id %d.\n", args->data_dir.c_str(),
                args->cluster_id.c_str(), args->node_id);
    *exit_code = 0;
  }
  *done = true;
}

}  // namespace

int format_main(Args args) {
  const std::optional<FormatArgs> parsed = parse(args);
  if (!parsed) {
    format_usage();
    return 2;
  }
  if (!core::is_valid_cluster_id(parsed->cluster_id)) {
    std::fprintf(stderr,
                 "brook format: Cluster ID string %s does not appear to be a valid UUID "
                 "(expected 22 base64url characters, as `brook random-uuid` prints)\n",
                 parsed->cluster_id.c_str());
    return 1;
  }
  io::real::RealNodeOptions options;
  options.data_dir = parsed->data_dir;
  options.node_id = io::NodeId{parsed->node_id};
  absl::StatusOr<std::unique_ptr<io::real::RealNode>> node = io::real::RealNode::create(options);
  if (!node.ok()) {
    std::fprintf(stderr, "brook format: %s\n", node.status().ToString().c_str());
    return 1;
  }
  int exit_code = 1;
  bool done = false;
  (*node)->scope().spawn(format_task(&(*node)->context(), &*parsed, &exit_code, &done));
  (*node)->run_until([&] { return done; });
  if (exit_code == 0) sync_parent_of(parsed->data_dir);
  return exit_code;
}

int random_uuid_main(Args args) {
  if (!args.empty()) {
    std::fprintf(stderr, "usage: brook random-uuid\n");
    return 2;
  }
  io::Random random(os_random_seed());
  std::printf("%s\n", core::random_cluster_id(random).c_str());
  return 0;
}

}  // namespace brook::tools
