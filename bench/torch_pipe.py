# The PyTorch baseline for bench/pipeline_speedup.sh: bench/torch_gpt_step.py's gpt-small cut in
# two and trained with torch.distributed.pipeline.sync.Pipe (chunks = m) on CPU. Prints JSON.
import argparse
import json
import os
import sys

import torch
import torch.distributed.rpc as rpc
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipeline.sync import Pipe

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt_step import GPT, time_steps  # noqa: E402


class Embed(nn.Module):
    """pipeworks' embedding block: token plus position embeddings."""

    def __init__(self, gpt):
        super().__init__()
        self.wte, self.wpe = gpt.wte, gpt.wpe

    def forward(self, idx):
        return self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))


class Head(nn.Module):
    """pipeworks' head block without the loss: final norm and logits (the loss is taken outside)."""

    def __init__(self, gpt):
        super().__init__()
        self.ln_f, self.lm_head = gpt.ln_f, gpt.lm_head

    def forward(self, x):
        return self.lm_head(self.ln_f(x))


def two_stages(gpt, cut):
    """Embedding and layers [0, cut) | layers [cut, L) and the head. On CPU Pipe makes a partition
    of every top-level child, so the model is exactly two children."""
    first = nn.Sequential(Embed(gpt), *gpt.h[:cut])
    second = nn.Sequential(*gpt.h[cut:], Head(gpt))
    return nn.Sequential(first, second)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--microbatches", type=int, default=8, help="Pipe's chunks")
    ap.add_argument("--cut", type=int, default=4, help="first transformer layer of stage 2")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--port", type=int, default=29511)
    a = ap.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(a.port))
    rpc.init_rpc("worker", rank=0, world_size=1)  # Pipe needs the RPC framework, even on one host
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    gpt = GPT(a.ctx, a.layers, a.heads, a.width)
    # checkpoint="never": keep activations for backward, as pipeworks does (no recomputation).
    model = Pipe(two_stages(gpt, a.cut), chunks=a.microbatches, checkpoint="never")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    idx = torch.randint(0, 256, (a.batch, a.ctx))
    tgt = torch.randint(0, 256, (a.batch, a.ctx))

    def step():
        opt.zero_grad(set_to_none=True)
        logits = model(idx).local_value()
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.view(-1))
        loss.backward()
        opt.step()
        return loss.item()

    times = time_steps(step, a.warmup, a.steps)
    rpc.shutdown()
    print(json.dumps({"impl": "pytorch " + torch.__version__ + " Pipe", "threads": a.threads,
                      "batch": a.batch, "microbatches": a.microbatches, "cut": a.cut,
                      "ms_per_step_median": 1000 * times[len(times) // 2],
                      "ms_per_step_min": 1000 * times[0]}))


if __name__ == "__main__":
    main()
