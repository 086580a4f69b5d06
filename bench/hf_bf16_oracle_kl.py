"""The CUDA gate's measure applied to Hugging Face transformers itself: each oracle model run
in bf16 (weights and activations) and in fp32, teacher-forced over the fixture's prompts
and greedy continuations, against the fixture's fp32 logits. Prints mean KL(oracle ‖ run),
top-1 agreement on the positions the oracle decides (top-2 gap >= 0.05), and how many
positions carry KL > 1e-2: the figures tandem's `CudaGate.Bf16LogitsAgreeWithTheFp32Oracle`
prints for its own bf16 path, so the two can be read side by side. Runs where torch and
transformers are (the GPU machine); prints figures, never a gate.

Usage: python3 bench/hf_bf16_oracle_kl.py [--write DIR] [tests/data/oracle] [arch ...]

With --write, each architecture's bf16 figures also go to DIR/<arch>/hf_bf16.json, the
file the CUDA gate reads beside the fixture: where transformers' own bf16 run misses the
gate's absolute bounds, tandem's bf16 run is held to transformers' figures instead.
"""
import json
import os
import sys

import torch
import transformers
from safetensors.torch import load_file

DECIDED = 0.05


def measure(model_dir, dtype, device):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=dtype, attn_implementation="eager").to(device).eval()
    golden = load_file(os.path.join(model_dir, "golden.safetensors"))
    prompts = len(json.load(open(os.path.join(model_dir, "golden.json")))["prompts"])
    kl_sum, positions, decided, agree, flips = 0.0, 0, 0, 0, 0
    for i in range(prompts):
        ids = torch.cat([golden[f"prompt.{i}"], golden[f"greedy.{i}"]]).long()[None].to(device)
        with torch.no_grad():
            ours = model(ids).logits[0].double().cpu()
        ref = golden[f"logits.{i}"].double()
        lr, lo = torch.log_softmax(ref, -1), torch.log_softmax(ours, -1)
        kl = (lr.exp() * (lr - lo)).sum(-1)
        top2 = ref.topk(2, -1).values
        is_decided = (top2[:, 0] - top2[:, 1]) >= DECIDED
        same = ours.argmax(-1) == ref.argmax(-1)
        kl_sum += kl.sum().item()
        positions += kl.numel()
        decided += int(is_decided.sum())
        agree += int((same & is_decided).sum())
        flips += int((kl > 1e-2).sum())
    return kl_sum / positions, agree / max(decided, 1), decided, flips, positions


def write(out_dir, arch, kl, top1, decided, positions):
    os.makedirs(os.path.join(out_dir, arch), exist_ok=True)
    figures = {
        "what": "transformers in bf16 (weights and activations) against the fp32 oracle, "
                "teacher-forced over the fixture: bench/hf_bf16_oracle_kl.py",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "mean_kl": kl,
        "top1_decided": top1,
        "decided_positions": decided,
        "positions": positions,
    }
    with open(os.path.join(out_dir, arch, "hf_bf16.json"), "w") as f:
        json.dump(figures, f, indent=2)
        f.write("\n")


def main():
    args = sys.argv[1:]
    out_dir = None
    if args[:1] == ["--write"]:
        out_dir, args = args[1], args[2:]
    root = args[0] if args else "tests/data/oracle"
    archs = args[1:] or sorted(os.listdir(root))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, {device}")
    for arch in archs:
        d = os.path.join(root, arch)
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            try:
                kl, top1, decided, flips, n = measure(d, dtype, device)
                print(f"[ {arch:<10} ] HF {name}: mean KL {kl:.2e}, top-1 {top1:.4f} of {decided} "
                      f"decided positions, {flips} of {n} positions with KL > 1e-2", flush=True)
                if out_dir and name == "bf16":
                    write(out_dir, arch, kl, top1, decided, n)
            except Exception as e:  # an architecture this transformers cannot load
                print(f"[ {arch:<10} ] HF {name}: failed: {e}", flush=True)


if __name__ == "__main__":
    main()
