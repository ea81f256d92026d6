// check_thread_budget: the stacks' size against RLIMIT_AS less this process's address space
// (/proc/self/statm), with room for the heap the threads' work needs.
#include "base/thread_budget.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace pipeworks {
namespace {

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", bytes / double(1 << 20));
  return buf;
}

}  // namespace

status check_thread_budget(std::size_t threads) {
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return {};
  rlimit st{};
  double stack = 8.0 * (1 << 20);  // glibc's default where the stack limit says nothing usable
  if (::getrlimit(RLIMIT_STACK, &st) == 0 && st.rlim_cur != RLIM_INFINITY && st.rlim_cur > 0)
    stack = static_cast<double>(st.rlim_cur);
  double used = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    long size = 0;
    if (std::fscanf(f, "%ld", &size) == 1) used = double(size) * double(::sysconf(_SC_PAGE_SIZE));
    std::fclose(f);
  }
  const double limit = static_cast<double>(as.rlim_cur);
  const double need = double(threads) * (stack + 4096.0);
  const double room = limit - used - 256.0 * (1 << 20);  // the run's own allocations
  if (need <= room) return {};
  return make_error(std::to_string(threads) + " threads with stacks of " + mib(stack) + " need " +
                    mib(need) + " of address space, more than the " + mib(room > 0 ? room : 0) +
                    " left under this process's limit (ulimit -v " +
                    std::to_string(as.rlim_cur / 1024) + ")");
}

}  // namespace pipeworks
