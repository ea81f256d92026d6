// await_workers: a rendezvous actor, reached at the driver's address through a frame guard,
// collects join_msgs and hands the full list to the waiting driver thread.
#include "actors/rendezvous.hpp"

#include <caf/io/all.hpp>
#include <optional>

#include "actors/type_ids.hpp"
#include "runtime/transport/frame_guard.hpp"

namespace pipeworks {
namespace {

using done_atom = caf::atom_constant<caf::atom("done")>;
using joined_atom = caf::atom_constant<caf::atom("joined")>;
using watchers_atom = caf::atom_constant<caf::atom("watchers")>;

caf::error refuse(const std::string& why) {
  return caf::make_error(caf::sec::runtime_error, "the driver refused the worker: " + why);
}

caf::behavior rendezvous_actor(caf::event_based_actor* self, int world, caf::actor waiter) {
  auto addresses = std::make_shared<std::vector<std::string>>(static_cast<std::size_t>(world));
  auto left = std::make_shared<int>(world);
  auto watchers = std::make_shared<std::vector<caf::actor>>();
  return {
      [=](const join_msg& j) -> caf::result<hello_msg> {
        if (j.protocol != remote_protocol_version)
          return refuse("its protocol is version " + std::to_string(j.protocol) + ", the driver's " +
                        std::to_string(remote_protocol_version) +
                        "; run the same pipeworks version on every host");
        if (j.world_size != world)
          return refuse("WORLD_SIZE is " + std::to_string(j.world_size) + " at the worker and " +
                        std::to_string(world) + " at the driver (--world-size)");
        if (j.rank < 0 || j.rank >= world)
          return refuse("RANK is " + std::to_string(j.rank) + ", not in 0.." + std::to_string(world - 1));
        if (auto a = parse_host_port(j.address); !a) return refuse("its address " + a.message());
        std::string& slot = (*addresses)[static_cast<std::size_t>(j.rank)];
        if (!slot.empty())
          return refuse("RANK " + std::to_string(j.rank) + " has joined already, from " + slot);
        slot = j.address;
        if (j.watcher) watchers->push_back(j.watcher);
        if (--*left == 0) self->send(waiter, done_atom::value, *addresses);
        return hello_msg{remote_protocol_version, "driver", {}, {}, {}};
      },
      [=](joined_atom) { return *addresses; },
      [=](watchers_atom) { return *watchers; },
  };
}

}  // namespace

result<std::vector<std::string>> await_workers(caf::actor_system& sys, const host_port& at,
                                               int world_size, std::chrono::milliseconds limit,
                                               std::unique_ptr<frame_guard>& kept, caf::actor& kept_actor) {
  caf::scoped_actor self{sys};
  auto rv = sys.spawn(rendezvous_actor, world_size, caf::actor_cast<caf::actor>(self));
  // CAF on loopback, the network through a frame guard (as a worker's port; join messages are
  // small, so frames over 1 MiB are refused).
  auto port = sys.middleman().publish(rv, 0, "127.0.0.1", true);
  if (!port) {
    self->send_exit(rv, caf::exit_reason::user_shutdown);
    return make_error("cannot listen for workers on 127.0.0.1: " + sys.render(port.error()));
  }
  frame_guard::limits lim;
  lim.max_frame = 1u << 20;
  lim.max_held = 64u << 20;
  auto guard = frame_guard::start(at, *port, lim, nullptr);
  if (!guard) {
    self->send_exit(rv, caf::exit_reason::user_shutdown);
    return make_error("cannot listen for workers on " + to_string(at) + ": " + guard.message());
  }
  kept = std::move(*guard);
  std::optional<std::vector<std::string>> all;
  self->receive([&](done_atom, std::vector<std::string>& xs) { all = std::move(xs); },
                caf::after(limit) >> [] {});
  std::string missing;
  if (!all) {
    self->request(rv, std::chrono::seconds(5), joined_atom::value)
        .receive(
            [&](const std::vector<std::string>& xs) {
              for (std::size_t r = 0; r < xs.size(); ++r)
                if (xs[r].empty()) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
            },
            [&](caf::error&) { missing = "unknown"; });
  }
  sys.middleman().unpublish(rv, *port);
  if (!all) {
    const std::string why = "not every worker joined at " + to_string(at) + " within " +
                            std::to_string(limit.count()) + " ms: RANK " + missing + " of WORLD_SIZE " +
                            std::to_string(world_size) + " did not";
    // The workers that joined hear why and exit; each answers, so that the driver does not exit
    // (closing their connections) before they heard it (at most 5 s for one that does not).
    std::vector<caf::actor> watchers;
    self->request(rv, std::chrono::seconds(5), watchers_atom::value)
        .receive([&](std::vector<caf::actor>& ws) { watchers = std::move(ws); }, [](caf::error&) {});
    for (const caf::actor& w : watchers)
      self->request(w, std::chrono::seconds(5), rendezvous_failed{why})
          .receive([](bool) {}, [](caf::error&) {});
    self->send_exit(rv, caf::make_error(caf::sec::runtime_error, why));
    return make_error(why + "; start them with `pipeworks worker --driver " + to_string(at) +
                      "` (or MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)");
  }
  kept_actor = rv;
  return std::move(*all);
}

void end_rendezvous(caf::actor& kept, const std::string& why) {
  if (!kept) return;
  caf::error reason = why.empty() ? caf::error(caf::exit_reason::user_shutdown)
                                  : caf::make_error(caf::sec::runtime_error, why);
  kept->enqueue(nullptr, caf::make_message_id(),
                caf::make_message(caf::exit_msg{kept.address(), std::move(reason)}), nullptr);
  kept = nullptr;
}

}  // namespace pipeworks
