// profile_model: one block at a time, forward then backward, timed with a steady clock; the
// median of `repeats` runs after a warm-up. Under recomputation the backward's time includes what
// the runtime's backward makes again (selective: the dropped tensors; full: the whole forward).
#include "partition/profiler.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

namespace pipeworks {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

template <class T>
result<model_profile> profile_model(const model<T>& m, const minibatch& sample,
                                    const profiler_options& options) {
  if (options.repeats < 1 || options.repeats > max_profile_repeats)
    return make_error("profile: repeats must be in 1.." + std::to_string(max_profile_repeats) +
                      ", not " + std::to_string(options.repeats));
  if (sample.inputs.rank() < 1 || sample.inputs.dim(0) < 1)
    return make_error("profile: the sample microbatch is empty");
  model_profile out;
  out.model = m.name();
  out.microbatch = sample.inputs.dim(0);
  const device_context& dev = options.device ? *options.device : host_context();
  const param_set weights = m.init_params(1).on(dev);
  microbatch mb = make_microbatch(sample, 0, sample.inputs.dim(0));
  tensor input = dev.adopt(std::move(mb.input));
  const bool full = options.recompute == recompute_mode::full;
  out.recompute = options.recompute;
  const std::int64_t state_copies = options.optimizer == optimizer_kind::adamw ? 2 : 1;
  for (int b = 0; b < m.size(); ++b) {
    const block<T>& blk = m.at(b);
    const T* w = weights.block_data<T>(b);
    param_set grads = weights.zeros_like();
    T* dw = grads.block_data<T>(b);
    layer_profile lp;
    lp.name = blk.name();
    lp.param_bytes = (weights.block_end(b) - weights.block_begin(b)) * static_cast<std::int64_t>(sizeof(T));
    lp.optimizer_bytes = state_copies * lp.param_bytes;
    for (const param_entry& e : weights.entries())  // ZeRO shares whole tensors out
      if (e.block == b)
        lp.largest_optimizer_bytes = std::max(
            lp.largest_optimizer_bytes, state_copies * e.numel() * static_cast<std::int64_t>(sizeof(T)));
    std::vector<double> fwd, bwd;
    tensor next;
    for (int rep = 0; rep <= options.repeats; ++rep) {
      tensor in = input.clone();
      tensor again = full ? input.clone() : tensor();  // full: the forward's input, kept
      dev.wait();  // each pass is timed to the end of its own work on the device
      auto t0 = std::chrono::steady_clock::now();
      block_forward f = blk.forward(dev, w, std::move(in), mb.ctx);
      dev.wait();
      const double f_ms = ms_since(t0);
      // selective: the stash the runtime keeps; backward makes the rest again (timed there)
      if (options.recompute == recompute_mode::selective) blk.drop_recomputable(f.saved);
      std::int64_t saved = 0;
      for (const tensor& t : f.saved.saved)  // an empty tensor (one dropped) holds nothing
        if (!t.empty()) saved += static_cast<std::int64_t>(t.nbytes());
      tensor dout = blk.is_loss() ? scalar_tensor<T>(T(1)) : tensor(f.output.shape(), f.output.type());
      if (!blk.is_loss()) {
        std::fill_n(dout.data<T>(), dout.numel(), T(1e-3));
        dout = dev.adopt(std::move(dout));
      }
      dev.wait();
      t0 = std::chrono::steady_clock::now();
      if (full) {  // the backward runs the forward again first, as the runtime's does
        block_forward redo = blk.forward(dev, w, std::move(again), mb.ctx);
        f.saved = std::move(redo.saved);
      }
      blk.backward(dev, w, dw, std::move(f.saved), std::move(dout), mb.ctx);
      dev.wait();
      const double b_ms = ms_since(t0);
      if (rep == 0) {  // the warm-up run: sizes, and the next block's input
        lp.saved_bytes = saved;
        lp.activation_bytes = static_cast<std::int64_t>(f.output.nbytes());
        next = std::move(f.output);
        continue;
      }
      fwd.push_back(f_ms);
      bwd.push_back(b_ms);
    }
    lp.fwd_ms = median(fwd);
    lp.bwd_ms = median(bwd);
    out.layers.push_back(std::move(lp));
    input = std::move(next);
  }
  return out;
}

template result<model_profile> profile_model<float>(const model<float>&, const minibatch&,
                                                    const profiler_options&);
template result<model_profile> profile_model<double>(const model<double>&, const minibatch&,
                                                     const profiler_options&);

}  // namespace pipeworks
