#!/usr/bin/env python3
"""Records what llama.cpp allocates for a Gemma 4 assistant beside its target
(`llama-server -m TARGET -md ASSISTANT --spec-type draft-mtp`): `assistant_buffers`
(assistant_buffers.cpp) loads the target, then the assistant in an MTP context reading the
target's cache, and prints both models' model, context and compute bytes per device.

Rows: the target and the assistant all in RAM (-ngl 0; the draft's -ngld follows its default,
all layers, which on no GPU is none) and all on one ggml-rpc-server device (-ngl 99), at two
contexts, flash attention off and on. The assistant's output buffer (its logits, a host buffer
outside the breakdown) is read from llama.cpp's log.

    measure_assistant.py ./assistant_buffers TARGET.gguf ASSISTANT.gguf OUT.json \
        --rpc 127.0.0.1:50152 --target-shape "..." --draft-shape "..."
"""
import argparse
import json
import os
import re
import subprocess

from measure import describe

# (ctx, fa, ngl): all in RAM, all on the device.
ROWS = [(c, fa, ngl) for ngl in (0, 99) for c in (4096, 32768) for fa in ("off", "on")]


def devices(text):
    rows = []
    for line in text.strip().splitlines():
        if line.startswith("n_ctx"):
            continue
        name, model, context, compute = line.split()
        rows.append({"device": "host" if name == "Host" else f"gpu{len(rows)}",
                     "model": int(model), "context": int(context), "compute": int(compute)})
    return rows


def measure(binary, target, draft, rpc, ctx, fa, ngl):
    env = dict(os.environ, ASSISTANT=draft)
    cmd = [binary, "-m", target, "-c", str(ctx), "-fa", fa, "-ngl", str(ngl), "-v"]
    if ngl:
        cmd += ["--rpc", rpc]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    head, tail = res.stdout.split("Draft\n")
    outputs = re.findall(r"output buffer size =\s+([\d.]+) MiB", res.stderr)
    return {"ctx": ctx, "flash_attention": fa, "ngl": ngl, "target": devices(head),
            "draft": devices(tail), "draft_output_mib": float(outputs[-1])}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("binary")
    p.add_argument("target")
    p.add_argument("draft")
    p.add_argument("out")
    p.add_argument("--rpc", required=True, help="one rpc-server device")
    p.add_argument("--target-shape", required=True)
    p.add_argument("--draft-shape", required=True)
    a = p.parse_args()
    doc = {
        "llama_cpp": "b11312, vendored by llama-cpp-python 0.3.36, -DGGML_RPC=ON; "
                     "assistant_buffers.cpp: llama-server's -md ASSISTANT --spec-type draft-mtp "
                     "(common_speculative_init_result: an MTP context with ctx_other the "
                     "target's), both models loaded without data (no_alloc), llama.cpp's "
                     "memory breakdown; -np 1, -ub 512, f16 caches",
        "backend": "CPU, and RPC (ggml-rpc-server on 127.0.0.1, CPU-backed) for -ngl 99",
        "target_shape": a.target_shape,
        "draft_shape": a.draft_shape,
        "rows": [measure(a.binary, a.target, a.draft, a.rpc, *r) for r in ROWS],
        "target_gguf": describe(a.target),
        "draft_gguf": describe(a.draft),
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
