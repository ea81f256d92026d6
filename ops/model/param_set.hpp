// param_set: the parameters of a contiguous range of blocks (a stage) in one flat arena, with
// named views (Hugging Face names) and shapes. A weight version is a
// std::shared_ptr<const param_set>; gradients use the same layout.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "ops/tensor.hpp"

namespace pipeworks {

class device_context;

struct param_spec {
  std::string name;  // e.g. "transformer.h.0.attn.c_attn.weight"
  shape_t shape;
};

struct param_entry {
  std::string name;
  shape_t shape;
  std::int64_t offset = 0;  // in elements from the start of the arena
  int block = 0;            // the model's block index that owns it
  std::int64_t numel() const { return pipeworks::numel(shape); }
};

class param_set {
 public:
  param_set() = default;
  // A zero-filled arena: block_specs[i] lists block first_block + i's tensors, in arena order.
  param_set(const std::vector<std::vector<param_spec>>& block_specs, int first_block, dtype dt);
  param_set(param_set&&) noexcept = default;
  param_set& operator=(param_set&&) noexcept = default;

  // A param_set from its parts, for deserialisers: the entries must tile the arena in order,
  // block by block, and the arena must hold f32 or f64 values; an error says what does not fit.
  static result<param_set> from_parts(std::vector<param_entry> entries,
                                      std::vector<std::int64_t> block_offsets, int first_block,
                                      tensor arena);
  const std::vector<std::int64_t>& block_offsets() const { return block_offsets_; }

  param_set clone() const;       // a deep copy: the way to make a new version
  param_set zeros_like() const;  // the same layout, all zeros (a gradient buffer)
  param_set uninitialized_like() const;  // the same layout, values unset: write every one
  // A copy on d's device, ordered on its stream (the explicit crossing of devices): a GPU arena of
  // another stream is read on its own stream, after the work queued there, and then copied.
  param_set on(const device_context& d) const;
  // A copy on d's device and stream of this set, which `keeper` owns and which is only read: a
  // GPU arena of another stream is copied after its ready event (hand_over), and keeper is held
  // until the copy is done (a shared snapshot: a reduced sum, a replica's gradient).
  param_set copied_to(const device_context& d, std::shared_ptr<const void> keeper) const;
  device where() const { return data_.where(); }

  int first_block() const { return first_block_; }
  int end_block() const { return first_block_ + block_count(); }
  int block_count() const { return static_cast<int>(block_offsets_.size()) - 1; }
  dtype type() const { return data_.type(); }
  std::int64_t size() const { return data_.numel(); }  // elements in the arena
  std::size_t nbytes() const { return data_.nbytes(); }

  const std::vector<param_entry>& entries() const { return entries_; }
  // nullptr when no tensor has that name.
  const param_entry* find(std::string_view name) const;
  // The first tensor holding a NaN or infinite value, or nullptr when every value is finite.
  const param_entry* first_non_finite() const;
  // Elements [begin, end) of the arena that belong to block b (a global block index).
  std::int64_t block_begin(int b) const { return block_offsets_.at(b - first_block_); }
  std::int64_t block_end(int b) const { return block_offsets_.at(b - first_block_ + 1); }
  // True when both have the same names, shapes, order, block range and dtype.
  bool same_layout(const param_set& o) const;

  template <class T>
  std::span<T> values() {
    return data_.span<T>();
  }
  template <class T>
  std::span<const T> values() const {
    return data_.span<T>();
  }
  template <class T>
  T* block_data(int b) {
    return data_.data<T>() + block_begin(b);
  }
  template <class T>
  const T* block_data(int b) const {
    return data_.data<T>() + block_begin(b);
  }
  template <class T>
  std::span<T> block_values(int b) {
    return {block_data<T>(b), static_cast<std::size_t>(block_end(b) - block_begin(b))};
  }
  template <class T>
  std::span<const T> block_values(int b) const {
    return {block_data<T>(b), static_cast<std::size_t>(block_end(b) - block_begin(b))};
  }
  template <class T>
  std::span<T> values(const param_entry& e) {
    return {data_.data<T>() + e.offset, static_cast<std::size_t>(e.numel())};
  }
  template <class T>
  std::span<const T> values(const param_entry& e) const {
    return {data_.data<T>() + e.offset, static_cast<std::size_t>(e.numel())};
  }
  // A named view; throws pipeworks_error for an unknown name.
  template <class T>
  tensor_view<T> view(std::string_view name) {
    const param_entry& e = at(name);
    return {data_.data<T>() + e.offset, e.shape};
  }
  template <class T>
  tensor_view<const T> view(std::string_view name) const {
    const param_entry& e = at(name);
    return {data_.data<T>() + e.offset, e.shape};
  }

  // The raw arena, for checkpoints and messages.
  const tensor& arena() const { return data_; }
  tensor& arena() { return data_; }

 private:
  // This layout over the given arena (of this arena's shape and dtype).
  param_set with_arena(tensor data) const;
  const param_entry& at(std::string_view name) const;

  tensor data_;
  std::vector<param_entry> entries_;
  std::vector<std::int64_t> block_offsets_{0};
  int first_block_ = 0;
};

// Each spec's offset within its block's slice, in order, plus the total at the end.
inline std::vector<std::int64_t> spec_offsets(const std::vector<param_spec>& specs) {
  std::vector<std::int64_t> off{0};
  for (const auto& s : specs) off.push_back(off.back() + numel(s.shape));
  return off;
}

// sum += g, element by element (same layout; the caller checks it).
template <class T>
void add_values(param_set& sum, const param_set& g) {
  std::span<T> s = sum.values<T>();
  std::span<const T> x = g.values<T>();
  for (std::size_t i = 0; i < s.size(); ++i) s[i] += x[i];
}

// An immutable weight version of a stage.
using param_snapshot = std::shared_ptr<const param_set>;

// p itself when it is on the host, else a host copy of it (for checkpoints and the driver).
param_snapshot on_host(const param_snapshot& p);

}  // namespace pipeworks
