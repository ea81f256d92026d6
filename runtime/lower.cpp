// The lowering pass: compute-only programs -> programs with SEND/RECV pairs between virtual
// stages on different devices. Sends are buffered; a RECV sits right before the compute action
// that consumes it, and a SEND right after the one that produces it.
#include "runtime/schedule.hpp"

namespace pipeworks {

schedule lower_communication(const schedule& compute_only) {
  schedule out = compute_only;
  const int last = compute_only.virtual_stages - 1;
  const auto& dev = compute_only.device_of;
  // Does the hand-off between virtual stages a and b cross devices?
  auto crosses = [&](int a, int b) { return dev[a] != dev[b]; };
  for (program& prog : out.programs) {
    program lowered;
    lowered.reserve(prog.size() * 2);
    for (const action& a : prog) {
      const int s = a.stage, mb = a.microbatch;
      const bool in_range = s >= 0 && s <= last;
      switch (in_range ? a.kind : action_kind::step) {
        case action_kind::forward:
          // F(s) reads stage s-1's activation and feeds stage s+1.
          if (s > 0 && crosses(s - 1, s)) lowered.push_back({s, action_kind::recv_f, mb});
          lowered.push_back(a);
          if (s < last && crosses(s, s + 1)) lowered.push_back({s, action_kind::send_f, mb});
          break;
        case action_kind::backward:
        case action_kind::input_grad:
          // B(s) or I(s) reads stage s+1's input gradient and sends its own to stage s-1.
          if (s < last && crosses(s, s + 1)) lowered.push_back({s, action_kind::recv_b, mb});
          lowered.push_back(a);
          if (s > 0 && crosses(s - 1, s)) lowered.push_back({s, action_kind::send_b, mb});
          break;
        default:
          lowered.push_back(a);
      }
    }
    prog = std::move(lowered);
  }
  out.lowered = true;
  return out;
}

}  // namespace pipeworks
