// load_init_weights: the model's tensors from a file, or gathered from a checkpoint's rank files
// (whose latest weights keep their plain names), each checked for name and shape.
#include "cli/init_weights.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "ops/checkpoint/safetensors.hpp"
#include "runtime/checkpoint/rank_identity.hpp"
#include "runtime/checkpoint/read_checkpoint.hpp"

namespace pipeworks::cli {
namespace {

// What the file(s) gave each of the model's tensors, and the file's tensors the model lacks.
struct init_fit {
  enum class got { none, loaded, other_shape };
  std::vector<got> of;                // per model entry
  std::vector<std::string> why;       // per model entry, for other_shape
  std::vector<std::string> unknown;   // the file's tensors that are not the model's
};

// Loads each of the file's weights that fits an entry not yet loaded; records the rest.
status take_tensors(const safetensors_file& file, param_set& whole, init_fit& fit) {
  const auto& entries = whole.entries();
  std::vector<load_target<float>> targets;
  for (const safetensors_info& t : file.tensors) {
    if (t.name.starts_with("pipeworks.")) continue;  // a checkpoint's state, not weights
    std::size_t i = 0;
    while (i < entries.size() && entries[i].name != t.name) ++i;
    if (i == entries.size()) {
      fit.unknown.push_back(t.name + " (in " + file.source + ") is not a tensor of the model");
      continue;
    }
    if (fit.of[i] == init_fit::got::loaded) continue;
    if (t.shape != entries[i].shape) {
      fit.of[i] = init_fit::got::other_shape;
      fit.why[i] = t.name + " has shape " + shape_string(t.shape) + " in " + file.source +
                   ", the model's is " + shape_string(entries[i].shape);
      continue;
    }
    fit.of[i] = init_fit::got::loaded;
    targets.push_back({t.name, entries[i].shape, whole.values<float>(entries[i])});
  }
  return load_into<float>(file, targets);
}

// The tensors that did not fit: the model's in its order, then the file's extra ones.
std::vector<std::string> misfits(const param_set& whole, const init_fit& fit,
                                 const std::string& path) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < fit.of.size(); ++i) {
    if (fit.of[i] == init_fit::got::other_shape) out.push_back(fit.why[i]);
    if (fit.of[i] == init_fit::got::none)
      out.push_back(whole.entries()[i].name + " of the model is not in " + path);
  }
  out.insert(out.end(), fit.unknown.begin(), fit.unknown.end());
  return out;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Verifies the checkpoint's files (their bytes, and that each is the rank file of this step and
// rank its manifest lists, as resume checks) and loads every weight they hold that fits the model.
status take_checkpoint(const chosen_checkpoint& c, param_set& whole, init_fit& fit) {
  if (status s = verify_files(c.manifest, c.dir); !s) return s;
  if (status s = check_rank_files(c.manifest, c.dir); !s) return s;
  for (const checkpoint_file& f : c.manifest.files) {
    if (!f.dir.empty() && !std::filesystem::exists(f.dir))  // another host's: say which
      return verify_file(f, c.dir);
    auto file = read_safetensors((std::filesystem::path(file_dir(f, c.dir)) / f.path).string());
    if (!file) return file.err();
    if (status s = take_tensors(*file, whole, fit); !s) return s;
  }
  return {};
}

}  // namespace

status gather_checkpoint_weights(const chosen_checkpoint& c, param_set& whole) {
  init_fit fit;
  fit.of.assign(whole.entries().size(), init_fit::got::none);
  fit.why.assign(whole.entries().size(), "");
  if (status s = take_checkpoint(c, whole, fit); !s) return s;
  const std::vector<std::string> bad = misfits(whole, fit, c.dir);
  if (!bad.empty()) return make_error(c.dir + " does not hold the model of its own plan: " + bad.front());
  return {};
}

param_set load_init_weights(const std::string& path, const model<float>& net, std::uint64_t seed,
                            bool partial, const std::string& flag) {
  param_set whole = net.init_params(seed);
  init_fit fit;
  const auto reset = [&] {  // read_checkpoint may read a newer checkpoint again
    whole = net.init_params(seed);
    fit = {};
    fit.of.assign(whole.entries().size(), init_fit::got::none);
    fit.why.assign(whole.entries().size(), "");
  };
  reset();
  if (!std::filesystem::is_directory(path)) {
    auto file = read_safetensors(path);
    if (!file) throw pipeworks_error("--init: " + file.message());
    if (status s = take_tensors(*file, whole, fit); !s) throw pipeworks_error("--init: " + s.message());
  } else {
    // A run pruning the directory meanwhile makes read_checkpoint read the newest one again.
    auto got = read_checkpoint(path, -1, [&](const chosen_checkpoint& c) -> status {
      reset();
      return take_checkpoint(c, whole, fit);
    });
    if (!got) throw pipeworks_error("--init: " + got.message());
    if (!got->read) throw pipeworks_error("--init: " + got->read.message());
  }
  // Weights that hold a NaN or an infinity train to a non-finite loss at the first step: say which.
  if (const param_entry* broken = whole.first_non_finite())
    throw CLI::ValidationError(flag, path + ": " + broken->name +
                                         " holds NaN or infinite values, so training from it "
                                         "cannot give a finite loss; these weights come from a run "
                                         "that diverged: start from an earlier checkpoint");
  const std::vector<std::string> bad = misfits(whole, fit, path);
  if (bad.empty()) return whole;
  if (!partial)
    throw CLI::ValidationError(
        flag, path + " does not fit the model: " + bad.front() +
                  (bad.size() > 1 ? " (and " + std::to_string(bad.size() - 1) + " more)" : "") +
                  "; give --init-partial to load only the tensors that fit");
  std::vector<std::string> loaded, kept;
  for (std::size_t i = 0; i < fit.of.size(); ++i)
    (fit.of[i] == init_fit::got::loaded ? loaded : kept).push_back(whole.entries()[i].name);
  std::fprintf(stderr, "pipeworks train: --init-partial loaded %zu of the model's %zu tensors from %s: %s\n",
               loaded.size(), fit.of.size(), path.c_str(), loaded.empty() ? "none" : joined(loaded).c_str());
  if (!kept.empty())
    std::fprintf(stderr, "pipeworks train: --init-partial kept the seeded values of %zu: %s\n",
                 kept.size(), joined(kept).c_str());
  std::fprintf(stderr, "pipeworks train: --init-partial did not fit: %s\n", joined(bad).c_str());
  return whole;
}

}  // namespace pipeworks::cli
