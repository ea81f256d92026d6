// The programs PyTorch's torch.distributed.pipelining can load from CSV: one pipeline (one
// replica) for one optimizer step, as _PipelineScheduleRuntime._load_csv reads them.
#pragma once
#include <string>
#include <vector>

#include "base/result.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

// PyTorch's two CSV formats. compute_only (_load_csv(f)): F, B, I and W only; PyTorch's own
// lowering adds REDUCE_GRAD and the SEND/RECV pairs. compute_comms (_load_csv(f,
// format="compute_comms")): the lowered program with SEND/RECV and REDUCE_GRAD, no empty cell.
enum class pytorch_form { compute_only, compute_comms };

// p rows, one per device of `replica`, holding the actions of optimizer step `step` with
// microbatch ids renumbered to 0..m-1 (PyTorch's step() runs m microbatches, then the user steps
// the optimizer). STEP is left out; compute_comms puts a REDUCE after each stage's m-th B or W,
// as PyTorch's own lowering does. An error when replica or step is out of range, or when the
// schedule has no flush between steps (a rank starts step t+1 before it ends step t), so that
// no file for one step describes what runs.
result<std::vector<program>> pytorch_programs(const schedule& s, pytorch_form form, int replica,
                                              int step);

// CSV text of rows from pytorch_programs: REDUCE is spelled REDUCE_GRAD.
std::string to_pytorch_csv(const std::vector<program>& rows);

}  // namespace pipeworks
