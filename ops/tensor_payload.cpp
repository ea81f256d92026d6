// tensor_payload: sharing a tensor's buffer in transit and handing it back.
#include "ops/tensor_payload.hpp"

#include <cstring>

#include "ops/device/device_memory.hpp"

namespace pipeworks {

tensor_payload::tensor_payload(tensor t)
    : type_(t.dtype_), shape_(std::move(t.shape_)), device_(t.device_), data_(std::move(t.storage_)),
      memory_(std::move(t.memory_)), stream_(t.stream_), ready_(std::move(t.ready_)) {}

tensor tensor_payload::take() {
  if (empty()) return {};
  if (data_.use_count() == 1) {
    tensor t(std::move(shape_), type_, device_, std::move(data_));
    t.memory_ = std::move(memory_);
    t.stream_ = stream_;
    t.ready_ = std::move(ready_);
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
  if (device_.kind != device_kind::cpu) {  // a copy on the same GPU, ordered on its stream
    tensor shared(shape_, type_, device_, data_);
    shared.memory_ = memory_;
    shared.stream_ = stream_;
    // The copy is made on the tensor's own stream, after the work that made the tensor; it gets
    // an event of its own, which a consumer on another stream waits for.
    tensor t = shared.clone();
    t.ready_ = record_event(device_, stream_);
    return t;
  }
  tensor t = tensor::uninitialized(shape_, type_);  // every byte is copied over
  std::memcpy(t.bytes(), data_.get(), nbytes());
  return t;
}

std::size_t tensor_payload::nbytes() const {
  return empty() ? 0 : static_cast<std::size_t>(numel(shape_)) * dtype_size(type_);
}

std::span<const std::byte> tensor_payload::bytes() const {
  if (device_.kind != device_kind::cpu)
    throw pipeworks_error("a " + device_.to_string() + " tensor cannot be read as bytes (sent to "
                          "another process or written): copy it to the host first");
  return {data_.get(), nbytes()};
}

tensor_payload tensor_payload::on_host() const {
  if (empty() || device_.kind == device_kind::cpu) return *this;
  tensor shared(shape_, type_, device_, data_);
  shared.memory_ = memory_;
  shared.stream_ = stream_;
  return tensor_payload(shared.copy_to(device::cpu()));
}

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

result<tensor_payload> tensor_payload::as(dtype type, shape_t shape) const {
  if (device_.kind != device_kind::cpu)
    return make_error("a " + device_.to_string() + " payload cannot be read as another type");
  std::uint64_t bytes = dtype_size(type);
  bool fits = true;
  for (auto d : shape) {
    if (d < 0 || (d > 0 && bytes > nbytes() / static_cast<std::uint64_t>(d))) fits = false;
    else bytes *= static_cast<std::uint64_t>(d);
  }
  if (!fits || bytes != nbytes())
    return make_error("a payload of " + std::to_string(nbytes()) + " bytes cannot be read as a " +
                      std::string(dtype_name(type)) + " tensor of shape " + shape_string(shape));
  tensor_payload p = *this;
  p.type_ = type;
  p.shape_ = std::move(shape);
  return p;
}

}  // namespace pipeworks
