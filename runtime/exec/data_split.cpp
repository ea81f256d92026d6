// Dealing one step's minibatch to the data-parallel replicas, round-robin by microbatch.
#include "runtime/exec/data_split.hpp"

#include <string>

namespace pipeworks {

result<std::vector<std::vector<microbatch>>> deal_microbatches(const minibatch& mb, int replicas,
                                                               int microbatches) {
  const int w = replicas, m = microbatches;
  if (w < 1 || m < 1)
    return make_error("cannot deal a minibatch to " + std::to_string(w) + " replicas with " +
                      std::to_string(m) + " microbatches each; both must be at least 1");
  const std::int64_t B = mb.inputs.rank() ? mb.inputs.dim(0) : 0;
  if (mb.targets.rank() < 1 || mb.targets.dim(0) != B)
    return make_error("the targets' first dimension does not match the batch of " +
                      std::to_string(B));
  const std::int64_t parts = static_cast<std::int64_t>(w) * m;
  const std::string shape = "a batch of B = " + std::to_string(B) +
                            " rows into w * m = " + std::to_string(w) + " * " + std::to_string(m) +
                            " = " + std::to_string(parts) + " microbatches";
  if (B / parts == 0)
    return make_error("cannot deal " + shape + ": that leaves less than one row each; use a " +
                      "batch of at least " + std::to_string(parts) + " or fewer replicas or " +
                      "microbatches");
  if (B % parts != 0)
    return make_error("cannot deal " + shape + " of equal size: B must be a multiple of w * m; " +
                      "use a batch of " + std::to_string(B / parts * parts) + " or " +
                      std::to_string((B / parts + 1) * parts));
  const std::int64_t b = B / parts;
  std::vector<std::vector<microbatch>> out(static_cast<std::size_t>(w));
  for (auto& r : out) r.reserve(static_cast<std::size_t>(m));
  // Global microbatch j (rows [j*b, (j+1)*b)) is replica j % w's microbatch j / w.
  for (std::int64_t j = 0; j < parts; ++j)
    out[static_cast<std::size_t>(j % w)].push_back(make_microbatch(mb, j * b, (j + 1) * b));
  return out;
}

}  // namespace pipeworks
