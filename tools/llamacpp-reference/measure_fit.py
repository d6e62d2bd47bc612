#!/usr/bin/env python3
"""Records llama.cpp's own choice of -ngl for one GGUF on a device of each given size: the fit
`llama-fit-params` makes (the `llama_params_fit` that `llama-server --fit` runs), with the
context set and llama.cpp's defaults otherwise (flash attention auto, a 1024 MiB margin).

One ggml-rpc-server on 127.0.0.1 is the device; its free memory is the host's, so a device of
S MiB is emulated by the margin `-fitt FREE - S + 1024`, which leaves llama.cpp's own default
margin of 1024 MiB on an S MiB device. FREE is what llama.cpp reports (whole MiB).
For a MoE model the fit also moves feed-forward weights to the CPU: `printed` keeps its `-ot`
overrides as llama-fit-params wrote them.

    measure_fit.py llama-fit-params MODEL.gguf OUT.json --rpc 127.0.0.1:50052 --ctx 8192 \
        --size-mib 6144 --size-mib 8192
"""
import argparse
import json
import os
import re
import subprocess

# With --server: `breakdown` (breakdown.cpp) in its fit mode, keeping logits for one token a
# sequence as llama-server does, so the fit is the one `llama-server --fit` makes.
ENV = dict(os.environ)

from measure import describe
from measure_devices import vulkan_limits


def free_mib(fit_params, model, rpc, ctx):
    out = subprocess.run([fit_params, "-m", model] + (["--rpc", rpc] if rpc else [])
                         + ["-c", str(ctx or 4096), "-v"],
                         capture_output=True, text=True, env=ENV).stderr
    return [int(v) for v in re.findall(r"- (\d+) MiB free", out)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("fit_params")
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("--rpc", help="the rpc-server devices (else the build's own GPU backend)")
    p.add_argument("--vulkan", action="store_true",
                   help="FIT_PARAMS is built with -DGGML_VULKAN=ON and runs on the first Vulkan "
                        "device (lavapipe: GGML_VK_VISIBLE_DEVICES=0)")
    p.add_argument("--ctx", type=int, required=True,
                   help="the context set (-c); 0: none, llama.cpp's fit chooses it")
    p.add_argument("--size-mib", action="append", required=True,
                   help="a device's size, or several devices' (comma-separated)")
    p.add_argument("--shape", required=True)
    p.add_argument("--made-by", default=None, help="the command that wrote the GGUF")
    p.add_argument("--server", action="store_true",
                   help="FIT_PARAMS is breakdown: llama-server's fit (one output a sequence)")
    p.add_argument("--op-offload", action="store_true",
                   help="the RPC library is the one patched with ggml-cuda's operator offload rule "
                        "(README.md, 'Operator offload'): LD_LIBRARY_PATH names it")
    p.add_argument("--cache-type", metavar="TYPE",
                   help="the KV cache's type for K and V (-ctk/-ctv)")
    p.add_argument("--split-mode", choices=["layer", "none"], default="layer",
                   help="-sm: none keeps llama.cpp to the first device (-mg 0), so only its "
                        "margin is given; the other sizes are recorded for the devices beside it")
    a = p.parse_args()
    cache = ["-ctk", a.cache_type, "-ctv", a.cache_type] if a.cache_type else []
    cache += ["-sm", "none"] if a.split_mode == "none" else []
    if a.vulkan:
        ENV["GGML_VK_VISIBLE_DEVICES"] = "0"
    if a.server:
        ENV.update(BREAKDOWN_FIT="1", BREAKDOWN_SERVER_OUTPUTS="1")
    rows = []
    for sizes in a.size_mib:
        sizes = [int(v) for v in sizes.split(",")]
        rpc = ",".join(a.rpc.split(",")[:len(sizes)]) if a.rpc else None
        free = free_mib(a.fit_params, a.model, rpc, a.ctx)
        # Each device's own free memory (an rpc-server's is the host's, lavapipe's its heap).
        free = free[:len(sizes)]
        margins = [f - size + 1024 for f, size in zip(free, sizes)]
        free = free[0] if len(set(free)) == 1 else free
        if a.split_mode == "none":
            margins = margins[:1]
        # --ctx 0: no -c, so llama.cpp's fit chooses the context (from the trained one down to
        # --fit-ctx, 4096).
        cmd = [a.fit_params, "-m", a.model] + (["--rpc", rpc] if rpc else []) \
            + (["-c", str(a.ctx)] if a.ctx else []) \
            + ["-fitt", ",".join(str(m) for m in margins)] + cache
        res = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
        m = re.search(r"-c (\d+) -ngl (-?\d+)(?: -ts ([\d,]+))?", res.stdout)
        row = {"device_mib": sizes[0] if len(sizes) == 1 else sizes, "free_mib": free,
               "fit_target_mib": margins[0] if len(margins) == 1 else margins,
               "ctx": int(m.group(1)) if m and not a.ctx else a.ctx, "fit_context": not a.ctx,
               "n_gpu_layers": int(m.group(2)) if m else None,
               "printed": res.stdout.strip(), "fits": m is not None}
        if m and m.group(3):
            row["tensor_split"] = [int(v) for v in m.group(3).split(",")]
        rows.append(row)
    doc = {
        "llama_cpp": "vendored by llama-cpp-python 0.3.36, -DGGML_RPC=ON, "
                     + ("llama-server's fit (breakdown.cpp's fit mode, logits for one token a "
                        "sequence)" if a.server else "llama-fit-params"),
        "server": a.server,
        "backend": "RPC (ggml-rpc-server on 127.0.0.1, CPU-backed), then Vulkan (Mesa's "
        "lavapipe)" if a.vulkan and a.rpc else "Vulkan (Mesa's lavapipe)" if a.vulkan else
        "RPC (ggml-rpc-server on 127.0.0.1, CPU-backed)"
        + (", the client given ggml-cuda's offload_op (batch >= 32)" if a.op_offload else ""),
        "op_offload": a.op_offload or a.vulkan,
        "vulkan_limits": vulkan_limits() if a.vulkan else None,
        # With --vulkan, the rpc-server devices llama.cpp orders before the local one.
        "rpc_devices": len(a.rpc.split(",")) if a.rpc and a.vulkan else None,
        "rpc_backend": "CPU" if a.rpc and a.vulkan else None,
        "gguf": a.model.rsplit("/", 1)[-1],
        "shape": a.shape,
        "made_by": a.made_by,
        "rpc": a.rpc.split(",") if a.rpc else [],
        "cache_type": a.cache_type,
        "split_mode": a.split_mode,
        "rows": rows,
        "gguf_header": describe(a.model),
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
