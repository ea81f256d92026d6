// A caching allocator for one device's memory: blocks freed are kept by size and handed out again,
// so a training step's steady allocations never reach the driver (cudaMalloc synchronises the
// GPU). It reports the bytes in use and held and their peaks, which become the stage peaks.
// Pure logic over a raw allocator (cudaMalloc/cudaFree on a GPU, malloc in tests); thread-safe.
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace pipeworks {

struct allocator_stats {
  std::size_t in_use = 0, held = 0;            // bytes handed out; bytes taken from the device
  std::size_t peak_in_use = 0, peak_held = 0;
  std::size_t raw_allocations = 0, cache_hits = 0;
};

class caching_allocator {
 public:
  struct raw_allocator {
    std::function<void*(std::size_t)> allocate;  // nullptr when the device has no room
    std::function<void(void*)> free;
    std::string device;  // for messages: "cuda:0"
  };
  // Sizes are rounded up to `granule` bytes (a power of two); a cached block serves a request of
  // at least half its size.
  explicit caching_allocator(raw_allocator raw, std::size_t granule = 512);
  ~caching_allocator();  // gives every block back
  caching_allocator(const caching_allocator&) = delete;
  caching_allocator& operator=(const caching_allocator&) = delete;

  // A block of at least `bytes`: a cached one, else a new one; when the device is full, the
  // cache is given back and the allocation tried once more, then pipeworks_error names the
  // device, the size and what is in use.
  void* allocate(std::size_t bytes);
  // Back into the cache (nullptr is ignored; a pointer it did not hand out throws).
  void deallocate(void* p);
  // Gives the cached blocks back to the device.
  void release_cached();
  allocator_stats stats() const;
  void reset_peaks();  // peaks start again from what is in use now
  // The most bytes it may hand out at once (0: no limit): a request that would pass it throws a
  // pipeworks_error naming `who`, what it holds and asks for, and the limit, before allocating.
  void set_limit(std::size_t bytes, std::string who);
  // What else to try when the device is full and this allocator's own cache has been given back:
  // another allocator of the same device giving back its cache (a rank's second stream's), then
  // one more try. Called without this allocator's lock.
  void set_reclaim(std::function<void()> reclaim);

 private:
  void release_cached_locked();
  // A cached block that fits, else a new one (the cache given back once if the device is full);
  // null when the device has no room; throws past the limit. With the lock held.
  void* take_locked(std::size_t size);
  raw_allocator raw_;
  std::size_t granule_;
  mutable std::mutex mu_;
  std::multimap<std::size_t, void*> cached_;         // size -> free block
  std::unordered_map<void*, std::size_t> live_;      // handed out: block -> size
  allocator_stats stats_;
  std::size_t limit_ = 0;
  std::string who_;
  std::function<void()> reclaim_;
};

}  // namespace pipeworks
