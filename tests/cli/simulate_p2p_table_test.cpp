// docs/schedules.md's table of cyclic's p2p reduce against the collective one: every row is what
// `pipeworks simulate --reduce collective|p2p` prints for its link, so the prose stays true.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;

namespace {

// The rows between <!-- p2p-table --> and <!-- /p2p-table --> after the header: their cells.
std::vector<std::vector<std::string>> doc_rows() {
  std::ifstream in(std::string(PIPEWORKS_SOURCE_DIR) + "/docs/schedules.md");
  std::vector<std::vector<std::string>> rows;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "<!-- p2p-table -->") inside = true;
    if (line == "<!-- /p2p-table -->") break;
    if (!inside || line.rfind("| ", 0) != 0 || line.rfind("| G/B", 0) == 0) continue;
    std::vector<std::string> cells;
    std::istringstream cols(line.substr(1));
    for (std::string cell; std::getline(cols, cell, '|');) {
      const auto b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
      if (b != std::string::npos) cells.push_back(cell.substr(b, e - b + 1));
    }
    rows.push_back(cells);
  }
  return rows;
}

std::string makespan(const scratch_dir& dir, const std::string& costs, const std::string& w,
                     const char* reduce) {
  const cli_result r = run_cli({"simulate", "--schedule", "cyclic", "--stages", "4",
                                "--microbatches", "12", "--replicas", w, "--steps", "8",
                                "--reduce", reduce, "--costs", dir / costs});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto at = r.out.find("makespan ");
  REQUIRE(at != std::string::npos);
  return r.out.substr(at + 9, r.out.find(',', at) - at - 9);
}

}  // namespace

TEST_CASE("the docs' table of cyclic's p2p reduce is what simulate prints", "[cli]") {
  scratch_dir dir;
  const auto rows = doc_rows();
  REQUIRE(rows.size() == 6);
  for (const auto& row : rows) {
    REQUIRE(row.size() == 5);
    INFO("G/B " << row[0] << ", w " << row[1]);
    const std::string costs = "costs" + row[0] + ".json";
    write_file(dir / costs, "{\"stages\": [{\"forward\": 1, \"backward\": 2, \"param_bytes\": " +
                                std::to_string(1000 * std::stoi(row[0])) +
                                "}], \"reduce_link\": {\"latency\": 0, \"bandwidth\": 1000}}");
    const std::string all = makespan(dir, costs, row[1], "collective");
    const std::string chain = makespan(dir, costs, row[1], "p2p");
    CHECK(all == row[2]);
    CHECK(chain == row[3]);
    char ratio[16];
    std::snprintf(ratio, sizeof ratio, "%.3f", std::stod(chain) / std::stod(all));
    CHECK(ratio == row[4]);
  }
}
