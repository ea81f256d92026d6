// load_data and data_of: the text or the images of a training run, and their minibatches.
#include "cli/train_data.hpp"

#include <CLI/CLI.hpp>
#include <string>
#include <utility>

#include "ops/train/sources.hpp"

namespace pipeworks::cli {

loaded_data load_data(const run_plan& plan, std::int64_t eval_windows, bool windows_given) {
  loaded_data d;
  const std::string& path = plan.data.path;
  if (plan.model.is_gpt()) {
    auto text = load_text(path);
    if (!text) throw pipeworks_error(text.message());
    d.corpus = std::make_shared<const text_corpus>(std::move(*text));
    d.text = split_text(d.corpus->view());
    const std::int64_t window = plan.model.gpt().context + 1;
    const auto fit = static_cast<std::int64_t>(d.text.validation.size()) / window;
    if (fit == 0)  // the last 5% of the text is held out; it must hold one window at least
      throw CLI::ValidationError(
          "--data", path + " has " + std::to_string(d.corpus->view().size()) +
                        " bytes: too small, as its held-out last 5% (" +
                        std::to_string(d.text.validation.size()) + " bytes) has no room for one " +
                        std::to_string(window) + "-byte window of the model's context; give a "
                        "text of at least " + std::to_string(20 * window) + " bytes");
    if (eval_windows > fit) {
      if (windows_given)
        throw CLI::ValidationError("--eval-windows", "the held-out part of " + path + " has room for " +
                                                         std::to_string(fit) + " windows, not " +
                                                         std::to_string(eval_windows));
      eval_windows = fit;
    }
    auto windows = text_windows(d.text.validation, eval_windows, plan.model.gpt().context,
                                path + " (validation part)");
    if (!windows) throw pipeworks_error(windows.message());
    d.held_out = std::move(*windows);
  } else {
    auto tr = load_fashion_mnist(dataset_split::train, path);
    if (!tr) throw pipeworks_error(tr.message());
    auto te = load_fashion_mnist(dataset_split::test, path);
    if (!te) throw pipeworks_error(te.message());
    d.images = std::make_shared<const image_dataset>(std::move(*tr));
    d.held_out = image_set(*te);
  }
  return d;
}

data_factory data_of(const loaded_data& d, const run_plan& plan) {
  const std::int64_t context = plan.model.is_gpt() ? plan.model.gpt().context : 0;
  return [&d, context](const run_plan& p) -> result<minibatch_fn> {
    if (d.corpus) return text_minibatches(d.text.train, p.data.batch, context, p.data.seed);
    if (p.data.batch > d.images->size())
      return make_error("the batch " + std::to_string(p.data.batch) + " is larger than the " +
                        std::to_string(d.images->size()) + " training images");
    return image_minibatches(d.images, p.data.batch, p.data.seed);
  };
}

}  // namespace pipeworks::cli
