// io/buffer.h
//
// Byte buffers for I/O. A Buffer is a reference-counted slice of an immutable
// (once shared) allocation: slicing and copying a Buffer copy no bytes, so log
// bytes read from a segment can travel to a socket untouched. A BufferChain is
// a sequence of Buffers written with one vectored (scatter/gather) call.
//
// Reference counts are not atomic: a Buffer belongs to one event loop. Moving
// bytes across loops (shards) must copy them or transfer sole ownership.
// In-flight I/O holds its own reference, so cancelling an operation can never
// leave the kernel writing into freed memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "absl/container/inlined_vector.h"
#include "io/assert.h"

namespace brook::io {

class Buffer {
 public:
  Buffer() = default;
  // Uninitialised bytes, to be filled through mutable_data() before sharing.
  static Buffer allocate(size_t size);
  static Buffer copy_of(std::span<const std::byte> bytes);
  static Buffer copy_of(std::string_view text);

  Buffer(const Buffer& o) : storage_(o.storage_), offset_(o.offset_), size_(o.size_) { ref(); }
  Buffer(Buffer&& o) noexcept
      : storage_(std::exchange(o.storage_, nullptr)),
        offset_(std::exchange(o.offset_, 0)),
        size_(std::exchange(o.size_, 0)) {}
  Buffer& operator=(const Buffer& o) {
    Buffer copy(o);
    swap(copy);
    return *this;
  }
  Buffer& operator=(Buffer&& o) noexcept {
    Buffer moved(std::move(o));
    swap(moved);
    return *this;
  }
  ~Buffer() { unref(); }

  void swap(Buffer& o) noexcept {
    std::swap(storage_, o.storage_);
    std::swap(offset_, o.offset_);
    std::swap(size_, o.size_);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::byte* data() const;
  // For filling a fresh allocation. REQUIRES: the bytes are not shared yet.
  std::byte* mutable_data();
  std::span<const std::byte> span() const { return {data(), size_}; }
  std::string_view view() const {
    return {reinterpret_cast<const char*>(data()), size_};
  }

  // A view of [offset, offset + length). REQUIRES: within bounds.
  Buffer slice(size_t offset, size_t length) const;
  Buffer slice(size_t offset) const { return slice(offset, size_ - offset); }
  // Shrinks this view in place (no bytes move).
  void trim_front(size_t n);
  void trim_back(size_t n);

  // Number of Buffers sharing the allocation (for tests and assertions).
  uint32_t use_count() const;

 private:
  struct Storage;
  void ref();
  void unref();

  Storage* storage_ = nullptr;
  size_t offset_ = 0;
  size_t size_ = 0;
};

bool operator==(const Buffer& a, const Buffer& b);

class BufferChain {
 public:
  BufferChain() = default;
  // Out of line: inlined into a caller, GCC 12 reports the fresh
  // InlinedVector as maybe-uninitialized (a false positive).
  explicit BufferChain(Buffer b);

  void append(Buffer b) {
    if (b.empty()) return;
    size_ += b.size();
    parts_.push_back(std::move(b));
  }
  void append(const BufferChain& c) {
    for (const Buffer& b : c.parts_) append(b);
  }
  void append(BufferChain&& c) {
    for (Buffer& b : c.parts_) append(std::move(b));
    c.clear();
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::span<const Buffer> parts() const { return {parts_.data(), parts_.size()}; }
  void clear() {
    parts_.clear();
    size_ = 0;
  }

  // Drops the first n bytes. REQUIRES: n <= size().
  void consume(size_t n);
  // The bytes [offset, offset + length) as a new chain sharing storage.
  BufferChain slice(size_t offset, size_t length) const;
  // Copies [offset, offset + out.size()) into out. REQUIRES: within bounds.
  void copy_to(size_t offset, std::span<std::byte> out) const;
  // One contiguous Buffer (no copy when the chain has a single part).
  Buffer linearize() const;
  std::string to_string() const;

 private:
  absl::InlinedVector<Buffer, 4> parts_;
  size_t size_ = 0;
};

}  // namespace brook::io
