#!/usr/bin/env python3
"""Compares two `tandem eval --json` runs of the same tasks item by item (a fast path
against its reference: CUDA bf16 against CPU f32, fp8 weights or KV against 16-bit).

    python3 tools/eval-tasks/compare_runs.py BASE.json NEW.json

For each task and metric: the base and new values, the difference new − base and its
paired standard error (items scored by both runs; the same formulas as tandem eval, on
per-item differences), and the base's own standard error. The gate the FP8 issue states:
perplexity within 1% and every task mean within 1 standard error of the base. Runs with
--limit are compared on the items both scored.
"""
import json
import math
import sys


def mean_se(xs):
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, None
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1)) / math.sqrt(n)


def ratio_se(sums, counts):
    """Σs / Σn with the windows-as-clusters standard error (eval/tasks/README.md)."""
    total, n = sum(sums), sum(counts)
    m = total / n
    if len(sums) < 2:
        return m, None
    w = len(sums)
    return m, math.sqrt(w / (w - 1) * sum((s - m * c) ** 2 for s, c in zip(sums, counts))) / n


def per_item(task, metric):
    if task["kind"] == "choice":
        key = "pred" if metric == "acc" else "pred_norm"
        return [float(it[key] == it["gold"]) for it in task["items"]]
    return [float(it["correct"]) for it in task["items"]]


def compare(base, new):
    rows = []
    for name, b in base.items():
        n = new.get(name)
        if n is None:
            continue
        if b["kind"] == "perplexity":
            k = min(len(b["windows"]), len(n["windows"]))
            counts = [w["scored"] for w in b["windows"][:k]]
            base_nll, base_se = ratio_se([w["nll"] for w in b["windows"][:k]], counts)
            new_nll = ratio_se([w["nll"] for w in n["windows"][:k]], counts)[0]
            diffs = [wn["nll"] - wb["nll"] for wb, wn in zip(b["windows"][:k], n["windows"][:k])]
            d, se = ratio_se(diffs, counts)
            rows.append((name, "nll", base_nll, new_nll, d, se, base_se))
            bp, np_ = math.exp(base_nll), math.exp(new_nll)
            rows.append((name, "perplexity", bp, np_, np_ - bp, None if se is None else bp * se,
                         None if base_se is None else bp * base_se))
            continue
        k = min(len(b["items"]), len(n["items"]))
        for metric in b["metrics"]:
            xb, xn = per_item(b, metric)[:k], per_item(n, metric)[:k]
            d, se = mean_se([y - x for x, y in zip(xb, xn)])
            (base, base_se), new_value = mean_se(xb), mean_se(xn)[0]
            rows.append((name, metric, base, new_value, d, se, base_se))
    return rows


def fmt(v):
    return "-" if v is None else f"{v:.4f}"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    runs = []
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as f:
            runs.append({t["task"]: t for t in json.load(f)["results"]})
    print(f"{'task':24s} {'metric':13s} {'base':>9s} {'new':>9s} {'new-base':>9s} {'± paired':>9s} {'base ±':>9s}")
    for name, metric, b, n, d, se, bse in compare(*runs):
        print(f"{name:24s} {metric:13s} {fmt(b):>9s} {fmt(n):>9s} {fmt(d):>9s} {fmt(se):>9s} {fmt(bse):>9s}")


if __name__ == "__main__":
    main()
