// The simulator's error messages: an action out of order, a version before its STEP, memory
// exhausted or overflowed, times that overflowed, and the deadlock picture.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "runtime/simulate_internal.hpp"

namespace pipeworks::sim_detail {

std::string simulator::where(int r, std::size_t pc) const {
  return "rank " + std::to_string(r) + " action " + std::to_string(pc) + " (" +
         to_string(s_.programs[r][pc]) + ")";
}

bool simulator::out_of_memory(int r, double t, int st, std::int64_t used, std::int64_t cap) {
  std::ostringstream e;
  e << "simulate: stage " << (st < 0 ? r % p_ : st) << " (device " << r % p_ << ", rank " << r
    << ") runs out of memory at t=" << t << ": it needs " << bytes_text(used) << " ("
    << bytes_text(hot_[r].act_now) << " of activations for " << hot_[r].inflight
    << " stashed microbatches, " << bytes_text(hot_[r].param_now)
    << " of weights) but the device has " << bytes_text(cap)
    << "; use a schedule with fewer microbatches in flight (1f1b rather than gpipe), more "
       "stages, or a device with more memory";
  error_ = e.str();
  return false;
}

bool simulator::fail_bytes(int r, double t, int st) {
  error_ = "simulate: stage " + std::to_string(st < 0 ? r % p_ : st) + " (rank " +
           std::to_string(r) + ") at t=" + fmt(t) +
           " holds more than 2^63 - 1 bytes of stashed activations and weight versions; the "
           "activation_bytes or param_bytes of the cost model are too large";
  return false;
}

bool simulator::fail_order(int r, std::size_t pc, std::uint8_t sk) {
  const action& a = s_.programs[r][pc];
  std::string why;
  if (a.kind == action_kind::forward) {
    why = (sk & fwd_done) ? "this forward already ran"
                          : "its input is not here: the schedule needs a RECV_F before it (run "
                            "lower_communication) or the previous stage's F earlier";
  } else if (a.kind == action_kind::weight_grad) {
    why = (sk & bwd_done) ? "this W already ran"
                          : "its I has not run: W comes after I of the same microbatch";
  } else if (!(sk & fwd_done)) {
    why = "its F has not run on this stage: a backward comes after its forward";
  } else if (sk & igrad_done) {
    why = "this backward already ran";
  } else {
    why = "its output gradient is not here: the schedule needs a RECV_B before it (run "
          "lower_communication) or the next stage's backward earlier";
  }
  error_ = "simulate: " + where(r, pc) + " cannot run: " + why;
  return false;
}

bool simulator::fail_version(int r, std::size_t pc, int st, int mb, int ver, double t) {
  error_ = "simulate: " + where(r, pc) + " at t=" + fmt(t) + " uses weight version " +
           std::to_string(ver) + " of stage " + std::to_string(st) + " (microbatch " +
           std::to_string(mb) + "), but " +
           (ver < 0 ? std::string("versions start at 0 (the initial weights)")
                    : "only " + std::to_string(groups_[group(r / p_, st)].newest) +
                          " STEPs of that stage have run") +
           "; the version table and the STEP placement disagree";
  return false;
}

bool simulator::fail_send(int r, std::size_t pc) {
  error_ = "simulate: " + where(r, pc) +
           " sends past the end of the pipeline: SEND_F cannot leave the last stage and SEND_B "
           "cannot leave stage 0";
  return false;
}

std::string simulator::deadlock_picture() const {
  std::ostringstream e;
  e << "simulate: deadlock: no rank can make progress; each row is a rank's program around "
       "where it stopped, [the stuck action] marked:\n";
  int shown = 0;
  for (int r = 0; r < r_ && shown < 32; ++r) {
    const program& prog = s_.programs[r];
    const std::size_t pc = hot_[r].pc;
    e << "  rank " << r << " (t=" << hot_[r].free << "): ";
    if (pc >= prog.size()) {
      e << "done\n";
      continue;
    }
    ++shown;
    const std::size_t from = pc >= 4 ? pc - 4 : 0;
    const std::size_t to = std::min(prog.size(), pc + 4);
    if (from > 0) e << "... ";
    for (std::size_t i = from; i < to; ++i) {
      e << (i == pc ? "[" : "") << to_string(prog[i]) << (i == pc ? "]" : "") << ' ';
    }
    if (to < prog.size()) e << "...";
    const action& a = prog[pc];
    if (a.kind == action_kind::recv_f)
      e << "  <- waits for " << a.stage - 1 << "SEND_F" << a.microbatch;
    if (a.kind == action_kind::recv_b)
      e << "  <- waits for " << a.stage + 1 << "SEND_B" << a.microbatch;
    if (a.kind == action_kind::reduce)
      e << "  <- waits for the other replicas' " << a.stage << "REDUCE";
    e << '\n';
  }
  return e.str();
}

// Names the first rank whose busy time or finish is not finite, and the costs of its stages.
std::string simulator::overflow_message(const simulation& sim) const {
  int bad = 0;
  for (int r = 0; r < r_; ++r) {
    const rank_stats& x = sim.ranks[r];
    if (!std::isfinite(x.busy) || !std::isfinite(x.finish)) {
      bad = r;
      break;
    }
  }
  std::ostringstream e;
  e << "simulate: the times overflowed: rank " << bad << " (device " << bad % p_
    << ") has busy time " << sim.ranks[bad].busy << " and finishes at "
    << sim.ranks[bad].finish << ", past the largest double (about 1.8e308); its costs:";
  for (int st = 0; st < v_; ++st) {
    if (device_of_[st] != bad % p_) continue;
    e << " stage " << st << " F=" << t_f_[st] << " B=" << t_b_[st] << " W=" << t_w_[st]
      << " step=" << t_step_[st] << " reduce=" << t_reduce_[st]
      << " send=" << xfer_f_[st] + lat_f_[st] << ";";
  }
  e << " scale the times down (seconds rather than nanoseconds) or shorten the schedule";
  return e.str();
}

}  // namespace pipeworks::sim_detail
