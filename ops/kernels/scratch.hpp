// Per-thread scratch memory for the kernels: grows to the largest size asked for and is then
// reused, so hot loops allocate only the first time they see a size.
#pragma once
#include <cstddef>
#include <vector>

namespace pipeworks {

// One slot per use, so that a kernel holding a slot can call another kernel that holds another.
enum class scratch_slot { attention = 0, layernorm_row, count };

// A buffer of at least n elements of T, private to the calling thread, valid until the same
// thread asks for the same slot again. Contents are unspecified. Take a slot only inside a task
// body that does not wait on oneTBB work: a waiting thread may run another task that takes the
// same slot.
template <class T>
T* thread_scratch(std::size_t n, scratch_slot slot) {
  thread_local std::vector<T> buffers[static_cast<int>(scratch_slot::count)];
  std::vector<T>& buf = buffers[static_cast<int>(slot)];
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

}  // namespace pipeworks
