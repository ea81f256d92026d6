// A rank's messages between its actions: the inputs that came and wait to be consumed (each with
// the checkpoint marker its sender had sent before it), the outputs waiting for their SEND, the
// credits of each outgoing link and the stage-0 inputs it asks the driver for. A named part of
// the executor's state (executor_state.hpp).
#pragma once
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "runtime/exec/messages.hpp"

namespace pipeworks {

using message_key = std::pair<int, int>;  // (consumer stage, microbatch)
using link_key = std::pair<int, bool>;    // (consumer stage, forward)

// A buffered input and when it came: the highest checkpoint marker its sender had sent before
// it (0: none), so a checkpoint keeps only what was sent before the sender's cut.
template <class Msg>
struct buffered {
  Msg msg;
  int after_marker = 0;
  bool from_driver = false;  // an input of virtual stage 0: asked for again on resume
};

struct rank_mailbox {
  int window = 0;  // credits per outgoing link; 0: sends are not limited
  std::map<message_key, buffered<activation_msg>> inbox_f;
  std::map<message_key, buffered<gradient_msg>> inbox_b;
  std::map<message_key, activation_msg> out_f;  // F(s,k)'s output, for SEND_F(s,k)
  std::map<message_key, tensor> out_b;          // B(s,k)'s input gradient, for SEND_B(s,k)
  std::map<link_key, int> credits;              // sends left per link
  std::vector<int> route_inputs;               // microbatches of input_stage's F's, in order
  int input_stage = -1;  // the stage of this rank that starts a route (reads the data), or -1
  int next_input = 0;                           // index into route_inputs of the next request
  int peak_buffered = 0;                        // the most inputs held at once

  bool has_credit(const link_key& link) {
    if (window <= 0) return true;
    return credits.try_emplace(link, window).first->second > 0;
  }
  void take_credit(const link_key& link) {
    if (window > 0) --credits.at(link);
  }
  // A credit back from the link's consumer: false when it passes the window.
  bool return_credit(const link_key& link) {
    if (window <= 0) return true;
    return ++credits.try_emplace(link, window).first->second <= window;
  }
  void note_buffered() {
    peak_buffered = std::max(peak_buffered, static_cast<int>(inbox_f.size() + inbox_b.size()));
  }
};

}  // namespace pipeworks
