// memory_account: the host memory one rank's tensors hold, charged as they are allocated and
// credited as they are freed, with the limit it may not pass (the run's --memory-limit).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace pipeworks {

class memory_account {
 public:
  // who names the holder in the error ("rank 3"); limit 0: none.
  memory_account(std::string who, std::int64_t limit);

  // Adds n bytes; over the limit, takes nothing and throws a pipeworks_error naming the holder,
  // the bytes it held and asked for, and the limit.
  void charge(std::size_t n);
  void credit(std::size_t n);

  // The holder is gone: allocations no longer charge it (a thread that still names it forgets it).
  void close() { closed_.store(true, std::memory_order_relaxed); }
  bool closed() const { return closed_.load(std::memory_order_relaxed); }

  std::int64_t in_use() const { return in_use_.load(std::memory_order_relaxed); }
  std::int64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  std::int64_t limit() const { return limit_; }

 private:
  std::string who_;
  std::int64_t limit_;
  std::atomic<std::int64_t> in_use_{0}, peak_{0};
  std::atomic<bool> closed_{false};
};

// The account the calling thread's host allocations are charged to (empty: none, or a closed one,
// which the thread then forgets).
std::shared_ptr<memory_account> current_account();

// Charges the calling thread's host allocations to `account` from now on (empty: to none).
void set_current_account(std::shared_ptr<memory_account> account);

// Charges the calling thread's host allocations to `account` while it lives; then the previous
// account again.
class account_scope {
 public:
  explicit account_scope(std::shared_ptr<memory_account> account);
  ~account_scope();
  account_scope(const account_scope&) = delete;
  account_scope& operator=(const account_scope&) = delete;

 private:
  std::shared_ptr<memory_account> previous_;
};

}  // namespace pipeworks
