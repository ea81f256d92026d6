// Storage, shape helpers and type checks for tensor.
#include "ops/tensor.hpp"

#include <cstdlib>
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

std::string device::to_string() const {
  return kind == device_kind::cpu ? "cpu" : "cuda:" + std::to_string(index);
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
std::shared_ptr<std::byte> allocate_storage(std::size_t n, bool zero) {
  std::size_t padded = ((n + 63) / 64) * 64;
  if (padded == 0) padded = 64;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(64, padded));
  if (!p) throw std::bad_alloc();
  std::memset(p + (zero ? 0 : n), 0, zero ? padded : padded - n);  // the padding is always zero
  return std::shared_ptr<std::byte>(p, [](std::byte* q) { std::free(q); });
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

tensor tensor::clone() const {
  if (empty()) return {};
  tensor t = uninitialized(shape_, dtype_);  // every byte is copied over
  std::memcpy(t.bytes(), bytes(), nbytes());
  return t;
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
