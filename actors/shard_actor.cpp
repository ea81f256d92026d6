// The shard actor: the local rank's reduce_request starts a step's share, pieces and sums from
// the other shares advance it; what it must send before it is wired waits. Errors go to the
// driver, and the shard quits with its driver.
#include "actors/shard_actor.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/type_ids.hpp"
#include "runtime/exec/chain_reducer.hpp"
#include "runtime/exec/chunk_reducer.hpp"
#include "runtime/exec/owner_reducer.hpp"

namespace pipeworks {
namespace {

struct shard_state {
  static inline const char* name = "pipeworks.shard";

  explicit shard_state(caf::event_based_actor* self) : self_(self) {}

  caf::behavior make_behavior(int stage, int replica, int replicas, int zero, reduce_mode reduce,
                              caf::actor driver, std::shared_ptr<wire_link> link) {
    stage_ = stage;
    zero_ = zero;
    who_ = "the all-reduce share of stage " + std::to_string(stage) + ", replica " + std::to_string(replica);
    driver_ = std::move(driver);
    link_ = std::move(link);
    share_.emplace(stage, replica, replicas);
    owners_.emplace(stage, replica, replicas);
    if (reduce == reduce_mode::p2p) chain_.emplace(stage, replica, replicas);
    self_->monitor(driver_);
    self_->set_down_handler([this](caf::down_msg& dm) {
      if (dm.source == driver_.address()) self_->quit(dm.reason);
    });
    return {
        [this](shard_wiring& w) {
          peers_ = std::move(w.shards);
          for (auto& out : waiting_) send(std::move(out));
          waiting_.clear();
        },
        [this](reduce_request& r) {
          rank_ = caf::actor_cast<caf::actor>(self_->current_sender());
          if (chain_) return handle(chain_->add_local(std::move(r)));
          const bool by_owner = r.kind == reduce_kind::weights || zero_ >= 2;
          handle(by_owner ? owners_->add_local(std::move(r)) : share_->add_local(std::move(r)));
        },
        [this](reduce_chunk& c) {
          if (!same_reduce(c.kind == chunk_kind::chain_partial)) return;
          handle(chain_ ? chain_->add_piece(std::move(c))
                 : c.kind == chunk_kind::all_reduce ? share_->add_piece(std::move(c))
                                                    : owners_->add_piece(std::move(c)));
        },
        [this](gather_chunk& c) {
          if (!same_reduce(c.kind == chunk_kind::chain_version)) return;
          handle(chain_ ? chain_->add_sum(std::move(c))
                 : c.kind == chunk_kind::all_reduce ? share_->add_sum(std::move(c))
                                                    : owners_->add_gathered(std::move(c)));
        },
        [this](wire_msg& w) {
          if (link_) link_->accept(self_, std::move(w), who_);
        },
    };
  }

 private:
  // A message of the p2p reduce where the run reduces collectively, or the reverse, is refused.
  bool same_reduce(bool p2p_message) {
    if (p2p_message == chain_.has_value()) return true;
    fail(std::string("a message of the ") + (p2p_message ? "p2p" : "collective") +
         " reduce, but this run reduces " + (chain_ ? "point to point" : "collectively"));
    return false;
  }

  void handle(result<chunk_reducer::outputs> out) {
    if (!out) return fail(out.message());
    if (peers_.empty()) waiting_.push_back(std::move(*out));
    else send(std::move(*out));
  }

  void send(chunk_reducer::outputs out) {
    for (auto& [r, piece] : out.pieces)
      if (auto* to = peer(r)) wire_send(link_, self_, *to, std::move(piece));
    for (auto& [r, sum] : out.sums)
      if (auto* to = peer(r)) wire_send(link_, self_, *to, std::move(sum));
    if (out.result) {
      if (!rank_) return fail("a sum is ready, but no rank has asked for it");
      self_->send(rank_, std::move(*out.result));
    }
  }

  const caf::actor* peer(int r) {
    if (r < 0 || static_cast<std::size_t>(r) >= peers_.size() || !peers_[static_cast<std::size_t>(r)]) {
      fail("no share of replica " + std::to_string(r));
      return nullptr;
    }
    return &peers_[static_cast<std::size_t>(r)];
  }

  void fail(const std::string& why) {
    self_->send(driver_, stage_failure{"the all-reduce of stage " + std::to_string(stage_) + ": " + why});
    self_->quit(caf::sec::runtime_error);
  }

  caf::event_based_actor* self_;
  std::optional<chunk_reducer> share_;
  std::optional<owner_reducer> owners_;  // ZeRO
  std::optional<chain_reducer> chain_;   // the p2p reduce
  int zero_ = 0;
  std::vector<caf::actor> peers_;
  std::vector<chunk_reducer::outputs> waiting_;  // until wired
  caf::actor driver_, rank_;
  std::shared_ptr<wire_link> link_;
  int stage_ = 0;
  std::string who_;
};

caf::behavior shard_actor(caf::stateful_actor<shard_state>* self, int stage, int replica,
                          int replicas, int zero, reduce_mode reduce, caf::actor driver,
                          std::shared_ptr<wire_link> link) {
  return self->state.make_behavior(stage, replica, replicas, zero, reduce, std::move(driver),
                                   std::move(link));
}

}  // namespace

caf::actor spawn_shard(caf::actor_system& sys, int stage, int replica, int replicas,
                       caf::actor driver, std::shared_ptr<wire_link> link, int zero,
                       reduce_mode reduce) {
  return sys.spawn(shard_actor, stage, replica, replicas, zero, reduce, std::move(driver),
                   std::move(link));
}

}  // namespace pipeworks
