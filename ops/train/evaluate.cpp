// Batched loss and accuracy evaluation over the whole model.
#include "ops/train/evaluate.hpp"

#include <algorithm>

namespace pipeworks {
namespace {

template <class T>
status check_args(const model<T>& m, const param_set& p, const minibatch& data,
                  std::int64_t batch) {
  if (batch < 1) return make_error("evaluation batch must be at least 1");
  if (p.first_block() != 0 || p.end_block() != m.size())
    return make_error("evaluation needs the parameters of the whole model");
  if (data.inputs.rank() < 1 || data.inputs.dim(0) < 1) return make_error("no samples to evaluate");
  if (data.targets.rank() < 1 || data.targets.dim(0) != data.inputs.dim(0))
    return make_error("evaluation targets do not match the inputs");
  return {};
}

}  // namespace

template <class T>
result<double> mean_loss(const model<T>& m, const param_set& p, const minibatch& data,
                         std::int64_t batch) {
  if (status s = check_args(m, p, data, batch); !s) return make_error(s.message());
  const std::int64_t n = data.inputs.dim(0);
  double total = 0;
  for (std::int64_t b = 0; b < n; b += batch) {
    const std::int64_t e = std::min(n, b + batch);
    microbatch mb = make_microbatch(data, b, e);
    stage_forward f = forward_blocks(m, p, std::move(mb.input), mb.ctx);
    total += static_cast<double>(loss_value<T>(f.output)) * static_cast<double>(e - b);
  }
  return total / static_cast<double>(n);
}

template <class T>
result<double> accuracy(const model<T>& m, const param_set& p, const minibatch& data,
                        std::int64_t batch) {
  if (status s = check_args(m, p, data, batch); !s) return make_error(s.message());
  const std::int64_t n = data.inputs.dim(0);
  if (data.targets.numel() != n) return make_error("accuracy needs one label per sample");
  const std::int32_t* labels = data.targets.data<std::int32_t>();
  std::int64_t correct = 0;
  for (std::int64_t b = 0; b < n; b += batch) {
    const std::int64_t e = std::min(n, b + batch);
    microbatch mb = make_microbatch(data, b, e, /*with_targets=*/false);
    stage_forward f = forward_blocks(m, p, std::move(mb.input), mb.ctx);
    const std::int64_t classes = f.output.numel() / (e - b);
    const T* logits = f.output.data<T>();
    for (std::int64_t i = 0; i < e - b; ++i) {
      const T* row = logits + i * classes;
      if (std::max_element(row, row + classes) - row == labels[b + i]) ++correct;
    }
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

template result<double> mean_loss<float>(const model<float>&, const param_set&, const minibatch&,
                                         std::int64_t);
template result<double> mean_loss<double>(const model<double>&, const param_set&, const minibatch&,
                                          std::int64_t);
template result<double> accuracy<float>(const model<float>&, const param_set&, const minibatch&,
                                        std::int64_t);
template result<double> accuracy<double>(const model<double>&, const param_set&, const minibatch&,
                                         std::int64_t);

}  // namespace pipeworks
