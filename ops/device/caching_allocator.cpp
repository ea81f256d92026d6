// caching_allocator: best fit among the cached blocks (the smallest that is large enough and no
// more than twice the request), else a fresh block from the raw allocator.
#include "ops/device/caching_allocator.hpp"

#include <algorithm>

#include "base/result.hpp"

namespace pipeworks {
namespace {

std::string mib(std::size_t bytes) {
  return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB";
}

}  // namespace

caching_allocator::caching_allocator(raw_allocator raw, std::size_t granule)
    : raw_(std::move(raw)), granule_(std::max<std::size_t>(granule, 1)) {}

caching_allocator::~caching_allocator() {
  std::lock_guard lock(mu_);
  release_cached_locked();
  for (auto& [p, size] : live_) raw_.free(p);
}

void* caching_allocator::allocate(std::size_t bytes) {
  const std::size_t size = (std::max<std::size_t>(bytes, 1) + granule_ - 1) / granule_ * granule_;
  std::unique_lock lock(mu_);
  void* p = take_locked(size);
  if (p == nullptr && reclaim_) {  // the room may be in another allocator's cache of the device
    // Without this one's lock: the other may be asking this one at the same moment. Others may
    // free or take blocks meanwhile, so everything is looked at again.
    const std::function<void()> reclaim = reclaim_;
    lock.unlock();
    reclaim();
    lock.lock();
    p = take_locked(size);
  }
  if (p == nullptr)
    throw pipeworks_error(raw_.device + " is out of memory: cannot allocate " + mib(size) +
                          " with " + mib(stats_.in_use) + " in use (peak " +
                          mib(stats_.peak_in_use) +
                          "); lower --batch, raise --microbatches or spread the stages wider");
  return p;
}

void* caching_allocator::take_locked(std::size_t size) {
  if (limit_ > 0 && stats_.in_use + size > limit_)
    throw pipeworks_error(who_ + " would hold " + std::to_string(stats_.in_use + size) +
                          " bytes of tensors on " + raw_.device + " (" +
                          std::to_string(stats_.in_use) + " held, " + std::to_string(size) +
                          " more asked for), over its memory limit of " + std::to_string(limit_) +
                          " bytes (runtime.memory_limit): give more, or hold less with "
                          "recomputation (runtime.recompute), ZeRO (runtime.zero), offload "
                          "(runtime.offload) or more stages");
  void* p = nullptr;
  std::size_t got = size;
  if (auto it = cached_.lower_bound(size); it != cached_.end() && it->first <= 2 * size) {
    p = it->second;
    got = it->first;
    cached_.erase(it);
    ++stats_.cache_hits;
  } else {
    p = raw_.allocate(size);
    if (p == nullptr && !cached_.empty()) {  // room may be held in the cache: give it back, retry
      release_cached_locked();
      p = raw_.allocate(size);
    }
    if (p == nullptr) return nullptr;
    stats_.held += size;
    stats_.peak_held = std::max(stats_.peak_held, stats_.held);
    ++stats_.raw_allocations;
  }
  live_.emplace(p, got);
  stats_.in_use += got;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  return p;
}

void caching_allocator::deallocate(void* p) {
  if (p == nullptr) return;
  std::lock_guard lock(mu_);
  const auto it = live_.find(p);
  if (it == live_.end())
    throw pipeworks_error(raw_.device + ": a block this allocator did not hand out was freed");
  stats_.in_use -= it->second;
  cached_.emplace(it->second, p);
  live_.erase(it);
}

void caching_allocator::set_reclaim(std::function<void()> reclaim) {
  std::lock_guard lock(mu_);
  reclaim_ = std::move(reclaim);
}

void caching_allocator::release_cached() {
  std::lock_guard lock(mu_);
  release_cached_locked();
}

void caching_allocator::release_cached_locked() {
  for (auto& [size, p] : cached_) {
    raw_.free(p);
    stats_.held -= size;
  }
  cached_.clear();
}

allocator_stats caching_allocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void caching_allocator::reset_peaks() {
  std::lock_guard lock(mu_);
  stats_.peak_in_use = stats_.in_use;
  stats_.peak_held = stats_.held;
}

void caching_allocator::set_limit(std::size_t bytes, std::string who) {
  std::lock_guard lock(mu_);
  limit_ = bytes;
  who_ = std::move(who);
}

}  // namespace pipeworks
