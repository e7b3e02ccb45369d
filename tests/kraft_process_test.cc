// tests/kraft_process_test.cc
//
// Three real `brook controller` processes on loopback form a quorum; the
// test finds the leader with DescribeQuorum (through the project's own
// protocol layer on a real io backend), kills it with SIGKILL, and waits
// for one of the other two to lead a later epoch with a high watermark past
// everything the old leader had: a new leader elected and its first entry
// committed. It prints the failover time.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "io/real/real_node.h"
#include "io/scope.h"
#include "net/kafka/messages/describe_quorum_request.h"
#include "net/kafka/messages/describe_quorum_response.h"
#include "net/kafka/messages/api_versions_request.h"
#include "net/kafka/messages/api_versions_response.h"
#include "net/kafka/messages/broker_heartbeat_request.h"
#include "net/kafka/messages/broker_heartbeat_response.h"
#include "net/kafka/messages/broker_registration_request.h"
#include "net/kafka/messages/broker_registration_response.h"
#include "net/kafka/messages/create_topics_request.h"
#include "net/kafka/messages/create_topics_response.h"
#include "net/kafka/errors.h"
#include "net/kafka/rpc.h"

namespace brook {
namespace {

using namespace std::chrono_literals;

// The lowest port the kernel hands out to outgoing connections.
int ephemeral_low() {
  int low = 32768;
  if (FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (fscanf(f, "%d", &low) != 1) low = 32768;
    fclose(f);
  }
  return low;
}

bool bindable(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// A port for a controller to listen on: free when picked, below the
// kernel's ephemeral range (where an outgoing connection of any process
// could take it before the controller binds it), and handed out to no
// other test process within the hour. The registry of handed-out ports
// ("port until" lines under an exclusive lock) is shared with the client
// tests' free_port() in tests/clients/broker_clients_test.py, which run
// beside this test.
uint16_t free_port() {
  const char* tmp = getenv("TMPDIR");
  const std::string path = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/brook-test-ports";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT, 0666);
  if (fd < 0 || flock(fd, LOCK_EX) != 0) {
    if (fd >= 0) close(fd);
    return 0;
  }
  std::string text;
  char chunk[4096];
  for (ssize_t n; (n = read(fd, chunk, sizeof(chunk))) > 0;) text.append(chunk, static_cast<size_t>(n));
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::map<int, double> held;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    int port = 0;
    double until = 0;
    if (fields >> port >> until && until > now) held[port] = until;
  }
  const int low = ephemeral_low();
  const int first = std::max(1024, low - 16384);
  std::random_device random;
  uint16_t port = 0;
  for (int attempt = 0; attempt < 100000 && port == 0 && low - first >= 64; ++attempt) {
    const int candidate = first + static_cast<int>(random() % static_cast<unsigned>(low - first));
    if (held.count(candidate) == 0 && bindable(static_cast<uint16_t>(candidate))) {
      port = static_cast<uint16_t>(candidate);
    }
  }
  if (port != 0) {
    held[port] = now + 3600;
    std::string out;
    for (const auto& [p, until] : held) {
      out += std::to_string(p) + " " + std::to_string(static_cast<int64_t>(until)) + "\n";
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, out.data(), out.size(), 0) != static_cast<ssize_t>(out.size())) port = 0;
  }
  close(fd);  // releases the lock
  return port;
}

struct QuorumView {
  int32_t leader_id = -1;
  int32_t epoch = -1;
  int64_t high_watermark = -1;
  int64_t leader_end = -1;
  std::vector<int32_t> voters;
  std::map<int32_t, uint16_t> ports;  // each voter's first endpoint's port
};

io::Task<void> describe(io::Context* ctx, uint16_t port, std::optional<QuorumView>* out, bool* done) {
  net::Peer peer(ctx->network(), ctx->clock(), io::Address("127.0.0.1", port), "kraft-process-test");
  net::DescribeQuorumRequest request;
  net::DescribeQuorumRequest::TopicData topic;
  topic.topic_name = "__cluster_metadata";
  topic.partitions.emplace_back();
  request.topics.push_back(topic);
  absl::StatusOr<net::DescribeQuorumResponse> r =
      co_await peer.call<net::DescribeQuorumResponse>(request, 2, 1s);
  if (r.ok() && r->topics.size() == 1 && r->topics[0].partitions.size() == 1 &&
      r->topics[0].partitions[0].error_code == 0) {
    const auto& p = r->topics[0].partitions[0];
    QuorumView v;
    for (const auto& node : r->nodes) {
      if (!node.listeners.empty()) v.ports[node.node_id] = node.listeners[0].port;
    }
    v.leader_id = p.leader_id;
    v.epoch = p.leader_epoch;
    v.high_watermark = p.high_watermark;
    for (const auto& voter : p.current_voters) {
      v.voters.push_back(voter.replica_id);
      if (voter.replica_id == p.leader_id) v.leader_end = voter.log_end_offset;
    }
    *out = v;
  }
  *done = true;
}

template <typename Resp, typename Req>
io::Task<void> call_once(io::Context* ctx, uint16_t port, Req request, int16_t version,
                         std::optional<Resp>* out, bool* done) {
  net::Peer peer(ctx->network(), ctx->clock(), io::Address("127.0.0.1", port), "kraft-process-test");
  absl::StatusOr<Resp> r = co_await peer.call<Resp>(request, version, 2s);
  if (r.ok()) *out = std::move(*r);
  *done = true;
}

class KraftProcesses : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/brook-kraft-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    root_ = dir;
    io::real::RealNodeOptions options;
    options.data_dir = root_ + "/client";
    auto node = io::real::RealNode::create(options);
    ASSERT_TRUE(node.ok()) << node.status();
    client_ = std::move(*node);
  }
  void TearDown() override {
    if (HasFailure()) {
      // The nodes' logs say why.
      for (size_t i = 0; i < pids_.size(); ++i) {
        const std::string log = root_ + "/node" + std::to_string(i + 1) + ".log";
        std::printf("--- %s\n", log.c_str());
        if (FILE* f = std::fopen(log.c_str(), "r")) {
          char line[512];
          while (std::fgets(line, sizeof(line), f) != nullptr) std::fputs(line, stdout);
          std::fclose(f);
        }
      }
    }
    for (pid_t pid : pids_) {
      if (pid > 0) kill(pid, SIGKILL);
    }
    for (pid_t pid : pids_) {
      if (pid > 0) waitpid(pid, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  // Starts `brook controller --node-id ID --data-dir <its dir> ARGS...`
  // (election timeout 300 ms, a fixed cluster id), its stderr in nodeID.log.
  void spawn_controller(int id, std::vector<std::string> args) {
    const std::string dir = root_ + "/node" + std::to_string(id);
    const std::string log = root_ + "/node" + std::to_string(id) + ".log";
    std::vector<std::string> all{BROOK_BINARY, "controller", "--node-id", std::to_string(id), "--data-dir", dir,
                                 "--election-timeout-ms", "300", "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qk"};
    all.insert(all.end(), args.begin(), args.end());
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      FILE* f = std::freopen(log.c_str(), "w", stderr);
      (void)f;
      std::vector<char*> argv;
      for (std::string& a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(BROOK_BINARY, argv.data());
      _exit(127);
    }
    pids_.push_back(pid);
  }

  // A controller of a static quorum.
  void start(int id, const std::string& voters) { spawn_controller(id, {"--controller-quorum-voters", voters}); }

  // A controller of a dynamic quorum: `how` is --standalone (no
  // `bootstrap`) or --controller-quorum-bootstrap-servers.
  void start_dynamic(int id, uint16_t port, const std::string& how, const std::string& bootstrap) {
    std::vector<std::string> args{"--listen", "127.0.0.1:" + std::to_string(port), how};
    if (!bootstrap.empty()) args.push_back(bootstrap);
    spawn_controller(id, std::move(args));
  }

  // Runs `brook metadata-quorum ARGS...`; its exit code.
  int metadata_quorum(std::vector<std::string> args) {
    const std::string log = root_ + "/metadata-quorum.log";
    const pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      FILE* f = std::freopen(log.c_str(), "a", stderr);
      (void)f;
      std::vector<char*> argv{const_cast<char*>(BROOK_BINARY), const_cast<char*>("metadata-quorum")};
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(BROOK_BINARY, argv.data());
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // directory.id from a node's meta.properties, once it is written.
  std::string directory_id(int id) {
    const std::string path = root_ + "/node" + std::to_string(id) + "/meta.properties";
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (FILE* f = std::fopen(path.c_str(), "r")) {
        char line[256];
        std::string found;
        while (std::fgets(line, sizeof(line), f) != nullptr) {
          std::string l(line);
          if (l.starts_with("directory.id=")) found = l.substr(13, 22);
        }
        std::fclose(f);
        if (found.size() == 22) return found;
      }
      std::this_thread::sleep_for(20ms);
    }
    return "";
  }

  std::optional<QuorumView> ask(uint16_t port) {
    std::optional<QuorumView> view;
    bool done = false;
    client_->scope().spawn(describe(&client_->context(), port, &view, &done));
    client_->run_until([&] { return done; });
    return view;
  }

  template <typename Resp, typename Req>
  std::optional<Resp> call(uint16_t port, const Req& request, int16_t version) {
    std::optional<Resp> out;
    bool done = false;
    client_->scope().spawn(call_once<Resp, Req>(&client_->context(), port, request, version, &out, &done));
    client_->run_until([&] { return done; });
    return out;
  }

  // Starts three controllers; their ports.
  std::vector<uint16_t> start_quorum() {
    std::vector<uint16_t> ports;
    std::string voters;
    for (int id = 1; id <= 3; ++id) {
      ports.push_back(free_port());
      if (!voters.empty()) voters += ",";
      voters += std::to_string(id) + "@127.0.0.1:" + std::to_string(ports.back());
    }
    for (int id = 1; id <= 3; ++id) start(id, voters);
    return ports;
  }

  // The index of the leader whose first entry is committed, and its view.
  std::optional<std::pair<int, QuorumView>> find_leader(const std::vector<uint16_t>& ports, int skip = -1,
                                                        int32_t after_epoch = -1) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      for (size_t i = 0; i < ports.size(); ++i) {
        if (static_cast<int>(i) == skip) continue;
        std::optional<QuorumView> v = ask(ports[i]);
        if (v && v->leader_id == static_cast<int32_t>(i + 1) && v->high_watermark > 0 && v->epoch > after_epoch) {
          return std::make_pair(static_cast<int>(i), *v);
        }
      }
      std::this_thread::sleep_for(20ms);
    }
    return std::nullopt;
  }

  std::string root_;
  std::unique_ptr<io::real::RealNode> client_;
  std::vector<pid_t> pids_;
};

TEST_F(KraftProcesses, NewLeaderCommitsAfterTheLeaderIsKilled) {
  std::vector<uint16_t> ports;
  std::string voters;
  for (int id = 1; id <= 3; ++id) {
    ports.push_back(free_port());
    ASSERT_NE(ports.back(), 0);
    if (!voters.empty()) voters += ",";
    voters += std::to_string(id) + "@127.0.0.1:" + std::to_string(ports.back());
  }
  for (int id = 1; id <= 3; ++id) start(id, voters);

  // A leader, with its first entry (the LeaderChange batch) committed.
  std::optional<QuorumView> before;
  int leader_index = -1;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!before && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < ports.size() && !before; ++i) {
      std::optional<QuorumView> v = ask(ports[i]);
      if (v && v->leader_id == static_cast<int32_t>(i + 1) && v->high_watermark > 0) {
        before = v;
        leader_index = static_cast<int>(i);
      }
    }
    if (!before) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(before.has_value()) << "no leader within 30 s";

  ASSERT_EQ(kill(pids_[static_cast<size_t>(leader_index)], SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  std::optional<QuorumView> after;
  while (!after && std::chrono::steady_clock::now() < killed + 30s) {
    for (size_t i = 0; i < ports.size() && !after; ++i) {
      if (static_cast<int>(i) == leader_index) continue;
      std::optional<QuorumView> v = ask(ports[i]);
      if (v && v->leader_id == static_cast<int32_t>(i + 1) && v->epoch > before->epoch &&
          v->high_watermark > before->leader_end) {
        after = v;
      }
    }
    if (!after) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(after.has_value()) << "no new leader committed within 30 s of the kill";
  const double failover_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - killed).count();
  std::printf("failover: leader %d (epoch %d, end %lld) killed; leader %d of epoch %d committed to %lld "
              "after %.0f ms (election timeout 300 ms)\n",
              before->leader_id, before->epoch, static_cast<long long>(before->leader_end),
              after->leader_id, after->epoch, static_cast<long long>(after->high_watermark),
              failover_ms);
}

}  // namespace
}  // namespace brook

namespace brook {
namespace {

// The controller APIs over the wire: a broker registers and is unfenced, a
// topic is created on it; after the active controller is killed, the next
// one knows the topic and the broker.
TEST_F(KraftProcesses, ControllerServesBrokersAndAdminsAcrossFailover) {
  const std::vector<uint16_t> ports = start_quorum();
  std::optional<std::pair<int, QuorumView>> leader = find_leader(ports);
  ASSERT_TRUE(leader.has_value()) << "no leader within 30 s";
  const uint16_t port = ports[static_cast<size_t>(leader->first)];

  // v3 must name the client's software (KIP-511), as on a broker.
  std::optional<net::ApiVersionsResponse> unnamed = call<net::ApiVersionsResponse>(port, net::ApiVersionsRequest{}, 3);
  ASSERT_TRUE(unnamed.has_value());
  EXPECT_EQ(unnamed->error_code, net::code(net::Error::kInvalidRequest));
  EXPECT_TRUE(unnamed->api_keys.empty());
  net::ApiVersionsRequest named;
  named.client_software_name = "brook-test";
  named.client_software_version = "1.0";
  std::optional<net::ApiVersionsResponse> versions = call<net::ApiVersionsResponse>(port, named, 3);
  ASSERT_TRUE(versions.has_value());
  EXPECT_EQ(versions->error_code, 0);
  bool lists_create_topics = false;
  for (const auto& k : versions->api_keys) lists_create_topics |= k.api_key == net::CreateTopicsRequest::kApiKey;
  EXPECT_TRUE(lists_create_topics);

  net::BrokerRegistrationRequest reg;
  reg.broker_id = 100;
  reg.cluster_id = "MkU3OEVBNTcwNTJENDM2Qk";
  reg.incarnation_id.bytes[0] = 42;
  reg.rack = std::nullopt;
  net::BrokerRegistrationRequest::Feature mv;
  mv.name = "metadata.version";
  mv.min_supported_version = 7;
  mv.max_supported_version = 21;
  reg.features.push_back(mv);
  // The bootstrap record may still be on its way: retry NOT_CONTROLLER.
  std::optional<net::BrokerRegistrationResponse> registered;
  for (int i = 0; i < 100 && (!registered || registered->error_code != 0); ++i) {
    registered = call<net::BrokerRegistrationResponse>(port, reg, 4);
    if (!registered || registered->error_code != 0) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(registered.has_value());
  ASSERT_EQ(registered->error_code, 0);
  net::BrokerHeartbeatRequest hb;
  hb.broker_id = 100;
  hb.broker_epoch = registered->broker_epoch;
  hb.current_metadata_offset = registered->broker_epoch;
  std::optional<net::BrokerHeartbeatResponse> beat = call<net::BrokerHeartbeatResponse>(port, hb, 1);
  ASSERT_TRUE(beat.has_value());
  EXPECT_EQ(beat->error_code, 0);
  EXPECT_FALSE(beat->is_fenced);

  net::CreateTopicsRequest create;
  net::CreateTopicsRequest::CreatableTopic topic;
  topic.name = "orders";
  topic.num_partitions = 3;
  topic.replication_factor = 1;
  create.topics.push_back(topic);
  std::optional<net::CreateTopicsResponse> created = call<net::CreateTopicsResponse>(port, create, 7);
  ASSERT_TRUE(created.has_value());
  ASSERT_EQ(created->topics.size(), 1u);
  EXPECT_EQ(created->topics[0].error_code, 0) << created->topics[0].error_message.value_or("");
  EXPECT_EQ(created->topics[0].num_partitions, 3);

  // A controller that is not active says so.
  const uint16_t other = ports[static_cast<size_t>((leader->first + 1) % 3)];
  std::optional<net::CreateTopicsResponse> refused = call<net::CreateTopicsResponse>(other, create, 7);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->topics.at(0).error_code, net::code(net::Error::kNotController));

  ASSERT_EQ(kill(pids_[static_cast<size_t>(leader->first)], SIGKILL), 0);
  std::optional<std::pair<int, QuorumView>> next = find_leader(ports, leader->first, leader->second.epoch);
  ASSERT_TRUE(next.has_value()) << "no new leader within 30 s";
  const uint16_t next_port = ports[static_cast<size_t>(next->first)];
  std::optional<net::CreateTopicsResponse> again;
  for (int i = 0; i < 100; ++i) {
    again = call<net::CreateTopicsResponse>(next_port, create, 7);
    if (again && again->topics.at(0).error_code != net::code(net::Error::kNotController)) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->topics.at(0).error_code, net::code(net::Error::kTopicAlreadyExists));
  beat = call<net::BrokerHeartbeatResponse>(next_port, hb, 1);
  ASSERT_TRUE(beat.has_value());
  EXPECT_EQ(beat->error_code, 0);
}

// A dynamic quorum (KIP-853): one controller formatted standalone, two
// more joining as observers and added with `brook metadata-quorum
// add-controller`; then the first one is killed, the other two elect a
// leader and commit, and the dead one is removed.
TEST_F(KraftProcesses, DynamicQuorumGrowsFromOneToThree) {
  std::vector<uint16_t> ports;
  for (int id = 1; id <= 3; ++id) {
    ports.push_back(free_port());
    ASSERT_NE(ports.back(), 0);
  }
  const std::string first = "127.0.0.1:" + std::to_string(ports[0]);
  start_dynamic(1, ports[0], "--standalone", "");
  std::optional<std::pair<int, QuorumView>> leader = find_leader(ports);
  ASSERT_TRUE(leader.has_value()) << "the standalone controller did not lead";
  EXPECT_EQ(leader->first, 0);
  EXPECT_EQ(leader->second.voters, std::vector<int32_t>{1});
  start_dynamic(2, ports[1], "--controller-quorum-bootstrap-servers", first);
  start_dynamic(3, ports[2], "--controller-quorum-bootstrap-servers", first);
  for (int id = 2; id <= 3; ++id) {
    const std::string dir_id = directory_id(id);
    ASSERT_EQ(dir_id.size(), 22u) << "node " << id << " wrote no directory id";
    // Refused (REQUEST_TIMED_OUT) until the new controller has caught up.
    int code = -1;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (code != 0 && std::chrono::steady_clock::now() < deadline) {
      code = metadata_quorum({"--bootstrap-controller", first, "add-controller", "--controller-id",
                              std::to_string(id), "--controller-directory-id", dir_id, "--controller-endpoint",
                              "127.0.0.1:" + std::to_string(ports[static_cast<size_t>(id - 1)])});
      if (code != 0) std::this_thread::sleep_for(100ms);
    }
    ASSERT_EQ(code, 0) << "add-controller " << id << " failed";
  }
  std::optional<QuorumView> grown = ask(ports[0]);
  ASSERT_TRUE(grown.has_value());
  EXPECT_EQ(grown->voters, (std::vector<int32_t>{1, 2, 3}));

  // Controller 3 comes back on another port: it tells the leader
  // (UpdateRaftVoter), and the voter set records the new endpoint.
  ASSERT_EQ(kill(pids_[2], SIGKILL), 0);
  waitpid(pids_[2], nullptr, 0);
  pids_[2] = -1;
  ports[2] = free_port();
  start_dynamic(3, ports[2], "--controller-quorum-bootstrap-servers", first);
  std::optional<QuorumView> updated;
  const auto update_deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < update_deadline) {
    updated = ask(ports[0]);
    if (updated && updated->ports[3] == ports[2]) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(updated && updated->ports[3] == ports[2]) << "voter 3's new endpoint was not recorded";
  grown = updated;

  ASSERT_EQ(kill(pids_[0], SIGKILL), 0);
  std::optional<std::pair<int, QuorumView>> next = find_leader(ports, 0, grown->epoch);
  ASSERT_TRUE(next.has_value()) << "controllers 2 and 3 elected no leader after 1 was killed";
  // Its own first entry commits (with one of the two voters left).
  const uint16_t next_port = ports[static_cast<size_t>(next->first)];
  std::optional<QuorumView> committed;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    committed = ask(next_port);
    if (committed && committed->high_watermark > grown->high_watermark) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(committed && committed->high_watermark > grown->high_watermark)
      << "the new leader committed nothing past " << grown->high_watermark;
  const std::string next_address = "127.0.0.1:" + std::to_string(ports[static_cast<size_t>(next->first)]);
  EXPECT_EQ(metadata_quorum({"--bootstrap-controller", next_address, "remove-controller", "--controller-id", "1",
                             "--controller-directory-id", directory_id(1)}),
            0);
  std::optional<QuorumView> shrunk = ask(ports[static_cast<size_t>(next->first)]);
  ASSERT_TRUE(shrunk.has_value());
  EXPECT_EQ(shrunk->voters, (std::vector<int32_t>{2, 3}));
}

}  // namespace
}  // namespace brook
