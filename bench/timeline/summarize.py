#!/usr/bin/env python3
"""Where a window of a kernel timeline's wall time went (bench/timeline/kernel_timeline.cpp).

Kernels are taken in start order. Each one is charged with how far it moved the frontier
(the latest end so far): end - frontier when it ends later, else nothing; a start after
the frontier leaves the GPU idle, charged as the gap before that kernel. So the charges
add up to the window's wall time, and a chain of kernels overlapped by programmatic
dependent launch is charged for what each adds to it, not for how long each sat resident.

  summarize.py timeline.csv [--graph-only] [--from-frac F]
    --graph-only  kernels launched from CUDA graphs alone (decode steps)
    --from-frac   drop the window's first F of its kernels (warm-up, prefill)
"""
import argparse
import collections
import csv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--graph-only", action="store_true")
    ap.add_argument("--from-frac", type=float, default=0.0)
    args = ap.parse_args()
    rows = []
    with open(args.csv) as f:
        for r in csv.DictReader(f):
            if args.graph_only and int(r["graph_node"]) == 0:
                continue
            rows.append((int(r["start_ns"]), int(r["end_ns"]), r["name"]))
    rows.sort()
    rows = rows[int(len(rows) * args.from_frac):]
    if not rows:
        print("no kernels in the window")
        return
    count = collections.Counter()
    resident = collections.Counter()
    advance = collections.Counter()
    gap = collections.Counter()
    frontier = rows[0][0]
    for start, end, name in rows:
        count[name] += 1
        resident[name] += end - start
        if start > frontier:
            gap[name] += start - frontier
            frontier = start
        if end > frontier:
            advance[name] += end - frontier
            frontier = end
    wall = frontier - rows[0][0]
    print(f"{len(rows)} kernels, {wall / 1e6:.3f} ms of wall time")
    print(f"{'kernel':<60} {'calls':>7} {'resident us':>12} {'adds us':>9} {'gap us':>8} {'share':>6}")
    names = sorted(count, key=lambda n: -(advance[n] + gap[n]))
    for n in names:
        per = count[n]
        print(f"{n[:60]:<60} {per:>7} {resident[n] / per / 1e3:>12.2f} {advance[n] / per / 1e3:>9.2f} "
              f"{gap[n] / per / 1e3:>8.2f} {100 * (advance[n] + gap[n]) / wall:>5.1f}%")


if __name__ == "__main__":
    main()
