// tensor_payload: sharing a tensor's buffer in transit and handing it back.
#include "ops/tensor_payload.hpp"

#include <cstring>

namespace pipeworks {

tensor_payload::tensor_payload(tensor t)
    : type_(t.dtype_), shape_(std::move(t.shape_)), device_(t.device_), data_(std::move(t.storage_)) {
  // Payloads are read as host memory (serialised, sent over UCX): a GPU tensor is copied first.
  if (device_.kind != device_kind::cpu)
    throw pipeworks_error("tensor: a " + device_.to_string() + " tensor travels between actors only "
                          "after an explicit copy_to the CPU");
}

tensor tensor_payload::take() {
  if (empty()) return {};
  if (data_.use_count() == 1) {
    tensor t(std::move(shape_), type_, device_, std::move(data_));
    shape_.clear();
    return t;
  }
  tensor t = copy();
  data_.reset();
  shape_.clear();
  return t;
}

tensor_payload tensor_payload::view(std::shared_ptr<const void> owner, const std::byte* data,
                                    dtype type, shape_t shape) {
  tensor_payload p;
  p.type_ = type;
  p.shape_ = std::move(shape);
  p.data_ = std::shared_ptr<std::byte>(std::const_pointer_cast<void>(std::move(owner)),
                                       const_cast<std::byte*>(data));
  return p;
}

tensor tensor_payload::copy() const {
  if (empty()) return {};
  tensor t = tensor::uninitialized(shape_, type_);  // every byte is copied over
  std::memcpy(t.bytes(), data_.get(), nbytes());
  return t;
}

std::size_t tensor_payload::nbytes() const {
  return empty() ? 0 : static_cast<std::size_t>(numel(shape_)) * dtype_size(type_);
}

std::span<const std::byte> tensor_payload::bytes() const { return {data_.get(), nbytes()}; }

std::span<std::byte> tensor_payload::writable_bytes() { return {data_.get(), nbytes()}; }

result<tensor_payload> tensor_payload::allocate(dtype type, shape_t shape) {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) return make_error("a tensor of shape " + shape_string(shape) + " has a negative dimension");
    if (d > 0 && n > (std::int64_t{1} << 40) / d)
      return make_error("a tensor of shape " + shape_string(shape) + " is larger than 2^40 elements");
    n *= d;
  }
  if (static_cast<std::uint64_t>(n) * dtype_size(type) > (std::uint64_t{1} << 40))
    return make_error("a tensor of shape " + shape_string(shape) + " is larger than 2^40 bytes");
  return tensor_payload(tensor::uninitialized(std::move(shape), type));
}

}  // namespace pipeworks
