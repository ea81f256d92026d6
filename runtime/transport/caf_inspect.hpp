// CAF serialisation of the runtime's messages: an `inspect` for every message and every value
// inside one. A tensor crosses as a small header (dtype, shape) plus its bytes written raw, so
// NaN, infinities, -0 and denormals arrive bit for bit (CAF 0.17 would mangle them as floats);
// inside one process nothing is serialised and payloads are handed over by reference.
#pragma once
#include <caf/all.hpp>

#include <bit>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/model/block.hpp"
#include "ops/model/param_set.hpp"
#include "ops/tensor_payload.hpp"
#include "ops/train/trainer.hpp"
#include "runtime/exec/chunk_reducer.hpp"
#include "runtime/exec/executor.hpp"
#include "runtime/exec/messages.hpp"
#include "runtime/timeline.hpp"
#include "runtime/transport/wire_tickets.hpp"

namespace pipeworks {
namespace transport {

template <class Inspector>
constexpr bool saves = std::is_base_of_v<caf::serializer, Inspector>;
template <class Inspector>
constexpr bool loads = std::is_base_of_v<caf::deserializer, Inspector>;
// CAF's other inspectors (to_string) return void and see only the headers.
template <class Inspector>
constexpr bool serial = saves<Inspector> || loads<Inspector>;

// The most bytes one tensor may claim in a message (CAF's messages stop near 2^31 bytes).
inline constexpr std::uint64_t max_tensor_bytes = std::uint64_t{1} << 31;

// Whether a reader still holds at least n bytes: a length read from the network is checked
// against what arrived before anything that large is allocated.
template <class Inspector>
bool holds(Inspector& f, std::uint64_t n) {
  if constexpr (loads<Inspector>) {
    if (auto* b = dynamic_cast<caf::binary_deserializer*>(&f)) return b->remaining() >= n;
  }
  return true;
}

inline caf::error bad(const std::string& why) {
  return caf::make_error(caf::sec::invalid_argument, "pipeworks: " + why);
}

// A double or a list of doubles by their bits: CAF 0.17 writes doubles through pack754, which turns
// -0 into 0 and mangles NaN, infinities and denormals (notes/distributed-anchors.md, 1.3).
struct exact {
  double* x;
};
struct exact_list {
  std::vector<double>* xs;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exact& e) {
  std::uint64_t bits = std::bit_cast<std::uint64_t>(*e.x);
  if constexpr (!serial<Inspector>) {
    return f(*e.x);
  } else {
    if (auto err = f(bits)) return err;
    if constexpr (loads<Inspector>) *e.x = std::bit_cast<double>(bits);
    return caf::none;
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exact_list& e) {
  std::vector<std::uint64_t> bits;
  if constexpr (!loads<Inspector>)
    for (double x : *e.xs) bits.push_back(std::bit_cast<std::uint64_t>(x));
  if constexpr (!serial<Inspector>) {
    return f(*e.xs);
  } else {
    if (auto err = f(bits)) return err;
    if constexpr (loads<Inspector>) {
      e.xs->clear();
      for (std::uint64_t b : bits) e.xs->push_back(std::bit_cast<double>(b));
    }
    return caf::none;
  }
}

// A tensor_payload: dtype, shape, then its bytes, or, under a wire link's outbox, a mark that
// they travel beside the message (over UCX). Other inspectors (to_string) see the header.
template <class Inspector>
typename Inspector::result_type inspect_payload(Inspector& f, tensor_payload& x) {
  std::uint8_t type = static_cast<std::uint8_t>(x.type());
  shape_t shape = x.shape();
  bool present = !x.empty();
  if constexpr (!serial<Inspector>) {
    return f(caf::meta::type_name("pipeworks.tensor"), present, type, shape);
  } else {
    if (auto err = f(caf::meta::type_name("pipeworks.tensor"), present, type, shape)) return err;
    if constexpr (saves<Inspector>) {
      if (!present) return caf::none;
      size_t n = x.nbytes();
      std::uint8_t beside = outbox != nullptr && n > 0 ? 1 : 0;  // 1: sent beside the bytes
      if (auto err = f(beside)) return err;
      if (beside) {
        outbox->payloads.push_back(x);  // shares the buffer: no copy
        return caf::none;
      }
      if (auto err = f.begin_sequence(n)) return err;
      if (n > 0)
        if (auto err = f.apply_raw(n, const_cast<std::byte*>(x.bytes().data()))) return err;
      return f.end_sequence();
    } else {
      if (!present) {
        x = tensor_payload{};
        return caf::none;
      }
      if (type > static_cast<std::uint8_t>(dtype::i32))
        return bad("a tensor of unknown dtype " + std::to_string(type));
      std::uint64_t claimed = dtype_size(static_cast<dtype>(type));
      for (std::int64_t d : shape) {
        if (d < 0 || (d > 0 && claimed > max_tensor_bytes / static_cast<std::uint64_t>(d)))
          return bad("a tensor of shape " + shape_string(shape) + " is larger than a message");
        claimed *= static_cast<std::uint64_t>(d);
      }
      std::uint8_t beside = 0;
      if (auto err = f(beside)) return err;
      if (beside > 1) return bad("a tensor that is neither inline nor beside the message");
      if (beside) {
        if (inbox == nullptr || inbox->next >= inbox->payloads.size())
          return bad("a tensor said to travel beside the message, which did not arrive");
        tensor_payload& got = inbox->payloads[inbox->next++];
        if (got.type() != static_cast<dtype>(type) || got.shape() != shape)
          return bad("a tensor of shape " + shape_string(shape) +
                     " arrived beside the message as one of shape " + shape_string(got.shape()));
        x = std::move(got);
        return caf::none;
      }
      size_t n = 0;
      if (auto err = f.begin_sequence(n)) return err;
      if (n != claimed)
        return bad("a tensor of shape " + shape_string(shape) + " carries " + std::to_string(n) +
                   " bytes, not " + std::to_string(claimed));
      if (!holds(f, n)) return bad("a tensor whose bytes did not all arrive");
      auto made = tensor_payload::allocate(static_cast<dtype>(type), shape);
      if (!made) return bad(made.message());
      if (n > 0)
        if (auto err = f.apply_raw(n, made->writable_bytes().data())) return err;
      if (auto err = f.end_sequence()) return err;
      x = std::move(*made);
      return caf::none;
    }
  }
}

// An owned tensor (targets, stashes) crosses as a payload.
template <class Inspector>
typename Inspector::result_type inspect_tensor(Inspector& f, std::shared_ptr<const tensor>& x) {
  if constexpr (!serial<Inspector>) {
    shape_t shape = x ? x->shape() : shape_t{};
    return f(caf::meta::type_name("pipeworks.tensor"), shape);
  } else {
    tensor_payload p;
    if constexpr (saves<Inspector>) {
      if (x) p = tensor_payload(x->clone());
    }
    if (auto err = inspect_payload(f, p)) return err;
    if constexpr (loads<Inspector>) {
      x = p.empty() ? nullptr : std::make_shared<const tensor>(p.take());
    }
    return caf::none;
  }
}

// A weight version or a gradient: its layout, then its arena as a payload. Null crosses as null.
template <class Inspector>
typename Inspector::result_type inspect_params(Inspector& f, std::shared_ptr<const param_set>& x) {
  bool present = x != nullptr;
  if constexpr (!serial<Inspector>) {
    std::int64_t values = x ? x->size() : 0;
    return f(caf::meta::type_name("pipeworks.params"), present, values);
  } else {
    std::vector<std::string> names;
    std::vector<shape_t> shapes;
    std::vector<std::int64_t> offsets;
    std::vector<std::int32_t> blocks;
    std::vector<std::int64_t> block_offsets;
    std::int32_t first_block = 0;
    tensor_payload arena;
    if constexpr (saves<Inspector>) {
      if (present) {
        for (const param_entry& e : x->entries()) {
          names.push_back(e.name);
          shapes.push_back(e.shape);
          offsets.push_back(e.offset);
          blocks.push_back(e.block);
        }
        block_offsets = x->block_offsets();
        first_block = x->first_block();
        arena = tensor_payload(x->arena().clone());
      }
    }
    if (auto err = f(caf::meta::type_name("pipeworks.params"), present, names, shapes, offsets,
                     blocks, block_offsets, first_block))
      return err;
    if (auto err = inspect_payload(f, arena)) return err;
    if constexpr (loads<Inspector>) {
      if (!present) {
        x = nullptr;
        return caf::none;
      }
      if (names.size() != shapes.size() || names.size() != offsets.size() ||
          names.size() != blocks.size())
        return bad("a parameter set whose name, shape, offset and block lists differ in length");
      std::vector<param_entry> entries;
      for (std::size_t i = 0; i < names.size(); ++i)
        entries.push_back(param_entry{std::move(names[i]), std::move(shapes[i]), offsets[i], blocks[i]});
      auto made = param_set::from_parts(std::move(entries), std::move(block_offsets), first_block,
                                        arena.take());
      if (!made) return bad("a parameter set: " + made.message());
      x = std::make_shared<const param_set>(std::move(*made));
    }
    return caf::none;
  }
}

// A message of plain fields that, when it is (de)serialised, carries one more part as bytes (a
// tensor or a parameter set): `tail()` inspects that part. A printing inspector sees the fields.
template <class Inspector, class Tail, class... Fields>
typename Inspector::result_type fields_then(Inspector& f, const char* name, Tail tail,
                                            Fields&... fields) {
  if constexpr (!serial<Inspector>) {
    return f(caf::meta::type_name(name), fields...);
  } else {
    if (auto err = f(caf::meta::type_name(name), fields...)) return err;
    return tail();
  }
}

}  // namespace transport

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor_payload& x) {
  return transport::inspect_payload(f, x);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, microbatch_ctx& x) {
  return transport::fields_then(
      f, "pipeworks.microbatch_ctx", [&] { return transport::inspect_tensor(f, x.targets); },
      x.batch);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, action& x) {
  std::uint8_t kind = static_cast<std::uint8_t>(x.kind);
  int stage = x.stage;  // a bit-field in memory, an int on the wire
  if constexpr (!transport::serial<Inspector>) {
    return f(caf::meta::type_name("pipeworks.action"), stage, kind, x.microbatch);
  } else {
    if (auto err = f(caf::meta::type_name("pipeworks.action"), stage, kind, x.microbatch))
      return err;
    if constexpr (transport::loads<Inspector>) {
      if (kind > static_cast<std::uint8_t>(action_kind::step))
        return transport::bad("an unknown action kind");
      if (stage < -max_action_stage - 1 || stage > max_action_stage)
        return transport::bad("an action stage out of range");
      x.kind = static_cast<action_kind>(kind);
      x.stage = stage;
    }
    return caf::none;
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, activation_msg& x) {
  return f(caf::meta::type_name("pipeworks.activation_msg"), x.replica, x.stage, x.microbatch,
           x.version, x.data, x.ctx);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gradient_msg& x) {
  return f(caf::meta::type_name("pipeworks.gradient_msg"), x.replica, x.stage, x.microbatch, x.data);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, credit_msg& x) {
  return f(caf::meta::type_name("pipeworks.credit_msg"), x.replica, x.stage, x.forward);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, input_request& x) {
  return f(caf::meta::type_name("pipeworks.input_request"), x.replica, x.microbatch);
}

namespace transport {
// A reduce_kind on the wire: one byte, refused when it names no kind.
template <class Inspector>
typename Inspector::result_type reduce_kind_then(std::uint8_t byte, reduce_kind& kind, auto params) {
  if constexpr (loads<Inspector>) {
    if (byte > static_cast<std::uint8_t>(reduce_kind::weights)) return bad("an unknown reduce kind");
    kind = static_cast<reduce_kind>(byte);
  }
  return params();
}
}  // namespace transport

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reduce_request& x) {
  std::uint8_t kind = static_cast<std::uint8_t>(x.kind);
  return transport::fields_then(
      f, "pipeworks.reduce_request",
      [&] {
        return transport::reduce_kind_then<Inspector>(kind, x.kind,
                                           [&] { return transport::inspect_params(f, x.grads); });
      },
      x.stage, x.replica, x.step, kind);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reduce_result& x) {
  std::uint8_t kind = static_cast<std::uint8_t>(x.kind);
  transport::exact_list sq{&x.squares};
  return transport::fields_then(
      f, "pipeworks.reduce_result",
      [&] {
        return transport::reduce_kind_then<Inspector>(kind, x.kind,
                                           [&] { return transport::inspect_params(f, x.sum); });
      },
      x.stage, x.step, kind, sq);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, reduce_chunk& x) {
  return f(caf::meta::type_name("pipeworks.reduce_chunk"), x.stage, x.step, x.replica, x.chunk,
           x.kind, x.data);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, gather_chunk& x) {
  return f(caf::meta::type_name("pipeworks.gather_chunk"), x.stage, x.step, x.chunk, x.kind,
           x.data);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, loss_report& x) {
  transport::exact loss{&x.loss};
  return f(caf::meta::type_name("pipeworks.loss_report"), x.replica, x.microbatch, loss);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, norm_request& x) {
  transport::exact_list sq{&x.tensor_sq};
  return f(caf::meta::type_name("pipeworks.norm_request"), x.replica, x.stage, x.step, sq);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, norm_result& x) {
  transport::exact sq{&x.sq};
  return f(caf::meta::type_name("pipeworks.norm_result"), x.replica, x.step, sq);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_report& x) {
  transport::exact grad_sq{&x.grad_sq}, lr{&x.lr};
  return transport::fields_then(
      f, "pipeworks.step_report", [&] { return transport::inspect_params(f, x.weights); },
      x.stage, x.replica, x.step, grad_sq, lr);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, marker_msg& x) {
  return f(caf::meta::type_name("pipeworks.marker_msg"), x.from_rank, x.step);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, timeline_event& x) {
  std::uint8_t stream = static_cast<std::uint8_t>(x.stream);
  transport::exact start{&x.start}, end{&x.end};
  if constexpr (!transport::serial<Inspector>) {
    return f(caf::meta::type_name("pipeworks.timeline_event"), x.rank, stream, x.act, start, end,
             x.version, x.flow_id, x.bytes);
  } else {
    if (auto err = f(caf::meta::type_name("pipeworks.timeline_event"), x.rank, stream, x.act,
                     start, end, x.version, x.flow_id, x.bytes))
      return err;
    if constexpr (transport::loads<Inspector>) {
      if (stream > static_cast<std::uint8_t>(stream_kind::recv))
        return transport::bad("an unknown stream");
      if (x.bytes < -1) return transport::bad("negative bytes");  // -1: not recorded
      x.stream = static_cast<stream_kind>(stream);
    }
    return caf::none;
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trace_batch& x) {
  return f(caf::meta::type_name("pipeworks.trace_batch"), x.events);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, timeline& x) {
  return f(caf::meta::type_name("pipeworks.timeline"), x.title, x.ranks, x.devices_per_replica,
           x.events);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_stats& x) {
  return f(caf::meta::type_name("pipeworks.stage_stats"), x.stage, x.peak_versions,
           x.peak_inflight, x.peak_activation_bytes, x.peak_buffered, x.rank_peak_inflight,
           x.rank_peak_activation_bytes, x.steps, x.device_peak_bytes, x.optimizer_bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_metrics& x) {
  transport::exact loss{&x.loss}, lr{&x.lr}, grad_norm{&x.grad_norm}, rate{&x.samples_per_s},
      step_s{&x.step_s}, elapsed_s{&x.elapsed_s};
  return f(caf::meta::type_name("pipeworks.step_metrics"), x.step, x.steps, loss, lr, grad_norm,
           rate, step_s, elapsed_s, x.samples);
}

}  // namespace pipeworks
