// SVG timeline writer: lays out a title, one row per rank, a time axis with round ticks, and a
// legend of microbatch colours and action kinds.
#include "runtime/trace_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <string_view>
#include <vector>

namespace pipeworks {
namespace {

// Ten distinct hues (Tableau 10 with its grey swapped for indigo, since grey means REDUCE/STEP).
constexpr const char* palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#3b3eac"};
constexpr int palette_size = sizeof(palette) / sizeof(palette[0]);

constexpr int min_margin_left = 90;  // grows to fit the row names
constexpr int margin_right = 80;
constexpr int title_height = 48;
constexpr int row_gap = 6;
constexpr double char_width = 6.6;        // of the 11px label font, roughly
constexpr double small_char_width = 4.9;  // of the 8px version font

struct rgb {
  int r, g, b;
};

rgb parse_hex(const char* hex) {
  unsigned v = 0;
  std::sscanf(hex + 1, "%x", &v);
  return {static_cast<int>(v >> 16), static_cast<int>((v >> 8) & 255), static_cast<int>(v & 255)};
}

// The colour `amount` of the way from `c` to white.
std::string tint(const char* c, double amount) {
  const rgb x = parse_hex(c);
  const auto mix = [amount](int v) {
    return static_cast<int>(std::lround(v + (255 - v) * amount));
  };
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", mix(x.r), mix(x.g), mix(x.b));
  return buf;
}

const char* base_colour(int microbatch) {
  return palette[(microbatch >= 0 ? microbatch : 0) % palette_size];
}

struct look {
  std::string fill;
  const char* hatch = nullptr;  // overlay pattern id, or none
};

// Dark text on light fills, white text on dark ones.
const char* text_colour(const std::string& fill) {
  const rgb c = parse_hex(fill.c_str());
  return 0.299 * c.r + 0.587 * c.g + 0.114 * c.b > 150 ? "#222" : "#fff";
}

look look_of(const action& a) {
  const char* c = base_colour(a.microbatch);
  switch (a.kind) {
    case action_kind::forward: return {tint(c, 0.55), nullptr};
    case action_kind::backward: return {c, nullptr};
    case action_kind::input_grad: return {c, "hatch-light"};
    case action_kind::weight_grad: return {tint(c, 0.55), "hatch-dark"};
    case action_kind::reduce: return {"#bdbdbd", nullptr};
    case action_kind::step: return {"#7f7f7f", nullptr};
    default: return {"#dddddd", nullptr};
  }
}

std::string short_label(const action& a) {
  switch (a.kind) {
    case action_kind::reduce: return "R";
    case action_kind::step: return "S";
    default: return std::string(kind_name(a.kind)) + std::to_string(a.microbatch);
  }
}

// Characters in UTF-8 text, for the label widths.
int glyphs(std::string_view s) {
  int n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

std::string fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// Time axis unit: seconds as they are, or ms / µs for measured runs that are short.
struct time_unit {
  double scale;
  const char* name;
};

time_unit unit_for(double makespan) {
  if (makespan > 0 && makespan < 1e-3) return {1e6, "µs"};
  if (makespan > 0 && makespan < 1.0) return {1e3, "ms"};
  return {1.0, "s"};
}

// A round tick step (1, 2 or 5 times a power of ten) giving about `target` ticks.
double tick_step(double span, int target) {
  if (span <= 0) return 1.0;
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * mag) return m * mag;
  return 10.0 * mag;
}

// Appends the pieces in order (cheaper than chains of operator+, and quiet under GCC 12).
void append(std::string& out, std::initializer_list<std::string_view> pieces) {
  for (std::string_view piece : pieces) out.append(piece);
}

void rect(std::string& out, double x, double y, double w, double h, std::string_view fill,
          std::string_view extra = "") {
  append(out, {"<rect x=\"", num(x), "\" y=\"", num(y), "\" width=\"", num(w), "\" height=\"",
               num(h), "\" fill=\"", fill, "\""});
  if (!extra.empty()) append(out, {" ", extra});
  out += "/>\n";
}

void text(std::string& out, double x, double y, std::string_view s, std::string_view attrs) {
  append(out, {"<text x=\"", num(x), "\" y=\"", num(y), "\" ", attrs, ">", escape(s), "</text>\n"});
}

// A legend swatch: a box drawn like an action of `kind` for microbatch `mb`, then its caption.
// Returns the x after it.
double swatch(std::string& out, double x, double y, action a, std::string_view caption) {
  const look l = look_of(a);
  rect(out, x, y, 22, 14, l.fill, "stroke=\"#fff\" stroke-width=\"0.5\"");
  if (l.hatch) rect(out, x, y, 22, 14, std::string("url(#") + l.hatch + ")");
  text(out, x + 27, y + 11, caption, "font-size=\"11\"");
  return x + 27 + caption.size() * char_width + 14;
}

}  // namespace

std::string to_svg(const timeline& t, const svg_options& options) {
  int ranks = t.ranks;
  int max_mb = -1;
  int max_stage = 0;
  for (const auto& e : t.events) {
    ranks = std::max(ranks, e.rank + 1);
    if (e.stream != stream_kind::compute) continue;
    max_mb = std::max(max_mb, e.act.microbatch);
    max_stage = std::max(max_stage, e.act.stage);
  }
  const int p = t.devices_per_replica > 0 ? t.devices_per_replica : std::max(ranks, 1);
  const int chunks = max_stage / p + 1;
  bool show_versions = false;  // more than one weight version among the actions
  int first_version = -1;
  for (const auto& e : t.events) {
    if (e.stream != stream_kind::compute || e.version < 0) continue;
    if (first_version < 0) first_version = e.version;
    show_versions = show_versions || e.version != first_version;
  }
  const double makespan = t.makespan();
  // Row names: "device d", or "replica x · device d" when the stages are replicated.
  const auto row_name = [&](int r) {
    return ranks > p ? "replica " + std::to_string(r / p) + " · device " + std::to_string(r % p)
                     : "device " + std::to_string(r);
  };
  const int margin_left = std::max(
      min_margin_left, static_cast<int>(glyphs(row_name(std::max(ranks - 1, 0))) * 7.2) + 16);
  const int width = std::max(options.width, margin_left + margin_right + 100);
  const int row_h = std::max(options.row_height, 8);
  const double plot_w = width - margin_left - margin_right;
  const double xscale = makespan > 0 ? plot_w / makespan : 0.0;
  const double rows_top = title_height;
  const double rows_bottom = rows_top + ranks * (row_h + row_gap);
  const double axis_y = rows_bottom + 2;
  const double legend_y = axis_y + 46;
  const int legend_rows = chunks > 1 || show_versions ? 3 : 2;
  const int height = static_cast<int>(legend_y + 22 * legend_rows + 8);
  const auto row_y = [&](int r) { return rows_top + r * (row_h + row_gap); };

  // Busy time per rank on the compute stream, for the idle shares.
  std::vector<double> busy(ranks, 0.0);
  for (const auto& e : t.events)
    if (e.stream == stream_kind::compute && e.rank >= 0) busy[e.rank] += e.end - e.start;
  double busy_total = 0.0;
  for (double b : busy) busy_total += b;
  const double idle_total =
      makespan > 0 && ranks > 0 ? 1.0 - busy_total / (makespan * ranks) : 0.0;

  std::string out;
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  const std::string w_text = std::to_string(width), h_text = std::to_string(height);
  append(out, {"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", w_text, "\" height=\"", h_text,
               "\" viewBox=\"0 0 ", w_text, " ", h_text,
               "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"});
  out += "<defs>\n"
         "<pattern id=\"hatch-light\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><rect width=\"2.5\" height=\"6\" fill=\"#fff\" "
         "fill-opacity=\"0.45\"/></pattern>\n"
         "<pattern id=\"hatch-dark\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><rect width=\"2\" height=\"6\" fill=\"#000\" "
         "fill-opacity=\"0.3\"/></pattern>\n"
         "</defs>\n";
  rect(out, 0, 0, width, height, "#fff");

  // Title and a one-line summary.
  text(out, margin_left, 20, t.title.empty() ? "pipeline timeline" : t.title,
       "font-size=\"15\" font-weight=\"bold\"");
  char summary[160];
  std::snprintf(summary, sizeof summary, "%d ranks, makespan %s %s, idle (bubble) %.1f%%", ranks,
                fmt(makespan * unit_for(makespan).scale).c_str(), unit_for(makespan).name,
                100.0 * idle_total);
  text(out, margin_left, 37, summary, "font-size=\"11\" fill=\"#555\"");

  // Rows: a light background (idle shows through), the rank's name and its idle share.
  out += "<g id=\"rows\">\n";
  for (int r = 0; r < ranks; ++r) {
    const double y = row_y(r);
    rect(out, margin_left, y, plot_w, row_h, "#f1f1f1", "class=\"row\"");
    const std::string name = row_name(r);
    text(out, margin_left - 8, y + row_h / 2.0 + 4, name, "font-size=\"12\" text-anchor=\"end\"");
    char idle[32];
    const double share = makespan > 0 ? 1.0 - busy[r] / makespan : 0.0;
    std::snprintf(idle, sizeof idle, "idle %.0f%%", 100.0 * share);
    text(out, margin_left + plot_w + 8, y + row_h / 2.0 + 4, idle,
         "font-size=\"11\" fill=\"#555\"");
  }
  out += "</g>\n";

  // Actions.
  out += "<g id=\"actions\" font-size=\"11\" text-anchor=\"middle\">\n";
  for (const auto& e : t.events) {
    if (e.stream != stream_kind::compute || e.rank < 0) continue;
    const double x = margin_left + e.start * xscale;
    const double w = std::max((e.end - e.start) * xscale, 0.5);
    const double y = row_y(e.rank) + 1;
    const double h = row_h - 2;
    const look l = look_of(e.act);
    const std::string version = e.version >= 0 ? " v" + std::to_string(e.version) : "";
    append(out, {"<rect class=\"act\" x=\"", num(x), "\" y=\"", num(y), "\" width=\"", num(w),
                 "\" height=\"", num(h), "\" fill=\"", l.fill,
                 "\" stroke=\"#fff\" stroke-width=\"0.5\"><title>", escape(to_string(e.act)),
                 version,
                 " [", fmt(e.start), ", ", fmt(e.end), "]</title></rect>\n"});
    if (l.hatch) rect(out, x, y, w, h, std::string("url(#") + l.hatch + ")", "class=\"hatch\"");
    // A later chunk of an interleaved or looped schedule (virtual stage s >= p): a dark bar on
    // top, and one prime per chunk in the label ("F3′").
    const int chunk = e.act.stage / p;
    if (chunk > 0) rect(out, x, y, w, 3, "#000", "fill-opacity=\"0.6\" class=\"chunk\"");
    std::string primes;
    for (int c = 0; c < chunk && c < 3; ++c) primes += "′";
    std::string label = short_label(e.act) + primes;
    if (w < glyphs(label) * char_width + 4) label = std::to_string(e.act.microbatch) + primes;
    const char* ink = text_colour(l.fill);
    const double baseline = show_versions ? y + h / 2 + 1 : y + h / 2 + 4;
    if (e.act.microbatch >= 0 && w >= glyphs(label) * char_width + 4) {
      append(out, {"<text x=\"", num(x + w / 2), "\" y=\"", num(baseline), "\" fill=\"", ink,
                   "\">", escape(label), "</text>\n"});
    }
    // The weight version, small, under the label, when the picture has more than one.
    std::string v(1, 'v');
    v += std::to_string(e.version);
    if (show_versions && e.version >= 0 && w >= glyphs(v) * small_char_width + 3) {
      append(out, {"<text class=\"version\" x=\"", num(x + w / 2), "\" y=\"", num(y + h - 2.5),
                   "\" font-size=\"8\" fill=\"", ink, "\">", v, "</text>\n"});
    }
  }
  out += "</g>\n";

  // Time axis with round ticks.
  const time_unit unit = unit_for(makespan);
  const double step = tick_step(makespan * unit.scale, 10);
  out += "<g id=\"axis\" font-size=\"11\" fill=\"#333\">\n";
  append(out, {"<line x1=\"", num(margin_left), "\" y1=\"", num(axis_y), "\" x2=\"",
               num(margin_left + plot_w), "\" y2=\"", num(axis_y), "\" stroke=\"#333\"/>\n"});
  if (makespan > 0) {
    for (int i = 0; i * step <= makespan * unit.scale * (1 + 1e-9); ++i) {
      const double x = margin_left + i * step / unit.scale * xscale;
      append(out, {"<line x1=\"", num(x), "\" y1=\"", num(axis_y), "\" x2=\"", num(x), "\" y2=\"",
                   num(axis_y + 5), "\" stroke=\"#333\"/>\n"});
      text(out, x, axis_y + 17, fmt(i * step), "text-anchor=\"middle\"");
    }
  }
  text(out, margin_left + plot_w / 2, axis_y + 33, std::string("time (") + unit.name + ")",
       "text-anchor=\"middle\" fill=\"#555\"");
  out += "</g>\n";

  // Legend: microbatch colours, then how each kind of action is drawn.
  out += "<g id=\"legend\">\n";
  double x = margin_left;
  double y = legend_y;
  text(out, margin_left - 8, y + 11, "microbatch", "font-size=\"11\" text-anchor=\"end\"");
  const int shown = std::min(max_mb + 1, palette_size);
  for (int k = 0; k < shown; ++k)
    x = swatch(out, x, y, action{0, action_kind::backward, k}, std::to_string(k));
  if (max_mb >= palette_size) {
    text(out, x, y + 11, "(colours repeat: microbatch mod " + std::to_string(palette_size) + ")",
         "font-size=\"11\" fill=\"#555\"");
  }
  x = margin_left;
  y += 22;
  text(out, margin_left - 8, y + 11, "action", "font-size=\"11\" text-anchor=\"end\"");
  x = swatch(out, x, y, action{0, action_kind::forward, 0}, "F forward");
  x = swatch(out, x, y, action{0, action_kind::backward, 0}, "B backward");
  x = swatch(out, x, y, action{0, action_kind::input_grad, 0}, "I input grad");
  x = swatch(out, x, y, action{0, action_kind::weight_grad, 0}, "W weight grad");
  x = swatch(out, x, y, action{0, action_kind::reduce, -1}, "REDUCE");
  x = swatch(out, x, y, action{0, action_kind::step, -1}, "STEP");
  rect(out, x, y, 22, 14, "#f1f1f1");
  text(out, x + 27, y + 11, "idle (bubble)", "font-size=\"11\"");
  // Notes, when they apply: chunk marks and weight versions.
  if (chunks > 1 || show_versions) {
    x = margin_left;
    y += 22;
    text(out, margin_left - 8, y + 11, "marks", "font-size=\"11\" text-anchor=\"end\"");
  }
  if (chunks > 1) {
    rect(out, x, y, 22, 14, look_of(action{0, action_kind::forward, 0}).fill);
    rect(out, x, y, 22, 3, "#000", "fill-opacity=\"0.6\"");
    const std::string caption = "later chunk of a device (F3′, F3″)";
    text(out, x + 27, y + 11, caption, "font-size=\"11\"");
    x += 27 + glyphs(caption) * char_width + 14;
  }
  if (show_versions) {
    rect(out, x, y, 22, 14, look_of(action{0, action_kind::forward, 0}).fill);
    text(out, x + 11, y + 12, "v1", "font-size=\"8\" text-anchor=\"middle\"");
    text(out, x + 27, y + 11, "weight version the action used", "font-size=\"11\"");
  }
  out += "</g>\n";
  out += "</svg>\n";
  return out;
}

}  // namespace pipeworks
