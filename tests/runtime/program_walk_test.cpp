// Tests for runtime/program_walk.cpp: what each action waits for and makes, logical steps on a
// hand-written schedule, credit windows, and agreement with the simulator's own loop on every
// built-in schedule and on programs moved into deadlock.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/lower.hpp"
#include "runtime/program_walk.hpp"
#include "runtime/simulate.hpp"
#include "runtime/validate.hpp"
#include "tests/runtime/schedule_text.hpp"

using namespace pipeworks;

namespace {

using test::from_text;

const std::vector<schedule_kind>& every_kind = every_schedule_kind();

// The built-in schedules of a small grid, lowered; those a generator does not permit are skipped.
std::vector<schedule> small_grid() {
  std::vector<schedule> out;
  for (schedule_kind kind : every_kind)
    for (int p : {1, 2, 3, 4})
      for (int m : {1, 4, 6})
        for (int v : {1, 2})
          for (int w : {1, 2}) {
            auto s = make_schedule(kind, {p, m, v, w, 2});
            if (s.ok()) out.push_back(lower_communication(*s));
          }
  return out;
}

bool is_send(action_kind k) { return k == action_kind::send_f || k == action_kind::send_b; }
bool is_recv(action_kind k) { return k == action_kind::recv_f || k == action_kind::recv_b; }

bool simulator_deadlocks(const schedule& s) {
  auto sim = simulate(s, uniform_costs(1, 2), {.record_timeline = false});
  if (sim.ok()) return false;
  INFO(sim.message());
  REQUIRE(sim.message().find("deadlock") != std::string::npos);  // no other error is expected
  return true;
}

}  // namespace

TEST_CASE("describe_action: what F, SEND, RECV, B and REDUCE wait for and make", "[runtime]") {
  const schedule s = from_text({"0F0 0SEND_F0 0RECV_B0 0B0 0REDUCE 0STEP",
                                "1RECV_F0 1F0 1B0 1SEND_B0 1REDUCE 1STEP",
                                "0F0 0SEND_F0 0RECV_B0 0B0 0REDUCE 0STEP",
                                "1RECV_F0 1F0 1B0 1SEND_B0 1REDUCE 1STEP"},
                               2, 1, 2);
  const action_flow f0 = describe_action(s, true, 1, s.programs[2][0]);
  CHECK(f0.waits == wait_kind::input);
  CHECK(f0.awaited == message_id{{1, 0, true}, 0});
  CHECK(f0.makes == make_kind::nothing);  // lowered: the SEND_F carries it to device 1

  const action_flow send = describe_action(s, true, 0, s.programs[0][1]);
  CHECK(send.waits == wait_kind::credit);
  CHECK(send.awaited.link == link_id{0, 1, true});
  CHECK(send.makes == make_kind::message);
  CHECK(send.made == message_id{{0, 1, true}, 0});
  CHECK_FALSE(send.made_local);

  const action_flow recv = describe_action(s, true, 0, s.programs[1][0]);
  CHECK(recv.waits == wait_kind::message);
  CHECK(recv.awaited == message_id{{0, 1, true}, 0});
  CHECK(recv.makes == make_kind::credit);
  CHECK(recv.made.link == link_id{0, 1, true});

  const action_flow b_last = describe_action(s, true, 0, s.programs[1][2]);
  CHECK(b_last.waits == wait_kind::nothing);  // the last stage's B needs only its own F
  const action_flow b_first = describe_action(s, true, 0, s.programs[0][3]);
  CHECK(b_first.waits == wait_kind::message);
  CHECK(b_first.awaited_local);  // its RECV_B, earlier on the same rank, took the gradient

  const action_flow reduce = describe_action(s, true, 1, s.programs[3][4], 3);
  CHECK(reduce.waits == wait_kind::reduce);
  CHECK(reduce.makes == make_kind::reduce_arrival);
  CHECK(reduce.reduce == reduce_id{1, 3});

  // Compute-only programs: F waits for the producing F of the previous stage on another device.
  const schedule c = from_text({"0F0 0B0 0STEP", "1F0 1B0 1STEP"}, 2, 1, 1, false);
  const action_flow f1 = describe_action(c, false, 0, c.programs[1][0]);
  CHECK(f1.waits == wait_kind::message);
  CHECK_FALSE(f1.awaited_local);
  const action_flow f0c = describe_action(c, false, 0, c.programs[0][0]);
  CHECK(f0c.makes == make_kind::message);
  CHECK(f0c.made == message_id{{0, 1, true}, 0});
}

TEST_CASE("program_walker: logical steps follow the rank's order and what each action waited for",
          "[runtime]") {
  const schedule s = from_text({"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0STEP",
                                "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1STEP"},
                               2);
  program_walker walk(s, {.lowered = true, .record_steps = true});
  REQUIRE(walk.run());
  CHECK(walk.stuck().empty());
  const std::vector<int> rank0{0, 1, 2, 3, 6, 7, 10, 11, 12};
  const std::vector<int> rank1{2, 3, 4, 5, 6, 7, 8, 9, 10};
  CHECK(walk.steps()[0] == rank0);
  CHECK(walk.steps()[1] == rank1);
  CHECK(walk.last_steps() == std::vector<int>{12, 10});
}

TEST_CASE("program_walker: a credit window of one blocks a second SEND until its RECV", "[runtime]") {
  // Rank 0 sends two activations before it takes any gradient; rank 1 takes the first only after
  // rank 0's second SEND: with one credit per link that never happens.
  const schedule s = from_text({"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0STEP",
                                "1RECV_F1 1RECV_F0 1F0 1B0 1SEND_B0 1F1 1B1 1SEND_B1 1STEP"},
                               2);
  CHECK(program_walker(s, {.lowered = true}).run());
  program_walker tight(s, {.lowered = true, .credit_window = 1});
  CHECK_FALSE(tight.run());
  CHECK(tight.stuck() == std::vector<int>{0, 1});
  CHECK(tight.positions() == std::vector<std::size_t>{3, 0});
  CHECK(program_walker(s, {.lowered = true, .credit_window = 2}).run());
}

TEST_CASE("program_walker and the simulator agree that every built-in schedule finishes, in order",
          "[runtime]") {
  int checked = 0;
  for (const schedule& s : small_grid()) {
    INFO(schedule_name(s.kind) << " p=" << s.params.stages << " m=" << s.params.microbatches
                               << " v=" << s.params.chunks << " w=" << s.params.replicas);
    program_walker walk(s, {.lowered = true, .record_steps = true});
    REQUIRE(walk.run());
    auto sim = simulate(s, uniform_costs(1, 2, 1));
    REQUIRE(sim.ok());
    // Where the walker says an action waited for a message, the simulator ran it no earlier than
    // the message was made, and the walker's step for it is later than its maker's.
    std::map<std::tuple<int, int, bool, int>, std::pair<double, int>> made;  // -> (sim end, step)
    std::map<std::pair<int, std::size_t>, const timeline_event*> event_at;
    std::vector<std::size_t> seen(s.ranks(), 0);
    std::vector<const timeline_event*> events;
    for (const auto& e : sim->trace.events) events.push_back(&e);
    std::stable_sort(events.begin(), events.end(),
                     [](auto* a, auto* b) { return a->start < b->start; });
    for (const timeline_event* e : events) {
      const program& prog = s.programs[e->rank];
      std::size_t& i = seen[e->rank];
      while (i < prog.size() && !(prog[i] == e->act)) ++i;  // the rank's program, in its order
      REQUIRE(i < prog.size());
      event_at[{e->rank, i}] = e;
      ++i;
    }
    for (int r = 0; r < s.ranks(); ++r)
      for (std::size_t i = 0; i < s.programs[r].size(); ++i) {
        const action_flow f = describe_action(s, true, r / s.params.stages, s.programs[r][i]);
        if (f.makes != make_kind::message || f.made_local) continue;
        const message_id& m = f.made;
        REQUIRE(event_at.count({r, i}));
        made[{m.link.replica, m.link.stage, m.link.forward, m.microbatch}] = {
            event_at[{r, i}]->start, walk.steps()[r][i]};
      }
    for (int r = 0; r < s.ranks(); ++r)
      for (std::size_t i = 0; i < s.programs[r].size(); ++i) {
        const action_flow f = describe_action(s, true, r / s.params.stages, s.programs[r][i]);
        if (f.waits != wait_kind::message || f.awaited_local) continue;
        const message_id& m = f.awaited;
        const auto it = made.find({m.link.replica, m.link.stage, m.link.forward, m.microbatch});
        REQUIRE(it != made.end());
        REQUIRE(event_at.count({r, i}));
        CHECK(event_at[{r, i}]->end >= it->second.first);
        CHECK(walk.steps()[r][i] > it->second.second);
        ++checked;
      }
  }
  CHECK(checked > 1000);
}

TEST_CASE("program_walker and the simulator agree on which moved programs deadlock", "[runtime]") {
  // A RECV moved earlier, or a SEND moved later, keeps every compute action's input in place, so
  // the only way the programs can fail is a deadlock; both must see the same.
  std::mt19937 rng(7);
  int deadlocks = 0, finishes = 0;
  for (const schedule& base : small_grid()) {
    if (base.params.stages < 2) continue;
    for (int trial = 0; trial < 4; ++trial) {
      schedule s = base;
      const int r = std::uniform_int_distribution<int>(0, s.ranks() - 1)(rng);
      program& prog = s.programs[r];
      std::vector<std::size_t> comm;
      for (std::size_t i = 0; i < prog.size(); ++i)
        if (is_send(prog[i].kind) || is_recv(prog[i].kind)) comm.push_back(i);
      if (comm.empty()) continue;
      const std::size_t i = comm[std::uniform_int_distribution<std::size_t>(0, comm.size() - 1)(rng)];
      if (is_recv(prog[i].kind)) {
        const std::size_t to = std::uniform_int_distribution<std::size_t>(0, i)(rng);
        std::rotate(prog.begin() + static_cast<std::ptrdiff_t>(to),
                    prog.begin() + static_cast<std::ptrdiff_t>(i),
                    prog.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      } else {
        const std::size_t to = std::uniform_int_distribution<std::size_t>(i, prog.size() - 1)(rng);
        std::rotate(prog.begin() + static_cast<std::ptrdiff_t>(i),
                    prog.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                    prog.begin() + static_cast<std::ptrdiff_t>(to) + 1);
      }
      // A move into an OVERLAP_F_B pair breaks the pair, not the flow: the validator refuses it
      // for that alone (tests/runtime/schedules/v_schedules_test.cpp).
      bool pairs_whole = true;
      for (std::size_t k = 0; k < prog.size(); ++k)
        if (prog[k].kind == action_kind::overlap_f_b)
          pairs_whole = pairs_whole && k + 2 < prog.size() &&
                        prog[k + 1].kind == action_kind::forward && is_compute(prog[k + 2].kind);
      if (!pairs_whole) continue;
      INFO(schedule_name(s.kind) << " p=" << s.params.stages << " m=" << s.params.microbatches
                                 << " v=" << s.params.chunks << " w=" << s.params.replicas
                                 << " rank " << r << ": " << to_string(prog));
      const bool walked = program_walker(s, {.lowered = true}).run();
      CHECK(walked == !simulator_deadlocks(s));
      CHECK(walked == validate(s).ok());
      (walked ? finishes : deadlocks) += 1;
    }
  }
  CHECK(deadlocks > 20);
  CHECK(finishes > 20);
}

// The p2p reduce (cyclic): a REDUCE waits for the previous replica's, not for every replica; a
// STEP of a replica but the last waits for the last one's STEP of the same step.
TEST_CASE("program_walker: the p2p reduce is a chain and the new version flows from the last",
          "[runtime]") {
  const int p = 2, m = 4, w = 3;
  auto made = make_schedule(schedule_kind::cyclic, {p, m, 1, w, 3, reduce_mode::p2p});
  REQUIRE(made.ok());
  const schedule s = lower_communication(*made);
  program_walker walk(s, {.lowered = true, .record_steps = true});
  REQUIRE(walk.run());
  // Step of the k-th action of `kind` on rank r.
  auto step_of = [&](int r, action_kind kind, int k) {
    const program& prog = s.programs[r];
    for (std::size_t i = 0; i < prog.size(); ++i)
      if (prog[i].kind == kind && k-- == 0) return walk.steps()[r][i];
    return -1;
  };
  for (int d = 0; d < p; ++d)
    for (int k = 0; k < 3; ++k) {
      INFO("device " << d << ", update " << k);
      for (int q = 1; q < w; ++q)
        CHECK(step_of(s.rank_of(q, d), action_kind::reduce, k) >
              step_of(s.rank_of(q - 1, d), action_kind::reduce, k));
      for (int q = 0; q + 1 < w; ++q)
        CHECK(step_of(s.rank_of(q, d), action_kind::step, k) >
              step_of(s.rank_of(w - 1, d), action_kind::step, k));
    }
  // Described as such.
  const action_flow reduce1 = describe_action(s, true, 1, action{0, action_kind::reduce, -1}, 2);
  CHECK(reduce1.waits == wait_kind::reduce);
  CHECK(reduce1.reduce.occurrence == 2);
  CHECK(describe_action(s, true, 0, action{0, action_kind::step, -1}, 1).waits == wait_kind::version);
  CHECK(describe_action(s, true, w - 1, action{0, action_kind::step, -1}, 1).makes ==
        make_kind::version);
  // A chain whose last replica never steps leaves the others stuck at their STEP.
  schedule broken = s;
  for (int d = 0; d < p; ++d)
    std::erase_if(broken.programs[s.rank_of(w - 1, d)],
                  [](const action& a) { return a.kind == action_kind::step; });
  program_walker stuck(broken, {.lowered = true});
  CHECK_FALSE(stuck.run());
  CHECK_FALSE(validate(broken).ok());
}
