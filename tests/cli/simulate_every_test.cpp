// `pipeworks simulate --every-schedule` (cli/simulate_every.cpp): its table lists every schedule,
// its figures match the simulator's closed forms, and docs/schedules.md shows its output verbatim.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "run_cli.hpp"
#include "runtime/schedule.hpp"

using namespace pipeworks;
using namespace pipeworks::cli_test;

namespace {

// The table's cells by schedule name: the cells of each row that starts "| name |", trimmed,
// the name left out.
using table_rows = std::map<std::string, std::vector<std::string>>;

table_rows rows_of(const std::string& out) {
  table_rows rows;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| ", 0) != 0 || line.rfind("| schedule |", 0) == 0) continue;
    std::vector<std::string> cells;
    std::istringstream cols(line.substr(1));
    for (std::string cell; std::getline(cols, cell, '|');) {
      const auto b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
      if (b != std::string::npos) cells.push_back(cell.substr(b, e - b + 1));
    }
    REQUIRE(cells.size() == 8);
    rows[cells[0]] = {cells.begin() + 1, cells.end()};
  }
  return rows;
}

// Columns after the name.
enum column { chunks, bubble_one, vs_one, bubble_steady, vs_steady, activations, parameters };

// A cell as a number ("27.27%" as 27.27).
double number(const table_rows& rows, const std::string& kind, column c) {
  INFO(kind << " column " << c);
  REQUIRE(rows.count(kind) == 1);
  return std::stod(rows.at(kind).at(c));
}

std::string table_for(int p, int m) {
  const cli_result r = run_cli({"simulate", "--every-schedule", "--stages", std::to_string(p),
                                "--microbatches", std::to_string(m)});
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.exit_code == 0);
  return r.out;
}

// Printed to 2 decimals (percentages) or 3 (ratios): within half the last digit.
Approx printed(double x, int decimals) {
  return Approx(x).epsilon(0).margin(0.5 * std::pow(10.0, -decimals) + 1e-12);
}

}  // namespace

TEST_CASE("simulate --every-schedule has one row for every schedule kind, in order", "[cli]") {
  const std::string out = table_for(4, 8);
  std::vector<std::string> names;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("| ", 0) == 0 && line.rfind("| schedule |", 0) != 0)
      names.push_back(line.substr(2, line.find(' ', 2) - 2));
  std::vector<std::string> expected;
  for (schedule_kind k : every_schedule_kind()) expected.emplace_back(schedule_name(k));
  CHECK(names == expected);
  CHECK_FALSE(contains(out, "Not simulated"));
  CHECK_FALSE(contains(out, "Not yet steady"));
  const table_rows rows = rows_of(out);
  for (schedule_kind k : every_schedule_kind()) {
    const std::string name(schedule_name(k));
    const bool looped = k == schedule_kind::interleaved || k == schedule_kind::bfs;
    const int v = looped ? 2 : default_chunks(k);
    CHECK(number(rows, name, chunks) == v);
  }
}

TEST_CASE("simulate --every-schedule matches the closed forms at p = 4, m = 8 and p = 8, m = 32",
          "[cli]") {
  // The closed forms of tests/runtime/simulate_closed_forms_test.cpp, with a stage's F = I = W:
  // GPipe and 1F1B bubble (p - 1)/(m + p - 1); interleaved with 2 chunks half 1F1B's idle time;
  // ZB-H1 a third of it (steady); ZB-H2 and ZBV none (steady), ZBV a sixth in one step (p - 1
  // chunk-actions against 1F1B's 6(p - 1)). Peak activations p for 1F1B, ZB-H1 and ZBV, m for
  // GPipe, 2p - 1 for ZB-H2, p/2 + 1 for V-Half; parameters 1 copy for flush schedules, 2 for 2BW.
  // DualPipe (a chunk a whole stage): idle (p/2 - 1)(F&B + B - 3W) = p - 2 against 1F1B's
  // 3(p - 1), p + 1 activations and 2 copies of the parameters, DualPipe's README's figures.
  for (auto [p, m] : {std::pair{4, 8}, {8, 32}}) {
    INFO("p=" << p << " m=" << m);
    const table_rows rows = rows_of(table_for(p, m));
    const double b = 100.0 * (p - 1) / (m + p - 1);
    for (const char* k : {"gpipe", "1f1b"}) {
      CHECK(number(rows, k, bubble_one) == printed(b, 2));
      CHECK(number(rows, k, vs_one) == printed(1.0, 3));
    }
    CHECK(number(rows, "1f1b", bubble_steady) == printed(b, 2));
    CHECK(number(rows, "interleaved", vs_one) == printed(0.5, 3));
    CHECK(number(rows, "zb-h1", vs_steady) == printed(1.0 / 3, 3));
    CHECK(number(rows, "zb-h2", vs_steady) == printed(0.0, 3));
    CHECK(number(rows, "zbv", vs_steady) == printed(0.0, 3));
    CHECK(number(rows, "zbv", bubble_steady) == printed(0.0, 2));
    CHECK(number(rows, "zbv", vs_one) == printed(1.0 / 6, 3));
    CHECK(number(rows, "v-half", vs_steady) <= 0.5);
    CHECK(number(rows, "v-min", vs_steady) <= 2.0 / 3 + 0.0005);
    CHECK(number(rows, "1f1b", activations) == p);
    CHECK(number(rows, "zb-h1", activations) == p);
    CHECK(number(rows, "zbv", activations) == p);
    CHECK(number(rows, "gpipe", activations) == m);
    CHECK(number(rows, "zb-h2", activations) == 2 * p - 1);
    CHECK(number(rows, "v-half", activations) == p / 2 + 1);
    CHECK(number(rows, "dualpipe", vs_one) == printed((p - 2) / (3.0 * (p - 1)), 3));
    CHECK(number(rows, "dualpipe", activations) == p + 1);
    CHECK(number(rows, "dualpipe", parameters) == 2);
    for (schedule_kind k : every_schedule_kind())
      if (is_flush(k) && default_routes(k) == 1)
        CHECK(number(rows, std::string(schedule_name(k)), parameters) == 1);
    CHECK(number(rows, "2bw", parameters) == 2);
  }
}

TEST_CASE("simulate --every-schedule notes a schedule whose generator refuses p and m", "[cli]") {
  // Interleaved needs m a multiple of p; the other rows are still there.
  const std::string out = table_for(4, 6);
  const table_rows rows = rows_of(out);
  CHECK(rows.count("interleaved") == 0);
  CHECK(rows.count("1f1b") == 1);
  CHECK(contains(out, "Not simulated, interleaved: "));
}

TEST_CASE("simulate --every-schedule refuses the flags that pick one schedule or its costs",
          "[cli]") {
  const std::vector<std::string> base{"simulate", "--every-schedule", "--stages", "4",
                                      "--microbatches", "8"};
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--schedule", "1f1b"}, {"--chunks", "2"}, {"--steps", "2"},
        {"--replicas", "2"}, {"--fwd", "1"}, {"--json"}, {"--text"}}) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    const cli_result r = run_cli(args);
    INFO(extra[0] << "\nstderr:\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, extra[0] + ": cannot go with --every-schedule"));
  }
  const cli_result r = run_cli({"simulate", "--every-schedule", "--microbatches", "8"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--stages: is required with --every-schedule"));
}

TEST_CASE("docs/schedules.md shows simulate --every-schedule's output under each command it gives",
          "[cli]") {
  // Each ```sh block holding one `pipeworks simulate --every-schedule ...` line is run, and the
  // text after the block (from the blank line) must be its output, word for word.
  std::ifstream in(std::string(PIPEWORKS_SOURCE_DIR) + "/docs/schedules.md");
  REQUIRE(in);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string doc = buf.str();
  const std::string open = "```sh\npipeworks simulate --every-schedule ";
  int blocks = 0;
  for (auto at = doc.find(open); at != std::string::npos; at = doc.find(open, at + 1)) {
    const auto line_end = doc.find('\n', at + 6);
    const std::string command = doc.substr(at + 6, line_end - at - 6);
    INFO(command);
    REQUIRE(doc.compare(line_end, 6, "\n```\n\n") == 0);
    std::vector<std::string> args;
    std::istringstream words(command.substr(std::string("pipeworks ").size()));
    for (std::string w; words >> w;) args.push_back(w);
    const cli_result r = run_cli(args);
    REQUIRE(r.exit_code == 0);
    INFO("its output:\n" << r.out);
    CHECK(doc.compare(line_end + 6, r.out.size(), r.out) == 0);
    ++blocks;
  }
  CHECK(blocks >= 2);
  CHECK(contains(doc, open + "--stages 4 --microbatches 8\n"));
  CHECK(contains(doc, open + "--stages 8 --microbatches 32\n"));
}
