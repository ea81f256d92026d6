// `pipeworks trace html TRACE.json --out FILE [--compare OTHER.json]`: the explorer's page
// (runtime/explorer.hpp) for a real run's trace (train --trace) or a simulated one, optionally
// with a second trace below it; a file that is not a pipeworks trace, a truncated one or one over
// the size limit is refused (exit 2) before anything is written.
#include <iostream>
#include <memory>
#include <string>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "ops/checkpoint/atomic_file.hpp"
#include "runtime/explorer.hpp"
#include "runtime/trace_chrome_read.hpp"

namespace pipeworks::cli {
namespace {

struct trace_options {
  std::string input, out, compare;
};

// The explorer's data of one trace file; `flag` names it in errors.
std::string trace_data(const std::string& path, const std::string& flag) {
  auto t = read_chrome_trace(path);
  if (!t) throw CLI::ValidationError(flag, t.message());
  auto data = explorer_json(*t);
  if (!data) throw CLI::ValidationError(flag, data.message());
  return std::move(*data);
}

int run_trace_html(const trace_options& o) {
  check_outputs({{o.out, "--out"}}, {{o.input, "TRACE"}, {o.compare, "--compare"}});
  result<std::string> data = trace_data(o.input, "TRACE");
  if (!o.compare.empty()) {
    auto both = explorer_compare_json(*data, trace_data(o.compare, "--compare"));
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
      return [o] { return run_trace_html(*o); };
    });

}  // namespace
}  // namespace pipeworks::cli
