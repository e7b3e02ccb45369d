// io/event_queue_test.cc
//
// The event queue pops exactly the live events, in (time, sequence) order,
// whatever mix of posts, timers, cancellations, peeks and time advances came
// before: checked against a plain ordered-map model. Narrow time ranges make
// many events share a time (the order then rests on the sequence alone), and
// bursts of cancellations make the queue sweep its dead entries.
#include "io/event_queue.h"

#include <algorithm>
#include <map>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace brook::io {
namespace {

void noop(void*) {}

struct Model {
  struct Event {
    uintptr_t payload;
    uint32_t tag;
  };
  std::map<std::pair<int64_t, uint64_t>, Event> events;  // (time, seq) -> event
};

RC_GTEST_PROP(EventQueue, MatchesAnOrderedMapModel, ()) {
  EventQueue q;
  Model model;
  std::vector<std::pair<EventId, std::pair<int64_t, uint64_t>>> ids;
  uint64_t seq = 0;
  // How far ahead timers land: small spans give many equal times.
  const int64_t span = *rc::gen::element<int64_t>(1, 3, 50, 1'000'000);
  const int steps = *rc::gen::inRange(1, 3000);
  auto add = [&](int64_t t, EventId id, uint32_t tag) {
    ids.push_back({id, {t, seq}});
    model.events[{t, seq}] = Model::Event{seq, tag};
    ++seq;
  };
  for (int i = 0; i < steps; ++i) {
    const int op = *rc::gen::inRange(0, 16);
    if (op < 5) {  // timer, possibly in the past (clamped to now)
      const int64_t t = q.now_ns() + *rc::gen::inRange<int64_t>(-2, span);
      const uint32_t tag = *rc::gen::inRange<uint32_t>(0, 1000);
      const EventId id = q.schedule(t, Callback{noop, reinterpret_cast<void*>(seq)}, tag);
      add(std::max(t, q.now_ns()), id, tag);
    } else if (op < 7) {  // post
      const uint32_t tag = *rc::gen::inRange<uint32_t>(0, 1000);
      const EventId id = q.post(Callback{noop, reinterpret_cast<void*>(seq)}, tag);
      add(q.now_ns(), id, tag);
    } else if (op < 10 && !ids.empty()) {  // cancel (often a recent event), possibly stale
      const size_t recent = std::min<size_t>(ids.size(), 4);
      const size_t k = *rc::gen::inRange(0, 2) == 0
                           ? ids.size() - 1 - *rc::gen::inRange<size_t>(0, recent)
                           : *rc::gen::inRange<size_t>(0, ids.size());
      q.cancel(ids[k].first);
      model.events.erase(ids[k].second);
    } else if (op < 11) {  // cancel nothing
      q.cancel(kNoEvent);
    } else if (op < 12) {  // peek
      const std::optional<int64_t> next = q.next_time_ns();
      if (model.events.empty()) {
        RC_ASSERT(!next.has_value());
      } else {
        RC_ASSERT(next.has_value());
        RC_ASSERT(*next == model.events.begin()->first.first);
      }
    } else if (op < 13) {  // advance, never past a pending event
      int64_t to = q.now_ns() + *rc::gen::inRange<int64_t>(0, span);
      if (!model.events.empty()) to = std::min(to, model.events.begin()->first.first);
      q.advance_to(to);
    } else {  // pop up to some time
      const int64_t limit = q.now_ns() + *rc::gen::inRange<int64_t>(0, span);
      auto due = q.pop_due(limit);
      auto it = model.events.begin();
      if (it == model.events.end() || it->first.first > limit) {
        RC_ASSERT(!due.has_value());
      } else {
        RC_ASSERT(due.has_value());
        RC_ASSERT(due->time_ns == it->first.first);
        RC_ASSERT(due->sequence == it->first.second);
        RC_ASSERT(due->tag == it->second.tag);
        RC_ASSERT(reinterpret_cast<uintptr_t>(due->callback.arg) == it->second.payload);
        RC_ASSERT(q.now_ns() == due->time_ns);
        model.events.erase(it);
      }
    }
    RC_ASSERT(q.live() == model.events.size());
  }
  // Drain: everything left comes out in order.
  while (auto due = q.pop_due(INT64_MAX)) {
    auto it = model.events.begin();
    RC_ASSERT(it != model.events.end());
    RC_ASSERT(due->time_ns == it->first.first);
    RC_ASSERT(due->sequence == it->first.second);
    model.events.erase(it);
  }
  RC_ASSERT(model.events.empty());
  RC_ASSERT(q.empty());
}

// Bursts of cancellations (enough to sweep) between timers sharing a few
// times, with pops interleaved: the survivors still come out in order.
RC_GTEST_PROP(EventQueue, SweepsKeepTheOrder, ()) {
  EventQueue q;
  std::map<std::pair<int64_t, uint64_t>, EventId> model;
  uint64_t seq = 0;
  const int rounds = *rc::gen::inRange(1, 8);
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::pair<EventId, std::pair<int64_t, uint64_t>>> batch;
    const int n = *rc::gen::inRange(1000, 3000);
    for (int i = 0; i < n; ++i) {
      const int64_t t = q.now_ns() + *rc::gen::inRange<int64_t>(0, 4);
      const EventId id = q.schedule(t, Callback{noop, nullptr});
      batch.push_back({id, {t, seq}});
      model[{t, seq}] = id;
      ++seq;
    }
    const int keep_one_in = *rc::gen::inRange(2, 50);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (i % static_cast<size_t>(keep_one_in) == 0) continue;
      q.cancel(batch[i].first);
      model.erase(batch[i].second);
    }
    const int pops = *rc::gen::inRange(0, 100);
    for (int i = 0; i < pops; ++i) {
      auto due = q.pop_due(INT64_MAX);
      if (model.empty()) {
        RC_ASSERT(!due.has_value());
        break;
      }
      RC_ASSERT(due.has_value());
      RC_ASSERT(due->time_ns == model.begin()->first.first);
      RC_ASSERT(due->sequence == model.begin()->first.second);
      model.erase(model.begin());
    }
    RC_ASSERT(q.live() == model.size());
  }
  while (auto due = q.pop_due(INT64_MAX)) {
    RC_ASSERT(!model.empty());
    RC_ASSERT(due->sequence == model.begin()->first.second);
    model.erase(model.begin());
  }
  RC_ASSERT(model.empty());
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
  q.cancel(a);
  EXPECT_EQ(q.live(), 1u);
  q.cancel(b);
  EXPECT_EQ(q.live(), 0u);
  q.cancel(b);  // cancelled twice
  EXPECT_EQ(q.live(), 0u);
}

// A timer cancelled and dropped from the front (by a peek or a pop whose
// limit it is past) leaves no trace: a later timer at the same time is
// queued normally, whether or not it reuses the dropped timer's slot.
TEST(EventQueue, TimerAfterADroppedCancelledTimerAtTheSameTime) {
  for (int variant = 0; variant < 2; ++variant) {
    EventQueue q;
    const EventId a = q.schedule(10, Callback{noop, nullptr});
    q.cancel(a);
    if (variant == 0) {
      EXPECT_FALSE(q.next_time_ns().has_value());
    } else {
      EXPECT_FALSE(q.pop_due(5).has_value());
    }
    q.schedule(10, Callback{noop, reinterpret_cast<void*>(uintptr_t{1})});
    q.schedule(10, Callback{noop, reinterpret_cast<void*>(uintptr_t{2})});
    auto first = q.pop_due(INT64_MAX);
    auto second = q.pop_due(INT64_MAX);
    ASSERT_TRUE(first.has_value());
    ASSERT_TRUE(second.has_value());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first->callback.arg), 1u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(second->callback.arg), 2u);
    EXPECT_FALSE(q.pop_due(INT64_MAX).has_value());
    EXPECT_TRUE(q.empty());
  }
}

// Timers due at one time run in the order they were scheduled, posts
// included, whichever order their times were reached in.
TEST(EventQueue, EqualTimesRunInScheduleOrder) {
  EventQueue q;
  std::vector<uint64_t> order;
  std::vector<uintptr_t> expected;
  for (uintptr_t i = 0; i < 20; ++i) {
    const int64_t t = (i % 3 == 0) ? 100 : (i % 3 == 1) ? 50 : 100;
    q.schedule(t, Callback{noop, reinterpret_cast<void*>(i)});
  }
  for (uintptr_t i = 0; i < 20; ++i) {
    if (i % 3 == 1) expected.push_back(i);
  }
  for (uintptr_t i = 0; i < 20; ++i) {
    if (i % 3 != 1) expected.push_back(i);
  }
  while (auto due = q.pop_due(INT64_MAX)) {
    order.push_back(reinterpret_cast<uintptr_t>(due->callback.arg));
    if (due->time_ns == 50 && order.size() == 1) {
      q.post(Callback{noop, reinterpret_cast<void*>(uintptr_t{100})});  // due at 50, after the others
      expected.insert(expected.begin() + 7, 100);
    }
  }
  EXPECT_EQ(order, std::vector<uint64_t>(expected.begin(), expected.end()));
}

}  // namespace
}  // namespace brook::io
