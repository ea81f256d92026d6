// exception_text: the memory figures come from /proc/self/statm and sysconf.
#include "base/exception_text.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <new>
#include <stdexcept>

namespace pipeworks {
namespace {

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g GiB", bytes / double(1 << 30));
  return buf;
}

// This process's resident memory in bytes, or 0 when unknown.
double resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long size = 0, resident = 0;
  const bool read = std::fscanf(f, "%ld %ld", &size, &resident) == 2;
  std::fclose(f);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  return read && page > 0 ? double(resident) * double(page) : 0;
}

}  // namespace

bool is_out_of_memory(const std::exception& e) {
  return dynamic_cast<const std::bad_alloc*>(&e) != nullptr ||
         dynamic_cast<const std::length_error*>(&e) != nullptr;
}

std::string exception_text(const std::exception& e) {
  if (!is_out_of_memory(e)) return e.what();
  std::string text = "out of memory: an allocation failed";
  const double held = resident_bytes();
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (held > 0) text += " while this process held " + gib(held);
  if (held > 0 && pages > 0 && page > 0) text += " of this machine's " + gib(double(pages) * double(page));
  if (rlimit lim{}; ::getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    text += ", under an address-space limit (ulimit -v) of " + gib(double(lim.rlim_cur));
  return text;
}

}  // namespace pipeworks
