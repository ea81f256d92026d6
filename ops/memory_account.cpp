// The per-thread current account and the checked charge.
#include "ops/memory_account.hpp"

#include <utility>

#include "base/result.hpp"

namespace pipeworks {

namespace {
thread_local std::shared_ptr<memory_account> current;
}

memory_account::memory_account(std::string who, std::int64_t limit)
    : who_(std::move(who)), limit_(limit) {}

void memory_account::charge(std::size_t n) {
  const auto bytes = static_cast<std::int64_t>(n);
  const std::int64_t now = in_use_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (limit_ > 0 && now > limit_) {
    in_use_.fetch_sub(bytes, std::memory_order_relaxed);
    throw pipeworks_error(who_ + " would hold " + std::to_string(now) + " bytes of tensors (" +
                          std::to_string(now - bytes) + " held, " + std::to_string(bytes) +
                          " more asked for), over its memory limit of " + std::to_string(limit_) +
                          " bytes (runtime.memory_limit): give more, or hold less with "
                          "recomputation (runtime.recompute), ZeRO (runtime.zero) or more stages");
  }
  std::int64_t seen = peak_.load(std::memory_order_relaxed);
  while (now > seen && !peak_.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

void memory_account::credit(std::size_t n) {
  in_use_.fetch_sub(static_cast<std::int64_t>(n), std::memory_order_relaxed);
}

std::shared_ptr<memory_account> current_account() {
  if (current && current->closed()) current.reset();
  return current;
}

void set_current_account(std::shared_ptr<memory_account> account) { current = std::move(account); }

account_scope::account_scope(std::shared_ptr<memory_account> account)
    : previous_(std::exchange(current, std::move(account))) {}

account_scope::~account_scope() { current = std::move(previous_); }

}  // namespace pipeworks
