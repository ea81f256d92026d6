# The PyTorch baselines on a GPU for the CUDA issue: one GPT training step (forward, backward,
# AdamW) of gpt-small and of a GPT-2-124M shape (context 1024, 12 layers, 12 heads, width 768,
# vocabulary 256), eager (attention materialised, as pipeworks does it), eager with
# F.scaled_dot_product_attention and torch.compile of that, timed with CUDA events; and the
# cuBLAS rate (TFLOP/s) of the model's own GEMM shapes, for the achieved-rate target. Prints one
# JSON line per measurement. Runs on the CPU too (no compile, no events), to check the script.
# --bf16: the step under torch.autocast(bfloat16) (fp32 weights and optimizer, as pipeworks
# --bf16) and the GEMM rate on bf16 operands.
import argparse
import contextlib
import json
import time

import torch

from torch_gpt_step import GPT

SHAPES = {  # name: (ctx, layers, heads, width, batch)
    "gpt-small": (128, 8, 4, 256, 8),
    "gpt2-124m": (1024, 12, 12, 768, 8),
}


def timer(device):
    """Returns f(step) -> seconds of one call, synchronised on the GPU."""
    if device.type != "cuda":
        def cpu(fn):
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
        return cpu

    def gpu(fn):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1000.0
    return gpu


def step_time(shape, device, mode, tf32, bf16, warmup, steps):
    ctx, layers, heads, width, batch = SHAPES[shape]
    torch.manual_seed(0)
    # eager: attention as pipeworks computes it (the T x T probabilities materialised); sdpa:
    # eager with F.scaled_dot_product_attention (flash attention on the GPU), PyTorch's fastest
    # eager; compile: torch.compile of the sdpa model.
    model = GPT(ctx, layers, heads, width, sdpa=mode in ("sdpa", "compile")).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    idx = torch.randint(0, 256, (batch, ctx), device=device)
    tgt = torch.randint(0, 256, (batch, ctx), device=device)
    forward = torch.compile(model) if mode == "compile" else model

    def autocast():
        return (torch.autocast(device_type=device.type, dtype=torch.bfloat16) if bf16
                else contextlib.nullcontext())

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = forward(idx, tgt)
        loss.backward()
        opt.step()

    time_one = timer(device)
    for _ in range(warmup):
        time_one(step)
    times = sorted(time_one(step) for _ in range(steps))
    params = sum(p.numel() for p in model.parameters())
    return {"measure": "step", "shape": shape, "mode": mode, "tf32": tf32, "bf16": bf16,
            "device": str(device),
            "params": params, "ms_median": 1000 * times[len(times) // 2], "ms_min": 1000 * times[0]}


def gemm_rate(shape, device, tf32, bf16, repeats):
    """cuBLAS (torch.matmul) on the model's forward GEMMs (N = batch*ctx rows), as TFLOP/s."""
    ctx, _, _, width, batch = SHAPES[shape]
    n = batch * ctx
    shapes = [(n, width, 3 * width), (n, width, width), (n, width, 4 * width), (n, 4 * width, width),
              (n, width, 256)]
    time_one = timer(device)
    flops = secs = 0.0
    for m, k, o in shapes:
        dt = torch.bfloat16 if bf16 else torch.float32
        a = torch.randn(m, k, device=device, dtype=dt)
        b = torch.randn(k, o, device=device, dtype=dt)
        for _ in range(3):
            time_one(lambda: a @ b)
        t = sorted(time_one(lambda: a @ b) for _ in range(repeats))[repeats // 2]
        flops += 2.0 * m * k * o
        secs += t
    return {"measure": "gemm", "shape": shape, "tf32": tf32, "bf16": bf16, "device": str(device),
            "tflops": flops / secs / 1e12}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--shapes", default="gpt-small,gpt2-124m")
    ap.add_argument("--modes", default="eager,sdpa,compile")
    ap.add_argument("--tf32", action="store_true", help="let matmuls use TF32 tensor cores")
    ap.add_argument("--bf16", action="store_true",
                    help="autocast to bfloat16 (fp32 weights and optimizer); GEMM rate in bf16")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    device = torch.device(a.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
        print(json.dumps({"gpu": torch.cuda.get_device_name(device), "torch": torch.__version__}))
    for shape in a.shapes.split(","):
        print(json.dumps(gemm_rate(shape, device, a.tf32, a.bf16, 9)), flush=True)
        for mode in a.modes.split(","):
            if mode == "compile" and (device.type != "cuda" or not hasattr(torch, "compile")):
                continue  # torch.compile is measured on the GPU (PyTorch 2.x) only
            print(json.dumps(step_time(shape, device, mode, a.tf32, a.bf16, a.warmup, a.steps)),
                  flush=True)


if __name__ == "__main__":
    main()
