#!/usr/bin/env python3
"""Loads a GGUF in llama.cpp (llama-cpp-python, CPU, n_gpu_layers=0, one sequence) under each
setting and records the buffer sizes llama.cpp reports, as a JSON fixture for gpumem's tests.

usage: measure.py MODEL.gguf OUT.json --ctx 4096 --ctx 16384 --ubatch 512 --fa 0 --fa 1

Each setting runs in its own process (llama.cpp's log goes to stderr, which is parsed); sizes
are llama.cpp's own MiB figures with two decimals, so each is known to within 0.005 MiB.
"""
import argparse
import json
import re
import subprocess
import sys

LOAD = r"""
import sys
from llama_cpp import Llama
ctx, ub, fa, swa_full = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5] == "1"
embedding = sys.argv[6] == "1"
cache = int(sys.argv[7])
Llama(model_path=sys.argv[1], n_ctx=ctx, n_batch=ub, n_ubatch=ub, n_gpu_layers=0,
      flash_attn=fa, swa_full=swa_full, embedding=embedding, n_threads=2, verbose=True,
      type_k=cache, type_v=cache)
"""

# ggml's type ids for --cache-type (llama-cpp-python's type_k and type_v).
CACHE_TYPES = {"f16": 1, "q8_0": 8, "q4_0": 2}

PATTERNS = {
    "weights_mib": r"CPU_Mapped model buffer size =\s+([\d.]+) MiB",
    # DeepSeek-V4's compressor states (f32 rows its compressed caches fold from) are memory
    # beside its caches, reported by each state as its own buffer.
    "kv_mib": r"(?:llama_kv_cache:\s+CPU KV|llama_memory_recurrent:\s+CPU RS|"
              r"llama_dsv4_comp_state:\s+CPU DSV4 \w+ state) buffer size =\s+([\d.]+) MiB",
    "compute_mib": r"CPU compute buffer size =\s+([\d.]+) MiB",
    "output_mib": r"CPU\s+output buffer size =\s+([\d.]+) MiB",
    # The CPU backend's repacked copy of some quantized weights (e.g. MXFP4 experts): memory
    # beside the mapped file that other backends do not allocate.
    "cpu_repack_mib": r"CPU_REPACK model buffer size =\s+([\d.]+) MiB",
}


def measure(model: str, ctx: int, ubatch: int, fa: bool, swa_full: bool,
            embedding: bool = False, cache: str = "f16") -> dict:
    run = subprocess.run([sys.executable, "-c", LOAD, model, str(ctx), str(ubatch), "1" if fa else "0",
                          "1" if swa_full else "0", "1" if embedding else "0",
                          str(CACHE_TYPES[cache])],
                         capture_output=True, text=True, timeout=1800)
    log = run.stderr
    if run.returncode != 0:
        raise SystemExit(f"llama.cpp failed on {model} ctx={ctx} ubatch={ubatch} fa={fa}:\n{log[-2000:]}")
    row = {"context": ctx, "ubatch": ubatch, "flash_attention": fa, "swa_full": swa_full}
    if cache != "f16":
        row["kv_type"] = cache
    if embedding:
        # llama-cpp-python's embedding mode reserves min(n_batch, 256) sequences (n_seq_max).
        row["embeddings"] = True
        row["seqs"] = min(ubatch, 256)
    for key, pattern in PATTERNS.items():
        found = re.findall(pattern, log)
        # Several KV buffers (e.g. sliding-window caches) add up; the compute buffer is the
        # first figure reported (the reservation), not the destructor's echo.
        values = [float(v) for v in found]
        row[key] = sum(values) if key == "kv_mib" else (values[0] if values else None)
        if key == "kv_mib" and len(values) > 1:
            # Each figure is printed to 0.01 MiB, so their sum is known to within 0.005 MiB
            # a buffer.
            row["kv_buffers"] = len(values)
    return row


def describe(model: str) -> dict:
    """The GGUF header as gpumem reads it: scalar metadata and every tensor's name, dimensions
    (innermost first) and ggml type, so the tests can rebuild the model without the file."""
    from gguf import GGUFReader, GGUFValueType
    r = GGUFReader(model)
    meta = {}
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or (f.name.startswith("tokenizer.") and f.name != "tokenizer.ggml.model"):
            continue
        if len(f.types) == 1 and f.types[0] == GGUFValueType.STRING:
            meta[f.name] = bytes(f.parts[f.data[0]]).decode()
        elif len(f.types) == 1 and f.types[0] not in (GGUFValueType.ARRAY,):
            v = f.parts[f.data[0]][0]
            meta[f.name] = v.item() if hasattr(v, "item") else v
        elif f.types and f.types[0] == GGUFValueType.ARRAY and f.types[-1] != GGUFValueType.STRING:
            meta[f.name] = [f.parts[i][0].item() for i in f.data]
    tensors = [[t.name, [int(x) for x in t.shape], int(t.tensor_type)] for t in r.tensors]
    return {"metadata": meta, "tensors": tensors}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("--ctx", type=int, action="append", required=True)
    p.add_argument("--ubatch", type=int, action="append", required=True)
    p.add_argument("--fa", type=int, action="append", default=None)
    p.add_argument("--swa-full", type=int, action="append", default=None,
                   help="llama.cpp's swa_full (1, the library's default, unless given)")
    p.add_argument("--shape-of", default="", help="the published model the shape is copied from")
    p.add_argument("--shape", default="{}", help="make_gguf.py's arguments as JSON, for the tests")
    p.add_argument("--embedding", action="store_true",
                   help="compute embeddings (an encoder: llama-cpp-python's embedding=True)")
    p.add_argument("--cache-type", default="f16", choices=sorted(CACHE_TYPES),
                   help="the K and V cache type (llama.cpp's -ctk/-ctv; quantized needs --fa 1)")
    p.add_argument("--describe", action="store_true",
                   help="record the GGUF header (metadata and tensors) for the tests")
    a = p.parse_args()
    import llama_cpp
    rows = []
    for ctx in a.ctx:
        for ub in a.ubatch:
            for fa in a.fa or [0]:
                for swa_full in a.swa_full or [1]:
                    rows.append(measure(a.model, ctx, ub, bool(fa), bool(swa_full),
                                        a.embedding, a.cache_type))
                    print(rows[-1], file=sys.stderr)
    doc = {
        "engine": f"llama-cpp-python {llama_cpp.__version__}, CPU backend, n_gpu_layers=0, "
                  f"n_batch=n_ubatch, one sequence (an encoder's embedding rows: `seqs`), {a.cache_type} KV, "
                  "swa_full as each row says",
        "model": a.model.rsplit("/", 1)[-1],
        "shape_of": a.shape_of,
        "shape": json.loads(a.shape),
        "rows": rows,
    }
    if a.describe:
        doc["gguf"] = describe(a.model)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
