// sim/mesh.cc
#include "sim/mesh.h"

#include <fmt/format.h>

#include <memory>

#include "io/assert.h"
#include "io/scope.h"

namespace brook::sim {

namespace {

constexpr size_t kReadBytesMax = 64 << 10;
constexpr size_t kViolationsMax = 100;

struct MeshNode {
  io::Context* ctx;
  MeshOptions options;
  io::Buffer pattern;
  MeshStats* stats;
  int self;
  std::vector<io::Address> addresses;  // of every node, by index
};

void put_u64(std::byte* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(v >> (8 * i));
}

uint64_t get_u64(const std::byte* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return v;
}

// Message bodies are slices of one shared pattern (as log bytes sent
// zero-copy would be); the body of message `sequence` starts at
// body_offset(sequence), so a misplaced or corrupted body is detected.
constexpr size_t kPatternPeriod = 251;  // prime: offsets cycle through every residue

io::Buffer make_pattern(size_t body_bytes) {
  io::Buffer b = io::Buffer::allocate(body_bytes + kPatternPeriod);
  std::byte* p = b.mutable_data();
  for (size_t i = 0; i < b.size(); ++i) p[i] = static_cast<std::byte>(i % kPatternPeriod);
  return b;
}

size_t body_offset(uint64_t sender, uint64_t sequence) {
  return static_cast<size_t>((sender * 31 + sequence) % kPatternPeriod);
}

io::BufferChain make_message(const io::Buffer& pattern, size_t bytes, uint64_t sender,
                             uint64_t sequence) {
  io::Buffer header = io::Buffer::allocate(kMeshHeaderBytes);
  put_u64(header.mutable_data(), sender);
  put_u64(header.mutable_data() + 8, sequence);
  io::BufferChain message(std::move(header));
  message.append(pattern.slice(body_offset(sender, sequence), bytes - kMeshHeaderBytes));
  return message;
}

void violation(MeshStats* stats, std::string what) {
  if (stats->violations.size() < kViolationsMax) stats->violations.push_back(std::move(what));
}

io::Task<void> mesh_send(const MeshNode* node, int peer) {
  io::Context& ctx = *node->ctx;
  for (;;) {
    auto conn = co_await ctx.network().connect(node->addresses[static_cast<size_t>(peer)]);
    if (!conn.ok()) {
      co_await ctx.clock().sleep_for(io::Duration(10'000'000));
      continue;
    }
    ++node->stats->connections;
    for (uint64_t sequence = 0;; ++sequence) {
      co_await ctx.clock().sleep_for(node->options.interval);
      io::BufferChain msg = make_message(node->pattern, node->options.message_bytes,
                                         static_cast<uint64_t>(node->self), sequence);
      if (!(co_await (*conn)->write_all(std::move(msg))).ok()) break;
      ++node->stats->messages_sent;
    }
  }
}

// Checks one whole message at the front of `pending` and consumes it.
void check_message(const MeshNode* node, io::BufferChain& pending, int64_t* sender,
                   uint64_t* expected) {
  const size_t bytes = node->options.message_bytes;
  std::byte header[kMeshHeaderBytes + 1];
  pending.copy_to(0, {header, kMeshHeaderBytes});
  if (bytes > kMeshHeaderBytes) pending.copy_to(kMeshHeaderBytes, {header + kMeshHeaderBytes, 1});
  const uint64_t from = get_u64(header);
  const uint64_t sequence = get_u64(header + 8);
  if (*sender < 0) *sender = static_cast<int64_t>(from);
  if (from != static_cast<uint64_t>(*sender) || sequence != *expected) {
    violation(node->stats, fmt::format("node {}: message {} from {} where {} from {} was due",
                                       node->self, sequence, from, *expected, *sender));
  }
  const auto due = static_cast<std::byte>(body_offset(from, sequence));
  if (bytes > kMeshHeaderBytes && header[kMeshHeaderBytes] != due) {
    violation(node->stats,
              fmt::format("node {}: message {} from {} corrupted", node->self, sequence, from));
  }
  *expected = sequence + 1;
  pending.consume(bytes);
  ++node->stats->messages_received;
}

io::Task<void> mesh_receive(const MeshNode* node, std::unique_ptr<io::Connection> conn) {
  io::BufferChain pending;
  int64_t sender = -1;
  uint64_t expected = 0;
  for (;;) {
    auto read = co_await conn->read_some(kReadBytesMax);
    if (!read.ok() || read->empty()) co_return;
    node->stats->bytes_received += read->size();
    pending.append(std::move(*read));
    while (pending.size() >= node->options.message_bytes) {
      check_message(node, pending, &sender, &expected);
    }
  }
}

io::Task<void> mesh_main(std::shared_ptr<const MeshNode> node) {
  io::Context& ctx = *node->ctx;
  auto listener = co_await ctx.network().listen(node->addresses[static_cast<size_t>(node->self)]);
  BROOK_ASSERT(listener.ok());
  io::TaskScope scope(ctx.executor());
  for (int peer = 0; peer < static_cast<int>(node->addresses.size()); ++peer) {
    if (peer != node->self) scope.spawn(mesh_send(node.get(), peer));
  }
  for (;;) {
    auto conn = co_await (*listener)->accept();
    if (!conn.ok()) break;
    scope.spawn(mesh_receive(node.get(), std::move(*conn)));
  }
}

}  // namespace

void start_mesh(World& world, const MeshOptions& options, MeshStats* stats) {
  BROOK_ASSERT_GE(options.message_bytes, kMeshHeaderBytes);
  std::vector<io::Address> addresses;
  for (int i = 0; i < world.node_count(); ++i)
    addresses.push_back(world.node(i).address(options.port));
  for (int i = 0; i < world.node_count(); ++i) {
    Node& n = world.node(i);
    auto node = std::make_shared<const MeshNode>(
        MeshNode{&n.context(), options, make_pattern(options.message_bytes - kMeshHeaderBytes),
                 stats, i, addresses});
    n.start([node](io::Context&) { return mesh_main(node); });
  }
}

}  // namespace brook::sim
