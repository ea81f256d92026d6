// compute_timer: trace times and throttling of a rank's compute actions.
#include "runtime/exec/compute_timer.hpp"

#include <tbb/task_arena.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace pipeworks {

namespace {

struct sleep_cut {
  std::mutex mu;
  std::condition_variable wake;
  bool cut = false;
};

sleep_cut& cuts() {
  static sleep_cut c;
  return c;
}

}  // namespace

bool throttled_sleep(double seconds) {
  sleep_cut& c = cuts();
  std::unique_lock lock(c.mu);
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(std::min(seconds, 1e9)));
  return c.wake.wait_until(lock, until, [&] { return c.cut; });
}

void cut_throttled_sleeps(bool cut) {
  sleep_cut& c = cuts();
  {
    std::lock_guard lock(c.mu);
    c.cut = cut;
  }
  if (cut) c.wake.notify_all();
}

compute_timer::compute_timer(double speed, std::function<double()> clock, bool timed,
                             std::function<double()> cpu_clock, std::function<void(double)> sleep)
    : speed_(speed), clock_(std::move(clock)), cpu_clock_(std::move(cpu_clock)),
      sleep_(std::move(sleep)), timed_(timed), throttled_(speed < 1.0) {
  if (throttled_ && !clock_) {
    const auto start = std::chrono::steady_clock::now();
    clock_ = [start] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
  }
  if (throttled_ && !sleep_) sleep_ = [](double s) { throttled_sleep(s); };
}

double compute_timer::now() const { return (timed_ || throttled_) && clock_ ? clock_() : 0.0; }

double compute_timer::cpu_seconds() const {
  if (cpu_clock_) return cpu_clock_();
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double compute_timer::begin() {
  const double t0 = now();
  if (throttled_) {
    // CPU time when the rank's kernels all run on this thread (an arena of one thread), or when a
    // cpu_clock was given; otherwise wall time (other threads' CPU time is not visible here).
    cpu_timed_ = cpu_clock_ || tbb::this_task_arena::max_concurrency() == 1;
    if (cpu_timed_) cpu_t0_ = cpu_seconds();
  }
  return t0;
}

double compute_timer::end(double t0) {
  if (!throttled_) return now();
  const double took = cpu_timed_ ? cpu_seconds() - cpu_t0_ : now() - t0;
  const double extra = (1.0 / speed_ - 1.0) * std::max(0.0, took);
  if (extra > 0) sleep_(extra);
  return now();
}

}  // namespace pipeworks
