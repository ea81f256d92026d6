// Test helper: polls a condition until it holds, with a two-minute guard against a hang (a
// guard, never a deadline a test relies on).
#pragma once
#include <chrono>
#include <thread>

namespace pipeworks::test {

// Polls `ready` until it holds; false after two minutes.
template <class F>
bool eventually(F ready) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace pipeworks::test
