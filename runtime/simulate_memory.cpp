// The simulator's big arrays: blocks on 2 MiB transparent huge pages, and the helpers that turn
// numbers and byte counts into message text.
#include <cstdint>
#include <cstdlib>
#include <new>
#include <sstream>

#include "runtime/simulate_internal.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace pipeworks::sim_detail {

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

std::string fmt(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

std::string bytes_text(double b) {
  std::ostringstream s;
  s.precision(4);
  if (b >= 1024.0 * (1 << 30)) s << b / (1024.0 * (1 << 30)) << " TiB";
  else if (b >= (1 << 30)) s << b / (1 << 30) << " GiB";
  else if (b >= (1 << 20)) s << b / (1 << 20) << " MiB";
  else s << static_cast<std::int64_t>(b) << " B";
  return s.str();
}

}  // namespace pipeworks::sim_detail
