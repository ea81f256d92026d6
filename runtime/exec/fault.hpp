// Test-only fault injection: when the named replica reaches the named action it throws
// (exception), turns the action's output into NaN (nan), or stops without a word (kill).
#pragma once
#include <cstdint>
#include <limits>

#include "ops/device/device_memory.hpp"
#include "ops/tensor.hpp"
#include "runtime/action.hpp"

namespace pipeworks {

enum class fault_kind : std::uint8_t { none, exception, nan, kill };
struct fault_injection {
  fault_kind kind = fault_kind::none;
  int replica = 0;
  action at;  // the action that fails (its stage names the virtual stage)
};

inline bool fault_at(const fault_injection& f, fault_kind k, int replica, const action& a) {
  return f.kind == k && f.replica == replica && f.at == a;
}

// Every value of t becomes NaN (the nan fault); a GPU tensor through a host copy.
template <class T>
void poison(tensor& t) {
  if (t.where().kind != device_kind::cpu) {
    tensor host = t.copy_to(device::cpu());
    poison<T>(host);
    copy_bytes(t.bytes(), t.where(), host.bytes(), device::cpu(), t.nbytes(), t.stream());
    wait_stream(t.where(), t.stream());
    return;
  }
  for (T& x : t.span<T>()) x = std::numeric_limits<T>::quiet_NaN();
}

}  // namespace pipeworks
