// The messages between a driver and its worker processes (the handshake, the ranks a worker
// hosts, the end of a run), each with an `inspect`; their type IDs are in actors/type_ids.hpp.
// A worker and a driver of different protocol versions refuse each other, naming the field.
#pragma once
#include <caf/all.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "actors/wire.hpp"
#include "runtime/checkpoint/manifest.hpp"
#include "runtime/exec/fault.hpp"

namespace pipeworks {

// Bumped whenever a message between processes changes.
inline constexpr std::uint32_t remote_protocol_version = 7;

// Driver → worker, then worker → driver: the first exchange on a connection.
struct hello_msg {
  std::uint32_t protocol = remote_protocol_version;
  std::string role;  // "driver" or "worker"
  // The worker's UCX workers (shared memory, TCP) and its scope; empty where it has no UCX.
  ucx_address ucx, ucx_network;
  std::string scope;
  // The worker's: the largest CAF frame it accepts from the network (its --max-frame-mb, in
  // bytes; 0: no bound). The driver checks what it sends against it.
  std::uint64_t max_frame = 0;
};

// Worker → driver's rendezvous (a launcher started both: torchrun, srun): I am worker `rank` of
// `world_size`, listening at `address`. Answered with a hello_msg, or an error naming the field.
struct join_msg {
  std::uint32_t protocol = remote_protocol_version;
  int rank = 0;
  int world_size = 0;
  std::string address;  // "host:port"
  // The worker's actor that watches the rendezvous: told when the driver gives up on it.
  caf::actor watcher;
};

// Driver's rendezvous → each joined worker's watcher, when not every worker joined: it gave up,
// and why. Answered (true) so that the driver knows it was heard before it exits.
struct rendezvous_failed {
  std::string why;
};

// Driver → worker: host these ranks of this plan. The worker answers with a host_reply or an error
// naming the field that does not match.
struct host_request {
  std::uint32_t protocol = remote_protocol_version;
  std::string dtype;   // "float32" or "float64": the model's element type
  std::string plan;    // the resolved plan, JSON
  int process = 0;     // which process of the plan the worker is
  std::vector<int> ranks;  // the ranks the plan places there, in order
  caf::actor driver;
  // A new run: per hosted rank, the initial weights of its virtual stages, in stage order.
  std::vector<std::vector<param_snapshot>> initial;
  // A resumed run: the step directory (absolute) and each hosted rank's file in it.
  std::string resume_dir;
  std::vector<checkpoint_file> resume;
  fault_injection fault;  // tests only
  bool record_trace = false;
  // "ucx": tensors go beside the messages, over UCX, to the processes in `peers`; "caf": inside.
  std::string transport = "caf";
  wire_peers peers;
};

// Worker → driver: the plan as the worker read it (JSON, written back) and its ranks' actors.
struct host_reply {
  std::string plan;
  std::vector<caf::actor> ranks;
  // With w > 1: the all-reduce shares it started for its ranks, at these rank_wiring slots.
  std::vector<caf::actor> shards;
  std::vector<int> shard_slots;
};

// Driver → worker: the run is over (ok, or why not); the worker's ranks have been stopped.
struct run_ended {
  bool ok = true;
  std::string error;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, hello_msg& x) {
  return f(caf::meta::type_name("pipeworks.hello"), x.protocol, x.role, x.ucx, x.ucx_network,
           x.scope, x.max_frame);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_msg& x) {
  return f(caf::meta::type_name("pipeworks.join"), x.protocol, x.rank, x.world_size, x.address,
           x.watcher);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rendezvous_failed& x) {
  return f(caf::meta::type_name("pipeworks.rendezvous_failed"), x.why);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_file& x) {
  return f(caf::meta::type_name("pipeworks.checkpoint_file"), x.rank, x.path, x.bytes, x.sha256,
           x.host, x.dir);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fault_injection& x) {
  std::uint8_t kind = static_cast<std::uint8_t>(x.kind);
  if constexpr (!transport::serial<Inspector>) {
    return f(caf::meta::type_name("pipeworks.fault"), kind, x.replica, x.at);
  } else {
    if (auto err = f(caf::meta::type_name("pipeworks.fault"), kind, x.replica, x.at)) return err;
    if constexpr (transport::loads<Inspector>) {
      if (kind > static_cast<std::uint8_t>(fault_kind::kill)) return transport::bad("an unknown fault kind");
      x.kind = static_cast<fault_kind>(kind);
    }
    return caf::none;
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, host_request& x) {
  if constexpr (!transport::serial<Inspector>) {
    return f(caf::meta::type_name("pipeworks.host_request"), x.protocol, x.dtype, x.process,
             x.ranks);
  } else {
    if (auto err = f(caf::meta::type_name("pipeworks.host_request"), x.protocol, x.dtype, x.plan,
                     x.process, x.ranks, x.driver, x.resume_dir, x.resume, x.fault,
                     x.record_trace, x.transport, x.peers))
      return err;
    std::uint32_t n = static_cast<std::uint32_t>(x.initial.size());
    if (auto err = f(n)) return err;
    if constexpr (transport::loads<Inspector>) {
      if (n > x.ranks.size()) return transport::bad("initial weights for more ranks than it hosts");
      x.initial.assign(n, {});
    }
    for (auto& list : x.initial)
      if (auto err = transport::inspect_param_list(f, list)) return err;
    return caf::none;
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, host_reply& x) {
  return f(caf::meta::type_name("pipeworks.host_reply"), x.plan, x.ranks, x.shards, x.shard_slots);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_ended& x) {
  return f(caf::meta::type_name("pipeworks.run_ended"), x.ok, x.error);
}

using host_atom = caf::atom_constant<caf::atom("host")>;

}  // namespace pipeworks
