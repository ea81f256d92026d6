// All-reduce bus bandwidth across processes through pipeworks' shares (reduce-scatter and
// all-gather over the wire): `lead --listen HOST:PORT --world W --bytes N` is replica 0 and waits
// for W - 1 `join --to HOST:PORT` processes; every replica then sums N-byte gradients COUNT
// times; the lead prints the median time, the algorithm bandwidth and the bus bandwidth.
#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "actors/network.hpp"
#include "actors/shard_actor.hpp"
#include "actors/type_ids.hpp"
#include "actors/wire.hpp"
#include "base/host_port.hpp"

using namespace pipeworks;

namespace {

using clock_type = std::chrono::steady_clock;
using join_atom = caf::atom_constant<caf::atom("join")>;
using setup_atom = caf::atom_constant<caf::atom("setup")>;
using go_atom = caf::atom_constant<caf::atom("go")>;
using time_atom = caf::atom_constant<caf::atom("time")>;
using bye_atom = caf::atom_constant<caf::atom("bye")>;

struct options {
  std::string listen = "127.0.0.1:0", to;
  int world = 2, count = 20, warmup = 3;
  std::int64_t bytes = 16 << 20;
};

wire_peers me_as_peer(const wire_endpoints& eps, caf::node_id node) {
  wire_peers p;
  p.nodes = {node};
  p.scopes = {eps.scope};
  p.local_addresses = {eps.local->address()};
  p.network_addresses = {eps.network->address()};
  return p;
}

std::shared_ptr<const param_set> gradient(std::int64_t bytes, int replica) {
  param_set p({{{"g", {bytes / 4}}}}, 0, dtype::f32);
  float x = static_cast<float>(replica) + 0.5f;
  for (float& v : p.values<float>()) v = (x += 1e-3f);
  return std::make_shared<const param_set>(std::move(p));
}

// Runs `count + warmup` all-reduces through `shard`; the median seconds of the timed ones.
double run_reduces(caf::actor_system& sys, const caf::actor& shard, int replica, const options& o) {
  caf::scoped_actor self{sys};
  auto g = gradient(o.bytes, replica);
  std::vector<double> times;
  for (int i = 0; i < o.count + o.warmup; ++i) {
    const auto t0 = clock_type::now();
    self->send(shard, reduce_request{0, replica, i, g});
    bool ok = false;
    self->receive([&](reduce_result& r) { ok = r.step == i && r.sum != nullptr; },
                  [&](const stage_failure& f) { std::cerr << "bench_allreduce: " << f.message << "\n"; });
    if (!ok) return -1;
    if (i >= o.warmup) times.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

caf::actor_system_config& configure(caf::actor_system_config& cfg) {
  add_message_types(cfg);
  use_network(cfg, std::chrono::milliseconds(1000), std::chrono::milliseconds(60000));
  return cfg;
}

int lead(const options& o) {
  caf::actor_system_config cfg;
  caf::actor_system sys{configure(cfg)};
  auto eps = process_endpoints();
  auto at = parse_host_port(o.listen, true);
  if (!eps || !at) {
    std::cerr << "bench_allreduce: " << (eps ? at.message() : eps.message()) << "\n";
    return 1;
  }
  caf::scoped_actor self{sys};
  auto port = sys.middleman().publish(caf::actor_cast<caf::actor>(self), at->port, at->host.c_str(), true);
  if (!port) return 1;
  std::cout << "listening on " << at->host << ":" << *port << std::endl;
  // The members join: each gives its endpoints and the actor to answer.
  wire_peers peers = me_as_peer(*eps, sys.node());
  std::vector<caf::actor> members;
  while (static_cast<int>(members.size()) < o.world - 1) {
    self->receive([&](join_atom, const wire_peers& p, const caf::actor& member) {
      peers.nodes.push_back(p.nodes.at(0));
      peers.scopes.push_back(p.scopes.at(0));
      peers.local_addresses.push_back(p.local_addresses.at(0));
      peers.network_addresses.push_back(p.network_addresses.at(0));
      members.push_back(member);
    });
  }
  peers.nonce = static_cast<std::uint16_t>(std::random_device{}());
  auto link = std::make_shared<wire_link>(sys, *eps, 0, peers, static_cast<std::uint64_t>(o.bytes) * 2,
                                          std::chrono::seconds(10));
  shard_wiring sw;
  sw.shards.push_back(spawn_shard(sys, 0, 0, o.world, caf::actor_cast<caf::actor>(self), link));
  for (std::size_t k = 0; k < members.size(); ++k) {
    self->send(members[k], setup_atom::value, static_cast<int>(k + 1), peers);
    self->receive([&](const caf::actor& shard) { sw.shards.push_back(shard); });
  }
  for (const auto& s : sw.shards) self->send(s, sw);
  for (const auto& m : members) self->send(m, go_atom::value);
  const double t = run_reduces(sys, sw.shards[0], 0, o);
  double worst = t;
  for (std::size_t k = 0; k < members.size(); ++k)
    self->receive([&](time_atom, double m) { worst = std::max(worst, m); });
  // Every share has its sums; the members may go (a member that left at once could take the
  // last sum it sent with it, still in flight).
  for (const auto& m : members) self->send(m, bye_atom::value);
  if (t <= 0 || worst <= 0) return 1;
  const double alg = static_cast<double>(o.bytes) / worst / 1e6;
  const double bus = alg * 2.0 * (o.world - 1) / o.world;
  std::printf("%.6f %.1f %.1f %s\n", worst, alg, bus, link->sent_text().c_str());
  for (const auto& s : sw.shards) caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
  return 0;
}

int join(const options& o) {
  caf::actor_system_config cfg;
  caf::actor_system sys{configure(cfg)};
  auto eps = process_endpoints();
  auto at = parse_host_port(o.to);
  if (!eps || !at) return 1;
  auto leader = reach(sys, *at, std::chrono::seconds(10), "the lead");
  if (!leader) {
    std::cerr << "bench_allreduce: " << leader.message() << "\n";
    return 1;
  }
  caf::scoped_actor self{sys};
  self->send(*leader, join_atom::value, me_as_peer(*eps, sys.node()), caf::actor_cast<caf::actor>(self));
  int index = 0;
  wire_peers peers;
  self->receive([&](setup_atom, int k, const wire_peers& p) {
    index = k;
    peers = p;
  });
  auto link = std::make_shared<wire_link>(sys, *eps, index, peers, static_cast<std::uint64_t>(o.bytes) * 2,
                                          std::chrono::seconds(10));
  auto shard = spawn_shard(sys, 0, index, o.world, *leader, link);
  self->send(*leader, shard);
  self->receive([](go_atom) {});
  const double t = run_reduces(sys, shard, index, o);
  self->send(*leader, time_atom::value, t);
  self->receive([](bye_atom) {});
  caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  return t > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"all-reduce bus bandwidth across processes through pipeworks' shares"};
  options o;
  app.require_subcommand(1);
  auto* l = app.add_subcommand("lead", "replica 0: wait for the others, print the figures");
  l->add_option("--listen", o.listen, "HOST:PORT (port 0: any free one)")->capture_default_str();
  l->add_option("--world", o.world, "replicas (processes)")->capture_default_str();
  auto* j = app.add_subcommand("join", "another replica");
  j->add_option("--to", o.to, "the lead's HOST:PORT")->required();
  j->add_option("--world", o.world, "replicas (processes)")->capture_default_str();
  for (auto* sub : {l, j}) {
    sub->add_option("--bytes", o.bytes, "gradient bytes (a multiple of 4)")->capture_default_str();
    sub->add_option("--count", o.count, "timed all-reduces")->capture_default_str();
  }
  CLI11_PARSE(app, argc, argv);
  if (o.world < 2 || o.bytes < 4 * o.world || o.bytes % 4 != 0) {
    std::cerr << "bench_allreduce: --world must be at least 2, --bytes a multiple of 4, at least 4 per replica\n";
    return 2;
  }
  return l->parsed() ? lead(o) : join(o);
}
