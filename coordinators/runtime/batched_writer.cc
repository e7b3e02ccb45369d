// coordinators/runtime/batched_writer.cc
#include "coordinators/runtime/batched_writer.h"

#include "io/when.h"

namespace brook::runtime {

using net::Error;

io::Task<RecordLog::Written> BatchedWriter::write(int32_t partition, int32_t epoch, std::vector<Record> records) {
  if (Error e = appender_->check_leader(partition, epoch); e != Error::kNone) co_return Written{e, -1};
  std::shared_ptr<Queue>& slot = queues_[partition];
  if (slot == nullptr) slot = std::make_shared<Queue>();
  const std::shared_ptr<Queue> queue = slot;
  auto me = std::make_shared<Write>();
  me->epoch = epoch;
  for (const Record& r : records) me->bytes += r.key.size() + (r.value ? r.value->size() : 0);
  me->count = records.size();
  me->records = std::move(records);
  queue->waiting.push_back(me);
  ++stats_.writes;
  // The first writer appends for everyone queued meanwhile; the others
  // wait. A writer cancelled while appending leaves `appending` false, and
  // a waiter takes over.
  while (!me->done) {
    if (!queue->appending) {
      co_await append_queued(partition, queue);
    } else {
      co_await io::wait_for(&queue->finished);
    }
  }
  if (me->error != Error::kNone) co_return Written{me->error, -1};
  const Error committed = co_await appender_->wait_committed(partition, epoch, me->end_offset);
  if (committed != Error::kNone) co_return Written{committed, -1};
  co_return Written{Error::kNone, me->first_offset};
}

io::Task<void> BatchedWriter::append_queued(int32_t partition, std::shared_ptr<Queue> queue) {
  queue->appending = true;
  // Also when this task is cancelled mid-append: the batch's outcome is
  // unknown, which its writers treat as failed.
  struct Release {
    Queue* q;
    ~Release() {
      for (const std::shared_ptr<Write>& w : q->in_flight) {
        w->error = Error::kNotCoordinator;
        w->done = true;
      }
      q->in_flight.clear();
      q->appending = false;
      q->finished.notify_all();
    }
  } release{queue.get()};
  while (!queue->waiting.empty()) {
    std::vector<std::shared_ptr<Write>>& batch = queue->in_flight;
    batch.clear();
    size_t bytes = 0;
    const int32_t epoch = queue->waiting.front()->epoch;
    size_t taken = 0;
    for (const std::shared_ptr<Write>& w : queue->waiting) {
      // One epoch per batch; a single write larger than a batch goes alone.
      if (w->epoch != epoch || (!batch.empty() && bytes + w->bytes > batch_bytes_)) break;
      bytes += w->bytes;
      batch.push_back(w);
      ++taken;
    }
    queue->waiting.erase(queue->waiting.begin(), queue->waiting.begin() + static_cast<ptrdiff_t>(taken));
    std::vector<Record> records;
    for (const std::shared_ptr<Write>& w : batch) {
      for (Record& r : w->records) records.push_back(std::move(r));
    }
    ++stats_.batches;
    auto run = [](BatchAppender* a, int32_t p, int32_t e, std::vector<Record> rs) -> io::Task<BatchAppender::Appended> {
      co_return co_await a->append(p, e, std::move(rs));
    };
    const BatchAppender::Appended appended = co_await run(appender_, partition, epoch, std::move(records));
    int64_t offset = appended.first_offset;
    for (const std::shared_ptr<Write>& w : batch) {
      w->error = appended.error;
      if (appended.error == Error::kNone) {
        w->first_offset = offset;
        offset += static_cast<int64_t>(w->count);
        w->end_offset = offset;
      }
      w->done = true;
    }
    batch.clear();
    queue->finished.notify_all();
  }
}

}  // namespace brook::runtime
