// The description of what each action waits for and makes, and the walker that runs every rank's
// program on it with free compute; see program_walk.hpp.
#include "runtime/program_walk.hpp"

#include <algorithm>

namespace pipeworks {

namespace {

// describe_action, inlined into the walker's loop.
[[gnu::always_inline]] inline action_flow describe(const schedule& s, bool lowered, int replica,
                                                   const action& a, int reduces_before) {
  action_flow f;
  const int st = a.stage, mb = a.microbatch;
  auto here = [&](int other) { return s.device_of[other] == s.device_of[st]; };
  auto wait_message = [&](link_id link, bool local) {
    f.waits = wait_kind::message;
    f.awaited = {link, mb};
    f.awaited_local = local;
  };
  auto make_message = [&](link_id link, bool local) {
    f.makes = make_kind::message;
    f.made = {link, mb};
    f.made_local = local;
  };
  switch (a.kind) {
    case action_kind::forward:
      if (s.starts_route(st)) {
        f.waits = wait_kind::input;
        f.awaited = {{replica, st, true}, mb};
      } else {
        wait_message({replica, st, true}, lowered || here(st - 1));
      }
      // Lowered: an activation for another device leaves through SEND_F.
      if (!s.ends_route(st) && (!lowered || here(st + 1)))
        make_message({replica, st + 1, true}, here(st + 1));
      break;
    case action_kind::backward:
    case action_kind::input_grad:
      if (!s.ends_route(st)) wait_message({replica, st, false}, lowered || here(st + 1));
      if (!s.starts_route(st) && (!lowered || here(st - 1)))
        make_message({replica, st - 1, false}, here(st - 1));
      break;
    case action_kind::send_f:
    case action_kind::send_b: {
      // Built once and stored twice: copying f.awaited back out of f stalls the store buffer.
      const bool fwd = a.kind == action_kind::send_f;
      const link_id link{replica, fwd ? st + 1 : st - 1, fwd};
      f.waits = wait_kind::credit;
      f.awaited = {link, mb};
      make_message(link, false);  // a RECV on the consumer's rank takes it
      break;
    }
    case action_kind::recv_f:
    case action_kind::recv_b: {
      const link_id link{replica, st, a.kind == action_kind::recv_f};
      wait_message(link, false);
      f.makes = make_kind::credit;
      f.made = {link, mb};
      break;
    }
    case action_kind::reduce:
      if (s.reduce_group_size() > 1) {
        f.waits = wait_kind::reduce;
        f.makes = make_kind::reduce_arrival;
        f.reduce = {st, reduces_before};
      }
      break;
    case action_kind::step:
      if (s.params.reduce == reduce_mode::p2p) {
        f.reduce = {st, reduces_before};
        if (runs_update(s.params, replica))
          f.makes = make_kind::version;
        else
          f.waits = wait_kind::version;
      }
      break;
    case action_kind::weight_grad:
    case action_kind::overlap_f_b:  // the F and B after it wait and make what they do
      break;
  }
  return f;
}

}  // namespace

action_flow describe_action(const schedule& s, bool lowered, int replica, const action& a,
                            int reduces_before) {
  return describe(s, lowered, replica, a, reduces_before);
}

program_walker::program_walker(const schedule& s, walk_options options) : s_(s), o_(options) {
  p_ = s.params.stages;
  w_ = s.params.replicas;
  stages_ = s.virtual_stages;
  ranks_ = s.ranks();
  mbs_ = static_cast<std::size_t>(s.total_microbatches());
  pc_.assign(ranks_, 0);
  blocked_.assign(ranks_, 0);
  last_step_.assign(ranks_, -1);
  arrived_.assign(ranks_, 0);
  if (o_.record_steps) {
    step_at_.resize(ranks_);
    for (int r = 0; r < ranks_; ++r) step_at_[r].assign(s.programs[r].size(), -1);
  }
  const std::size_t slots = static_cast<std::size_t>(w_) * stages_ * mbs_;
  made_f_.assign(slots, -1);
  made_b_.assign(slots, -1);
  if (o_.credit_window > 0) {
    const std::size_t links = static_cast<std::size_t>(w_) * stages_ * 2;
    sends_.assign(links, 0);
    recvs_.assign(links, 0);
    credit_step_.assign(links * o_.credit_window, -1);
  }
  reduces_done_.assign(static_cast<std::size_t>(w_) * stages_, 0);
  arrived_count_.assign(stages_, {});
  arrived_step_.assign(stages_, {});
  passed_count_.assign(stages_, {});
  if (s.params.reduce == reduce_mode::p2p) {
    chain_reduce_step_.assign(static_cast<std::size_t>(w_) * stages_, {});
    chain_step_step_.assign(static_cast<std::size_t>(w_) * stages_, {});
    steps_done_.assign(static_cast<std::size_t>(w_) * stages_, 0);
  }
}

bool program_walker::run() {
  for (int r = ranks_ - 1; r >= 0; --r) worklist_.push_back(r);
  while (!worklist_.empty()) {
    const int r = worklist_.back();
    worklist_.pop_back();
    advance(r);
  }
  return stuck().empty();
}

std::vector<int> program_walker::stuck() const {
  std::vector<int> out;
  for (int r = 0; r < ranks_; ++r)
    if (pc_[r] < s_.programs[r].size()) out.push_back(r);
  return out;
}

void program_walker::wake(int r) {
  if (blocked_[r]) {
    blocked_[r] = 0;
    worklist_.push_back(r);
  }
}

// Counts rank r at REDUCE `id` once; true when every member of its group (every replica's copy
// of the stage's piece on every route) is there. dep: the latest step at which one arrived.
bool program_walker::arrive_at_reduce(int r, const reduce_id& id, int& dep) {
  std::vector<int>& count = arrived_count_[s_.piece_of(id.stage)];
  std::vector<int>& step = arrived_step_[s_.piece_of(id.stage)];
  const std::size_t k = static_cast<std::size_t>(id.occurrence);
  if (count.size() <= k) {
    count.resize(k + 1, 0);
    step.resize(k + 1, -1);
  }
  if (!arrived_[r]) {
    arrived_[r] = 1;
    ++count[k];
    step[k] = std::max(step[k], last_step_[r]);
  }
  dep = step[k];
  return count[k] == s_.reduce_group_size();
}

// p2p: whether replica `replica`'s occurrence id.occurrence of its REDUCE (or STEP) of id.stage
// ran (`steps`: the steps they ran at); dep: its step.
bool program_walker::chain_ran(const std::vector<std::vector<int>>& steps, int replica,
                               const reduce_id& id, int& dep) const {
  const std::vector<int>& ran = steps[static_cast<std::size_t>(replica) * stages_ + id.stage];
  if (static_cast<std::size_t>(id.occurrence) >= ran.size()) return false;
  dep = ran[static_cast<std::size_t>(id.occurrence)];
  return true;
}

// Runs rank r's actions while they are ready; step(a) = 1 + max(step of the previous action on
// the rank, step of what a waited for).
void program_walker::advance(int r) {
  const int q = r / p_;
  const int window = o_.credit_window;
  const action* prog = s_.programs[r].data();
  const std::size_t n = s_.programs[r].size();
  std::size_t pc = pc_[r];
  while (pc < n) {
    // The next visit to this rank comes after many other ranks ran: fetch its program now.
    __builtin_prefetch(prog + std::min(pc + 16, n));
    const action& a = prog[pc];
    const bool p2p = s_.params.reduce == reduce_mode::p2p;
    const int before = a.kind == action_kind::reduce ? reduces_done_[q * stages_ + a.stage]
                       : p2p && a.kind == action_kind::step ? steps_done_[q * stages_ + a.stage]
                                                            : 0;
    const action_flow f = describe(s_, o_.lowered, q, a, before);
    int dep = -1;
    bool ready = true;
    switch (f.waits) {
      case wait_kind::nothing:
      case wait_kind::input:
        break;
      case wait_kind::message:
        if (!f.awaited_local) {
          const int* made = &(f.awaited.link.forward ? made_f_ : made_b_)[slot(f.awaited)];
          __builtin_prefetch(made + 16);  // the link's next microbatches, one line on
          dep = *made;
          ready = dep >= 0;
        }
        break;
      case wait_kind::credit:
        if (window > 0) {
          const std::size_t l = link_index(f.awaited.link);
          const int k = sends_[l];  // this is the link's k-th message: RECV k - window freed it
          ready = k - recvs_[l] < window;
          if (ready && k >= window) dep = credit_step_[l * window + k % window];
          if (ready) ++sends_[l];
        }
        break;
      case wait_kind::reduce:
        if (p2p)  // the previous replica's partial sum
          ready = q == 0 || chain_ran(chain_reduce_step_, q - 1, f.reduce, dep);
        else
          ready = arrive_at_reduce(r, f.reduce, dep);
        break;
      case wait_kind::version:  // the last replica's new version
        ready = chain_ran(chain_step_step_, w_ - 1, f.reduce, dep);
        break;
    }
    if (!ready) {
      blocked_[r] = 1;
      break;
    }
    const int st = std::max(last_step_[r], dep) + 1;
    if (o_.record_steps) step_at_[r][pc] = st;
    last_step_[r] = st;
    if (p2p && a.kind == action_kind::step) ++steps_done_[q * stages_ + a.stage];
    switch (f.makes) {
      case make_kind::nothing:
        break;
      case make_kind::message:
        if (!f.made_local) {
          int* made = &(f.made.link.forward ? made_f_ : made_b_)[slot(f.made)];
          __builtin_prefetch(made + 16, 1);
          *made = st;
          wake(rank_of(q, f.made.link.stage));
        }
        break;
      case make_kind::credit:
        if (window > 0) {
          const link_id& link = f.made.link;
          const std::size_t l = link_index(link);
          credit_step_[l * window + recvs_[l] % window] = st;
          ++recvs_[l];
          wake(rank_of(q, link.forward ? link.stage - 1 : link.stage + 1));  // its sender
        }
        break;
      case make_kind::version:
        chain_step_step_[q * stages_ + f.reduce.stage].push_back(st);
        for (int other = 0; other < w_ - 1; ++other) wake(rank_of(other, f.reduce.stage));
        break;
      case make_kind::reduce_arrival:
        ++reduces_done_[q * stages_ + f.reduce.stage];
        if (p2p) {
          chain_reduce_step_[q * stages_ + f.reduce.stage].push_back(st);
          if (q + 1 < w_) wake(rank_of(q + 1, f.reduce.stage));
          break;
        }
        arrived_[r] = 0;
        {
          // The first member past the REDUCE wakes the others, which all wait there (every one
          // arrived); the later ones wake nobody: w wake-ups per REDUCE, not w^2.
          const int piece = s_.piece_of(f.reduce.stage);
          std::vector<int>& passed = passed_count_[piece];
          const std::size_t k = static_cast<std::size_t>(f.reduce.occurrence);
          if (passed.size() <= k) passed.resize(k + 1, 0);
          if (++passed[k] == 1)
            for (int other = 0; other < w_; ++other)
              for (int c = piece; c < stages_; c += s_.route_stages())
                if (rank_of(other, c) != r) wake(rank_of(other, c));
        }
        break;
    }
    ++pc;
  }
  pc_[r] = pc;
}

}  // namespace pipeworks
