// check_thread_budget: no limit, no refusal; under an address-space limit (set in a child process)
// threads whose stacks would not fit are refused naming the limit, and a few that fit are not.
#include "base/thread_budget.hpp"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

using namespace pipeworks;

namespace {

// 0: as expected; other codes name the check that failed.
int in_child_under_limit() {
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) != 0) return 10;
  rlimit st{};
  ::getrlimit(RLIMIT_STACK, &st);
  // Room for this process as it is, plus 1 GiB.
  long size = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld", &size) != 1) size = 0;
    std::fclose(f);
  }
  const rlim_t limit = static_cast<rlim_t>(size) * static_cast<rlim_t>(::sysconf(_SC_PAGE_SIZE)) +
                       (rlim_t{1} << 30);
  as.rlim_cur = limit;
  if (::setrlimit(RLIMIT_AS, &as) != 0) return 11;
  if (!check_thread_budget(4).ok()) return 12;              // 32 MiB of stacks fit
  const status many = check_thread_budget(100000);         // 800 GiB do not
  if (many.ok()) return 13;
  if (many.message().find("ulimit -v") == std::string::npos) return 14;
  return 0;
}

}  // namespace

TEST_CASE("thread stacks are checked against the address-space limit") {
  rlimit as{};
  REQUIRE(::getrlimit(RLIMIT_AS, &as) == 0);
  if (as.rlim_cur == RLIM_INFINITY) CHECK(check_thread_budget(100000).ok());  // no limit here
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(in_child_under_limit());
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
