#!/usr/bin/env python3
"""Trains a draft model for models/tiny-kjv on the CPU (speculative decoding's draft:
docs/speculative-decoding.md), when no GPU machine is at hand:

    python3 tools/tiny-model/train_draft_cpu.py --corpus .device/corpus --out models/tiny-kjv-draft \\
        [--seconds 900] [--tandem build/tandem]

Needs PyTorch (Debian's python3-torch 1.13, CPU: run it with /usr/bin/python3) and a built `tandem` (its tokenizer cuts the
corpus, so no Hugging Face package is needed). A Llama of ~1.2M parameters (hidden 128,
2 layers, 2 heads / 1 KV head, MLP 384, tied embeddings; tiny-kjv is 15M) on the same
corpus (corpus.py: documents joined by <|endoftext|>; the ChatML share train.py adds is
left out) and the same tokenizer (tiny-kjv's tokenizer.json, copied, not retrained), fp32
on the CPU for a wall-clock budget, AdamW with a cosine schedule; the checkpoint with the
best validation loss is written as a Hugging Face folder in bf16 (config.json,
generation_config.json, model.safetensors, tokenizer files, train_log.json). GPU training
of the same shape: tools/tiny-model/train_draft.sh.
"""
import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import time

import torch
import torch.nn.functional as F

EOT = 0  # <|endoftext|>


def tokenize(tandem, target, path):
    """The file's ids, its documents (split by two blank lines) joined by <|endoftext|>."""
    with open(path, encoding="utf-8") as f:
        text = f.read().replace("\n\n\n", "<|endoftext|>")
    tmp = path + ".eot.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    out = subprocess.run([tandem, "tokenize", "--model", target, "--file", tmp], check=True,
                         capture_output=True, text=True).stdout
    os.remove(tmp)
    return torch.tensor(json.loads(out), dtype=torch.long)


class Block(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        dh = a.hidden // a.heads
        self.heads, self.kv_heads, self.dh = a.heads, a.kv_heads, dh
        self.q = torch.nn.Linear(a.hidden, a.heads * dh, bias=False)
        self.k = torch.nn.Linear(a.hidden, a.kv_heads * dh, bias=False)
        self.v = torch.nn.Linear(a.hidden, a.kv_heads * dh, bias=False)
        self.o = torch.nn.Linear(a.heads * dh, a.hidden, bias=False)
        self.gate = torch.nn.Linear(a.hidden, a.intermediate, bias=False)
        self.up = torch.nn.Linear(a.hidden, a.intermediate, bias=False)
        self.down = torch.nn.Linear(a.intermediate, a.hidden, bias=False)
        self.norm1 = torch.nn.Parameter(torch.ones(a.hidden))
        self.norm2 = torch.nn.Parameter(torch.ones(a.hidden))

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        h = rms_norm(x, self.norm1)
        q = self.q(h).view(b, t, self.heads, self.dh).transpose(1, 2)
        k = self.k(h).view(b, t, self.kv_heads, self.dh).transpose(1, 2)
        v = self.v(h).view(b, t, self.kv_heads, self.dh).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.dh)
        causal = torch.ones(t, t, dtype=torch.bool).triu(1)
        a = scores.masked_fill(causal, float("-inf")).softmax(-1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(b, t, -1))
        h = rms_norm(x, self.norm2)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def rms_norm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, cos, sin):  # HF's rotate_half: the first and second halves of each head rotate
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Llama(torch.nn.Module):
    def __init__(self, a, vocab):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, a.hidden)
        self.blocks = torch.nn.ModuleList(Block(a) for _ in range(a.layers))
        self.norm = torch.nn.Parameter(torch.ones(a.hidden))
        dh = a.hidden // a.heads
        inv = 1.0 / (a.rope_theta ** (torch.arange(0, dh, 2).float() / dh))
        pos = torch.arange(a.ctx).float()[:, None] * inv[None, :]
        emb = torch.cat((pos, pos), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x, self.cos[:t], self.sin[:t])
        return rms_norm(x, self.norm) @ self.embed.weight.t()  # tied head


def batch_of(stream, n, ctx, gen):
    starts = torch.randint(0, len(stream) - ctx - 1, (n,), generator=gen)
    x = torch.stack([stream[s:s + ctx + 1] for s in starts.tolist()])
    return x[:, :-1], x[:, 1:]


@torch.no_grad()
def valid_nll(model, ids, ctx):
    model.eval()
    total, count = 0.0, 0
    for s in range(0, len(ids) - 1, ctx):
        w = ids[s:s + ctx + 1]
        if len(w) < 2:
            break
        logits = model(w[None, :-1])
        total += F.cross_entropy(logits[0], w[1:], reduction="sum").item()
        count += len(w) - 1
    model.train()
    return total / count


def hf_state(model, a):
    """The weights under Hugging Face Llama's names."""
    s = {"model.embed_tokens.weight": model.embed.weight, "model.norm.weight": model.norm}
    for i, b in enumerate(model.blocks):
        p = f"model.layers.{i}."
        s.update({p + "self_attn.q_proj.weight": b.q.weight, p + "self_attn.k_proj.weight": b.k.weight,
                  p + "self_attn.v_proj.weight": b.v.weight, p + "self_attn.o_proj.weight": b.o.weight,
                  p + "mlp.gate_proj.weight": b.gate.weight, p + "mlp.up_proj.weight": b.up.weight,
                  p + "mlp.down_proj.weight": b.down.weight, p + "input_layernorm.weight": b.norm1,
                  p + "post_attention_layernorm.weight": b.norm2})
    return s


def write_safetensors(path, tensors):
    """bf16 tensors in the safetensors format: a JSON header, then the raw bytes."""
    header, blobs, at = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to(torch.bfloat16).contiguous()
        raw = t.view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * ((8 - len(head) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for raw in blobs:
            f.write(raw)


def export(model, a, vocab, target, out, log):
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"), hf_state(model, a))
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": a.hidden,
              "intermediate_size": a.intermediate, "num_hidden_layers": a.layers,
              "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads,
              "head_dim": a.hidden // a.heads, "hidden_act": "silu", "max_position_embeddings": 1024,
              "rms_norm_eps": 1e-5, "rope_theta": a.rope_theta, "tie_word_embeddings": True,
              "attention_bias": False, "mlp_bias": False, "vocab_size": vocab, "bos_token_id": None,
              "eos_token_id": 2, "pad_token_id": 0, "dtype": "bfloat16"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    shutil.copy(os.path.join(target, "generation_config.json"), out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(target, name), out)
    with open(os.path.join(out, "train_log.json"), "w") as f:
        json.dump(log, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", default="models/tiny-kjv")
    ap.add_argument("--tandem", default="build/tandem")
    ap.add_argument("--seconds", type=float, default=900)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--intermediate", type=int, default=384)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--kv-heads", type=int, default=1)
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=4e-3)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    t0 = time.time()
    train = tokenize(a.tandem, a.target, os.path.join(a.corpus, "train.txt"))
    valid = tokenize(a.tandem, a.target, os.path.join(a.corpus, "valid.txt"))
    vocab = json.load(open(os.path.join(a.target, "config.json")))["vocab_size"]
    print(f"train {len(train)} tokens, valid {len(valid)} ({time.time() - t0:.0f} s)", flush=True)
    model = Llama(a, vocab)
    params = sum(p.numel() for p in model.parameters())
    print(f"{params / 1e6:.2f}M parameters", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1)
    gen = torch.Generator().manual_seed(a.seed)
    start, step, best, history = time.time(), 0, (math.inf, 0), []
    valid_sample = valid[: 8 * a.ctx + 1]  # a quick check while training; the full set at the end
    while time.time() - start < a.seconds:
        frac = min(1.0, (time.time() - start) / a.seconds)
        lr = a.lr * min(1.0, (step + 1) / 100) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batch_of(train, a.batch, a.ctx, gen)
        loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 100 == 0:
            v = valid_nll(model, valid_sample, a.ctx)
            history.append({"step": step, "seconds": round(time.time() - start), "train": loss.item(), "valid": v})
            print(f"step {step} {time.time() - start:.0f}s lr {lr:.2e} train {loss.item():.3f} valid {v:.3f}", flush=True)
            if v < best[0]:
                best = (v, step)
                best_state = {k: t.clone() for k, t in model.state_dict().items()}
    if best[1] > 0:
        model.load_state_dict(best_state)
    nll = valid_nll(model, valid, a.ctx)
    log = {"args": vars(a), "parameters": params, "train_tokens": len(train), "steps": step,
           "tokens_seen": step * a.batch * a.ctx, "seconds": round(time.time() - start),
           "best_step": best[1], "valid": {"mean_nll": nll, "perplexity": math.exp(nll), "window": a.ctx},
           "history": history, "torch": torch.__version__}
    export(model, a, vocab, a.target, a.out, log)
    print(f"valid mean NLL {nll:.4f} (perplexity {math.exp(nll):.1f}) over windows of {a.ctx}; wrote {a.out}")


if __name__ == "__main__":
    main()
