#!/usr/bin/env python3
"""Records llama-server's fit of a model with a multimodal projector beside it
(`--mmproj FILE`): `breakdown` (breakdown.cpp) with BREAKDOWN_FIT=1, BREAKDOWN_SERVER_OUTPUTS=1
and BREAKDOWN_MMPROJ, which adds mtmd_get_memory_usage's bytes to the fit's margins as
llama-server does, on ggml-rpc-server devices whose sizes the margins emulate (as
measure_fit.py does). Each row also records the fit without the projector, so the test sees
what the projector costs, and twice with it: as llama-server adds it over ggml-rpc (by the
device's registry index, which for ggml-rpc's devices is another device's target) and on the
GPU it lands on (`on_its_gpu`: BREAKDOWN_MMPROJ_BY_GPU=1, what a build whose GPUs come first in
the registry does), which gpumem plans.

    measure_mmproj_fit.py ./breakdown llama-fit-params MODEL.gguf MMPROJ.gguf OUT.json \
        --rpc 127.0.0.1:50052,127.0.0.1:50053 --model-shape "..." --mmproj-shape "..."
"""
import argparse
import json
import os
import re
import subprocess

from measure import describe
from measure_fit import free_mib

# (sizes MiB, np, ctx; 0: the fit chooses the context, fa).
FITS = [
    ([6144], 1, 8192, "on"),
    ([8192], 1, 8192, "on"),
    ([9216], 1, 8192, "on"),
    ([10240], 1, 8192, "on"),
    ([9216], 1, 8192, "off"),
    ([10240], 4, 8192, "on"),
    ([5120, 5120], 1, 8192, "on"),
    ([6144, 6144], 2, 8192, "on"),
    ([12288], 1, 0, "on"),
    ([16384], 1, 0, "on"),
]


def run(binary, model, rpc, margins, np_, ctx, fa, mmproj, by_gpu=False):
    env = dict(os.environ, BREAKDOWN_FIT="1", BREAKDOWN_SERVER_OUTPUTS="1")
    if mmproj:
        env["BREAKDOWN_MMPROJ"] = mmproj
        env["BREAKDOWN_MMPROJ_BY_GPU"] = "1" if by_gpu else "0"
    cmd = [binary, "-m", model, "--rpc", rpc] + (["-c", str(ctx)] if ctx else []) \
        + ["-np", str(np_), "-fa", fa, "-fitt", ",".join(str(m) for m in margins)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    m = re.search(r"-c (\d+) -ngl (-?\d+)(?: -ts ([\d,]+))?", res.stdout)
    used = [{"device": d, "bytes": int(b), "target": int(t)}
            for d, b, t in re.findall(r"mmproj (\S+) (\d+) (-?\d+)", res.stdout)]
    printed = "\n".join(l for l in res.stdout.strip().splitlines() if not l.startswith("mmproj"))
    return {"printed": printed, "fits": m is not None, "mmproj_memory": used}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("breakdown")
    p.add_argument("fit_params")
    p.add_argument("model")
    p.add_argument("mmproj")
    p.add_argument("out")
    p.add_argument("--rpc", required=True, help="two rpc-server devices, comma-separated")
    p.add_argument("--model-shape", required=True)
    p.add_argument("--mmproj-shape", required=True)
    a = p.parse_args()
    fits = []
    for sizes, np_, ctx, fa in FITS:
        rpc = ",".join(a.rpc.split(",")[:len(sizes)])
        free = free_mib(a.fit_params, a.model, rpc, ctx)[:len(sizes)]
        margins = [f - s + 1024 for f, s in zip(free, sizes)]
        server = run(a.breakdown, a.model, rpc, margins, np_, ctx, fa, a.mmproj)
        by_gpu = run(a.breakdown, a.model, rpc, margins, np_, ctx, fa, a.mmproj, by_gpu=True)
        without = run(a.breakdown, a.model, rpc, margins, np_, ctx, fa, None)
        fits.append({"device_mib": sizes[0] if len(sizes) == 1 else sizes, "np": np_,
                     "ctx": ctx, "fit_context": not ctx, "flash_attention": fa,
                     "free_mib": free, "fit_target_mib": margins,
                     "server_over_rpc": server, "on_its_gpu": by_gpu,
                     "without_mmproj": without})
    doc = {
        "llama_cpp": "vendored by llama-cpp-python 0.3.36, -DGGML_RPC=ON; breakdown.cpp with "
                     "BREAKDOWN_MMPROJ: llama-server's --mmproj, its fit margins raised by "
                     "mtmd_get_memory_usage",
        "backend": "RPC (ggml-rpc-server on 127.0.0.1, CPU-backed)",
        "model_shape": a.model_shape,
        "mmproj_shape": a.mmproj_shape,
        "fits": fits,
        "model_gguf": describe(a.model),
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
