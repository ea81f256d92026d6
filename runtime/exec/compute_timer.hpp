// The clock of a rank's compute actions: their start and end for the trace, and throttling to
// the device's speed (a device of speed s < 1 sleeps (1/s - 1)·t after an action that took t, so
// the action lasts t/s and leaves the core free meanwhile). See executor_setup::speed.
#pragma once
#include <condition_variable>
#include <functional>
#include <mutex>

namespace pipeworks {

// The throttled sleeps of one run's ranks in one process, which the run cuts short when it stops,
// fails or ends: what the throttle stretches no longer matters then, and a device of speed 1e-6
// would otherwise hold a stopping run for hours. Shared by the run's ranks; safe from any thread.
class throttle_sleeps {
 public:
  // Sleeps `seconds`, or until cut; returns whether it was cut short (at once once cut).
  bool sleep(double seconds);
  // Ends every sleep of the run, now and later.
  void cut();

 private:
  std::mutex mu_;
  std::condition_variable wake_;
  bool cut_ = false;
};

class compute_timer {
 public:
  // clock: seconds since the run started (may be empty); timed: the trace wants times.
  // cpu_clock and sleep stand for the thread's CPU clock and a sleep (tests inject fakes).
  compute_timer(double speed, std::function<double()> clock, bool timed,
                std::function<double()> cpu_clock, std::function<void(double)> sleep);

  // Seconds since the run started, or 0 when neither the trace nor the throttle needs them.
  double now() const;
  // Starts a compute action; returns its start for the trace.
  double begin();
  // Ends the action begun at t0: a throttled rank first sleeps. Returns the end for the trace.
  double end(double t0);
  bool throttled() const { return throttled_; }

 private:
  double cpu_seconds() const;

  double speed_;
  std::function<double()> clock_, cpu_clock_;
  std::function<void(double)> sleep_;
  bool timed_, throttled_;
  bool cpu_timed_ = false;  // the current action is measured in CPU time
  double cpu_t0_ = 0;
};

}  // namespace pipeworks
