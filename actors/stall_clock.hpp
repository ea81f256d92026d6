// The driver's watch on its own process: a thread that wakes every tick and notes each gap
// between its wake-ups far longer than a tick (the process was stopped, or starved of CPU), so
// that a driver which lost its workers can tell its own stop from theirs. Tests inject a stop
// with pretend_stopped rather than stopping the process and racing a sleep.
#pragma once
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace pipeworks {

class stall_clock {
 public:
  using clock = std::chrono::steady_clock;  // monotonic: it runs on while the process is stopped
  struct gap {
    clock::time_point from{}, to{};
    clock::duration length() const { return to - from; }
  };

  explicit stall_clock(std::chrono::milliseconds tick = std::chrono::milliseconds(50))
      : tick_(tick), last_(clock::now()), thread_([this] { run(); }) {}
  ~stall_clock() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  stall_clock(const stall_clock&) = delete;
  stall_clock& operator=(const stall_clock&) = delete;

  // Tests only: every later query also sees a stop of `d` that has just ended, as if the process
  // had been stopped that long right before it asked.
  void pretend_stopped(clock::duration d) {
    std::lock_guard<std::mutex> lock(mu_);
    pretend_ = d;
  }

  // The longest gap that ended within `window` before now, counting the one under way (the
  // thread may not have woken yet since the process went on).
  gap longest_recent(clock::duration window) const {
    const auto now = clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    gap best{now, now};
    if (pretend_ > clock::duration::zero()) best = gap{now - pretend_, now};
    for (const gap& g : gaps_)
      if (g.to + window >= now && g.length() > best.length()) best = g;
    if (now - last_ > best.length()) best = gap{last_, now};
    return best;
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, tick_);
      const auto now = clock::now();
      if (now - last_ > 4 * tick_) {
        gaps_.push_back(gap{last_, now});
        if (gaps_.size() > 32) gaps_.pop_front();
      }
      last_ = now;
    }
  }

  const std::chrono::milliseconds tick_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<gap> gaps_;
  clock::time_point last_;
  clock::duration pretend_{};
  bool stop_ = false;
  std::thread thread_;  // last: it starts once the rest is set
};

}  // namespace pipeworks
