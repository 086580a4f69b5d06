#!/usr/bin/env python3
"""Causal bf16 attention through PyTorch's SDPA with the cuDNN backend forced (and the
flash backend beside it), on issue 26's shapes: one sequence of 8k / 32k / 128k tokens,
32 query heads over 8 kv heads, head dim 128. TFLOP/s count 4 * (visible query-key
pairs) * Dh * Hq with n(n+1)/2 pairs, as bench/cuda_attention_bench.cpp counts them.
Each figure is the median of 7 repetitions of a batch of calls timed with CUDA events.
The kv heads are expanded to 32 before timing (GQA layout does not change the work).
Prints figures; never a gate.
    usage: python3 bench/sdpa_cudnn_bench.py [8192 32768 131072]
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

HQ, HKV, DH = 32, 8, 128


def time_call(fn, calls):
    fn()  # warm-up (and the backend's plan)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(7):
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop) / 1e3 / calls)
    return sorted(times)[len(times) // 2]


def bench(n, backend, name):
    q = torch.randn(1, HQ, n, DH, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, HKV, n, DH, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, HKV, n, DH, device="cuda", dtype=torch.bfloat16)
    k = k.repeat_interleave(HQ // HKV, dim=1).contiguous()
    v = v.repeat_interleave(HQ // HKV, dim=1).contiguous()
    flops = 4.0 * (n * (n + 1) / 2) * DH * HQ
    calls = 1 if n >= 131072 else 2 if n >= 32768 else 10
    try:
        with sdpa_kernel([backend]):
            t = time_call(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), calls)
        print(f"sdpa-{name:<6} tok={n:<6} Hq={HQ} Hkv={HKV} Dh={DH} {t * 1e6:11.1f} us "
              f"{flops / t * 1e-12:7.1f} TFLOP/s")
    except RuntimeError as e:  # the backend refuses the shape on this install
        print(f"sdpa-{name:<6} tok={n:<6} unavailable: {str(e).splitlines()[0][:120]}")


def main():
    sizes = [int(x) for x in sys.argv[1:]] or [8192, 32768, 131072]
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}")
    for n in sizes:
        bench(n, SDPBackend.CUDNN_ATTENTION, "cudnn")
        bench(n, SDPBackend.FLASH_ATTENTION, "flash")
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
