// The caching allocator over a counting malloc: blocks come back from the cache, sizes round up,
// peaks are tracked, a full device makes it give its cache back and retry (its own, then another's
// when told how), and then fail naming the device and the sizes; a stranger's pointer is refused; a memory limit refuses past it.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>

#include "base/result.hpp"
#include "ops/device/caching_allocator.hpp"

using namespace pipeworks;

namespace {

// malloc with a capacity: nullptr once `limit` bytes are out.
struct counting_device {
  std::size_t limit = 1 << 20, out = 0;
  std::size_t allocs = 0, frees = 0;
  std::map<void*, std::size_t> blocks;
  caching_allocator::raw_allocator raw() {
    return {[this](std::size_t n) -> void* {
              if (out + n > limit) return nullptr;
              void* p = std::malloc(n);
              blocks[p] = n;
              out += n;
              ++allocs;
              return p;
            },
            [this](void* p) {
              out -= blocks.at(p);
              blocks.erase(p);
              ++frees;
              std::free(p);
            },
            "cuda:0"};
  }
};

}  // namespace

TEST_CASE("the caching allocator reuses freed blocks and tracks its peaks", "[ops][device]") {
  counting_device dev;
  {
    caching_allocator a(dev.raw(), 512);
    void* x = a.allocate(1000);  // rounds to 1024
    void* y = a.allocate(3000);  // 3072
    CHECK(a.stats().in_use == 1024 + 3072);
    a.deallocate(x);
    CHECK(a.stats().in_use == 3072);
    CHECK(a.stats().held == 1024 + 3072);
    void* z = a.allocate(700);  // 1024: the cached block comes back
    CHECK(z == x);
    CHECK(dev.allocs == 2);
    CHECK(a.stats().cache_hits == 1);
    // A cached block more than twice the request is not handed out for it.
    a.deallocate(y);
    void* small = a.allocate(1000);
    CHECK(small != y);
    CHECK(dev.allocs == 3);
    const allocator_stats s = a.stats();
    CHECK(s.peak_in_use == 1024 + 3072);
    CHECK(s.peak_held == 1024 + 3072 + 1024);
    a.reset_peaks();
    CHECK(a.stats().peak_in_use == a.stats().in_use);
    a.deallocate(nullptr);
    int stranger = 0;
    CHECK_THROWS_WITH(a.deallocate(&stranger), Catch::Contains("did not hand out"));
    a.deallocate(z);
    a.deallocate(small);
  }
  CHECK(dev.out == 0);  // the destructor gave every block back
  CHECK(dev.frees == dev.allocs);
}

TEST_CASE("a full device makes the allocator give back its cache then name the shortfall", "[ops][device]") {
  counting_device dev;
  dev.limit = 8192;
  caching_allocator a(dev.raw(), 512);
  void* big = a.allocate(6144);
  a.deallocate(big);  // cached, still held
  // 2560 is too small for the cached 6144 and does not fit beside it: the cache goes back and
  // the retry succeeds.
  void* p = a.allocate(2560);
  CHECK(p != nullptr);
  CHECK(a.stats().held == 2560);
  CHECK(dev.frees == 1);
  CHECK_THROWS_WITH(a.allocate(6000),
                    Catch::Contains("cuda:0 is out of memory: cannot allocate 1 MiB with 1 MiB in use") &&
                        Catch::Contains("lower --batch"));
  a.deallocate(p);
}

TEST_CASE("a full device takes back another allocator's cache when told how", "[ops][device]") {
  counting_device dev;
  dev.limit = 8192;
  caching_allocator a(dev.raw(), 512), b(dev.raw(), 512);
  void* held = b.allocate(6144);
  b.deallocate(held);  // b's cache holds 6144 of the device's 8192
  CHECK_THROWS_WITH(a.allocate(4096), Catch::Contains("out of memory"));
  // Each may ask the other; the hook runs without the asking allocator's lock (a.stats() in it
  // would otherwise never return).
  a.set_reclaim([&] {
    CHECK(a.stats().in_use == 0);
    b.release_cached();
  });
  b.set_reclaim([&] { a.release_cached(); });
  void* p = a.allocate(4096);
  CHECK(p != nullptr);
  CHECK(b.stats().held == 0);
  CHECK(a.stats().held == 4096);
  a.deallocate(p);  // cached by a now: b, short of room, takes it back
  void* q = b.allocate(6144);
  CHECK(q != nullptr);
  CHECK(a.stats().held == 0);
  b.deallocate(q);
}

TEST_CASE("a memory limit refuses a block past it, naming the holder and the limit", "[ops][device]") {
  counting_device dev;
  caching_allocator a(dev.raw(), 512);
  a.set_limit(4096, "rank 3 (replica 0, device 1)");
  void* p = a.allocate(3000);  // rounds up to 3072
  const std::size_t raw_before = dev.allocs;
  try {
    a.allocate(1500);  // 3072 + 1536 > 4096
    FAIL("the limit let a block past it");
  } catch (const pipeworks_error& e) {
    const std::string why = e.what();
    CHECK(why.find("rank 3 (replica 0, device 1)") != std::string::npos);
    CHECK(why.find("4608 bytes") != std::string::npos);
    CHECK(why.find("memory limit of 4096 bytes (runtime.memory_limit)") != std::string::npos);
  }
  CHECK(dev.allocs == raw_before);  // refused before the device was asked
  CHECK(a.stats().in_use == 3072);
  a.deallocate(p);
  void* q = a.allocate(4000);  // within the limit again once freed
  CHECK(q != nullptr);
  a.deallocate(q);
  a.set_limit(0, "");
  void* big = a.allocate(8192);  // no limit
  a.deallocate(big);
}
