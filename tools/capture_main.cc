// tools/capture_main.cc
//
// brook-capture: records the exact request frames real Kafka clients send.
//
//   brook-capture --port 19092 --out DIR [--topic golden]
//
// It is a stand-in broker just capable enough to walk a client through its
// usual conversation (ApiVersions, Metadata, Produce, Fetch, ListOffsets,
// FindCoordinator, the consumer group calls, InitProducerId), answering with
// messages built from the generated schemas. Every request frame (without
// its size prefix) is written to DIR as NNNN-<client>-<Api>-v<version>.bin;
// the files become golden test data (net/kafka/testdata/golden).
//
// This is a developer tool on plain blocking sockets, one thread per
// connection; it is not how the broker is built.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "net/kafka/apis.h"
#include "net/kafka/errors.h"
#include "net/kafka/frame.h"

namespace {

using namespace brook::net;
namespace io = brook::io;

struct State {
  std::mutex mu;
  int port = 0;
  std::string out_dir;
  std::string topic = "golden";
  int sequence = 0;
  int64_t next_offset = 0;
  io::Buffer last_records;
  int member_counter = 0;
  std::string leader_assignment_member;
  io::Buffer leader_assignment;
};

bool read_exact(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_chain(int fd, const io::BufferChain& chain) {
  for (const io::Buffer& part : chain.parts()) {
    const char* p = reinterpret_cast<const char*>(part.data());
    size_t n = part.size();
    while (n > 0) {
      const ssize_t w = ::write(fd, p, n);
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
  return true;
}

std::string safe(std::string s) {
  for (char& c : s) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  return s;
}

void record(State& st, const io::Buffer& frame, const RequestHeader& h) {
  std::lock_guard lock(st.mu);
  const ApiInfo* api = find_api(h.request_api_key);
  const std::string name = fmt::format("{}/{:04}-{}-{}-v{}.bin", st.out_dir, st.sequence++,
                                       safe(h.client_id.value_or("null")),
                                       api ? std::string(api->name) : "unknown",
                                       h.request_api_version);
  std::ofstream(name, std::ios::binary).write(reinterpret_cast<const char*>(frame.data()),
                                              static_cast<std::streamsize>(frame.size()));
}

ApiVersionsResponse api_versions() {
  std::vector<ApiSupport> all;
  for (const ApiInfo& api : all_apis()) all.push_back({api.key, api.min_version, api.max_version});
  return make_api_versions_response(all, kListenerBroker);
}

template <typename Req, typename Resp, typename F>
absl::StatusOr<io::BufferChain> answer(const RequestFrame& f, F&& fill) {
  auto req = decode_body<Req>(f);
  if (!req.ok()) return req.status();
  Resp resp;
  fill(*req, resp);
  return encode_response(resp, f.header);
}

absl::StatusOr<io::BufferChain> respond(State& st, const RequestFrame& f) {
  const int16_t v = f.header.request_api_version;
  switch (static_cast<ApiKey>(f.header.request_api_key)) {
    case ApiKey::kApiVersions:
      return answer<ApiVersionsRequest, ApiVersionsResponse>(
          f, [&](auto&, auto& r) { r = api_versions(); });
    case ApiKey::kMetadata:
      return answer<MetadataRequest, MetadataResponse>(f, [&](auto& req, auto& r) {
        auto& b = r.brokers.emplace_back();
        b.node_id = 1;
        b.host = "127.0.0.1";
        b.port = st.port;
        r.cluster_id = "brook-capture";
        r.controller_id = 1;
        std::vector<std::string> names;
        if (req.topics && !req.topics->empty()) {
          for (const auto& t : *req.topics) names.push_back(t.name.value_or(st.topic));
        } else {
          names.push_back(st.topic);
        }
        for (const std::string& name : names) {
          auto& t = r.topics.emplace_back();
          t.name = name;
          auto& p = t.partitions.emplace_back();
          p.partition_index = 0;
          p.leader_id = 1;
          p.leader_epoch = 0;
          p.replica_nodes = {1};
          p.isr_nodes = {1};
        }
      });
    case ApiKey::kProduce:
      return answer<ProduceRequest, ProduceResponse>(f, [&](auto& req, auto& r) {
        std::lock_guard lock(st.mu);
        for (const auto& t : req.topic_data) {
          auto& rt = r.responses.emplace_back();
          rt.name = t.name;
          for (const auto& p : t.partition_data) {
            auto& rp = rt.partition_responses.emplace_back();
            rp.index = p.index;
            rp.base_offset = st.next_offset;
            rp.log_start_offset = 0;
            if (p.records && p.records->size() >= 61) {
              const auto* b = reinterpret_cast<const uint8_t*>(p.records->data());
              const int32_t count = (b[57] << 24) | (b[58] << 16) | (b[59] << 8) | b[60];
              st.next_offset += count;
              st.last_records = io::Buffer::copy_of(p.records->span());
            }
          }
        }
      });
    case ApiKey::kFetch: {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return answer<FetchRequest, FetchResponse>(f, [&](auto& req, auto& r) {
        std::lock_guard lock(st.mu);
        for (const auto& t : req.topics) {
          auto& rt = r.responses.emplace_back();
          rt.topic = t.topic;
          rt.topic_id = t.topic_id;
          for (const auto& p : t.partitions) {
            auto& rp = rt.partitions.emplace_back();
            rp.partition_index = p.partition;
            rp.high_watermark = st.next_offset;
            rp.last_stable_offset = st.next_offset;
            rp.log_start_offset = 0;
            if (p.fetch_offset < st.next_offset && !st.last_records.empty()) {
              rp.records = st.last_records;
            } else {
              rp.records = io::Buffer();
            }
          }
        }
      });
    }
    case ApiKey::kListOffsets:
      return answer<ListOffsetsRequest, ListOffsetsResponse>(f, [&](auto& req, auto& r) {
        std::lock_guard lock(st.mu);
        for (const auto& t : req.topics) {
          auto& rt = r.topics.emplace_back();
          rt.name = t.name;
          for (const auto& p : t.partitions) {
            auto& rp = rt.partitions.emplace_back();
            rp.partition_index = p.partition_index;
            const int64_t offset = p.timestamp == -2 ? 0 : st.next_offset;
            if (v == 0) {
              rp.old_style_offsets = {offset};
            } else {
              rp.offset = offset;
              rp.timestamp = -1;
            }
          }
        }
      });
    case ApiKey::kFindCoordinator:
      return answer<FindCoordinatorRequest, FindCoordinatorResponse>(f, [&](auto& req, auto& r) {
        if (v < 4) {
          r.node_id = 1;
          r.host = "127.0.0.1";
          r.port = st.port;
          r.error_message = std::nullopt;
        }
        for (const std::string& key : req.coordinator_keys) {
          auto& c = r.coordinators.emplace_back();
          c.key = key;
          c.node_id = 1;
          c.host = "127.0.0.1";
          c.port = st.port;
          c.error_message = std::nullopt;
        }
      });
    case ApiKey::kJoinGroup:
      return answer<JoinGroupRequest, JoinGroupResponse>(f, [&](auto& req, auto& r) {
        std::lock_guard lock(st.mu);
        if (req.member_id.empty() && v >= 4) {
          r.error_code = code(Error::kMemberIdRequired);
          r.member_id = fmt::format("member-{}", ++st.member_counter);
          return;
        }
        const std::string member =
            req.member_id.empty() ? fmt::format("member-{}", ++st.member_counter) : req.member_id;
        r.generation_id = 1;
        r.protocol_type = req.protocol_type;
        r.protocol_name = req.protocols.empty() ? "" : req.protocols.front().name;
        r.leader = member;
        r.member_id = member;
        auto& m = r.members.emplace_back();
        m.member_id = member;
        if (!req.protocols.empty()) m.metadata = req.protocols.front().metadata;
      });
    case ApiKey::kSyncGroup:
      return answer<SyncGroupRequest, SyncGroupResponse>(f, [&](auto& req, auto& r) {
        r.protocol_type = req.protocol_type;
        r.protocol_name = req.protocol_name;
        for (const auto& a : req.assignments) {
          if (a.member_id == req.member_id) r.assignment = a.assignment;
        }
      });
    case ApiKey::kHeartbeat:
      return answer<HeartbeatRequest, HeartbeatResponse>(f, [](auto&, auto&) {});
    case ApiKey::kLeaveGroup:
      return answer<LeaveGroupRequest, LeaveGroupResponse>(f, [](auto& req, auto& r) {
        for (const auto& m : req.members) {
          auto& out = r.members.emplace_back();
          out.member_id = m.member_id;
          out.group_instance_id = m.group_instance_id;
        }
      });
    case ApiKey::kOffsetFetch:
      return answer<OffsetFetchRequest, OffsetFetchResponse>(f, [&](auto& req, auto& r) {
        if (req.topics) {
          for (const auto& t : *req.topics) {
            auto& rt = r.topics.emplace_back();
            rt.name = t.name;
            for (int32_t p : t.partition_indexes) {
              auto& rp = rt.partitions.emplace_back();
              rp.partition_index = p;
              rp.committed_offset = -1;
            }
          }
        }
        for (const auto& g : req.groups) {
          auto& rg = r.groups.emplace_back();
          rg.group_id = g.group_id;
          if (!g.topics) continue;
          for (const auto& t : *g.topics) {
            auto& rt = rg.topics.emplace_back();
            rt.name = t.name;
            for (int32_t p : t.partition_indexes) {
              auto& rp = rt.partitions.emplace_back();
              rp.partition_index = p;
              rp.committed_offset = -1;
            }
          }
        }
      });
    case ApiKey::kOffsetCommit:
      return answer<OffsetCommitRequest, OffsetCommitResponse>(f, [](auto& req, auto& r) {
        for (const auto& t : req.topics) {
          auto& rt = r.topics.emplace_back();
          rt.name = t.name;
          for (const auto& p : t.partitions) rt.partitions.emplace_back().partition_index = p.partition_index;
        }
      });
    case ApiKey::kInitProducerId:
      return answer<InitProducerIdRequest, InitProducerIdResponse>(f, [](auto&, auto& r) {
        r.producer_id = 1000;
        r.producer_epoch = 0;
      });
    default:
      return absl::UnimplementedError(
          fmt::format("no stand-in answer for API key {}", f.header.request_api_key));
  }
}

void serve(State* st, int fd) {
  for (;;) {
    uint8_t prefix[4];
    if (!read_exact(fd, prefix, 4)) break;
    const uint32_t size = (uint32_t{prefix[0]} << 24) | (uint32_t{prefix[1]} << 16) |
                          (uint32_t{prefix[2]} << 8) | prefix[3];
    if (size > 64 * 1024 * 1024) break;
    io::Buffer frame = io::Buffer::allocate(size);
    if (!read_exact(fd, frame.mutable_data(), size)) break;
    auto parsed = parse_request(frame);
    if (!parsed.ok()) {
      fmt::print(stderr, "bad request: {}\n", std::string(parsed.status().message()));
      break;
    }
    record(*st, frame, parsed->frame.header);
    absl::StatusOr<io::BufferChain> out =
        parsed->problem == RequestProblem::kUnsupportedApiVersionsVersion
            ? encode_api_versions_fallback(api_versions(), parsed->frame.header)
            : respond(*st, parsed->frame);
    if (!out.ok()) {
      fmt::print(stderr, "{}: {}\n", to_string(parsed->frame.header),
                 std::string(out.status().message()));
      break;
    }
    if (!write_chain(fd, *out)) break;
  }
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  // A client that hangs up mid-response must not end the process.
  std::signal(SIGPIPE, SIG_IGN);
  State st;
  st.port = 19092;
  st.out_dir = ".";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--port") {
      st.port = std::atoi(argv[i + 1]);
    } else if (flag == "--out") {
      st.out_dir = argv[i + 1];
    } else if (flag == "--topic") {
      st.topic = argv[i + 1];
    } else {
      fmt::print(stderr, "usage: brook-capture --port N --out DIR [--topic NAME]\n");
      return 2;
    }
  }
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(st.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener, 64) != 0) {
    std::perror("brook-capture: listen");
    return 1;
  }
  fmt::print("brook-capture listening on 127.0.0.1:{}, writing to {}\n", st.port, st.out_dir);
  std::fflush(stdout);
  for (;;) {
    const int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) continue;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::thread(serve, &st, fd).detach();
  }
}
