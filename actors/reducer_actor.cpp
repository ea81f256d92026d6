// The reducer actor: collects reduce_requests, remembers which rank sent each replica's part,
// and sends each replica its reduce_result; errors go to the driver.
#include "actors/reducer_actor.hpp"

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "actors/type_ids.hpp"
#include "runtime/exec/reducer.hpp"

namespace pipeworks {
namespace {

struct reducer_state {
  static inline const char* name = "pipeworks.reducer";

  explicit reducer_state(caf::event_based_actor* self) : self_(self) {}

  caf::behavior make_behavior(int stage, int replicas, reduce_mode mode, caf::actor driver,
                              std::shared_ptr<wire_link> link, std::optional<device> gpu) {
    stage_ = stage;
    link_ = std::move(link);
    driver_ = std::move(driver);
    reducer_.emplace(stage, replicas, mode, std::move(gpu));
    reply_to_.resize(static_cast<std::size_t>(replicas));
    self_->monitor(driver_);
    self_->set_down_handler([this](caf::down_msg& dm) {
      if (dm.source == driver_.address()) self_->quit(dm.reason);
    });
    return {
        [this](reduce_request& r) { receive(std::move(r)); },
        [this](wire_msg& w) {
          if (link_) link_->accept(self_, std::move(w));
        },
    };
  }

 private:
  void receive(reduce_request req) {
    const auto r = static_cast<std::size_t>(req.replica);
    if (r < reply_to_.size()) reply_to_[r] = caf::actor_cast<caf::actor>(self_->current_sender());
    auto sums = reducer_->add(std::move(req));
    if (!sums) return fail(sums.message());
    if (!*sums) return;
    for (std::size_t i = 0; i < (*sums)->size(); ++i) {
      if (!(**sums)[i].sum) continue;  // the p2p reduce answers some replicas only
      if (!reply_to_[i]) return fail("no rank known for replica " + std::to_string(i));
      wire_send(link_, self_, reply_to_[i], std::move((**sums)[i]));
    }
  }

  void fail(const std::string& why) {
    self_->send(driver_, stage_failure{"the reducer of stage " + std::to_string(stage_) + ": " + why});
    self_->quit(caf::sec::runtime_error);
  }

  caf::event_based_actor* self_;
  std::optional<gradient_reducer> reducer_;
  std::vector<caf::actor> reply_to_;
  caf::actor driver_;
  std::shared_ptr<wire_link> link_;
  int stage_ = 0;
};

caf::behavior reducer_actor(caf::stateful_actor<reducer_state>* self, int stage, int replicas,
                            reduce_mode mode, caf::actor driver, std::shared_ptr<wire_link> link,
                            std::optional<device> gpu) {
  return self->state.make_behavior(stage, replicas, mode, std::move(driver), std::move(link),
                                   std::move(gpu));
}

}  // namespace

caf::actor spawn_reducer(caf::actor_system& sys, bool detached, int stage, int replicas,
                         reduce_mode mode, caf::actor driver, std::shared_ptr<wire_link> link,
                         std::optional<device> gpu) {
  if (detached)
    return sys.spawn<caf::detached>(reducer_actor, stage, replicas, mode, std::move(driver),
                                    std::move(link), std::move(gpu));
  return sys.spawn(reducer_actor, stage, replicas, mode, std::move(driver), std::move(link),
                   std::move(gpu));
}

}  // namespace pipeworks
