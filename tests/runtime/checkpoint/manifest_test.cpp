// Tests for runtime/checkpoint/manifest: a round trip through JSON, every refusal of
// parse_manifest with its message naming the file and the field, and verify_files catching a
// flipped byte, a truncated file and a missing one.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "base/sha256.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string digest_a(64, 'a'), digest_b(64, 'b'), digest_c(64, 'c');

checkpoint_manifest sample() {
  checkpoint_manifest m;
  m.step = 10;
  m.data_position = 11;
  m.plan = {{"model", {{"type", "gpt"}, {"name", "gpt-small"}}},
            {"schedule", {{"kind", "1f1b"}, {"stages", 3}}}};
  m.rng = {{"init", 1234}, {"dropout", json::array({1, 2, 3})}};
  m.metrics = {{"samples", 640}, {"elapsed_s", 12.5}};
  m.files = {{0, "rank-0.safetensors", 100, digest_a},
             {2, "rank-2.safetensors", 300, digest_c},
             {1, "rank-1.safetensors", 200, digest_b}};
  return m;
}

// The sample manifest as JSON, changed by `edit`, parsed back.
result<checkpoint_manifest> parse_edited(const std::function<void(json&)>& edit) {
  json j = json::parse(to_json(sample()));
  edit(j);
  return parse_manifest(j.dump(), "DIR/step-00000010/manifest.json");
}

}  // namespace

TEST_CASE("a manifest round trips through to_json and parse_manifest", "[runtime][checkpoint]") {
  const checkpoint_manifest m = sample();
  const std::string text = to_json(m);
  CHECK(text.rfind("{\n  \"format\": \"pipeworks-checkpoint\",\n  \"version\": 2,\n  \"step\": 10,",
                   0) == 0);
  auto back = parse_manifest(text, "manifest.json");
  REQUIRE(back.ok());
  CHECK(back->format_version == 2);
  CHECK(back->step == 10);
  CHECK(back->data_position == 11);
  CHECK(back->plan == m.plan);
  CHECK(back->rng == m.rng);
  CHECK(back->metrics == m.metrics);
  REQUIRE(back->files.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(back->files[i].rank == m.files[i].rank);
    CHECK(back->files[i].path == m.files[i].path);
    CHECK(back->files[i].bytes == m.files[i].bytes);
    CHECK(back->files[i].sha256 == m.files[i].sha256);
  }
  CHECK(to_json(*back) == text);
}

TEST_CASE("a restarted checkpoint's restart record round trips and others have none", "[runtime][checkpoint]") {
  checkpoint_manifest m = sample();
  CHECK(to_json(m).find("\"restart\"") == std::string::npos);
  m.restart = {{"from_schedule", "2bw"}, {"step", 10}, {"dropped", json::array()}};
  const std::string text = to_json(m);
  auto back = parse_manifest(text, "manifest.json");
  REQUIRE(back.ok());
  CHECK(back->restart == m.restart);
  CHECK(to_json(*back) == text);
  auto edited = parse_edited([](json& j) { j["restart"] = 3; });
  REQUIRE(!edited.ok());
  CHECK_THAT(edited.message(), Catch::Contains("restart"));
}

TEST_CASE("parse_manifest reads upper-case digests as lower case", "[runtime][checkpoint]") {
  auto m = parse_edited([](json& j) { j["files"][1]["sha256"] = std::string(64, 'C'); });
  REQUIRE(m.ok());
  CHECK(m->files[1].sha256 == digest_c);
}

TEST_CASE("parse_manifest refuses each bad field and names the file and the field",
          "[runtime][checkpoint]") {
  struct refusal {
    const char* what;
    std::function<void(json&)> edit;
    std::string message;
  };
  const refusal cases[] = {
      {"unknown top-level key", [](json& j) { j["extra"] = 1; },
       "unknown key \"extra\" in the manifest"},
      {"unknown key in a file", [](json& j) { j["files"][1]["mode"] = "rw"; },
       "unknown key \"mode\" in files[1]"},
      {"missing step", [](json& j) { j.erase("step"); }, "missing field \"step\""},
      {"missing plan", [](json& j) { j.erase("plan"); }, "missing field \"plan\""},
      {"missing sha256", [](json& j) { j["files"][0].erase("sha256"); },
       "missing field \"files[0].sha256\""},
      {"step as a string", [](json& j) { j["step"] = "10"; }, "step must be a whole number"},
      {"negative step", [](json& j) { j["step"] = -1; }, "step must be a whole number"},
      {"fractional data position", [](json& j) { j["data_position"] = 1.5; },
       "data_position must be a whole number"},
      {"plan as an array", [](json& j) { j["plan"] = json::array(); },
       "plan must be a JSON object"},
      {"rng null", [](json& j) { j["rng"] = nullptr; }, "rng must be a JSON object"},
      {"metrics as a string", [](json& j) { j["metrics"] = "fast"; },
       "metrics must be a JSON object"},
      {"another format", [](json& j) { j["format"] = "other"; }, "format is \"other\""},
      {"format as a number", [](json& j) { j["format"] = 1; }, "format must be a string"},
      {"version 3", [](json& j) { j["version"] = 3; }, "version 3 is not supported"},
      {"no files", [](json& j) { j["files"] = json::array(); }, "files must be a non-empty array"},
      {"files as an object", [](json& j) { j["files"] = json::object(); },
       "files must be a non-empty array"},
      {"a file as a string", [](json& j) { j["files"][2] = "rank-2.safetensors"; },
       "files[2] must be a JSON object"},
      {"duplicate rank", [](json& j) { j["files"][2]["rank"] = 0; },
       "files[2].rank 0 appears twice (also files[0].rank)"},
      {"missing rank", [](json& j) { j["files"][2]["rank"] = 5; }, "files has no entry for rank 1 (files[2].rank is 5)"},
      {"negative rank", [](json& j) { j["files"][1]["rank"] = -1; },
       "files[1].rank must be a whole number"},
      {"negative bytes", [](json& j) { j["files"][1]["bytes"] = -5; },
       "files[1].bytes must be a whole number"},
      {"absolute path", [](json& j) { j["files"][0]["path"] = "/etc/passwd"; },
       "files[0].path must be a file name in the step directory"},
      {"path with ..", [](json& j) { j["files"][0]["path"] = "../rank-0.safetensors"; },
       "files[0].path must be a file name in the step directory"},
      {"path in a subdirectory", [](json& j) { j["files"][1]["path"] = "sub/rank-1.safetensors"; },
       "files[1].path must be a file name in the step directory"},
      {"empty path", [](json& j) { j["files"][1]["path"] = ""; },
       "files[1].path must be a file name in the step directory"},
      {"shared path", [](json& j) { j["files"][1]["path"] = "rank-0.safetensors"; },
       "files[1].path \"rank-0.safetensors\" is also files[0].path"},
      {"short sha256", [](json& j) { j["files"][2]["sha256"] = "abc"; },
       "files[2].sha256 must be 64 hexadecimal digits"},
      {"sha256 with a non-hex digit",
       [](json& j) { j["files"][2]["sha256"] = std::string(63, 'a') + "g"; },
       "files[2].sha256 must be 64 hexadecimal digits"},
  };
  for (const refusal& c : cases) {
    INFO(c.what);
    auto m = parse_edited(c.edit);
    REQUIRE_FALSE(m.ok());
    CHECK_THAT(m.message(), Catch::StartsWith("DIR/step-00000010/manifest.json: ") &&
                                Catch::Contains(c.message));
  }
}

TEST_CASE("parse_manifest refuses text that is not a JSON object", "[runtime][checkpoint]") {
  auto broken = parse_manifest("{\"format\": ", "m.json");
  REQUIRE_FALSE(broken.ok());
  CHECK_THAT(broken.message(), Catch::StartsWith("m.json is not valid JSON"));
  auto array = parse_manifest("[1, 2]", "m.json");
  REQUIRE_FALSE(array.ok());
  CHECK_THAT(array.message(), Catch::StartsWith("m.json: the manifest must be a JSON object"));
}

TEST_CASE("verify_files catches a flipped byte a truncated file and a missing file",
          "[runtime][checkpoint]") {
  const test::scratch_dir scratch;
  const fs::path& dir = scratch.path();
  checkpoint_manifest m = sample();
  m.files.clear();
  for (int r = 0; r < 3; ++r) {
    const std::string name = "rank-" + std::to_string(r) + ".safetensors";
    const std::string body(1000 + 100 * static_cast<std::size_t>(r), static_cast<char>('x' + r));
    std::ofstream(dir / name, std::ios::binary) << body;
    m.files.push_back({r, name, body.size(), sha256_file((dir / name).string()).value()});
  }
  REQUIRE(verify_files(m, dir.string()).ok());

  SECTION("a flipped byte") {
    std::fstream f(dir / "rank-1.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(500);
    f.put('!');
    f.close();
    const status s = verify_files(m, dir.string());
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(),
               Catch::Contains((dir / "rank-1.safetensors").string() + ": sha256 is ") &&
                   Catch::Contains("the manifest records " + m.files[1].sha256) &&
                   Catch::Contains("corrupt or was changed after the checkpoint was written"));
  }
  SECTION("a truncated file") {
    fs::resize_file(dir / "rank-2.safetensors", 700);
    const status s = verify_files(m, dir.string());
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(), Catch::Contains((dir / "rank-2.safetensors").string() +
                                            ": bytes is 700, the manifest records 1200") &&
                                Catch::Contains("truncated"));
  }
  SECTION("a missing file") {
    fs::remove(dir / "rank-0.safetensors");
    const status s = verify_files(m, dir.string());
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(), Catch::Contains((dir / "rank-0.safetensors").string() + " is missing") &&
                                Catch::Contains("rank 0"));
  }
  SECTION("a directory in place of a file") {
    fs::remove(dir / "rank-1.safetensors");
    fs::create_directory(dir / "rank-1.safetensors");
    const status s = verify_file(m.files[1], dir.string());
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.message(), Catch::Contains("rank-1.safetensors (rank 1) is not a regular file"));
  }
}

TEST_CASE("a file in a directory local to a host keeps its host and directory", "[runtime][checkpoint]") {
  checkpoint_manifest m = sample();
  m.files[1].host = "10.0.0.3";
  m.files[1].dir = "/scratch/own/run-0123456789abcdef/step-00000010";
  auto back = parse_manifest(to_json(m), "manifest.json");
  REQUIRE(back.ok());
  CHECK(back->files[1].host == "10.0.0.3");
  CHECK(back->files[1].dir == m.files[1].dir);
  CHECK(back->files[0].dir.empty());
  CHECK(file_dir(back->files[1], "DIR") == m.files[1].dir);
  CHECK(file_dir(back->files[0], "DIR") == "DIR");
  CHECK(to_json(*back) == to_json(m));

  auto refused = [&](const std::function<void(json&)>& edit) {
    auto r = parse_edited([&](json& j) {
      j["files"][1]["host"] = "10.0.0.3";
      j["files"][1]["dir"] = "/scratch/own";
      edit(j);
    });
    REQUIRE_FALSE(r.ok());
    return r.message();
  };
  CHECK_THAT(refused([](json& j) { j["files"][1]["dir"] = "relative/dir"; }),
             Catch::Contains("files[1].dir must be an absolute directory on 10.0.0.3"));
  CHECK_THAT(refused([](json& j) { j["files"][1]["host"] = ""; }),
             Catch::Contains("files[1].host must name the host that holds the file"));
  CHECK_THAT(refused([](json& j) { j["files"][1].erase("host"); }),
             Catch::Contains("missing field \"files[1].host\""));
  CHECK_THAT(refused([](json& j) { j["files"][1]["dir"] = 7; }),
             Catch::Contains("files[1].dir must be a string"));
}

TEST_CASE("verify_files leaves another host's files to their reader and names the host when read",
          "[runtime][checkpoint]") {
  const test::scratch_dir scratch;
  const fs::path& dir = scratch.path();
  checkpoint_manifest m = sample();
  m.files.clear();
  fs::create_directories(dir / "own");
  for (int r = 0; r < 2; ++r) {
    const std::string name = "rank-" + std::to_string(r) + ".safetensors";
    const fs::path at = r == 0 ? dir : dir / "own";
    std::ofstream(at / name, std::ios::binary) << std::string(500, 'q');
    m.files.push_back({r, name, 500, sha256_file((at / name).string()).value(), "", ""});
  }
  m.files[1].host = "10.0.0.3";
  m.files[1].dir = (dir / "own").string();
  REQUIRE(verify_files(m, dir.string()).ok());

  // Present here: checked like any other.
  std::ofstream(dir / "own" / "rank-1.safetensors", std::ios::binary) << std::string(500, 'r');
  CHECK_THAT(verify_files(m, dir.string()).message(), Catch::Contains("sha256 is"));

  // Its directory is not on this machine: left to the process that reads it, which names the host.
  m.files[1].dir = (dir / "elsewhere").string();
  CHECK(verify_files(m, dir.string()).ok());
  const status s = verify_file(m.files[1], dir.string());
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::Contains("rank-1.safetensors (rank 1's file) is not on this machine") &&
                              Catch::Contains("a worker on host 10.0.0.3 wrote it") &&
                              Catch::Contains("Place rank 1 on a worker of that host"));
}

TEST_CASE("an edited manifest is refused naming that it was edited or is corrupt",
          "[runtime][checkpoint]") {
  const std::string good = to_json(sample());
  REQUIRE(parse_manifest(good, "m.json").ok());
  // Each edit parses as a manifest; only its own sha256 finds it.
  const std::vector<std::pair<const char*, std::function<void(json&)>>> edits = {
      {"optimizer", [](json& j) { j["plan"]["optimizer"] = {{"kind", "sgd"}}; }},
      {"step", [](json& j) { j["step"] = 12; }},
      {"data position", [](json& j) { j["data_position"] = 1000000000000; }},
      {"a file's size", [](json& j) { j["files"][0]["bytes"] = 101; }},
      {"metrics", [](json& j) { j["metrics"]["samples"] = 641; }},
      {"the checksum itself", [](json& j) { j["manifest_sha256"] = std::string(64, '0'); }},
  };
  for (const auto& [what, edit] : edits) {
    INFO(what);
    json j = json::parse(good);
    edit(j);
    auto m = parse_manifest(j.dump(2), "DIR/step-00000010/manifest.json");
    REQUIRE_FALSE(m.ok());
    CHECK_THAT(m.message(), Catch::StartsWith("DIR/step-00000010/manifest.json: manifest_sha256 is ") &&
                                Catch::Contains("the manifest was edited or is corrupt"));
  }
  // Whitespace and key order are not content: the same manifest written compactly still reads.
  CHECK(parse_manifest(json::parse(good).dump(), "m.json").ok());
  // A manifest without its checksum is refused naming the field.
  json j = json::parse(good);
  j.erase("manifest_sha256");
  auto m = parse_manifest(j.dump(), "m.json");
  REQUIRE_FALSE(m.ok());
  CHECK_THAT(m.message(), Catch::Contains("missing field \"manifest_sha256\""));
}

TEST_CASE("a version 1 manifest is refused naming its format version", "[runtime][checkpoint]") {
  json j = json::parse(to_json(sample()));
  j["version"] = 1;
  j.erase("manifest_sha256");  // version 1 had none
  auto m = parse_manifest(j.dump(), "DIR/step-00000010/manifest.json");
  REQUIRE_FALSE(m.ok());
  CHECK_THAT(m.message(), Catch::StartsWith("DIR/step-00000010/manifest.json: version 1 is an older "
                                            "checkpoint format") &&
                              Catch::Contains("reads checkpoint version 2"));
}

TEST_CASE("a manifest's data record round trips with the data it replaced", "[runtime][checkpoint]") {
  checkpoint_manifest m = sample();
  const data_fingerprint now{"/data/b.txt", 120, 1700000000000000001, 1, digest_b};
  const data_fingerprint was{"/data/a.txt", 100, 1600000000000000000, 1, digest_a};
  m.data = data_record{now, was, 6};
  const std::string text = to_json(m);
  auto back = parse_manifest(text, "m.json");
  REQUIRE(back.ok());
  REQUIRE(back->data.has_value());
  CHECK(*back->data == *m.data);
  CHECK(to_json(*back) == text);
  // Its fields are checked and named like the others'.
  json j = json::parse(text);
  j["data"]["path"] = "relative.txt";
  auto bad = parse_manifest(j.dump(), "m.json");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Catch::Contains("data.path must be an absolute path"));
  j = json::parse(text);
  j["data"]["replaced"].erase("step");
  bad = parse_manifest(j.dump(), "m.json");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Catch::Contains("data.replaced.step must be a whole number"));
}
