// model<T> bookkeeping and the stage-range forward/backward loops.
#include "ops/model/model.hpp"

#include "base/result.hpp"

namespace pipeworks {

template <class T>
model<T>::model(std::string name, std::vector<std::unique_ptr<const block<T>>> blocks)
    : name_(std::move(name)), blocks_(std::move(blocks)) {}

template <class T>
param_set model<T>::make_params(int first, int last) const {
  if (last < 0) last = size();
  if (first < 0 || first > last || last > size())
    throw pipeworks_error("model " + name_ + ": block range [" + std::to_string(first) + ", " +
                          std::to_string(last) + ") is outside 0.." + std::to_string(size()));
  std::vector<std::vector<param_spec>> specs;
  for (int b = first; b < last; ++b) specs.push_back(at(b).params());
  return param_set(specs, first, dtype_of<T>());
}

template <class T>
param_set model<T>::init_params(std::uint64_t seed, int first, int last) const {
  param_set p = make_params(first, last);
  for (int b = p.first_block(); b < p.end_block(); ++b) at(b).init(p.block_values<T>(b), seed);
  return p;
}

template <class T>
std::vector<layer_cost> model<T>::costs() const {
  std::vector<layer_cost> c;
  for (const auto& b : blocks_) c.push_back(b->cost());
  return c;
}

template <class T>
std::int64_t model<T>::param_count() const {
  std::int64_t n = 0;
  for (const auto& b : blocks_)
    for (const auto& s : b->params()) n += numel(s.shape);
  return n;
}

template <class T>
stage_forward forward_blocks(const device_context& dev, const model<T>& m, const param_set& p,
                             tensor input, const microbatch_ctx& ctx) {
  input = dev.adopt(std::move(input));
  stage_forward r;
  r.saved.reserve(static_cast<std::size_t>(p.block_count()));
  for (int b = p.first_block(); b < p.end_block(); ++b) {
    block_forward f = m.at(b).forward(dev, p.block_data<T>(b), std::move(input), ctx);
    input = std::move(f.output);
    r.saved.push_back(std::move(f.saved));
  }
  r.output = std::move(input);
  return r;
}

template <class T>
void drop_recomputable(const model<T>& m, const param_set& p, std::vector<stash>& saved) {
  if (static_cast<int>(saved.size()) != p.block_count())
    throw pipeworks_error("a stage's stash has " + std::to_string(saved.size()) +
                          " blocks, its weights " + std::to_string(p.block_count()));
  for (int i = 0; i < p.block_count(); ++i) m.at(p.first_block() + i).drop_recomputable(saved[i]);
}

// The gradient coming into a stage, on its device (a loss block's dout stays a host scalar).
template <class T>
tensor adopt_dout(const device_context& dev, const model<T>& m, const param_set& p, tensor dout) {
  if (p.block_count() > 0 && m.at(p.end_block() - 1).is_loss()) return dout;
  return dev.adopt(std::move(dout));
}

template <class T>
tensor backward_blocks(const device_context& dev, const model<T>& m, const param_set& p,
                       param_set& g, std::vector<stash> saved, tensor dout,
                       const microbatch_ctx& ctx) {
  dout = adopt_dout(dev, m, p, std::move(dout));
  if (static_cast<int>(saved.size()) != p.block_count())
    throw pipeworks_error("backward_blocks: the stash has " + std::to_string(saved.size()) +
                          " blocks, the stage " + std::to_string(p.block_count()));
  for (int b = p.end_block() - 1; b >= p.first_block(); --b) {
    std::size_t i = static_cast<std::size_t>(b - p.first_block());
    dout = m.at(b).backward(dev, p.block_data<T>(b), g.block_data<T>(b), std::move(saved[i]),
                            std::move(dout), ctx);
  }
  return dout;
}

template <class T>
tensor backward_input_blocks(const device_context& dev, const model<T>& m, const param_set& p,
                             std::vector<stash> saved, tensor dout, const microbatch_ctx& ctx,
                             stage_deferred& later) {
  dout = adopt_dout(dev, m, p, std::move(dout));
  if (static_cast<int>(saved.size()) != p.block_count())
    throw pipeworks_error("backward_input_blocks: the stash has " + std::to_string(saved.size()) +
                          " blocks, the stage " + std::to_string(p.block_count()));
  later.blocks.clear();
  later.blocks.resize(saved.size());
  for (int b = p.end_block() - 1; b >= p.first_block(); --b) {
    std::size_t i = static_cast<std::size_t>(b - p.first_block());
    dout = m.at(b).backward_input(dev, p.block_data<T>(b), std::move(saved[i]), std::move(dout),
                                  ctx, later.blocks[i]);
  }
  return dout;
}

template <class T>
void backward_weight_blocks(const device_context& dev, const model<T>& m, const param_set& p,
                            param_set& g, stage_deferred later) {
  if (static_cast<int>(later.blocks.size()) != p.block_count())
    throw pipeworks_error("backward_weight_blocks: " + std::to_string(later.blocks.size()) +
                          " deferred blocks, the stage has " + std::to_string(p.block_count()));
  for (int b = p.end_block() - 1; b >= p.first_block(); --b) {
    std::size_t i = static_cast<std::size_t>(b - p.first_block());
    m.at(b).backward_weight(dev, p.block_data<T>(b), g.block_data<T>(b),
                            std::move(later.blocks[i]));
  }
}

template <class T>
T loss_value(const tensor& loss) {
  return loss.data<T>()[0];
}

template <class T>
tensor scalar_tensor(T v) {
  tensor t({1}, dtype_of<T>());
  t.data<T>()[0] = v;
  return t;
}

#define PIPEWORKS_INSTANTIATE(T)                                                         \
  template class model<T>;                                                               \
  template stage_forward forward_blocks<T>(const device_context&, const model<T>&,       \
                                           const param_set&, tensor,                     \
                                           const microbatch_ctx&);                       \
  template void drop_recomputable<T>(const model<T>&, const param_set&, std::vector<stash>&); \
  template tensor backward_blocks<T>(const device_context&, const model<T>&,             \
                                     const param_set&, param_set&, std::vector<stash>,   \
                                     tensor, const microbatch_ctx&);                     \
  template tensor backward_input_blocks<T>(const device_context&, const model<T>&,       \
                                           const param_set&, std::vector<stash>, tensor, \
                                           const microbatch_ctx&, stage_deferred&);      \
  template void backward_weight_blocks<T>(const device_context&, const model<T>&,        \
                                          const param_set&, param_set&, stage_deferred); \
  template T loss_value<T>(const tensor&);                                               \
  template tensor scalar_tensor<T>(T);
PIPEWORKS_INSTANTIATE(float)
PIPEWORKS_INSTANTIATE(double)
#undef PIPEWORKS_INSTANTIATE

}  // namespace pipeworks
