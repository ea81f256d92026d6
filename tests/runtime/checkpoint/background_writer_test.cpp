// background_writer runs its jobs in order on its own thread; with a bound, post waits while that
// many jobs wait behind the one being written, so checkpoints never pile up in memory.
#include "runtime/checkpoint/background_writer.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

using namespace pipeworks;

TEST_CASE("a bounded background writer makes post wait until a queued job starts", "[runtime][checkpoint]") {
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  std::promise<void> first_running;
  std::vector<int> order;
  std::mutex order_mu;
  auto record = [&](int k) {
    std::lock_guard lock(order_mu);
    order.push_back(k);
  };
  std::atomic<bool> third_posted{false};
  std::thread poster;
  {
    background_writer w(1);
    w.post([&] {
      first_running.set_value();
      go.wait();
      record(1);
    });
    first_running.get_future().wait();  // job 1 is being written
    w.post([&] { record(2); });          // job 2 waits behind it: the bound is reached
    poster = std::thread([&] {
      w.post([&] { record(3); });  // must wait until job 2 has started
      third_posted = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK_FALSE(third_posted.load());  // still held back while job 1 runs
    release.set_value();
    poster.join();
    CHECK(third_posted.load());
  }  // the destructor waits for every job
  CHECK(order == std::vector<int>{1, 2, 3});
}

TEST_CASE("an unbounded background writer takes every post at once", "[runtime][checkpoint]") {
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  std::atomic<int> done{0};
  {
    background_writer w;
    for (int i = 0; i < 10; ++i)
      w.post([&] {
        go.wait();
        ++done;
      });
    release.set_value();
  }
  CHECK(done.load() == 10);
}
