// The stage executor without CAF: one rank fed messages by hand (what it sends, when it waits,
// when it is done), credits that hold a sender back, and min_credit_window: the smallest window
// runs every schedule to the end, one less deadlocks, and buffers stay within the window.
#include "runtime/exec/executor.hpp"

#include <tbb/task_arena.h>

#include <catch2/catch.hpp>
#include <functional>
#include <memory>

#include "ops/model/mlp.hpp"
#include "ops/model/param_split.hpp"
#include "runtime/exec/local_run.hpp"
#include "runtime/program_walk.hpp"
#include "runtime/validate.hpp"
#include "tests/runtime/exec/semantics_fixture.hpp"

using namespace pipeworks;

namespace {

// fc1 (4 -> 3, ReLU) and fc2 (3 -> 2, loss): one block per stage.
model<float> two_block_mlp() { return make_mlp<float>(mlp_config{4, {3}, 2}); }

std::shared_ptr<const schedule> lowered(schedule_kind k, int p, int m, int steps = 1) {
  auto s = make_schedule(k, schedule_params{p, m, 1, 1, steps});
  REQUIRE(s.ok());
  return std::make_shared<const schedule>(lower_communication(*s));
}

train_config plain_sgd(int m) {
  train_config c;
  c.steps = 1;
  c.microbatches = m;
  c.optim = default_optimizer_config(optimizer_kind::sgd);
  c.optim.lr = 0.1;
  c.min_lr = 0.1;
  return c;
}

// A (2, 3) activation for the last stage, with two labels.
activation_msg activation_for_stage1(int mb) {
  activation_msg a;
  a.stage = 1;
  a.microbatch = mb;
  tensor x({2, 3}, dtype::f32);
  for (int i = 0; i < 6; ++i) x.data<float>()[i] = 0.1f * static_cast<float>(i + mb);
  a.data = tensor_payload(std::move(x));
  auto targets = std::make_shared<tensor>(shape_t{2}, dtype::i32);
  targets->data<std::int32_t>()[0] = 0;
  targets->data<std::int32_t>()[1] = 1;
  a.ctx = microbatch_ctx{2, targets};
  return a;
}

// Rank `device` of a 2-stage schedule over m microbatches of the two-block mlp, one step, SGD.
executor_setup two_stage_setup(schedule_kind kind, int m, int device) {
  executor_setup su;
  su.plan = lowered(kind, 2, m);
  su.device = device;
  su.boundaries = {0, 1, 2};
  su.train = plain_sgd(m);
  return su;
}

}  // namespace

TEST_CASE("a last-stage rank fed by hand receives and reports its loss and sends back and steps", "[runtime]") {
  model<float> net = two_block_mlp();
  auto parts = split_params(net.init_params(1), {0, 1, 2});
  REQUIRE(parts.ok());
  std::vector<outgoing> sent;
  executor_setup su = two_stage_setup(schedule_kind::one_f_one_b, 2, 1);
  su.weights_every = 1;  // publish every step's weights with its step report
  std::vector<param_set> mine;
  mine.push_back(std::move((*parts)[1]));
  stage_executor<float> rank(net, su, std::move(mine), [&](outgoing o) { sent.push_back(std::move(o)); });
  rank.start();
  CHECK(sent.empty());  // it runs no stage 0, so it asks the driver for nothing

  auto r = rank.run();
  REQUIRE(r.ok());
  CHECK_FALSE(*r);
  CHECK(rank.waiting_for().find("1RECV_F0") == 0);

  rank.deliver(activation_for_stage1(0));
  r = rank.run();
  REQUIRE(r.ok());
  CHECK_FALSE(*r);
  // RECV_F0 returns a credit, F0 reports the loss, B0's input gradient goes back to stage 0.
  REQUIRE(sent.size() == 3);
  CHECK(std::holds_alternative<credit_msg>(sent[0].msg));
  CHECK(sent[0].to.index == 0);
  CHECK(std::holds_alternative<loss_report>(sent[1].msg));
  CHECK(sent[1].to.kind == endpoint_kind::driver);
  const auto& g = std::get<gradient_msg>(sent[2].msg);
  CHECK(g.stage == 0);
  CHECK(g.microbatch == 0);
  CHECK(g.data.shape() == shape_t{2, 3});
  CHECK(rank.waiting_for().find("1RECV_F1") == 0);
  CHECK(rank.stats()[0].peak_inflight == 1);

  rank.deliver(activation_for_stage1(1));
  r = rank.run();
  REQUIRE(r.ok());
  CHECK(*r);
  CHECK(rank.finished());
  REQUIRE(sent.size() == 7);
  const auto& step = std::get<step_report>(sent[6].msg);
  CHECK(step.step == 0);
  CHECK(step.weights == rank.weights(1));
  CHECK(rank.stats()[0].steps == 1);
  CHECK(rank.stats()[0].peak_versions == 1);
}

TEST_CASE("a send waits for a credit from its receiver", "[runtime]") {
  model<float> net = two_block_mlp();
  auto parts = split_params(net.init_params(1), {0, 1, 2});
  REQUIRE(parts.ok());
  std::vector<outgoing> sent;
  executor_setup su = two_stage_setup(schedule_kind::gpipe, 4, 0);
  su.credit_window = 1;
  su.input_window = 4;
  std::vector<param_set> mine;
  mine.push_back(std::move((*parts)[0]));
  stage_executor<float> rank(net, su, std::move(mine), [&](outgoing o) { sent.push_back(std::move(o)); });
  rank.start();
  REQUIRE(sent.size() == 4);  // input requests for microbatches 0..3
  for (int k = 0; k < 4; ++k) {
    CHECK(std::get<input_request>(sent[k].msg).microbatch == k);
    activation_msg in;
    in.microbatch = k;
    in.data = tensor_payload(tensor({2, 4}, dtype::f32));
    in.ctx.batch = 2;
    rank.deliver(std::move(in));
  }
  sent.clear();
  auto r = rank.run();
  INFO((r.ok() ? std::string() : r.message()));
  REQUIRE(r.ok());
  auto activations = [&] {
    int n = 0;
    for (const auto& o : sent) n += std::holds_alternative<activation_msg>(o.msg);
    return n;
  };
  CHECK(activations() == 1);  // SEND_F1 waits: the one credit is in flight
  CHECK(rank.waiting_for() == "0SEND_F1: waiting for a credit from the receiver");
  rank.deliver(credit_msg{0, 1, true});
  REQUIRE(rank.run().ok());
  CHECK(activations() == 2);
}

TEST_CASE("min_credit_window is the smallest window that finishes and one less deadlocks", "[runtime]") {
  using pipeworks::test::all_kinds;
  model<float> net = make_mlp<float>(pipeworks::test::small_mlp());
  const param_set initial = net.init_params(3);
  int windows_above_one = 0;
  for (schedule_kind k : all_kinds)
    for (int p : {2, 4}) {
      const int v = k == schedule_kind::interleaved || k == schedule_kind::bfs ? 2 : default_chunks(k);
      auto s = make_schedule(k, schedule_params{p, 2 * p, v, 1, 2});
      if (!s) continue;
      auto plan = std::make_shared<const schedule>(lower_communication(*s));
      const int window = min_credit_window(*plan);
      std::vector<int> b;  // the model's stages: one route's (dualpipe holds each twice)
      const int L = plan->route_stages();
      for (int i = 0; i <= L; ++i) b.push_back(i * net.size() / L);
      minibatch_fn data = [&](std::int64_t t) -> result<minibatch> {
        return pipeworks::test::semantics_data(false, 2 * p, t, dtype::f32);
      };
      INFO(schedule_name(k) << " p=" << p << " window " << window);
      for (std::uint64_t order : {0, 7}) {
        auto ok = run_local(net, local_lowered_run(plan, b, plain_sgd(2 * p), window), initial,
                            data, {.order_seed = order});
        REQUIRE(ok.ok());
        // Per rank: at most `window` activations per incoming link and direction, and the
        // driver's two inputs ahead.
        CHECK(ok->max_buffered <= 2 * v * window + 2 + v);
      }
      if (window > 1) {
        ++windows_above_one;
        auto stuck = run_local(net, local_lowered_run(plan, b, plain_sgd(2 * p), window - 1),
                               initial, data);
        REQUIRE_FALSE(stuck.ok());
        CHECK(stuck.message().find("stopped before the end") != std::string::npos);
      }
    }
  CHECK(windows_above_one > 0);  // some schedule needs more than one message in flight
}

TEST_CASE("a rank refuses a message for a stage it does not run and a duplicate", "[runtime]") {
  model<float> net = two_block_mlp();
  auto make_rank = [&](std::vector<outgoing>& sent) {
    auto parts = split_params(net.init_params(1), {0, 1, 2});
    REQUIRE(parts.ok());
    executor_setup su = two_stage_setup(schedule_kind::one_f_one_b, 2, 1);
    std::vector<param_set> mine;
    mine.push_back(std::move((*parts)[1]));
    return std::make_unique<stage_executor<float>>(net, su, std::move(mine),
                                                   [&](outgoing o) { sent.push_back(std::move(o)); });
  };
  std::vector<outgoing> sent;
  auto foreign = make_rank(sent);
  activation_msg wrong = activation_for_stage1(0);
  wrong.stage = 0;  // rank 1 runs only stage 1
  foreign->deliver(std::move(wrong));
  auto r = foreign->run();
  REQUIRE_FALSE(r.ok());
  CHECK(r.message().find("stage 0, which this rank does not run") != std::string::npos);

  auto twice = make_rank(sent);
  twice->deliver(activation_for_stage1(1));
  twice->deliver(activation_for_stage1(1));
  r = twice->run();
  REQUIRE_FALSE(r.ok());
  CHECK(r.message().find("a second activation for stage 1, microbatch 1") != std::string::npos);
}

TEST_CASE("a throttled rank sleeps (1/speed - 1) times each compute action and its trace shows it", "[runtime]") {
  // A fake clock that ticks 1 s per reading and a sleep that advances it: every compute action
  // takes exactly 1 s before throttling, so speed 0.25 must ask for 3 s of sleep after each.
  model<float> net = two_block_mlp();
  for (double speed : {1.0, 0.25}) {
    CAPTURE(speed);
    auto parts = split_params(net.init_params(1), {0, 1, 2});
    REQUIRE(parts.ok());
    double fake = 0;
    std::vector<double> slept;
    executor_setup su = two_stage_setup(schedule_kind::one_f_one_b, 2, 1);
    su.speed = speed;
    su.clock = [&] { return fake += 1.0; };
    su.cpu_clock = su.clock;  // stands for the rank's CPU-time clock: all of the time is work
    su.sleep = [&](double s) {
      slept.push_back(s);
      fake += s;
    };
    std::vector<param_set> mine;
    mine.push_back(std::move((*parts)[1]));
    stage_executor<float> rank(net, su, std::move(mine), [](outgoing) {});
    rank.start();
    rank.deliver(activation_for_stage1(0));
    rank.deliver(activation_for_stage1(1));
    auto r = rank.run();
    REQUIRE(r.ok());
    REQUIRE(*r);
    int computes = 0;
    for (const timeline_event& e : rank.take_events()) {
      if (e.stream != stream_kind::compute) continue;
      ++computes;
      CAPTURE(to_string(e.act));
      // 1 s of work, then 3 s of sleep at speed 0.25 (and one more tick to read the end).
      if (speed == 1.0) CHECK(e.end - e.start == Approx(1.0));
      else CHECK(e.end - e.start >= 4.0);
    }
    CHECK(computes == 5);  // F0, B0, F1, B1, STEP
    if (speed == 1.0) {
      CHECK(slept.empty());
    } else {
      REQUIRE(slept.size() == 5);
      for (double s : slept) CHECK(s == Approx(3.0));
    }
  }
}

namespace {

// Runs rank 1 of a 2-stage 1f1b over 2 microbatches at speed 0.25 with a wall clock that jumps
// 100 s per reading (a loaded machine that deschedules the rank); returns what it slept.
std::vector<double> throttled_sleeps(const std::function<double()>& cpu_clock) {
  model<float> net = two_block_mlp();
  auto parts = split_params(net.init_params(1), {0, 1, 2});
  REQUIRE(parts.ok());
  double wall = 0;
  std::vector<double> slept;
  executor_setup su = two_stage_setup(schedule_kind::one_f_one_b, 2, 1);
  su.speed = 0.25;
  su.clock = [&] { return wall += 100.0; };
  su.cpu_clock = cpu_clock;
  su.sleep = [&](double s) { slept.push_back(s); };
  std::vector<param_set> mine;
  mine.push_back(std::move((*parts)[1]));
  stage_executor<float> rank(net, su, std::move(mine), [](outgoing) {});
  rank.start();
  rank.deliver(activation_for_stage1(0));
  rank.deliver(activation_for_stage1(1));
  auto r = rank.run();
  REQUIRE(r.ok());
  REQUIRE(*r);
  return slept;
}

}  // namespace

TEST_CASE("a throttled rank measures its compute with the CPU-time clock not the wall clock", "[runtime]") {
  // The CPU clock advances 0.5 s per reading, so each action did 0.5 s of work: speed 0.25 sleeps
  // 3 x 0.5 s, however much wall time passed meanwhile.
  double cpu = 0;
  const std::vector<double> slept = throttled_sleeps([&] { return cpu += 0.5; });
  REQUIRE(slept.size() == 5);  // F0, B0, F1, B1, STEP
  for (double s : slept) CHECK(s == Approx(1.5));
}

TEST_CASE("a throttled rank in a one-thread arena reads its thread's CPU time", "[runtime]") {
  // No CPU clock injected: inside an arena of one thread the rank reads CLOCK_THREAD_CPUTIME_ID.
  // The wall clock says each action took 100 s (300 s of sleep); a two-block MLP's action uses
  // far less than a second of CPU.
  std::vector<double> slept;
  tbb::task_arena one(1);
  one.execute([&] { slept = throttled_sleeps({}); });
  REQUIRE(slept.size() == 5);
  for (double s : slept) CHECK(s < 10.0);
}

TEST_CASE("an executor refuses a device speed outside 0 to 1", "[runtime]") {
  model<float> net = two_block_mlp();
  for (double speed : {0.0, -1.0, 1.5}) {
    CAPTURE(speed);
    auto parts = split_params(net.init_params(1), {0, 1, 2});
    REQUIRE(parts.ok());
    executor_setup su = two_stage_setup(schedule_kind::one_f_one_b, 2, 1);
    su.speed = speed;
    std::vector<param_set> mine;
    mine.push_back(std::move((*parts)[1]));
    CHECK_THROWS_WITH((stage_executor<float>(net, su, std::move(mine), [](outgoing) {})),
                      Catch::Contains("device speed"));
  }
}

TEST_CASE("an OVERLAP_F_B pair waits for both inputs, says which, and then runs both", "[runtime]") {
  model<float> net = two_block_mlp();
  auto parts = split_params(net.init_params(1), {0, 1, 2});
  REQUIRE(parts.ok());
  // The first stage runs microbatch 1's F together with microbatch 0's B.
  auto programs = std::vector<program>{
      parse_program("0F0 0SEND_F0 0RECV_B0 (0F1;0B0)OVERLAP_F_B 0SEND_F1 0RECV_B1 0B1 0STEP")
          .value(),
      parse_program("1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1STEP").value()};
  auto hand = schedule_from_programs(programs, 2, 1, 1, true);
  REQUIRE(hand.ok());
  hand->kind = schedule_kind::one_f_one_b;
  REQUIRE(validate(*hand).message() == "");
  executor_setup su = two_stage_setup(schedule_kind::one_f_one_b, 2, 0);
  su.plan = std::make_shared<const schedule>(*hand);
  su.input_window = 1;  // microbatch 1's input is asked for once microbatch 0's F ran
  std::vector<outgoing> sent;
  std::vector<param_set> mine;
  mine.push_back(std::move((*parts)[0]));
  stage_executor<float> rank(net, su, std::move(mine), [&](outgoing o) { sent.push_back(std::move(o)); });
  rank.start();
  auto input = [](int mb) {
    activation_msg in;
    in.microbatch = mb;
    in.data = tensor_payload(tensor({2, 4}, dtype::f32));
    in.ctx.batch = 2;
    return in;
  };
  auto gradient = [](int mb) {
    return gradient_msg{0, 0, mb, tensor_payload(tensor({2, 3}, dtype::f32))};
  };
  rank.deliver(input(0));
  REQUIRE(rank.run().ok());
  CHECK(rank.waiting_for() == "0RECV_B0: waiting for the gradient from stage 1");
  rank.deliver(gradient(0));
  auto r = rank.run();
  REQUIRE(r.ok());
  CHECK_FALSE(*r);
  CHECK(rank.waiting_for() ==
        "(0F1;0B0)OVERLAP_F_B: waiting for the driver's input");  // B0's gradient is there
  rank.deliver(input(1));
  r = rank.run();
  REQUIRE(r.ok());
  CHECK_FALSE(*r);  // the pair ran; RECV_B1 waits
  CHECK(rank.waiting_for() == "0RECV_B1: waiting for the gradient from stage 1");
  CHECK(rank.stats()[0].peak_inflight == 2);  // the pair held F1's stash beside B0's
  rank.deliver(gradient(1));
  r = rank.run();
  REQUIRE(r.ok());
  CHECK(*r);
}
