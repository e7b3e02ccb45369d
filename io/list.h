// io/list.h
//
// A minimal intrusive doubly linked list. Waiters link themselves into the
// primitive they wait on and unlink in their destructor, so a cancelled
// (destroyed) coroutine never leaves a dangling entry behind. O(1) unlink,
// no allocation. Not thread-safe: one event loop owns each list.
#pragma once

#include "io/assert.h"

namespace brook::io {

class ListNode {
 public:
  ListNode() = default;
  ListNode(const ListNode&) = delete;
  ListNode& operator=(const ListNode&) = delete;
  ~ListNode() { unlink(); }

  bool linked() const { return prev_ != nullptr; }
  void unlink() {
    if (prev_ == nullptr) return;
    prev_->next_ = next_;
    next_->prev_ = prev_;
    prev_ = next_ = nullptr;
  }

 private:
  template <typename T>
  friend class IntrusiveList;
  ListNode* prev_ = nullptr;
  ListNode* next_ = nullptr;
};

// T must derive from ListNode. The list does not own its elements.
template <typename T>
class IntrusiveList {
 public:
  IntrusiveList() { head_.prev_ = head_.next_ = &head_; }
  IntrusiveList(const IntrusiveList&) = delete;
  IntrusiveList& operator=(const IntrusiveList&) = delete;
  ~IntrusiveList() {
    while (!empty()) pop_front();
    head_.prev_ = head_.next_ = nullptr;
  }

  bool empty() const { return head_.next_ == &head_; }
  void push_back(T* item) {
    ListNode* n = item;
    BROOK_ASSERT(!n->linked());
    n->prev_ = head_.prev_;
    n->next_ = &head_;
    head_.prev_->next_ = n;
    head_.prev_ = n;
  }
  T* front() const {
    BROOK_ASSERT(!empty());
    return static_cast<T*>(head_.next_);
  }
  T* pop_front() {
    T* item = front();
    static_cast<ListNode*>(item)->unlink();
    return item;
  }
  size_t size() const {
    size_t n = 0;
    for (const ListNode* p = head_.next_; p != &head_; p = p->next_) ++n;
    return n;
  }
  // Calls f(T*) for each element; f must not unlink other elements.
  template <typename F>
  void for_each(F&& f) const {
    for (ListNode* p = head_.next_; p != &head_;) {
      ListNode* next = p->next_;
      f(static_cast<T*>(p));
      p = next;
    }
  }

 private:
  ListNode head_;
};

}  // namespace brook::io
