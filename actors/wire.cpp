// The wire link: a message for another process is serialised here with its tensors set aside,
// which go over UCX with tags [8 bits sender process | 16 bits run nonce | 40 bits sequence];
// the receiver takes each tensor in as it comes (at most the run's bound each, within a budget),
// claims it by tag when its message comes with its ticket (the tensor's type and shape), and
// delivers messages to itself in arrival order once their tensors are in.
#include "actors/wire.hpp"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <thread>

#include "actors/messages.hpp"
#include "actors/type_ids.hpp"
#include "base/cpu_count.hpp"

namespace pipeworks {

namespace {

constexpr std::uint64_t nonce_shift = 40;
constexpr std::uint64_t nonce_mask = std::uint64_t{0xFFFF} << nonce_shift;
constexpr std::uint64_t seq_mask = (std::uint64_t{1} << nonce_shift) - 1;
constexpr std::size_t max_waiting_messages = 1 << 16;  // per receiving actor
constexpr std::size_t early_budget = std::size_t{64} << 20;  // tensors received before their message

// The transports in UCX's description of an endpoint ("posix/memory", "tcp/eth0"), its lanes in
// order, each once.
std::string transports(const std::string& endpoint_info) {
  std::string out;
  for (auto at = endpoint_info.find("lane["); at != std::string::npos;
       at = endpoint_info.find("lane[", at + 1)) {
    const auto colon = endpoint_info.find(':', at);
    const auto start = endpoint_info.find(':', colon + 1);  // "lane[0]:  4:posix/memory.0 ..."
    if (colon == std::string::npos || start == std::string::npos) break;
    const auto end = endpoint_info.find_first_of(" \n", start);
    std::string name = endpoint_info.substr(start + 1, end - start - 1);
    if (auto dot = name.rfind('.'); dot != std::string::npos) name.resize(dot);  // "memory.0"
    if (out.find(name) == std::string::npos) out += (out.empty() ? "" : ",") + name;
  }
  return out;
}

}  // namespace

// One message on its way in: its tensors as they arrive.
struct wire_link::entry {
  caf::actor_addr sender;  // weak: a receive cancelled late must not hold an actor
  std::string who;         // the receiving actor, for errors
  std::size_t from = 0;    // the sending process
  wire_msg msg;
  std::vector<tensor_payload> payloads;
  std::size_t left = 0;
  std::string error;
  bool transfer_failed = false;  // UCX failed (a peer lost?), rather than the message was bad
};

// One receiving actor's messages in arrival order.
struct wire_link::inbox {
  caf::actor_addr owner;
  std::mutex mu;
  std::deque<std::shared_ptr<entry>> queue;
};

result<wire_endpoints> process_endpoints() {
  auto local = ucx_transport::process(ucx_reach::local);
  if (!local) return local.err();
  auto network = ucx_transport::process(ucx_reach::network);
  if (!network) return network.err();
  return wire_endpoints{*local, *network, ucx_transport::scope()};
}

wire_link::wire_link(caf::actor_system& sys, wire_endpoints ucx, int process,
                     wire_peers peers, std::uint64_t max_bytes, std::chrono::milliseconds grace)
    : sys_(sys), ucx_(std::move(ucx)), process_(process), peers_(std::move(peers)),
      max_bytes_(max_bytes), grace_(grace) {
  // This run's tensors are received as they come, before the messages that announce them: a
  // transfer never waits for CAF. What one ticket may claim bounds each; the budget bounds them all.
  auto into = [max = max_bytes_](std::size_t n) -> ucx_transport::early_buffer {
    if (n == 0 || n % 4 != 0 || n > max) return {};  // every dtype is 4 or 8 bytes
    auto made = tensor_payload::allocate(dtype::f32, {static_cast<std::int64_t>(n / 4)});
    if (!made) return {};
    auto token = std::make_shared<tensor_payload>(std::move(*made));
    return {token->writable_bytes().data(), token};
  };
  // The run's processes on this host (of this scope) against its cores.
  const auto me = static_cast<std::size_t>(process_);
  const auto here = me < peers_.scopes.size()
                        ? std::count(peers_.scopes.begin(), peers_.scopes.end(), peers_.scopes[me])
                        : 1;
  const bool crowded = here > static_cast<std::ptrdiff_t>(usable_cores());
  for (auto* t : {ucx_.local.get(), ucx_.network.get()})
    if (t) t->set_crowded(crowded);
  for (auto* t : {ucx_.local.get(), ucx_.network.get()})
    if (t) t->prefetch(nonce_mask, std::uint64_t{peers_.nonce} << nonce_shift, early_budget, grace_, into);
}

wire_link::~wire_link() {
  // Whatever this run's receives still wait for, no peer will send now.
  for (auto* t : {ucx_.local.get(), ucx_.network.get()})
    if (t) t->stop_prefetch(nonce_mask, std::uint64_t{peers_.nonce} << nonce_shift);
}

ucx_transport* wire_link::transport_for(std::size_t k) const {
  const bool near = k < peers_.scopes.size() &&
                    peers_.scopes[k] == peers_.scopes[static_cast<std::size_t>(process_)];
  return near ? ucx_.local.get() : ucx_.network.get();
}

const ucx_address& wire_link::address_of(std::size_t k) const {
  const bool near = peers_.scopes[k] == peers_.scopes[static_cast<std::size_t>(process_)];
  return near ? peers_.local_addresses[k] : peers_.network_addresses[k];
}

void wire_link::set_driver(caf::actor driver) {
  std::lock_guard<std::mutex> lock(mu_);
  driver_ = caf::actor_cast<caf::actor_addr>(driver);
}

void wire_link::send_message(caf::event_based_actor* self, const caf::actor& to, caf::message msg,
                             std::string what) {
  int peer = -1;
  for (std::size_t k = 0; k < peers_.nodes.size(); ++k)
    if (peers_.nodes[k] == to.node()) peer = static_cast<int>(k);
  if (peer < 0 || !ucx_.local || !peers_.complete()) {
    self->send(to, std::move(msg));  // not a process of this run's wire: CAF carries it all
    return;
  }
  wire_msg w;
  w.what = std::move(what);
  transport::wire_outbox out;
  {
    caf::binary_serializer sink(sys_, w.bytes);
    transport::outbox = &out;
    auto err = sink(msg);
    transport::outbox = nullptr;
    if (err) throw pipeworks_error("a message could not be serialised: " + sys_.render(err));
  }
  const std::uint64_t n = out.payloads.size();
  const std::uint64_t first = next_seq_.fetch_add(n) & seq_mask;
  w.tag = (static_cast<std::uint64_t>(process_) << 56) |
          (std::uint64_t{peers_.nonce} << nonce_shift) | first;
  const auto k = static_cast<std::size_t>(peer);
  ucx_transport* via = transport_for(k);
  const ucx_address& address = address_of(k);
  for (std::uint64_t i = 0; i < n; ++i) {
    tensor_payload& p = out.payloads[i];
    w.tickets.push_back(wire_ticket{static_cast<std::uint8_t>(p.type()), p.shape()});
    auto hold = std::make_shared<tensor_payload>(p);
    const auto bytes = hold->bytes();
    const std::uint64_t tag = (w.tag & ~seq_mask) | ((first + i) & seq_mask);
    std::weak_ptr<wire_link> me = weak_from_this();
    via->send(address, tag, bytes.data(), bytes.size(), hold,
              [me, peer, what = w.what, i, n](const std::string& e) {
      if (e.empty()) return;
      if (auto link = me.lock())
        link->report("tensor " + std::to_string(i + 1) + " of " + std::to_string(n) + " of " + what +
                         " for process " + std::to_string(peer) + " could not be sent (" + e + ")",
                     true);
    });
  }
  tensors_ += n;
  for (const tensor_payload& p : out.payloads) tensor_bytes_ += p.nbytes();
  ++messages_;
  message_bytes_ += w.bytes.size();
  for (std::uint64_t was = largest_.load(); was < w.bytes.size() && !largest_.compare_exchange_weak(was, w.bytes.size());) {
  }
  self->send(to, std::move(w));
}

wire_link::totals wire_link::sent() const {
  return {tensors_.load(), tensor_bytes_.load(), messages_.load(), message_bytes_.load(), largest_.load()};
}

std::string wire_link::sent_text() const {
  const totals t = sent();
  std::string s = std::to_string(t.tensors) + " tensors (" + std::to_string(t.tensor_bytes) +
                  " bytes) over UCX beside " + std::to_string(t.messages) + " CAF messages (" +
                  std::to_string(t.message_bytes) + " bytes, the largest " +
                  std::to_string(t.largest_message) + ")";
  for (std::size_t k = 0; ucx_.local && peers_.complete() && k < peers_.nodes.size(); ++k) {
    if (static_cast<int>(k) == process_) continue;
    const std::string lanes = transports(transport_for(k)->lanes(address_of(k)));
    if (!lanes.empty()) s += "; to process " + std::to_string(k) + " over " + lanes;
  }
  return s;
}

void wire_link::accept(caf::local_actor* self, wire_msg w, const std::string& who) {
  auto e = std::make_shared<entry>();
  e->sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  e->who = who.empty() ? std::string(self->name()) : who;
  std::shared_ptr<inbox> in;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = inboxes_[self->id()];
    if (!slot) {
      slot = std::make_shared<inbox>();
      slot->owner = self->address();
    }
    in = slot;
  }
  // Every ticket is checked, and the bytes it claims reserved, before anything is allocated.
  const std::size_t from = static_cast<std::size_t>(w.tag >> 56);  // the sender's process
  e->from = from;
  ucx_transport* via = from < peers_.nodes.size() && peers_.complete() && static_cast<int>(from) != process_
                           ? transport_for(from)
                           : nullptr;
  for (const wire_ticket& t : w.tickets) {
    std::uint64_t bytes = t.type <= static_cast<std::uint8_t>(dtype::i32)
                              ? dtype_size(static_cast<dtype>(t.type))
                              : 0;
    for (std::int64_t d : t.shape) {
      if (d < 0 || (d > 0 && bytes > max_bytes_ / static_cast<std::uint64_t>(d))) bytes = 0;
      else bytes *= static_cast<std::uint64_t>(d);
    }
    if (bytes == 0 || bytes > max_bytes_ || t.shape.size() > 16) {
      e->error = "a tensor of shape " + shape_string(t.shape) + " beside a message is empty, of an "
                 "unknown type or larger than this run allows (" + std::to_string(max_bytes_) +
                 " bytes)";
      break;
    }
  }
  if (e->error.empty() && !w.tickets.empty() && via == nullptr)
    e->error = "a message with tensors beside it from process " + std::to_string(from) +
               ", which this run has no UCX peer for";
  e->msg = std::move(w);
  const bool fetch = e->error.empty() && !e->msg.tickets.empty();
  e->left = fetch ? e->msg.tickets.size() : 0;
  if (fetch) e->payloads.resize(e->msg.tickets.size());
  {
    std::lock_guard<std::mutex> lock(in->mu);
    // A peer that announces tensors it never sends stalls this inbox; it cannot grow it forever.
    if (in->queue.size() >= max_waiting_messages) {
      e->error = "more than " + std::to_string(max_waiting_messages) +
                 " messages wait for their tensors: a peer announces tensors it does not send";
      e->left = 0;
    }
    in->queue.push_back(e);
  }
  if (!fetch || e->left == 0) return deliver_ready(in);
  std::weak_ptr<wire_link> me = weak_from_this();
  for (std::size_t i = 0; i < e->msg.tickets.size(); ++i) {
    const wire_ticket& t = e->msg.tickets[i];
    const std::uint64_t tag = (e->msg.tag & ~seq_mask) | ((e->msg.tag + i) & seq_mask);
    const std::size_t n = static_cast<std::size_t>(numel(t.shape)) * dtype_size(static_cast<dtype>(t.type));
    // A tensor is sent before its message, so it has begun to arrive by the time the message
    // has; one that has not within the grace is taken for lost (a peer announcing tensors it
    // never sends cannot stall this inbox). It came as bytes; the ticket gives their shape.
    const auto patience = grace_;
    via->claim(tag, n, [me, in, e, i, tag, patience](std::shared_ptr<void> token, const std::string& err) {
      std::string why = err;
      if (!why.empty()) {
        // Who waited, for what, from whom: the process is named by report().
        char hex[24];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(tag));
        why = e->who + " did not get tensor " + std::to_string(i + 1) + " of " +
              std::to_string(e->msg.tickets.size()) + " of " +
              (e->msg.what.empty() ? std::string("a message") : e->msg.what) + " from process " +
              std::to_string(e->from) + " (UCX tag " + hex + "): " + why +
              (why.find("in time") != std::string::npos
                   ? " (waited " + std::to_string(patience.count()) + " ms after its message came)"
                   : std::string());
      }
      if (why.empty()) {
        const wire_ticket& t = e->msg.tickets[i];
        auto shaped = static_cast<tensor_payload*>(token.get())->as(static_cast<dtype>(t.type), t.shape);
        if (shaped) e->payloads[i] = std::move(*shaped);
        else why = shaped.message();
      }
      if (auto link = me.lock()) link->complete(in, e, why);
    }, grace_);
  }
}

void wire_link::complete(const std::shared_ptr<inbox>& in, const std::shared_ptr<entry>& e,
                         const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(in->mu);
    if (!error.empty() && e->error.empty()) {
      e->error = error;
      e->transfer_failed = true;
    }
    if (e->left > 0) --e->left;
    if (e->left > 0) return;
  }
  deliver_ready(in);
}

void wire_link::deliver_ready(const std::shared_ptr<inbox>& in) {
  std::vector<std::pair<std::string, bool>> failures;  // why, and whether to wait the grace
  {
    // Enqueued under the lock: the actor's thread and the progress thread both deliver, and the
    // mailbox must see the messages in the order they were sent.
    std::lock_guard<std::mutex> lock(in->mu);
    auto owner = caf::actor_cast<caf::strong_actor_ptr>(in->owner);
    while (!in->queue.empty() && in->queue.front()->left == 0) {
      std::shared_ptr<entry> e = std::move(in->queue.front());
      in->queue.pop_front();
      if (!e->error.empty()) {
        failures.emplace_back(e->error, e->transfer_failed);
        continue;
      }
      transport::wire_inbox got{std::move(e->payloads), 0};
      caf::message m;
      caf::binary_deserializer source(sys_, e->msg.bytes);
      transport::inbox = &got;
      auto err = source(m);
      transport::inbox = nullptr;
      if (err) failures.emplace_back("a message could not be read: " + sys_.render(err), false);
      else if (got.next != got.payloads.size() || source.remaining() != 0)
        failures.emplace_back("a message did not use all that was sent with it", false);
      else if (owner)
        owner->enqueue(caf::make_mailbox_element(caf::actor_cast<caf::strong_actor_ptr>(e->sender),
                                                 caf::make_message_id(), {}, std::move(m)),
                       nullptr);
    }
  }
  for (const auto& [why, wait] : failures) report(why, wait);
}

void wire_link::report(const std::string& why, bool after_grace) {
  caf::actor driver;
  {
    std::lock_guard<std::mutex> lock(mu_);
    driver = caf::actor_cast<caf::actor>(driver_);
  }
  if (!driver) return;
  stage_failure f{"process " + std::to_string(process_) + ": " + why};
  if (after_grace) caf::delayed_anon_send(driver, grace_, std::move(f));
  else caf::anon_send(driver, std::move(f));
}

}  // namespace pipeworks
