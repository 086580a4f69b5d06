"""Extracts the image processor's outputs from the vision oracle into a small pixels.safetensors
per model folder (media/'s tests read it; the model and logits goldens are copied separately).

Usage: python3 extract_pixels.py ORACLE_VISION_DIR OUT_DIR    (plain Python, no numpy)

The processor's float pixel values are a function of one uint8 per value: Gemma 3's
float32((float32(float64(u) * rescale) - mean) / std), Gemma 4's float32(float64(u) * rescale).
So each image is stored losslessly as those uint8s (4x smaller than float32), after checking
that the function of them reproduces every stored float bit for bit; Gemma 4's padding patches
(zeros at position -1) are checked and dropped. Per case i, image j:
  pixel_u8.i.j            U8  Gemma 3 [3, H, W]; Gemma 4 [num_patches, 3*p*p] (real patches)
  image_position_ids.i.j  I32 Gemma 4 [num_patches, 2]
The metadata's "cases" lists each case's image files and its image (soft) token count, from
golden.json. And, to check the float function itself, floats as the processor gave them:
  pixel_values_head.0.0   F32 case 0's first image: all of it (Gemma 3) or its first 64
                          patches (Gemma 4)
"""
import json, os, struct, sys


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def read_safetensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = data[8 + n + b:8 + n + end]
        fmt = {"F32": "f", "I32": "i"}[e["dtype"]]
        out[name] = (e["shape"], list(struct.unpack("<%d%s" % (len(raw) // 4, fmt), raw)))
    return out


def write_safetensors(path, tensors, metadata):
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, (dtype, shape, values) in tensors.items():
        fmt = {"U8": "B", "I32": "i", "F32": "f"}[dtype]
        blob = struct.pack("<%d%s" % (len(values), fmt), *values)
        blob += b"\0" * (-len(blob) % 8)  # keep every tensor 8-byte aligned
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(struct.pack("<%d%s" % (len(values), fmt), *values))]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def value_table(ip, gemma3):
    """float bits -> uint8 for each channel: the processor's rescale (+ normalize)."""
    scale = ip.get("rescale_factor", 1 / 255)
    normalize = ip.get("do_normalize", gemma3)
    mean = ip.get("image_mean", [0.5] * 3 if gemma3 else [0.0] * 3)
    std = ip.get("image_std", [0.5] * 3 if gemma3 else [1.0] * 3)
    tables = []
    for c in range(3):
        t = {}
        for u in range(256):
            v = f32(u * scale)
            if normalize:
                v = f32(f32(v - f32(mean[c])) / f32(std[c]))
            t[struct.pack("<f", v)] = u
        tables.append(t)
    return tables


def encode(values, channel_of, tables, where):
    out = []
    for k, v in enumerate(values):
        u = tables[channel_of(k)].get(struct.pack("<f", v))
        if u is None:
            sys.exit(f"{where}: value {v!r} at {k} is not the processor's function of a uint8")
        out.append(u)
    return out


def extract(src, dst):
    pc = json.load(open(os.path.join(src, "processor_config.json")))
    ip = pc.get("image_processor") or json.load(open(os.path.join(src, "preprocessor_config.json")))
    gemma3 = ip["image_processor_type"].startswith("Gemma3")
    tables = value_table(ip, gemma3)
    golden = read_safetensors(os.path.join(src, "golden.safetensors"))
    cases = json.load(open(os.path.join(src, "golden.json")))["cases"]
    tensors = {}
    for i, case in enumerate(cases):
        if not case["images"]:
            continue
        shape, values = golden[f"pixel_values.{i}"]
        n, per_image = shape[0], 1
        for d in shape[1:]:
            per_image *= d
        assert n == len(case["images"]), (src, i)
        for j in range(n):
            img = values[j * per_image:(j + 1) * per_image]
            where = f"{src} pixel_values.{i}[{j}]"
            if gemma3:
                hw = shape[2] * shape[3]
                u8 = encode(img, lambda k: k // hw, tables, where)
                tensors[f"pixel_u8.{i}.{j}"] = ("U8", shape[1:], u8)
                real = img
            else:
                rows, cols = shape[1], shape[2]
                pshape, pos = golden[f"image_position_ids.{i}"]
                pos = pos[j * rows * 2:(j + 1) * rows * 2]
                num = sum(1 for r in range(rows) if pos[2 * r] != -1)
                assert all(p == -1 for p in pos[2 * num:]), f"{where}: padding is not a suffix"
                assert all(v == 0.0 for v in img[num * cols:]), f"{where}: padding is not zero"
                assert all(p >= 0 for p in pos[:2 * num]), f"{where}: bad positions"
                real = img[:num * cols]
                u8 = encode(real, lambda k: k % 3, tables, where)
                tensors[f"pixel_u8.{i}.{j}"] = ("U8", [num, cols], u8)
                tensors[f"image_position_ids.{i}.{j}"] = ("I32", [num, 2], pos[:2 * num])
            if i == 0 and j == 0:
                head = real if gemma3 else real[:64 * shape[2]]
                head_shape = shape[1:] if gemma3 else [len(head) // shape[2], shape[2]]
                tensors["pixel_values_head.0.0"] = ("F32", head_shape, head)
    write_safetensors(os.path.join(dst, "pixels.safetensors"), tensors,
                      {"source": "golden.safetensors of make_oracle_vision.py (seed 1), transformers 5.17 PIL processors",
                       "cases": json.dumps([{"images": c["images"], "image_tokens": c["image_tokens"]} for c in cases]),
                       "encoding": "pixel_u8: uint8 whose rescale/normalize reproduces the processor's float32 exactly"})
    print(dst, len(tensors), "tensors")


if __name__ == "__main__":
    root, out = sys.argv[1], sys.argv[2]
    for name in sorted(os.listdir(root)):
        if os.path.exists(os.path.join(root, name, "golden.safetensors")):
            os.makedirs(os.path.join(out, name), exist_ok=True)
            extract(os.path.join(root, name), os.path.join(out, name))
