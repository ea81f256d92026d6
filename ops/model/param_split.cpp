// split_params and join_params: copies between a whole model's param_set and its stages', block
// by block, keeping names, shapes, block indices and dtype.
#include "ops/model/param_split.hpp"

#include <cstring>
#include <string>

namespace pipeworks {

namespace {

// The specs of block b of p, in arena order.
std::vector<param_spec> block_specs(const param_set& p, int b) {
  std::vector<param_spec> specs;
  for (const param_entry& e : p.entries())
    if (e.block == b) specs.push_back({e.name, e.shape});
  return specs;
}

// Copies the raw bytes of blocks [first, last) from `from` into `to` (both hold them, same dtype
// and layout within each block).
void copy_blocks(const param_set& from, param_set& to, int first, int last) {
  const std::size_t elem = dtype_size(from.type());
  for (int b = first; b < last; ++b) {
    const std::int64_t n = from.block_end(b) - from.block_begin(b);
    std::memcpy(to.arena().bytes() + static_cast<std::size_t>(to.block_begin(b)) * elem,
                from.arena().bytes() + static_cast<std::size_t>(from.block_begin(b)) * elem,
                static_cast<std::size_t>(n) * elem);
  }
}

std::string boundaries_string(const std::vector<int>& b) {
  std::string s = "{";
  for (std::size_t i = 0; i < b.size(); ++i) s += (i ? ", " : "") + std::to_string(b[i]);
  return s + "}";
}

}  // namespace

result<std::vector<param_set>> split_params(const param_set& whole,
                                            const std::vector<int>& boundaries) {
  const std::string shown = boundaries_string(boundaries);
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "[" + std::to_string(..).
  std::string range(1, '[');
  range.append(std::to_string(whole.first_block())).append(", ");
  range.append(std::to_string(whole.end_block())).append(")");
  if (boundaries.size() < 2)
    return make_error("stage boundaries " + shown + " name no stage: give at least a first and " +
                      "an end block, such as {" + std::to_string(whole.first_block()) + ", " +
                      std::to_string(whole.end_block()) + "}");
  if (boundaries.front() != whole.first_block() || boundaries.back() != whole.end_block())
    return make_error("stage boundaries " + shown + " must start at block " +
                      std::to_string(whole.first_block()) + " and end at block " +
                      std::to_string(whole.end_block()) + ", the parameters' blocks " + range);
  for (std::size_t s = 0; s + 1 < boundaries.size(); ++s)
    if (boundaries[s] >= boundaries[s + 1])
      return make_error("stage boundaries " + shown + " must increase strictly (stage " +
                        std::to_string(s) + " would get no blocks): every stage needs at least " +
                        "one block");
  std::vector<param_set> stages;
  stages.reserve(boundaries.size() - 1);
  for (std::size_t s = 0; s + 1 < boundaries.size(); ++s) {
    const int first = boundaries[s], last = boundaries[s + 1];
    std::vector<std::vector<param_spec>> specs;
    for (int b = first; b < last; ++b) specs.push_back(block_specs(whole, b));
    param_set stage(specs, first, whole.type());
    copy_blocks(whole, stage, first, last);
    stages.push_back(std::move(stage));
  }
  return stages;
}

result<param_set> join_params(const std::vector<param_snapshot>& stages) {
  if (stages.empty()) return make_error("join_params: no stages to join; pass at least one");
  for (std::size_t s = 0; s < stages.size(); ++s) {
    if (!stages[s])
      return make_error("join_params: stage " + std::to_string(s) + " has no parameters (null)");
    if (stages[s]->type() != stages[0]->type())
      return make_error("join_params: stage " + std::to_string(s) + " holds " +
                        std::string(dtype_name(stages[s]->type())) + " parameters, stage 0 " +
                        std::string(dtype_name(stages[0]->type())) + "; convert them to one dtype");
    if (s > 0 && stages[s]->first_block() != stages[s - 1]->end_block())
      return make_error(
          "join_params: stage " + std::to_string(s) + " starts at block " +
          std::to_string(stages[s]->first_block()) + " but stage " + std::to_string(s - 1) +
          " ends at block " + std::to_string(stages[s - 1]->end_block()) + " (" +
          (stages[s]->first_block() > stages[s - 1]->end_block() ? "a gap" : "an overlap") +
          "); pass the stages contiguous and in block order");
  }
  std::vector<std::vector<param_spec>> specs;
  for (const param_snapshot& p : stages)
    for (int b = p->first_block(); b < p->end_block(); ++b) specs.push_back(block_specs(*p, b));
  param_set whole(specs, stages.front()->first_block(), stages.front()->type());
  for (const param_snapshot& p : stages) copy_blocks(*p, whole, p->first_block(), p->end_block());
  return whole;
}

}  // namespace pipeworks
