// Row slicing and the microbatch split.
#include "ops/train/microbatches.hpp"

#include <cstring>
#include <memory>

namespace pipeworks {

tensor slice_rows(const tensor& t, std::int64_t begin, std::int64_t end) {
  if (t.rank() < 1 || begin < 0 || end < begin || end > t.dim(0))
    throw pipeworks_error("slice_rows: rows [" + std::to_string(begin) + ", " +
                          std::to_string(end) + ") of a tensor of shape " +
                          shape_string(t.shape()));
  shape_t shape = t.shape();
  shape[0] = end - begin;
  tensor out(shape, t.type());
  const std::size_t row_bytes = t.dim(0) ? t.nbytes() / static_cast<std::size_t>(t.dim(0)) : 0;
  std::memcpy(out.bytes(), t.bytes() + static_cast<std::size_t>(begin) * row_bytes, out.nbytes());
  return out;
}

microbatch make_microbatch(const minibatch& mb, std::int64_t begin, std::int64_t end,
                           bool with_targets) {
  microbatch m;
  m.input = slice_rows(mb.inputs, begin, end);
  m.ctx.batch = end - begin;
  if (with_targets)
    m.ctx.targets = std::make_shared<const tensor>(slice_rows(mb.targets, begin, end));
  return m;
}

result<std::vector<microbatch>> split_minibatch(const minibatch& mb, int m) {
  const std::int64_t B = mb.inputs.rank() ? mb.inputs.dim(0) : 0;
  if (m < 1 || B % m != 0)
    return make_error("cannot split a batch of " + std::to_string(B) + " into " +
                      std::to_string(m) + " equal microbatches");
  if (mb.targets.rank() < 1 || mb.targets.dim(0) != B)
    return make_error("the targets' first dimension does not match the batch of " +
                      std::to_string(B));
  std::vector<microbatch> out;
  const std::int64_t size = B / m;
  for (int i = 0; i < m; ++i) out.push_back(make_microbatch(mb, i * size, (i + 1) * size));
  return out;
}

}  // namespace pipeworks
