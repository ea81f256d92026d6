// The worker actor's handshake, in one process: a driver of another protocol, an unknown dtype, a
// plan it cannot read, ranks or weights that do not match the plan are refused naming the field;
// a good request is hosted and the plan comes back as written; a second driver is refused while
// a run is hosted, and accepted once the first driver ends its run. Hostile host_requests are
// refused by the decoder before anything is allocated for them.
#include "actors/worker_actor.hpp"

#include <catch2/catch.hpp>

#include "actors/type_ids.hpp"
#include "ops/model/param_split.hpp"
#include "runtime/exec/rank_setup.hpp"
#include "tests/actors/fixtures.hpp"

using namespace pipeworks;
using pipeworks::test::two_workers_plan;

namespace {

// Worker 2's request for the plan: rank 1 and its stage's initial weights.
host_request good_request(const run_plan& plan, const caf::actor& driver) {
  host_request q;
  q.dtype = "float32";
  q.plan = to_json_text(plan);
  q.process = 2;
  q.ranks = {1};
  q.driver = driver;
  const model<float> net = build_model<float>(plan.model);
  auto run = lower_run(plan, net.size());
  REQUIRE(run.ok());
  auto pieces = split_params(net.make_params(), run->boundaries);
  REQUIRE(pieces.ok());
  q.initial = {{std::make_shared<const param_set>(std::move((*pieces)[1]))}};
  return q;
}

struct worker_fixture {
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> sys;
  caf::actor worker;
  worker_fixture() {
    add_message_types(config);
    sys = std::make_unique<caf::actor_system>(config);
    worker = spawn_worker(*sys, std::make_shared<worker_spec>());
  }
  ~worker_fixture() { caf::anon_send_exit(worker, caf::exit_reason::user_shutdown); }

  // The worker's answer to `q`: its reply, or the error's text.
  std::variant<host_reply, std::string> ask(caf::scoped_actor& self, host_request q) {
    std::variant<host_reply, std::string> out = std::string("no answer");
    self->request(worker, std::chrono::seconds(30), std::move(q))
        .receive([&](host_reply& r) { out = std::move(r); },
                 [&](caf::error& e) { out = error_text(*sys, e); });
    return out;
  }
};

std::string refusal(const std::variant<host_reply, std::string>& v) {
  return std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : "";
}

}  // namespace

TEST_CASE("a worker refuses a driver of another protocol naming the field", "[actors]") {
  worker_fixture f;
  caf::scoped_actor self{*f.sys};
  std::string text;
  self->request(f.worker, std::chrono::seconds(10), hello_msg{remote_protocol_version + 1, "driver"})
      .receive([&](const hello_msg&) { text = "accepted"; },
               [&](caf::error& e) { text = error_text(*f.sys, e); });
  CHECK(text.find("protocol") != std::string::npos);
  CHECK(text.find("same pipeworks version") != std::string::npos);
  self->request(f.worker, std::chrono::seconds(10), hello_msg{})
      .receive([&](const hello_msg& h) { text = h.role; },
               [&](caf::error& e) { text = error_text(*f.sys, e); });
  CHECK(text == "worker");
}

TEST_CASE("a worker refuses requests that do not match the plan naming the field", "[actors]") {
  worker_fixture f;
  caf::scoped_actor self{*f.sys};
  const caf::actor driver = caf::actor_cast<caf::actor>(self);
  const run_plan plan = two_workers_plan();
  {
    host_request q = good_request(plan, driver);
    q.dtype = "int8";
    CHECK(refusal(f.ask(self, q)).find("dtype") != std::string::npos);
  }
  {
    host_request q = good_request(plan, driver);
    q.plan = "{\"format\": \"pipeworks-run-plan\"}";
    CHECK(refusal(f.ask(self, q)).find("plan:") != std::string::npos);
  }
  {
    host_request q = good_request(plan, driver);
    q.process = 3;
    CHECK(refusal(f.ask(self, q)).find("process") != std::string::npos);
  }
  {
    host_request q = good_request(plan, driver);
    q.ranks = {0};
    CHECK(refusal(f.ask(self, q)).find("ranks") != std::string::npos);
  }
  {
    host_request q = good_request(plan, driver);
    q.initial[0].push_back(q.initial[0][0]);
    CHECK(refusal(f.ask(self, q)).find("initial") != std::string::npos);
  }
  {
    host_request q = good_request(plan, driver);
    q.protocol = 0;
    CHECK(refusal(f.ask(self, q)).find("protocol") != std::string::npos);
  }
}

TEST_CASE("a worker hosts one run at a time and is free again when it ends", "[actors]") {
  worker_fixture f;
  caf::scoped_actor self{*f.sys};
  const caf::actor driver = caf::actor_cast<caf::actor>(self);
  const run_plan plan = two_workers_plan();
  auto first = f.ask(self, good_request(plan, driver));
  REQUIRE(std::holds_alternative<host_reply>(first));
  CHECK(std::get<host_reply>(first).plan == to_json_text(plan));
  CHECK(std::get<host_reply>(first).ranks.size() == 1);
  caf::scoped_actor other{*f.sys};
  CHECK(refusal(f.ask(other, good_request(plan, caf::actor_cast<caf::actor>(other))))
            .find("another driver") != std::string::npos);
  self->send(f.worker, run_ended{true, ""});
  std::variant<host_reply, std::string> again = std::string();
  for (int tries = 0; tries < 200; ++tries) {  // run_ended and the next request race: retry
    again = f.ask(other, good_request(plan, caf::actor_cast<caf::actor>(other)));
    if (std::holds_alternative<host_reply>(again)) break;
  }
  CHECK(std::holds_alternative<host_reply>(again));
  other->send(f.worker, run_ended{false, "stopped by the test"});
}

TEST_CASE("a hostile host_request is refused by the decoder", "[actors]") {
  worker_fixture f;
  caf::scoped_actor self{*f.sys};
  host_request q = good_request(two_workers_plan(), caf::actor_cast<caf::actor>(self));
  q.ranks.clear();  // weights for one rank, while it claims to host none
  std::vector<char> buf;
  caf::binary_serializer sink{*f.sys, buf};
  REQUIRE_FALSE(sink(q));
  host_request back;
  caf::binary_deserializer source{*f.sys, buf};
  const caf::error err = source(back);
  REQUIRE(err);
  CHECK(error_text(*f.sys, err).find("more ranks") != std::string::npos);
  // Every truncation of a good request is refused, never crashes.
  host_request good = good_request(two_workers_plan(), caf::actor_cast<caf::actor>(self));
  std::vector<char> whole;
  caf::binary_serializer all{*f.sys, whole};
  REQUIRE_FALSE(all(good));
  for (std::size_t n = 0; n < whole.size(); n += 1 + n / 8) {
    std::vector<char> cut(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n));
    host_request x;
    caf::binary_deserializer part{*f.sys, cut};
    CHECK(part(x));
  }
}
