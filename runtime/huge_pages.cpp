// Blocks on 2 MiB transparent huge pages (madvise) for the big arrays; see huge_pages.hpp.
#include "runtime/huge_pages.hpp"

#include <cstdint>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace pipeworks {

namespace {
constexpr std::size_t huge = std::size_t{2} << 20;
}

void* huge_allocate(std::size_t bytes) {
  if (bytes < huge / 2) return ::operator new(bytes);
  const std::size_t rounded = (bytes + huge - 1) / huge * huge;
  if (rounded < bytes) throw std::bad_alloc();
  void* p = std::aligned_alloc(huge, rounded);
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  madvise(p, rounded, MADV_HUGEPAGE);  // a hint; without it the pages are merely small
#endif
  return p;
}

void huge_deallocate(void* p, std::size_t bytes) {
  if (bytes < huge / 2) ::operator delete(p);
  else std::free(p);
}

void advise_huge_pages(void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + huge - 1) / huge * huge;
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) / huge * huge;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace pipeworks
