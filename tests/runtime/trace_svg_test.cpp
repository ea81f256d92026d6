// Tests for the SVG timeline: well-formed markup, one box per compute event, labels, stripes for
// I and W, a legend and an axis.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "runtime/trace_svg.hpp"

using namespace pipeworks;

namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Every opened tag closes in order, and no raw '<' or '&' hides in the text. Returns "" when the
// markup is well formed, else what is wrong.
std::string markup_problem(const std::string& svg) {
  std::vector<std::string> open;
  std::size_t i = 0;
  while ((i = svg.find_first_of("<&", i)) != std::string::npos) {
    if (svg[i] == '&') {
      const auto semi = svg.find(';', i);
      if (semi == std::string::npos || semi - i > 6) return "raw & at " + std::to_string(i);
      i = semi;
      continue;
    }
    const auto close = svg.find('>', i);
    if (close == std::string::npos) return "unclosed tag at " + std::to_string(i);
    const std::string tag = svg.substr(i + 1, close - i - 1);
    i = close;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '?' || tag[0] == '!') continue;
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return "mismatched </" + tag.substr(1);
      open.pop_back();
      continue;
    }
    if (tag.find('<') != std::string::npos) return "'<' inside a tag";
    if (tag.back() == '/') continue;
    open.push_back(tag.substr(0, tag.find_first_of(" \n")));
  }
  return open.empty() ? "" : "<" + open.back() + "> never closed";
}

timeline_event compute(int rank, action_kind k, int mb, double start, double end) {
  return timeline_event{rank, stream_kind::compute, action{rank, k, mb}, start, end, 0, -1};
}

// Zero-bubble-like: F, I and W on two stages, then STEP; a SEND that must not be drawn.
timeline small_timeline() {
  using k = action_kind;
  timeline t;
  t.title = "zb <test> & more";
  t.ranks = 2;
  t.devices_per_replica = 2;
  t.events = {
      compute(0, k::forward, 0, 0, 1),     compute(0, k::forward, 1, 1, 2),
      compute(1, k::forward, 0, 1, 2),     compute(1, k::input_grad, 0, 2, 3),
      compute(1, k::weight_grad, 0, 3, 4), compute(0, k::input_grad, 0, 3, 4),
      compute(0, k::weight_grad, 0, 4, 5), compute(0, k::step, -1, 5, 5.5),
      timeline_event{0, stream_kind::send, action{0, k::send_f, 0}, 1, 1, -1, 3},
  };
  return t;
}

}  // namespace

TEST_CASE("svg timeline is well-formed markup with one box per compute event", "[runtime]") {
  const std::string svg = to_svg(small_timeline());
  CHECK(markup_problem(svg) == "");
  CHECK(count(svg, "<svg ") == 1);
  CHECK(count(svg, "class=\"act\"") == 8);
  CHECK(count(svg, "class=\"row\"") == 2);
  CHECK(count(svg, "class=\"hatch\"") == 4);  // two I and two W
  CHECK(svg.find("zb &lt;test&gt; &amp; more") != std::string::npos);
}

TEST_CASE("svg timeline labels wide boxes and has a legend and an axis", "[runtime]") {
  const std::string svg = to_svg(small_timeline());
  CHECK(svg.find(">F0</text>") != std::string::npos);
  CHECK(svg.find(">W0</text>") != std::string::npos);
  CHECK(svg.find("<title>1I0 v0 [2, 3]</title>") != std::string::npos);
  CHECK(svg.find("id=\"legend\"") != std::string::npos);
  CHECK(svg.find("B backward") != std::string::npos);
  CHECK(svg.find("idle (bubble)") != std::string::npos);
  CHECK(svg.find("id=\"axis\"") != std::string::npos);
  CHECK(svg.find("time (s)") != std::string::npos);
  // Rank 1 is busy 3 of 5.5: idle 45%.
  CHECK(svg.find(">idle 45%</text>") != std::string::npos);
}

TEST_CASE("svg timeline colours microbatches apart and tells F from B", "[runtime]") {
  using k = action_kind;
  timeline t;
  t.ranks = 1;
  t.events = {compute(0, k::forward, 0, 0, 1), compute(0, k::forward, 1, 1, 2),
              compute(0, k::backward, 0, 2, 3)};
  const std::string svg = to_svg(t);
  const auto fill_of = [&](const std::string& title) {
    const auto at = svg.rfind("fill=\"", svg.find("<title>" + title));
    return svg.substr(at + 6, 7);
  };
  CHECK(fill_of("0F0") != fill_of("0F1"));
  CHECK(fill_of("0F0") != fill_of("0B0"));
  CHECK(markup_problem(to_svg(timeline{})) == "");
}

TEST_CASE("svg timeline marks the later chunks of an interleaved schedule", "[runtime]") {
  using k = action_kind;
  timeline t;
  t.ranks = 2;
  t.devices_per_replica = 2;
  // Virtual stages 0 and 1 are chunk 0 of devices 0 and 1; stages 2 and 3 are chunk 1.
  t.events = {
      timeline_event{0, stream_kind::compute, action{0, k::forward, 4}, 0, 1, 0, -1},
      timeline_event{1, stream_kind::compute, action{1, k::forward, 4}, 1, 2, 0, -1},
      timeline_event{0, stream_kind::compute, action{2, k::forward, 4}, 2, 3, 0, -1},
      timeline_event{1, stream_kind::compute, action{3, k::forward, 4}, 3, 4, 0, -1},
  };
  const std::string svg = to_svg(t);
  CHECK(markup_problem(svg) == "");
  CHECK(count(svg, "class=\"chunk\"") == 2);
  CHECK(count(svg, ">F4</text>") == 2);
  CHECK(count(svg, ">F4′</text>") == 2);
  CHECK(svg.find("later chunk") != std::string::npos);
  CHECK(to_svg(small_timeline()).find("later chunk") == std::string::npos);
}

TEST_CASE("svg timeline shows weight versions only when they differ", "[runtime]") {
  using k = action_kind;
  timeline t;
  t.ranks = 1;
  t.events = {
      timeline_event{0, stream_kind::compute, action{0, k::forward, 0}, 0, 1, 0, -1},
      timeline_event{0, stream_kind::compute, action{0, k::backward, 0}, 1, 3, 0, -1},
      timeline_event{0, stream_kind::compute, action{0, k::step, -1}, 3, 4, -1, -1},
      timeline_event{0, stream_kind::compute, action{0, k::forward, 1}, 4, 5, 1, -1},
  };
  const std::string svg = to_svg(t);
  CHECK(markup_problem(svg) == "");
  CHECK(count(svg, "class=\"version\"") == 3);  // not on the STEP
  CHECK(count(svg, ">v1</text>") == 2);         // the F of microbatch 1, and the legend
  CHECK(svg.find("weight version the action used") != std::string::npos);
  CHECK(count(to_svg(small_timeline()), "class=\"version\"") == 0);
}
