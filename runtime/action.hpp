// An action of a pipeline program (F, B, I, W, sends, receives, REDUCE, STEP) and its text form
// "{stage}{kind}{microbatch}", compatible with PyTorch's torch.distributed.pipelining ("1F0", "2SEND_F3").
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace pipeworks {

enum class action_kind : std::uint8_t {
  forward,      // F
  backward,     // B: full backward (input and weight gradient)
  input_grad,   // I: input-gradient half of a backward (PyTorch spells it I)
  weight_grad,  // W: weight-gradient half of a backward
  send_f,       // SEND_F: send the forward activation to the next stage
  recv_f,       // RECV_F: receive the forward activation from the previous stage
  send_b,       // SEND_B: send the input gradient to the previous stage
  recv_b,       // RECV_B: receive the output gradient from the next stage
  reduce,       // REDUCE: all-reduce the gradients of a replicated stage
  step,         // STEP: optimizer step, makes a new weight version
  // OVERLAP_F_B: the next two actions of the program, an F and a B (or I) of another microbatch,
  // run together (PyTorch writes the three as one, "(0F1;1B0)OVERLAP_F_B"). Its stage is the F's;
  // it computes nothing itself: what the pair computes is what the two compute one after the other.
  overlap_f_b,
};

std::string_view kind_name(action_kind k);  // "F", "B", "I", "W", "SEND_F", ..., "STEP"
bool is_compute(action_kind k);             // F, B, I, W
bool is_comm(action_kind k);                // SEND_*, RECV_*
inline bool has_microbatch(action_kind k) {  // everything but REDUCE, STEP and OVERLAP_F_B
  return k != action_kind::reduce && k != action_kind::step && k != action_kind::overlap_f_b;
}

// Eight bytes: a large simulation walks hundreds of millions of actions, so their size is most
// of its memory traffic. Stages are bounded by max_action_stage (parse_action refuses larger).
struct action {
  int stage : 24 = 0;   // (virtual) stage index, as in PyTorch's text form
  action_kind kind : 8 = action_kind::forward;
  int microbatch = -1;  // -1 for REDUCE and STEP

  bool operator==(const action&) const = default;
};
static_assert(sizeof(action) == 8);
inline constexpr int max_action_stage = (1 << 23) - 1;

std::string to_string(const action& a);       // "1F0", "0SEND_B2", "1STEP"
result<action> parse_action(std::string_view text);

// A device's (rank's) ordered program.
using program = std::vector<action>;

// Actions joined by single spaces; an OVERLAP_F_B and the two actions it joins as one token,
// "(0F1;1B0)OVERLAP_F_B", as PyTorch writes them.
std::string to_string(const program& p);
// Space- or comma-separated actions, and "(x;y)OVERLAP_F_B" tokens.
result<program> parse_program(std::string_view text);
// One token of a program: an action, or "(x;y)OVERLAP_F_B" (three actions).
result<program> parse_token(std::string_view text);

// The position right after the program's last STEP of step `step` (counting each virtual
// stage's STEPs from 1): where a rank restored after that step goes on. 0 when it has none.
std::size_t position_after_step(const program& p, std::int64_t step);

}  // namespace pipeworks
