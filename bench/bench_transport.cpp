// Activation transfer bandwidth between two processes through pipeworks' wire (CAF control
// messages, tensors over UCX), measured at the receiver: `receive --listen HOST:PORT` in one
// process, `send --to HOST:PORT --bytes N --count K` in another; the sender prints MB/s.
#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <string>

#include "actors/network.hpp"
#include "actors/type_ids.hpp"
#include "actors/wire.hpp"
#include "base/host_port.hpp"

using namespace pipeworks;

namespace {

using clock_type = std::chrono::steady_clock;
using join_atom = caf::atom_constant<caf::atom("join")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
using ack_atom = caf::atom_constant<caf::atom("ack")>;

struct options {
  std::string listen = "127.0.0.1:0", to;
  std::int64_t bytes = 1 << 20;
  int count = 200, warmup = 50, window = 32;
  std::string transport = "ucx";
};

// This process as a wire peer: the receiver is process 0, the sender process 1.
wire_peers two_peers(const wire_endpoints& me, caf::node_id my_node, const wire_peers& other,
                     int my_index) {
  wire_peers p;
  p.nodes.resize(2);
  p.scopes.resize(2);
  p.local_addresses.resize(2);
  p.network_addresses.resize(2);
  const std::size_t m = static_cast<std::size_t>(my_index), o = 1 - m;
  p.nodes[m] = my_node;
  p.scopes[m] = me.scope;
  p.local_addresses[m] = me.local->address();
  p.network_addresses[m] = me.network->address();
  if (!other.nodes.empty()) {
    p.nodes[o] = other.nodes[0];
    p.scopes[o] = other.scopes[0];
    p.local_addresses[o] = other.local_addresses[0];
    p.network_addresses[o] = other.network_addresses[0];
  }
  return p;
}

wire_peers one_peer(const wire_endpoints& me, caf::node_id node) {
  wire_peers p;
  p.nodes = {node};
  p.scopes = {me.scope};
  p.local_addresses = {me.local->address()};
  p.network_addresses = {me.network->address()};
  return p;
}

// The receiver: answers a join with its own peer entry and makes its link; counts activations,
// acknowledges each (the sender keeps `window` in flight, as credits do), and times them.
struct receiver_state {
  std::shared_ptr<wire_link> link;
  caf::actor sender;
  int seen = 0, expect = 0, warmup = 0;
  std::int64_t bytes = 0;
  clock_type::time_point first;
};

caf::behavior receiver(caf::stateful_actor<receiver_state>* self, wire_endpoints eps, bool ucx) {
  return {
      [=](join_atom, const wire_peers& sender, int count, int warmup, std::int64_t bytes,
          std::uint16_t nonce) -> wire_peers {
        auto& st = self->state;
        wire_peers peers = two_peers(eps, self->node(), sender, 0);
        peers.nonce = nonce;
        if (ucx)
          st.link = std::make_shared<wire_link>(self->system(), eps, 0, peers,
                                                static_cast<std::uint64_t>(bytes) + 4096,
                                                std::chrono::seconds(5));
        st.sender = caf::actor_cast<caf::actor>(self->current_sender());
        st.expect = count + warmup;
        st.warmup = warmup;
        st.bytes = bytes;
        st.seen = 0;
        return one_peer(eps, self->node());
      },
      [=](wire_msg& w) {
        if (self->state.link) self->state.link->accept(self, std::move(w));
      },
      [=](activation_msg& m) {
        auto& st = self->state;
        if (m.data.nbytes() != static_cast<std::size_t>(st.bytes)) return;
        if (++st.seen == st.warmup + 1) st.first = clock_type::now();
        self->send(st.sender, ack_atom::value);
        if (st.seen == st.expect) {
          const double s = std::chrono::duration<double>(clock_type::now() - st.first).count();
          // From the arrival of the first timed tensor to the last: expect - warmup - 1 tensors.
          const double mbps = static_cast<double>(st.bytes) * (st.expect - st.warmup - 1) / s / 1e6;
          self->send(st.sender, done_atom::value, mbps,
                     st.link ? st.link->sent_text() : std::string("(caf)"));
        }
      },
  };
}

caf::actor_system_config& configure(caf::actor_system_config& cfg) {
  add_message_types(cfg);
  use_network(cfg, std::chrono::milliseconds(1000), std::chrono::milliseconds(60000));
  return cfg;
}

int fail(const std::string& why) {
  std::cerr << "bench_transport: " << why << "\n";
  return 1;
}

int run_receive(const options& o) {
  caf::actor_system_config cfg;
  caf::actor_system sys{configure(cfg)};
  auto eps = process_endpoints();
  if (!eps) return fail(eps.message());
  auto at = parse_host_port(o.listen, true);
  if (!at) return fail(at.message());
  auto me = sys.spawn(receiver, *eps, o.transport == "ucx");
  auto port = sys.middleman().publish(me, at->port, at->host.c_str(), true);
  if (!port) return fail("cannot listen on " + o.listen);
  std::cout << "listening on " << at->host << ":" << *port << std::endl;
  std::string line;
  std::getline(std::cin, line);  // until stdin closes
  caf::anon_send_exit(me, caf::exit_reason::user_shutdown);
  return 0;
}

int run_send(const options& o) {
  caf::actor_system_config cfg;
  caf::actor_system sys{configure(cfg)};
  auto eps = process_endpoints();
  if (!eps) return fail(eps.message());
  auto at = parse_host_port(o.to);
  if (!at) return fail(at.message());
  auto peer = reach(sys, *at, std::chrono::seconds(10), "the receiver");
  if (!peer) return fail(peer.message());
  const std::uint16_t nonce = static_cast<std::uint16_t>(std::random_device{}());
  double mbps = 0;
  std::string sent;
  auto payload = tensor_payload::allocate(dtype::f32, {o.bytes / 4});
  if (!payload) return 1;
  for (std::byte& b : payload->writable_bytes()) b = std::byte{0x5a};
  auto sender = sys.spawn([&, eps = *eps, payload = *payload,
                           peer = *peer](caf::event_based_actor* self) -> caf::behavior {
    auto link = std::make_shared<std::shared_ptr<wire_link>>();
    auto sent_n = std::make_shared<int>(0);
    const int total = o.count + o.warmup;
    auto send_one = [=] {
      activation_msg m;
      m.microbatch = (*sent_n)++;
      m.data = payload;  // the same buffer each time: zero copy
      wire_send(*link, self, peer, std::move(m));
    };
    self->request(peer, std::chrono::seconds(10), join_atom::value, one_peer(eps, self->node()),
                  o.count, o.warmup, o.bytes, nonce)
        .then([=](const wire_peers& receiver) {
          wire_peers peers = two_peers(eps, self->node(), receiver, 1);
          peers.nonce = nonce;
          if (o.transport == "ucx")
            *link = std::make_shared<wire_link>(self->system(), eps, 1, peers,
                                                static_cast<std::uint64_t>(o.bytes) + 4096,
                                                std::chrono::seconds(5));
          for (int i = 0; i < o.window && *sent_n < total; ++i) send_one();
        });
    return {
        [=](ack_atom) {
          if (*sent_n < total) send_one();
        },
        [=, &mbps, &sent](done_atom, double r, const std::string&) {
          mbps = r;
          sent = *link ? (*link)->sent_text() : "(caf)";
          self->quit();
        },
    };
  });
  caf::scoped_actor waiter{sys};
  waiter->monitor(sender);
  waiter->receive([](const caf::down_msg&) {});
  std::printf("%.1f\n", mbps);
  std::fprintf(stderr, "sender: %s\n", sent.c_str());
  return mbps > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pipeworks' transport bandwidth between two processes, measured at the receiver"};
  options o;
  app.require_subcommand(1);
  auto* rcv = app.add_subcommand("receive", "wait for a sender; print the address");
  rcv->add_option("--listen", o.listen, "HOST:PORT (port 0: any free one)")->capture_default_str();
  rcv->add_option("--transport", o.transport, "ucx or caf")->check(CLI::IsMember({"ucx", "caf"}));
  auto* snd = app.add_subcommand("send", "send tensors; print MB/s measured at the receiver");
  snd->add_option("--to", o.to, "the receiver's HOST:PORT")->required();
  snd->add_option("--bytes", o.bytes, "bytes per tensor (a multiple of 4)")->capture_default_str();
  snd->add_option("--count", o.count, "timed tensors")->capture_default_str();
  snd->add_option("--warmup", o.warmup, "untimed tensors first")->capture_default_str();
  snd->add_option("--window", o.window, "tensors in flight (credits)")->capture_default_str();
  snd->add_option("--transport", o.transport, "ucx or caf")->check(CLI::IsMember({"ucx", "caf"}));
  CLI11_PARSE(app, argc, argv);
  if (o.bytes < 4 || o.bytes % 4 != 0) {
    std::cerr << "bench_transport: --bytes must be a positive multiple of 4\n";
    return 2;
  }
  return rcv->parsed() ? run_receive(o) : run_send(o);
}
