// tools/metadata_quorum_command.cc
//
// `brook metadata-quorum`: Kafka's `kafka-metadata-quorum` for a dynamic
// KRaft quorum (KIP-853).
//
//   brook metadata-quorum --bootstrap-controller HOST:PORT describe
//   brook metadata-quorum --bootstrap-server HOST:PORT describe
//   brook metadata-quorum --bootstrap-controller HOST:PORT add-controller
//         --controller-id N --controller-directory-id UUID --controller-endpoint HOST:PORT
//   brook metadata-quorum --bootstrap-controller HOST:PORT remove-controller
//         --controller-id N --controller-directory-id UUID
//
// The bootstrap controller's DescribeQuorum names the leader and its
// endpoint (a broker, given by --bootstrap-server, forwards the request to
// the active controller); AddRaftVoter / RemoveRaftVoter go to the leader's
// controller endpoint, which answers
// once the new voter set is committed. A controller's directory id is the
// directory.id in its data directory's meta.properties. describe prints the
// quorum as the leader sees it:
//
//   LeaderId: 1
//   LeaderEpoch: 3
//   HighWatermark: 120
//   CurrentVoters: 1@127.0.0.1:9093 (directory ..., log end 120), ...
//   CurrentObservers: 2 (log end 118), ...
//
// Exit code: 0 on success, 1 when the quorum refuses or cannot be reached,
// 2 on bad usage. Tools are not logic code: the real clock is fine here.
#include <charconv>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "io/real/real_node.h"
#include "io/status.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/add_raft_voter_request.h"
#include "net/kafka/messages/add_raft_voter_response.h"
#include "net/kafka/messages/describe_quorum_request.h"
#include "net/kafka/messages/describe_quorum_response.h"
#include "net/kafka/messages/remove_raft_voter_request.h"
#include "net/kafka/messages/remove_raft_voter_response.h"
#include "net/kafka/rpc.h"
#include "storage/checkpoint.h"
#include "tools/commands.h"

namespace brook::tools {

namespace {

using namespace std::chrono_literals;

constexpr io::Duration kTimeout = 30s;

struct QuorumArgs {
  io::Address bootstrap;
  bool via_broker = false;  // --bootstrap-server: a broker forwards DescribeQuorum
  std::string command;  // describe, add-controller, remove-controller
  int32_t controller_id = -1;
  std::optional<net::Uuid> directory_id;
  std::optional<io::Address> endpoint;
};

void usage() {
  std::fprintf(stderr,
               "usage: brook metadata-quorum (--bootstrap-controller | --bootstrap-server) HOST:PORT describe\n"
               "       brook metadata-quorum --bootstrap-controller HOST:PORT add-controller\n"
               "             --controller-id N --controller-directory-id UUID --controller-endpoint HOST:PORT\n"
               "       brook metadata-quorum --bootstrap-controller HOST:PORT remove-controller\n"
               "             --controller-id N --controller-directory-id UUID\n");
}

std::optional<QuorumArgs> parse(Args args) {
  QuorumArgs out;
  bool have_bootstrap = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "describe" || arg == "add-controller" || arg == "remove-controller") {
      if (!out.command.empty()) return std::nullopt;
      out.command = std::string(arg);
      continue;
    }
    if (i + 1 >= args.size()) return std::nullopt;
    const std::string_view value = args[++i];
    if (arg == "--bootstrap-controller" || arg == "--bootstrap-server") {
      absl::StatusOr<io::Address> a = io::Address::parse(value);
      if (!a.ok() || have_bootstrap) return std::nullopt;
      out.bootstrap = *a;
      out.via_broker = arg == "--bootstrap-server";
      have_bootstrap = true;
    } else if (arg == "--controller-id") {
      int64_t v = -1;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || p != value.data() + value.size() || v < 0 || v > INT32_MAX) return std::nullopt;
      out.controller_id = static_cast<int32_t>(v);
    } else if (arg == "--controller-directory-id") {
      out.directory_id = storage::parse_uuid(value);
      if (!out.directory_id.has_value()) return std::nullopt;
    } else if (arg == "--controller-endpoint") {
      absl::StatusOr<io::Address> a = io::Address::parse(value);
      if (!a.ok()) return std::nullopt;
      out.endpoint = *a;
    } else {
      return std::nullopt;
    }
  }
  if (!have_bootstrap || out.command.empty()) return std::nullopt;
  if (out.command != "describe" && (out.controller_id < 0 || !out.directory_id.has_value())) return std::nullopt;
  if (out.command == "add-controller" && !out.endpoint.has_value()) return std::nullopt;
  return out;
}

struct Quorum {
  net::DescribeQuorumResponse::PartitionData partition;
  std::vector<net::DescribeQuorumResponse::Node> nodes;
};

io::Task<absl::StatusOr<Quorum>> describe(io::Context* ctx, const io::Address& at) {
  net::Peer peer(ctx->network(), ctx->clock(), at, "brook-metadata-quorum");
  net::DescribeQuorumRequest request;
  net::DescribeQuorumRequest::TopicData topic;
  topic.topic_name = "__cluster_metadata";
  topic.partitions.emplace_back();
  request.topics.push_back(topic);
  absl::StatusOr<net::DescribeQuorumResponse> r = co_await peer.call<net::DescribeQuorumResponse>(request, 2, kTimeout);
  if (!r.ok()) co_return r.status();
  if (r->error_code != 0 || r->topics.size() != 1 || r->topics[0].partitions.size() != 1) {
    co_return absl::UnavailableError(fmt::format("DescribeQuorum: {}", net::error_name(r->error_code)));
  }
  Quorum q;
  q.partition = r->topics[0].partitions[0];
  q.nodes = r->nodes;
  co_return q;
}

// The leader's endpoint, from a DescribeQuorum answered by any controller
// (or by a broker, which forwards it to the leader: its answer names the
// leader's controller endpoint).
io::Task<absl::StatusOr<Quorum>> find_leader(io::Context* ctx, const io::Address& bootstrap, bool via_broker,
                                             io::Address* leader) {
  CO_ASSIGN_OR_RETURN(Quorum q, co_await describe(ctx, bootstrap));
  if (q.partition.error_code == 0 && !via_broker) {
    *leader = bootstrap;
    co_return q;
  }
  for (const auto& node : q.nodes) {
    if (node.node_id != q.partition.leader_id || node.listeners.empty()) continue;
    *leader = io::Address(node.listeners[0].host, node.listeners[0].port);
    if (q.partition.error_code == 0) co_return q;
    co_return co_await describe(ctx, *leader);
  }
  co_return absl::UnavailableError(
      fmt::format("no leader known to {} (leader id {})", bootstrap.to_string(), q.partition.leader_id));
}

std::string replicas_text(const std::vector<net::DescribeQuorumResponse::ReplicaState>& replicas,
                          const std::vector<net::DescribeQuorumResponse::Node>& nodes) {
  std::string out;
  for (const auto& r : replicas) {
    if (!out.empty()) out += ", ";
    out += std::to_string(r.replica_id);
    for (const auto& node : nodes) {
      if (node.node_id == r.replica_id && !node.listeners.empty()) {
        out += fmt::format("@{}:{}", node.listeners[0].host, node.listeners[0].port);
      }
    }
    out += fmt::format(" (directory {}, log end {})", r.replica_directory_id.to_string(), r.log_end_offset);
  }
  return out;
}

// Sends a voter change to the leader: its error code and message.
template <typename Request>
io::Task<absl::StatusOr<std::pair<int16_t, std::string>>> change(net::Peer& peer, const Request& request) {
  using Response = std::conditional_t<std::is_same_v<Request, net::AddRaftVoterRequest>, net::AddRaftVoterResponse,
                                      net::RemoveRaftVoterResponse>;
  CO_ASSIGN_OR_RETURN(Response r, co_await peer.call<Response>(request, 0, kTimeout + 5s));
  co_return std::make_pair(r.error_code, r.error_message.value_or(""));
}

io::Task<void> quorum_main(io::Context* ctx, const QuorumArgs* args, int* exit_code, bool* done) {
  auto finish = [&](int code) {
    *exit_code = code;
    *done = true;
  };
  io::Address leader;
  absl::StatusOr<Quorum> q = co_await find_leader(ctx, args->bootstrap, args->via_broker, &leader);
  if (!q.ok()) {
    std::fprintf(stderr, "brook metadata-quorum: %s\n", q.status().ToString().c_str());
    finish(1);
    co_return;
  }
  if (args->command == "describe") {
    std::printf("LeaderId: %d\nLeaderEpoch: %d\nHighWatermark: %lld\nCurrentVoters: %s\nCurrentObservers: %s\n",
                q->partition.leader_id, q->partition.leader_epoch,
                static_cast<long long>(q->partition.high_watermark),
                replicas_text(q->partition.current_voters, q->nodes).c_str(),
                replicas_text(q->partition.observers, q->nodes).c_str());
    finish(0);
    co_return;
  }
  net::Peer peer(ctx->network(), ctx->clock(), leader, "brook-metadata-quorum");
  absl::StatusOr<std::pair<int16_t, std::string>> answer;
  if (args->command == "add-controller") {
    net::AddRaftVoterRequest request;
    request.timeout_ms = static_cast<int32_t>(std::chrono::duration_cast<std::chrono::milliseconds>(kTimeout).count());
    request.voter_id = args->controller_id;
    request.voter_directory_id = *args->directory_id;
    net::AddRaftVoterRequest::Listener listener;
    listener.name = "CONTROLLER";
    listener.host = args->endpoint->host;
    listener.port = args->endpoint->port;
    request.listeners.push_back(std::move(listener));
    answer = co_await change(peer, request);
  } else {
    net::RemoveRaftVoterRequest request;
    request.voter_id = args->controller_id;
    request.voter_directory_id = *args->directory_id;
    answer = co_await change(peer, request);
  }
  if (!answer.ok() || answer->first != 0) {
    const std::string why = answer.ok() ? fmt::format("{}: {}", net::error_name(answer->first), answer->second)
                                        : answer.status().ToString();
    std::fprintf(stderr, "brook metadata-quorum: %s\n", why.c_str());
    finish(1);
    co_return;
  }
  std::printf("%s controller %d\n", args->command == "add-controller" ? "Added" : "Removed", args->controller_id);
  finish(0);
}

}  // namespace

int metadata_quorum_main(Args args) {
  const std::optional<QuorumArgs> parsed = parse(args);
  if (!parsed) {
    usage();
    return 2;
  }
  io::real::RealNodeOptions options;
  absl::StatusOr<std::unique_ptr<io::real::RealNode>> node = io::real::RealNode::create(options);
  if (!node.ok()) {
    std::fprintf(stderr, "brook metadata-quorum: %s\n", node.status().ToString().c_str());
    return 1;
  }
  bool done = false;
  int exit_code = 0;
  (*node)->scope().spawn(quorum_main(&(*node)->context(), &*parsed, &exit_code, &done));
  (*node)->run_until([&] { return done; });
  return exit_code;
}

}  // namespace brook::tools
