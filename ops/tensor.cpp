// Storage, shape helpers and type checks for tensor.
#include "ops/tensor.hpp"

#include "ops/device/caching_allocator.hpp"
#include "ops/device/device_memory.hpp"
#include "ops/memory_account.hpp"

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>
#include <cstring>
#include <new>

#include "base/result.hpp"

namespace pipeworks {

std::size_t dtype_size(dtype dt) {
  switch (dt) {
    case dtype::f32: return 4;
    case dtype::f64: return 8;
    case dtype::i32: return 4;
  }
  return 0;
}

std::string_view dtype_name(dtype dt) {
  switch (dt) {
    case dtype::f32: return "F32";
    case dtype::f64: return "F64";
    case dtype::i32: return "I32";
  }
  return "?";
}

std::int64_t numel(const shape_t& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string shape_string(const shape_t& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {

// 64-byte aligned storage for n bytes (at least one cache line), zero-filled when asked.
// Freed large buffers kept for reuse, by size: a buffer the kernel handed out once is not
// zero-filled page by page again (received tensors, activations: measured 1.5-1.8x the transfer
// rate at 1 and 16 MiB). At most `cap` bytes are kept; never destroyed (tensors outlive statics).
class buffer_cache {
 public:
  static constexpr std::size_t smallest = std::size_t{1} << 16;
  static constexpr std::size_t cap = std::size_t{256} << 20;

  std::byte* take(std::size_t padded) {
    std::lock_guard<std::mutex> lock(mu_);
    auto i = free_.find(padded);
    if (i == free_.end() || i->second.empty()) return nullptr;
    std::byte* p = i->second.back();
    i->second.pop_back();
    held_ -= padded;
    return p;
  }
  void give(std::byte* p, std::size_t padded) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (held_ + padded <= cap) {
        free_[padded].push_back(p);
        held_ += padded;
        return;
      }
    }
    std::free(p);
  }

 private:
  std::mutex mu_;
  std::map<std::size_t, std::vector<std::byte*>> free_;
  std::size_t held_ = 0;
};

buffer_cache& cache() {
  static auto* c = new buffer_cache();  // leaked on purpose: freed tensors may come after exit
  return *c;
}

// Charged to the calling thread's memory account, if any (ops/memory_account.hpp), which refuses
// an allocation over its limit before anything is allocated and is credited when it is freed.
std::shared_ptr<std::byte> allocate_storage(std::size_t n, bool zero) {
  std::size_t padded = ((n + 63) / 64) * 64;
  if (padded == 0) padded = 64;
  const std::shared_ptr<memory_account> account = current_account();
  if (account) account->charge(padded);
  const bool cached = padded >= buffer_cache::smallest;
  std::byte* p = cached ? cache().take(padded) : nullptr;
  if (p == nullptr) p = static_cast<std::byte*>(std::aligned_alloc(64, padded));
  if (!p) {
    if (account) account->credit(padded);
    throw std::bad_alloc();
  }
  std::memset(p + (zero ? 0 : n), 0, zero ? padded : padded - n);  // the padding is always zero
  auto release = [cached, padded](std::byte* q) {
    if (cached) cache().give(q, padded);
    else std::free(q);
  };
  if (!account) return std::shared_ptr<std::byte>(p, release);
  return std::shared_ptr<std::byte>(p, [release, account, padded](std::byte* q) {
    release(q);
    account->credit(padded);
  });
}

void check_shape(const shape_t& shape) {
  for (auto d : shape)
    if (d < 0) throw pipeworks_error("tensor: negative dimension in shape " + shape_string(shape));
}

}  // namespace

tensor::tensor(shape_t shape, dtype dt, device dev)
    : shape_(std::move(shape)), dtype_(dt), device_(dev) {
  if (dev.kind != device_kind::cpu)
    throw pipeworks_error("tensor: " + dev.to_string() + " storage needs the CUDA build");
  check_shape(shape_);
  storage_ = allocate_storage(nbytes(), true);
}

tensor tensor::uninitialized(shape_t shape, dtype dt) {
  check_shape(shape);
  tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dt;
  t.storage_ = allocate_storage(t.nbytes(), false);
  return t;
}

tensor tensor::on(shape_t shape, dtype dt, device dev, std::shared_ptr<caching_allocator> memory,
                  void* stream, bool zero) {
  if (dev.kind == device_kind::cpu) return tensor(std::move(shape), dt);
  check_shape(shape);
  if (!memory)
    throw pipeworks_error("tensor: " + dev.to_string() + " storage needs that GPU's allocator");
  tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dt;
  t.device_ = dev;
  const std::size_t n = t.nbytes();
  auto* p = static_cast<std::byte*>(memory->allocate(n));
  t.storage_ = std::shared_ptr<std::byte>(p, [memory](std::byte* q) { memory->deallocate(q); });
  t.memory_ = std::move(memory);
  t.stream_ = stream;
  if (zero) zero_bytes(p, dev, n, stream);
  return t;
}

tensor tensor::copy_to(device dev, std::shared_ptr<caching_allocator> memory, void* stream,
                       bool wait) const {
  if (empty()) return {};
  void* s = stream ? stream : stream_;
  const bool to_cpu = dev.kind == device_kind::cpu;
  tensor t;
  if (to_cpu && memory) {  // host memory from an allocator of its own (page-locked, say)
    t.shape_ = shape_;
    t.dtype_ = dtype_;
    auto* p = static_cast<std::byte*>(memory->allocate(nbytes()));
    t.storage_ = std::shared_ptr<std::byte>(p, [memory](std::byte* q) { memory->deallocate(q); });
  } else {
    t = to_cpu ? uninitialized(shape_, dtype_) : on(shape_, dtype_, dev, std::move(memory), s, false);
  }
  copy_bytes(t.bytes(), dev, bytes(), device_, nbytes(), s);
  if (to_cpu && s && wait) wait_stream(device_, s);
  return t;
}

tensor tensor::clone() const {
  if (empty()) return {};
  if (device_.kind != device_kind::cpu) return copy_to(device_, memory_, stream_);
  tensor t = uninitialized(shape_, dtype_);  // every byte is copied over
  std::memcpy(t.bytes(), bytes(), nbytes());
  return t;
}

tensor tensor::zeros_like() const {
  if (device_.kind == device_kind::cpu) return tensor(shape_, dtype_);
  return on(shape_, dtype_, device_, memory_, stream_, true);
}

tensor tensor::zeros_beside(shape_t shape, dtype dt) const {
  if (device_.kind == device_kind::cpu) return tensor(std::move(shape), dt);
  return on(std::move(shape), dt, device_, memory_, stream_, true);
}

tensor tensor::uninitialized_like() const {
  if (device_.kind == device_kind::cpu) return uninitialized(shape_, dtype_);
  return on(shape_, dtype_, device_, memory_, stream_, false);
}

void tensor::reshape(shape_t shape) {
  if (pipeworks::numel(shape) != numel())
    throw pipeworks_error("tensor: cannot reshape " + shape_string(shape_) + " to " +
                          shape_string(shape));
  shape_ = std::move(shape);
}

void tensor::check_type(dtype want) const {
  if (want != dtype_)
    throw pipeworks_error("tensor: holds " + std::string(dtype_name(dtype_)) + ", accessed as " +
                          std::string(dtype_name(want)));
}

}  // namespace pipeworks
