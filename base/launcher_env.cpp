// find_place: flags first, then torchrun's variables, then Slurm's; every number checked.
#include "base/launcher_env.hpp"

#include <charconv>

namespace pipeworks {
namespace {

result<int> whole(const std::string& text, const std::string& name, int lo, int hi) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || v < lo || v > hi)
    return make_error(name + " is \"" + text + "\", not a whole number in " + std::to_string(lo) +
                      ".." + std::to_string(hi));
  return v;
}

}  // namespace

bool launched(const env_fn& env) { return env("RANK") || env("SLURM_PROCID"); }

std::string first_slurm_host(const std::string& list) {
  std::string out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const char c = list[i];
    if (c == ',') break;
    if (c != '[') {
      out.push_back(c);
      continue;
    }
    // A range list, "[1-4,7]": its first number; then on after the bracket ("rack[1-2]-a": a suffix,
    // and further ranges, follow).
    std::size_t j = i + 1;
    for (; j < list.size() && list[j] != '-' && list[j] != ',' && list[j] != ']'; ++j) out.push_back(list[j]);
    while (j < list.size() && list[j] != ']') ++j;
    i = j;
  }
  return out;
}

result<launch_place> find_place(const launch_flags& flags, const env_fn& env) {
  launch_place p;
  std::string driver = flags.driver;
  if (driver.empty()) {
    const auto port = env("MASTER_PORT");
    if (auto addr = env("MASTER_ADDR")) {
      if (!port) return make_error("MASTER_ADDR is set but MASTER_PORT is not; set both, or give --driver HOST:PORT");
      driver = *addr + ":" + *port;
    } else if (auto nodes = env("SLURM_JOB_NODELIST") ? env("SLURM_JOB_NODELIST") : env("SLURM_NODELIST")) {
      driver = first_slurm_host(*nodes) + ":" + (port ? *port : std::string("29500"));
    } else {
      return make_error("no driver address: give --driver HOST:PORT, or set MASTER_ADDR and MASTER_PORT");
    }
  }
  auto at = parse_host_port(driver);
  if (!at) return make_error((flags.driver.empty() ? "the driver's address from MASTER_ADDR/MASTER_PORT: "
                                                   : "--driver: ") + at.message());
  p.driver = *at;
  auto number = [&](int given, const char* flag, const char* torch, const char* slurm, int lo,
                    int hi) -> result<int> {
    if (given >= 0) return whole(std::to_string(given), flag, lo, hi);
    if (auto v = env(torch)) return whole(*v, torch, lo, hi);
    if (auto v = env(slurm)) return whole(*v, slurm, lo, hi);
    return make_error(std::string("no ") + flag + ": give it, or set " + torch + " (torchrun) or " +
                      slurm + " (srun)");
  };
  auto world = number(flags.world_size, "--world-size", "WORLD_SIZE", "SLURM_NTASKS", 1, 65536);
  if (!world) return world.err();
  auto rank = number(flags.rank, "--rank", "RANK", "SLURM_PROCID", 0, *world - 1);
  if (!rank) return rank.err();
  p.world_size = *world;
  p.rank = *rank;
  return p;
}

}  // namespace pipeworks
