// `train --json` reports each stage's predicted memory (runtime/memory_plan, what --memory-limit
// checks) beside the measured peaks: within 10% of each other for every schedule, with and
// without replicas and ZeRO (they are in fact equal), and the measured bytes of a rank within
// the predicted total.
#include <catch2/catch.hpp>

#include <map>
#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "run_cli.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {


bool within_10_percent(std::int64_t predicted, std::int64_t measured) {
  const auto gap = predicted > measured ? predicted - measured : measured - predicted;
  return 10 * gap <= measured;
}

}  // namespace

TEST_CASE("train --json reports predicted peaks within 10 percent of the measured ones for every schedule", "[cli]") {
  scratch_dir dir;
  write_file(dir / "text.txt", small_text());
  const std::vector<std::vector<std::string>> shapes{
      {"--schedule", "gpipe", "--stages", "2"},        {"--schedule", "1f1b", "--stages", "3"},
      {"--schedule", "interleaved", "--stages", "2"},  {"--schedule", "zb-h1", "--stages", "2"},
      {"--schedule", "zb-h2", "--stages", "2"},        {"--schedule", "bfs", "--stages", "2"},
      {"--schedule", "pipedream", "--stages", "2"},    {"--schedule", "pipedream-vs", "--stages", "2"},
      {"--schedule", "2bw", "--stages", "2"},          {"--schedule", "cyclic", "--stages", "2", "--replicas", "2"},
      {"--schedule", "1f1b", "--stages", "2", "--replicas", "2", "--zero", "1"},
      {"--schedule", "2bw", "--stages", "2", "--replicas", "4", "--zero", "2"},
      {"--schedule", "zbv", "--stages", "2"},          {"--schedule", "v-half", "--stages", "2"},
      {"--schedule", "v-min", "--stages", "2"},        {"--schedule", "dualpipev", "--stages", "2"},
      {"--schedule", "dualpipe", "--stages", "2"}};
  for (const auto& shape : shapes) {
    std::vector<std::string> args{"train", "--model", "gpt-tiny", "--data", dir / "text.txt",
                                  "--steps", "2", "--batch", "16", "--microbatches", "4", "--sample", "0",
                                  "--eval-windows", "1", "--json"};
    args.insert(args.end(), shape.begin(), shape.end());
    INFO(json(shape).dump());
    const cli_result r = run_cli(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json report = last_json(r);
    REQUIRE(report["stages"].size() >= 2);
    // A rank's measured peak covers all its virtual stages: its predicted total is theirs summed.
    std::map<int, std::int64_t> rank_total;
    for (const json& st : report["stages"])
      rank_total[st.value("device", 0)] += st["predicted"]["total_bytes"].get<std::int64_t>();
    for (const json& st : report["stages"]) {
      INFO(st.dump());
      REQUIRE(st.contains("predicted"));
      const json& p = st["predicted"];
      CHECK(within_10_percent(p["peak_activation_bytes"], st["peak_activation_bytes"]));
      CHECK(within_10_percent(p["optimizer_bytes"], st["optimizer_bytes"]));
      CHECK(within_10_percent(p["peak_inflight"], st["peak_inflight"]));
      CHECK(within_10_percent(p["peak_versions"], st["peak_versions"]));
      CHECK(p["total_bytes"] > p["peak_activation_bytes"]);
      // The rank's host tensors and moments at their peak, as its memory account measured them
      // (what --memory-limit enforces), stay within the predicted total (each part at its peak).
      REQUIRE(st.contains("device"));
      CHECK(st["device_peak_bytes"].get<std::int64_t>() <= rank_total[st["device"].get<int>()]);
    }
  }
}
