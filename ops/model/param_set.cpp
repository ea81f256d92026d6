// Layout, copies and name lookup for param_set.
#include "ops/model/param_set.hpp"

#include "base/result.hpp"

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

param_set param_set::clone() const {
  param_set p;
  p.data_ = data_.clone();
  p.entries_ = entries_;
  p.block_offsets_ = block_offsets_;
  p.first_block_ = first_block_;
  return p;
}

param_set param_set::zeros_like() const {
  param_set p;
  p.data_ = tensor(data_.shape(), data_.type());
  p.entries_ = entries_;
  p.block_offsets_ = block_offsets_;
  p.first_block_ = first_block_;
  return p;
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
