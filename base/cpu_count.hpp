// The cores this process may really use: its CPU affinity mask and its cgroup v2 CPU quota, which
// std::thread::hardware_concurrency() ignores (containers, taskset, CI runners).
#pragma once
#include <optional>
#include <string>

namespace pipeworks {

// min(CPUs in sched_getaffinity's mask, ceil(quota / period) of every cgroup v2 cpu.max from this
// process's cgroup up to /sys/fs/cgroup), at least 1. Without an affinity mask (an error): the
// online CPUs.
int usable_cores();

// The cores a cgroup v2 cpu.max line ("QUOTA PERIOD", or "max PERIOD") allows: ceil(quota /
// period), at least 1; nullopt for "max" (no limit) or text that is not of that form.
std::optional<int> cpu_max_cores(const std::string& cpu_max);

}  // namespace pipeworks
