// sim/broker.h
//
// The "broker" scenario: one `brook server` node (a single-voter metadata
// quorum, the QuorumController and the Broker, wired as tools/server_command
// wires them) and a client node running the project's client library
// (net/client): 1-3 idempotent producers with acks=all (linger, batch
// size, codec, in-flight limit and keyed or explicit partitioning drawn per
// seed) writing to a topic of 1-4 partitions, and a consumer that seeks to
// acknowledged offsets and reads on, in fetch sessions or without. The broker's partitions sync before they acknowledge
// (FlushMode::kBeforeAck: with one replica the disk is the only copy), and
// roll segments often. Faults are drawn per seed (sim/faults.h): crashes
// with lost unsynced writes and torn tails, disk errors and corrupted reads,
// partitions, clogs, resets, clock drift and jumps; a broker whose log
// fails stops and is power-cycled. Then the faults stop, a produce must be
// acknowledged within the quiet phase, and after a final power loss the
// broker restarts and every partition is read from its start.
//
// The "replication" scenario runs the same workload against three nodes,
// each a metadata quorum voter, controller and broker, with a topic of
// three replicas and min.insync.replicas=2: the clients find partition
// leaders through Metadata and follow them across failovers. Every replica syncs
// before it acknowledges (a follower before its next fetch reports the
// records), so acks=all must survive any crash, correlated ones included.
// After the final power loss and read-back, once the followers caught up,
// every replica must hold the leader's records below its high watermark.
// Mutants (broker-mutant-flush, replication-mutant-flush) acknowledge
// before syncing; the checkers must report a lost record.
//
// In half the seeds (both scenarios) topics churn beside the checked one:
// churn-0 and churn-1 are created again and again (1-2 partitions, half of
// them with 1 MiB segments indexed once, so reads scan), written to and
// read from their start while they are deleted.
//
// Checkers (the oracle lives outside the nodes):
// - an offset is never acknowledged twice;
// - a record read back at an acknowledged offset is the acknowledged one
//   (during the run and after the final restart);
// - no acknowledged record is lost after the final power loss;
// - a consumer's offsets only grow, and no read falls out of range;
// - no value appears twice in a partition (idempotent retries);
// - liveness: after the heal a produce is acknowledged;
// - replication: replicas agree on every offset below the high watermark,
//   and every follower catches up with its leader;
// - a node's broker or metadata log stops only for a disk fault of its
//   incarnation (server_node_main);
// - churn: after the final restart no node keeps a directory of a topic
//   deleted, or of a partition it holds no replica of.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "io/context.h"
#include "io/network.h"
#include "io/time.h"
#include "net/client/admin.h"
#include "net/client/cluster.h"
#include "net/kafka/messages/fetch_request.h"
#include "net/kafka/messages/produce_request.h"
#include "net/kafka/sasl.h"
#include "io/task.h"
#include "sim/faults.h"
#include "sim/scenario.h"
#include "sim/world.h"

namespace brook::broker {
class Broker;
struct BrokerConfig;
}  // namespace brook::broker

namespace brook::storage {
class Log;
}  // namespace brook::storage

namespace brook::sim {

// One `brook server` node in the simulator, as tools/server_command wires
// it: a metadata quorum voter, the QuorumController and the Broker, every
// partition syncing before it acknowledges. Node ids are index + 1; the
// voters are all of `controllers`. Returns when the broker or the metadata
// log stops (a failed disk).
struct ServerNodeOptions {
  int index = 0;
  std::vector<io::Address> brokers;      // every node's client listener
  std::vector<io::Address> controllers;  // every node's controller listener
  // Every node's second client listener (kExternalListener, listening and
  // advertised at this address); empty: none; port 0: none on that node.
  std::vector<io::Address> external;
  // When set, the external listener is SASL_PLAINTEXT with these settings
  // (outliving the node; each node adds its own SCRAM credentials).
  const net::SaslServerConfig* external_sasl = nullptr;
  // When set, the first client listener (the inter-broker one) is
  // SASL_PLAINTEXT with these settings, and the brokers log in to each
  // other as `inter_broker_sasl` (both outliving the node).
  const net::SaslServerConfig* sasl = nullptr;
  const net::SaslCredentials* inter_broker_sasl = nullptr;
  // When set, the first client listener is SSL (SASL_SSL with `sasl`) with
  // this server context, and the brokers connect to each other with
  // `inter_broker_tls` (both outliving the node).
  const net::tls::Context* tls = nullptr;
  const net::tls::Context* inter_broker_tls = nullptr;
  int partitions = 1;                    // num.partitions
  int replication_factor = 1;            // default.replication.factor
  int min_insync = 1;                    // min.insync.replicas
  bool ack_before_flush = false;         // the mutants' flush policy
  // leader.imbalance.check.interval (zero: auto.leader.rebalance off).
  io::Duration leader_rebalance_interval{0};
  // The group coordinator: offsets.topic.num.partitions,
  // offsets.topic.replication.factor, group.initial.rebalance.delay.ms,
  // group.min.session.timeout.ms.
  int offsets_partitions = 3;
  int offsets_replication_factor = 1;
  io::Duration group_initial_delay{0};
  io::Duration group_min_session_timeout{std::chrono::seconds(1)};
  bool group_mutant_unfenced_commits = false;
  // group.consumer.session.timeout.ms and .heartbeat.interval.ms (the
  // consumer protocol).
  io::Duration group_consumer_session_timeout{std::chrono::seconds(45)};
  io::Duration group_consumer_heartbeat_interval{std::chrono::seconds(5)};
  // The transaction coordinator: transaction.state.log.num.partitions,
  // .replication.factor, .min.isr, the timed-out transaction check, and
  // the mutant's markers (every transaction committed).
  int txn_partitions = 3;
  int txn_replication_factor = 1;
  int txn_min_isr = 1;
  io::Duration txn_abort_check_interval{std::chrono::seconds(10)};
  bool txn_mutant_commit_aborts = false;
  // transaction.partition.verification.enable (off: a mutant).
  bool txn_partition_verification = true;
  // Called with the broker's configuration last, before it starts.
  std::function<void(broker::BrokerConfig&)> adjust_broker_config;
  // Called with the broker once it runs, and with nullptr when it stops.
  std::function<void(broker::Broker*)> on_broker;
  // A graceful stop, as SIGTERM gives `brook server`: the node polls this
  // flag (owned by the scenario, cleared when the node starts) and then
  // shuts down as the server does: controlled shutdown, the logs closed,
  // the metadata log's leadership resigned and its log closed; its main
  // then returns and the fault schedule restarts it. A stop whose logs fail
  // to close without a disk fault of this incarnation to explain it is
  // reported to on_violation, and so is a broker or metadata log that stops
  // (a failed log) without one, stopping or not.
  bool* stop_requested = nullptr;
  std::function<void(std::string)> on_violation;
};
io::Task<void> server_node_main(io::Context* ctx, ServerNodeOptions options);

// A replica's records in [from, to) read straight from its log, as
// (offset, value): records compacted away are simply missing.
io::Task<absl::StatusOr<std::vector<std::pair<int64_t, std::string>>>> read_log(storage::Log* log, int64_t from,
                                                                               int64_t to);

// The graceful stop requests of a scenario's server nodes, which are the
// world's nodes 0..n-1: a flag each. Outlives the World.
class GracefulStops {
 public:
  explicit GracefulStops(int nodes) : requested_(static_cast<size_t>(nodes), false) {}
  // Lets server node `index` be stopped when `faults` has graceful stops;
  // a failed stop, or a node failing with no disk fault, is reported to
  // `violation`.
  void wire(const FaultConfig& faults, int index, ServerNodeOptions& o,
            std::function<void(std::string)> violation);
  // Gives the fault schedule its hook.
  void attach(FaultSchedule& schedule);

 private:
  std::deque<bool> requested_;
};

// A server node's client and controller listener ports.
inline constexpr uint16_t kServerBrokerPort = 9092;
inline constexpr uint16_t kServerControllerPort = 9093;
// The name of a server node's second client listener
// (ServerNodeOptions::external); its first is PLAINTEXT, the inter-broker
// listener.
inline constexpr std::string_view kExternalListener = "EXTERNAL";

// Adds `count` server nodes to `world` (each node's options drawn from
// `faults` with `random`) and their listeners to `brokers` and
// `controllers`.
std::vector<Node*> add_server_nodes(World& world, const FaultConfig& faults, io::Random& random, int count,
                                    std::vector<io::Address>* brokers, std::vector<io::Address>* controllers);

// A simulated workload's client settings: these brokers, 3 s requests,
// 100 ms retry backoff, no topic auto-creation.
client::ClientOptions sim_client_options(const std::vector<io::Address>& brokers, std::string client_id);
// An acks=all Produce of one record batch to one partition, as a workload
// sends it by hand (to replay it later, or to one broker of its choice).
net::ProduceRequest one_batch_produce(std::optional<std::string> transactional_id, std::string topic,
                                      int32_t partition, io::Buffer batch, int32_t timeout_ms);
// A Fetch of one partition from `offset`, answered at once (max_wait_ms 0,
// min_bytes 1), with `max_bytes` as both its limits.
net::FetchRequest one_partition_fetch(std::string topic, int32_t partition, int64_t offset, int32_t max_bytes,
                                      int8_t isolation_level);
// Creates the topic, retrying every 200 ms; true once it exists (created
// now, or already there: made by an attempt whose answer was lost), false
// after `tries` attempts failed (tries < 0: no limit).
io::Task<bool> create_topic(io::Context* ctx, client::Cluster* cluster, client::NewTopic topic, int tries);
// Creates the topic, retrying every 200 ms until it exists.
io::Task<void> create_topic_until_done(io::Context* ctx, client::Cluster* cluster, std::string topic,
                                       int partitions, int replication_factor);
// Deletes the topic, retrying every 200 ms while `*go_on` holds (nullptr:
// until done); true once it is gone (deleted now, or unknown already).
io::Task<bool> delete_topic(io::Context* ctx, client::Cluster* cluster, std::string topic, const bool* go_on);

// Losing a server node for good (the -loss scenarios). `running` holds
// each server node's broker (null while it is down); the servers are the
// world's nodes 0..running.size()-1.
//
// A server whose loss the cluster can take now, at random among those that
// qualify (none: not now): every server up with its broker running, and
// in every broker's image each of `topics` (name, partition count) exists
// with all its partitions, none being reassigned, each keeping
// `min_insync` replicas and in-sync replicas without that server (so
// acks=all writes go on, and a leader can be elected from what is left
// without an unclean election).
std::optional<int> spare_server(World& world, const std::vector<broker::Broker*>& running, int min_insync,
                                const std::vector<std::pair<std::string, int>>& topics);
// Whether partition `p` of `topic` has the lost server (index `lost`) as
// its only in-sync replica and no leader, in the image of every running
// broker (there is one at least). With unclean leader election off (the
// default, as Kafka's) nothing brings it back: only that replica is known
// to hold every acknowledged record, so Kafka leaves the partition offline
// until an operator elects an unclean leader, and so does Brook. It comes
// about when the other replicas left the ISR (their brokers fenced, or
// behind) before the lost server's broker was fenced.
bool offline_with_lost_server(const std::vector<broker::Broker*>& running, int lost, std::string_view topic,
                              int32_t p);

absl::StatusOr<ScenarioResult> run_broker(const ScenarioOptions& options);

}  // namespace brook::sim
