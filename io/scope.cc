// io/scope.cc
#include "io/scope.h"

#include <cstdio>
#include <cstdlib>

namespace brook::io {
namespace detail {

[[noreturn]] void task_exception_escaped() {
  std::fprintf(stderr, "an exception escaped a Brook task; logic code must not throw\n");
  BROOK_UNREACHABLE();
}

namespace {
RootFrame run_root(Task<void> task) { co_await std::move(task); }
}  // namespace

void RootPromise::Final::await_suspend(RootHandle h) const noexcept {
  TaskScope* scope = h.promise().scope;
  h.promise().unlink();
  h.destroy();
  scope->on_child_done();
}

}  // namespace detail

void TaskScope::spawn(Task<void> task) {
  BROOK_ASSERT(task.valid());
  detail::RootHandle h = detail::run_root(std::move(task)).handle;
  detail::RootPromise& p = h.promise();
  p.scope = this;
  p.executor = executor_;
  p.start_event = executor_->post(Callback{
      [](void* a) {
        auto root = detail::RootHandle::from_address(a);
        root.promise().start_event = kNoEvent;
        root.resume();
      },
      h.address()});
  children_.push_back(&p);
  idle_.reset();
}

void TaskScope::cancel_all() {
  if (cancel_event_ != kNoEvent) {
    executor_->cancel(cancel_event_);
    cancel_event_ = kNoEvent;
  }
  // Destroying a child may run destructors that spawn into this scope again;
  // loop until nothing is left.
  while (!children_.empty()) {
    detail::RootPromise* p = children_.pop_front();
    executor_->cancel(p->start_event);
    detail::RootHandle::from_promise(*p).destroy();
  }
  idle_.set();
}

void TaskScope::cancel_soon() {
  if (cancel_event_ != kNoEvent) return;
  cancel_event_ = executor_->post(Callback{
      [](void* a) {
        auto* self = static_cast<TaskScope*>(a);
        self->cancel_event_ = kNoEvent;
        self->cancel_all();
      },
      this});
}

void TaskScope::on_child_done() {
  if (children_.empty()) idle_.set();
}

}  // namespace brook::io
