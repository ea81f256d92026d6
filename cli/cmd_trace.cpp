// `pipeworks trace html TRACE.json --out FILE [--compare OTHER.json] [--from-step A] [--to-step B]`:
// the explorer's page (runtime/explorer.hpp) for a real run's trace (train --trace) or a simulated
// one, optionally with a second trace below it and a window of steps; a file that is not a
// pipeworks trace, a truncated one, one over the size limit or a bad window is refused (exit 2)
// before anything is written.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "ops/checkpoint/atomic_file.hpp"
#include "runtime/explorer.hpp"
#include "runtime/trace_chrome_read.hpp"

namespace pipeworks::cli {
namespace {

struct trace_options {
  std::string input, out, compare;
  step_window window;  // 0: that end open
  bool from_given = false, to_given = false;
};

// The explorer's data of one trace file in the window; `flag` names the file in errors, and a
// window past the file's steps names its own flag ("--from-step: ... (in the --compare trace)").
std::string trace_data(const std::string& path, const std::string& flag, const step_window& window) {
  auto t = read_chrome_trace(path);
  if (!t) throw CLI::ValidationError(flag, t.message());
  if (!window.whole()) {
    const std::vector<int> steps = steps_of(*t);
    const window_problem bad =
        check_window(window, steps.empty() ? 0 : *std::max_element(steps.begin(), steps.end()));
    if (bad.end != window_problem::none)
      throw CLI::ValidationError(bad.end == window_problem::first ? "--from-step" : "--to-step",
                                 bad.message + (flag == "TRACE" ? "" : " (in the " + flag + " trace)"));
  }
  auto data = explorer_json(*t, window);
  if (!data) throw CLI::ValidationError(flag, data.message());
  return std::move(*data);
}

int run_trace_html(const trace_options& o) {
  check_outputs({{o.out, "--out"}}, {{o.input, "TRACE"}, {o.compare, "--compare"}});
  // Steps count from 1; 0 is the library's "open", so a 0 given is refused here.
  if (o.from_given && o.window.first < 1)
    throw CLI::ValidationError("--from-step", "steps count from 1, got " + std::to_string(o.window.first));
  if (o.to_given && o.window.last < 1)
    throw CLI::ValidationError("--to-step", "steps count from 1, got " + std::to_string(o.window.last));
  result<std::string> data = trace_data(o.input, "TRACE", o.window);
  if (!o.compare.empty()) {
    auto both = explorer_compare_json(*data, trace_data(o.compare, "--compare", o.window));
    if (!both) throw CLI::ValidationError("--compare", both.message());
    data = std::move(both);
  }
  if (status ok = write_text_atomic(o.out, explorer_html(*data)); !ok) {
    std::cerr << "pipeworks trace html: --out: cannot write " << o.out << ": " << ok.message()
              << "\n";
    return exit_failure;
  }
  return exit_ok;
}

const bool registered = register_command(
    "trace", "Turn a pipeworks trace into other forms (html: the explorer's page)",
    [](CLI::App& sub) -> command_runner {
      auto o = std::make_shared<trace_options>();
      sub.require_subcommand(1);
      CLI::App* html = sub.add_subcommand(
          "html", "write the explorer: one self-contained HTML page (no network) of a trace "
                  "that train --trace or simulate --trace wrote");
      html->add_option("TRACE", o->input, "the trace (Chrome trace-event JSON from pipeworks)")
          ->required();
      html->add_option("--out", o->out, "the page to write")->required();
      html->add_option("--compare", o->compare,
                       "a second trace drawn below the first on the same time axis, such as "
                       "the simulated trace that train --trace T --compare-sim writes next to T; "
                       "each action's detail gives its time in both");
      auto* from = html->add_option(
          "--from-step", o->window.first,
          "a window of the trace: show from this optimizer step (counted from 1, as train's "
          "metrics count them), with the stashed microbatches and live versions that the steps "
          "before left; --compare's trace gets the same window");
      auto* to = html->add_option("--to-step", o->window.last,
                                  "the window's last step (default: the trace's last)");
      return [o, from, to] {
        o->from_given = from->count() > 0;
        o->to_given = to->count() > 0;
        return run_trace_html(*o);
      };
    });

}  // namespace
}  // namespace pipeworks::cli
