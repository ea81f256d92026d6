// Checkpoint write throughput: the rank files of a GPT-shaped checkpoint (weights, an older
// weight version, Adam's m and v) written with write_safetensors (fsync, rename, sha256), all
// ranks at once or one after another, in MB/s. bench/checkpoint_write.sh compares it with dd.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "ops/checkpoint/safetensors.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"

using namespace pipeworks;
namespace fs = std::filesystem;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A GPT's shapes: width C, L blocks, vocabulary V, context T.
struct gpt_shape {
  std::int64_t c, layers, vocab, context;
};

struct named_shape {
  std::string name;
  shape_t shape;
};

// The Hugging Face GPT-2 tensors, split over `ranks` ranks by blocks: rank 0 also holds the
// embeddings, the last rank ln_f (the head is tied to wte).
std::vector<std::vector<named_shape>> gpt_tensors(const gpt_shape& g, int ranks) {
  std::vector<std::vector<named_shape>> out(static_cast<std::size_t>(ranks));
  const std::int64_t c = g.c;
  out.front().push_back({"transformer.wte.weight", {g.vocab, c}});
  out.front().push_back({"transformer.wpe.weight", {g.context, c}});
  for (std::int64_t l = 0; l < g.layers; ++l) {
    auto& r = out[static_cast<std::size_t>(l * ranks / g.layers)];
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    for (const named_shape& t : std::vector<named_shape>{
             {"ln_1.weight", {c}}, {"ln_1.bias", {c}}, {"attn.c_attn.weight", {c, 3 * c}},
             {"attn.c_attn.bias", {3 * c}}, {"attn.c_proj.weight", {c, c}}, {"attn.c_proj.bias", {c}},
             {"ln_2.weight", {c}}, {"ln_2.bias", {c}}, {"mlp.c_fc.weight", {c, 4 * c}},
             {"mlp.c_fc.bias", {4 * c}}, {"mlp.c_proj.weight", {4 * c, c}}, {"mlp.c_proj.bias", {c}}})
      r.push_back({h + t.name, t.shape});
  }
  out.back().push_back({"transformer.ln_f.weight", {c}});
  out.back().push_back({"transformer.ln_f.bias", {c}});
  return out;
}

struct bench_case {
  std::string name;
  gpt_shape shape;
  std::vector<std::string> kinds;  // "" for the weights, else the name prefix
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Checkpoint write benchmark: GPT-shaped rank files through write_safetensors"};
  std::string dir = (fs::temp_directory_path() / "pipeworks-bench-ckpt").string();
  std::string which = "small";
  int repeats = 5, warmup = 1, ranks = 4;
  bool one_at_a_time = false;
  app.add_option("--dir", dir, "where to write (put it on the disk to measure)")->capture_default_str();
  app.add_option("--case", which,
                 "small: C=256 6 layers (~94 MB: weights, version, Adam m and v); large: gpt-small "
                 "(~1 GB: weights and Adam m)")
      ->check(CLI::IsMember({"small", "large"}))
      ->capture_default_str();
  app.add_option("--repeats", repeats, "timed runs; the median is reported")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", warmup,
                 "untimed runs first (the first writes of a process pay for fresh page-cache memory)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--ranks", ranks, "rank files per checkpoint")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_flag("--one-at-a-time", one_at_a_time,
               "write the rank files one after another (default: all at once, a thread per rank, "
               "as a pipeline's ranks do at a checkpoint)");
  CLI11_PARSE(app, argc, argv);

  const bench_case c =
      which == "small"
          ? bench_case{"small", {256, 6, 4096, 256},
                       {"", "pipeworks.version.1/", "pipeworks.optim.m/", "pipeworks.optim.v/"}}
          : bench_case{"large", {768, 12, 50257, 1024}, {"", "pipeworks.optim.m/"}};
  // The tensors' data, filled with varied bits (an xorshift), owned here and written in place.
  std::vector<std::vector<std::vector<float>>> data(static_cast<std::size_t>(ranks));
  std::vector<std::vector<safetensors_entry>> entries(static_cast<std::size_t>(ranks));
  std::uint32_t x = 2463534242u;
  std::uint64_t total = 0;
  const auto layout = gpt_tensors(c.shape, ranks);
  for (std::size_t r = 0; r < layout.size(); ++r) {
    data[r].reserve(layout[r].size() * c.kinds.size());
    for (const std::string& kind : c.kinds)
      for (const named_shape& t : layout[r]) {
        auto& v = data[r].emplace_back(static_cast<std::size_t>(numel(t.shape)));
        for (float& f : v) {
          x ^= x << 13, x ^= x >> 17, x ^= x << 5;
          f = static_cast<float>(x) * 1e-9f - 2.0f;
        }
        entries[r].push_back(entry_of(kind + t.name, t.shape, std::span<const float>(v)));
      }
  }
  std::vector<double> seconds;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "bench_checkpoint_write: cannot create %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  for (int rep = -warmup; rep < repeats; ++rep) {
    const std::string step = step_dir(dir, rep + warmup);
    fs::remove_all(step);
    fs::create_directories(step);
    ::sync();  // start each run with nothing dirty
    const double t0 = now();
    std::vector<result<written_file>> written(static_cast<std::size_t>(ranks), error{"not run"});
    auto write_rank = [&](int r) {
      const auto i = static_cast<std::size_t>(r);
      written[i] = write_safetensors(step + "/" + rank_file_name(r), entries[i]);
    };
    if (one_at_a_time) {
      for (int r = 0; r < ranks; ++r) write_rank(r);
    } else {
      std::vector<std::thread> threads;
      for (int r = 0; r < ranks; ++r) threads.emplace_back(write_rank, r);
      for (auto& t : threads) t.join();
    }
    total = 0;
    for (const auto& w : written) {
      if (!w) {
        std::fprintf(stderr, "bench_checkpoint_write: %s\n", w.message().c_str());
        return 1;
      }
      total += w->bytes;
    }
    if (rep >= 0) seconds.push_back(now() - t0);
    fs::remove_all(step);
  }
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                           : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
  const nlohmann::json row = {{"case", c.name},
                              {"one_at_a_time", one_at_a_time},
                              {"bytes", total},
                              {"files", ranks},
                              {"seconds", seconds},
                              {"median_s", median},
                              {"mb_per_s", static_cast<double>(total) / 1e6 / median}};
  std::printf("%s\n", row.dump().c_str());
  return 0;
}
