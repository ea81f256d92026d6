// shard_owners balances whole tensors over the replicas; compose_shards copies each tensor from
// its owner's version.
#include "ops/train/zero_shards.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

namespace pipeworks {

std::vector<int> shard_owners(const param_set& layout, int replicas) {
  const auto& entries = layout.entries();
  std::vector<int> owners(entries.size(), 0);
  if (replicas <= 1) return owners;
  std::vector<std::size_t> order(entries.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return entries[a].numel() > entries[b].numel();
  });
  std::vector<std::int64_t> load(static_cast<std::size_t>(replicas), 0);
  for (std::size_t i : order) {
    const auto least = std::min_element(load.begin(), load.end()) - load.begin();
    owners[i] = static_cast<int>(least);
    load[static_cast<std::size_t>(least)] += entries[i].numel();
  }
  return owners;
}

std::vector<bool> owned_by(const std::vector<int>& owners, int r) {
  std::vector<bool> out(owners.size());
  for (std::size_t i = 0; i < owners.size(); ++i) out[i] = owners[i] == r;
  return out;
}

result<param_set> compose_shards(const std::vector<param_snapshot>& by_replica,
                                 const std::vector<int>& owners) {
  if (by_replica.empty() || !by_replica.front()) return make_error("compose_shards: no versions");
  const param_set& first = *by_replica.front();
  if (owners.size() != first.entries().size())
    return make_error("compose_shards: " + std::to_string(owners.size()) + " owners for " +
                      std::to_string(first.entries().size()) + " tensors");
  for (const param_snapshot& p : by_replica)
    if (!p || !p->same_layout(first) || p->where().kind != device_kind::cpu)
      return make_error("compose_shards: the replicas' versions are not host sets of one layout");
  param_set out = first.uninitialized_like();
  const std::size_t elem = dtype_size(first.arena().type());
  for (std::size_t i = 0; i < owners.size(); ++i) {
    if (owners[i] < 0 || owners[i] >= static_cast<int>(by_replica.size()))
      return make_error("compose_shards: tensor " + first.entries()[i].name + " has owner " +
                        std::to_string(owners[i]) + " of " + std::to_string(by_replica.size()));
    const param_entry& e = first.entries()[i];
    std::memcpy(out.arena().bytes() + e.offset * elem,
                by_replica[static_cast<std::size_t>(owners[i])]->arena().bytes() + e.offset * elem,
                static_cast<std::size_t>(e.numel()) * elem);
  }
  return out;
}

}  // namespace pipeworks
