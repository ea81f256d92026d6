// Autoregressive sampling with a temperature, from the portable rng.
#include "ops/train/sample.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/data/rng.hpp"

namespace pipeworks {

template <class T>
std::string sample_text(const model<T>& m, const param_set& p, const gpt_config& cfg,
                        std::string_view prompt, const sample_options& opt) {
  std::string text = prompt.empty() ? std::string("\n") : std::string(prompt);
  const std::size_t start = text.size();
  rng gen = rng::for_stream(opt.seed, 0x5a3d1e);
  std::vector<double> probs(static_cast<std::size_t>(cfg.vocab));
  for (std::int64_t k = 0; k < opt.bytes; ++k) {
    const std::size_t Tn = std::min(text.size(), static_cast<std::size_t>(cfg.context));
    tensor tokens({1, static_cast<std::int64_t>(Tn)}, dtype::i32);
    std::int32_t* ids = tokens.data<std::int32_t>();
    for (std::size_t i = 0; i < Tn; ++i)
      ids[i] = static_cast<unsigned char>(text[text.size() - Tn + i]);
    microbatch_ctx ctx{1, nullptr};
    stage_forward f = forward_blocks(m, p, std::move(tokens), ctx);
    const T* logits = f.output.data<T>() + (Tn - 1) * static_cast<std::size_t>(cfg.vocab);
    const double mx = static_cast<double>(*std::max_element(logits, logits + cfg.vocab));
    double sum = 0;
    for (int v = 0; v < cfg.vocab; ++v)
      sum += probs[v] = std::exp((static_cast<double>(logits[v]) - mx) / opt.temperature);
    double u = gen.uniform_double() * sum;
    int next = cfg.vocab - 1;
    for (int v = 0; v < cfg.vocab; ++v) {
      u -= probs[v];
      if (u < 0) {
        next = v;
        break;
      }
    }
    text.push_back(static_cast<char>(next));
  }
  return text.substr(start);
}

template std::string sample_text<float>(const model<float>&, const param_set&, const gpt_config&,
                                        std::string_view, const sample_options&);
template std::string sample_text<double>(const model<double>&, const param_set&, const gpt_config&,
                                         std::string_view, const sample_options&);

}  // namespace pipeworks
