"""Builds tests/data/oracle/gemma4_kvshare and gemma4_moe_nople: Gemma 4 text fixtures for the
options the shared oracle's gemma4 / gemma4_moe leave off (KV sharing, attention_k_eq_v with
its own KV heads, double-wide MLPs, final softcap, several full layers, MoE without per-layer
inputs, an untied head, rope `factor`, non-unit layer_scalar / router.scale / per_expert_scale).

Same pipeline and layout as the shared oracle (make_oracle.py): transformers 5.17, fp32 eager
attention, TF32 off, weights rounded to bf16 and stored in bf16; golden.safetensors holds
prompt.i, greedy.i, logits.i (teacher-forced, fp32) and batch_greedy.i (left-padded batch).
Made on an H200 with torch 2.11: python3 make_gemma4_variants.py OUTDIR"""
import json, math, os, random, sys
import torch, transformers
from safetensors.torch import save_file
OUT = sys.argv[1]
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
DEV = "cuda" if torch.cuda.is_available() else "cpu"
V = 512

def common(h):
    return dict(vocab_size=V, hidden_size=h, intermediate_size=2*h, num_attention_heads=4, num_key_value_heads=2,
                head_dim=h//4, max_position_embeddings=4096, rms_norm_eps=1e-6, bos_token_id=None, eos_token_id=2,
                pad_token_id=0, sliding_window=24, vocab_size_per_layer_input=V)

S, F = "sliding_attention", "full_attention"
VARIANTS = {
  # KV sharing (3 shared layers: one full reads layer 2, one sliding reads 4, one full), k_eq_v with its own
  # kv heads on full layers, double-wide MLPs on shared layers, final softcap, three full layers.
  "gemma4_kvshare": lambda: transformers.Gemma4TextConfig(**common(96), num_hidden_layers=8,
      layer_types=[S, S, F, S, S, F, S, F], num_kv_shared_layers=3, attention_k_eq_v=True,
      num_global_key_value_heads=1, global_head_dim=32, use_double_wide_mlp=True,
      final_logit_softcapping=30.0, hidden_size_per_layer_input=8, tie_word_embeddings=True),
  # MoE without per-layer inputs, untied head, non-trivial router scales; full layers with default head_dim.
  "gemma4_moe_nople": lambda: transformers.Gemma4TextConfig(**common(64), num_hidden_layers=5,
      layer_types=[S, F, S, S, F], hidden_size_per_layer_input=0, enable_moe_block=True, num_experts=6,
      top_k_experts=3, moe_intermediate_size=24, global_head_dim=16, tie_word_embeddings=False,
      rope_parameters={S: {"rope_type": "default", "rope_theta": 10000.0},
                       F: {"rope_type": "proportional", "partial_rotary_factor": 0.5, "rope_theta": 1000000.0, "factor": 2.0}}),
}

def prompts(rng):
    return [[rng.randrange(3, V) for _ in range(L)] for L in [3, 11, 29, 47, 70]]

@torch.no_grad()
def build(name, mk):
    d = os.path.join(OUT, name); os.makedirs(d, exist_ok=True)
    torch.manual_seed(7 + sum(map(ord, name)))
    cfg = mk()
    print(name, "per_layer_config:", cfg.to_dict().get("per_layer_config"), flush=True)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").to(DEV).float().eval()
    for n, p in model.named_parameters():
        if p.dim() >= 2: p.normal_(0, 1.0 / math.sqrt(p.shape[-1]))
        elif "norm" in n: p.normal_(0, 0.1).add_(1.0)   # weights near 1 (Gemma 4 norms scale by w)
        else: p.uniform_(0.5, 1.5)                          # router.scale, per_expert_scale
    for n, b in model.named_buffers():
        if n.endswith("layer_scalar"): b.uniform_(0.5, 1.5)
    for p in list(model.parameters()) + [b for n, b in model.named_buffers() if n.endswith("layer_scalar")]:
        p.data = p.data.to(torch.bfloat16).to(torch.float32)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    sd = {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in model.state_dict().items()}
    model.config.dtype = torch.bfloat16
    model.save_pretrained(d, safe_serialization=True, state_dict=sd)
    rng = random.Random(11 + len(name))
    P = prompts(rng); N = 24
    g, meta = {}, {"arch": name, "transformers": transformers.__version__, "dtype": "bf16 weights, fp32 compute", "n_new": N, "prompts": []}
    greedy = []
    for i, p in enumerate(P):
        ids = torch.tensor([p], device=DEV)
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=N, min_new_tokens=N, do_sample=False)
        cont = out[0, len(p):].tolist(); greedy.append(cont)
        logits = model(torch.tensor([p + cont], device=DEV)).logits[0].float().cpu()
        g[f"prompt.{i}"] = torch.tensor(p, dtype=torch.int32)
        g[f"greedy.{i}"] = torch.tensor(cont, dtype=torch.int32)
        g[f"logits.{i}"] = logits.contiguous()
        meta["prompts"].append({"len": len(p)})
    Lm = max(map(len, P))
    ids = torch.tensor([[0] * (Lm - len(p)) + p for p in P], device=DEV)
    am = torch.tensor([[0] * (Lm - len(p)) + [1] * len(p) for p in P], device=DEV)
    out = model.generate(ids, attention_mask=am, max_new_tokens=N, min_new_tokens=N, do_sample=False)
    agree = 0
    for i in range(len(P)):
        b = out[i, Lm:].tolist(); g[f"batch_greedy.{i}"] = torch.tensor(b, dtype=torch.int32); agree += (b == greedy[i])
    meta["batch_equals_solo_rows"] = agree
    save_file(g, os.path.join(d, "golden.safetensors"))
    json.dump(meta, open(os.path.join(d, "golden.json"), "w"), indent=1)
    print(name, "ok; batch==solo", agree, flush=True)

for name, mk in VARIANTS.items():
    build(name, mk)
