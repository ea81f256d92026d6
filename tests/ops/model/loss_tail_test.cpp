// Tests for ops/model/loss_tail.hpp: logits without targets, the loss and stash order with them,
// the target-count error, and the backward against cross_entropy_backward.
#include "ops/model/loss_tail.hpp"

#include <catch2/catch.hpp>

#include <memory>

using namespace pipeworks;

namespace {

// logits (2, 3, 4): 6 positions of 4 classes, and targets (2, 3).
tensor make_logits() {
  tensor t({2, 3, 4}, dtype::f64);
  auto v = t.span<double>();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.1 * static_cast<double>(i % 7) - 0.2;
  return t;
}

microbatch_ctx with_targets(std::int64_t n) {
  auto targets = std::make_shared<tensor>(shape_t{n}, dtype::i32);
  auto v = targets->span<std::int32_t>();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(i % 4);
  return {2, targets};
}

}  // namespace

TEST_CASE("cross_entropy_tail without targets returns the logits and saves nothing", "[ops]") {
  tensor logits = make_logits();
  const double* data = logits.data<double>();
  block_forward r = cross_entropy_tail<double>(host_context(), std::move(logits), microbatch_ctx{2, nullptr}, "who",
                                               "targets", tensor({2, 5}, dtype::f64));
  CHECK(r.output.shape() == shape_t{2, 3, 4});
  CHECK(r.output.data<double>() == data);
  CHECK(r.saved.saved.empty());
}

TEST_CASE("cross_entropy_tail returns the mean loss and saves `saved` then probs", "[ops]") {
  const microbatch_ctx ctx = with_targets(6);
  tensor logits = make_logits();
  tensor probs({6, 4}, dtype::f64);
  const double want = cross_entropy_forward(probs.data<double>(), logits.data<double>(),
                                            ctx.targets->data<std::int32_t>(), 6, 4);
  block_forward r = cross_entropy_tail<double>(host_context(), std::move(logits), ctx, "who", "targets",
                                               tensor({2, 5}, dtype::f64), tensor({7}, dtype::f64));
  CHECK(loss_value<double>(r.output) == want);
  REQUIRE(r.saved.saved.size() == 3);
  CHECK(r.saved.saved[0].shape() == shape_t{2, 5});
  CHECK(r.saved.saved[1].shape() == shape_t{7});
  CHECK(r.saved.saved[2].shape() == shape_t{2, 3, 4});
  for (std::size_t i = 0; i < 24; ++i)
    CHECK(r.saved.saved[2].span<double>()[i] == probs.span<double>()[i]);

  tensor dlogits = cross_entropy_tail_backward<double>(host_context(), r.saved.saved[2], scalar_tensor(0.5), ctx);
  tensor want_d({6, 4}, dtype::f64);
  cross_entropy_backward(want_d.data<double>(), probs.data<double>(),
                         ctx.targets->data<std::int32_t>(), 0.5, 6, 4);
  CHECK(dlogits.shape() == shape_t{2, 3, 4});
  for (std::size_t i = 0; i < 24; ++i) CHECK(dlogits.span<double>()[i] == want_d.span<double>()[i]);
}

TEST_CASE("cross_entropy_tail names the block and the targets on a wrong count", "[ops]") {
  CHECK_THROWS_WITH(cross_entropy_tail<double>(host_context(), make_logits(), with_targets(5), "fc3", "labels"),
                    "fc3: expected 6 labels, got 5");
}
