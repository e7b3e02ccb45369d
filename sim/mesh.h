// sim/mesh.h
//
// Mesh traffic: a network-heavy workload. Every node listens, connects to
// every other node and streams fixed-size messages to each peer at a fixed
// interval; receivers check that each connection delivers its messages in
// order, once, intact. Used by the simulator benchmark and the determinism
// tests (it drives many network events per simulated second).
//
// The nodes must already exist in the World; start_mesh() starts their main
// tasks. MeshStats lives outside the nodes and must outlive the World's run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/time.h"
#include "sim/world.h"

namespace brook::sim {

struct MeshOptions {
  size_t message_bytes = 1024;       // >= kMeshHeaderBytes
  io::Duration interval{1'000'000};  // per peer connection: 1 ms
  uint16_t port = 7100;
};

inline constexpr size_t kMeshHeaderBytes = 16;  // sender index, sequence

struct MeshStats {
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t bytes_received = 0;
  uint64_t connections = 0;
  std::vector<std::string> violations;  // out of order, duplicates, corruption
};

// Starts the mesh on every node of `world`.
// REQUIRES: options.message_bytes >= kMeshHeaderBytes; no node is up.
void start_mesh(World& world, const MeshOptions& options, MeshStats* stats);

}  // namespace brook::sim
