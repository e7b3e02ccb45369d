// coordinators/txn/transaction_coordinator.cc
#include "coordinators/txn/transaction_coordinator.h"

#include <fmt/format.h>

#include <algorithm>

#include "io/assert.h"
#include "io/when.h"
#include "net/kafka/messages/transaction_log_key.h"
#include "net/kafka/messages/transaction_log_value.h"
#include "net/kafka/versioned.h"

namespace brook::txn {

namespace {

using net::Error;
using net::code;

constexpr int16_t kKeyVersion = 0;
constexpr int16_t kValueVersion = 0;
// Kafka's TransactionMetadata.isEpochExhausted: an epoch this high cannot
// be bumped twice more (once to fence, once for the retry).
constexpr int16_t kEpochExhausted = INT16_MAX - 1;

io::Buffer txn_key(const std::string& id) {
  net::TransactionLogKey k;
  k.transactional_id = id;
  absl::StatusOr<io::Buffer> out = net::encode_versioned(k, kKeyVersion);
  BROOK_ASSERT(out.ok());
  return *std::move(out);
}

// Kafka's mapping of a failed __transaction_state write.
Error write_error(Error e) {
  switch (e) {
    case Error::kUnknownTopicOrPartition:
    case Error::kNotEnoughReplicas:
    case Error::kNotEnoughReplicasAfterAppend:
    case Error::kRequestTimedOut:
      return Error::kCoordinatorNotAvailable;
    case Error::kNotLeaderOrFollower:
    case Error::kKafkaStorageError:
      return Error::kNotCoordinator;
    case Error::kMessageTooLarge:
    case Error::kRecordListTooLarge:
      return Error::kUnknownServerError;
    default:
      return e;
  }
}

// Clients before these versions know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH.
Error fenced_for(Error e, int16_t version, int16_t first_knowing) {
  return e == Error::kProducerFenced && version < first_knowing ? Error::kInvalidProducerEpoch : e;
}

// The epoch an abort that fences the producer is written under (Kafka's
// prepareFenceProducerEpoch: one more, unless none is left).
int16_t fenced_epoch_of(int16_t epoch) { return epoch >= INT16_MAX ? epoch : static_cast<int16_t>(epoch + 1); }

bool is_prepared(TxnState s) { return s == TxnState::kPrepareCommit || s == TxnState::kPrepareAbort; }
bool is_complete(TxnState s) { return s == TxnState::kCompleteCommit || s == TxnState::kCompleteAbort; }

}  // namespace

std::string_view txn_state_name(TxnState state) {
  switch (state) {
    case TxnState::kEmpty:
      return "Empty";
    case TxnState::kOngoing:
      return "Ongoing";
    case TxnState::kPrepareCommit:
      return "PrepareCommit";
    case TxnState::kPrepareAbort:
      return "PrepareAbort";
    case TxnState::kCompleteCommit:
      return "CompleteCommit";
    case TxnState::kCompleteAbort:
      return "CompleteAbort";
    case TxnState::kDead:
      return "Dead";
    case TxnState::kPrepareEpochFence:
      return "PrepareEpochFence";
  }
  return "Unknown";
}

TransactionCoordinator::TransactionCoordinator(io::Context& ctx, TransactionHost& host,
                                               TransactionCoordinatorConfig config)
    : ctx_(&ctx), host_(&host), config_(config) {}

TransactionCoordinator::~TransactionCoordinator() = default;

TransactionCoordinator::Transition TransactionCoordinator::current(const Txn& t) {
  return Transition{t.producer_id, t.producer_epoch, t.last_producer_id, t.last_producer_epoch, t.timeout_ms,
                    t.state,       t.partitions,     t.start_ms,         t.update_ms};
}

int64_t TransactionCoordinator::now_ms() const { return io::to_ms(ctx_->clock().wall_now()); }

Error TransactionCoordinator::check(const std::string& transactional_id) const {
  return shards_.check(partition_for(transactional_id));
}

TransactionCoordinator::Txn* TransactionCoordinator::find(const std::string& transactional_id) {
  auto it = txns_.find(transactional_id);
  return it == txns_.end() ? nullptr : it->second.get();
}

const TransactionCoordinator::Txn* TransactionCoordinator::find(const std::string& transactional_id) const {
  auto it = txns_.find(transactional_id);
  return it == txns_.end() ? nullptr : it->second.get();
}

std::optional<TransactionCoordinator::Snapshot> TransactionCoordinator::snapshot(
    const std::string& transactional_id) const {
  const Txn* t = find(transactional_id);
  if (t == nullptr) return std::nullopt;
  return Snapshot{t->producer_id, t->producer_epoch, t->state, t->partitions, t->timeout_ms};
}

// --- loading ----------------------------------------------------------------------

void TransactionCoordinator::begin_load(int32_t partition, int32_t epoch) {
  shards_.begin_load(partition, epoch);
  std::erase_if(txns_, [&](const auto& e) { return e.second->partition == partition; });
}

absl::Status TransactionCoordinator::replay(int32_t partition, int64_t offset, const std::optional<io::Buffer>& key,
                                            const std::optional<io::Buffer>& value) {
  (void)offset;
  if (!key.has_value()) {
    return absl::DataLossError(fmt::format("{}-{}: a record without a key", kTransactionStateTopic, partition));
  }
  absl::StatusOr<net::TransactionLogKey> k = net::decode_versioned<net::TransactionLogKey>(*key);
  if (!k.ok()) return k.status();
  if (!value.has_value()) {
    txns_.erase(k->transactional_id);
    return absl::OkStatus();
  }
  absl::StatusOr<net::TransactionLogValue> v = net::decode_versioned<net::TransactionLogValue>(*value);
  if (!v.ok()) return v.status();
  if (v->transaction_status < 0 || v->transaction_status > static_cast<int8_t>(TxnState::kPrepareEpochFence)) {
    return absl::DataLossError(fmt::format("{}-{}: transaction {} has unknown state {}", kTransactionStateTopic,
                                           partition, k->transactional_id, v->transaction_status));
  }
  const auto state = static_cast<TxnState>(v->transaction_status);
  if (state == TxnState::kDead) {
    txns_.erase(k->transactional_id);
    return absl::OkStatus();
  }
  std::unique_ptr<Txn>& slot = txns_[k->transactional_id];
  if (slot == nullptr) slot = std::make_unique<Txn>();
  Txn& t = *slot;
  t.id = k->transactional_id;
  t.partition = partition;
  t.producer_id = v->producer_id;
  t.producer_epoch = v->producer_epoch;
  t.last_producer_id = v->previous_producer_id;
  t.last_producer_epoch = -1;
  t.timeout_ms = v->transaction_timeout_ms;
  // A fence never reaches the log on its own (it is written as the
  // PrepareAbort that follows it); read one as that.
  t.state = state == TxnState::kPrepareEpochFence ? TxnState::kPrepareAbort : state;
  t.partitions.clear();
  if (v->transaction_partitions.has_value()) {
    for (const auto& tp : *v->transaction_partitions) {
      for (int32_t p : tp.partition_ids) t.partitions.emplace(tp.topic, p);
    }
  }
  t.start_ms = v->transaction_start_timestamp_ms;
  t.update_ms = v->transaction_last_update_timestamp_ms;
  t.deadline = ctx_->clock().now() + std::chrono::milliseconds(t.timeout_ms);
  t.pending = false;
  // A load reads to the log end, past what the replicas have confirmed: a
  // leader that restarted in its epoch may hold records that the next
  // leader will not. Nothing loaded is acted on before a write of the
  // transaction succeeds (which confirms everything before it).
  t.unconfirmed = true;
  return absl::OkStatus();
}

void TransactionCoordinator::finish_load(int32_t partition, int32_t epoch) {
  if (!shards_.finish_load(partition, epoch)) return;
  // Transactions decided but not completed by the previous coordinator.
  for (const auto& [id, t] : txns_) {
    if (t->partition == partition && is_prepared(t->state)) to_complete_.push_back(id);
  }
  wake_.notify();
}

void TransactionCoordinator::unload(int32_t partition) {
  shards_.unload(partition);
  std::erase_if(txns_, [&](const auto& e) { return e.second->partition == partition; });
}

// --- writes -----------------------------------------------------------------------

io::Task<Error> TransactionCoordinator::write(std::string transactional_id, std::optional<Transition> to) {
  Txn* t = find(transactional_id);
  BROOK_ASSERT(t != nullptr && !t->pending);
  const int32_t partition = t->partition;
  const std::optional<int32_t> epoch = shards_.epoch(partition);
  if (!epoch.has_value() || !shards_.serving(partition, *epoch)) co_return Error::kNotCoordinator;
  std::vector<runtime::Record> records;
  if (to.has_value()) {
    net::TransactionLogValue v;
    v.producer_id = to->producer_id;
    v.producer_epoch = to->producer_epoch;
    v.transaction_timeout_ms = to->timeout_ms;
    v.transaction_status = static_cast<int8_t>(to->state);
    std::vector<net::TransactionLogValue::PartitionsSchema> topics;
    for (const auto& [topic, p] : to->partitions) {
      if (topics.empty() || topics.back().topic != topic) topics.emplace_back().topic = topic;
      topics.back().partition_ids.push_back(p);
    }
    v.transaction_partitions = std::move(topics);
    v.transaction_last_update_timestamp_ms = to->update_ms;
    v.transaction_start_timestamp_ms = to->start_ms;
    absl::StatusOr<io::Buffer> value = net::encode_versioned(v, kValueVersion);
    BROOK_ASSERT(value.ok());
    records.push_back(runtime::Record{txn_key(transactional_id), *std::move(value)});
  } else {
    records.push_back(runtime::Record{txn_key(transactional_id), std::nullopt});
  }
  t->pending = true;
  // A write abandoned midway (its request's connection closed) must not
  // leave the transaction pending for good; what it wrote is unknown.
  struct Abandoned {
    TransactionCoordinator* c;
    const std::string* id;
    bool finished = false;
    ~Abandoned() {
      if (finished) return;
      if (Txn* txn = c->find(*id)) {
        txn->pending = false;
        txn->unconfirmed = true;
      }
    }
  } abandoned{this, &transactional_id};
  const runtime::RecordLog::Written written = co_await host_->write(partition, *epoch, std::move(records));
  abandoned.finished = true;
  // The shard may have moved meanwhile: its state went with it.
  if (!shards_.serving(partition, *epoch)) co_return Error::kNotCoordinator;
  t = find(transactional_id);
  if (t == nullptr) co_return Error::kNotCoordinator;
  t->pending = false;
  // A write that failed after its append may still commit (a timeout, too
  // few replicas after the append, an append cut short): while this broker
  // leads the partition its log only grows, so the record will count.
  // The state it wrote is taken, but marked unconfirmed: nothing is done on
  // the strength of it (markers, answers from memory) before a later write
  // of the transaction succeeds. Only an error that says nothing was
  // appended leaves the state as it was.
  const bool maybe_appended = written.error == Error::kRequestTimedOut ||
                              written.error == Error::kNotEnoughReplicasAfterAppend ||
                              written.error == Error::kNotCoordinator;
  if (written.error != Error::kNone) {
    ctx_->log().warn("transaction coordinator: writing the state of {} failed: {}", transactional_id,
                     net::error_name(code(written.error)));
    if (!maybe_appended) co_return write_error(written.error);
  }
  if (!to.has_value()) {
    txns_.erase(transactional_id);
    co_return write_error(written.error);
  }
  const bool was_prepared = is_prepared(t->state);
  t->producer_id = to->producer_id;
  t->producer_epoch = to->producer_epoch;
  t->last_producer_id = to->last_producer_id;
  t->last_producer_epoch = to->last_producer_epoch;
  t->timeout_ms = to->timeout_ms;
  if (to->state == TxnState::kOngoing && t->state != TxnState::kOngoing) {
    t->deadline = ctx_->clock().now() + std::chrono::milliseconds(to->timeout_ms);
  }
  t->state = to->state;
  t->partitions = std::move(to->partitions);
  t->start_ms = to->start_ms;
  t->update_ms = to->update_ms;
  t->unconfirmed = written.error != Error::kNone;
  // A decision that may be in the log is carried out (once confirmed); a
  // rewrite of one already taken has its completion under way.
  if (t->unconfirmed && is_prepared(t->state) && !was_prepared) schedule_complete(transactional_id);
  co_return write_error(written.error);
}

io::Task<Error> TransactionCoordinator::confirm(std::string transactional_id) {
  const Txn* t = find(transactional_id);
  if (t == nullptr) co_return Error::kNotCoordinator;
  if (t->pending) co_return Error::kConcurrentTransactions;
  co_return co_await write(transactional_id, current(*t));
}

void TransactionCoordinator::schedule_complete(const std::string& transactional_id) {
  if (scope_ != nullptr) {
    scope_->spawn(complete(transactional_id));
  } else {
    to_complete_.push_back(transactional_id);
  }
}

io::Task<Error> TransactionCoordinator::prepare_end(std::string transactional_id, bool commit, int16_t epoch) {
  Txn* t = find(transactional_id);
  BROOK_ASSERT(t != nullptr);
  Transition to = current(*t);
  to.producer_epoch = epoch;
  to.state = commit ? TxnState::kPrepareCommit : TxnState::kPrepareAbort;
  to.update_ms = now_ms();
  const Error e = co_await write(transactional_id, std::move(to));
  if (e == Error::kNone) schedule_complete(transactional_id);
  co_return e;
}

io::Task<void> TransactionCoordinator::complete(std::string transactional_id) {
  Txn* t = find(transactional_id);
  if (t == nullptr || !is_prepared(t->state)) co_return;
  const int32_t partition = t->partition;
  const std::optional<int32_t> epoch = shards_.epoch(partition);
  if (!epoch.has_value() || !shards_.serving(partition, *epoch)) co_return;
  const int32_t shard_epoch = *epoch;
  auto still = [this, partition, shard_epoch] { return shards_.serving(partition, shard_epoch); };
  TxnMarkers markers;
  markers.producer_id = t->producer_id;
  markers.producer_epoch = t->producer_epoch;
  markers.commit = t->state == TxnState::kPrepareCommit || config_.mutant_commit_aborts;
  markers.coordinator_epoch = shard_epoch;
  markers.partitions = t->partitions;
  const TxnState prepared = t->state;
  // The decision must be in the log before any partition hears of it: a
  // Prepare record whose write failed is written again first.
  while (true) {
    if (!still()) co_return;
    t = find(transactional_id);
    if (t == nullptr || t->state != prepared || t->producer_epoch != markers.producer_epoch) co_return;
    if (!t->unconfirmed) break;
    if (!t->pending && co_await write(transactional_id, current(*t)) == Error::kNone) break;
    co_await ctx_->clock().sleep_for(config_.marker_retry_backoff);
  }
  markers.partitions = t->partitions;
  const Error marked = co_await host_->write_markers(markers, still);
  if (!still()) co_return;  // the next coordinator completes it
  if (marked != Error::kNone) {
    // A newer coordinator wrote markers for this producer: it owns the
    // transaction now.
    ctx_->log().warn("transaction coordinator: markers of {} refused: {}", transactional_id,
                     net::error_name(code(marked)));
    co_return;
  }
  while (still()) {
    t = find(transactional_id);
    if (t == nullptr || t->state != prepared || t->producer_epoch != markers.producer_epoch) co_return;
    if (!t->pending) {
      Transition to = current(*t);
      to.state = prepared == TxnState::kPrepareCommit ? TxnState::kCompleteCommit : TxnState::kCompleteAbort;
      to.partitions.clear();
      to.update_ms = now_ms();
      const Error e = co_await write(transactional_id, std::move(to));
      if (e == Error::kNone) co_return;
    }
    co_await ctx_->clock().sleep_for(config_.marker_retry_backoff);
  }
}

// --- InitProducerId ---------------------------------------------------------------

io::Task<net::InitProducerIdResponse> TransactionCoordinator::init_producer_id(net::InitProducerIdRequest request,
                                                                               int16_t version) {
  net::InitProducerIdResponse out;
  out.producer_id = -1;
  out.producer_epoch = -1;
  auto fail = [&](Error e) {
    out.error_code = code(fenced_for(e, version, 4));
    return out;
  };
  const std::string id = request.transactional_id.value_or("");
  if (id.empty()) co_return fail(Error::kInvalidRequest);
  if (request.transaction_timeout_ms <= 0 ||
      request.transaction_timeout_ms > std::chrono::duration_cast<std::chrono::milliseconds>(config_.max_timeout).count()) {
    co_return fail(Error::kInvalidTransactionTimeout);
  }
  if (const Error e = check(id); e != Error::kNone) co_return fail(e);
  if (find(id) == nullptr) {
    absl::StatusOr<int64_t> pid = co_await host_->allocate_producer_id();
    if (!pid.ok()) {
      ctx_->log().warn("transaction coordinator: no producer id for {}: {}", id, pid.status().ToString());
      co_return fail(Error::kCoordinatorNotAvailable);
    }
    if (const Error e = check(id); e != Error::kNone) co_return fail(e);
    if (find(id) == nullptr) {
      // Not written until its first epoch is (Kafka's putTransactionStateIfNotExists).
      auto created = std::make_unique<Txn>();
      created->id = id;
      created->partition = partition_for(id);
      created->producer_id = *pid;
      created->timeout_ms = request.transaction_timeout_ms;
      created->update_ms = now_ms();
      txns_[id] = std::move(created);
    }
  }
  Txn* t = find(id);
  if (t->pending) co_return fail(Error::kConcurrentTransactions);
  // KIP-360: a producer that names its current id and epoch (v3+) bumps its
  // epoch without being fenced; one naming the previous ones retries a bump
  // whose answer it lost.
  const bool expected = request.producer_id != -1;
  if (expected && !(t->producer_epoch == -1 || request.producer_id == t->producer_id ||
                    (request.producer_id == t->last_producer_id && request.producer_epoch >= kEpochExhausted))) {
    co_return fail(Error::kProducerFenced);
  }
  const int64_t now = now_ms();
  switch (t->state) {
    case TxnState::kPrepareCommit:
    case TxnState::kPrepareAbort:
    case TxnState::kPrepareEpochFence:
    case TxnState::kDead:
      co_return fail(Error::kConcurrentTransactions);
    case TxnState::kOngoing: {
      // Abort it first, under a bumped epoch that fences its producer; the
      // caller retries and bumps again once the abort is complete.
      const Error e = co_await prepare_end(id, /*commit=*/false, fenced_epoch_of(t->producer_epoch));
      co_return fail(e == Error::kNone ? Error::kConcurrentTransactions : e);
    }
    case TxnState::kEmpty:
    case TxnState::kCompleteCommit:
    case TxnState::kCompleteAbort:
      break;
  }
  Transition to = current(*t);
  to.timeout_ms = request.transaction_timeout_ms;
  to.state = TxnState::kEmpty;
  to.partitions.clear();
  to.start_ms = -1;
  to.update_ms = now;
  if (t->producer_epoch >= kEpochExhausted) {
    absl::StatusOr<int64_t> pid = co_await host_->allocate_producer_id();
    if (!pid.ok()) co_return fail(Error::kCoordinatorNotAvailable);
    t = find(id);
    if (t == nullptr) co_return fail(Error::kNotCoordinator);
    if (t->pending) co_return fail(Error::kConcurrentTransactions);
    to.last_producer_id = t->producer_id;
    to.last_producer_epoch = expected ? t->producer_epoch : int16_t{-1};
    to.producer_id = *pid;
    to.producer_epoch = 0;
  } else if (!expected || t->producer_epoch == -1 || request.producer_epoch == t->producer_epoch) {
    to.last_producer_epoch = expected ? t->producer_epoch : int16_t{-1};
    to.producer_epoch = static_cast<int16_t>(t->producer_epoch + 1);
  } else if (request.producer_epoch == t->last_producer_epoch) {
    // A retry of the bump that made the current epoch: answer it again.
    out.producer_id = t->producer_id;
    out.producer_epoch = t->producer_epoch;
    co_return out;
  } else {
    co_return fail(Error::kProducerFenced);
  }
  const Error e = co_await write(id, to);
  if (e != Error::kNone) co_return fail(e);
  out.producer_id = to.producer_id;
  out.producer_epoch = to.producer_epoch;
  co_return out;
}

// --- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------

io::Task<Error> TransactionCoordinator::add(std::string transactional_id, int64_t producer_id, int16_t producer_epoch,
                                            std::set<TopicPartition> partitions) {
  if (transactional_id.empty()) co_return Error::kInvalidRequest;
  if (const Error e = check(transactional_id); e != Error::kNone) co_return e;
  Txn* t = find(transactional_id);
  if (t == nullptr || t->producer_id != producer_id) co_return Error::kInvalidProducerIdMapping;
  if (t->producer_epoch != producer_epoch) co_return Error::kProducerFenced;
  if (t->pending || is_prepared(t->state)) co_return Error::kConcurrentTransactions;
  if (t->state == TxnState::kDead || t->state == TxnState::kPrepareEpochFence) co_return Error::kInvalidTxnState;
  // Partitions the transaction holds already are written again all the
  // same: see confirm().
  Transition to = current(*t);
  const int64_t now = now_ms();
  if (t->state != TxnState::kOngoing) {
    to.start_ms = now;
    to.partitions.clear();
  }
  to.state = TxnState::kOngoing;
  to.partitions.insert(partitions.begin(), partitions.end());
  to.update_ms = now;
  co_return co_await write(transactional_id, std::move(to));
}

io::Task<Error> TransactionCoordinator::verify(std::string transactional_id, int64_t producer_id,
                                               int16_t producer_epoch) {
  if (transactional_id.empty()) co_return Error::kInvalidRequest;
  // At most two rounds: a state taken from a load or a failed write is
  // written again (confirmed) before anything is verified against it.
  for (int round = 0;; ++round) {
    if (const Error e = check(transactional_id); e != Error::kNone) co_return e;
    Txn* t = find(transactional_id);
    if (t == nullptr || t->producer_id != producer_id) co_return Error::kInvalidProducerIdMapping;
    if (t->producer_epoch != producer_epoch) co_return Error::kProducerFenced;
    if (t->pending || is_prepared(t->state)) co_return Error::kConcurrentTransactions;
    if (t->state != TxnState::kOngoing) co_return Error::kInvalidTxnState;
    if (!t->unconfirmed) co_return Error::kNone;
    if (round > 0) co_return Error::kConcurrentTransactions;
    if (const Error e = co_await write(transactional_id, current(*t)); e != Error::kNone) co_return e;
  }
}

io::Task<std::vector<net::AddPartitionsToTxnResponse::AddPartitionsToTxnTopicResult>>
TransactionCoordinator::add_or_verify(std::string transactional_id, int64_t producer_id, int16_t producer_epoch,
                                      std::vector<net::AddPartitionsToTxnRequest::AddPartitionsToTxnTopic> topics,
                                      bool verify_only, int16_t version) {
  std::set<TopicPartition> partitions;
  std::set<TopicPartition> unknown;
  for (const auto& topic : topics) {
    for (int32_t p : topic.partitions) {
      partitions.emplace(topic.name, p);
      if (!verify_only && !host_->partition_exists(topic.name, p)) unknown.emplace(topic.name, p);
    }
  }
  Error error = Error::kNone;
  if (verify_only) {
    if (!partitions.empty()) error = co_await verify(transactional_id, producer_id, producer_epoch);
  } else if (unknown.empty() && !partitions.empty()) {
    error = co_await add(transactional_id, producer_id, producer_epoch, partitions);
  }
  error = fenced_for(error, version, 2);
  // A verified transaction: each partition must be one it added.
  const Txn* t = verify_only && error == Error::kNone ? find(transactional_id) : nullptr;
  std::vector<net::AddPartitionsToTxnResponse::AddPartitionsToTxnTopicResult> out;
  for (const auto& [topic, p] : partitions) {
    if (out.empty() || out.back().name != topic) out.emplace_back().name = topic;
    auto& r = out.back().results_by_partition.emplace_back();
    r.partition_index = p;
    if (t != nullptr) {
      r.partition_error_code = code(t->partitions.contains(TopicPartition{topic, p}) ? Error::kNone
                                                                                   : Error::kInvalidTxnState);
      continue;
    }
    // Kafka's answer when some partitions do not exist: those are unknown
    // and the rest were not attempted.
    r.partition_error_code = code(unknown.empty()                        ? error
                                  : unknown.contains(TopicPartition{topic, p}) ? Error::kUnknownTopicOrPartition
                                                                           : Error::kOperationNotAttempted);
  }
  co_return out;
}

io::Task<net::AddPartitionsToTxnResponse> TransactionCoordinator::add_partitions(net::AddPartitionsToTxnRequest request,
                                                                                 int16_t version) {
  net::AddPartitionsToTxnResponse out;
  if (version <= 3) {
    out.results_by_topic_v3_and_below =
        co_await add_or_verify(std::move(request.v3_and_below_transactional_id), request.v3_and_below_producer_id,
                               request.v3_and_below_producer_epoch, std::move(request.v3_and_below_topics),
                               /*verify_only=*/false, version);
    co_return out;
  }
  // v4+ (brokers): several transactions, each added or only verified.
  for (auto& txn : request.transactions) {
    auto& result = out.results_by_transaction.emplace_back();
    result.transactional_id = txn.transactional_id;
    result.topic_results = co_await add_or_verify(std::move(txn.transactional_id), txn.producer_id,
                                                  txn.producer_epoch, std::move(txn.topics), txn.verify_only, version);
  }
  co_return out;
}

io::Task<net::AddOffsetsToTxnResponse> TransactionCoordinator::add_offsets(net::AddOffsetsToTxnRequest request,
                                                                           int16_t version) {
  net::AddOffsetsToTxnResponse out;
  if (request.group_id.empty()) {
    out.error_code = code(Error::kInvalidGroupId);
    co_return out;
  }
  std::set<TopicPartition> partitions{
      {"__consumer_offsets", runtime::partition_for_key(request.group_id, config_.offsets_topic_partitions)}};
  const Error e =
      co_await add(request.transactional_id, request.producer_id, request.producer_epoch, std::move(partitions));
  out.error_code = code(fenced_for(e, version, 2));
  co_return out;
}

// --- EndTxn -----------------------------------------------------------------------

io::Task<net::EndTxnResponse> TransactionCoordinator::end_txn(net::EndTxnRequest request, int16_t version) {
  net::EndTxnResponse out;
  const std::string& id = request.transactional_id;
  auto answer = [&](Error e) {
    out.error_code = code(fenced_for(e, version, 2));
    if (e == Error::kInvalidTxnState) {
      const Txn* t = find(id);
      ctx_->log().info("transaction coordinator: EndTxn({}) of {} (producer {} epoch {}) in state {}: {}",
                       request.committed ? "commit" : "abort", id, request.producer_id, request.producer_epoch,
                       t != nullptr ? txn_state_name(t->state) : std::string_view("unknown"),
                       net::error_name(out.error_code));
    }
    return out;
  };
  if (id.empty()) co_return answer(Error::kInvalidRequest);
  if (const Error e = check(id); e != Error::kNone) co_return answer(e);
  Txn* t = find(id);
  if (t == nullptr || t->producer_id != request.producer_id) co_return answer(Error::kInvalidProducerIdMapping);
  if (t->producer_epoch != request.producer_epoch) co_return answer(Error::kProducerFenced);
  if (t->pending) co_return answer(Error::kConcurrentTransactions);
  const bool commit = request.committed;
  switch (t->state) {
    case TxnState::kOngoing: {
      const Error e = co_await prepare_end(id, commit, t->producer_epoch);
      co_return answer(e);
    }
    case TxnState::kCompleteCommit:
      co_return answer(commit ? co_await confirm(id) : Error::kInvalidTxnState);
    case TxnState::kCompleteAbort:
      co_return answer(commit ? Error::kInvalidTxnState : co_await confirm(id));
    case TxnState::kPrepareCommit:
      co_return answer(commit ? Error::kConcurrentTransactions : Error::kInvalidTxnState);
    case TxnState::kPrepareAbort:
      co_return answer(commit ? Error::kInvalidTxnState : Error::kConcurrentTransactions);
    case TxnState::kEmpty:
    case TxnState::kDead:
    case TxnState::kPrepareEpochFence:
      co_return answer(Error::kInvalidTxnState);
  }
  co_return answer(Error::kInvalidTxnState);
}

// --- DescribeTransactions / ListTransactions --------------------------------------

net::DescribeTransactionsResponse TransactionCoordinator::describe(
    const net::DescribeTransactionsRequest& request) const {
  net::DescribeTransactionsResponse out;
  for (const std::string& id : request.transactional_ids) {
    auto& s = out.transaction_states.emplace_back();
    s.transactional_id = id;
    s.producer_id = -1;
    s.producer_epoch = -1;
    s.transaction_start_time_ms = -1;
    if (id.empty()) {
      s.error_code = code(Error::kTransactionalIdNotFound);
      continue;
    }
    if (const Error e = check(id); e != Error::kNone) {
      s.error_code = code(e);
      continue;
    }
    const Txn* t = find(id);
    if (t == nullptr || t->producer_epoch == -1) {
      s.error_code = code(Error::kTransactionalIdNotFound);
      continue;
    }
    s.transaction_state = std::string(txn_state_name(t->state));
    s.transaction_timeout_ms = t->timeout_ms;
    s.transaction_start_time_ms = t->start_ms;
    s.producer_id = t->producer_id;
    s.producer_epoch = t->producer_epoch;
    for (const auto& [topic, p] : t->partitions) {
      if (s.topics.empty() || s.topics.back().topic != topic) s.topics.emplace_back().topic = topic;
      s.topics.back().partitions.push_back(p);
    }
  }
  return out;
}

net::ListTransactionsResponse TransactionCoordinator::list(const net::ListTransactionsRequest& request) const {
  net::ListTransactionsResponse out;
  std::set<TxnState> states;
  for (const std::string& name : request.state_filters) {
    bool known = false;
    for (int8_t s = 0; s <= static_cast<int8_t>(TxnState::kPrepareEpochFence); ++s) {
      if (txn_state_name(static_cast<TxnState>(s)) == name) {
        states.insert(static_cast<TxnState>(s));
        known = true;
      }
    }
    if (!known) out.unknown_state_filters.push_back(name);
  }
  for (int32_t p : shards_.partitions()) {
    if (shards_.loading(p)) {
      out.error_code = code(Error::kCoordinatorLoadInProgress);
      return out;
    }
  }
  const std::set<int64_t> pids(request.producer_id_filters.begin(), request.producer_id_filters.end());
  const int64_t now = now_ms();
  for (const auto& [id, t] : txns_) {
    if (t->producer_epoch == -1) continue;
    if (!request.state_filters.empty() && !states.contains(t->state)) continue;
    if (!pids.empty() && !pids.contains(t->producer_id)) continue;
    if (request.duration_filter >= 0 && (t->state != TxnState::kOngoing || now - t->start_ms <= request.duration_filter)) {
      continue;
    }
    auto& s = out.transaction_states.emplace_back();
    s.transactional_id = id;
    s.producer_id = t->producer_id;
    s.transaction_state = std::string(txn_state_name(t->state));
  }
  return out;
}

// --- timers -----------------------------------------------------------------------

io::Task<void> TransactionCoordinator::fence_and_abort(std::string transactional_id) {
  Txn* t = find(transactional_id);
  if (t == nullptr || t->pending || t->state != TxnState::kOngoing) co_return;
  ctx_->log().info("transaction coordinator: aborting {} (producer {} epoch {}): open longer than its timeout of {} ms",
                   transactional_id, t->producer_id, t->producer_epoch, t->timeout_ms);
  (void)co_await prepare_end(transactional_id, /*commit=*/false, fenced_epoch_of(t->producer_epoch));
}

// A transaction times out by the calendar time it began at (as Kafka's
// does), or at the latest a timeout after this coordinator saw it begin or
// loaded it: the wall clocks of the brokers it moved between may disagree.
void TransactionCoordinator::abort_timed_out() {
  const int64_t now = now_ms();
  for (const auto& [id, t] : txns_) {
    if (t->state != TxnState::kOngoing || t->pending || shards_.loading(t->partition)) continue;
    if (t->start_ms + t->timeout_ms < now || ctx_->clock().now() >= t->deadline) scope_->spawn(fence_and_abort(id));
  }
}

io::Task<void> TransactionCoordinator::expire(std::string transactional_id) {
  Txn* t = find(transactional_id);
  if (t == nullptr || t->pending) co_return;
  (void)co_await write(transactional_id, std::nullopt);
}

void TransactionCoordinator::expire_ids() {
  const int64_t now = now_ms();
  const int64_t limit = std::chrono::duration_cast<std::chrono::milliseconds>(config_.id_expiration).count();
  for (const auto& [id, t] : txns_) {
    if (t->pending || shards_.loading(t->partition)) continue;
    if (t->state != TxnState::kEmpty && !is_complete(t->state)) continue;
    if (t->producer_epoch == -1) continue;
    if (t->update_ms + limit <= now) scope_->spawn(expire(id));
  }
}

io::Task<void> TransactionCoordinator::run() {
  io::TaskScope scope(co_await io::this_executor());
  scope_ = &scope;
  struct Unset {
    io::TaskScope** slot;
    ~Unset() { *slot = nullptr; }
  } unset{&scope_};
  io::Instant next_abort = ctx_->clock().now() + config_.abort_check_interval;
  io::Instant next_expire = ctx_->clock().now() + config_.expire_check_interval;
  while (true) {
    const uint64_t seen = wake_.seen();
    for (std::string& id : std::exchange(to_complete_, {})) scope.spawn(complete(std::move(id)));
    const io::Instant now = ctx_->clock().now();
    if (now >= next_abort) {
      abort_timed_out();
      next_abort = now + config_.abort_check_interval;
    }
    if (now >= next_expire) {
      expire_ids();
      next_expire = now + config_.expire_check_interval;
    }
    (void)co_await io::with_deadline(ctx_->clock(), std::min(next_abort, next_expire), wake_.changed_since(seen));
  }
}

}  // namespace brook::txn
