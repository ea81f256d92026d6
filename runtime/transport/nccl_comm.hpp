// NCCL between GPU ranks: the unique ID as plain bytes (it travels in the actor messages), a
// communicator made non-blocking so that a lost peer never hangs a stage (every wait polls with a
// deadline, and ncclCommAbort ends a communicator that missed it), and the operations the runtime
// uses: in-place all-reduce (sum) and point-to-point send and receive.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pipeworks {

// ncclUniqueId's bytes (NCCL_UNIQUE_ID_BYTES); made by one rank, given to every other.
std::vector<std::uint8_t> new_nccl_id();

class nccl_comm {
 public:
  // Joins the communicator `id` as `rank` of `nranks` on GPU `device`; waits at most `patience`
  // for the others (then aborts and throws, naming what was waited for).
  nccl_comm(const std::vector<std::uint8_t>& id, int nranks, int rank, int device,
            std::chrono::milliseconds patience);
  ~nccl_comm();
  nccl_comm(const nccl_comm&) = delete;
  nccl_comm& operator=(const nccl_comm&) = delete;

  // Enqueue on `stream` (a cudaStream_t; null: the default stream); wait() completes them.
  void all_reduce_sum(float* data, std::size_t count, void* stream);
  // Several sends and receives in one group (what NCCL needs for a rank that sends to itself or
  // exchanges with a peer): group_start, then send/recv, then group_end.
  void group_start();
  void group_end();
  void send(const float* data, std::size_t count, int peer, void* stream);
  void recv(float* data, std::size_t count, int peer, void* stream);
  // Until the stream's work is done; past `patience` the communicator is aborted and this throws.
  void wait(void* stream);
  // Ends the communicator at once, whatever is in flight (a peer was lost).
  void abort_communicator();
  bool aborted() const { return aborted_; }

 private:
  void settle(int result, const char* what);  // waits out ncclInProgress, throws on an error
  void* comm_ = nullptr;
  int rank_ = 0, nranks_ = 0;
  std::chrono::milliseconds patience_;
  bool aborted_ = false;
};

}  // namespace pipeworks
