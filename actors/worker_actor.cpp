// The worker actor's handshake and hosting: a host_request is checked field by field (protocol,
// dtype, plan, process, ranks, weights), the model is built from the plan's spec, and each rank
// is spawned as the driver's process would spawn it (make_stage_spec); the reply carries the plan
// as read back, so the driver can tell a worker that reads it differently.
#include "actors/worker_actor.hpp"
#include "base/exception_text.hpp"

#include <chrono>
#include <exception>
#include <filesystem>
#include <utility>
#include <vector>

#include "actors/shard_actor.hpp"
#include "actors/stage_actor.hpp"
#include "actors/type_ids.hpp"
#include "runtime/checkpoint/checkpoint_dir.hpp"
#include "runtime/exec/rank_setup.hpp"

namespace pipeworks {
namespace {

caf::error refuse(const std::string& field, const std::string& why) {
  return caf::make_error(caf::sec::runtime_error, "the worker refused the run: " + field + " " + why);
}

// What the worker keeps of the run it hosts.
struct hosted_run {
  caf::actor driver;
  int process = 0;                  // its process in the run's plan
  std::vector<caf::actor> shards;   // the all-reduce shares of its ranks (w > 1)
  std::shared_ptr<wire_link> link;  // when tensors go over UCX
  std::vector<caf::actor> ranks;  // each holds the model it runs (stage_spec::keep)
  std::string checkpoint_dir;     // this run's part of the worker's own checkpoint directory
  std::shared_ptr<throttle_sleeps> sleeps;  // its throttled ranks', cut when the run ends
};

template <class T>
caf::result<host_reply> host(caf::actor_system& sys, host_request& q, const std::string& own_dir,
                             hosted_run& out) {
  // The plan comes from another process: read and checked here, as input from elsewhere must be,
  // then lowered once (the driver's lowered schedule would be larger to send and would need the
  // same checks); the ranks are handed that one lowering.
  auto run = read_lowered_run(q.plan, "the driver's plan");
  if (!run) return refuse("plan:", run.message());
  auto net = std::make_shared<const model<T>>(build_model<T>(run->plan.model));
  const auto workers = static_cast<int>(run->plan.processes.workers.size());
  if (q.process < 1 || q.process > workers)
    return refuse("process", "is " + std::to_string(q.process) + ", but the plan has workers 1.." +
                                 std::to_string(workers));
  if (q.ranks != ranks_in_process(run->plan, q.process))
    return refuse("ranks", "are not the ones the plan places in process " + std::to_string(q.process));
  const bool resuming = !q.resume_dir.empty();
  if (resuming ? q.resume.size() != q.ranks.size() : q.initial.size() != q.ranks.size())
    return refuse(resuming ? "resume" : "initial", "does not give one entry per hosted rank");
  // With a checkpoint directory of its own, the ranks write there (local to this host), under the
  // run's name so that no other run's files are touched.
  std::string checkpoint_dir;
  if (!own_dir.empty() && run->plan.checkpoint.every > 0) {
    const std::string& name = run->plan.checkpoint.run;
    if (name.empty())
      return refuse("plan:", "checkpoint.run is missing: the driver gives a run with workers a "
                             "name for their own checkpoint directories; run the same pipeworks "
                             "version on every host");
    checkpoint_dir = (std::filesystem::path(own_dir) / ("run-" + name)).string();
    std::error_code ec;
    std::filesystem::create_directories(checkpoint_dir, ec);
    if (ec)
      return refuse("checkpoint directory", "cannot be made: " + checkpoint_dir + ": " +
                                                ec.message() + " (the worker's --checkpoint-dir)");
  }
  out.checkpoint_dir = checkpoint_dir;
  std::shared_ptr<wire_link> link;
  if (q.transport == "ucx") {
    auto eps = process_endpoints();
    if (!eps) return refuse("transport", "is ucx, but " + eps.message());
    if (q.peers.nodes.size() != static_cast<std::size_t>(workers) + 1 || !q.peers.complete())
      return refuse("peers", "do not name every process of the plan");
    const auto me = static_cast<std::size_t>(q.process);
    if (q.peers.local_addresses[me] != eps->local->address() ||
        q.peers.network_addresses[me] != eps->network->address() || q.peers.scopes[me] != eps->scope)
      return refuse("peers", "give process " + std::to_string(q.process) +
                                 " UCX addresses that are not this worker's");
    link = std::make_shared<wire_link>(sys, *eps, q.process, q.peers,
                                       wire_bound(net->param_count(), sizeof(T)),
                                       std::chrono::milliseconds(run->plan.processes.timeout_ms));
    link->set_driver(q.driver);
    link->set_microbatches(run->plan.train.microbatches);
  } else if (q.transport != "caf") {
    return refuse("transport", "is \"" + q.transport + "\"; known: ucx, caf");
  }
  host_reply reply;
  reply.plan = to_json_text(run->plan);
  const auto start = std::chrono::steady_clock::now();
  pipeline_hooks hooks;
  hooks.fault = q.fault;
  hooks.record_trace = q.record_trace;
  hooks.sleeps = out.sleeps = std::make_shared<throttle_sleeps>();
  for (std::size_t i = 0; i < q.ranks.size(); ++i) {
    const int r = q.ranks[i];
    auto st = make_stage_spec<T>(*run, r, net.get(), start, hooks, std::make_shared<rank_board>(),
                                 q.driver);
    st->keep = net;
    st->link = link;
    if (!checkpoint_dir.empty()) {
      st->checkpoint_dir = checkpoint_dir;
      st->own_checkpoint_dir = true;
    }
    if (resuming) {
      st->resume_dir = q.resume_dir;
      st->resume = q.resume[i];
    } else {
      std::size_t want = 0;
      for (int d : run->programs->device_of) want += d == st->setup.device ? 1 : 0;
      if (q.initial[i].size() != want)
        return refuse("initial", "gives rank " + std::to_string(r) + " " +
                                     std::to_string(q.initial[i].size()) +
                                     " weight sets, not one for each of its " +
                                     std::to_string(want) + " stages");
      for (const param_snapshot& p : q.initial[i]) {
        if (!p) return refuse("initial", "has no weights for rank " + std::to_string(r));
        st->initial.push_back(p->clone());
      }
    }
    // Pooled, whatever the plan says: CAF 0.17.6 can leave a detached actor that a remote node
    // referenced undestroyed, and the process then never ends (actors/driver.cpp).
    const int device = st->setup.device;
    reply.ranks.push_back(spawn_stage<T>(sys, false, std::move(st)));
    // With w > 1 the rank's share of each of its stages' all-reduce lives here beside it.
    const run_plan& p = run->plan;
    // (With dualpipe's routes one per member r * w + q of the reduce and piece of the model.)
    if (p.replicas > 1) {
      const schedule& programs = *run->programs;
      const int V = p.virtual_stages(), replica = r / p.stages;
      for (int s = 0; s < V; ++s)
        if (programs.device_of[static_cast<std::size_t>(s)] == device) {
          const int member = programs.member(s, replica);
          const int piece = programs.piece_of(s);
          reply.shards.push_back(spawn_shard(sys, piece, member, programs.reduce_group_size(),
                                             q.driver, link, p.zero, p.reduce));
          reply.shard_slots.push_back(member * V + piece);
        }
    }
  }
  out.shards = reply.shards;
  out.ranks = reply.ranks;
  out.link = link;
  return reply;
}

class worker_state {
 public:
  static inline const char* name = "pipeworks.worker";

  explicit worker_state(caf::event_based_actor* self) : self_(self) {}
  std::uint64_t unexpected_ = 0;  // messages of no kind it takes

  caf::behavior make_behavior(std::shared_ptr<worker_spec> spec) {
    spec_ = std::move(spec);
    self_->set_down_handler([this](caf::down_msg& dm) {
      if (run_.driver && dm.source == run_.driver.address())
        end_run(false, "its driver was lost (" + self_->system().render(dm.reason) + ")");
    });
    // A message of no kind the worker takes (a hostile or confused peer): one line in its log,
    // not CAF's "*** unexpected message" dump on stderr for each; then every 1000th.
    self_->set_default_handler([this](caf::scheduled_actor*, caf::message_view&) -> caf::result<caf::message> {
      if (unexpected_++ % 1000 == 0)
        log("refused a message of a kind a worker does not take (" + std::to_string(unexpected_) +
            " so far)");
      return caf::sec::unexpected_message;
    });
    return {
        [this](const hello_msg& h) -> caf::result<hello_msg> {
          if (h.protocol != remote_protocol_version)
            return refuse("protocol", "is version " + std::to_string(h.protocol) +
                                          " at the driver and " +
                                          std::to_string(remote_protocol_version) +
                                          " here; run the same pipeworks version on every host");
          hello_msg reply{remote_protocol_version, "worker", {}, {}, {}};
          reply.max_frame = spec_->max_frame;
          if (auto eps = process_endpoints()) {
            reply.ucx = eps->local->address();
            reply.ucx_network = eps->network->address();
            reply.scope = eps->scope;
          } else {
            log("no UCX here (" + eps.message() + "): only --transport caf runs can use this worker");
          }
          return reply;
        },
        [this](host_request& q) -> caf::result<host_reply> { return start(q); },
        [this](const checkpoints_kept& k) {
          if (!run_.driver || self_->current_sender() != run_.driver.address() ||
              run_.checkpoint_dir.empty())
            return;
          if (status s = prune_kept_steps(run_.checkpoint_dir, k.steps); !s)
            log("removing old checkpoint files: " + s.message());
        },
        [this](frame_refused_atom, const std::string& what, std::uint64_t to) {
          // Only its own process's guard says so (a peer cannot send as this actor).
          if (self_->current_sender() != self_->address()) return;
          if (!run_.driver) {  // nobody to tell (its guard logged it): the peer sees it closed
            if (spec_->drop_refused) spec_->drop_refused();
            return;
          }
          if (!for_run(to)) {
            log("the refused frame was for no actor of the run it hosts (actor " + std::to_string(to) +
                "): the run goes on");
            return;
          }
          self_->send(run_.driver, stage_failure{"worker " + std::to_string(run_.process) + " " + what +
                                                 "; nothing after that frame reached it, so the "
                                                 "run stops"});
        },
        [this](const run_ended& e) {
          if (run_.driver && self_->current_sender() == run_.driver.address()) end_run(e.ok, e.error);
        },
    };
  }

 private:
  caf::result<host_reply> start(host_request& q) {
    if (q.protocol != remote_protocol_version)
      return refuse("protocol", "is version " + std::to_string(q.protocol) + ", not " +
                                    std::to_string(remote_protocol_version));
    if (run_.driver)
      return refuse("ranks", "cannot be hosted: this worker is running another driver's ranks");
    if (!q.driver) return refuse("driver", "is missing");
    hosted_run next;
    next.driver = q.driver;
    next.process = q.process;
    caf::result<host_reply> r = caf::error{};
    try {
      if (q.dtype == "float32") r = host<float>(self_->system(), q, spec_->checkpoint_dir, next);
      else if (q.dtype == "float64") r = host<double>(self_->system(), q, spec_->checkpoint_dir, next);
      else return refuse("dtype", "is \"" + q.dtype + "\"; known: float32, float64");
    } catch (const std::exception& e) {
      return refuse("plan:", "building its model failed: " + exception_text(e));
    }
    if (next.ranks.empty()) return r;
    run_ = std::move(next);
    self_->monitor(run_.driver);
    log(run_.link ? "hosting ranks of a run for its driver (tensors over UCX)"
                  : "hosting ranks of a run for its driver (tensors inside CAF messages)");
    if (!run_.checkpoint_dir.empty()) log("its ranks write their checkpoint files into " + run_.checkpoint_dir);
    if (spec_->on_run_start) spec_->on_run_start();
    return r;
  }

  void end_run(bool ok, const std::string& why) {
    if (!run_.driver) return;
    if (run_.sleeps) run_.sleeps->cut();  // a rank asleep in its stretch would hold the end
    self_->demonitor(run_.driver);
    for (auto& r : run_.ranks) self_->send_exit(r, caf::exit_reason::user_shutdown);
    for (auto& r : run_.shards) self_->send_exit(r, caf::exit_reason::user_shutdown);
    const std::string sent = run_.link ? "; sent " + run_.link->sent_text() : "";
    const bool used_ucx = run_.link != nullptr;
    run_ = hosted_run{};
    // A run that failed may have lost a peer in the middle of writing into this process's UCX
    // shared-memory queue, which would then never be read past that slot (issue 31, item 5): the
    // next run gets new UCX workers. Only this worker's runs use them.
    if (!ok && used_ucx) ucx_transport::retire_process_transports();
    log((ok ? "the run ended" : "the run failed: " + why) + sent);
    if (!ok && used_ucx)
      log("the next run gets new UCX workers: a peer lost while it wrote into this worker's "
          "shared memory would leave it unread");
    if (spec_->drop_refused) spec_->drop_refused();
    if (spec_->on_run_end) spec_->on_run_end(ok, why);
  }

  // Whether the actor with this id is the worker or one of its run's ranks and shares.
  bool for_run(std::uint64_t id) const {
    if (id == self_->id()) return true;
    for (const auto* list : {&run_.ranks, &run_.shards})
      for (const caf::actor& a : *list)
        if (a && a.id() == id) return true;
    return false;
  }

  void log(const std::string& line) {
    if (spec_->log) spec_->log(line);
  }

  caf::event_based_actor* self_;
  std::shared_ptr<worker_spec> spec_;
  hosted_run run_;
};

caf::behavior worker_actor(caf::stateful_actor<worker_state>* self, std::shared_ptr<worker_spec> spec) {
  return self->state.make_behavior(std::move(spec));
}

}  // namespace

caf::actor spawn_worker(caf::actor_system& sys, std::shared_ptr<worker_spec> spec) {
  return sys.spawn(worker_actor, std::move(spec));
}

}  // namespace pipeworks
