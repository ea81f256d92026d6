// The tensors a message sends beside its CAF bytes (over UCX): while a wire link serialises a
// message it sets `outbox`, and each tensor goes there instead of into the bytes; while it reads
// one back it sets `inbox`, the tensors that arrived, which the reader takes in the same order.
#pragma once
#include <cstddef>
#include <vector>

#include "ops/tensor_payload.hpp"

namespace pipeworks::transport {

struct wire_outbox {
  std::vector<tensor_payload> payloads;  // in the order the serialiser met them
};

struct wire_inbox {
  std::vector<tensor_payload> payloads;  // what arrived, in the sender's order
  std::size_t next = 0;                  // the next one to take
};

// Set on the serialising thread only for the span of one message.
inline thread_local wire_outbox* outbox = nullptr;
inline thread_local wire_inbox* inbox = nullptr;

}  // namespace pipeworks::transport
