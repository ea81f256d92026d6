#!/usr/bin/python3
"""PyTorch's ms per forward and backward for the layers bench_layers times, at gpt-small sizes
(B=8, T=128, C=256, NH=4, V=256), so the two tables can be read side by side.
Run: /usr/bin/python3 bench/torch_layers.py [--threads 2]"""
import argparse
import time

import torch
import torch.nn.functional as F


def time_ms(fn, rounds):
    fn()
    t0 = time.perf_counter()
    fn()
    once = (time.perf_counter() - t0) * 1e3
    reps = max(1, int(20.0 / max(once, 1e-3)))
    ms = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        ms.append((time.perf_counter() - t0) * 1e3 / reps)
    return sorted(ms)[len(ms) // 2]


def attention(qkv, B, T, C, NH):
    q, k, v = qkv.split(C, dim=2)
    q, k, v = (t.view(B, T, NH, C // NH).transpose(1, 2) for t in (q, k, v))
    att = (q @ k.transpose(-2, -1)) * (1.0 / (C // NH) ** 0.5)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return (att @ v).transpose(1, 2).contiguous().view(B, T, C)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    B, T, C, NH, V, L = 8, 128, 256, 4, 256, 8
    N = B * T
    x = torch.randn(B, T, C, requires_grad=True)
    tokens = torch.randint(0, V, (B, T))
    wte = torch.randn(V, C, requires_grad=True)
    wpe = torch.randn(T, C, requires_grad=True)
    lnw = torch.ones(C, requires_grad=True)
    lnb = torch.zeros(C, requires_grad=True)

    def layer(name, per_step, fwd, inp_shape=None):
        inp = torch.randn(*inp_shape, requires_grad=True) if inp_shape else None
        f_ms = time_ms(lambda: fwd(inp), a.rounds)
        with torch.no_grad():
            out = fwd(inp)
        dy = torch.randn_like(out) if out.dim() > 0 else torch.tensor(1.0)

        def bwd():
            y = fwd(inp)
            y.backward(dy)
        # backward alone: time forward+backward, minus forward
        fb_ms = time_ms(bwd, a.rounds)
        return name, per_step, f_ms, fb_ms - f_ms

    def linear(c, oc, bias=True):
        w = torch.randn(oc, c, requires_grad=True)
        b = torch.randn(oc, requires_grad=True) if bias else None
        return lambda inp: F.linear(inp, w, b)

    rows = [
        layer("embedding", 1, lambda _: wte[tokens] + wpe[torch.arange(T)]),
        layer("layernorm", 2 * L + 1, lambda i: F.layer_norm(i, (C,), lnw, lnb, 1e-5), (B, T, C)),
        layer("linear c_attn C->3C", L, linear(C, 3 * C), (B, T, C)),
        layer("attention", L, lambda i: attention(i, B, T, C, NH), (B, T, 3 * C)),
        layer("linear c_proj C->C", L, linear(C, C), (B, T, C)),
        layer("linear c_fc C->4C", L, linear(C, 4 * C), (B, T, C)),
        layer("gelu 4C", L, lambda i: F.gelu(i, approximate="tanh"), (B, T, 4 * C)),
        layer("linear mlp c_proj 4C->C", L, linear(4 * C, C), (B, T, 4 * C)),
        layer("lm_head C->V (out_in)", 1, linear(C, V, bias=False), (B, T, C)),
        layer("cross_entropy V", 1, lambda i: F.cross_entropy(i.view(N, V), tokens.view(N)), (B, T, V)),
    ]
    del x, lnw, lnb
    print(f"torch_layers  torch {torch.__version__}  B={B} T={T} C={C} NH={NH} V={V}  threads={a.threads}")
    print(f"{'layer':<26} {'x/step':>6} {'fwd ms':>9} {'bwd ms':>9} {'step ms':>11}")
    total = 0.0
    for name, per, f, b in rows:
        total += per * (f + b)
        print(f"{name:<26} {per:>6} {f:>9.3f} {b:>9.3f} {per * (f + b):>11.2f}")
    print(f"sum over a {L}-layer step (no residual adds, no optimizer): {total:.1f} ms")


if __name__ == "__main__":
    main()
