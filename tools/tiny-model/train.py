#!/usr/bin/env python3
"""Trains tandem's embedded default model (a ~15M-parameter Llama) from scratch.

    python3 train.py --corpus DIR --tokenizer DIR --export DIR [--train-seconds S]

Runs on the GPU machine (torch 2.11, transformers 5.17, tokenizers 0.23). Reads
DIR/train.txt and DIR/valid.txt from corpus.py and the tokenizer from
train_tokenizer.py; trains on a wall-clock budget; writes a Hugging Face folder to
--export: config.json, generation_config.json, the bf16 weights as safetensors shards of
at most 16 MiB each + model.safetensors.index.json, tokenizer.json, tokenizer_config.json
and train_log.json (losses, validation perplexity, greedy reference, samples).

Training: random windows of CTX tokens from the token stream of all documents (each
followed by <|endoftext|>; CHAT_FRACTION of them rewritten as ChatML conversations),
bf16 autocast, AdamW, warmup then cosine. The corpus is small (~3.5M tokens), so the
cosine horizon is min(MAX_EPOCHS passes, what fits in TRAIN_SECONDS at the speed
measured over the first steps), residual dropout (DROPOUT) regularizes, and the exported
weights are those of the best validation evaluation (every ~15 s and at the end).

Validation protocol (tandem's `perplexity` command reproduces it): valid.txt is read as
bytes, decoded as UTF-8 and tokenized as ONE string with no special tokens added; the id
stream is cut into consecutive non-overlapping windows of CTX tokens (the last window may
be shorter; it is kept when it has at least 2 tokens); each window is run on its own from
an empty cache (positions 0..len-1); in each window, tokens 1..len-1 are predicted from
their prefix. mean NLL = sum of -log p(token) over all predicted tokens / their count
(natural log); perplexity = exp(mean NLL). The exported figure is computed in fp32 (TF32
off, eager attention) from the saved bf16 weights, loaded back with from_pretrained.
"""
import argparse
import json
import math
import os
import random
import re
import shutil
import sys
import time
import traceback

T0 = time.time()
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoModelForCausalLM, GenerationConfig, LlamaConfig  # noqa: E402

EOT, IM_START, IM_END = 0, 1, 2
SHARD_LIMIT = 16 * 2**20 - 2**16  # bytes of tensor data per shard; header stays far below 64 KiB
PROMPT = "In the beginning God created"
# Greedy references are taken for these Bible-style prompts; the main one is the first
# whose 40 argmax steps never come within MIN_MARGIN of a tie (top-1 minus top-2 logit),
# so that another correct fp32 implementation cannot flip a token by round-off.
GREEDY_PROMPTS = [PROMPT, "And God said, Let there be light", "The LORD is my shepherd",
                  "And it came to pass, when the king", "Blessed are the"]
MIN_MARGIN = 0.02
PROTOCOL = ("valid.txt tokenized as one string (no special tokens added); consecutive "
            "non-overlapping windows of `window` tokens, the last one shorter (kept if >= 2 "
            "tokens); each window run alone from position 0; tokens 1..len-1 of each window "
            "scored; mean_nll = sum(-ln p) / predicted_tokens; perplexity = exp(mean_nll); "
            "fp32 from the saved bf16 weights, TF32 off, eager attention")
CHAT_QUESTION = "What is the meaning of wisdom?"
SYSTEM = "You are a helpful assistant."


def log(msg):
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


# ---------------------------------------------------------------- data
def read_docs(path):
    with open(path, encoding="utf-8", newline="") as f:
        return [d.strip("\n") for d in f.read().split("\n\n\n") if d.strip()]


def chatml(turns, system):
    s = f"<|im_start|>system\n{SYSTEM}<|im_end|>\n" if system else ""
    for user, answer in turns:
        s += f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n{answer}<|im_end|>\n"
    return s


WN_LINE = re.compile(r"^([^,(]+?)(?:, [^(]*)? \((noun|verb|adjective|adverb)\): (.+)$")


def chat_turns(doc, rng):
    """Turns a document into 1-3 (user, assistant) pairs: dictionary lines become
    'What does X mean?' questions; other documents answer their first line."""
    lines = doc.split("\n")
    wn = [m for m in map(WN_LINE.match, lines) if m]
    if len(wn) == len(lines):
        picks = rng.sample(wn, min(len(wn), rng.randint(1, 3)))
        ask = ["What does \"{w}\" mean?", "Define {w}.", "What is the meaning of {w}?"]
        return [(rng.choice(ask).format(w=m.group(1)), m.group(0)) for m in picks]
    if len(lines) > 1:
        user, rest = lines[0], "\n".join(lines[1:]).strip()
    else:
        cut = doc.find(". ")
        user, rest = (doc[:cut + 1], doc[cut + 2:]) if cut > 0 else ("", "")
    if not user or not rest:
        return []
    topic = re.sub(r",\s*(n|v|vt|vi|adj|adv|interj|pl|prep|conj|pron)\b.*$", "", user).strip()
    user = rng.choice([user, f"Tell me about {topic}.", f"Continue: {user}"])
    limit = rng.randint(300, 1500)
    if len(rest) > limit:
        cut = max(rest.rfind("\n", 0, limit), rest.rfind(". ", 0, limit) + 1)
        rest = rest[:cut].strip() if cut > 100 else rest[:limit].rsplit(" ", 1)[0]
    return [(user, rest)]


def build_stream(docs, tok, chat_fraction, rng):
    """Token stream: each document (some as ChatML conversations) followed by <|endoftext|>."""
    texts, n_chat = [], 0
    for doc in docs:
        turns = chat_turns(doc, rng) if rng.random() < chat_fraction else []
        if turns:
            texts.append(chatml(turns, system=rng.random() < 0.3))
            n_chat += 1
        else:
            texts.append(doc)
    rng.shuffle(texts)
    ids = []
    for enc in tok.encode_batch(texts, add_special_tokens=False):
        ids.extend(enc.ids)
        ids.append(EOT)
    return torch.tensor(ids, dtype=torch.int32), n_chat


# ---------------------------------------------------------------- model
def make_model(vocab, ctx, args, dev):
    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads, head_dim=args.hidden // args.heads,
        max_position_embeddings=ctx, rms_norm_eps=1e-5, hidden_act="silu",
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=True, attention_bias=False, mlp_bias=False,
        bos_token_id=None, eos_token_id=IM_END, pad_token_id=EOT, use_cache=True)
    torch.manual_seed(args.seed)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    model = model.float().to(dev)
    emb, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    if emb.data_ptr() != head.data_ptr():
        sys.exit("train.py: lm_head is not tied to embed_tokens")
    return model


def add_dropout(model, p):
    """Residual dropout (embeddings, attention and MLP outputs) for training only: the
    corpus is small, so the model sees it many times. Returns hook handles to remove."""
    def drop(mod, inp, out):
        if not mod.training:
            return out
        if isinstance(out, tuple):
            return (F.dropout(out[0], p, True),) + tuple(out[1:])
        return F.dropout(out, p, True)
    if p <= 0:
        return []
    mods = [model.get_input_embeddings()]
    for layer in model.model.layers:
        mods += [layer.self_attn, layer.mlp]
    return [m.register_forward_hook(drop) for m in mods]


def param_groups(model, wd):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}]


@torch.no_grad()
def window_nll(model, ids, window, bf16, batch=32):
    """The validation protocol in the module docstring: (mean NLL, predicted tokens)."""
    was_training = model.training
    model.eval()
    dev = next(model.parameters()).device
    n_full = len(ids) // window
    chunks = [ids[i * window:(i + 1) * window] for i in range(n_full)]
    groups = [chunks[i:i + batch] for i in range(0, n_full, batch)]
    tail = ids[n_full * window:]
    if len(tail) >= 2:
        groups.append([tail])
    total, count = 0.0, 0
    for g in groups:
        x = torch.tensor(g, dtype=torch.long, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            logits = model(input_ids=x, use_cache=False).logits
        nll = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]),
                              x[:, 1:].reshape(-1), reduction="sum")
        total += float(nll.double())
        count += x.shape[0] * (x.shape[1] - 1)
    model.train(was_training)
    return total / count, count


# ---------------------------------------------------------------- training
def lr_at(step, horizon, args):
    warm = min(1.0, (step + 1) / args.warmup_steps)
    p = min(1.0, step / max(horizon, 1))
    return args.lr * warm * (args.min_lr_ratio + (1 - args.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * p)))


def train(model, stream, valid_ids, args, hist):
    dev = next(model.parameters()).device
    data = stream.to(dev)
    B, T = args.batch, args.ctx
    opt = torch.optim.AdamW(param_groups(model, args.weight_decay), lr=args.lr,
                            betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_fn = torch.compile(model) if args.compile else model
    steps_per_epoch = max(1, len(stream) // (B * T))
    horizon = int(args.max_epochs * steps_per_epoch)  # refined from the measured speed below
    best = (float("inf"), None, -1)
    arange = torch.arange(T + 1, device=dev)
    t_start, last_eval, acc, acc_n, step = time.time(), time.time(), torch.zeros((), device=dev), 0, 0
    while step < horizon and time.time() - t_start < args.train_seconds:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, horizon, args)
        starts = torch.randint(0, len(data) - T - 1, (B,), device=dev)
        chunk = data[starts[:, None] + arange].long()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = step_fn(input_ids=chunk[:, :-1], use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        acc += loss.detach()
        acc_n += 1
        step += 1
        if step == 10:
            torch.cuda.synchronize()
            t10 = time.time()
        if step == args.speed_probe_steps:  # set the cosine horizon from the measured speed
            torch.cuda.synchronize()
            rate = (step - 10) / (time.time() - t10)
            fit = step + int(rate * (args.train_seconds - (time.time() - t_start)) * 0.97)
            horizon = max(step + 1, min(horizon, fit))
            log(f"speed {rate:.2f} steps/s ({rate * B * T / 1e6:.2f}M tok/s); horizon {horizon} steps "
                f"= {horizon / steps_per_epoch:.1f} epochs (cap {args.max_epochs})")
        if step % args.log_every == 0 or step == horizon:
            tl = float(acc) / acc_n
            acc.zero_()
            acc_n = 0
            hist["train"].append({"step": step, "seconds": round(time.time() - t_start, 1),
                                  "lr": lr_at(step, horizon, args), "loss": round(tl, 4)})
            log(f"step {step}/{horizon} loss {tl:.4f} lr {lr_at(step, horizon, args):.2e}")
        if time.time() - last_eval > args.eval_seconds or step == horizon:
            last_eval = time.time()
            vl, _ = window_nll(model, valid_ids, T, bf16=True)
            hist["valid"].append({"step": step, "seconds": round(time.time() - t_start, 1),
                                  "nll": round(vl, 4), "ppl": round(math.exp(vl), 3)})
            log(f"step {step} valid nll {vl:.4f} ppl {math.exp(vl):.2f}")
            if vl < best[0]:
                best = (vl, {k: v.detach().clone() for k, v in model.state_dict().items()}, step)
    vl, _ = window_nll(model, valid_ids, T, bf16=True)  # the last step may be past the last eval
    if vl < best[0]:
        best = (vl, {k: v.detach().clone() for k, v in model.state_dict().items()}, step)
    model.load_state_dict(best[1])
    return {"steps": step, "horizon": horizon, "seconds": round(time.time() - t_start, 1),
            "tokens_seen": step * B * T, "epochs": round(step / steps_per_epoch, 2),
            "best_step": best[2], "best_valid_nll_bf16": round(best[0], 4)}


# ---------------------------------------------------------------- export
def shard_weights(folder):
    """Splits folder/model.safetensors into shards of at most SHARD_LIMIT bytes of tensor
    data (balanced, largest tensors first) + model.safetensors.index.json, the layout
    transformers writes for sharded checkpoints."""
    src = os.path.join(folder, "model.safetensors")
    if os.path.getsize(src) <= SHARD_LIMIT:
        return
    with safe_open(src, framework="pt") as f:
        meta = dict(f.metadata() or {})
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    meta.setdefault("format", "pt")
    size = {k: t.numel() * t.element_size() for k, t in tensors.items()}
    total = sum(size.values())
    n = math.ceil(total / SHARD_LIMIT)
    while True:
        bins, fill = [[] for _ in range(n)], [0] * n
        for k in sorted(tensors, key=lambda k: -size[k]):
            i = fill.index(min(fill))
            bins[i].append(k)
            fill[i] += size[k]
        if max(fill) <= SHARD_LIMIT:
            break
        n += 1
    weight_map = {}
    for i, names in enumerate(bins):
        fname = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        part = {k: tensors[k].contiguous() for k in tensors if k in set(names)}
        save_file(part, os.path.join(folder, fname), metadata=meta)
        weight_map.update({k: fname for k in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))},
                  f, indent=2)
        f.write("\n")
    os.remove(src)


def export(model, tok_dir, out):
    os.makedirs(out, exist_ok=True)
    model = model.to(torch.bfloat16)
    model.config.use_cache = True
    model.generation_config = GenerationConfig(bos_token_id=None, eos_token_id=[IM_END, EOT],
                                               pad_token_id=EOT)
    model.save_pretrained(out)
    shard_weights(out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, name), os.path.join(out, name))
    return model


# ---------------------------------------------------------------- checks on the saved folder
@torch.no_grad()
def greedy(model, ids, n):
    """n argmax steps with full recompute, ignoring EOS: (new ids, top-1 margin per step)."""
    ids, margins = list(ids), []
    dev = next(model.parameters()).device
    for _ in range(n):
        logits = model(input_ids=torch.tensor([ids], device=dev), use_cache=False).logits[0, -1]
        top = torch.topk(logits.float(), 2)
        margins.append(float(top.values[0] - top.values[1]))
        ids.append(int(top.indices[0]))
    return ids[-n:], margins


def until_eos(ids):
    for i, t in enumerate(ids):
        if t in (IM_END, EOT):
            return ids[:i]
    return ids


def verify(folder, mem_model, tok, valid_ids, ctx, res):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = next(mem_model.parameters()).device
    ref = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                               attn_implementation="eager").to(dev).eval()
    sd = mem_model.state_dict()
    diffs = [k for k, v in ref.state_dict().items() if k not in sd or not torch.equal(v, sd[k].float())]
    if diffs:
        raise RuntimeError(f"reloaded weights differ from the trained ones: {diffs[:5]}")
    nll, count = window_nll(ref, valid_ids, ctx, bf16=False)
    res["valid"] = {"protocol": PROTOCOL,
                    "window": ctx, "tokens": len(valid_ids), "predicted_tokens": count,
                    "mean_nll": nll, "perplexity": math.exp(nll)}
    log(f"saved model, fp32: valid mean NLL {nll:.5f}, perplexity {math.exp(nll):.4f} "
        f"over {count} predicted tokens")
    refs = []
    for prompt in GREEDY_PROMPTS:
        p_ids = tok.encode(prompt, add_special_tokens=False).ids
        new, margins = greedy(ref, p_ids, 40)
        refs.append({"prompt": prompt, "prompt_ids": p_ids, "new_ids": new,
                     "text": tok.decode(new, skip_special_tokens=False),
                     "min_top1_margin": min(margins), "margins": [round(m, 5) for m in margins]})
    main = next((r for r in refs if r["min_top1_margin"] >= MIN_MARGIN),
                max(refs, key=lambda r: r["min_top1_margin"]))
    p_ids, new = main["prompt_ids"], main["new_ids"]
    x = torch.tensor([p_ids], device=dev)
    hf = ref.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=40, do_sample=False)
    hf_new = hf[0, len(p_ids):].tolist()
    agrees = until_eos(hf_new) == until_eos(new)[:len(until_eos(hf_new))]
    if not agrees:
        log(f"WARNING: generate() {hf_new} differs from the argmax loop {new}")
    res["greedy_reference"] = {
        **main, "new_ids_until_eos": until_eos(new), "hf_generate_ids": hf_new,
        "hf_generate_agrees": agrees,
        "how": "fp32 from the saved bf16 weights, eager attention, TF32 off; 40 argmax steps, "
               "EOS not special (hf_generate_ids: model.generate, which stops at EOS); the first "
               f"of greedy_all whose smallest top-1 margin is >= {MIN_MARGIN}"}
    res["greedy_all"] = refs
    for r in refs:
        log(f"greedy {r['prompt']!r} min margin {r['min_top1_margin']:.4f}: {r['text']!r}")
    log(f"greedy reference: {main['prompt']!r} {p_ids} -> {new}")
    res["samples"] = samples(ref, tok)
    return ref


def samples(model, tok):
    out = []
    dev = next(model.parameters()).device
    chat = f"<|im_start|>user\n{CHAT_QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    for name, text in (("plain_greedy", "And it came to pass"), ("chat_greedy", chat)):
        ids = tok.encode(text, add_special_tokens=False).ids
        new, _ = greedy(model, ids, 80)
        out.append({"kind": name, "prompt": text, "completion": tok.decode(until_eos(new))})
    torch.manual_seed(7)
    for text in ("The", chat):
        ids = tok.encode(text, add_special_tokens=False).ids
        x = torch.tensor([ids], device=dev)
        y = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=80,
                           do_sample=True, temperature=0.8, top_p=0.95)
        out.append({"kind": "sampled t=0.8 top_p=0.95 seed 7", "prompt": text,
                    "completion": tok.decode(until_eos(y[0, len(ids):].tolist()))})
    for s in out:
        log(f"sample [{s['kind']}] {s['prompt'][-40:]!r} -> {s['completion'][:300]!r}")
    return out


def check_hf_tokenizer(folder, tok):
    """transformers' own tokenizer loading and chat template; reported, not fatal."""
    try:
        from transformers import AutoTokenizer
        ht = AutoTokenizer.from_pretrained(folder)
        ids = ht(PROMPT)["input_ids"]
        msgs = [{"role": "user", "content": CHAT_QUESTION}]
        text = ht.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        want = f"<|im_start|>user\n{CHAT_QUESTION}<|im_end|>\n<|im_start|>assistant\n"
        return {"ok": True, "class": type(ht).__name__,
                "same_ids_as_tokenizers": ids == tok.encode(PROMPT, add_special_tokens=False).ids,
                "chat_template_ok": text == want, "chat_render": text,
                "eos_token": ht.eos_token, "pad_token": ht.pad_token}
    except Exception as e:  # noqa: BLE001 - reported in the log
        return {"ok": False, "error": repr(e)}


# ---------------------------------------------------------------- main
def parse_args():
    env = os.environ.get
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--export", required=True)
    ap.add_argument("--train-seconds", type=float, default=float(env("TRAIN_SECONDS", "300")))
    ap.add_argument("--max-epochs", type=float, default=float(env("MAX_EPOCHS", "30")))
    ap.add_argument("--ctx", type=int, default=int(env("CTX", "1024")))
    ap.add_argument("--batch", type=int, default=int(env("BATCH", "64")))
    ap.add_argument("--lr", type=float, default=float(env("LR", "2e-3")))
    ap.add_argument("--min-lr-ratio", type=float, default=0.05)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--warmup-steps", type=int, default=150)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--intermediate", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--dropout", type=float, default=float(env("DROPOUT", "0.2")))
    ap.add_argument("--chat-fraction", type=float, default=0.15)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--compile", type=int, default=int(env("COMPILE", "0")))
    ap.add_argument("--eval-seconds", type=float, default=15.0)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--speed-probe-steps", type=int, default=40)
    return ap.parse_args()


def main():
    args = parse_args()
    if not torch.cuda.is_available():
        sys.exit("train.py: no CUDA device")
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.cuda.get_device_name()}")
    tok = Tokenizer.from_file(os.path.join(args.tokenizer, "tokenizer.json"))
    if [tok.token_to_id(s) for s in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")] != [EOT, IM_START, IM_END]:
        sys.exit("train.py: special token ids are not 0, 1, 2")
    rng = random.Random(args.seed)
    stream, n_chat = build_stream(read_docs(os.path.join(args.corpus, "train.txt")), tok,
                                  args.chat_fraction, rng)
    with open(os.path.join(args.corpus, "valid.txt"), encoding="utf-8", newline="") as f:
        valid_ids = tok.encode(f.read(), add_special_tokens=False).ids
    log(f"train stream {len(stream)} tokens ({n_chat} docs as ChatML), valid {len(valid_ids)} tokens")
    model = make_model(tok.get_vocab_size(), args.ctx, args, dev)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params / 1e6:.2f}M parameters: hidden {args.hidden}, {args.layers} layers, "
        f"{args.heads}/{args.kv_heads} heads, mlp {args.intermediate}, vocab {tok.get_vocab_size()}, "
        f"ctx {args.ctx}, {type(model).__name__}")
    res = {"args": vars(args), "parameters": n_params, "vocab": tok.get_vocab_size(),
           "train_tokens": len(stream), "train_chat_docs": n_chat, "valid_tokens": len(valid_ids),
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                        "tokenizers": __import__("tokenizers").__version__},
           "history": {"train": [], "valid": []}}
    src = os.path.join(args.corpus, "SOURCES.json")
    if os.path.exists(src):
        with open(src, encoding="utf-8") as f:
            res["corpus"] = json.load(f)
    hooks = add_dropout(model, args.dropout)
    res["training"] = train(model, stream, valid_ids, args, res["history"])
    for h in hooks:
        h.remove()
    log(f"training done: {res['training']}")
    log_path = os.path.join(args.export, "train_log.json")
    rc = 0
    try:
        model = export(model, args.tokenizer, args.export)
        verify(args.export, model, tok, valid_ids, args.ctx, res)
        res["hf_tokenizer"] = check_hf_tokenizer(args.export, tok)
        log(f"transformers tokenizer check: {res['hf_tokenizer']}")
    except Exception:  # noqa: BLE001 - recorded, then a non-zero exit
        res["error"] = traceback.format_exc()
        log(f"FAILED after training:\n{res['error']}")
        rc = 1
    res["files"] = {n: os.path.getsize(os.path.join(args.export, n)) for n in sorted(os.listdir(args.export))}
    res["wall_seconds"] = round(time.time() - T0, 1)
    os.makedirs(args.export, exist_ok=True)
    with open(log_path, "w", encoding="utf-8") as f:
        json.dump(res, f, indent=1, ensure_ascii=False)
        f.write("\n")
    log(f"wrote {log_path}; files {res['files']}")
    sys.exit(rc)


if __name__ == "__main__":
    main()
