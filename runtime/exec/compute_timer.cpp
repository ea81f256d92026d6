// compute_timer: trace times and throttling of a rank's compute actions.
#include "runtime/exec/compute_timer.hpp"

#include <tbb/task_arena.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace pipeworks {

bool throttle_sleeps::sleep(double seconds) {
  std::unique_lock lock(mu_);
  if (!(seconds > 0)) return cut_;  // nothing to sleep (or NaN)
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(std::min(seconds, 1e9)));
  return wake_.wait_until(lock, until, [&] { return cut_; });
}

void throttle_sleeps::cut() {
  {
    std::lock_guard lock(mu_);
    cut_ = true;
  }
  wake_.notify_all();
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
  if (throttled_ && !sleep_)
    sleep_ = [](double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); };
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
