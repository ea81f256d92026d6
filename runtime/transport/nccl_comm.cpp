// nccl_comm on NCCL's non-blocking communicators (ncclConfig_t::blocking = 0): each call may
// return ncclInProgress, and ncclCommGetAsyncError is polled until it settles or the patience runs
// out, when ncclCommAbort ends the communicator.
#include "runtime/transport/nccl_comm.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <thread>

#include "base/result.hpp"

namespace pipeworks {
namespace {

ncclComm_t as_comm(void* c) { return static_cast<ncclComm_t>(c); }

std::string nccl_text(ncclResult_t r) { return std::string(ncclGetErrorString(r)); }

}  // namespace

std::vector<std::uint8_t> new_nccl_id() {
  ncclUniqueId id;
  if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
    throw pipeworks_error("ncclGetUniqueId failed: " + nccl_text(r));
  std::vector<std::uint8_t> bytes(sizeof id.internal);
  std::memcpy(bytes.data(), id.internal, bytes.size());
  return bytes;
}

nccl_comm::nccl_comm(const std::vector<std::uint8_t>& id, int nranks, int rank, int device,
                     std::chrono::milliseconds patience)
    : rank_(rank), nranks_(nranks), patience_(patience) {
  ncclUniqueId uid;
  if (id.size() != sizeof uid.internal)
    throw pipeworks_error("an NCCL id has " + std::to_string(sizeof uid.internal) + " bytes, not " +
                          std::to_string(id.size()));
  if (nranks < 1 || rank < 0 || rank >= nranks)
    throw pipeworks_error("NCCL rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                          " does not exist");
  std::memcpy(uid.internal, id.data(), id.size());
  if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess)
    throw pipeworks_error("cudaSetDevice(" + std::to_string(device) + ") failed: " +
                          cudaGetErrorString(e));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t c = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&c, nranks, uid, rank, &config);
  comm_ = c;
  settle(r, "joining the NCCL communicator (the other ranks did not join in time?)");
}

nccl_comm::~nccl_comm() {
  if (comm_ == nullptr) return;
  if (!aborted_) ncclCommAbort(as_comm(comm_));  // a clean end needs no flush: nothing is pending
}

void nccl_comm::settle(int result, const char* what) {
  auto r = static_cast<ncclResult_t>(result);
  const auto deadline = std::chrono::steady_clock::now() + patience_;
  while (r == ncclInProgress && comm_ != nullptr) {
    if (std::chrono::steady_clock::now() > deadline) {
      abort_communicator();
      throw pipeworks_error(std::string(what) + ": NCCL gave no answer within " +
                            std::to_string(patience_.count()) + " ms; the communicator was aborted");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    ncclCommGetAsyncError(as_comm(comm_), &r);
  }
  if (r != ncclSuccess) {
    abort_communicator();
    throw pipeworks_error(std::string(what) + ": " + nccl_text(r));
  }
}

void nccl_comm::all_reduce_sum(float* data, std::size_t count, void* stream) {
  settle(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, as_comm(comm_),
                       static_cast<cudaStream_t>(stream)),
         "NCCL all-reduce");
}

void nccl_comm::group_start() { settle(ncclGroupStart(), "NCCL group start"); }
void nccl_comm::group_end() { settle(ncclGroupEnd(), "NCCL group end"); }

void nccl_comm::send(const float* data, std::size_t count, int peer, void* stream) {
  settle(ncclSend(data, count, ncclFloat32, peer, as_comm(comm_), static_cast<cudaStream_t>(stream)),
         "NCCL send");
}

void nccl_comm::recv(float* data, std::size_t count, int peer, void* stream) {
  settle(ncclRecv(data, count, ncclFloat32, peer, as_comm(comm_), static_cast<cudaStream_t>(stream)),
         "NCCL receive");
}

void nccl_comm::wait(void* stream) {
  const auto deadline = std::chrono::steady_clock::now() + patience_;
  for (;;) {
    const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream));
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady)
      throw pipeworks_error(std::string("waiting for NCCL work: ") + cudaGetErrorString(e));
    ncclResult_t r = ncclSuccess;
    ncclCommGetAsyncError(as_comm(comm_), &r);
    if (r != ncclSuccess && r != ncclInProgress) {
      abort_communicator();
      throw pipeworks_error("NCCL failed (a peer lost?): " + nccl_text(r) +
                            "; the communicator was aborted");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      abort_communicator();
      throw pipeworks_error("NCCL work of rank " + std::to_string(rank_) + " of " +
                            std::to_string(nranks_) + " did not finish within " +
                            std::to_string(patience_.count()) +
                            " ms (a peer lost?); the communicator was aborted");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void nccl_comm::abort_communicator() {
  if (comm_ == nullptr || aborted_) return;
  aborted_ = true;
  ncclCommAbort(as_comm(comm_));
}

}  // namespace pipeworks
