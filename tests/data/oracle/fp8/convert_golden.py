#!/usr/bin/env python3
"""Converts an FP8 oracle fixture's fp8_golden.npz (made by ../shared/oracle/fp8/fp8_ref.py)
into fp8_golden.safetensors, which the C++ tests read (the W8A16 logits are left out):
  ids.i I32 [L], logits.i F32 [L, V]     prompts i = 0..4, the declared W8A8 scheme
  convert_golden.py FIXTURE_DIR          (needs numpy: /usr/bin/python3)
The reference runs in float64. Where a quotient x / s_x is an exact midpoint between two
e4m3 values (common in layer 0, whose input is a ratio of bf16 products: 448·x/amax = 68
exactly, say), float64 noise (68.00000000000001) decides the rounding; an implementation
whose activations are f32 decides it by its own noise, and in these tiny random models
one flipped activation moves every later position's logits by 1e-2..1e-1. So some
prompts of a fixture agree to ~1e-6 and others, after a tie, do not: the C++ test asks
for exact agreement on most prompts and a bounded error on all (tests/golden/fp8_oracle_test.cpp)."""
import os, sys
import numpy as np

def save_st(path, tensors):  # name -> (dtype, raw bytes, shape), as fp8_ref.py writes them
    import json, struct
    hdr, off, blobs = {}, 0, []
    for k, (dt, raw, shape) in tensors.items():
        hdr[k] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}; off += len(raw); blobs.append(raw)
    h = json.dumps(hdr).encode(); h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h); [f.write(b) for b in blobs]

d = sys.argv[1]; ref = np.load(os.path.join(d, "fp8_golden.npz")); tensors = {}
for i in range(5):
    ids = ref["ids.%d" % i]; logits = ref["logits.%d" % i]
    tensors["ids.%d" % i] = ("I32", np.asarray(ids, np.int32).tobytes(), ids.shape)
    tensors["logits.%d" % i] = ("F32", np.asarray(logits, np.float32).tobytes(), logits.shape)
save_st(os.path.join(d, "fp8_golden.safetensors"), tensors)
