// Where a worker started by a launcher finds its place: the driver's address, its rank and the
// world size, from flags or from torchrun's (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE) or
// Slurm's (SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_NODELIST) environment variables.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "base/host_port.hpp"
#include "base/result.hpp"

namespace pipeworks {

struct launch_place {
  host_port driver;
  int rank = 0;
  int world_size = 0;
};

// What the worker was given on its command line ("" / -1: not given).
struct launch_flags {
  std::string driver;
  int rank = -1, world_size = -1;
};

using env_fn = std::function<std::optional<std::string>(const char* name)>;

// Whether the environment holds a launcher's variables (RANK or SLURM_PROCID).
bool launched(const env_fn& env);

// The place from the flags, each missing one from the environment: the driver from MASTER_ADDR
// and MASTER_PORT (Slurm: the first host of SLURM_JOB_NODELIST, port MASTER_PORT or 29500), the
// rank from RANK or SLURM_PROCID, the world size from WORLD_SIZE or SLURM_NTASKS. Errors name
// the flag or variable that is missing or wrong.
result<launch_place> find_place(const launch_flags& flags, const env_fn& env);

// The first host of a Slurm host list: "node[01-04,07],gpu2" -> "node01".
std::string first_slurm_host(const std::string& list);

}  // namespace pipeworks
