// read_checkpoint: the newest complete checkpoint (or a given one), read again at the newest when
// a run pruned the one being read.
#include "runtime/checkpoint/read_checkpoint.hpp"

#include <sys/stat.h>

#include <filesystem>

#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/checkpoint/run_checkpoints.hpp"

namespace pipeworks {
namespace {

bool manifest_there(const std::string& dir, std::int64_t step) {
  struct stat st;
  const std::string path = (std::filesystem::path(step_dir(dir, step)) / manifest_name).string();
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace

result<checkpoint_read> read_checkpoint(const std::string& dir, std::int64_t step,
                                        const std::function<status(const chosen_checkpoint&)>& read) {
  std::int64_t at = step;
  for (int pruned = 0; pruned < max_pruned_rereads; ++pruned) {
    if (step < 0) {
      auto latest = latest_complete(dir);
      if (!latest) return latest.err();
      at = *latest;
    }
    auto m = read_checked_manifest(dir, at);
    if (!m) {
      if (step >= 0 || manifest_there(dir, at)) return m.err();
      continue;  // pruned since latest_complete chose it
    }
    checkpoint_read out{{at, step_dir(dir, at), std::move(*m)}, {}};
    out.read = read(out.checkpoint);
    if (out.read.ok() || manifest_there(dir, at)) return out;
    if (step >= 0)
      return make_error("the checkpoint of step " + std::to_string(at) + " in " + dir +
                        " was pruned while it was read (a run writing there keeps only its newest "
                        "checkpoints: checkpoint.keep); read a newer one");
  }
  return make_error("the newest checkpoint in " + dir + " was pruned " +
                    std::to_string(max_pruned_rereads) + " times in a row while it was read (last "
                    "step " + std::to_string(at) + "): the run writing there keeps fewer "
                    "checkpoints (checkpoint.keep) than reading one takes; read it once that run "
                    "has ended, or let it keep more");
}

}  // namespace pipeworks
