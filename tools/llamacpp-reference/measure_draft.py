#!/usr/bin/env python3
"""Records what llama-server allocates for a target model with a draft model beside it
(`-md DRAFT --spec-type draft-simple --spec-draft-n-max N`), and the fit it makes of both:
`breakdown` (breakdown.cpp) with BREAKDOWN_DRAFT, on ggml-rpc-server devices.

Breakdown rows: each device's and the host's model, context and compute bytes for the target
(its logits rows as llama-server sets them for drafting: -np x (1 + N)) and for the draft (its
parameters from llama.cpp's own `common_base_params_to_speculative`). Fit rows: llama.cpp's fit
of the target with the draft counted beside it (`common_fit_extra_model`) on devices of each
size, emulated by the margin as measure_fit.py does.

    measure_draft.py ./breakdown llama-fit-params TARGET.gguf DRAFT.gguf OUT.json \
        --rpc 127.0.0.1:50052,127.0.0.1:50053 --target-shape "..." --draft-shape "..."
"""
import argparse
import json
import os
import re
import subprocess

from measure import describe
from measure_fit import free_mib

# (np, n_max, fa, ngl, ngld, ctx): the target all on the device, part of it, and none; the
# draft all there (llama-server's default), part of it.
BREAKDOWNS = [
    (1, 3, "on", 33, None, 8192),
    (1, 3, "off", 33, None, 8192),
    (4, 3, "on", 33, None, 8192),
    (4, 16, "on", 33, None, 8192),
    (4, 16, "off", 33, None, 8192),
    (1, 3, "on", 20, 8, 8192),
    (2, 8, "on", 0, 0, 16384),
]

# (sizes MiB, np, n_max, ctx; 0: the fit chooses the context).
FITS = [
    ([6144], 1, 3, 8192),
    ([8192], 1, 3, 8192),
    ([9216], 1, 3, 8192),
    ([10240], 1, 3, 8192),
    ([12288], 1, 3, 8192),
    ([10240], 4, 16, 8192),
    # Equal sizes: the draft is split by each device's free memory, and the rpc-servers' is the
    # same host's (the margins emulate the sizes, not the free memory).
    ([5120, 5120], 1, 3, 8192),
    ([8192, 8192], 2, 3, 8192),
    ([12288], 1, 3, 0),
    ([16384], 1, 3, 0),
]


def devices(text):
    rows = []
    for line in text.strip().splitlines():
        name, model, context, compute = line.split()
        rows.append({"device": "host" if name == "Host" else f"gpu{len(rows)}",
                     "model": int(model), "context": int(context), "compute": int(compute)})
    return rows


def breakdown(binary, target, draft, rpc, np_, n_max, fa, ngl, ngld, ctx):
    env = dict(os.environ, BREAKDOWN_DRAFT=draft, BREAKDOWN_DRAFT_N_MAX=str(n_max))
    if ngld is not None:
        env["BREAKDOWN_DRAFT_NGL"] = str(ngld)
    cmd = [binary, "-m", target, "--rpc", rpc, "-ngl", str(ngl), "-c", str(ctx), "-fa", fa,
           "-np", str(np_)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    head, tail = out.split("Draft\n")
    head = "\n".join(l for l in head.splitlines() if not l.startswith("n_ctx"))
    return {"np": np_, "n_max": n_max, "flash_attention": fa, "ngl": ngl, "ngld": ngld,
            "ctx": ctx, "target": devices(head), "draft": devices(tail)}


def fit(binary, fit_params, target, draft, rpc_all, sizes, np_, n_max, ctx):
    rpc = ",".join(rpc_all.split(",")[:len(sizes)])
    free = free_mib(fit_params, target, rpc, ctx)[:len(sizes)]
    margins = [f - s + 1024 for f, s in zip(free, sizes)]
    env = dict(os.environ, BREAKDOWN_DRAFT=draft, BREAKDOWN_DRAFT_N_MAX=str(n_max),
               BREAKDOWN_FIT="1")
    cmd = [binary, "-m", target, "--rpc", rpc] + (["-c", str(ctx)] if ctx else []) \
        + ["-np", str(np_), "-fitt", ",".join(str(m) for m in margins)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    m = re.search(r"-c (\d+) -ngl (-?\d+)(?: -ts ([\d,]+))?", res.stdout)
    row = {"device_mib": sizes[0] if len(sizes) == 1 else sizes, "np": np_, "n_max": n_max,
           "free_mib": free, "fit_target_mib": margins,
           "ctx": int(m.group(1)) if m else ctx, "fit_context": not ctx,
           "n_gpu_layers": int(m.group(2)) if m else None,
           "printed": res.stdout.strip(), "fits": m is not None}
    if m and m.group(3):
        row["tensor_split"] = [int(v) for v in m.group(3).split(",")]
    return row


def main():
    p = argparse.ArgumentParser()
    p.add_argument("breakdown")
    p.add_argument("fit_params")
    p.add_argument("target")
    p.add_argument("draft")
    p.add_argument("out")
    p.add_argument("--rpc", required=True, help="two rpc-server devices, comma-separated")
    p.add_argument("--target-shape", required=True)
    p.add_argument("--draft-shape", required=True)
    a = p.parse_args()
    first = a.rpc.split(",")[0]
    rows = [breakdown(a.breakdown, a.target, a.draft, first, *b) for b in BREAKDOWNS]
    fits = [fit(a.breakdown, a.fit_params, a.target, a.draft, a.rpc, *f) for f in FITS]
    doc = {
        "llama_cpp": "vendored by llama-cpp-python 0.3.36, -DGGML_RPC=ON; breakdown.cpp with "
                     "BREAKDOWN_DRAFT: llama-server's -md with --spec-type draft-simple",
        "backend": "RPC (ggml-rpc-server on 127.0.0.1, CPU-backed)",
        "target_shape": a.target_shape,
        "draft_shape": a.draft_shape,
        "rows": rows,
        "fits": fits,
        "target_gguf": describe(a.target),
        "draft_gguf": describe(a.draft),
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
