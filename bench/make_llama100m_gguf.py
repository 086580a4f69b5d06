#!/usr/bin/env python3
"""A random llama of the llama-100m shape as an F16 GGUF, for tandem vs llama.cpp on one file.

Shape: hidden 768, 12 layers, 12 heads of 64 (4 KV heads), intermediate 2048, vocab 32000
(llama.cpp's ggml-vocab-llama-spm.gguf: its SentencePiece tokenizer keys are copied over),
untied output. Weights N(0, 0.02), norms 1. Quantize the result with llama-quantize
(bench/gguf_vs_llamacpp.sh does: Q4_K_M, Q8_0). Figures only: the text it writes is noise.

  /usr/bin/python3 bench/make_llama100m_gguf.py OUT.gguf   (env LLAMA_CPP_DIR: gguf-py's root,
                                                            default /work/peers/llama.cpp)
"""
import os
import sys

LLAMA_CPP_DIR = os.environ.get("LLAMA_CPP_DIR", "/work/peers/llama.cpp")
sys.path.insert(0, os.path.join(LLAMA_CPP_DIR, "gguf-py"))
import numpy as np  # noqa: E402
import gguf  # noqa: E402

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, INTER = 768, 12, 12, 4, 64, 2048
VOCAB_FILE = os.path.join(LLAMA_CPP_DIR, "models", "ggml-vocab-llama-spm.gguf")


def copy_tokenizer(w):
    r = gguf.GGUFReader(VOCAB_FILE)
    for key, f in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, f.contents(), vt, sub_type=f.types[-1])
        else:
            w.add_key_value(key, f.contents(), vt)
    return len(r.fields["tokenizer.ggml.tokens"].data)


def main(out):
    rng = np.random.default_rng(100)
    w = gguf.GGUFWriter(out, "llama")
    w.add_name("llama100m-random")
    vocab = copy_tokenizer(w)
    w.add_context_length(2048)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(INTER)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    def mat(name, n, k):
        w.add_tensor(name, (rng.standard_normal((n, k), dtype=np.float32) * 0.02).astype(np.float16))

    def ones(name, n):
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    mat("token_embd.weight", vocab, HIDDEN)
    for i in range(LAYERS):
        p = f"blk.{i}."
        ones(p + "attn_norm.weight", HIDDEN)
        mat(p + "attn_q.weight", HEADS * HEAD_DIM, HIDDEN)
        mat(p + "attn_k.weight", KV_HEADS * HEAD_DIM, HIDDEN)
        mat(p + "attn_v.weight", KV_HEADS * HEAD_DIM, HIDDEN)
        mat(p + "attn_output.weight", HIDDEN, HEADS * HEAD_DIM)
        ones(p + "ffn_norm.weight", HIDDEN)
        mat(p + "ffn_gate.weight", INTER, HIDDEN)
        mat(p + "ffn_up.weight", INTER, HIDDEN)
        mat(p + "ffn_down.weight", HIDDEN, INTER)
    ones("output_norm.weight", HIDDEN)
    mat("output.weight", vocab, HIDDEN)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
