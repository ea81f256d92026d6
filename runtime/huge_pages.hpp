// Large arrays on 2 MiB transparent huge pages, for the passes that touch a few slots of every
// rank's rows in turn (the simulator, the validator and its program walk); not public API.
#pragma once
#include <cstddef>
#include <vector>

namespace pipeworks {

// Large blocks on 2 MiB transparent huge pages where the kernel allows it (huge_pages.cpp).
// A large simulation or walk touches a few slots of every rank's rows in turn; with 4 KiB pages
// that is a TLB miss per slot, and huge pages make it about three times faster. Small blocks
// come from operator new.
void* huge_allocate(std::size_t bytes);
void huge_deallocate(void* p, std::size_t bytes);
// Asks for huge pages under memory that is allocated but not yet touched (a reserved vector).
void advise_huge_pages(void* p, std::size_t bytes);

template <class T>
struct huge_page_allocator {
  using value_type = T;
  huge_page_allocator() = default;
  template <class U>
  huge_page_allocator(const huge_page_allocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(huge_allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) { huge_deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const huge_page_allocator<U>&) const { return true; }
};
template <class T>
using big_vector = std::vector<T, huge_page_allocator<T>>;

// An array whose elements are not initialised, on huge pages when large: untouched parts cost
// neither a write nor a page.
template <class T>
class raw_array {
 public:
  raw_array() = default;
  raw_array(const raw_array&) = delete;
  raw_array& operator=(const raw_array&) = delete;
  ~raw_array() { release(); }
  void reset(std::size_t n) {
    release();
    data_ = static_cast<T*>(huge_allocate(n * sizeof(T)));
    n_ = n;
  }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }

 private:
  void release() {
    if (data_ != nullptr) huge_deallocate(data_, n_ * sizeof(T));
    data_ = nullptr;
  }
  T* data_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace pipeworks
