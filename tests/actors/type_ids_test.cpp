// Every message between actors has a CAF type ID and round-trips through CAF's binary serializer
// bit for bit: tensors with NaN, infinities, -0 and denormals, weight versions, and the actor
// layer's own messages. Also through a caf::message, which needs the types registered.
#include "actors/type_ids.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/model/mlp.hpp"
#include "tests/actors/fixtures.hpp"

using namespace pipeworks;

namespace {

// Floats CAF 0.17 would mangle as numbers: NaN (with a payload), both infinities, -0, denormals.
tensor awkward_floats() {
  tensor t({2, 4}, dtype::f32);
  float* x = t.data<float>();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::uint32_t payload_nan_bits = 0x7fc01234u;
  float payload_nan;
  std::memcpy(&payload_nan, &payload_nan_bits, 4);
  const float values[] = {nan, payload_nan, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), -0.0f,
                          std::numeric_limits<float>::denorm_min(), -1.17e-39f, 3.5f};
  std::copy(std::begin(values), std::end(values), x);
  return t;
}

bool same_bytes(const tensor_payload& a, const tensor_payload& b) {
  return a.type() == b.type() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.bytes().data(), b.bytes().data(), a.nbytes()) == 0;
}

bool same_params(const param_snapshot& a, const param_snapshot& b) {
  if (!a || !b) return !a && !b;
  return a->same_layout(*b) &&
         std::memcmp(a->arena().bytes(), b->arena().bytes(), a->nbytes()) == 0;
}

param_snapshot awkward_params() {
  param_set p = make_mlp<float>(mlp_config{4, {3}, 2}).make_params();
  auto v = p.values<float>();
  const tensor t = awkward_floats();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = t.data<float>()[i % 8];
  return std::make_shared<const param_set>(std::move(p));
}

template <class T>
T round_trip(caf::actor_system& sys, T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  REQUIRE_FALSE(sink(x));
  T y;
  caf::binary_deserializer source{sys, buf};
  auto err = source(y);
  INFO(sys.render(err));
  REQUIRE_FALSE(err);
  return y;
}

// Through a caf::message, which serialises by the registered type names.
template <class T>
T round_trip_message(caf::actor_system& sys, T x) {
  caf::message m = caf::make_message(std::move(x));
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  auto err = m.save(sink);
  INFO(sys.render(err));
  REQUIRE_FALSE(err);
  caf::message back;
  caf::binary_deserializer source{sys, buf};
  err = back.load(source);
  INFO(sys.render(err));
  REQUIRE_FALSE(err);
  REQUIRE(back.match_elements<T>());
  return back.get_as<T>(0);
}

struct system_fixture {
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> sys;
  system_fixture() {
    add_message_types(config);
    sys = std::make_unique<caf::actor_system>(config);
  }
};

}  // namespace

TEST_CASE("every message type has a CAF type ID and none is an unsafe message type", "[actors]") {
  using caf::has_type_id;
  STATIC_REQUIRE(caf::type_id<activation_msg>::value >= caf::first_custom_type_id);
  STATIC_REQUIRE(caf::type_id<timeline>::value > caf::type_id<activation_msg>::value);
  STATIC_REQUIRE_FALSE(caf::allowed_unsafe_message_type<activation_msg>::value);
  STATIC_REQUIRE_FALSE(caf::allowed_unsafe_message_type<run_outcome>::value);
  STATIC_REQUIRE(caf::id_block::pipeworks::end - caf::id_block::pipeworks::begin == 33);
}

TEST_CASE("activations and gradients cross CAF serialisation bit for bit", "[actors]") {
  system_fixture f;
  activation_msg a{1, 2, 7, 3, tensor_payload(awkward_floats()), {}};
  auto targets = std::make_shared<tensor>(shape_t{2}, dtype::i32);
  targets->data<std::int32_t>()[0] = -5;
  targets->data<std::int32_t>()[1] = 1 << 30;
  a.ctx = microbatch_ctx{2, targets};
  for (int via_message : {0, 1}) {
    CAPTURE(via_message);
    const activation_msg b = via_message ? round_trip_message(*f.sys, a) : round_trip(*f.sys, a);
    CHECK(b.replica == 1);
    CHECK(b.stage == 2);
    CHECK(b.microbatch == 7);
    CHECK(b.version == 3);
    CHECK(same_bytes(a.data, b.data));
    CHECK(b.ctx.batch == 2);
    REQUIRE(b.ctx.targets);
    CHECK(std::memcmp(b.ctx.targets->bytes(), targets->bytes(), 8) == 0);
  }
  gradient_msg g{0, 1, 4, tensor_payload(awkward_floats())};
  const gradient_msg h = round_trip_message(*f.sys, g);
  CHECK(same_bytes(g.data, h.data));
  CHECK(h.microbatch == 4);
  // An empty payload stays empty.
  const gradient_msg e = round_trip(*f.sys, gradient_msg{0, 1, 5, {}});
  CHECK(e.data.empty());
}

TEST_CASE("weight versions and gradients with NaN and -0 cross CAF serialisation bit for bit", "[actors]") {
  system_fixture f;
  const param_snapshot w = awkward_params();
  const reduce_request rq = round_trip_message(*f.sys, reduce_request{3, 1, 9, w});
  CHECK(rq.stage == 3);
  CHECK(rq.step == 9);
  CHECK(same_params(rq.grads, w));
  CHECK(same_params(round_trip(*f.sys, reduce_result{3, 9, w}).sum, w));
  const step_report rep = round_trip_message(*f.sys, step_report{2, 0, 5, -0.0, 1e-308, w});
  CHECK(same_params(rep.weights, w));
  CHECK(std::signbit(rep.grad_sq));
  CHECK(rep.lr == 1e-308);
  CHECK_FALSE(round_trip(*f.sys, step_report{}).weights);
}

TEST_CASE("the small runtime messages cross CAF serialisation unchanged", "[actors]") {
  system_fixture f;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const credit_msg c = round_trip_message(*f.sys, credit_msg{1, 2, false});
  CHECK((c.replica == 1 && c.stage == 2 && !c.forward));
  const input_request i = round_trip_message(*f.sys, input_request{1, 99});
  CHECK((i.replica == 1 && i.microbatch == 99));
  const loss_report l = round_trip_message(*f.sys, loss_report{0, 3, nan});
  CHECK(std::isnan(l.loss));
  const norm_request n = round_trip_message(*f.sys, norm_request{1, 2, 3, {0.5, -0.0, 1e-320}});
  REQUIRE(n.tensor_sq.size() == 3);
  CHECK(std::signbit(n.tensor_sq[1]));
  CHECK(n.tensor_sq[2] == 1e-320);
  CHECK(round_trip_message(*f.sys, norm_result{1, 3, 2.25}).sq == 2.25);
  const marker_msg mk = round_trip_message(*f.sys, marker_msg{4, 10});
  CHECK((mk.from_rank == 4 && mk.step == 10));
  trace_batch tb;
  tb.events.push_back(timeline_event{1, stream_kind::send, action{2, action_kind::send_f, 3}, 0.5, 0.75, -1, 42});
  tb.events.push_back(timeline_event{1, stream_kind::compute, action{2, action_kind::forward, 3}, 0.75, 1.0, 0, -1,
                                     std::int64_t{5} << 32});
  const trace_batch tb2 = round_trip_message(*f.sys, tb);
  REQUIRE(tb2.events.size() == 2);
  CHECK(tb2.events[0].act == tb.events[0].act);
  CHECK(tb2.events[0].stream == stream_kind::send);
  CHECK(tb2.events[0].flow_id == 42);
  CHECK(tb2.events[0].bytes == -1);
  CHECK(tb2.events[1].bytes == std::int64_t{5} << 32);  // a worker's recorded stash crosses whole
}

TEST_CASE("the actor layer's messages cross CAF serialisation unchanged", "[actors]") {
  system_fixture f;
  CHECK(round_trip_message(*f.sys, stage_failure{"stage 1, replica 0: boom"}).message ==
        "stage 1, replica 0: boom");
  CHECK(round_trip_message(*f.sys, trace_done{3}).rank == 3);
  const checkpoint_written cw =
      round_trip_message(*f.sys, checkpoint_written{2, 40, "rank-2.safetensors", 12345,
                                                    std::string(64, 'a'), "/scratch/run-1/step-40"});
  CHECK((cw.rank == 2 && cw.step == 40 && cw.bytes == 12345 && cw.file == "rank-2.safetensors"));
  CHECK(cw.dir == "/scratch/run-1/step-40");
  CHECK(round_trip_message(*f.sys, checkpoints_kept{{20, 40}}).steps == std::vector<std::int64_t>{20, 40});
  const rank_stalled st = round_trip_message(*f.sys, rank_stalled{3, true, "at step 16, 1RECV_F63: waiting"});
  CHECK(st.rank == 3);
  CHECK(st.stalled);
  CHECK(st.waiting == "at step 16, 1RECV_F63: waiting");
  rank_done d;
  d.rank = 1;
  d.finished = false;
  d.stages = {1, 3};
  d.steps = {7, 6};
  d.stats.resize(2);
  d.stats[1].peak_versions = 2;
  d.weights = {awkward_params(), nullptr};
  const rank_done d2 = round_trip_message(*f.sys, d);
  CHECK((d2.rank == 1 && !d2.finished && d2.stages == d.stages && d2.steps == d.steps));
  CHECK(d2.stats[1].peak_versions == 2);
  REQUIRE(d2.weights.size() == 2);
  CHECK(same_params(d2.weights[0], d.weights[0]));
  CHECK_FALSE(d2.weights[1]);
  // A lowered run crosses as its plan, which the reader lowers again: the same plan and programs.
  run_plan plan = test::one_f_one_b(2, 4, 3);
  plan.split = {0, 1};
  auto lowered = lower_run(plan, test::small_mlp().size());
  INFO((lowered ? std::string() : lowered.message()));
  REQUIRE(lowered);
  const auto run = std::make_shared<const lowered_run>(std::move(*lowered));
  run_outcome o;
  o.ok = false;
  o.error = "why";
  o.run = run;
  o.weights = {awkward_params()};
  o.weight_steps = {3};
  o.last.loss = -0.0;
  o.trace.title = "t";
  const run_outcome o2 = round_trip_message(*f.sys, o);
  CHECK((!o2.ok && o2.error == "why" && o2.weight_steps == o.weight_steps));
  REQUIRE(o2.run);
  CHECK(to_json_text(o2.run->plan) == to_json_text(run->plan));
  CHECK((o2.run->boundaries == run->boundaries && o2.run->programs->programs == run->programs->programs));
  CHECK(std::signbit(o2.last.loss));
  CHECK(same_params(o2.weights[0], o.weights[0]));
  CHECK(o2.trace.title == "t");
  const pipeline_wiring pw = round_trip_message(*f.sys, pipeline_wiring{nullptr, "report", "{}", {}, {}});
  CHECK((!pw.run && pw.report == "report"));
  const pipeline_wiring pw2 = round_trip_message(*f.sys, pipeline_wiring{run, "", "", {}, {}});
  REQUIRE(pw2.run);
  CHECK(to_json_text(pw2.run->plan) == to_json_text(run->plan));
  rank_wiring rw;
  rw.reducers.resize(2);
  CHECK(round_trip_message(*f.sys, rw).reducers.size() == 2);
}

TEST_CASE("a hostile tensor header is refused while reading, before any allocation", "[actors]") {
  system_fixture f;
  gradient_msg g{0, 1, 4, tensor_payload(awkward_floats())};
  std::vector<char> buf;
  caf::binary_serializer sink{*f.sys, buf};
  REQUIRE_FALSE(sink(g));
  // Truncated: the reader runs out of bytes and says so.
  std::vector<char> cut(buf.begin(), buf.end() - 5);
  gradient_msg h;
  caf::binary_deserializer short_source{*f.sys, cut};
  CHECK(short_source(h));
  // A shape claiming far more bytes than a message can hold.
  tensor_payload big = *tensor_payload::allocate(dtype::f32, {1});
  std::vector<char> forged;
  caf::binary_serializer forge{*f.sys, forged};
  bool present = true;
  std::uint8_t type = 0;
  shape_t shape{1 << 20, 1 << 20, 1 << 20};
  REQUIRE_FALSE(forge(present, type, shape));
  size_t n = 4;
  REQUIRE_FALSE(forge.begin_sequence(n));
  caf::binary_deserializer hostile{*f.sys, forged};
  tensor_payload out;
  auto err = hostile(out);
  REQUIRE(err);
  CHECK_THAT(f.sys->render(err), Catch::Contains("larger than a message"));
  (void)big;
}
