#!/usr/bin/env python3
"""Records llama.cpp's own per-device memory projection (model, context and compute bytes for
each device and the host) for one GGUF over a sweep of -ngl, context and flash-attention
settings, into a fixture for tests/it/llamacpp_devices.rs.

The devices are ggml-rpc-server processes on 127.0.0.1 (CPU-backed devices llama.cpp uses like
GPUs); `breakdown` (breakdown.cpp, built as README.md says) is llama.cpp's no-alloc dry run, the
one `llama-fit-params -fitp on` prints in whole MiB, in bytes.

    measure_devices.py BREAKDOWN MODEL.gguf OUT.json --rpc 127.0.0.1:50052 \
        --ngl 0 --ngl 1 --ngl 16 --ngl 99 --ctx 4096 --ctx 8192 --fa on --fa off
"""
import argparse
import json
import os
import subprocess

from measure import describe


# The environment breakdown runs in: BREAKDOWN_EMBEDDINGS=1 with --embedding,
# BREAKDOWN_SERVER_OUTPUTS=1 with --server-outputs (and its -np in EXTRA).
ENV = dict(os.environ)
EXTRA = []


def measure(breakdown, model, rpc, ngl, ctx, fa, ub, split, cpu_moe=0, ot=None, seqs=None):
    """`seqs`: (NP, unified) for a row of its own -np (without llama-server's outputs)."""
    cmd = [breakdown, "-m", model] + (["--rpc", rpc] if rpc else []) \
        + ["-ngl", str(ngl), "-c", str(ctx), "-fa", fa, "-ub", str(ub)] \
        + (["-ts", split] if split else []) \
        + (["--n-cpu-moe", str(cpu_moe)] if cpu_moe else []) + (["-ot", ot] if ot else []) + EXTRA \
        + (["-np", str(seqs[0])] if seqs else [])
    env = dict(ENV, BREAKDOWN_KV_UNIFIED="1") if seqs and seqs[1] else ENV
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    devices = []
    for line in out.splitlines():
        parts = line.split()
        if parts[0] == "n_ctx":
            continue
        devices.append({"device": "host" if parts[0] == "Host" else "gpu%d" % len(devices),
                        "model": int(parts[1]), "context": int(parts[2]), "compute": int(parts[3])})
    where = ["--rpc", ",".join("127.0.0.1:PORT%d" % i for i in range(len(rpc.split(","))))] \
        if rpc else []
    row = {"ngl": ngl, "ctx": ctx, "flash_attention": fa, "ubatch": ub, "tensor_split": split,
           "cpu_moe": cpu_moe, "ot": ot,
           "command": ("BREAKDOWN_KV_UNIFIED=1 " if seqs and seqs[1] else "")
           + " ".join(["breakdown", "-m", model.rsplit("/", 1)[-1]] + where
                      + cmd[3 + len(where):]),
           "devices": devices}
    if seqs:
        row["parallel"], row["kv_unified"] = seqs[0], seqs[1]
    return row


def vulkan_limits(block=None):
    """The first Vulkan device's limits as vulkaninfo prints them (ggml-vulkan reads the same);
    a suballocation block given to ggml-vulkan caps the largest allocation."""
    out = subprocess.run(["vulkaninfo"], capture_output=True, text=True, env=ENV).stdout
    found = {}
    for line in out.splitlines():
        parts = line.replace("=", " ").split()
        if len(parts) >= 2 and parts[0] not in found:
            found[parts[0]] = parts[1]
    num = lambda k: int(found[k], 0)
    return {"offset_alignment": num("minStorageBufferOffsetAlignment"),
            "map_alignment": num("minMemoryMapAlignment"),
            "storage_range": None if "VK_EXT_shader_64bit_indexing" in out
            else num("maxStorageBufferRange"),
            "max_allocation": min(num("maxMemoryAllocationSize"), block or 1 << 62),
            "max_buffer": num("maxBufferSize")}


def cuda_device():
    """The first CUDA device's name and driver, as nvidia-smi prints them."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             env=ENV).stdout
    except FileNotFoundError:
        out = ""
    return out.splitlines()[0].strip() if out.strip() else "unknown"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("breakdown")
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("--rpc", help="the rpc-server devices (with --vulkan or --cuda: before the "
                   "build's own GPU, as llama.cpp orders them)")
    p.add_argument("--vulkan", action="store_true",
                   help="breakdown is built with -DGGML_VULKAN=ON and runs on the first Vulkan "
                        "device (GGML_VK_VISIBLE_DEVICES=0: lavapipe is a CPU-type device)")
    p.add_argument("--cuda", action="store_true",
                   help="breakdown is built with -DGGML_CUDA=ON and runs on the first CUDA device "
                        "(CUDA_VISIBLE_DEVICES=0), whose name nvidia-smi gives")
    p.add_argument("--ngl", type=int, action="append", required=True)
    p.add_argument("--ctx", type=int, action="append", required=True)
    p.add_argument("--fa", action="append", default=None)
    p.add_argument("--ubatch", type=int, default=512)
    p.add_argument("--ts", action="append", default=None, help="a -ts value (several devices)")
    p.add_argument("--cpu-moe", type=int, action="append", default=None,
                   help="--n-cpu-moe values (experts of the first N layers on the CPU)")
    p.add_argument("--shape", required=True, help="how the GGUF was made (make_gguf.py flags)")
    p.add_argument("--server-outputs", type=int, default=0, metavar="NP",
                   help="llama-server's reserve: logits for the last token of each of NP "
                        "sequences (-np NP; BREAKDOWN_SERVER_OUTPUTS=1)")
    p.add_argument("--kv-unified", action="store_true",
                   help="with --server-outputs NP > 1: one KV cache for the NP sequences (-kvu)")
    p.add_argument("--np", type=int, action="append", default=None,
                   help="rows of -np NP sequences (logits for every token, as llama-fit-params "
                        "reserves them), each with its own KV stream and again with one cache "
                        "for all (-kvu); recorded in each row as parallel and kv_unified")
    p.add_argument("--op-offload", action="store_true",
                   help="breakdown runs against the RPC library patched with ggml-cuda's operator "
                        "offload rule (README.md, 'Operator offload'): LD_LIBRARY_PATH names it")
    p.add_argument("--cpu", action="store_true",
                   help="no device at all: the CPU backend's own buffers (an RPC build without "
                        "--rpc)")
    p.add_argument("--cache-type", metavar="TYPE",
                   help="the KV cache's type for K and V (-ctk/-ctv; llama.cpp quantizes V "
                        "only with flash attention on)")
    p.add_argument("--embedding", action="store_true",
                   help="the context computes embeddings (an encoder, as llama-server --embedding)")
    p.add_argument("--no-graph-optimize", action="store_true",
                   help="with --vulkan: ggml-vulkan keeps the graph's node order "
                        "(GGML_VK_DISABLE_GRAPH_OPTIMIZE=1) instead of reordering each split")
    p.add_argument("--suballocation-block", type=int, metavar="BYTES",
                   help="with --vulkan: ggml-vulkan's buffers capped at BYTES "
                        "(GGML_VK_SUBALLOCATION_BLOCK_SIZE), to check the chunked allocation "
                        "that a compute buffer above 1 GiB takes; recorded as the largest "
                        "allocation, which caps them the same way")
    a = p.parse_args()
    # Each option's environment for breakdown (and the backends it loads).
    for given, name, value in [
            (a.suballocation_block, "GGML_VK_SUBALLOCATION_BLOCK_SIZE", str(a.suballocation_block)),
            (a.vulkan, "GGML_VK_VISIBLE_DEVICES", "0"),
            (a.cuda, "CUDA_VISIBLE_DEVICES", "0"),
            (a.no_graph_optimize, "GGML_VK_DISABLE_GRAPH_OPTIMIZE", "1"),
            (a.embedding, "BREAKDOWN_EMBEDDINGS", "1"),
            (a.kv_unified, "BREAKDOWN_KV_UNIFIED", "1"),
            (a.server_outputs, "BREAKDOWN_SERVER_OUTPUTS", "1")]:
        if given:
            ENV[name] = value
    if a.server_outputs:
        EXTRA.extend(["-np", str(a.server_outputs)])
    if a.cache_type:
        EXTRA.extend(["-ctk", a.cache_type, "-ctv", a.cache_type])
    rows = [measure(a.breakdown, a.model, a.rpc, ngl, ctx, fa, a.ubatch, ts, moe, seqs=seqs)
            for ngl in a.ngl for ctx in a.ctx for fa in (a.fa or ["on"]) for ts in (a.ts or [None])
            for moe in (a.cpu_moe or [0])
            for seqs in ([(n, u) for n in a.np for u in (False, True)] if a.np else [None])]
    doc = {
        "llama_cpp": "vendored by llama-cpp-python 0.3.36, built with -DGGML_RPC=ON"
        + (" -DGGML_VULKAN=ON" if a.vulkan else "")
        + (" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90" if a.cuda else ""),
        "backend": "CPU" if a.cpu else
        "RPC (ggml-rpc-server on 127.0.0.1, CPU-backed), then Vulkan (Mesa's lavapipe)"
        if a.vulkan and a.rpc else "Vulkan (Mesa's lavapipe)" if a.vulkan else
        ("RPC (ggml-rpc-server on 127.0.0.1, CUDA-backed), then " if a.rpc else "")
        + "CUDA (%s)" % cuda_device() if a.cuda else
        "RPC (ggml-rpc-server on 127.0.0.1, CPU-backed)"
        + (", the client given ggml-cuda's offload_op (batch >= 32)" if a.op_offload else ""),
        "op_offload": a.op_offload or a.vulkan or a.cuda,
        # With a GPU backend, the rpc-server devices llama.cpp orders before the local one,
        # and what serves them: the CPU (lavapipe is skipped unless asked for), or from a
        # CUDA build the GPU.
        "rpc_devices": len(a.rpc.split(",")) if a.rpc and (a.vulkan or a.cuda) else None,
        "rpc_backend": ("CUDA" if a.cuda else "CPU") if a.rpc and (a.vulkan or a.cuda) else None,
        "vulkan_limits": vulkan_limits(a.suballocation_block) if a.vulkan else None,
        "graph_optimize": (not a.no_graph_optimize) if a.vulkan else None,
        "suballocation_block": a.suballocation_block,
        "gguf": a.model.rsplit("/", 1)[-1],
        "shape": a.shape,
        "embeddings": a.embedding,
        "server_outputs": a.server_outputs or None,
        "kv_unified": a.kv_unified,
        "cache_type": a.cache_type,
        "rows": rows,
        "gguf": describe(a.model),
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
