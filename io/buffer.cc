// io/buffer.cc
#include "io/buffer.h"

#include <cstdlib>
#include <new>

namespace brook::io {

struct Buffer::Storage {
  uint32_t refs;
  size_t capacity;
  // Bytes follow, 64-byte aligned for cache lines and vectored I/O.
  std::byte* bytes() { return reinterpret_cast<std::byte*>(this) + kHeaderBytes; }
  static constexpr size_t kHeaderBytes = 64;
};

Buffer Buffer::allocate(size_t size) {
  Buffer b;
  void* mem = ::operator new(Storage::kHeaderBytes + size, std::align_val_t{64});
  b.storage_ = new (mem) Storage{1, size};
  b.size_ = size;
  return b;
}

Buffer Buffer::copy_of(std::span<const std::byte> bytes) {
  Buffer b = allocate(bytes.size());
  if (!bytes.empty()) std::memcpy(b.mutable_data(), bytes.data(), bytes.size());
  return b;
}

Buffer Buffer::copy_of(std::string_view text) {
  return copy_of(std::as_bytes(std::span<const char>(text.data(), text.size())));
}

const std::byte* Buffer::data() const {
  return storage_ == nullptr ? nullptr : storage_->bytes() + offset_;
}

std::byte* Buffer::mutable_data() {
  return storage_ == nullptr ? nullptr : storage_->bytes() + offset_;
}

Buffer Buffer::slice(size_t offset, size_t length) const {
  BROOK_ASSERT_LE(offset, size_);
  BROOK_ASSERT_LE(length, size_ - offset);
  Buffer b(*this);
  b.offset_ += offset;
  b.size_ = length;
  return b;
}

void Buffer::trim_front(size_t n) {
  BROOK_ASSERT_LE(n, size_);
  offset_ += n;
  size_ -= n;
}

void Buffer::trim_back(size_t n) {
  BROOK_ASSERT_LE(n, size_);
  size_ -= n;
}

uint32_t Buffer::use_count() const { return storage_ == nullptr ? 0 : storage_->refs; }

void Buffer::ref() {
  if (storage_ != nullptr) ++storage_->refs;
}

void Buffer::unref() {
  if (storage_ == nullptr) return;
  BROOK_ASSERT_GT(storage_->refs, 0u);
  if (--storage_->refs == 0) {
    storage_->~Storage();
    ::operator delete(static_cast<void*>(storage_), std::align_val_t{64});
  }
  storage_ = nullptr;
}

bool operator==(const Buffer& a, const Buffer& b) { return a.view() == b.view(); }

BufferChain::BufferChain(Buffer b) { append(std::move(b)); }

void BufferChain::consume(size_t n) {
  BROOK_ASSERT_LE(n, size_);
  size_ -= n;
  size_t drop = 0;
  while (n > 0) {
    Buffer& front = parts_[drop];
    if (n < front.size()) {
      front.trim_front(n);
      break;
    }
    n -= front.size();
    ++drop;
  }
  parts_.erase(parts_.begin(), parts_.begin() + static_cast<ptrdiff_t>(drop));
}

BufferChain BufferChain::slice(size_t offset, size_t length) const {
  BROOK_ASSERT_LE(offset, size_);
  BROOK_ASSERT_LE(length, size_ - offset);
  BufferChain out;
  for (const Buffer& b : parts_) {
    if (length == 0) break;
    if (offset >= b.size()) {
      offset -= b.size();
      continue;
    }
    size_t take = std::min(length, b.size() - offset);
    out.append(b.slice(offset, take));
    offset = 0;
    length -= take;
  }
  return out;
}

void BufferChain::copy_to(size_t offset, std::span<std::byte> out) const {
  BROOK_ASSERT_LE(offset, size_);
  BROOK_ASSERT_LE(out.size(), size_ - offset);
  size_t written = 0;
  for (const Buffer& b : parts_) {
    if (written == out.size()) break;
    if (offset >= b.size()) {
      offset -= b.size();
      continue;
    }
    size_t take = std::min(out.size() - written, b.size() - offset);
    std::memcpy(out.data() + written, b.data() + offset, take);
    written += take;
    offset = 0;
  }
}

Buffer BufferChain::linearize() const {
  if (parts_.size() == 1) return parts_[0];
  Buffer out = Buffer::allocate(size_);
  copy_to(0, {out.mutable_data(), size_});
  return out;
}

std::string BufferChain::to_string() const {
  std::string s;
  s.reserve(size_);
  for (const Buffer& b : parts_) s.append(b.view());
  return s;
}

}  // namespace brook::io
