// io/event_queue_test.cc
//
// The event queue pops exactly the live events, in (time, sequence) order,
// whatever mix of posts, timers and cancellations came before: checked
// against a plain ordered-map model.
#include "io/event_queue.h"

#include <map>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace brook::io {
namespace {

void noop(void*) {}

RC_GTEST_PROP(EventQueue, MatchesAnOrderedMapModel, ()) {
  EventQueue q;
  std::map<std::pair<int64_t, uint64_t>, uintptr_t> model;  // (time, seq) -> payload
  std::vector<std::pair<EventId, std::pair<int64_t, uint64_t>>> ids;
  uint64_t seq = 0;
  const int steps = *rc::gen::inRange(1, 3000);
  for (int i = 0; i < steps; ++i) {
    const int op = *rc::gen::inRange(0, 10);
    if (op < 4) {  // timer
      const int64_t t = q.now_ns() + *rc::gen::inRange<int64_t>(0, 50);
      const uintptr_t payload = seq;
      ids.push_back({q.schedule(t, Callback{noop, reinterpret_cast<void*>(payload)}), {t, seq}});
      model[{t, seq}] = payload;
      ++seq;
    } else if (op < 6) {  // post
      const uintptr_t payload = seq;
      ids.push_back({q.post(Callback{noop, reinterpret_cast<void*>(payload)}), {q.now_ns(), seq}});
      model[{q.now_ns(), seq}] = payload;
      ++seq;
    } else if (op < 8 && !ids.empty()) {  // cancel, possibly stale
      const size_t k = *rc::gen::inRange<size_t>(0, ids.size());
      q.cancel(ids[k].first);
      model.erase(ids[k].second);
    } else {  // pop up to some time
      const int64_t limit = q.now_ns() + *rc::gen::inRange<int64_t>(0, 20);
      auto due = q.pop_due(limit);
      auto it = model.begin();
      if (it == model.end() || it->first.first > limit) {
        RC_ASSERT(!due.has_value());
      } else {
        RC_ASSERT(due.has_value());
        RC_ASSERT(due->time_ns == it->first.first);
        RC_ASSERT(reinterpret_cast<uintptr_t>(due->callback.arg) == it->second);
        model.erase(it);
      }
    }
    RC_ASSERT(q.live() == model.size());
  }
}

TEST(EventQueue, ManyCancelledTimersAreSwept) {
  EventQueue q;
  for (int round = 0; round < 100; ++round) {
    std::vector<EventId> ids;
    for (int i = 0; i < 1000; ++i) ids.push_back(q.schedule(1'000'000'000, Callback{noop, nullptr}));
    for (EventId id : ids) q.cancel(id);
  }
  EXPECT_EQ(q.live(), 0u);
  EXPECT_FALSE(q.next_time_ns().has_value());
}

TEST(EventQueue, StaleIdDoesNotCancelANewerEvent) {
  EventQueue q;
  EventId a = q.post(Callback{noop, nullptr});
  ASSERT_TRUE(q.pop_due(0).has_value());
  EventId b = q.post(Callback{noop, nullptr});  // reuses a's slot
  q.cancel(a);
  EXPECT_EQ(q.live(), 1u);
  q.cancel(b);
  EXPECT_EQ(q.live(), 0u);
}

}  // namespace
}  // namespace brook::io
