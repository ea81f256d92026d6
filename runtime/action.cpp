// Actions and programs in text form: "{stage}{kind}{microbatch}" as PyTorch's pipelining writes
// them ("1F0", "2SEND_F3", "1STEP"), printed and parsed both ways.
#include "runtime/action.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <charconv>
#include <climits>

namespace pipeworks {

namespace {

struct kind_text {
  action_kind kind;
  std::string_view text;
};

// Longest names first, so that "SEND_F" is not read as something shorter.
constexpr std::array<kind_text, 11> kind_texts{{
    {action_kind::overlap_f_b, "OVERLAP_F_B"},
    {action_kind::send_f, "SEND_F"},
    {action_kind::recv_f, "RECV_F"},
    {action_kind::send_b, "SEND_B"},
    {action_kind::recv_b, "RECV_B"},
    {action_kind::reduce, "REDUCE"},
    {action_kind::step, "STEP"},
    {action_kind::forward, "F"},
    {action_kind::backward, "B"},
    {action_kind::input_grad, "I"},
    {action_kind::weight_grad, "W"},
}};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Reads a non-negative decimal at the front of `text`; returns the digits consumed (0 if none).
std::size_t read_int(std::string_view text, int& out) {
  std::size_t n = 0;
  while (n < text.size() && is_digit(text[n])) ++n;
  if (n == 0) return 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + n, out);
  if (ec != std::errc() || ptr != text.data() + n) return 0;
  return n;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' ||
                        s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' ||
                        s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

std::string_view kind_name(action_kind k) {
  for (const auto& kt : kind_texts)
    if (kt.kind == k) return kt.text;
  return "?";
}

bool is_compute(action_kind k) {
  return k == action_kind::forward || k == action_kind::backward ||
         k == action_kind::input_grad || k == action_kind::weight_grad;
}

bool is_comm(action_kind k) {
  return k == action_kind::send_f || k == action_kind::recv_f || k == action_kind::send_b ||
         k == action_kind::recv_b;
}


std::string to_string(const action& a) {
  std::string out = std::to_string(a.stage);
  out += kind_name(a.kind);
  if (has_microbatch(a.kind)) out += std::to_string(a.microbatch);
  return out;
}

result<action> parse_action(std::string_view text) {
  const std::string_view t = trim(text);
  const std::string shown(t);
  if (t.empty()) return make_error("empty action: write {stage}{kind}{microbatch}, e.g. 1F0");
  action a;
  std::size_t stage_digits = 0;
  while (stage_digits < t.size() && is_digit(t[stage_digits])) ++stage_digits;
  if (stage_digits == 0)
    return make_error("action '" + shown +
                      "' does not start with a stage number: write {stage}{kind}{microbatch}, "
                      "e.g. 1F0 or 2SEND_F3");
  int stage = 0;
  if (read_int(t, stage) != stage_digits || stage > max_action_stage)
    return make_error("action '" + shown + "': stage " + std::string(t.substr(0, stage_digits)) +
                      " is too large; stages are 0.." + std::to_string(max_action_stage));
  a.stage = stage;
  std::string_view rest = t.substr(stage_digits);
  // PyTorch spells the gradient all-reduce REDUCE_GRAD; read it as REDUCE.
  if (rest == "REDUCE_GRAD") rest = "REDUCE";
  for (const auto& kt : kind_texts) {
    if (rest.substr(0, kt.text.size()) != kt.text) continue;
    a.kind = kt.kind;
    const std::string_view tail = rest.substr(kt.text.size());
    if (!has_microbatch(a.kind)) {
      if (!tail.empty())
        return make_error("action '" + shown + "': " + std::string(kt.text) +
                          " takes no microbatch, write it as " + std::to_string(a.stage) +
                          std::string(kt.text));
      a.microbatch = -1;
      return a;
    }
    if (tail.empty())
      return make_error("action '" + shown + "' has no microbatch number: write e.g. " +
                        std::to_string(a.stage) + std::string(kt.text) + "0");
    const std::size_t mb_digits = read_int(tail, a.microbatch);
    if (mb_digits == 0 || mb_digits != tail.size())
      return make_error("action '" + shown + "': the microbatch after " + std::string(kt.text) +
                        " must be a non-negative number, e.g. " + std::to_string(a.stage) +
                        std::string(kt.text) + "0");
    return a;
  }
  return make_error("action '" + shown + "': unknown kind '" + std::string(rest) +
                    "'; known kinds are F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, REDUCE, STEP "
                    "(and (xF..;yB..)OVERLAP_F_B)");
}

result<program> parse_token(std::string_view text) {
  const std::string_view t = trim(text);
  constexpr std::string_view suffix = ")OVERLAP_F_B";
  if (t.empty() || t.front() != '(') {
    auto a = parse_action(t);
    if (!a) return error{a.message()};
    if (a->kind == action_kind::overlap_f_b)
      return make_error("action '" + std::string(t) + "': OVERLAP_F_B joins two actions; write " +
                        "it as (xF..;yB..)OVERLAP_F_B, e.g. (0F1;1B0)OVERLAP_F_B");
    return program{*a};
  }
  const std::string shown(t);
  if (t.size() < suffix.size() || t.substr(t.size() - suffix.size()) != suffix)
    return make_error("'" + shown + "': a parenthesised action must end in )OVERLAP_F_B, e.g. "
                      "(0F1;1B0)OVERLAP_F_B");
  const std::string_view inner = t.substr(1, t.size() - 1 - suffix.size());
  const std::size_t semi = inner.find(';');
  if (semi == std::string_view::npos || inner.find(';', semi + 1) != std::string_view::npos)
    return make_error("'" + shown + "': OVERLAP_F_B joins exactly two actions, an F and a B or I, "
                      "separated by ';', e.g. (0F1;1B0)OVERLAP_F_B");
  auto f = parse_action(inner.substr(0, semi));
  if (!f) return make_error("'" + shown + "': " + f.message());
  auto b = parse_action(inner.substr(semi + 1));
  if (!b) return make_error("'" + shown + "': " + b.message());
  if (f->kind != action_kind::forward ||
      (b->kind != action_kind::backward && b->kind != action_kind::input_grad))
    return make_error("'" + shown + "': OVERLAP_F_B joins an F and then a B or I, got " +
                      to_string(*f) + " and " + to_string(*b));
  return program{action{f->stage, action_kind::overlap_f_b, -1}, *f, *b};
}

std::string to_string(const program& p) {
  std::string out;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (!out.empty()) out += ' ';
    if (p[i].kind == action_kind::overlap_f_b && i + 2 < p.size()) {
      out += "(" + to_string(p[i + 1]) + ";" + to_string(p[i + 2]) + ")OVERLAP_F_B";
      i += 2;
    } else {
      out += to_string(p[i]);
    }
  }
  return out;
}

result<program> parse_program(std::string_view text) {
  program out;
  std::size_t i = 0;
  // Tokens are separated by any run of spaces, tabs, newlines or commas.
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',' || text[i] == '\t' ||
                               text[i] == '\n' || text[i] == '\r'))
      ++i;
    std::size_t j = i;
    while (j < text.size() && !(text[j] == ' ' || text[j] == ',' || text[j] == '\t' ||
                                text[j] == '\n' || text[j] == '\r'))
      ++j;
    if (j > i) {
      auto a = parse_token(text.substr(i, j - i));
      if (!a) return make_error("action " + std::to_string(out.size()) + ": " + a.message());
      out.insert(out.end(), a->begin(), a->end());
    }
    i = j;
  }
  return out;
}

std::size_t position_after_step(const program& p, std::int64_t step) {
  std::map<int, std::int64_t> seen;
  std::size_t cut = 0;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i].kind == action_kind::step && ++seen[p[i].stage] == step) cut = std::max(cut, i + 1);
  return cut;
}

}  // namespace pipeworks
