// End-to-end tests of `pipeworks simulate` on bad input (times, widths, overflow, sizes too large
// for memory, cost files, generator errors): each exits with a message naming the problem.
#include <catch2/catch.hpp>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cerrno>
#include <utility>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;

namespace {

// Runs `pipeworks args...` as run_cli does; its result and its peak resident memory in bytes.
std::pair<cli_result, long long> run_cli_peak(const std::vector<std::string>& args) {
  scratch_dir io;
  const pid_t pid = spawn_cli(args, io / "stdout", io / "stderr");
  int status = 0;
  rusage used{};
  while (::wait4(pid, &status, 0, &used) < 0)
    if (errno != EINTR) throw std::runtime_error("wait4 failed for " + pipeworks_binary);
  cli_result r;
  r.exit_code = exit_code_of(status);
  r.out = read_file(io / "stdout");
  r.err = read_file(io / "stderr");
  return {r, static_cast<long long>(used.ru_maxrss) * 1024};
}

}  // namespace

TEST_CASE("simulate: nan, inf and negative times exit 2 naming the flag", "[cli]") {
  for (const std::string flag : {"--fwd", "--bwd", "--wgrad"}) {
    for (const std::string value : {"nan", "inf", "-inf", "-0.5"}) {
      const cli_result r = run_cli(simulate_args("1f1b", 2, 2, {flag, value}));
      INFO(flag << " " << value << ": " << r.err);
      CHECK(r.exit_code == 2);
      CHECK(contains(r.err, flag));
      CHECK(contains(r.err, "finite time >= 0"));
    }
  }
}

TEST_CASE("simulate --width outside 10..10000 exits 2", "[cli]") {
  for (const std::string w : {"200000000", "9", "0"}) {
    const cli_result r = run_cli(simulate_args("1f1b", 2, 2, {"--text", "--width", w}));
    INFO(w << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--width"));
    CHECK(contains(r.err, "10..10000"));
  }
  CHECK(run_cli(simulate_args("1f1b", 2, 2, {"--text", "--width", "10000"})).exit_code == 0);
}

TEST_CASE("simulate --json with times that overflow fails naming the costs", "[cli]") {
  const cli_result r =
      run_cli(simulate_args("1f1b", 2, 4, {"--fwd", "1e308", "--bwd", "1e308", "--json"}));
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK_FALSE(contains(r.out, "inf"));
  CHECK(contains(r.err, "overflowed"));
  CHECK(contains(r.err, "F=1e+308"));
}

TEST_CASE("simulate: a request too large for memory is refused at once", "[cli]") {
  // At once: before any of its 2e9 actions is made. Its peak memory shows it on any machine,
  // however slow or busy (the actions alone would take tens of GB; the program's own libraries
  // take the same as in a run of 2 microbatches); a wall time would not.
  const auto [small, small_peak] = run_cli_peak(simulate_args("1f1b", 1, 2));
  REQUIRE(small.exit_code == 0);
  const auto [r, peak] = run_cli_peak(simulate_args("1f1b", 1, 1000000000));
  INFO(r.err << "peak resident memory: " << peak << " bytes, " << small_peak << " for 2 microbatches");
  CHECK(r.exit_code == 1);
  CHECK(peak < small_peak + (1LL << 30));
  CHECK(contains(r.err, "2000000002 actions"));
  CHECK(contains(r.err, "p * m can be at most about"));
  CHECK_FALSE(contains(r.err, "bad_alloc"));
}

TEST_CASE("simulate: a generator's error names every schedule flag", "[cli]") {
  const cli_result r =
      run_cli(simulate_args("2bw", 4, 2, {"--replicas", "3", "--steps", "5", "--chunks", "1"}));
  INFO(r.err);
  CHECK(r.exit_code == 2);
  for (const char* part : {"--schedule 2bw", "--stages 4", "--microbatches 2", "--chunks 1",
                           "--replicas 3", "--steps 5"}) {
    CHECK(contains(r.err, part));
  }
}

TEST_CASE("simulate --costs: a directory, fractional or huge byte counts exit 2", "[cli]") {
  scratch_dir dir;
  const cli_result d = run_cli(simulate_args("1f1b", 2, 2, {"--costs", dir.path().string()}));
  INFO(d.err);
  CHECK(d.exit_code == 2);
  CHECK(contains(d.err, "is a directory"));
  CHECK_FALSE(contains(d.err, "not valid JSON"));
  write_file(dir / "frac.json", R"({"stages": [{"activation_bytes": 1.7}]})");
  write_file(dir / "huge.json", R"({"stages": [{"activation_bytes": 1e30}]})");
  write_file(dir / "reduce.json",
             R"({"stages": [{"param_bytes": 1e18}], "reduce_link": {"bandwidth": 1e-300}})");
  const std::vector<std::pair<std::string, std::string>> cases{
      {"frac.json", "must be a whole number of bytes"},
      {"huge.json", "too large (max 2^62)"},
      {"reduce.json", "REDUCE time over 2 replicas"}};
  for (const auto& [file, text] : cases) {
    const cli_result r =
        run_cli(simulate_args("1f1b", 2, 2, {"--replicas", "2", "--costs", dir / file}));
    INFO(file << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--costs"));
    CHECK(contains(r.err, text));
  }
}
