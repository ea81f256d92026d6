// load_init_weights: every tensor of the model from a file, or gathered from a checkpoint's rank
// files (whose latest weights keep their plain names), each checked for name and shape.
#include "cli/init_weights.hpp"

#include <filesystem>

#include "ops/checkpoint/safetensors.hpp"
#include "ops/model/param_io.hpp"
#include "runtime/checkpoint/read_checkpoint.hpp"

namespace pipeworks::cli {

param_set load_init_weights(const std::string& path, const model<float>& net) {
  param_set whole = net.make_params();
  if (!std::filesystem::is_directory(path)) {
    if (status s = load_params(path, whole); !s) throw pipeworks_error("--init: " + s.message());
    return whole;
  }
  // A run pruning the directory meanwhile makes read_checkpoint read the newest one again.
  auto got = read_checkpoint(path, -1, [&](const chosen_checkpoint& c) -> status {
    if (status s = verify_files(c.manifest, c.dir); !s) return s;
    std::vector<bool> found(whole.entries().size(), false);
    for (const checkpoint_file& f : c.manifest.files) {
      if (!f.dir.empty() && !std::filesystem::exists(f.dir))  // another host's: say which
        return verify_file(f, c.dir);
      auto file = read_safetensors((std::filesystem::path(file_dir(f, c.dir)) / f.path).string());
      if (!file) return file.err();
      std::vector<load_target<float>> targets;
      for (std::size_t i = 0; i < whole.entries().size(); ++i) {
        const param_entry& e = whole.entries()[i];
        if (found[i] || !file->find(e.name)) continue;
        targets.push_back({e.name, e.shape, whole.values<float>(e)});
        found[i] = true;
      }
      if (status s = load_into<float>(*file, targets); !s) return s;
    }
    for (std::size_t i = 0; i < found.size(); ++i)
      if (!found[i])
        return make_error("the checkpoint in " + c.dir + " holds no tensor " +
                          whole.entries()[i].name + " of the model");
    return {};
  });
  if (!got) throw pipeworks_error("--init: " + got.message());
  if (!got->read) throw pipeworks_error("--init: " + got->read.message());
  return whole;
}

}  // namespace pipeworks::cli
