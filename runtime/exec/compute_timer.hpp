// The clock of a rank's compute actions: their start and end for the trace, and throttling to
// the device's speed (a device of speed s < 1 sleeps (1/s - 1)·t after an action that took t, so
// the action lasts t/s and leaves the core free meanwhile). See executor_setup::speed.
#pragma once
#include <functional>

namespace pipeworks {

// How a throttled rank sleeps by default: until `seconds` have passed, or at once when this
// process's throttled sleeps are cut (a run is stopping, failing or ending: what the throttle
// stretches no longer matters, and a device of speed 1e-6 would otherwise hold a stopping run for
// hours). Returns whether it was cut short.
bool throttled_sleep(double seconds);
// Cuts every throttled sleep of this process short, now and until allowed again (true), or lets
// them sleep again (false, when a run starts). Safe from any thread.
void cut_throttled_sleeps(bool cut);

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
