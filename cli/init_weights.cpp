// load_init_weights: every tensor of the model from a file, or gathered from a checkpoint's rank
// files (whose latest weights keep their plain names), each checked for name and shape.
#include "cli/init_weights.hpp"

#include <filesystem>

#include "ops/checkpoint/safetensors.hpp"
#include "ops/model/param_io.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/run_checkpoints.hpp"

namespace pipeworks::cli {

param_set load_init_weights(const std::string& path, const model<float>& net) {
  param_set whole = net.make_params();
  if (!std::filesystem::is_directory(path)) {
    if (status s = load_params(path, whole); !s) throw pipeworks_error("--init: " + s.message());
    return whole;
  }
  auto step = latest_complete(path);
  if (!step) throw pipeworks_error("--init: " + step.message());
  auto m = read_checked_manifest(path, *step);
  if (!m) throw pipeworks_error("--init: " + m.message());
  const std::string dir = step_dir(path, *step);
  if (status s = verify_files(*m, dir); !s) throw pipeworks_error("--init: " + s.message());
  std::vector<bool> found(whole.entries().size(), false);
  for (const checkpoint_file& f : m->files) {
    if (!f.dir.empty() && !std::filesystem::exists(f.dir))  // another host's: say which
      throw pipeworks_error("--init: " + verify_file(f, dir).message());
    auto file = read_safetensors((std::filesystem::path(file_dir(f, dir)) / f.path).string());
    if (!file) throw pipeworks_error("--init: " + file.message());
    std::vector<load_target<float>> targets;
    for (std::size_t i = 0; i < whole.entries().size(); ++i) {
      const param_entry& e = whole.entries()[i];
      if (found[i] || !file->find(e.name)) continue;
      targets.push_back({e.name, e.shape, whole.values<float>(e)});
      found[i] = true;
    }
    if (status s = load_into<float>(*file, targets); !s) throw pipeworks_error("--init: " + s.message());
  }
  for (std::size_t i = 0; i < found.size(); ++i)
    if (!found[i])
      throw pipeworks_error("--init: the checkpoint in " + dir + " holds no tensor " +
                            whole.entries()[i].name + " of the model");
  return whole;
}

}  // namespace pipeworks::cli
