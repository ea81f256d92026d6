// Schedule files: PyTorch's two CSV formats and pipeworks' action text, read, told apart and made
// into a run's schedule; see schedule_file.hpp.
#include "runtime/schedule_file.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/version_rule.hpp"

namespace pipeworks {

namespace {

std::string_view trim(std::string_view t) {
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t' || t.front() == '\r')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t' || t.back() == '\r')) t.remove_suffix(1);
  return t;
}

// The lines of the text, "\n" or "\r\n" ended, a final newline optional.
std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back(line);
    pos = end + 1;
  }
  return out;
}

// FSDP's UNSHARD and RESHARD, which PyTorch's lowering may write: nothing to run here.
bool fsdp_only(std::string_view cell) {
  std::size_t i = 0;
  while (i < cell.size() && cell[i] >= '0' && cell[i] <= '9') ++i;
  return i > 0 && (cell.substr(i) == "UNSHARD" || cell.substr(i) == "RESHARD");
}

std::string at_line(std::size_t line) { return "line " + std::to_string(line + 1); }

result<schedule_file> parse_csv_rows(const std::vector<std::string_view>& lines) {
  schedule_file f;
  std::vector<std::vector<std::string_view>> cells;
  for (std::string_view line : lines) {
    std::vector<std::string_view> row;
    std::size_t start = 0;
    // csv.reader gives an empty line no cells: a rank with no actions.
    while (!line.empty() && start <= line.size()) {
      std::size_t comma = line.find(',', start);
      if (comma == std::string_view::npos) comma = line.size();
      std::string_view cell = trim(line.substr(start, comma - start));
      if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"')
        cell = trim(cell.substr(1, cell.size() - 2));
      row.push_back(cell);
      start = comma + 1;
    }
    cells.push_back(std::move(row));
  }
  // Rows that end the file empty are the newlines after the last row, not ranks.
  while (!cells.empty() && cells.back().empty()) cells.pop_back();
  for (const auto& row : cells)
    for (std::string_view c : row) {
      f.lowered = f.lowered || c.find("SEND_") != std::string_view::npos ||
                  c.find("RECV_") != std::string_view::npos;
      f.has_steps = f.has_steps || (c.size() > 4 && c.substr(c.size() - 4) == "STEP");
    }
  f.format = f.has_steps ? schedule_file_format::pipeworks_csv
             : f.lowered ? schedule_file_format::pytorch_compute_comms
                         : schedule_file_format::pytorch_compute_only;
  for (std::size_t r = 0; r < cells.size(); ++r) {
    program prog;
    for (std::size_t c = 0; c < cells[r].size(); ++c) {
      const std::string_view cell = cells[r][c];
      const std::string where = "CSV " + at_line(r) + ", column " + std::to_string(c + 1);
      if (cell.empty()) {
        if (f.lowered && !f.has_steps)
          return make_error(where + " is empty, but the file has SEND/RECV cells, so it is "
                            "PyTorch's compute_comms format, which has an action in every cell "
                            "(_load_csv(f, format=\"compute_comms\") refuses an empty one); drop "
                            "the empty cell");
        continue;  // compute_only: an idle slot
      }
      if (fsdp_only(cell)) continue;
      // An action, or an OVERLAP_F_B cell "(0F1;1B0)OVERLAP_F_B": the marker and its two actions.
      auto token = parse_token(cell);
      if (!token) return make_error(where + ": " + token.message());
      const action& a = token->front();
      // PyTorch's REDUCE_GRAD: the run adds its own REDUCE. pipeworks' CSV keeps its REDUCEs.
      if (a.kind == action_kind::reduce && !f.has_steps) continue;
      if (!f.lowered && is_comm(a.kind))
        return make_error(where + ": " + std::string(cell) + " in a compute_only CSV");
      prog.insert(prog.end(), token->begin(), token->end());
    }
    f.rows.push_back(std::move(prog));
  }
  return f;
}

result<schedule_file> parse_text_rows(const std::vector<std::string_view>& lines) {
  schedule_file f;
  f.format = schedule_file_format::pipeworks_text;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) {
      std::string_view comment = trim(line.substr(hash + 1));
      if (comment.substr(0, 7) == "routes:") {  // "# routes: 2", as `pipeworks schedule` prints
        const std::string_view n = trim(comment.substr(7));
        if (n != "1" && n != "2")
          return make_error("line " + std::to_string(i + 1) + ": \"# routes: " + std::string(n) +
                            "\"; a schedule runs 1 route, or 2 (dualpipe: microbatches from both "
                            "ends, virtual stages p..2p-1 the copies of 0..p-1)");
        f.routes = n == "2" ? 2 : 1;
      }
      if (comment.substr(0, 9) == "versions:") {
        comment = trim(comment.substr(9));
        auto starts = [&](std::string_view w) { return comment.substr(0, w.size()) == w; };
        if (starts("sync")) f.versions = version_mode::sync;  // "sync", "synchronous ..."
        else if (starts("latest") || starts("weight stashing")) f.versions = version_mode::latest;
        else f.other_versions = std::string(comment.substr(0, 80));
      }
      line = line.substr(0, hash);
    }
    line = trim(line);
    if (line.empty()) continue;
    if (line.substr(0, 5) == "rank ") {
      const std::size_t colon = line.find(':');
      const std::string expected = std::to_string(f.rows.size());
      if (colon == std::string_view::npos || trim(line.substr(5, colon - 5)) != expected)
        return make_error(at_line(i) + ": '" + std::string(line.substr(0, 20)) +
                          "...' should start with \"rank " + expected + ":\" (ranks in order "
                          "from 0), or with the rank's first action");
      line = line.substr(colon + 1);
    }
    auto prog = parse_program(line);
    if (!prog) return make_error(at_line(i) + ": " + prog.message());
    for (const action& a : *prog) {
      f.lowered = f.lowered || is_comm(a.kind);
      f.has_steps = f.has_steps || a.kind == action_kind::step;
    }
    f.rows.push_back(std::move(*prog));
  }
  if (!f.has_steps)  // one pipeline for one step: the run adds REDUCE and STEP
    for (program& p : f.rows)
      p.erase(std::remove_if(p.begin(), p.end(),
                             [](const action& a) { return a.kind == action_kind::reduce; }),
              p.end());
  return f;
}

// Whether a closes a backward: B, or W of a split one (PyTorch counts either toward its
// REDUCE_GRAD, and the built-in schedules put their updates there).
bool closes(const action& a) {
  return a.kind == action_kind::backward || a.kind == action_kind::weight_grad;
}

struct layout {
  int devices = 1, chunks = 1, stages = 1, microbatches = 1, steps = 1;
};

// The layout of a file's rows with `replicas` replicas (rows of a file with STEPs cover them).
result<layout> layout_of(const schedule_file& f, int replicas) {
  if (f.rows.empty()) return make_error("the schedule file has no rows: write one per rank");
  if (replicas < 1) return make_error("replicas must be at least 1");
  layout l;
  const int rows = static_cast<int>(f.rows.size());
  if (f.has_steps) {
    if (rows % replicas != 0)
      return make_error("the file has STEPs, so its " + std::to_string(rows) +
                        " rows are every rank (replica * p + device) of " +
                        std::to_string(replicas) + " replicas, but " + std::to_string(rows) +
                        " is not a multiple of " + std::to_string(replicas) +
                        "; give p rows per replica, or drop the STEPs (the run then adds them)");
    l.devices = rows / replicas;
  } else {
    l.devices = rows;
  }
  int max_stage = -1;
  std::int64_t max_mb = -1;
  for (const program& p : f.rows)
    for (const action& a : p) {
      max_stage = std::max<int>(max_stage, a.stage);
      if (has_microbatch(a.kind)) max_mb = std::max<std::int64_t>(max_mb, a.microbatch);
    }
  if (max_mb < 0) return make_error("the schedule file has no forward or backward: nothing to run");
  l.stages = max_stage + 1;
  if (l.stages % l.devices != 0)
    return make_error("the file names virtual stages 0.." + std::to_string(max_stage) + " on " +
                      std::to_string(l.devices) + " devices (rows" +
                      (f.has_steps ? " per replica" : "") + "), and " +
                      std::to_string(l.stages) + " is not a multiple of " +
                      std::to_string(l.devices) + "; every device holds the same number of stages");
  l.chunks = l.stages / l.devices;
  if (f.has_steps) {
    auto s = schedule_from_programs(f.rows, l.devices, l.chunks, replicas, f.lowered, true);
    if (!s) return s.err();
    l.microbatches = s->params.microbatches;
    l.steps = s->params.steps;
  } else {
    if (max_mb >= (std::int64_t{1} << 24))
      return make_error("the file names microbatch " + std::to_string(max_mb) +
                        "; a step's microbatch ids run 0..m-1, numbered without gaps");
    l.microbatches = static_cast<int>(max_mb + 1);
  }
  return l;
}

// The rows of one step repeated for `steps` steps, each with [REDUCE and] STEP after each stage's
// m-th B or W of the step and the sends right after it (where the rows carry sends), then copied
// to every replica.
std::vector<program> with_updates(const schedule_file& f, const layout& l, int steps,
                                  int replicas) {
  const int m = l.microbatches;
  const bool reduce = replicas > 1;
  std::vector<program> out(f.rows.size());
  for (std::size_t d = 0; d < f.rows.size(); ++d) {
    program& row = out[d];
    row.reserve((f.rows[d].size() + 2 * static_cast<std::size_t>(l.chunks)) *
                static_cast<std::size_t>(steps));
    for (int t = 0; t < steps; ++t) {
      std::vector<int> backwards(static_cast<std::size_t>(l.stages), 0);
      action pending{0, action_kind::step, -1};  // the closing backward, while an update is due
      bool due = false;
      auto flush = [&] {
        if (reduce) row.push_back(action{pending.stage, action_kind::reduce, -1});
        row.push_back(action{pending.stage, action_kind::step, -1});
        due = false;
      };
      for (action a : f.rows[d]) {
        if (has_microbatch(a.kind)) a.microbatch += t * m;
        // The update follows the closing backward and the sends right after it (lowering puts
        // an OVERLAP_F_B pair's two sends after the pair).
        if (due && a.kind != action_kind::send_b && a.kind != action_kind::send_f) flush();
        row.push_back(a);
        if (closes(a) && a.stage < l.stages && ++backwards[static_cast<std::size_t>(a.stage)] == m) {
          if (due) flush();
          pending = a;
          due = true;
        }
      }
      if (due) flush();
    }
  }
  std::vector<program> all;
  all.reserve(out.size() * static_cast<std::size_t>(replicas));
  for (int q = 0; q < replicas; ++q)
    for (const program& p : out) all.push_back(p);
  return all;
}

// The rows of a file with STEPs, repeated `times` times, microbatch ids offset by the file's.
std::vector<program> repeated(const schedule_file& f, const layout& l, int times) {
  const int ids = l.microbatches * l.steps;
  std::vector<program> out(f.rows.size());
  for (std::size_t r = 0; r < f.rows.size(); ++r) {
    out[r].reserve(f.rows[r].size() * static_cast<std::size_t>(times));
    for (int k = 0; k < times; ++k)
      for (action a : f.rows[r]) {
        if (has_microbatch(a.kind)) a.microbatch += k * ids;
        out[r].push_back(a);
      }
  }
  return out;
}

}  // namespace

std::string_view schedule_file_format_name(schedule_file_format f) {
  switch (f) {
    case schedule_file_format::pytorch_compute_only: return "PyTorch CSV (compute_only)";
    case schedule_file_format::pytorch_compute_comms: return "PyTorch CSV (compute_comms)";
    case schedule_file_format::pipeworks_csv: return "pipeworks CSV";
    case schedule_file_format::pipeworks_text: return "pipeworks action text";
  }
  return "pipeworks action text";
}

std::string_view version_mode_name(version_mode v) {
  return v == version_mode::latest ? "latest" : "sync";
}

result<version_mode> parse_version_mode(std::string_view name) {
  if (name == "sync") return version_mode::sync;
  if (name == "latest") return version_mode::latest;
  return make_error("unknown version rule '" + std::string(name) +
                    "': sync (step t uses version t) or latest (each F the newest version, "
                    "its backward the same)");
}

result<schedule_file> parse_schedule_file(std::string_view text) {
  const std::vector<std::string_view> lines = lines_of(text);
  bool csv = false;
  for (std::string_view line : lines)  // a comma outside a "#" comment: CSV has no comments
    csv = csv || line.substr(0, line.find('#')).find(',') != std::string_view::npos;
  auto f = csv ? parse_csv_rows(lines) : parse_text_rows(lines);
  if (!f) return f.err();
  if (f->rows.empty())
    return make_error("the schedule file holds no rows: write one row of actions per rank "
                      "(PyTorch CSV, or pipeworks' action text, e.g. \"0F0 0B0\")");
  return f;
}

std::string to_programs_text(const std::vector<program>& rows, int routes) {
  std::string out = "# pipeworks action text: one rank per line, actions space separated\n";
  if (routes > 1) out += routes_line;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    out += "rank ";
    out += std::to_string(r);
    out += ": ";  // appended apart: g++ 12 warns (-Wrestrict, wrongly) at "rank " + ... + ": "
    out += to_string(rows[r]);  // an OVERLAP_F_B and its two actions as one token
    out += '\n';
  }
  return out;
}

result<version_mode> file_versions(const schedule_file& f, std::optional<version_mode> given) {
  if (given) return *given;
  if (f.versions) return *f.versions;
  if (!f.other_versions.empty())
    return make_error("the file's version rule is \"" + f.other_versions + "\"; a schedule file "
                      "runs sync (step t uses version t) or latest (each F the newest version): "
                      "say which with --schedule-versions, or in a \"# versions: sync\" line");
  return f.has_steps ? version_mode::latest : version_mode::sync;
}

result<schedule_file_shape> shape_of(const schedule_file& f, int replicas) {
  auto l = layout_of(f, replicas);
  if (!l) return l.err();
  return schedule_file_shape{l->devices, l->chunks, l->microbatches, l->steps};
}

result<schedule> schedule_from_file(const schedule_file& f, int replicas, int steps,
                                    std::optional<version_mode> versions) {
  auto l = layout_of(f, replicas);
  if (!l) return l.err();
  if (steps < 1) return make_error("steps must be at least 1");
  if (static_cast<std::int64_t>(l->microbatches) * steps > (std::int64_t{1} << 30))
    return make_error(std::to_string(steps) + " steps of " + std::to_string(l->microbatches) +
                      " microbatches are too many to hold as programs");
  auto chosen = file_versions(f, versions);
  if (!chosen) return chosen.err();
  const version_mode mode = *chosen;
  std::vector<program> programs;
  if (f.routes > 1 && !f.has_steps)
    return make_error("the file's programs run 2 routes, whose copies of a stage meet at REDUCE: "
                      "give them with their REDUCEs and STEPs, as `pipeworks schedule --schedule "
                      "dualpipe` prints them");
  if (f.has_steps) {
    if (steps % l->steps != 0)
      return make_error("the file's programs cover " + std::to_string(l->steps) +
                        " steps (STEPs per stage), and the run's " + std::to_string(steps) +
                        " steps are not a multiple of them; train a multiple of " +
                        std::to_string(l->steps) + " steps");
    programs = repeated(f, *l, steps / l->steps);
  } else {
    if (mode == version_mode::latest)
      return make_error("the versions rule latest needs STEPs in the file: without them the run "
                        "adds one after each step's backwards and every step uses version t "
                        "(sync)");
    programs = with_updates(f, *l, steps, replicas);
  }
  auto s = schedule_from_programs(std::move(programs), l->devices, l->chunks, replicas, f.lowered,
                                  true);
  if (!s) return s.err();
  s->routes = f.routes;
  if (mode == version_mode::sync) {
    s->versions = flush_versions(s->virtual_stages, s->params.microbatches, s->params.steps);
    s->version_rule = "synchronous (schedule file): every microbatch of step t uses version t";
  } else {
    s->version_rule = "latest (schedule file): each F uses its stage's newest version; its "
                      "backward the same one";
  }
  return s;
}

}  // namespace pipeworks
