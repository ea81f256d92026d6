// find_place: flags win over the environment; torchrun's variables, then Slurm's; each missing or
// malformed value is named. first_slurm_host reads Slurm's compressed host lists.
#include "base/launcher_env.hpp"

#include <catch2/catch.hpp>
#include <map>

using namespace pipeworks;

namespace {

env_fn env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string error_of(const launch_flags& f, const env_fn& env) {
  auto r = find_place(f, env);
  REQUIRE_FALSE(r.ok());
  return r.message();
}

}  // namespace

TEST_CASE("a torchrun-style environment gives the driver, the rank and the world size") {
  const auto env = env_of({{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "2"}, {"WORLD_SIZE", "4"}});
  CHECK(launched(env));
  auto p = find_place({}, env);
  REQUIRE(p.ok());
  CHECK(p->driver.host == "10.0.0.1");
  CHECK(p->driver.port == 29500);
  CHECK(p->rank == 2);
  CHECK(p->world_size == 4);
  // Flags win.
  auto q = find_place({"127.0.0.1:7000", 0, 1}, env);
  REQUIRE(q.ok());
  CHECK(q->driver.port == 7000);
  CHECK(q->rank == 0);
  CHECK(q->world_size == 1);
}

TEST_CASE("a Slurm environment gives the first host of the job and its task numbers") {
  const auto env = env_of({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "3"}, {"SLURM_JOB_NODELIST", "gpu[07-09,12],cpu1"}});
  CHECK(launched(env));
  auto p = find_place({}, env);
  REQUIRE(p.ok());
  CHECK(p->driver.host == "gpu07");
  CHECK(p->driver.port == 29500);
  CHECK(p->rank == 1);
  CHECK(p->world_size == 3);
  CHECK(first_slurm_host("node5") == "node5");
  CHECK(first_slurm_host("a,b") == "a");
  CHECK(first_slurm_host("n[3]") == "n3");
  CHECK(first_slurm_host("rack1-n[1-2]-a") == "rack1-n1-a");  // a suffix after the range
  CHECK(first_slurm_host("r[2-3]-n[07,9],login") == "r2-n07");
  CHECK(first_slurm_host("gpu[10-12,15],cpu1") == "gpu10");
}

TEST_CASE("missing or malformed launcher values are named") {
  CHECK_FALSE(launched(env_of({})));
  CHECK(error_of({}, env_of({})).find("--driver") != std::string::npos);
  CHECK(error_of({}, env_of({{"MASTER_ADDR", "h"}})).find("MASTER_PORT") != std::string::npos);
  const auto base = std::map<std::string, std::string>{{"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}};
  CHECK(error_of({}, env_of(base)).find("--world-size") != std::string::npos);
  auto with = [&](std::map<std::string, std::string> more) {
    auto all = base;
    all.insert(more.begin(), more.end());
    return env_of(all);
  };
  CHECK(error_of({}, with({{"WORLD_SIZE", "two"}})).find("WORLD_SIZE") != std::string::npos);
  CHECK(error_of({}, with({{"WORLD_SIZE", "2"}})).find("--rank") != std::string::npos);
  CHECK(error_of({}, with({{"WORLD_SIZE", "2"}, {"RANK", "2"}})).find("RANK is \"2\"") != std::string::npos);
  CHECK(error_of({}, with({{"WORLD_SIZE", "0"}, {"RANK", "0"}})).find("WORLD_SIZE") != std::string::npos);
  CHECK(error_of({}, env_of({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "99999"}})).find("MASTER_PORT") != std::string::npos);
  CHECK(error_of({"nonsense", 0, 1}, env_of({})).find("--driver") != std::string::npos);
}
