// tensor: an owning n-d array with a shape, a dtype and a device; tensor_view<T>: a typed,
// non-owning window onto storage that someone else owns.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ops/device/device.hpp"

namespace pipeworks {

enum class dtype : std::uint8_t { f32, f64, i32 };

std::size_t dtype_size(dtype dt);
// The safetensors spelling: "F32", "F64", "I32".
std::string_view dtype_name(dtype dt);

template <class T> constexpr dtype dtype_of();
template <> constexpr dtype dtype_of<float>() { return dtype::f32; }
template <> constexpr dtype dtype_of<double>() { return dtype::f64; }
template <> constexpr dtype dtype_of<std::int32_t>() { return dtype::i32; }

using shape_t = std::vector<std::int64_t>;
std::int64_t numel(const shape_t& shape);
std::string shape_string(const shape_t& shape);  // "[2, 3]"

// A non-owning typed view: data pointer plus shape, row-major and contiguous.
template <class T>
struct tensor_view {
  T* data = nullptr;
  shape_t shape;
  std::int64_t numel() const { return pipeworks::numel(shape); }
  std::span<T> span() const { return {data, static_cast<std::size_t>(numel())}; }
};

class tensor_payload;
class caching_allocator;

// The owner of one buffer. Move-only: a tensor is handed over, never shared for writing (a
// tensor_payload in transit may share it read-only, and gives it back with take()).
class tensor {
 public:
  tensor() = default;
  // Zero-filled storage of the given shape.
  explicit tensor(shape_t shape, dtype dt = dtype::f32, device dev = device::cpu());
  tensor(tensor&&) noexcept = default;
  tensor& operator=(tensor&&) noexcept = default;
  tensor(const tensor&) = delete;
  tensor& operator=(const tensor&) = delete;

  // A copy on the same device.
  tensor clone() const;
  // A tensor on `dev`, zeroed unless `zero` is false (then the caller writes every byte); a GPU's
  // storage comes from `memory`, that GPU's caching allocator (the CPU's needs none), and its use
  // is ordered on `stream` (a cudaStream_t; null: the default stream): the zeroing, later copies
  // and, through the allocator, the next owner of the memory. The only ways onto a device are
  // this and copy_to.
  static tensor on(shape_t shape, dtype dt, device dev, std::shared_ptr<caching_allocator> memory,
                   void* stream = nullptr, bool zero = true);
  // A copy of this tensor on `dev` (explicit: a tensor never crosses devices otherwise); `memory`
  // as for on(), or for the CPU an allocator of host memory (the page-locked pool a GPU copies
  // into without staging) instead of the heap. The copy is ordered on `stream` (null: this
  // tensor's own); a copy to the CPU is complete when it returns, unless `wait` is false: then it
  // is queued only, and the caller waits for the stream before the copy is read (and keeps this
  // tensor until then).
  tensor copy_to(device dev, std::shared_ptr<caching_allocator> memory = nullptr,
                 void* stream = nullptr, bool wait = true) const;
  // A tensor of this one's shape and dtype on its device (its allocator and stream), zeroed or
  // with every byte left for the caller to write.
  tensor zeros_like() const;
  tensor uninitialized_like() const;
  // A zeroed tensor of another shape and dtype where this one is (its allocator and stream).
  tensor zeros_beside(shape_t shape, dtype dt) const;
  // The stream that orders a GPU tensor's use (null on the CPU).
  void* stream() const { return stream_; }
  // A GPU tensor handed to another stream carries the event (a cudaEvent_t) after which its
  // contents are complete on its own stream (null: none given; device_context::hand_over sets it).
  const std::shared_ptr<void>& ready() const { return ready_; }
  void set_ready(std::shared_ptr<void> event) { ready_ = std::move(event); }
  // Storage of the given shape whose contents are left as they are (the caller fills every byte).
  static tensor uninitialized(shape_t shape, dtype dt = dtype::f32);
  // Same storage under a new shape with the same number of elements.
  void reshape(shape_t shape);

  const shape_t& shape() const { return shape_; }
  std::int64_t dim(int i) const { return shape_.at(static_cast<std::size_t>(i)); }
  int rank() const { return static_cast<int>(shape_.size()); }
  std::int64_t numel() const { return pipeworks::numel(shape_); }
  dtype type() const { return dtype_; }
  device where() const { return device_; }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  bool empty() const { return storage_ == nullptr; }

  std::byte* bytes() { return storage_.get(); }
  const std::byte* bytes() const { return storage_.get(); }

  // Typed access; throws pipeworks_error when T does not match the dtype.
  template <class T> T* data() {
    check_type(dtype_of<T>());
    return reinterpret_cast<T*>(storage_.get());
  }
  template <class T> const T* data() const {
    check_type(dtype_of<T>());
    return reinterpret_cast<const T*>(storage_.get());
  }
  template <class T> std::span<T> span() { return {data<T>(), static_cast<std::size_t>(numel())}; }
  template <class T> std::span<const T> span() const {
    return {data<T>(), static_cast<std::size_t>(numel())};
  }
  template <class T> tensor_view<T> view() { return {data<T>(), shape_}; }
  template <class T> tensor_view<const T> view() const { return {data<T>(), shape_}; }

 private:
  friend class tensor_payload;
  tensor(shape_t shape, dtype dt, device dev, std::shared_ptr<std::byte> storage)
      : shape_(std::move(shape)), dtype_(dt), device_(dev), storage_(std::move(storage)) {}
  void check_type(dtype want) const;

  shape_t shape_;
  dtype dtype_ = dtype::f32;
  device device_;
  std::shared_ptr<std::byte> storage_;
  std::shared_ptr<caching_allocator> memory_;  // a GPU tensor's allocator (clone() uses it)
  void* stream_ = nullptr;                     // and the stream that orders its use
  std::shared_ptr<void> ready_;                // see ready()
};

}  // namespace pipeworks
