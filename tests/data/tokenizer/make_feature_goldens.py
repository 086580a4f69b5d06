"""Reference outputs of Hugging Face `tokenizers` for features the four tokenizer goldens
(tests/data/tokenizer_golden.json) do not reach: Metaspace prepend schemes, the legacy
SentencePiece normalizers, every split behavior, normalizers, added-token flags,
post-processors and decoders -- on small synthetic tokenizer.json files that this script
builds and stores beside the outputs -- plus extra texts and random-id decodes for the real
tokenizers fetched by scripts/bootstrap.d/10-tokenizers.sh.

Run where `tokenizers` is installed (the GPU machine has 0.23.2, as the oracle used):
    python3 make_feature_goldens.py CACHE_DIR OUT.json
"""
import json
import random
import sys
import traceback

import tokenizers
from tokenizers import Regex, Tokenizer, decoders as D, models, normalizers as N
from tokenizers import pre_tokenizers as P, processors, trainers

CORPUS = [
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away!",
    "In the beginning God created the heaven and the earth, and the earth was void.",
    "def tokenize(text):\n    return [t for t in text.split() if t]  # simple",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; } // dot-product 2026",
    "Hello hello HELLO, world wide web: https://example.com/a-b-c?x=1&y=2",
    "naive cafe resume fiance -- well-known state-of-the-art co-operate re-enter",
    "1234567890 3.14159 2,718 1e-9 -42 +7 100%",
    "She said: 'I'm here, you're there, we'll see.' They've gone; he'd know.",
] * 3

TEXTS = [
    "", " ", "   ", "\n", "\t", "a", "Hello world", " Hello world", "Hello world ",
    "  leading and trailing  ", "multiple   spaces\tand\ttabs\nnew\n\nlines",
    "The year 2026: 12345 + 678 = 13023; 3.14159", "well-known state-of-the-art --x-- a-",
    "Wow!!! Really?! (yes) [no] {maybe}...", "naïve café ÀÉÎÕÜ e\u0301 \ufb01 \u2167 \u2460",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ", "日本語のテキストと中文混合", "emoji 👍🏽🚀 ZWJ 👨‍👩‍👧",
    "nel\u0085line nbsp\u00a0x ideo\u3000space ctrl\x01\x7fz", "ÇA VA? İstanbul ΣΟΦΟΣ",
    "<s>a</s> <s> x</s>", "a<x>b <x> c<X>", "x  [MASK]  y[MASK]z", "p <L>  q <R>  r",
    "wow wowsers a wow b _wow wow.", "HELLO there Hello hello", "[CLS] a [SEP]",
    "tab\tsep\r\nwindows", "I'm can't won't I'LL YOU'RE", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "▁already▁meta ▁x", "<|x|>y<|x|> <|x|>",
]

BYTES = [f"<0x{b:02X}>" for b in range(256)]


def base_byte_level():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = P.ByteLevel(add_prefix_space=False)
    tr = trainers.BpeTrainer(vocab_size=700, show_progress=False,
                             initial_alphabet=P.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, tr)
    return json.loads(tok.to_str())["model"]


def base_metaspace():
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = P.Metaspace()
    tr = trainers.BpeTrainer(vocab_size=500, show_progress=False,
                             special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator(CORPUS, tr)
    model = json.loads(tok.to_str())["model"]
    for b in BYTES:  # SentencePiece-style byte fallback tokens
        model["vocab"].setdefault(b, len(model["vocab"]))
    model["byte_fallback"] = True
    model["fuse_unk"] = True
    return model


def base_suffix():
    tok = Tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix="##",
                               end_of_word_suffix="</w>"))
    tok.pre_tokenizer = P.Whitespace()
    tr = trainers.BpeTrainer(vocab_size=400, show_progress=False, special_tokens=["<unk>"],
                             continuing_subword_prefix="##", end_of_word_suffix="</w>")
    tok.train_from_iterator(CORPUS, tr)
    return json.loads(tok.to_str())["model"]


def added(content, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False):
    return tokenizers.AddedToken(content, special=special, normalized=normalized, lstrip=lstrip,
                                 rstrip=rstrip, single_word=single_word)


def make(model, normalizer=None, pre=None, decoder=None, post=None, added_tokens=()):
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
           "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
           "model": model}
    tok = Tokenizer.from_str(json.dumps(doc))
    if normalizer is not None:
        tok.normalizer = normalizer
    if pre is not None:
        tok.pre_tokenizer = pre
    if decoder is not None:
        tok.decoder = decoder
    for t in added_tokens:
        (tok.add_special_tokens if t.special else tok.add_tokens)([t])
    if post is not None:
        tok.post_processor = post
    return tok


def configs():
    bl, ms, sfx = base_byte_level(), base_metaspace(), base_suffix()
    bl_end = P.ByteLevel(add_prefix_space=False, use_regex=False)
    ms_added = [added("<s>"), added("</s>"), added("<x>", special=False, normalized=True),
                added("[MASK]", lstrip=True)]
    sp_decoder = D.Sequence([D.Replace("▁", " "), D.ByteFallback(), D.Fuse(), D.Strip(" ", 1, 0)])
    c = {}
    c["ms_first"] = lambda: make(ms, pre=P.Metaspace(prepend_scheme="first"),
                                 decoder=D.Metaspace(prepend_scheme="first"), added_tokens=ms_added,
                                 post=processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", ms["vocab"]["<s>"])]))
    c["ms_always_nosplit"] = lambda: make(ms, pre=P.Metaspace(prepend_scheme="always", split=False),
                                          decoder=sp_decoder, added_tokens=ms_added)
    c["ms_never"] = lambda: make(ms, pre=P.Metaspace(prepend_scheme="never"),
                                 decoder=D.Metaspace(prepend_scheme="never"), added_tokens=ms_added)
    c["legacy_sp_strip_both"] = lambda: make(
        ms, normalizer=N.Sequence([N.Prepend("▁"), N.Replace(" ", "▁")]),
        decoder=D.Sequence([D.Replace("▁", " "), D.ByteFallback(), D.Fuse(), D.Strip(" ", 1, 1)]),
        added_tokens=ms_added)
    c["bl_normalizers"] = lambda: make(
        bl, normalizer=N.Sequence([N.NFKC(), N.Lowercase(), N.Strip(), N.Replace(Regex(r"\s+"), " ")]),
        pre=P.ByteLevel(add_prefix_space=True, use_regex=True), decoder=D.ByteLevel(),
        added_tokens=[added("<|x|>"), added("Hello", special=False, normalized=True),
                      added("wow", special=False, single_word=True), added("<L>", lstrip=True),
                      added("<R>", rstrip=True)])
    c["bl_splits_merged"] = lambda: make(
        bl, pre=P.Sequence([P.Split(Regex(r"\d"), "merged_with_next"), P.Split("-", "merged_with_previous"),
                            P.Punctuation("contiguous"), bl_end]), decoder=D.ByteLevel())
    c["bl_splits_removed"] = lambda: make(
        bl, pre=P.Sequence([P.Digits(individual_digits=True), P.Split(Regex(r"[aeiou]+"), "removed", invert=True),
                            bl_end]), decoder=D.ByteLevel())
    c["bl_splits_isolated_contiguous"] = lambda: make(
        bl, pre=P.Sequence([P.Split(Regex(r"\s+"), "contiguous"), P.Digits(individual_digits=False),
                            P.Split(Regex(r"(?i:ab|th)"), "isolated"), P.Punctuation("merged_with_next"), bl_end]),
        decoder=D.ByteLevel())
    c["bl_whitespace_no_decoder"] = lambda: make(bl, pre=P.Sequence([P.Whitespace(), bl_end]))
    c["bl_whitespace_split"] = lambda: make(bl, pre=P.Sequence([P.WhitespaceSplit(), bl_end]),
                                            decoder=D.ByteLevel())
    c["bl_bert"] = lambda: make(
        bl, normalizer=N.BertNormalizer(lowercase=True), pre=P.Sequence([P.BertPreTokenizer(), bl_end]),
        decoder=D.WordPiece(prefix="##", cleanup=True), added_tokens=[added("[CLS]"), added("[SEP]")],
        post=processors.BertProcessing(("[SEP]", len(bl["vocab"]) + 1), ("[CLS]", len(bl["vocab"]))))
    c["bl_nfd_accents_roberta"] = lambda: make(
        bl, normalizer=N.Sequence([N.NFD(), N.StripAccents()]), pre=P.ByteLevel(add_prefix_space=False),
        decoder=D.ByteLevel(), added_tokens=[added("<s>"), added("</s>")],
        post=processors.RobertaProcessing(("</s>", len(bl["vocab"]) + 1), ("<s>", len(bl["vocab"]))))
    c["bl_replace_prepend"] = lambda: make(
        bl, normalizer=N.Sequence([N.Replace(Regex(r"[0-9]+"), "#"), N.Prepend("^"), N.NFKD()]),
        pre=P.ByteLevel(add_prefix_space=False), decoder=D.ByteLevel())
    c["suffix_bpe"] = lambda: make(sfx, pre=P.Whitespace(), decoder=D.BPEDecoder(suffix="</w>"))
    return c


def decode(tok, ids, skip):
    """HF's decode, or None where it panics (Strip with stop > 0 on an empty text does)."""
    try:
        return tok.decode(ids, skip_special_tokens=skip)
    except BaseException:  # pyo3's PanicException is not an Exception
        return None


def cases(tok, texts):
    out = []
    for s in texts:
        ids = tok.encode(s, add_special_tokens=False).ids
        ids_sp = tok.encode(s, add_special_tokens=True).ids
        out.append({"text": s, "ids": ids, "ids_with_special": ids_sp,
                    "decoded": decode(tok, ids, False), "decoded_skip": decode(tok, ids_sp, True)})
    return out


def random_decodes(tok, seed, n=60):
    rng = random.Random(seed)
    size = tok.get_vocab_size(with_added_tokens=True)
    out = []
    for _ in range(n):
        ids = [rng.randrange(size) if rng.random() < 0.5 else rng.randrange(min(size, 400))
               for _ in range(rng.randrange(1, 16))]
        out.append({"ids": ids, "decoded": decode(tok, ids, False),
                    "decoded_skip": decode(tok, ids, True)})
    return out


def main():
    cache, out_path = sys.argv[1], sys.argv[2]
    res = {"tokenizers_version": tokenizers.__version__, "synthetic": {}, "real": {}}
    for name, build in configs().items():
        try:
            tok = build()
            res["synthetic"][name] = {"tokenizer": json.loads(tok.to_str()), "cases": cases(tok, TEXTS),
                                      "decode": random_decodes(tok, hash(name) % 1000)}
            print("ok", name, flush=True)
        except BaseException:
            traceback.print_exc()
    for key in ["qwen3", "llama3_1", "mistral"]:
        try:
            tok = Tokenizer.from_file(f"{cache}/tokenizers/{key}/tokenizer.json")
            res["real"][key] = {"cases": cases(tok, TEXTS), "decode": random_decodes(tok, 7, 200)}
            print("ok", key, flush=True)
        except BaseException:
            traceback.print_exc()
    json.dump(res, open(out_path, "w"), ensure_ascii=False, indent=0)


if __name__ == "__main__":
    main()
