"""Seeded hostile inputs: case `i` of seed `s` is always the same files (random.Random(f"{s}:{i}")).

A case is a reader (the row of the report), the files to write (a path under the case folder ->
bytes; a checkpoint folder is a sub-folder), the spec handed to bht, the entry point that reads
it, and standard input's bytes when the spec is "-". Each generator starts from a valid input
and applies one to three mutations: structural ones that bend one field of the format (a .npy
header's shape or dtype, a GGUF tensor's dimensions or metadata nesting, a safetensors header's
dtype or offsets, a zip member's CRC, config.json's type, an index naming the wrong shard) and
byte-level ones (bit flips, truncation, insertion, interesting integers at random offsets).
"""
from __future__ import annotations

import json
import random
import struct
import warnings
from dataclasses import dataclass, field

import numpy as np

from . import build

READERS = ("npy", "npz", "text", "json", "stdin", "sniffed", "safetensors", "gguf", "folder")
# interesting integers for length, count, dimension and offset fields
INTERESTING = (0, 1, 2, 7, 31, 32, 33, 127, 128, 255, 256, 0x7FFF, 0xFFFF, 0x10000, 0x7FFFFFFF,
               0xFFFFFFFF, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1)
DESCRS = ("<f8", "<f4", "<f2", ">f8", "<i4", "|u1", "|b1", "<c16", "|O", "<U3", "|S0", "|V8",
          "<M8[s]", "xx", "", "<f16", "[('a', '<f8')]", "(<f8, (2,))")
ST_DTYPES = ("F64", "F32", "F16", "BF16", "I64", "I32", "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2",
             "C64", "X", "")


@dataclass
class Case:
    reader: str
    files: dict                      # relative path -> bytes
    spec: str                        # what bht is given (relative to the case folder, or "-")
    entry: str = "load"              # load | query | tensors | softcap | stdin | stdin_tensors
    stdin: bytes = b""
    note: str = ""                   # which generator and mutations made it
    cli: list = field(default_factory=list)


# ---- byte-level mutations ----------------------------------------------------------------

def mutate_bytes(rng: random.Random, data: bytes, rounds: int | None = None) -> tuple[bytes, str]:
    ops = []
    data = bytearray(data)
    for _ in range(rounds or rng.choice((1, 1, 1, 2, 3))):
        op = rng.choice(("flip", "byte", "truncate", "delete", "insert", "int", "duplicate", "append"))
        at = rng.randrange(len(data) + 1)
        if op == "flip" and data:
            at = min(at, len(data) - 1)
            data[at] ^= 1 << rng.randrange(8)
        elif op == "byte" and data:
            at = min(at, len(data) - 1)
            data[at] = rng.randrange(256)
        elif op == "truncate":
            data = data[:at]
        elif op == "delete":
            del data[at:at + rng.randrange(1, 17)]
        elif op == "insert":
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 17)))
        elif op == "int":
            width = rng.choice((1, 2, 4, 8))
            value = rng.choice(INTERESTING) % (1 << (8 * width))
            data[at:at + width] = value.to_bytes(width, "little")
        elif op == "duplicate" and data:
            chunk = data[at:at + rng.randrange(1, 64)]
            data[at:at] = chunk
        elif op == "append":
            data += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
        ops.append(op)
    return bytes(data), "+".join(ops)


# ---- .npy and .npz ----------------------------------------------------------------------

def base_array(rng: random.Random) -> np.ndarray:
    gen = np.random.default_rng(rng.randrange(2**32))
    kind = rng.choice(("matrix", "matrix", "matrix", "vector", "f32", "f16", "int", "fortran",
                       "empty", "scalar", "3d"))
    n, d = rng.randrange(1, 9), rng.randrange(1, 6)
    if kind == "vector":
        return gen.standard_normal(n)
    if kind == "f32":
        return gen.standard_normal((n, d)).astype(np.float32)
    if kind == "f16":
        return gen.standard_normal((n, d)).astype(np.float16)
    if kind == "int":
        return gen.integers(-5, 5, (n, d)).astype(np.int32)
    if kind == "fortran":
        return np.asfortranarray(gen.standard_normal((n, d + 1)))
    if kind == "empty":
        return np.zeros((0, d))
    if kind == "scalar":
        return np.array(1.5)
    if kind == "3d":
        return gen.standard_normal((2, n, d))
    return gen.standard_normal((n, d))


def npy_case_bytes(rng: random.Random) -> tuple[bytes, str]:
    """A valid .npy file, or one whose header or data is bent, or byte-mutated."""
    arr = base_array(rng)
    good = build.npy_bytes(arr)
    roll = rng.random()
    if roll < 0.15:
        return good, "valid"
    if roll < 0.6:
        return header_mutation(rng, arr)
    data, ops = mutate_bytes(rng, good)
    return data, f"bytes:{ops}"


def header_mutation(rng: random.Random, arr: np.ndarray) -> tuple[bytes, str]:
    descr = np.lib.format.dtype_to_descr(arr.dtype)
    shape, fortran, version, data = arr.shape, "False", (1, 0), arr.tobytes()
    what = rng.choice(("shape", "shape", "descr", "fortran", "keys", "syntax", "version",
                       "length", "long_header", "longs", "truncated", "huge_small_file"))
    header = None
    if what == "shape":
        shape = rng.choice(((10**5, 10**5), (2**63,), (0, 2**63), (0, 2**62, 4), (2**64,), (-1, 3),
                            (3, -4), (1.5, 2), ("3", 4), (3,) * 40, (None,), (), (2**31, 2**31),
                            (arr.size + 1,), (0,), (True, 2)))
    elif what == "descr":
        descr = rng.choice(DESCRS)
    elif what == "fortran":
        fortran = rng.choice(("True", "1", "'yes'", "None"))
    elif what == "keys":
        header = rng.choice(("{'descr': '<f8', 'shape': (1,), }", "{'descr': '<f8', 'fortran_order': False, "
                             "'shape': (1,), 'extra': 1, }", "[1, 2, 3]", "None", "{}",
                             "{'descr': '<f8', 'fortran_order': False, 'shape': [1], }"))
    elif what == "syntax":            # what sends numpy's reader to tokenize
        text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
        cut = rng.choice(("drop_paren", "drop_brace", "quote", "backslash", "nul", "nest"))
        if cut == "drop_paren":
            header = text.replace(")", " ", 1)
        elif cut == "drop_brace":
            header = text.rstrip("} ")
        elif cut == "quote":
            header = text.replace("'", '"', 1)[:-3] + "'''"
        elif cut == "backslash":
            header = text[:-2] + "\\"
        elif cut == "nul":
            header = text.replace(":", "\0", 1)
        else:
            header = "(" * 300 + "1" + ")" * 300
    elif what == "version":
        version = rng.choice(((2, 0), (3, 0), (4, 0), (0, 0), (1, 1), (255, 255)))
    elif what == "long_header":       # valid, padded past numpy's 10 kB limit
        header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}" + " " * 20000
        version = (2, 0)
    elif what == "longs":
        header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({', '.join(f'{s}L' for s in shape)}{',' if len(shape) == 1 else ''}), }}"
    elif what == "truncated":
        data = data[:rng.randrange(len(data) + 1)] if data else b""
    elif what == "huge_small_file":
        shape = rng.choice(((100000, 100000), (10**7, 10**4), (2**40,)))
        data = data[:64]
    if header is None:
        header = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}"
    raw = build.npy_bytes(header=header, version=version, data=data)
    if what == "length":
        raw = raw[:8] + rng.choice(INTERESTING).to_bytes(8, "little")[:2] + raw[10:]
    return raw, f"header:{what}"


def npz_case_bytes(rng: random.Random) -> tuple[bytes, str, list]:
    """A zip of .npy members (some bent), stored or deflated, possibly damaged as a zip."""
    members = []
    for k in range(rng.choice((1, 1, 1, 2, 3))):
        data, how = npy_case_bytes(rng) if rng.random() < 0.5 else (build.npy_bytes(base_array(rng)), "valid")
        name = rng.choice((f"arr_{k}.npy", f"m{k}.npy", f"w{k}", "../x.npy", "dir/", f"a{k}.npy"))
        members.append((name, data))
    compress = rng.random() < 0.5
    archive = build.zip_bytes(members, compress)
    keys = [n[:-4] if n.endswith(".npy") else n for n, _ in members]
    roll = rng.random()
    if roll < 0.3:
        return archive, f"zip:{'deflate' if compress else 'stored'}", keys
    if roll < 0.55:                     # damage a member's data (bad CRC, corrupt deflate stream)
        data = bytearray(archive)
        first = archive.find(b"PK\x03\x04")
        body = first + 30 + len(members[0][0].encode())
        at = rng.randrange(body, max(body + 1, archive.find(b"PK\x01\x02")))
        if at < len(data):
            data[at] ^= 0xFF
        return bytes(data), "zip:member_data", keys
    if roll < 0.7:                      # lie about a member's sizes in the central directory
        data = bytearray(archive)
        cd = archive.find(b"PK\x01\x02")
        if cd >= 0:
            field = rng.choice((20, 24))            # compressed size, uncompressed size
            data[cd + field:cd + field + 4] = rng.choice((0, 1, 0xFFFFFFFF, 0x7FFFFFFF)).to_bytes(4, "little")
        return bytes(data), "zip:sizes", keys
    data, ops = mutate_bytes(rng, archive)
    return data, f"zip:bytes:{ops}", keys


# ---- text and JSON ----------------------------------------------------------------------

ODD_CELLS = ("nan", "inf", "-Infinity", "1e400", "-1e400", "", "x", "1_0", "\u0663", "0x10", "--1",
             "9" * 400, "9" * 5000, "1e-400", "+", "1,5", " ", "\0", "True", "1.2.3", "\u00a0",
             "1e999999999999", "NaN" * 100)


def text_case_bytes(rng: random.Random, sep: str | None = None) -> tuple[bytes, str]:
    gen = np.random.default_rng(rng.randrange(2**32))
    n, d = rng.randrange(1, 12), rng.randrange(1, 6)
    if rng.random() < 0.03:
        n = rng.choice((20000, 60000))            # long enough to exercise the fast reader
    sep = sep if sep is not None else rng.choice((",", ";", "\t", " ", "  "))
    rows = [[repr(float(v)) for v in row] for row in gen.standard_normal((n, d))]
    header = [f"c{j}" for j in range(d)] if rng.random() < 0.2 else None
    ops = []
    for _ in range(rng.choice((0, 1, 2, 3))):
        op = rng.choice(("cell", "cell", "ragged", "blank", "comment", "index", "bom", "crlf",
                         "long_line", "invalid_utf8", "nul", "header_only"))
        if not rows:
            break
        r = rng.randrange(len(rows))
        if op == "cell" and rows[r]:
            rows[r][rng.randrange(len(rows[r]))] = rng.choice(ODD_CELLS)
        elif op == "ragged":
            rows[r] = rows[r][:-1] if rng.random() < 0.5 and d > 1 else rows[r] + ["1"]
        elif op == "blank":
            rows.insert(r, [])
        elif op == "comment":
            rows.insert(r, ["# note"])
        elif op == "index":
            header = [""] + [f"c{j}" for j in range(d)]
            rows = [[str(i)] + row for i, row in enumerate(rows)]
        elif op == "long_line":
            rows[r] = ["1.0"] * 20000
        elif op == "header_only":
            rows = []
        ops.append(op)
    lines = ([sep.join(header)] if header else []) + [sep.join(row) for row in rows]
    text = "\n".join(lines) + "\n"
    data = text.encode()
    if "bom" in ops:
        data = b"\xef\xbb\xbf" + data
    if "crlf" in ops:
        data = data.replace(b"\n", b"\r\n")
    if "invalid_utf8" in ops:
        data = data[:len(data) // 2] + b"\xff\xfe" + data[len(data) // 2:]
    if "nul" in ops:
        data = data.replace(b"\n", b"\0\n", 1)
    if rng.random() < 0.2 and len(data) < 100000:
        data, more = mutate_bytes(rng, data)
        ops.append(more)
    return data, "text:" + ("+".join(ops) or "valid")


def json_case_bytes(rng: random.Random) -> tuple[bytes, str]:
    gen = np.random.default_rng(rng.randrange(2**32))
    n, d = rng.randrange(1, 8), rng.randrange(1, 5)
    value = gen.standard_normal((n, d)).tolist()
    what = rng.choice(("valid", "deep", "deep", "bigint", "bigint", "types", "ragged", "query",
                       "levels", "floats", "bytes"))
    if what == "deep":
        depth = rng.choice((60, 999, 3000, 100000))
        return b"[" * depth + b"1" + b"]" * depth, f"json:deep{depth}"
    if what == "bigint":
        digits = rng.choice((309, 400, 4300, 4301, 5000, 100000))
        value[0][0] = "BIG"
        text = json.dumps(value).replace('"BIG"', ("-" if rng.random() < 0.3 else "") + "9" * digits)
        return text.encode(), f"json:int{digits}"
    if what == "types":
        value = rng.choice(("x", None, True, 3, {}, {"query": "x"}, {"query": [[1, "a"]]}, [[]], [],
                            [{}], [[None]], [[True, False]], {"query": {"query": [1]}}))
    elif what == "ragged":
        value = [[1.0, 2.0], [3.0]]
    elif what == "query":
        value = {"query": value[0], "h2": 0.5}
    elif what == "levels":
        value = [[[[1.0]]]]
    elif what == "floats":
        return rng.choice((b"[[1e999]]", b"[[NaN]]", b"[[-Infinity, 1]]", b"[[1.0e-999]]",
                           b"[[0.1e99999999999999999999]]")), "json:floats"
    text = json.dumps(value).encode()
    if what == "bytes":
        text, ops = mutate_bytes(rng, text)
        return text, f"json:bytes:{ops}"
    return text, f"json:{what}"


# ---- safetensors ------------------------------------------------------------------------

def safetensors_tensors(rng: random.Random):
    gen = np.random.default_rng(rng.randrange(2**32))
    tensors = []
    for name in rng.sample(("lm_head.weight", "model.embed_tokens.weight", "w", "bias", "x.y:z"),
                           rng.choice((1, 1, 2, 3))):
        n, d = rng.randrange(1, 8), rng.choice((1, 3, 32))
        arr = gen.standard_normal((n, d) if name != "bias" else (n,))
        code = rng.choice(("F64", "F32", "F16", "BF16"))
        if code == "BF16":
            data = (arr.astype(np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
        else:
            data = arr.astype({"F64": "<f8", "F32": "<f4", "F16": "<f2"}[code]).tobytes()
        tensors.append((name, code, arr.shape, data))
    return tensors


def safetensors_case_bytes(rng: random.Random) -> tuple[bytes, str, list]:
    tensors = safetensors_tensors(rng)
    names = [t[0] for t in tensors]
    roll = rng.random()
    if roll < 0.15:
        return build.safetensors_bytes(tensors), "st:valid", names
    if roll < 0.6:
        what = rng.choice(("dtype", "shape", "offsets", "metadata", "header_json", "deep", "length"))
        k = rng.randrange(len(tensors))
        name, code, shape, data = tensors[k]
        if what == "dtype":
            tensors[k] = (name, rng.choice(ST_DTYPES), shape, data)
            return build.safetensors_bytes(tensors), "st:dtype", names
        if what == "shape":
            tensors[k] = (name, code, rng.choice(([0, 2**63], [2**63, 0], [0, 2**64 - 1], [0, 2**62, 8],
                                                  [2**64], [-1], [0], [], [1, 0, 2**63])), b"" if rng.random() < 0.7 else data)
            return build.safetensors_bytes(tensors), "st:shape", names
        if what == "offsets":
            header = json.loads(build.safetensors_bytes(tensors)[8:].rstrip(b" ").split(b"}}", 1)[0] + b"}}")
            header[name]["data_offsets"] = rng.choice(([0, 2**64], [5, 3], [-1, 4], [0], "x", [0, 2**63]))
            return build.safetensors_bytes(tensors, raw_header=json.dumps(header).encode()), "st:offsets", names
        if what == "metadata":
            extra = {"__metadata__": rng.choice(({"a": 1}, "x", None, {"a": {"b": "c"}}, []))}
            return build.safetensors_bytes(tensors, header_extra=extra), "st:metadata", names
        if what == "header_json":
            raw = rng.choice((b"[]", b"null", b"{\"a\": 1}", b"{", b"\xff\xfe", b"{\"a\": {\"dtype\": \"F32\"}}"))
            return build.safetensors_bytes(tensors, raw_header=raw), "st:header_json", names
        if what == "deep":
            raw = b"{\"a\": " + b"[" * 5000 + b"]" * 5000 + b"}"
            return build.safetensors_bytes(tensors, raw_header=raw), "st:deep", names
        data = build.safetensors_bytes(tensors)
        return rng.choice(INTERESTING).to_bytes(8, "little") + data[8:], "st:length", names
    data, ops = mutate_bytes(rng, build.safetensors_bytes(tensors))
    return data, f"st:bytes:{ops}", names


# ---- GGUF -------------------------------------------------------------------------------

def gguf_case_bytes(rng: random.Random) -> tuple[bytes, str, list]:
    gen = np.random.default_rng(rng.randrange(2**32))
    n, d = rng.randrange(1, 6), 32 * rng.choice((1, 2))
    head = gen.standard_normal((n, d)).astype(np.float32)
    tensors = [("output.weight", [d, n], build.GGML_Q8_0, build.q8_0_rows(head)) if rng.random() < 0.5
               else ("output.weight", [d, n], build.GGML_F32, head.tobytes()),
               ("token_embd.weight", [d, n], build.GGML_F16, head.astype(np.float16).tobytes())]
    if rng.random() < 0.3:
        tensors = tensors[1:]
    kvs = [("general.architecture", build.STRING, "llama"),
           ("general.alignment", build.U32, 32),
           ("llama.final_logit_softcapping", build.F32V, 30.0),
           ("tokenizer.ggml.tokens", build.ARRAY, ("array", build.STRING, ["a", "b", "c"]))]
    what = rng.choice(("valid", "nest", "nest", "ndims0", "zero_huge", "dims", "type", "offset",
                       "alignment", "counts", "version", "kv_type", "array_count", "string_len",
                       "dup", "bytes", "bytes", "bytes"))
    version, alignment, n_tensors, n_kv = 3, 32, None, None
    if what == "nest":
        depth = rng.choice((17, 100, 1000, 5000))
        kvs.append(("deep", build.ARRAY, build.gguf_nested(depth)))
    elif what == "ndims0":
        name, _, code, data = tensors[0]
        tensors[0] = (name, [], rng.choice((build.GGML_Q8_0, build.GGML_Q4_0, build.GGML_F32)), data)
    elif what == "zero_huge":
        name, _, code, _ = tensors[0]
        tensors[0] = (name, rng.choice(([0, 2**63], [2**63, 0], [0, 2**64 - 1], [32, 0, 2**62])), code, b"")
    elif what == "dims":
        name, dims, code, data = tensors[0]
        tensors[0] = (name, rng.choice(([33, n], [d] * 9, [2**40, 2**40], [d, n, 2**62], [d, 0], [0])), code, data)
    elif what == "type":
        name, dims, _, data = tensors[0]
        tensors[0] = (name, dims, rng.choice((3, 4, 5, 13, 16, 23, 29, 30, 31, 39, 40, 1000, 2**31)), data)
    elif what == "alignment":
        kvs[1] = rng.choice((("general.alignment", build.U32, 0), ("general.alignment", build.U32, 3),
                             ("general.alignment", build.U32, 2**31), ("general.alignment", build.STRING, "32"),
                             ("general.alignment", build.F32V, 32.0)))
    elif what == "dup":
        tensors.append((tensors[0][0],) + tuple(tensors[0][1:]))
    elif what == "counts":
        n_tensors = rng.choice((0, 1, 100, 2**32, 2**64 - 1))
        n_kv = rng.choice((0, 3, 100, 2**63))
    elif what == "version":
        version = rng.choice((1, 2, 4, 0x03000000, 0))
    data = build.gguf_bytes(kvs, tensors, version, alignment, n_tensors, n_kv)
    if what in ("offset", "kv_type", "array_count", "string_len"):
        data = bytearray(data)
        if what == "offset":             # the first tensor's data offset
            at = data.find(b"output.weight") if b"output.weight" in data else data.find(b"token_embd.weight")
            name_len = 13 if data[at:at + 13] == b"output.weight" else 17
            at += name_len + 4 + 8 * 2 + 4
            data[at:at + 8] = rng.choice((1, 31, 2**40, 2**64 - 1, 2**63)).to_bytes(8, "little")
        elif what == "kv_type":           # the first metadata value's type
            at = 24 + 8 + len("general.architecture")
            data[at:at + 4] = rng.choice((13, 99, 2**31, 9)).to_bytes(4, "little")
        elif what == "array_count":       # the token array's item count
            at = data.find(b"tokenizer.ggml.tokens") + len("tokenizer.ggml.tokens") + 4 + 4
            data[at:at + 8] = rng.choice((2**32, 2**62, 2**64 - 1)).to_bytes(8, "little")
        else:                             # the architecture string's length
            at = 24 + 8 + len("general.architecture") + 4
            data[at:at + 8] = rng.choice((2**40, 2**64 - 1, 10**6)).to_bytes(8, "little")
        data = bytes(data)
    if what == "bytes":
        data, ops = mutate_bytes(rng, data)
        what = f"bytes:{ops}"
    return data, f"gguf:{what}", [t[0] for t in tensors]


# ---- checkpoint folders -----------------------------------------------------------------

CONFIGS = (b"[]", b'"x"', b"null", b"3", b"{", b"\xff", b"[" * 100000 + b"]" * 100000,
           b'{"final_logit_softcapping": ' + b"9" * 5000 + b"}", b'{"final_logit_softcapping": 1e999}',
           b'{"final_logit_softcapping": "x"}', b'{"text_config": []}', b'{"text_config": "x"}',
           b'{"tie_word_embeddings": false}', b'{"tie_word_embeddings": "no"}',
           b'{"final_logit_softcapping": ' + b"9" * 400 + b"}", b'{"model_type": ' + b"[" * 5000 + b"]" * 5000 + b"}")


def folder_case(rng: random.Random) -> tuple[dict, str, list]:
    tensors = safetensors_tensors(rng)
    names = [t[0] for t in tensors]
    files = {}
    sharded = rng.random() < 0.5 and len(tensors) > 1
    if sharded:
        shards = {}
        for k, t in enumerate(tensors):
            shards.setdefault(f"model-{k % 2 + 1:05d}-of-00002.safetensors", []).append(t)
        wmap = {}
        for shard, ts in shards.items():
            files[f"m/{shard}"] = build.safetensors_bytes(ts)
            wmap.update({t[0]: shard for t in ts})
        index = {"metadata": {"total_size": 1}, "weight_map": wmap}
    else:
        files["m/model.safetensors"] = build.safetensors_bytes(tensors)
        index = None
    if rng.random() < 0.6:
        files["m/config.json"] = json.dumps({"model_type": "llama", "tie_word_embeddings": True}).encode()
    what = rng.choice(("valid", "config", "config", "index", "index", "shard_bytes", "pickle_only", "empty"))
    if what == "config":
        files["m/config.json"] = rng.choice(CONFIGS)
    elif what == "index":
        index = index or {"weight_map": {names[0]: "model.safetensors"}}
        wm = index["weight_map"]
        how = rng.choice(("wrong_shard", "missing", "not_dict", "not_object", "deep", "bigint", "to_config", "escape"))
        if how == "wrong_shard":
            shard_names = sorted({v for v in wm.values()})
            other = [f for f in files if f.endswith(".safetensors")]
            for k in wm:
                wm[k] = rng.choice(other)[2:] if other else "model.safetensors"
            wm.setdefault("lm_head.weight", shard_names[0])
        elif how == "missing":
            wm[names[0]] = "nope.safetensors"
        elif how == "not_dict":
            index["weight_map"] = rng.choice(([], "x", None, {"a": 1}))
        elif how == "to_config":
            wm[names[0]] = "config.json"
            files.setdefault("m/config.json", b"{}")
        elif how == "escape":
            wm[names[0]] = "../outside.safetensors"
        files["m/model.safetensors.index.json"] = json.dumps(index).encode()
        if how == "not_object":
            files["m/model.safetensors.index.json"] = rng.choice((b"[]", b'"x"', b"null", b"1"))
        elif how == "deep":
            files["m/model.safetensors.index.json"] = b"[" * 100000 + b"]" * 100000
        elif how == "bigint":
            files["m/model.safetensors.index.json"] = b'{"metadata": {"total_size": ' + b"9" * 5000 + b"}, \"weight_map\": {}}"
        index = None
    elif what == "shard_bytes":
        shard = rng.choice([f for f in files if f.endswith(".safetensors")])
        files[shard], _ = mutate_bytes(rng, files[shard])
    elif what == "pickle_only":
        files = {"m/pytorch_model.bin": b"\x80\x04\x95" + bytes(20)}
    elif what == "empty":
        files = {"m/README.md": b"nothing"}
    if index is not None:
        files["m/model.safetensors.index.json"] = json.dumps(index).encode()
    return files, f"folder:{what}", names


# ---- one case ---------------------------------------------------------------------------

def make_case(seed: int, index: int, reader: str | None = None) -> Case:
    """Case `index` of the campaign `seed` (its reader chosen round-robin unless given)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # zipfile warns about the duplicate names it writes
        return _make_case(random.Random(f"{seed}:{index}"), reader or READERS[index % len(READERS)])


def _make_case(rng: random.Random, reader: str) -> Case:
    if reader == "npy":
        data, note = npy_case_bytes(rng)
        return _file_case(rng, reader, "x.npy", data, note, ("load", "load", "tensors"))
    if reader == "npz":
        data, note, keys = npz_case_bytes(rng)
        spec = "x.npz" if rng.random() < 0.7 or not keys else f"x.npz:{rng.choice(keys + ['nope'])}"
        return _file_case(rng, reader, spec, data, note, ("load", "load", "tensors"))
    if reader == "text":
        data, note = text_case_bytes(rng)
        return _file_case(rng, reader, rng.choice(("x.csv", "x.txt", "x.tsv", "x.dat")), data, note, ("load",))
    if reader == "json":
        data, note = json_case_bytes(rng)
        return _file_case(rng, reader, "x.json", data, note, ("load", "query"))
    if reader == "stdin":
        data, note = _any_bytes(rng)
        return Case(reader, {}, "-", rng.choice(("stdin", "stdin", "stdin_tensors")), data, note)
    if reader == "sniffed":
        data, note = _any_bytes(rng)
        name = rng.choice(("x", "x", "x.bin", "x.dat5", "model"))
        return _file_case(rng, reader, name, data, note, ("load", "load", "tensors"))
    if reader == "safetensors":
        data, note, names = safetensors_case_bytes(rng)
        spec = "x.safetensors" if rng.random() < 0.6 else f"x.safetensors:{rng.choice(names + ['nope'])}"
        return _file_case(rng, reader, spec, data, note, ("load", "load", "tensors", "softcap"))
    if reader == "gguf":
        data, note, names = gguf_case_bytes(rng)
        spec = "x.gguf" if rng.random() < 0.6 else f"x.gguf:{rng.choice(names + ['nope'])}"
        return _file_case(rng, reader, spec, data, note, ("load", "load", "tensors", "softcap"))
    if reader == "folder":
        files, note, names = folder_case(rng)
        spec = "m" if rng.random() < 0.6 else f"m:{rng.choice(names + ['nope'])}"
        entry = rng.choice(("load", "load", "tensors", "softcap"))
        return Case(reader, files, spec if entry != "tensors" else "m", entry, note=note)
    raise ValueError(reader)


def _file_case(rng, reader, spec, data, note, entries) -> Case:
    entry = rng.choice(entries)
    path = spec.split(":")[0] if ".npz:" in spec or ".safetensors:" in spec or ".gguf:" in spec else spec
    if entry == "tensors":
        spec = path
    return Case(reader, {path: data}, spec, entry, note=note)


def _any_bytes(rng: random.Random) -> tuple[bytes, str]:
    kind = rng.choice(("npy", "npy", "npz", "text", "json", "safetensors", "gguf", "pickle"))
    if kind == "npy":
        return npy_case_bytes(rng)
    if kind == "npz":
        return npz_case_bytes(rng)[:2]
    if kind == "text":
        return text_case_bytes(rng)
    if kind == "json":
        return json_case_bytes(rng)
    if kind == "safetensors":
        return safetensors_case_bytes(rng)[:2]
    if kind == "gguf":
        return gguf_case_bytes(rng)[:2]
    return b"\x80\x04\x95" + bytes(rng.randrange(256) for _ in range(30)), "pickle"
