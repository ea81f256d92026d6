// bf16 copies of fp32 operands for the matrix products of --bf16 (round to nearest even), in
// scratch memory from the rank's caching allocator, stream-ordered on the rank's stream.
#pragma once
#include <cstddef>
#include <cstdint>

namespace pipeworks {
class caching_allocator;
}

namespace pipeworks::cuda {

// dst (n, bf16) = src (n, fp32) rounded to nearest even; on `stream` (a cudaStream_t).
void to_bf16(void* dst, const float* src, std::int64_t n, void* stream);

// `bytes` of scratch memory for work queued on `stream`: from `memory` (the rank's caching
// allocator, whose peak then counts it) or, without one, cudaMallocAsync on the stream. Given
// back when it goes: the rank's later work is ordered after the work that used it.
class gpu_scratch {
 public:
  gpu_scratch(caching_allocator* memory, std::size_t bytes, void* stream);
  ~gpu_scratch();
  gpu_scratch(const gpu_scratch&) = delete;
  gpu_scratch& operator=(const gpu_scratch&) = delete;
  void* get() const { return p_; }

 private:
  caching_allocator* memory_;
  void* stream_;
  void* p_ = nullptr;
};

// A bf16 copy of src (n): scratch filled by to_bf16.
class bf16_copy : public gpu_scratch {
 public:
  bf16_copy(caching_allocator* memory, const float* src, std::int64_t n, void* stream)
      : gpu_scratch(memory, static_cast<std::size_t>(n > 0 ? n : 1) * 2, stream) {
    to_bf16(get(), src, n, stream);
  }
};

}  // namespace pipeworks::cuda
