#!/usr/bin/env python3
"""Trains the byte-level BPE tokenizer of tandem's embedded default model.

    python3 train_tokenizer.py --corpus DIR --out DIR [--vocab 6144]

Reads DIR/train.txt (documents separated by "\n\n\n"), writes OUT/tokenizer.json and
OUT/tokenizer_config.json. Same shape as the project's oracle tokenizer: GPT-2 style
ByteLevel pre-tokenizer (its built-in regex, no prefix space), ByteLevel decoder, no
normalizer, no post-processor (nothing is added around encoded text). Special tokens get
the first ids: <|endoftext|> = 0, <|im_start|> = 1, <|im_end|> = 2.
"""
import argparse
import json
import os
import sys
import time

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Plain ChatML, as Qwen writes it: one '<|im_start|>role\ncontent<|im_end|>\n' per
# message, then '<|im_start|>assistant\n' when a generation prompt is asked for.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def documents(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [d for d in text.split("\n\n\n") if d.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=6144)
    ap.add_argument("--max-length", type=int, default=1024, help="model_max_length")
    args = ap.parse_args()
    t0 = time.time()
    docs = documents(os.path.join(args.corpus, "train.txt"))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=args.vocab, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(docs, trainer=trainer, length=len(docs))
    for i, s in enumerate(SPECIALS):
        if tok.token_to_id(s) != i:
            sys.exit(f"train_tokenizer.py: {s} got id {tok.token_to_id(s)}, want {i}")
    probe = "<|im_start|>user\nIn the beginning God created<|im_end|>\n"
    ids = tok.encode(probe).ids
    if ids[0] != 1 or 2 not in ids or tok.decode(ids, skip_special_tokens=False) != probe:
        sys.exit(f"train_tokenizer.py: round trip failed: {ids}")
    os.makedirs(args.out, exist_ok=True)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None,
              "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None,
              "add_bos_token": False, "add_eos_token": False, "clean_up_tokenization_spaces": False,
              "model_max_length": args.max_length, "chat_template": CHAT_TEMPLATE}
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1, ensure_ascii=False)
        f.write("\n")
    sample = docs[0][:200]
    n_ids = len(tok.encode(sample).ids)
    print(f"tokenizer: vocab {tok.get_vocab_size()}, {len(docs)} docs, "
          f"{len(sample.encode()) / max(n_ids, 1):.2f} bytes/token on a sample, "
          f"{time.time() - t0:.1f}s -> {args.out}")


if __name__ == "__main__":
    main()
