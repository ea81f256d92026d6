// docs/explorer.md's lesson keeps its numbers true: every number its prose states (bubbles, peak
// stashed microbatches and live versions per stage, the versions used, p and m) is checked against
// `pipeworks simulate --json` and the page of that step's command; a number in no checkable form
// fails, and so does a lesson broken on purpose.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "run_cli.hpp"
#include "runtime/explorer.hpp"
#include "runtime/schedule.hpp"

using namespace pipeworks;
using namespace pipeworks::cli_test;
using nlohmann::json;

namespace {

// One step of the lesson (or its introduction, with no command): its prose with the whitespace
// collapsed, and its command's words after `pipeworks`.
struct lesson_part {
  std::string prose;
  std::vector<std::string> command;
};

std::vector<lesson_part> lesson_parts(const std::string& doc) {
  const auto from = doc.find("## A lesson");
  REQUIRE(from != std::string::npos);
  const auto to = doc.find("\n## ", from + 1);
  std::istringstream lines(doc.substr(from, to - from));
  std::vector<lesson_part> parts(1);
  bool in_code = false;
  const std::regex item(R"(^\d+\. (.*)$)");
  for (std::string line; std::getline(lines, line);) {
    const auto text = line.find_first_not_of(' ');
    if (text != std::string::npos && line.compare(text, 3, "```") == 0) {
      in_code = !in_code;
      continue;
    }
    if (in_code) {
      std::istringstream words(line);
      std::string word;
      REQUIRE((words >> word));
      REQUIRE(word == "pipeworks");
      REQUIRE(parts.back().command.empty());  // one command a step
      while (words >> word) parts.back().command.push_back(word);
      continue;
    }
    if (line.rfind("## ", 0) == 0) continue;
    std::smatch m;
    if (std::regex_match(line, m, item)) {
      parts.emplace_back();
      line = m[1];
    }
    parts.back().prose += " " + line;
  }
  for (lesson_part& p : parts) p.prose = std::regex_replace(p.prose, std::regex(R"(\s+)"), " ");
  return parts;
}

std::string flag_value(const std::vector<std::string>& words, const std::string& flag) {
  for (std::size_t i = 0; i + 1 < words.size(); ++i)
    if (words[i] == flag) return words[i + 1];
  return "";
}

std::vector<int> numbers_in(const std::string& list) {
  std::vector<int> out;
  std::istringstream in(std::regex_replace(list, std::regex(","), " "));
  for (int n = 0; in >> n;) out.push_back(n);
  return out;
}

// What the simulator and the page say of one step's schedules, by schedule name.
struct schedule_facts {
  json sim;   // simulate --json
  json page;  // the page's data of that schedule (the page's own, or its "compare")
};

// Runs a step's command and `simulate --json` for each schedule it shows (cached by command).
std::map<std::string, schedule_facts> facts_of(const std::vector<std::string>& command,
                                               const std::string& dir) {
  static std::map<std::vector<std::string>, std::map<std::string, schedule_facts>> cache;
  if (const auto it = cache.find(command); it != cache.end()) return it->second;
  REQUIRE(command.at(0) == "schedule");
  std::vector<std::string> run{command}, base{"simulate"};
  const std::string main_name = flag_value(command, "--schedule");
  const std::string other = flag_value(command, "--compare");
  for (std::size_t i = 1; i < command.size(); ++i) {
    if (command[i] == "--html") {
      run[i + 1] = dir + "/" + command[i + 1];
      ++i;
    } else if (command[i] == "--compare") {
      ++i;
    } else {
      base.push_back(command[i]);
    }
  }
  const cli_result made = run_cli(run);
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const json page = json::parse(explorer_data_of(read_file(flag_value(run, "--html"))).value());
  std::map<std::string, schedule_facts> out;
  for (const std::string& name : {main_name, other}) {
    if (name.empty()) continue;
    std::vector<std::string> sim_args = base;
    for (std::size_t i = 0; i + 1 < sim_args.size(); ++i)
      if (sim_args[i] == "--schedule") sim_args[i + 1] = name;
    sim_args.push_back("--json");
    const cli_result sim = run_cli(sim_args);
    INFO(sim.err);
    REQUIRE(sim.exit_code == 0);
    out[name] = {json::parse(sim.out), name == main_name ? page : page.at("compare")};
  }
  return cache[command] = out;
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", 100.0 * fraction);
  return text;
}

// What is wrong with the lesson's numbers: one line per claim the simulator disagrees with, per
// number stated in no form checked here, per schedule named that is not on the step's page.
// `checked` counts the claims found true.
std::vector<std::string> lesson_problems(const std::string& doc, const std::string& dir, int& checked) {
  std::vector<std::string> problems;
  const std::vector<lesson_part> parts = lesson_parts(doc);
  if (parts.size() < 2) return {"the lesson has no steps"};
  // The introduction's p = P and m = M hold for every step's command.
  std::string intro = parts[0].prose;
  std::smatch m;
  int p = 0, mb = 0;
  if (std::regex_search(intro, m, std::regex(R"(p = (\d+))"))) p = std::stoi(m[1]);
  if (std::regex_search(intro, m, std::regex(R"(m = (\d+))"))) mb = std::stoi(m[1]);
  intro = std::regex_replace(intro, std::regex(R"([pm] = \d+)"), "");
  for (std::size_t s = 1; s < parts.size(); ++s) {
    const std::vector<std::string>& c = parts[s].command;
    if (flag_value(c, "--stages") != std::to_string(p) ||
        flag_value(c, "--microbatches") != std::to_string(mb))
      problems.push_back("step " + std::to_string(s) + " is not at p = " + std::to_string(p) +
                         ", m = " + std::to_string(mb));
    else
      ++checked;
  }
  std::vector<std::string> unchecked{intro};
  std::string names_with_digits;  // schedule names such as 1f1b, 2bw, zb-h1, said in plain text
  for (schedule_kind k : every_schedule_kind()) {
    const std::string name(schedule_name(k));
    if (name.find_first_of("0123456789") != std::string::npos)
      names_with_digits += (names_with_digits.empty() ? "" : "|") + name;
  }
  for (std::size_t s = 1; s < parts.size(); ++s) {
    const std::string where = "step " + std::to_string(s) + ": ";
    std::string text = parts[s].prose;
    if (parts[s].command.empty()) {
      problems.push_back(where + "has no command");
      continue;
    }
    const auto facts = facts_of(parts[s].command, dir);
    // The schedules named in code type, by position: each claim is of the last one before it.
    std::map<std::size_t, std::string> named;
    const std::regex code("`([a-z0-9-]+)`");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), code); it != std::sregex_iterator(); ++it)
      named[static_cast<std::size_t>(it->position())] = (*it)[1];
    int found = 0;
    // Each claim: its pattern, and a check of what it matched against the schedule's facts.
    const auto claims = [&](const std::string& pattern, auto check) {
      const std::regex re(pattern);
      std::string blanked = text;
      for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
        const auto at = static_cast<std::size_t>(it->position());
        const std::string claim = it->str();
        blanked.replace(at, claim.size(), std::string(claim.size(), ' '));
        auto of = named.lower_bound(at);
        if (of == named.begin()) {
          problems.push_back(where + "\"" + claim + "\" follows no schedule named in code type");
          continue;
        }
        const std::string& name = std::prev(of)->second;
        const auto f = facts.find(name);
        if (f == facts.end()) {
          problems.push_back(where + "\"" + claim + "\" is of `" + name + "`, which is not on the page");
          continue;
        }
        const std::string wrong = check(*it, f->second);
        if (wrong.empty()) {
          ++checked;
          ++found;
        } else {
          problems.push_back(where + "\"" + claim + "\" of `" + name + "`: " + wrong);
        }
      }
      text = blanked;
    };
    const auto per_stage = [](const json& sim, const char* field) {
      std::vector<int> out;
      for (const json& stage : sim["stages"]) out.push_back(stage[field].get<int>());
      return out;
    };
    const auto list_text = [](const std::vector<int>& v) {
      std::string out;
      for (int x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
      return out;
    };
    claims(R"(\(p − 1\)/\(m \+ p − 1\) = (\d+\.\d\d)%)", [&](const std::smatch& x, const schedule_facts& f) {
      const int pp = std::stoi(flag_value(parts[s].command, "--stages"));
      const int mm = std::stoi(flag_value(parts[s].command, "--microbatches"));
      const std::string formula = percent(static_cast<double>(pp - 1) / (mm + pp - 1));
      const std::string sim = percent(f.sim["bubble_fraction"].get<double>());
      if (x[1] != formula) return "the formula gives " + formula + "%";
      return x[1] == sim ? std::string() : "the simulator's bubble is " + sim + "%";
    });
    claims(R"((\d+\.\d\d)%)", [&](const std::smatch& x, const schedule_facts& f) {
      const std::string sim = percent(f.sim["bubble_fraction"].get<double>());
      return x[1] == sim ? std::string() : "the simulator's bubble is " + sim + "%";
    });
    claims(R"(peak stashed (\d+(, \d+)*))", [&](const std::smatch& x, const schedule_facts& f) {
      const auto sim = per_stage(f.sim, "peak_inflight");
      return numbers_in(x[1]) == sim ? std::string() : "the simulator's is " + list_text(sim);
    });
    claims(R"(peak live versions (\d+(, \d+)*))", [&](const std::smatch& x, const schedule_facts& f) {
      const auto sim = per_stage(f.sim, "peak_versions");
      return numbers_in(x[1]) == sim ? std::string() : "the simulator's is " + list_text(sim);
    });
    claims(R"(uses only v(\d+))", [&](const std::smatch& x, const schedule_facts& f) {
      std::set<int> used;
      for (const json& a : f.page["actions"])
        if (a["version"].get<int>() >= 0) used.insert(a["version"].get<int>());
      return used == std::set<int>{std::stoi(x[1])} ? std::string()
                                                     : "its actions use " + std::to_string(used.size()) + " versions";
    });
    claims(R"(the versions along one microbatch agree)", [&](const std::smatch&, const schedule_facts& f) {
      std::map<int, std::set<int>> of_microbatch;
      for (const json& a : f.page["actions"])
        if (a["kind"] == "F") of_microbatch[a["microbatch"].get<int>()].insert(a["version"].get<int>());
      for (const auto& [k, versions] : of_microbatch)
        if (versions.size() != 1) return "microbatch " + std::to_string(k) + "'s forwards use different versions";
      return std::string();
    });
    if (found == 0) problems.push_back(where + "states nothing checked");
    // What remains may hold no number: names in code type, the names with digits (1F1B), and
    // the symbols of the rules (t − 1) aside.
    text = std::regex_replace(text, code, "");
    text = std::regex_replace(text, std::regex("\\b(" + names_with_digits + ")\\b", std::regex::icase), "");
    text = std::regex_replace(text, std::regex("t − 1"), "");
    unchecked.push_back(text);
  }
  for (const std::string& text : unchecked) {
    const auto digit = std::find_if(text.begin(), text.end(), [](unsigned char ch) { return std::isdigit(ch); });
    if (digit != text.end()) {
      const auto at = static_cast<std::size_t>(digit - text.begin());
      problems.push_back("a number in no checked form: \"..." +
                         text.substr(at < 30 ? 0 : at - 30, 60) + "...\"");
    }
  }
  return problems;
}

}  // namespace

TEST_CASE("docs/explorer.md lesson numbers are the simulator's for each step's command",
          "[cli][explorer]") {
  const std::string doc = read_file(std::string(PIPEWORKS_SOURCE_DIR) + "/docs/explorer.md");
  scratch_dir dir("explorer_lesson");
  int checked = 0;
  const auto problems = lesson_problems(doc, dir / ".", checked);
  for (const std::string& problem : problems) FAIL_CHECK(problem);
  CHECK(checked >= 21);  // p and m of 6 steps, 5 bubbles, 5 stash lists, 3 version lists, 2 rules

  // Broken on purpose, the lesson fails: a wrong bubble, a wrong stash, a claim of a schedule not
  // on the page, and a number in no checked form.
  const std::vector<std::pair<std::string, std::string>> breaks{
      {"= 27.27%", "= 27.28%"},
      {"peak stashed 4, 3, 2, 1", "peak stashed 4, 3, 2, 2"},
      {"`zb-h2` a\n   bubble", "`zb-h1` a\n   bubble"},
      {"`pipedream-vs` uses", "`2bw` uses"},
      {"every stage but the last", "stages 0 to 2"}};
  for (const auto& [from, to] : breaks) {
    INFO("broken: " << from << " -> " << to);
    const auto at = doc.find(from);
    REQUIRE(at != std::string::npos);
    std::string broken = doc;
    broken.replace(at, from.size(), to);
    int ignored = 0;
    CHECK_FALSE(lesson_problems(broken, dir / ".", ignored).empty());
  }
}
