// The lowering pass: compute-only programs -> programs with SEND/RECV pairs between virtual
// stages on different devices. Sends are buffered; a RECV sits right before the compute action
// that consumes it, and a SEND right after the one that produces it.
#include "runtime/lower.hpp"

namespace pipeworks {

schedule lower_communication(schedule&& out) {
  const int last = out.virtual_stages - 1;
  const auto& dev = out.device_of;
  // Does the hand-off between virtual stages a and b cross devices?
  auto crosses = [&](int a, int b) { return dev[a] != dev[b]; };
  auto recv_before = [&](const action& a) {
    if (a.stage < 0 || a.stage > last) return false;
    if (a.kind == action_kind::forward) return a.stage > 0 && crosses(a.stage - 1, a.stage);
    if (a.kind == action_kind::backward || a.kind == action_kind::input_grad)
      return a.stage < last && crosses(a.stage, a.stage + 1);
    return false;
  };
  auto send_after = [&](const action& a) {
    if (a.stage < 0 || a.stage > last) return false;
    if (a.kind == action_kind::forward) return a.stage < last && crosses(a.stage, a.stage + 1);
    if (a.kind == action_kind::backward || a.kind == action_kind::input_grad)
      return a.stage > 0 && crosses(a.stage - 1, a.stage);
    return false;
  };
  for (program& prog : out.programs) {
    std::size_t n = prog.size();  // the exact size, so that each program is allocated once
    for (const action& a : prog) n += recv_before(a) + send_after(a);
    program lowered;
    lowered.reserve(n);
    for (const action& a : prog) {
      const bool fwd = a.kind == action_kind::forward;
      // F(s) reads stage s-1's activation and feeds stage s+1; B(s) or I(s) reads stage s+1's
      // input gradient and sends its own to stage s-1.
      if (recv_before(a)) {
        lowered.push_back({a.stage, fwd ? action_kind::recv_f : action_kind::recv_b, a.microbatch});
      }
      lowered.push_back(a);
      if (send_after(a)) {
        lowered.push_back({a.stage, fwd ? action_kind::send_f : action_kind::send_b, a.microbatch});
      }
    }
    prog = std::move(lowered);  // frees this rank's compute-only program
  }
  out.lowered = true;
  return std::move(out);
}

schedule lower_communication(const schedule& compute_only) {
  return lower_communication(schedule(compute_only));
}

}  // namespace pipeworks
