// Layout, copies and name lookup for param_set.
#include "ops/model/param_set.hpp"

#include <cmath>

#include "base/result.hpp"
#include "ops/device/device_context.hpp"
#include "ops/device/device_memory.hpp"

namespace pipeworks {

param_set::param_set(const std::vector<std::vector<param_spec>>& block_specs, int first_block,
                     dtype dt)
    : first_block_(first_block) {
  std::int64_t offset = 0;
  for (std::size_t b = 0; b < block_specs.size(); ++b) {
    for (const auto& s : block_specs[b]) {
      entries_.push_back({s.name, s.shape, offset, first_block + static_cast<int>(b)});
      offset += numel(s.shape);
    }
    block_offsets_.push_back(offset);
  }
  data_ = tensor({offset}, dt);
}

result<param_set> param_set::from_parts(std::vector<param_entry> entries,
                                        std::vector<std::int64_t> block_offsets, int first_block,
                                        tensor arena) {
  if (arena.type() != dtype::f32 && arena.type() != dtype::f64)
    return make_error("parameters must be F32 or F64, not " + std::string(dtype_name(arena.type())));
  if (arena.rank() != 1) return make_error("the parameter arena must be one-dimensional");
  const std::int64_t n = arena.numel();
  if (block_offsets.empty() || block_offsets.front() != 0 || block_offsets.back() != n)
    return make_error("the block offsets must run from 0 to the arena's " + std::to_string(n) +
                      " values");
  for (std::size_t b = 1; b < block_offsets.size(); ++b)
    if (block_offsets[b] < block_offsets[b - 1]) return make_error("the block offsets must not decrease");
  const int blocks = static_cast<int>(block_offsets.size()) - 1;
  std::int64_t at = 0;
  for (const param_entry& e : entries) {
    std::int64_t count = 1;
    for (std::int64_t d : e.shape) {
      if (d < 0 || (d > 0 && count > n / d)) return make_error("tensor " + e.name + " has a bad shape");
      count *= d;
    }
    const int b = e.block - first_block;
    if (b < 0 || b >= blocks || e.offset != at || e.offset < block_offsets[static_cast<std::size_t>(b)] ||
        e.offset + count > block_offsets[static_cast<std::size_t>(b) + 1])
      return make_error("tensor " + e.name + " does not lie where the layout says (offset " +
                        std::to_string(e.offset) + ", block " + std::to_string(e.block) + ")");
    at += count;
  }
  if (at != n) return make_error("the tensors cover " + std::to_string(at) + " of the arena's " +
                                 std::to_string(n) + " values");
  param_set p;
  p.data_ = std::move(arena);
  p.entries_ = std::move(entries);
  p.block_offsets_ = std::move(block_offsets);
  p.first_block_ = first_block;
  return p;
}

param_set param_set::clone() const {
  param_set p;
  p.data_ = data_.clone();
  p.entries_ = entries_;
  p.block_offsets_ = block_offsets_;
  p.first_block_ = first_block_;
  return p;
}

param_set param_set::zeros_like() const { return with_arena(data_.zeros_like()); }

param_set param_set::uninitialized_like() const { return with_arena(data_.uninitialized_like()); }

param_set param_set::on(const device_context& d) const {
  // The clone is ordered on the arena's own stream, after the work that made it; d's stream
  // copies it after the event that marks the clone complete, and adopt keeps it until then.
  tensor copy = data_.clone();
  if (copy.where().kind == device_kind::cuda && copy.stream() != d.stream())
    copy.set_ready(record_event(copy.where(), copy.stream()));
  return with_arena(d.adopt(std::move(copy)));
}

param_set param_set::copied_to(const device_context& d, std::shared_ptr<const void> keeper) const {
  return with_arena(d.copy_of(data_, std::move(keeper)));
}

param_snapshot on_host(const param_snapshot& p) {
  if (!p || p->where().kind == device_kind::cpu) return p;
  return std::make_shared<const param_set>(p->on(host_context()));
}

param_set param_set::with_arena(tensor data) const {
  param_set p;
  p.data_ = std::move(data);
  p.entries_ = entries_;
  p.block_offsets_ = block_offsets_;
  p.first_block_ = first_block_;
  return p;
}

const param_entry* param_set::first_non_finite() const {
  auto scan = [&](auto typed) -> const param_entry* {
    using T = decltype(typed);
    for (const param_entry& e : entries_)
      for (T x : values<T>(e))
        if (!std::isfinite(x)) return &e;
    return nullptr;
  };
  return type() == dtype::f64 ? scan(double{}) : scan(float{});
}

const param_entry* param_set::find(std::string_view name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

const param_entry& param_set::at(std::string_view name) const {
  if (const param_entry* e = find(name)) return *e;
  throw pipeworks_error("param_set: no tensor named '" + std::string(name) + "'");
}

bool param_set::same_layout(const param_set& o) const {
  if (type() != o.type() || first_block_ != o.first_block_ || block_offsets_ != o.block_offsets_ ||
      entries_.size() != o.entries_.size())
    return false;
  for (std::size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].name != o.entries_[i].name || entries_[i].shape != o.entries_[i].shape)
      return false;
  return true;
}

}  // namespace pipeworks
