// A run's wire link in one process: messages to an actor of another process go as a small CAF
// message (wire_msg: the message's bytes without its tensors) while the tensors go beside it over
// UCX; the receiver gets the tensors, rebuilds the message and delivers it to itself, in the order
// sent. Without a link (one process, or --transport caf) a message is sent as CAF sends it.
#pragma once
#include <caf/all.hpp>
#include <caf/detail/pretty_type_name.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "runtime/transport/caf_inspect.hpp"
#include "runtime/transport/ucx_transport.hpp"

namespace pipeworks {

// The shape of one tensor that travels beside a message: enough to allocate it before it comes.
struct wire_ticket {
  std::uint8_t type = 0;
  shape_t shape;
};

// Sender → receiver over CAF: the message's bytes; its tensors follow with tags tag, tag + 1, ...
// `what` names the message for errors about its tensors (wire_what).
struct wire_msg {
  std::uint64_t tag = 0;
  std::vector<wire_ticket> tickets;
  std::vector<char> bytes;
  std::string what;
};

// What a message is, for people: its type and the fields that place it in the run, e.g.
// "activation_msg (microbatch 63, step 16, stage 1, replica 0)"; the step of a microbatch is
// known once the link knows the run's microbatches per step (m > 0).
template <class M>
std::string wire_what(const M& m, int microbatches) {
  std::string name = caf::detail::pretty_type_name(typeid(M));
  if (auto at = name.rfind("::"); at != std::string::npos) name = name.substr(at + 2);
  std::string fields;
  auto add = [&](const char* key, long long v) {
    fields += (fields.empty() ? "" : ", ") + std::string(key) + " " + std::to_string(v);
  };
  if constexpr (requires { m.microbatch; }) {
    add("microbatch", m.microbatch);
    if (microbatches > 0) add("step", m.microbatch / microbatches + 1);
  }
  if constexpr (requires { m.step; }) add("step", m.step);
  if constexpr (requires { m.stage; }) add("stage", m.stage);
  if constexpr (requires { m.replica; }) add("replica", m.replica);
  if constexpr (requires { m.rank; }) add("rank", m.rank);
  return fields.empty() ? name : name + " (" + fields + ")";
}

// What each process of a run must know of the others: by process (0 = the driver's).
struct wire_peers {
  std::vector<caf::node_id> nodes;
  std::vector<std::string> scopes;            // ucx_transport::scope() of each
  std::vector<ucx_address> local_addresses;   // its worker for peers of its scope
  std::vector<ucx_address> network_addresses; // its worker for all other peers (TCP)
  std::uint16_t nonce = 0;  // this run's: its tags differ from any earlier run's
  bool complete() const {
    return scopes.size() == nodes.size() && local_addresses.size() == nodes.size() &&
           network_addresses.size() == nodes.size();
  }
};

// This process's two UCX workers and its scope.
struct wire_endpoints {
  std::shared_ptr<ucx_transport> local, network;
  std::string scope;
};

// The process's endpoints, opened on first use; an error says why UCX cannot be used.
result<wire_endpoints> process_endpoints();

// The largest tensor a run may send beside a message: twice the model's parameters, at least
// 256 MiB, at most 2 GiB; a ticket claiming more is refused before anything is allocated.
inline std::uint64_t wire_bound(std::int64_t params, std::size_t element_bytes) {
  const std::uint64_t weights = 2 * static_cast<std::uint64_t>(params) * element_bytes;
  return std::min(transport::max_tensor_bytes, std::max(weights, std::uint64_t{1} << 28));
}

// The most tensors one message may carry beside it.
inline constexpr std::size_t max_wire_tickets = 4096;

class wire_link : public std::enable_shared_from_this<wire_link> {
 public:
  // `process` is this process's index in `peers`; `max_bytes` bounds one tensor it accepts. A
  // transfer that fails is reported to the driver after `grace`: a peer that died is named better
  // by CAF's down message, which comes first.
  wire_link(caf::actor_system& sys, wire_endpoints ucx, int process, wire_peers peers,
            std::uint64_t max_bytes, std::chrono::milliseconds grace);
  ~wire_link();

  // Where failures to receive are reported (the driver).
  void set_driver(caf::actor driver);
  // The run's microbatches per step, so that errors name the step of a microbatch.
  void set_microbatches(int m) { microbatches_ = m; }

  // Sends `msg` to `to`: over the wire when `to` lives in another process of the run, else as
  // CAF sends it.
  template <class M>
  void send(caf::event_based_actor* self, const caf::actor& to, M&& msg) {
    if (!to || to.node() == self->node()) {
      self->send(to, std::forward<M>(msg));
      return;
    }
    std::string what = wire_what(msg, microbatches_.load());
    send_message(self, to, caf::make_message(std::forward<M>(msg)), std::move(what));
  }

  // The receiving end: fetches the tensors of `w` (sent to `self`, which `who` names for errors:
  // "rank 1 (replica 0, stage 1)") and delivers the message to `self` once they and every message
  // before it from the wire have arrived. A tensor that does not come is reported naming this
  // process, `who`, the message (its kind, microbatch, step) and the process that sent it.
  void accept(caf::local_actor* self, wire_msg w, const std::string& who = "");

  int process() const { return process_; }

  // What this process sent over the wire so far: tensors and their bytes over UCX, messages and
  // their bytes over CAF, and the largest of those messages.
  struct totals {
    std::uint64_t tensors = 0, tensor_bytes = 0, messages = 0, message_bytes = 0, largest_message = 0;
  };
  totals sent() const;
  // "12 tensors (3.1 MB) over UCX beside 40 CAF messages (5.2 kB, the largest 310 B)".
  std::string sent_text() const;

 private:
  struct inbox;
  struct entry;
  void send_message(caf::event_based_actor* self, const caf::actor& to, caf::message msg, std::string what);
  void complete(const std::shared_ptr<inbox>& in, const std::shared_ptr<entry>& e,
                const std::string& error);
  void deliver_ready(const std::shared_ptr<inbox>& in);
  void report(const std::string& why, bool after_grace);
  // The worker and address that reach process k (the local ones when it shares our scope).
  ucx_transport* transport_for(std::size_t k) const;
  const ucx_address& address_of(std::size_t k) const;

  caf::actor_system& sys_;
  wire_endpoints ucx_;
  int process_;
  wire_peers peers_;
  std::uint64_t max_bytes_;
  std::chrono::milliseconds grace_;
  std::atomic<std::uint64_t> next_seq_{0};
  std::atomic<int> microbatches_{0};
  std::atomic<std::uint64_t> tensors_{0}, tensor_bytes_{0}, messages_{0}, message_bytes_{0},
      largest_{0};
  std::mutex mu_;
  std::map<caf::actor_id, std::shared_ptr<inbox>> inboxes_;
  caf::actor_addr driver_;  // weak: the driver holds this link
};

// Sends through `link`, or as CAF sends it when there is none.
template <class M>
void wire_send(const std::shared_ptr<wire_link>& link, caf::event_based_actor* self, const caf::actor& to,
               M&& msg) {
  if (link) link->send(self, to, std::forward<M>(msg));
  else self->send(to, std::forward<M>(msg));
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wire_ticket& x) {
  return f(caf::meta::type_name("pipeworks.wire_ticket"), x.type, x.shape);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wire_msg& x) {
  if constexpr (!transport::serial<Inspector>) {
    return f(caf::meta::type_name("pipeworks.wire_msg"), x.tag, x.tickets, x.what);
  } else {
    if (auto err = f(caf::meta::type_name("pipeworks.wire_msg"), x.tag)) return err;
    std::uint32_t n = static_cast<std::uint32_t>(x.tickets.size());
    if (auto err = f(n)) return err;
    if constexpr (transport::loads<Inspector>) {
      if (n > max_wire_tickets)
        return transport::bad("a message with " + std::to_string(n) + " tensors beside it");
      x.tickets.assign(n, {});
    }
    for (auto& t : x.tickets)
      if (auto err = f(t)) return err;
    size_t bytes = x.bytes.size();
    if (auto err = f.begin_sequence(bytes)) return err;
    if constexpr (transport::loads<Inspector>) {
      if (!transport::holds(f, bytes)) return transport::bad("a message whose bytes did not all arrive");
      x.bytes.resize(bytes);
    }
    if (bytes > 0)
      if (auto err = f.apply_raw(bytes, x.bytes.data())) return err;
    if (auto err = f.end_sequence()) return err;
    if constexpr (transport::loads<Inspector>) {
      if (!transport::holds(f, 4)) return transport::bad("a message whose bytes did not all arrive");
    }
    if (auto err = f(x.what)) return err;
    if constexpr (transport::loads<Inspector>) {
      if (x.what.size() > 4096) x.what.resize(4096);  // for errors only: a peer cannot grow them
    }
    return caf::none;
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wire_peers& x) {
  return f(caf::meta::type_name("pipeworks.wire_peers"), x.nodes, x.scopes, x.local_addresses,
           x.network_addresses, x.nonce);
}

}  // namespace pipeworks
