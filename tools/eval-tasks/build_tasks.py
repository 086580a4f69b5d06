#!/usr/bin/env python3
"""Builds tandem's evaluation tasks (eval/tasks/*.jsonl) from the embedded model's own
corpus sources, fetched and cleaned exactly as tools/tiny-model/corpus.py does, so that
"held out" means what the model's training split says: a document is in valid.txt iff
corpus.is_valid(source, doc_id).

    python3 tools/eval-tasks/build_tasks.py [--out eval/tasks] [--cache DIR]

Needs what corpus.py needs (apt-get update once; apt-get download, dpkg-deb, npm,
libreadline8). The output is deterministic: every random choice comes from a generator
seeded with the task's name, and items are written in a shuffled order so that
`tandem eval --limit N` takes an unbiased sample. The schema: eval/tasks/README.md.
"""
import argparse
import glob
import json
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tools", "tiny-model"))
import corpus  # noqa: E402  (fetching, cleaning and the train/valid rule)

FORMAT = "tandem-eval/1"
NUM_CHOICES = 4


# ---------------------------------------------------------------- corpus access
def documents(name, fn, cache):
    """[(doc_id, cleaned text, held_out)] of one corpus source, as corpus.py splits it."""
    docs, _ = fn(cache)
    out = []
    for doc_id, text in docs:
        text = corpus.clean(text)
        if text:
            out.append((doc_id, text, corpus.is_valid(name, doc_id)))
    return out


def kjv_chapters(cache):
    """[(doc_id, heading, [verse]), held_out] of the KJV, one per chapter."""
    out = []
    for doc_id, text, held_out in documents("kjv", corpus.src_kjv, cache):
        heading, *verses = text.split("\n")
        out.append(((doc_id, heading, verses), held_out))
    return out


def pick_distractors(rng, gold, pool, k, key=len, ratio=1.35):
    """k distinct entries of pool other than gold, preferring ones whose key (length) is
    within `ratio` of gold's, so that the raw log-likelihood is not decided by length."""
    others = [p for p in dict.fromkeys(pool) if p != gold]
    near = [p for p in others if max(key(p), 1) / max(key(gold), 1) < ratio
            and max(key(gold), 1) / max(key(p), 1) < ratio]
    chosen = rng.sample(near, k) if len(near) >= k else near + rng.sample(
        [p for p in others if p not in near], k - len(near))
    return chosen


def shuffle_in(rng, gold, distractors):
    """(choices, gold index) with gold at a uniformly random place."""
    choices = list(distractors)
    at = rng.randrange(len(choices) + 1)
    choices.insert(at, gold)
    return choices, at


# ---------------------------------------------------------------- tasks
def kjv_next_verse(cache, limit):
    """The next verse of a held-out chapter among 4: the true one and 3 verses of other
    held-out chapters of similar length."""
    rng = random.Random("kjv_next_verse")
    held = [ch for ch, h in kjv_chapters(cache) if h]
    items = []
    for doc_id, heading, verses in held:
        lines = [heading] + verses
        pool = [v for other_id, _, vs in held if other_id != doc_id for v in vs]
        for k in range(1, len(lines)):
            context = "\n".join(lines[max(0, k - 3):k])
            gold = lines[k]
            choices, at = shuffle_in(rng, gold, pick_distractors(rng, gold, pool, NUM_CHOICES - 1))
            items.append({"context": context, "choices": ["\n" + c for c in choices], "gold": at})
    header = {
        "task": "kjv_next_verse", "kind": "choice", "chance": 1 / NUM_CHOICES,
        "description": "King James Bible: which of 4 verses follows the previous (up to 3) lines of "
                       "a chapter (its heading 'Book N' at the start); distractors are verses of "
                       "other held-out chapters within 1.35x of the true verse's length.",
        "held_out": "everything: all contexts and choices come from the 19 KJV chapters of the "
                    "validation split (valid.txt), none of which the model was trained on."}
    return header, sample(rng, items, limit)


def wordnet_lines(cache):
    """[(lemmas, pos, definition, held_out)] of the WordNet gloss lines corpus.py writes."""
    out = []
    for doc_id, text, held_out in documents("wordnet", corpus.src_wordnet, cache):
        for line in text.split("\n"):
            m = re.match(r"^(.*?) \((noun|verb|adjective|adverb)\): (.*)$", line)
            if not m:
                continue
            definition = m.group(3).split("; for example ")[0]
            out.append((m.group(1), m.group(2), definition, held_out))
    return out


def wordnet_define(cache, limit):
    """Definition -> word among 4, scored the partial way: the same definition after each
    candidate headword 'words (pos):' (as the training lines read), so the definition's own
    likelihood cancels and only the headword decides."""
    rng = random.Random("wordnet_define")
    lines = wordnet_lines(cache)
    held = [ln for ln in lines if ln[3]]
    items = []
    for lemmas, pos, definition, _ in held:
        words = set(lemmas.split(", "))
        pool = [f"{o} ({p}):" for o, p, _, _ in held
                if p == pos and not words & set(o.split(", "))]
        gold = f"{lemmas} ({pos}):"
        choices, at = shuffle_in(rng, gold, pick_distractors(rng, gold, pool, NUM_CHOICES - 1))
        items.append({"contexts": choices, "continuation": " " + definition, "gold": at})
    header = {
        "task": "wordnet_define", "kind": "choice", "chance": 1 / NUM_CHOICES,
        "description": "WordNet 3.0: which of 4 headwords ('words (pos):', as the training lines "
                       "begin) a definition belongs to; scored as ln p(definition | headword), "
                       "distractors are headwords of the same part of speech sharing no word.",
        "held_out": "the synsets: every definition and headword line comes from the 42 WordNet "
                    "documents of the validation split (the model may have seen the same words "
                    "with other senses)."}
    return header, sample(rng, items, limit)


def factbook_profiles(cache):
    """[(country, [(label, paragraph)]), held_out] of the Factbook documents corpus.py writes
    ('Name' then paragraphs 'Label: text')."""
    out = []
    for doc_id, text, held_out in documents("factbook", corpus.src_factbook, cache):
        name, *paras = text.split("\n")
        fields = [p.split(": ", 1) for p in paras if ": " in p]
        out.append(((name, fields), held_out))
    return out


GENERIC_NAME_WORDS = {"island", "islands", "republic", "saint", "north", "south", "east", "west",
                      "united", "states", "federated", "democratic", "guinea", "and"}


def name_stems(name):
    """Lowercased 4-letter prefixes of a country name's distinctive words ('Italy' also
    catches 'Italian'), for telling whether a sentence names the country."""
    words = [w.lower() for w in re.findall(r"[A-Za-z]{4,}", name)]
    return [w[:4] for w in words if w not in GENERIC_NAME_WORDS] or [w[:4] for w in words]


def names_any(stems, sentence):
    low = sentence.lower()
    return any(s in low for s in stems)


def sentences_of(paragraph):
    return re.split(r"(?<=[a-z0-9)]\.) (?=[A-Z])", paragraph)


def factbook_next_sentence(cache, limit):
    """The next sentence of a Factbook profile paragraph among 4: the true one and 3 from
    other countries' profiles (any field), none naming a country of the item."""
    rng = random.Random("factbook_next_sentence")
    profiles = [p for p, held in factbook_profiles(cache) if not held]
    stems = {name: name_stems(name) for name, _ in profiles}
    later = [(name, s) for name, fields in profiles for _, para in fields for s in sentences_of(para)[1:]]
    items = []
    for name, fields in profiles:
        for label, para in fields:
            sents = sentences_of(para)
            for k in range(1, len(sents)):
                gold = sents[k]
                pool = [s for n, s in later if n != name and not names_any(stems[n], s)
                        and not names_any(stems[name], s)]
                if len(gold) < 40 or names_any(stems[name], gold) or len(pool) < NUM_CHOICES:
                    continue
                context = f"{name}\n{label}: " + " ".join(sents[max(0, k - 2):k])
                choices, at = shuffle_in(rng, gold, pick_distractors(rng, gold, pool, NUM_CHOICES - 1))
                items.append({"context": context, "choices": [" " + c for c in choices], "gold": at})
    header = {
        "task": "factbook_next_sentence", "kind": "choice", "chance": 1 / NUM_CHOICES,
        "description": "CIA World Factbook: which of 4 sentences follows the previous (up to 2) "
                       "sentences of a profile's paragraph, after its 'Country\\nLabel:' header; "
                       "distractors are non-initial sentences of other countries' profiles (any "
                       "field) within 1.35x of the true one's length; no choice names the item's "
                       "country or its own.",
        "held_out": "nothing: recall of trained profiles (the validation split holds only 8 "
                    "countries, too few for a task of their own)."}
    return header, sample(rng, items, limit)


def proverbs_cloze(cache, limit):
    """The last word of a verse of the Book of Proverbs among 4 verse-final words."""
    rng = random.Random("proverbs_cloze")
    verses = [v for (doc_id, _, vs), _ in kjv_chapters(cache) if doc_id.startswith("Proverbs.") for v in vs]
    split = []
    for v in verses:
        m = re.match(r"^(.*\S) ([A-Za-z]+)([.;:,!?]*)$", v)
        if m:
            split.append((m.group(1), m.group(2)))
    pool = [w for _, w in split]
    items = []
    for head, word in split:
        choices, at = shuffle_in(rng, word, pick_distractors(rng, word, pool, NUM_CHOICES - 1, ratio=1.6))
        items.append({"context": head, "choices": [" " + c for c in choices], "gold": at})
    header = {
        "task": "proverbs_cloze", "kind": "choice", "chance": 1 / NUM_CHOICES,
        "description": "King James Bible, Book of Proverbs: the last word of a verse among 4 "
                       "verse-final words of other Proverbs (of similar length).",
        "held_out": "nothing: no chapter of Proverbs fell in the validation split (it is by "
                    "chapter hash), so this measures recall of trained text."}
    return header, sample(rng, items, limit)


VERSE_END = re.compile(r"^(.*\S) ([A-Za-z]+[.;:,!?]*)$")  # the verse up to its last word


def kjv_verse_end(cache, limit):
    """The last word of a verse (with the punctuation that ends the line), greedy, given the
    previous line and the verse up to that word."""
    rng = random.Random("kjv_verse_end")
    items = []
    for (doc_id, heading, verses), held in kjv_chapters(cache):
        if held or doc_id.startswith("Proverbs."):
            continue
        lines = [heading] + verses
        for k in range(1, len(lines)):
            m = VERSE_END.match(lines[k])
            if m:
                items.append({"prompt": lines[k - 1] + "\n" + m.group(1), "expected": m.group(2)})
    header = {
        "task": "kjv_verse_end", "kind": "generate", "chance": 0.0, "max_tokens": 8,
        "stop": ["\n"],
        "description": "King James Bible (without Proverbs, which proverbs_cloze uses): greedy "
                       "generation of a verse's last word and the punctuation that ends it, given the "
                       "previous line (a verse, or the chapter's heading 'Book N') and the verse up "
                       "to that word; exact match of the rest of the line.",
        "held_out": "nothing: recall of trained verses (on held-out verses the model gets about 5%, "
                    "too few to measure a change by)."}
    return header, sample(rng, items, limit)


def valid_perplexity(cache, limit):
    header = {
        "task": "valid_perplexity", "kind": "perplexity", "chance": "uniform",
        "text": "../../models/tiny-kjv/valid.txt", "window": 1024,
        "description": "Perplexity of the embedded model's validation split (windows of 1024 "
                       "tokens, the protocol of tools/tiny-model/README.md).",
        "held_out": "everything: valid.txt is the validation split."}
    return header, []


TASKS = [kjv_next_verse, wordnet_define, factbook_next_sentence, proverbs_cloze, kjv_verse_end,
         valid_perplexity]


def sample(rng, items, limit):
    rng.shuffle(items)
    return items[:limit]


def write_task(out_dir, header, items):
    path = os.path.join(out_dir, header["task"] + ".jsonl")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps({"format": FORMAT, **header}, ensure_ascii=False) + "\n")
        for item in items:
            f.write(json.dumps(item, ensure_ascii=False) + "\n")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "eval", "tasks"))
    ap.add_argument("--cache", default="/tmp/tandem-corpus-cache", help="downloaded packages")
    ap.add_argument("--items", type=int, default=400, help="items per task at most")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for build in TASKS:
        header, items = build(args.cache, args.items)
        path = write_task(args.out, header, items)
        print(f"{header['task']:22s} {header['kind']:10s} {len(items):4d} items  "
              f"{os.path.getsize(path) / 1e3:7.1f} kB  {os.path.relpath(path, REPO)}")


if __name__ == "__main__":
    main()
