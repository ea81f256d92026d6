// The tracer actor's state: the events so far, the ranks that are done, and a pending request
// for the merged timeline.
#include "actors/tracer_actor.hpp"

#include <algorithm>
#include <memory>
#include <set>
#include <utility>
#include <variant>

#include "actors/type_ids.hpp"

namespace pipeworks {
namespace {

struct tracer_state {
  static inline const char* name = "pipeworks.tracer";

  explicit tracer_state(caf::event_based_actor* self) : self_(self) {}

  caf::behavior make_behavior(int ranks, int p, std::string title) {
    trace_ = std::make_shared<timeline>();
    trace_->title = std::move(title);
    trace_->ranks = ranks;
    trace_->devices_per_replica = p;
    return {
        [this](trace_batch& batch) {
          for (auto& e : batch.events) trace_->events.push_back(std::move(e));
        },
        [this](const trace_done& d) {
          done_.insert(d.rank);
          answer();
        },
        [this](collect_atom) {
          waiting_.push_back(self_->make_response_promise());
          answer();
        },
    };
  }

 private:
  void answer() {
    if (waiting_.empty() || static_cast<int>(done_.size()) < trace_->ranks) return;
    std::stable_sort(trace_->events.begin(), trace_->events.end(),
                     [](const timeline_event& a, const timeline_event& b) {
                       return a.start < b.start;
                     });
    for (auto& rp : waiting_) rp.deliver(*trace_);
    waiting_.clear();
  }

  caf::event_based_actor* self_;
  std::shared_ptr<timeline> trace_;
  std::set<int> done_;
  std::vector<caf::response_promise> waiting_;
};

caf::behavior tracer_actor(caf::stateful_actor<tracer_state>* self, int ranks, int p,
                           std::string title) {
  return self->state.make_behavior(ranks, p, std::move(title));
}

}  // namespace

caf::actor spawn_tracer(caf::actor_system& sys, int ranks, int p, std::string title) {
  return sys.spawn(tracer_actor, ranks, p, std::move(title));
}

}  // namespace pipeworks
