// The lowering pass: compute-only programs -> programs with SEND/RECV pairs between virtual
// stages on different devices. Sends are buffered; a RECV sits right before the compute action
// that consumes it, and a SEND right after the one that produces it (both receives of an
// OVERLAP_F_B pair before it, both sends after it). Each program grows in place.
#include "runtime/lower.hpp"

#include <bit>
#include <cstdint>
#include <vector>

namespace pipeworks {

schedule lower_communication(schedule&& out) {
  const int stages = out.virtual_stages;
  const auto& dev = out.device_of;
  // in_cross[s]: stage s's input comes from another device (F(s) needs a RECV_F, B(s) or I(s)
  // a SEND_B); out_cross[s]: its output goes to another device (F(s) needs a SEND_F, B(s) or
  // I(s) a RECV_B). Actions that name no stage in range get neither.
  std::vector<std::uint8_t> in_cross(stages, 0), out_cross(stages, 0);
  for (int s = 0; s < stages; ++s) {
    in_cross[s] = !out.starts_route(s) && dev[s - 1] != dev[s];
    out_cross[s] = !out.ends_route(s) && dev[s] != dev[s + 1];
  }
  // What goes before and after a: bit 0 a RECV before it, bit 1 a SEND after it.
  auto around = [&](const action& a) -> unsigned {
    if (a.stage < 0 || a.stage >= stages) return 0;
    if (a.kind == action_kind::forward) return in_cross[a.stage] | out_cross[a.stage] << 1;
    if (a.kind == action_kind::backward || a.kind == action_kind::input_grad)
      return out_cross[a.stage] | in_cross[a.stage] << 1;
    return 0;
  };
  for (program& prog : out.programs) {
    const std::size_t n0 = prog.size();
    std::size_t n = n0;
    for (const action& a : prog) n += std::popcount(around(a));
    // Grow in place (the generators reserve this room), then fill from the back: an action never
    // moves to a position below its own, so nothing is overwritten before it is read.
    prog.resize(n);
    action* p = prog.data();
    std::size_t dst = n;
    // F(s) reads stage s-1's activation and feeds stage s+1; B(s) or I(s) reads stage s+1's
    // input gradient and sends its own to stage s-1.
    auto send_of = [](const action& a) {
      return action{a.stage, a.kind == action_kind::forward ? action_kind::send_f : action_kind::send_b,
                    a.microbatch};
    };
    auto recv_of = [](const action& a) {
      return action{a.stage, a.kind == action_kind::forward ? action_kind::recv_f : action_kind::recv_b,
                    a.microbatch};
    };
    for (std::size_t i = n0; i-- > 0;) {
      if (i >= 2 && p[i - 2].kind == action_kind::overlap_f_b) {
        // OVERLAP_F_B x y stays whole: both receives before it, both sends after the pair.
        const action mark = p[i - 2], x = p[i - 1], y = p[i];
        const unsigned cx = around(x), cy = around(y);
        if (cy & 2) p[--dst] = send_of(y);
        if (cx & 2) p[--dst] = send_of(x);
        p[--dst] = y;
        p[--dst] = x;
        p[--dst] = mark;
        if (cy & 1) p[--dst] = recv_of(y);
        if (cx & 1) p[--dst] = recv_of(x);
        i -= 2;
        continue;
      }
      const action a = p[i];
      const unsigned c = around(a);
      if (c & 2) p[--dst] = send_of(a);
      p[--dst] = a;
      if (c & 1) p[--dst] = recv_of(a);
    }
  }
  out.lowered = true;
  return std::move(out);
}

schedule lower_communication(const schedule& compute_only) {
  return lower_communication(schedule(compute_only));
}

}  // namespace pipeworks
