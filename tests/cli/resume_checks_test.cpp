// What a resumed run checks before any rank starts, through the CLI: its data against the
// checkpoint's (a relative --data from another working directory, bytes changed in place; exit 2
// unless --resume-on-other-data, which the new manifests record), the manifest's own sha256 (an
// edited manifest is refused by inspect, --init and --resume), the plan fields each rank file
// records, and a rank file of another step; one edited to pass those checks is named by the
// driver once its rank strays. Each case checks the exit code, the message and that the
// checkpoint is still all there.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "manifest_edit.hpp"
#include "run_cli.hpp"
#include "tests/runtime/checkpoint/checkpoint_fixture.hpp"

using namespace pipeworks::cli_test;
using nlohmann::json;
namespace fs = std::filesystem;
using pipeworks::test::files_under;

namespace {

// `pipeworks args...` run in the working directory `cwd`, ended after five minutes at most (so a
// run that would wait for ever fails the test instead of hanging it).
cli_result run_in(const std::string& cwd, const std::vector<std::string>& args) {
  scratch_dir io;
  const std::string out = io / "stdout", err = io / "stderr";
  const pid_t pid = spawn_cli(args, out, err, {"/usr/bin/timeout", "300", "/usr/bin/env", "-C", cwd});
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) REQUIRE(errno == EINTR);
  return {exit_code_of(status), read_file(out), read_file(err)};
}

// gpt-tiny over two stages for 8 steps on `data`, checkpoints after steps 3 and 6 into `ck`.
std::vector<std::string> train_args(const std::string& data, const std::string& ck) {
  return {"train", "--model", "gpt-tiny", "--data", data, "--steps", "8", "--batch", "4",
          "--microbatches", "2", "--schedule", "1f1b", "--stages", "2", "--save-every", "3",
          "--checkpoint-dir", ck, "--sample", "0", "--eval-windows", "4"};
}

std::vector<std::string> resume_args(const std::string& ck, std::vector<std::string> more = {}) {
  std::vector<std::string> a{"train", "--resume", ck, "--sample", "0", "--eval-windows", "4"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// A run trained in dir/a on the relative --data txt, its checkpoints in dir/a/ck.
void train_in_a(const scratch_dir& dir) {
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  write_file(dir / "a/txt", small_text(20000));
  write_file(dir / "b/txt", small_text(30000));  // other text under the same relative name
  const cli_result r = run_in(dir / "a", train_args("txt", "ck"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(has_manifest(dir / "a/ck", 6));
}

json manifest_of(const std::string& ck, int step) {
  return json::parse(read_file(fs::path(ck) / ("step-0000000" + std::to_string(step)) / "manifest.json"));
}

}  // namespace

TEST_CASE("a relative --data resumed from another directory exits 2 naming the paths and what changed",
          "[cli][checkpoint]") {
  scratch_dir dir;
  train_in_a(dir);
  const auto before = files_under(dir / "a/ck");
  // --data txt given in b names b/txt: not the checkpoint's data. (Without --data a resume reads
  // the checkpoint's own, a/txt, by the absolute path its manifest recorded: below.)
  const cli_result r = run_in(dir / "b", resume_args("../a/ck", {"--data", "txt"}));
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--resume: the data txt is not what the checkpoint of step 6 was trained on"));
  CHECK(contains(r.err, "its path is " + dir / "b/txt" + ", the checkpoint's was " + dir / "a/txt"));
  CHECK(contains(r.err, "its size is 30000 bytes, the checkpoint's was 20000"));
  CHECK(contains(r.err, "its sha256 is"));
  CHECK(contains(r.err, "--resume-on-other-data"));
  CHECK(files_under(dir / "a/ck") == before);  // nothing trained, written or removed
  CHECK(read_file(dir / "b/txt") == small_text(30000));

  // The same bytes at the other path are still another path: refused, naming only the path.
  write_file(dir / "b/txt", small_text(20000));
  const cli_result same = run_in(dir / "b", resume_args("../a/ck", {"--data", "txt"}));
  CHECK(same.exit_code == 2);
  CHECK(contains(same.err, "its path is " + dir / "b/txt"));
  CHECK_FALSE(contains(same.err, "sha256 is"));
  CHECK(files_under(dir / "a/ck") == before);

  // The checkpoint records the data's absolute path and fingerprint; inspect shows them.
  const cli_result shown = run_in(dir / "b", {"checkpoint", "inspect", "../a/ck", "--json"});
  REQUIRE(shown.exit_code == 0);
  const json data = json::parse(shown.out)["data"];
  CHECK(data["path"] == dir / "a/txt");
  CHECK(data["bytes"] == 20000);
  CHECK(data["files"] == 1);
  pipeworks::sha256 h;
  const std::string text = small_text(20000);
  h.update(std::as_bytes(std::span(text.data(), text.size())));
  CHECK(data["sha256"] == h.hex_digest());
  CHECK_FALSE(data.contains("replaced"));

  // From another directory without --data it reads the checkpoint's own data and resumes, as
  // from its own directory.
  const cli_result elsewhere = run_in(dir / "b", resume_args("../a/ck"));
  INFO(elsewhere.err);
  CHECK(elsewhere.exit_code == 0);
  const cli_result home = run_in(dir / "a", resume_args("ck"));
  INFO(home.err);
  CHECK(home.exit_code == 0);
}

TEST_CASE("a resume on other data with its flag goes on and every new manifest records what it replaced",
          "[cli][checkpoint]") {
  scratch_dir dir;
  train_in_a(dir);
  // Resume from step 3 (a copy without step 6), so that the resumed run writes step 6 again.
  fs::copy(dir / "a/ck", dir / "a/ck3", fs::copy_options::recursive);
  fs::remove_all(dir / "a/ck3/step-00000006");
  const cli_result r = run_in(dir / "b", resume_args("../a/ck3", {"--resume-on-other-data", "--data", "txt"}));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json six = manifest_of(dir / "a/ck3", 6);
  CHECK(six["data"]["path"] == dir / "b/txt");
  CHECK(six["data"]["bytes"] == 30000);
  CHECK(six["data"]["replaced"]["path"] == dir / "a/txt");
  CHECK(six["data"]["replaced"]["bytes"] == 20000);
  CHECK(six["data"]["replaced"]["step"] == 3);
  CHECK(six["data"]["replaced"]["sha256"] == manifest_of(dir / "a/ck3", 3)["data"]["sha256"]);
  const cli_result shown = run_in(dir / "b", {"checkpoint", "inspect", "../a/ck3"});
  CHECK(shown.exit_code == 0);
  CHECK(contains(shown.out, "resumed on other data at step 3 (--resume-on-other-data), replacing " +
                                dir / "a/txt"));
  // The checkpoint it resumed from is as it was.
  CHECK(files_under(dir / "a/ck3/step-00000003") == files_under(dir / "a/ck/step-00000003"));

  // Without a resume the flag means nothing: refused.
  const cli_result fresh = run_in(dir / "b", {"train", "--model", "gpt-tiny", "--data", "txt",
                                              "--steps", "2", "--sample", "0", "--eval-windows", "1",
                                              "--resume-on-other-data"});
  CHECK(fresh.exit_code == 2);
  CHECK(contains(fresh.err, "--resume-on-other-data: only a resumed run"));
}

TEST_CASE("data changed in place is refused naming its sha256 and a file only touched resumes",
          "[cli][checkpoint]") {
  scratch_dir dir;
  train_in_a(dir);
  const std::string data = dir / "a/txt";
  const auto before = files_under(dir / "a/ck");
  std::string text = small_text(20000);
  text[100] = text[100] == 'x' ? 'y' : 'x';  // one byte, the size kept
  write_file(data, text);
  const cli_result changed = run_in(dir / "a", resume_args("ck"));
  INFO(changed.err);
  CHECK(changed.exit_code == 2);
  // Named by the absolute path the checkpoint recorded (the run read it there).
  CHECK(contains(changed.err, "the data " + data + " is not what the checkpoint of step 6 was trained on: its sha256 is"));
  CHECK_FALSE(contains(changed.err, "its size"));
  CHECK_FALSE(contains(changed.err, "its path"));
  CHECK(files_under(dir / "a/ck") == before);

  // The original bytes again, with another modification time: the same data, so it resumes.
  write_file(data, small_text(20000));
  fs::last_write_time(data, fs::file_time_type(std::chrono::seconds(1700000000)));
  const cli_result touched = run_in(dir / "a", resume_args("ck"));
  INFO(touched.err);
  CHECK(touched.exit_code == 0);
}

TEST_CASE("an edited manifest is refused by inspect --init and --resume naming it",
          "[cli][checkpoint]") {
  scratch_dir dir;
  train_in_a(dir);
  const std::string ck = dir / "a/ck";
  edit_manifest(ck + "/step-00000006/manifest.json",
                [](nlohmann::ordered_json& m) { m["plan"]["optimizer"]["kind"] = "sgd"; }, false);
  const auto before = files_under(ck);
  const std::vector<std::vector<std::string>> readers = {
      {"checkpoint", "inspect", "ck"},
      resume_args("ck"),
      {"train", "--model", "gpt-tiny", "--data", "txt", "--steps", "2", "--init", "ck", "--sample",
       "0", "--eval-windows", "1"}};
  for (const auto& args : readers) {
    const cli_result r = run_in(dir / "a", args);
    INFO(args[0] << " " << args[1] << ": " << r.err);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "ck/step-00000006/manifest.json: manifest_sha256 is 0000"));
    CHECK(contains(r.err, "the manifest was edited or is corrupt since pipeworks wrote it"));
    CHECK(files_under(ck) == before);
  }
}

TEST_CASE("a manifest edited with its sha256 made to match is refused naming the field",
          "[cli][checkpoint]") {
  scratch_dir dir;
  train_in_a(dir);
  struct refusal {
    const char* what;
    std::function<void(nlohmann::ordered_json&)> edit;
    int exit_code;
    std::string message;
  };
  const refusal cases[] = {
      {"adamw to sgd", [](nlohmann::ordered_json& m) { m["plan"]["optimizer"]["kind"] = "sgd"; }, 2,
       "rank-0.safetensors: its pipeworks.optimizer (the optimizer kind) is adamw, but the "
       "manifest's plan says sgd"},
      {"batch 4 to 8", [](nlohmann::ordered_json& m) { m["plan"]["data"]["batch"] = 8; }, 2,
       "rank-0.safetensors: its pipeworks.microbatch (samples per microbatch) is 2, but the "
       "manifest's plan says 4"},
      {"data_position 10^12", [](nlohmann::ordered_json& m) { m["data_position"] = 1000000000000; }, 1,
       "data_position is 1000000000000, but the checkpoint is of step 6"},
  };
  for (const refusal& c : cases) {
    INFO(c.what);
    const std::string ck = dir / ("ck-" + std::to_string(&c - cases));
    fs::copy(dir / "a/ck", ck, fs::copy_options::recursive);
    edit_manifest(ck + "/step-00000006/manifest.json", c.edit, true);
    const auto before = files_under(ck);
    const cli_result r = run_in(dir / "a", resume_args(ck));
    INFO(r.err);
    CHECK(r.exit_code == c.exit_code);
    CHECK(contains(r.err, c.message));
    const cli_result shown = run_in(dir / "a", {"checkpoint", "inspect", ck});
    CHECK(shown.exit_code == 1);
    CHECK(contains(shown.err, c.message));
    CHECK(files_under(ck) == before);
  }
}

TEST_CASE("a rank file of another step is named with both steps before any rank starts",
          "[cli][checkpoint]") {
  scratch_dir dir;
  train_in_a(dir);
  const std::string ck = dir / "a/ck";
  const std::string copied = ck + "/step-00000006/rank-1.safetensors";
  fs::copy_file(ck + "/step-00000003/rank-1.safetensors", copied, fs::copy_options::overwrite_existing);
  const std::string bytes = read_file(copied);
  pipeworks::sha256 h;
  h.update(std::as_bytes(std::span(bytes.data(), bytes.size())));
  const std::string digest = h.hex_digest();
  edit_manifest(ck + "/step-00000006/manifest.json", [&](nlohmann::ordered_json& m) {
    m["files"][1]["bytes"] = bytes.size();
    m["files"][1]["sha256"] = digest;
  }, true);
  const auto before = files_under(ck);
  const std::string named = "ck/step-00000006/rank-1.safetensors is a rank file of step 3, but "
                            "the manifest is of step 6";
  const cli_result r = run_in(dir / "a", resume_args("ck"));
  INFO(r.err);
  CHECK(r.exit_code == 2);  // not a run waiting for ever
  CHECK(contains(r.err, "--resume: " + named));
  const cli_result shown = run_in(dir / "a", {"checkpoint", "inspect", "ck"});
  CHECK(shown.exit_code == 1);
  CHECK(contains(shown.err, named));
  CHECK_FALSE(contains(shown.out, "all 2 files verified"));
  // Export and --init read the same checkpoint: they refuse it too (export wrote a model marked
  // step 6 holding stage 1's weights of step 3).
  const cli_result exported = run_in(dir / "a", {"checkpoint", "export", "ck", "--out", dir / "w.safetensors"});
  CHECK(exported.exit_code != 0);
  CHECK(contains(exported.err, named));
  CHECK_FALSE(fs::exists(dir / "w.safetensors"));
  const cli_result init = run_in(dir / "a", {"train", "--model", "gpt-tiny", "--data", "txt", "--steps", "1",
                                             "--init", "ck", "--sample", "0", "--eval-windows", "1"});
  CHECK(init.exit_code != 0);
  CHECK(contains(init.err, named));
  CHECK(files_under(ck) == before);
}

// The "pipeworks.rank_state" metadata of a rank file's bytes.
json rank_state_of(const std::string& bytes) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  const json header = json::parse(bytes.substr(8, n));
  return json::parse(header["__metadata__"]["pipeworks.rank_state"].get<std::string>());
}

// The rank file's bytes with its "pipeworks.rank_state" metadata edited by `edit`; the tensors
// are where they were.
std::string with_rank_state(const std::string& bytes, const std::function<void(json&)>& edit) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  json header = json::parse(bytes.substr(8, n));
  json state = json::parse(header["__metadata__"]["pipeworks.rank_state"].get<std::string>());
  edit(state);
  header["__metadata__"]["pipeworks.rank_state"] = state.dump();
  const std::string text = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(text.size() >> (8 * i) & 0xff);
  return out + text + bytes.substr(8 + n);
}

// Issue 31, item 4's other half: a rank file of step 3 in step 6's place, its recorded step and
// program position edited to step 6's (and the manifest's size and sha256 to match), passes every
// check made before the ranks start; its rank then asks for a microbatch the run is past. The
// driver's error names that rank's file, so the user knows which file to check.
TEST_CASE("a rank file of another step that passes the checks is named by the driver", "[cli][checkpoint]") {
  scratch_dir dir;
  train_in_a(dir);
  const std::string ck = dir / "a/ck";
  const std::string placed = ck + "/step-00000006/rank-0.safetensors";
  const json six = rank_state_of(read_file(placed));
  const std::string bytes = with_rank_state(read_file(ck + "/step-00000003/rank-0.safetensors"), [&](json& s) {
    REQUIRE(s["step"] == 3);
    s["step"] = six["step"];
    s["pc"] = six["pc"];
  });
  write_file(placed, bytes);
  pipeworks::sha256 h;
  h.update(std::as_bytes(std::span(bytes.data(), bytes.size())));
  const std::string digest = h.hex_digest();
  edit_manifest(ck + "/step-00000006/manifest.json", [&](nlohmann::ordered_json& m) {
    REQUIRE(m["files"][0]["path"] == "rank-0.safetensors");
    m["files"][0]["bytes"] = bytes.size();
    m["files"][0]["sha256"] = digest;
  }, true);
  const auto before = files_under(ck);
  const cli_result r = run_in(dir / "a", resume_args("ck"));
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.err, "The run resumed from ck/step-00000006; rank 0 continued from its file there, "
                        "rank-0.safetensors, which does not continue where the others do: it may come "
                        "from another step or another run"));
  CHECK(contains(r.err, "(check it with `pipeworks checkpoint inspect ck`)"));
  CHECK(files_under(ck) == before);
}

TEST_CASE("a plan resuming a checkpoint checks its data and another path needs the flag",
          "[cli][checkpoint]") {
  scratch_dir dir;
  train_in_a(dir);
  fs::copy(dir / "a/ck", dir / "a/pck", fs::copy_options::recursive);
  json plan = manifest_of(dir / "a/ck", 6)["plan"];
  plan["checkpoint"]["dir"] = "pck";
  const auto before = files_under(dir / "a/pck");
  // Another path in the plan: refused naming both paths and the flag that goes on.
  plan["data"]["path"] = "../b/txt";
  write_file(dir / "a/other.json", plan.dump());
  {
    const cli_result r = run_in(dir / "a", {"train", "--plan", "other.json", "--sample", "0",
                                            "--eval-windows", "4"});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--plan: data.path ../b/txt is not the checkpoint's data.path txt"));
    CHECK(contains(r.err, "add --resume-on-other-data"));
    CHECK(files_under(dir / "a/pck") == before);
  }
  // Its own path, other bytes there: refused naming them, and the flag goes on.
  plan["data"]["path"] = "txt";
  write_file(dir / "a/own.json", plan.dump());
  write_file(dir / "a/txt", small_text(25000));
  const cli_result refused = run_in(dir / "a", {"train", "--plan", "own.json", "--sample", "0",
                                                "--eval-windows", "4"});
  CHECK(refused.exit_code == 2);
  CHECK(contains(refused.err, "--plan: the data txt is not what the checkpoint of step 6 was trained on: "
                              "its size is 25000 bytes, the checkpoint's was 20000"));
  CHECK(files_under(dir / "a/pck") == before);
  // A damaged rank file is found first, by its sha256 (exit 1), as --resume finds it.
  const std::string rank1 = dir / "a/pck/step-00000006/rank-1.safetensors";
  const std::string good = read_file(rank1);
  std::string bad = good;
  bad[bad.size() / 2] ^= 0x40;
  write_file(rank1, bad);
  const cli_result damaged = run_in(dir / "a", {"train", "--plan", "own.json", "--sample", "0",
                                                "--eval-windows", "4", "--resume-on-other-data"});
  CHECK(damaged.exit_code == 1);
  CHECK(contains(damaged.err, "--plan: pck/step-00000006/rank-1.safetensors: sha256 is"));
  CHECK(read_file(rank1) == bad);  // nothing was rewritten
  write_file(rank1, good);
  const cli_result goes_on = run_in(dir / "a", {"train", "--plan", "own.json", "--sample", "0",
                                                "--eval-windows", "4", "--resume-on-other-data"});
  INFO(goes_on.err);
  CHECK(goes_on.exit_code == 0);
}

TEST_CASE("resume on another data path with the flag reads it and records what it replaced",
          "[cli][checkpoint]") {
  scratch_dir dir;
  train_in_a(dir);
  fs::copy(dir / "a/ck", dir / "a/ck3", fs::copy_options::recursive);
  fs::remove_all(dir / "a/ck3/step-00000006");  // resume at step 3: the run writes step 6 anew
  const auto before = files_under(dir / "a/ck3");
  const cli_result refused = run_in(dir / "a", resume_args("ck3", {"--data", "../b/txt"}));
  CHECK(refused.exit_code == 2);
  CHECK(contains(refused.err, "add --resume-on-other-data"));
  CHECK(files_under(dir / "a/ck3") == before);
  const cli_result r = run_in(dir / "a", resume_args("ck3", {"--data", "../b/txt",
                                                             "--resume-on-other-data"}));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json m = manifest_of(dir / "a/ck3", 6);
  CHECK(m["plan"]["data"]["path"] == "../b/txt");
  CHECK(m["data"]["bytes"] == 30000);
  CHECK(m["data"]["replaced"]["bytes"] == 20000);
  CHECK(m["data"]["replaced"]["step"] == 3);
}

TEST_CASE("a run resumed from another directory reads the data its checkpoint recorded", "[cli][checkpoint]") {
  scratch_dir dir;
  write_file(dir / "data.txt", small_text());
  // The run is started where its data is, naming it (and everything else) relatively.
  struct in_dir {
    std::filesystem::path was = std::filesystem::current_path();
    explicit in_dir(const std::filesystem::path& p) { std::filesystem::current_path(p); }
    ~in_dir() { std::filesystem::current_path(was); }
  };
  {
    in_dir there(dir.path());
    const cli_result whole = run_cli({"train", "--model", "gpt-tiny", "--data", "data.txt", "--steps", "4",
                                      "--schedule", "1f1b", "--stages", "2", "--microbatches", "2",
                                      "--batch", "8", "--sample", "0", "--eval-windows", "1",
                                      "--save-every", "2", "--keep", "0", "--checkpoint-dir", "ck",
                                      "--save", "whole.safetensors"});
    INFO(whole.err);
    REQUIRE(whole.exit_code == 0);
  }
  const std::string want = read_file(dir / "whole.safetensors");
  // From the test's own directory, as if the run had been killed after step 2; then again with
  // --data naming the same file absolutely.
  for (const bool name_data : {false, true}) {
    INFO((name_data ? "with --data, absolute" : "without --data"));
    std::filesystem::remove_all(dir / "ck/step-00000004");
    std::vector<std::string> args{"train", "--resume", dir / "ck", "--save", dir / "resumed.safetensors",
                                  "--sample", "0", "--eval-windows", "1"};
    if (name_data) args.insert(args.end(), {"--data", dir / "data.txt"});
    const cli_result r = run_cli(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(read_file(dir / "resumed.safetensors") == want);
  }
}

TEST_CASE("a manifest listing its rank files in another order resumes each rank from its own file",
          "[cli][checkpoint]") {
  scratch_dir dir;
  train_in_a(dir);
  // The same checkpoint twice, one with its files listed rank 1 first (each entry keeps its rank
  // and path) and resealed: both resume to the same bytes.
  fs::copy(dir / "a/ck", dir / "a/reordered", fs::copy_options::recursive);
  edit_manifest(dir / "a/reordered/step-00000006/manifest.json", [](nlohmann::ordered_json& m) {
    std::swap(m["files"][0], m["files"][1]);
  }, true);
  const cli_result listed = run_in(dir / "a", {"checkpoint", "inspect", "reordered"});
  CHECK(listed.exit_code == 0);
  const cli_result a = run_in(dir / "a", resume_args("ck", {"--save", "a.safetensors"}));
  const cli_result b = run_in(dir / "a", resume_args("reordered", {"--save", "b.safetensors"}));
  INFO(a.err << b.err);
  REQUIRE(a.exit_code == 0);
  REQUIRE(b.exit_code == 0);
  CHECK(read_file(dir / "a/b.safetensors") == read_file(dir / "a/a.safetensors"));
}
