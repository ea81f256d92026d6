// `pipeworks trace html TRACE.json --out FILE`: the explorer's page (runtime/explorer.hpp) for a
// real run's trace (train --trace) or a simulated one; a file that is not a pipeworks trace, a
// truncated one or one over the size limit is refused (exit 2) before anything is written.
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
  std::string input, out;
};

int run_trace_html(const trace_options& o) {
  check_outputs({{o.out, "--out"}}, {{o.input, "TRACE"}});
  auto t = read_chrome_trace(o.input);
  if (!t) throw CLI::ValidationError("TRACE", t.message());
  auto data = explorer_json(*t);
  if (!data) throw CLI::ValidationError("TRACE", data.message());
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
      return [o] { return run_trace_html(*o); };
    });

}  // namespace
}  // namespace pipeworks::cli
