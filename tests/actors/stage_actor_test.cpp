// The stage actor's watch on its own waiting (issue 31, item 4): a rank that has waited with
// nothing arriving and nothing to run tells the driver what it waits for, with its step, so
// that a run whose ranks all wait for each other ends naming each wait instead of hanging.
#include "actors/stage_actor.hpp"

#include <catch2/catch.hpp>

#include "actors/type_ids.hpp"
#include "actors/worker_actor.hpp"
#include "ops/model/param_split.hpp"
#include "runtime/exec/rank_setup.hpp"
#include "tests/actors/fixtures.hpp"

using namespace pipeworks;

TEST_CASE("a rank that waits with nothing arriving tells the driver what it waits for", "[actors]") {
  const run_plan plan = test::two_workers_plan();
  caf::actor_system_config config;
  add_message_types(config);
  caf::actor_system sys{config};
  caf::actor worker = spawn_worker(sys, std::make_shared<worker_spec>());
  caf::scoped_actor self{sys};
  // The worker hosts rank 1 (stage 1) for a "driver" that is this test, which also stands for
  // rank 0: rank 1 waits for an activation of stage 0 that never comes.
  host_request q;
  q.dtype = "float32";
  q.plan = to_json_text(plan);
  q.process = 2;
  q.ranks = {1};
  q.driver = caf::actor_cast<caf::actor>(self);
  const model<float> net = build_model<float>(plan.model);
  auto run = lower_run(plan, net.size());
  REQUIRE(run.ok());
  auto pieces = split_params(net.make_params(), run->boundaries);
  REQUIRE(pieces.ok());
  q.initial = {{std::make_shared<const param_set>(std::move((*pieces)[1]))}};
  caf::actor rank;
  self->request(worker, std::chrono::seconds(30), std::move(q))
      .receive([&](host_reply& r) { rank = r.ranks.at(0); },
               [&](caf::error& e) { FAIL(error_text(sys, e)); });
  REQUIRE(rank);
  const caf::actor me = caf::actor_cast<caf::actor>(self);
  self->send(rank, rank_wiring{{me, rank}, {}, me, {}, 0});
  // Within the guard (far beyond the 10 s it waits first), whatever else the rank sends.
  std::optional<rank_stalled> said;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (!said && std::chrono::steady_clock::now() < deadline)
    self->receive([&](const rank_stalled& s) { said = s; },
                  caf::after(std::chrono::seconds(1)) >> [] {});
  REQUIRE(said);
  CHECK(said->rank == 1);
  CHECK(said->stalled);
  INFO(said->waiting);
  CHECK(said->waiting.find("at step 1") == 0);
  CHECK(said->waiting.find("waiting for the activation from stage 0") != std::string::npos);
  self->send_exit(rank, caf::exit_reason::user_shutdown);
  self->send(worker, run_ended{false, "the test ended"});
  caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
}
