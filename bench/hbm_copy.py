#!/usr/bin/env python3
"""The card's HBM copy bandwidth (BENCHMARKS.md's ceiling, read + write counted), measured
with PyTorch on the GPU machine, and what it makes of the 8B shape's decode-b1 rooflines.

    python3 bench/hbm_copy.py [GiB]        (default 4 GiB a buffer; needs torch + a GPU)

The rooflines are bytes per token / bandwidth: bf16 16.06 GB of weights; FP8 7.0 GB of
e4m3 linears and the 16-bit lm_head (1.05 GB), 8.05 GB. Issue 45's decode-b1 bar in FP8
is 0.85 of that roofline on cards other than the H200 (470 tok/s there)."""
import sys

import torch

BF16_BYTES = 16.06e9
FP8_BYTES = 8.05e9


def copy_tb_per_s(gib: float, reps: int = 20) -> float:
    n = int(gib * (1 << 30))
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(3):  # three rounds of `reps` copies, the fastest round
        torch.cuda.synchronize()
        start.record()
        for _ in range(reps):
            dst.copy_(src)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / reps)
    return 2 * n / best / 1e12


def main() -> None:
    gib = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
    bw = copy_tb_per_s(gib)
    name = torch.cuda.get_device_name()
    print(f"{name}: HBM copy {bw:.2f} TB/s (read + write, {gib:g} GiB buffers)")
    for label, size in (("bf16", BF16_BYTES), ("FP8", FP8_BYTES)):
        roof = bw * 1e12 / size
        print(f"8B decode-b1 roofline, {label}: {roof:.0f} tok/s; 0.85 of it {0.85 * roof:.0f}")


if __name__ == "__main__":
    main()
