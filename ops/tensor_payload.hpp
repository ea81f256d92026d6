// tensor_payload: a tensor in transit between actors or processes: one contiguous byte buffer plus
// a small header (dtype, shape). Copies share the buffer read-only, so a message can be copied
// without copying tensor data; take() hands the buffer back as a tensor, copying only if another
// copy still holds it. Serialisers write the header and the bytes as they are (bit for bit). A GPU
// tensor travels only between ranks of one process on the same GPU (its bytes are not host
// memory: bytes() refuses it); anything else crosses to the host first.
#pragma once
#include <cstddef>
#include <memory>
#include <span>

#include "base/result.hpp"
#include "ops/tensor.hpp"

namespace pipeworks {

class tensor_payload {
 public:
  tensor_payload() = default;
  // Takes the tensor's buffer over; no copy.
  explicit tensor_payload(tensor t);

  // The tensor: the same buffer when no other payload shares it, else a copy. Leaves this empty.
  tensor take();
  // A copy of the tensor, leaving this payload as it is.
  tensor copy() const;

  bool empty() const { return data_ == nullptr; }
  dtype type() const { return type_; }
  const shape_t& shape() const { return shape_; }
  device where() const { return device_; }
  std::size_t nbytes() const;
  // The bytes of a host payload; throws pipeworks_error for a GPU one.
  std::span<const std::byte> bytes() const;
  // This payload on the host: itself when it is there, else a copy.
  tensor_payload on_host() const;

  // For deserialisers: a buffer for (type, shape) on the CPU, not yet filled: fill every byte
  // through writable_bytes() before the payload is shared. An error for a negative dimension or more
  // than 2^40 bytes.
  static result<tensor_payload> allocate(dtype type, shape_t shape);
  // A read-only view of (type, shape) values at `data`, which `owner` keeps alive: no copy. Never
  // write through it; take() copies it unless the view is the last thing holding `owner`.
  static tensor_payload view(std::shared_ptr<const void> owner, const std::byte* data, dtype type,
                             shape_t shape);
  std::span<std::byte> writable_bytes();
  // The same host bytes read as (type, shape), no copy (a buffer received before its shape was
  // known); an error unless the byte counts match.
  result<tensor_payload> as(dtype type, shape_t shape) const;

 private:
  dtype type_ = dtype::f32;
  shape_t shape_;
  device device_;
  std::shared_ptr<std::byte> data_;
  std::shared_ptr<caching_allocator> memory_;  // a GPU payload's allocator and stream
  void* stream_ = nullptr;
  std::shared_ptr<void> ready_;  // the tensor's ready event (tensor::ready)
};

}  // namespace pipeworks
