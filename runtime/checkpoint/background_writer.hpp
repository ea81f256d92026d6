// A thread that runs file-writing jobs one after the other, so a rank keeps computing while its
// checkpoint goes to disk. It runs at a lower priority (nice 10), so hashing and copying into the
// page cache use the pipeline's idle moments first. With max_queued, post waits while that many
// jobs wait behind the one being written: checkpoints asked for faster than the disk takes them
// slow training down instead of piling up in memory (as torch.distributed.checkpoint's
// async_save waits for the previous save). Destroying the writer waits for the jobs given.
#pragma once
#include <condition_variable>
#include <deque>
#include <cstddef>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>

#include <sys/resource.h>
#include <unistd.h>

namespace pipeworks {

class background_writer {
 public:
  explicit background_writer(std::size_t max_queued = std::numeric_limits<std::size_t>::max())
      : max_queued_(max_queued), thread_([this] { loop(); }) {}
  ~background_writer() {
    {
      std::lock_guard lock(mu_);
      closing_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  background_writer(const background_writer&) = delete;
  background_writer& operator=(const background_writer&) = delete;

  void post(std::function<void()> job) {
    {
      std::unique_lock lock(mu_);
      room_.wait(lock, [this] { return jobs_.size() < max_queued_; });
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);  // this thread only; best effort
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return closing_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // closing, and nothing left to write
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      room_.notify_all();
      job();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_, room_;
  std::deque<std::function<void()>> jobs_;
  bool closing_ = false;
  const std::size_t max_queued_;
  std::thread thread_;  // last: started once the rest is ready
};

}  // namespace pipeworks
