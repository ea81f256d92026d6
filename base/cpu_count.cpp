// usable_cores(): the affinity mask and cgroup v2 quota of this process (see cpu_count.hpp).
#include "base/cpu_count.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace pipeworks {
namespace {

// This process's cgroup v2 path ("/user.slice/..."; "/" inside most containers), from the
// "0::PATH" line of /proc/self/cgroup; "/" when there is none.
std::string own_cgroup() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0 && line.size() > 3) return line.substr(3);
  return "/";
}

// The tightest cpu.max on the way from the process's cgroup up to the root: a parent's quota
// binds its children too.
std::optional<int> cgroup_cores() {
  std::optional<int> limit;
  std::string path = own_cgroup();
  while (true) {
    std::ifstream in("/sys/fs/cgroup" + (path == "/" ? std::string() : path) + "/cpu.max");
    std::string text;
    if (in && std::getline(in, text))
      if (auto n = cpu_max_cores(text)) limit = limit ? std::min(*limit, *n) : *n;
    if (path.empty() || path == "/") break;
    const auto slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return limit;
}

}  // namespace

std::optional<int> cpu_max_cores(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || period <= 0 || quota == "max") return std::nullopt;
  std::size_t used = 0;
  double q = 0;
  try {
    q = std::stod(quota, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != quota.size() || !(q > 0)) return std::nullopt;
  const double cores = std::ceil(q / period);
  return cores > 1e6 ? 1000000 : std::max(1, static_cast<int>(cores));
}

int usable_cores() {
  int cores = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (auto quota = cgroup_cores()) cores = std::min(cores, *quota);
  return std::max(1, cores);
}

}  // namespace pipeworks
