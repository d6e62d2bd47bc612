#!/usr/bin/env python3
"""Re-records the Vulkan sweeps on a CUDA device: for each `*-vulkan.json` fixture (and the
experts-on-CPU one), rebuilds its sparse GGUF from the fixture's `shape` and runs
measure_devices.py --cuda with the same -ngl, context, flash-attention and --n-cpu-moe values.
Writes OUTDIR/<fixture stem>-cuda.json. Runs where a CUDA build of llama.cpp and `breakdown`
exist (a lent GPU machine); gguf-py comes from that llama.cpp source (PYTHONPATH).

    cuda_sweep.py BREAKDOWN FIXTURES_DIR OUTDIR [--jobs N] [--only STEM ...]
"""
import argparse
import concurrent.futures
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = [
    "llama-3.1-8b-shape-q8_0-vulkan", "gptneox-shape-vulkan", "qwen3-30b-a3b-shape-vulkan",
    "qwen3-30b-a3b-shape-experts-on-cpu", "mixtral-shape-vulkan", "deepseek-v2-layout-vulkan",
    "gemma-3-4b-shape-f16-vulkan", "gemma2-shape-vulkan", "cohere2-shape-vulkan",
    "phi3-shape-vulkan", "granite-4.0-h-tiny-shape-vulkan", "nemotron-h-8b-layout-vulkan",
    "falcon-h1-1.5b-shape-vulkan", "qwen3-next-shape-vulkan", "bge-small-en-v1.5-shape-vulkan",
    # Rows of 896 and 4,864 values and a Q8_0 cache of 128-value rows: ggml-cuda's row padding.
    "qwen2.5-0.5b-shape-q8_0-vulkan",
]


# RPC devices before the local GPU (`--rpc-server`): each rpc-server, started from the CUDA
# build, serves the same GPU, so the rows check ggml-rpc over ggml-cuda's rules.
RPC_SOURCES = [
    "llama-3.1-8b-shape-q8_0-rpc-then-vulkan", "llama-3.1-8b-shape-q8_0-two-rpc-then-vulkan",
    "gemma-3-4b-shape-f16-rpc-then-vulkan", "qwen3-30b-a3b-shape-rpc-then-vulkan",
    "qwen3-next-shape-rpc-then-vulkan",
]


def make_gguf(shape, path):
    """The fixture's `shape` is the make_*.py command without its output path."""
    words = shlex.split(shape)
    script, rest = words[0], words[1:]
    at = 0 if script == "make_gguf.py" else 1  # the others take the architecture first
    args = [sys.executable, os.path.join(HERE, script)] + rest[:at] + [path] + rest[at:]
    subprocess.run(args, check=True, capture_output=True)


def sweep(breakdown, fixtures, outdir, stem, rpc=None):
    """`rpc`: the rpc-server endpoints (comma-separated) the RPC fixtures' rows go through."""
    doc = json.load(open(os.path.join(fixtures, stem + ".json")))
    rows = doc["rows"]
    gguf = os.path.join(outdir, stem.replace("-vulkan", "") + ".gguf")
    make_gguf(doc["shape"], gguf)
    values = lambda key: sorted({r[key] for r in rows if r.get(key) is not None})
    out = stem.replace("-vulkan", "-cuda") + ".json" if rpc \
        else stem.replace("-vulkan", "") + "-cuda.json"
    cmd = [sys.executable, os.path.join(HERE, "measure_devices.py"), breakdown, gguf,
           os.path.join(outdir, out), "--cuda",
           "--shape", doc["shape"], "--ubatch", str(rows[0]["ubatch"])]
    if rpc:
        cmd += ["--rpc", rpc]
    for key, flag in (("ngl", "--ngl"), ("ctx", "--ctx"), ("flash_attention", "--fa"),
                      ("cpu_moe", "--cpu-moe"), ("tensor_split", "--ts")):
        for v in values(key):
            if key != "cpu_moe" or v:
                cmd += [flag, str(v)]
    if doc.get("embeddings"):
        cmd.append("--embedding")
    if doc.get("cache_type"):
        cmd += ["--cache-type", doc["cache_type"]]
    done = subprocess.run(cmd, capture_output=True, text=True)
    os.remove(gguf)
    return stem, done.returncode, done.stderr[-2000:]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("breakdown")
    p.add_argument("fixtures")
    p.add_argument("outdir")
    p.add_argument("--jobs", type=int, default=4)
    p.add_argument("--only", action="append")
    p.add_argument("--rpc-server", metavar="PATH",
                   help="ggml-rpc-server of the CUDA build: also sweep the RPC fixtures, two "
                        "servers on 127.0.0.1 serving the GPU before it (one after the other)")
    a = p.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        jobs = [pool.submit(sweep, os.path.abspath(a.breakdown), a.fixtures, a.outdir, s)
                for s in (a.only or SOURCES)]
        for j in concurrent.futures.as_completed(jobs):
            stem, rc, err = j.result()
            print(stem, "ok" if rc == 0 else "FAILED %d: %s" % (rc, err), flush=True)
    if not a.rpc_server:
        return
    ports = [50152, 50153]
    servers = [subprocess.Popen([a.rpc_server, "-H", "127.0.0.1", "-p", str(p)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for p in ports]
    try:
        time.sleep(3)
        for stem in RPC_SOURCES:
            doc = json.load(open(os.path.join(a.fixtures, stem + ".json")))
            rpc = ",".join("127.0.0.1:%d" % p for p in ports[:doc["rpc_devices"]])
            stem, rc, err = sweep(os.path.abspath(a.breakdown), a.fixtures, a.outdir, stem, rpc)
            print(stem, "ok" if rc == 0 else "FAILED %d: %s" % (rc, err), flush=True)
    finally:
        for s in servers:
            s.terminate()


if __name__ == "__main__":
    main()
