// embed_service: a program that keeps answering requests while it fine-tunes in the background.
// A training thread runs train_pipeline (gpt-tiny cut into 2 stages, PipeDream-2BW by default)
// on text; it subscribes to every step's weights (run_plan::weights_every), which arrive as
// immutable snapshots and are published through an atomic shared_ptr, so a request scores its
// text with the newest weights without a mutex.
//
//   example_embed_service [--steps N] [--data PATH] [--schedule 2bw|1f1b|...]
#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "actors/pipeline.hpp"
#include "ops/blas_core.hpp"
#include "ops/cpu_threads.hpp"
#include "ops/data/text.hpp"
#include "ops/model/model_spec.hpp"
#include "ops/train/sources.hpp"

using namespace pipeworks;

namespace {

constexpr const char* usage =
    "usage: example_embed_service [--steps N] [--data PATH] [--schedule NAME]\n"
    "  --steps N        optimizer steps to fine-tune for (default 1000, 10 to 20 s)\n"
    "  --data PATH      a text file or a directory of them (default /usr/share/games/fortunes)\n"
    "  --schedule NAME  the pipeline schedule over 2 stages: 2bw (default), 1f1b, gpipe, ...\n";

struct options {
  std::int64_t steps = 1000;
  std::string data = fortunes_default_dir;
  schedule_kind schedule = schedule_kind::two_bw;
};

// The flags, or an error saying which one is wrong.
result<options> parse_flags(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag != "--steps" && flag != "--data" && flag != "--schedule")
      return make_error("unknown flag '" + std::string(flag) + "'");
    if (i + 1 == argc) return make_error(std::string(flag) + " needs a value");
    const std::string_view value = argv[++i];
    if (flag == "--steps") {
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), o.steps);
      if (ec != std::errc{} || end != value.data() + value.size() || o.steps < 1 ||
          o.steps > 1'000'000)
        return make_error("--steps wants a whole number from 1 to 1000000, not '" +
                          std::string(value) + "'");
    } else if (flag == "--data") {
      o.data = value;
    } else {  // --schedule
      result<schedule_kind> k = parse_schedule_kind(value);
      if (!k) return make_error("--schedule: " + k.message());
      o.schedule = *k;
    }
  }
  return o;
}

// What a request reads: the weights of every stage after `step` optimizer steps (0: initial).
struct published_weights {
  std::int64_t step = 0;
  std::shared_ptr<const model_weights> weights;
};

// The newest weights: the training thread stores, the request thread loads. libstdc++ builds
// std::atomic<std::shared_ptr> on an atomic spin bit in the control-block pointer, held only
// while a pointer is copied, not on a mutex (so not lock-free either: is_always_lock_free is
// false). A request never waits for a training step, and old weights live on while in use.
std::atomic<std::shared_ptr<const published_weights>> latest;

void publish(std::int64_t step, std::shared_ptr<const model_weights> weights) {
  latest.store(std::make_shared<const published_weights>(step, std::move(weights)));
}

// A request's answer: the mean next-byte loss of text (nats per byte; lower: the model finds the
// text more likely). It runs each stage's blocks over that stage's snapshot, in stage order, as
// the pipeline does for one microbatch; the last block (the head) returns the loss.
double score(const model<float>& m, const model_weights& weights, std::string_view text) {
  const auto n = static_cast<std::int64_t>(text.size()) - 1;  // predict bytes 1..n from 0..n-1
  tensor tokens({1, n}, dtype::i32);                           // (B, T) = (1, n)
  tensor targets({1, n}, dtype::i32);
  for (std::int64_t t = 0; t < n; ++t) {
    tokens.data<std::int32_t>()[t] = static_cast<unsigned char>(text[t]);
    targets.data<std::int32_t>()[t] = static_cast<unsigned char>(text[t + 1]);
  }
  const microbatch_ctx ctx{.batch = 1,
                           .targets = std::make_shared<const tensor>(std::move(targets))};
  tensor x = std::move(tokens);
  for (const param_snapshot& stage : weights)
    x = forward_blocks(m, *stage, std::move(x), ctx).output;
  return loss_value<float>(x);
}

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

// The "requests" this service answers, over and over. Each fits the context (65 bytes at most).
const std::vector<std::string_view> requests = {
    "A fool and his money are soon parted.",
    "You will be successful in your work.",
    "Q: How many programmers does it take?",
    "The quick brown fox jumps over the lazy dog.",
};

volatile std::sig_atomic_t interrupted = 0;

}  // namespace

int main(int argc, char** argv) {
  run_with_best_blas_kernels(argv);
  if (argc == 2 && std::string_view(argv[1]) == "--help") {
    std::fputs(usage, stdout);
    return 0;
  }
  result<options> flags = parse_flags(argc, argv);
  if (!flags) {
    std::fprintf(stderr, "example_embed_service: %s\n%s", flags.message().c_str(), usage);
    return 2;
  }
  set_cpu_threads(0);

  // The model, its initial weights and the text it fine-tunes on (kept alive while training).
  const model_spec spec = parse_model_spec("gpt-tiny").value();
  const model<float> m = build_model<float>(spec);
  const param_set initial = m.init_params(/*seed=*/1);
  result<text_corpus> text = load_text(flags->data);
  if (!text) {
    std::fprintf(stderr, "example_embed_service: %s\n", text.message().c_str());
    return 1;
  }

  // The run, as one plan: gpt-tiny over 2 stages, AdamW, the weights sent to this program after
  // every step (weights_every = 1; otherwise they would stay on the stages until the end).
  run_plan plan;
  plan.model = spec;
  plan.schedule = flags->schedule;
  plan.stages = 2;
  plan.train.microbatches = 2;
  plan.train.steps = flags->steps;
  plan.train.optim = default_optimizer_config(optimizer_kind::adamw);
  plan.train.optim.lr = 3e-3;
  plan.train.min_lr = 3e-3;
  plan.train.clip_grad_norm = 1.0;
  plan.data.batch = 8;
  plan.data.seed = 1;
  plan.weights_every = 1;
  if (status ok = check(plan, m.size()); !ok) {
    std::fprintf(stderr, "example_embed_service: %s\n", ok.message().c_str());
    return 2;
  }
  std::signal(SIGINT, [](int) { interrupted = 1; });

  // Until the first step completes, requests use the initial weights: one piece, the whole model.
  publish(0, std::make_shared<const model_weights>(
                 model_weights{std::make_shared<const param_set>(initial.clone())}));
  std::vector<double> before;
  for (std::string_view r : requests) before.push_back(score(m, *latest.load()->weights, r));

  // Fine-tune in the background. on_weights runs once per step, in step order.
  std::atomic<bool> training = true;
  std::optional<result<pipeline_result>> trained;
  std::thread trainer([&] {
    const minibatch_fn batches =
        text_minibatches(text->view(), /*batch=*/8, spec.gpt().context, /*seed=*/1);
    std::int64_t step = 0;
    pipeline_callbacks cb;
    cb.on_step = [](const step_metrics& s) {
      if (s.step % 100 == 0 || s.step == s.steps)
        std::printf("  train        step %lld/%lld  loss %.3f\n", static_cast<long long>(s.step),
                    static_cast<long long>(s.steps), s.loss);
    };
    cb.on_weights = [&](std::shared_ptr<const model_weights> w) { publish(++step, std::move(w)); };
    cb.stop_requested = [] { return interrupted != 0; };  // Ctrl-C ends training cleanly
    trained = train_pipeline<float>(m, initial, plan, batches, cb);
    training = false;
  });

  // Serve: answer a request every 250 ms with whatever weights are newest at that moment.
  std::int64_t answered = 0;
  while (training) {
    const std::string_view r = requests[answered % requests.size()];
    const std::shared_ptr<const published_weights> w = latest.load();  // no mutex taken
    const double loss = score(m, *w->weights, r);
    std::printf("request %3lld  %-46s loss %.3f  (weights of step %lld)\n",
                static_cast<long long>(++answered), quoted(r).c_str(), loss,
                static_cast<long long>(w->step));
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  trainer.join();

  if (!trained->ok()) {
    std::fprintf(stderr, "example_embed_service: training failed: %s\n",
                 trained->message().c_str());
    return 1;
  }
  const std::shared_ptr<const published_weights> final_weights = latest.load();
  std::printf("\ntrained %lld steps (%s, 2 stages) in %.1f s%s; answered %lld requests meanwhile\n",
              static_cast<long long>((*trained)->steps_done),
              std::string(schedule_name(flags->schedule)).c_str(), (*trained)->wall_s,
              (*trained)->interrupted ? ", interrupted" : "", static_cast<long long>(answered));
  for (std::size_t i = 0; i < requests.size(); ++i)
    std::printf("  %-46s loss %.3f at step 0 -> %.3f at step %lld\n",
                quoted(requests[i]).c_str(), before[i],
                score(m, *final_weights->weights, requests[i]),
                static_cast<long long>(final_weights->step));
  return 0;
}
