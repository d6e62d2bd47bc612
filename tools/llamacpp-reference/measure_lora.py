#!/usr/bin/env python3
"""Records llama.cpp's LoRA adapter buffers (and the compute buffers with and without the
adapter) for a model and adapters, as lora_buffers.cpp prints them from llama.cpp's own log:
each buffer in MiB to two decimals, llama.cpp's rounding.

usage: measure_lora.py LORA_BUFFERS MODEL.gguf OUT.json --rpc HOST:PORT --ctx C
                       --adapter NAME=FILE.gguf ... --ngl N ... [--fa on|off]

The device is a ggml-rpc-server on loopback lending the CPU (its buffers named RPC0[...]);
`-ngl` of the model's layers (the output layer counted as one) go there. Rows are written
with the device named `gpu0` and the CPU's buffers `host`.
"""
import argparse
import json
import subprocess

from measure import describe


def run(binary, model, rpc, ctx, ngl, fa, adapter):
    cmd = [binary, "-m", model, "-c", str(ctx), "-ngl", str(ngl), "-np", "1", "-fa", fa,
           "--rpc", rpc]
    if adapter:
        cmd += ["--lora", adapter]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    got = {"lora": {}, "compute": {}}
    for line in out.splitlines():
        kind, buffer, mib = line.split(" ")
        if kind in got:
            name = "gpu0" if buffer.startswith("RPC") else "host"
            got[kind][name] = round(got[kind].get(name, 0.0) + float(mib), 2)
    return got


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("binary")
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("--rpc", required=True)
    p.add_argument("--ctx", type=int, required=True)
    p.add_argument("--adapter", action="append", required=True)
    p.add_argument("--ngl", type=int, action="append", required=True)
    p.add_argument("--fa", default="on")
    a = p.parse_args()
    adapters = dict(x.split("=", 1) for x in a.adapter)
    rows = []
    for ngl in a.ngl:
        without = run(a.binary, a.model, a.rpc, a.ctx, ngl, a.fa, None)
        for name, path in adapters.items():
            got = run(a.binary, a.model, a.rpc, a.ctx, ngl, a.fa, path)
            rows.append({"adapter": name, "ngl": ngl, "ctx": a.ctx, "flash_attention": a.fa,
                         "lora_mib": got["lora"], "compute_mib": got["compute"],
                         "compute_mib_without": without["compute"]})
    doc = {
        "llama_cpp": "b11312 (llama-cpp-python 0.3.36's vendored llama.cpp), lora_buffers.cpp "
                     "over common_init_from_params as llama-server loads --lora; one "
                     "ggml-rpc-server device on loopback lending the CPU",
        "printed": "MiB to two decimals, as llama.cpp logs 'LoRA buffer size' and "
                   "'compute buffer size' (the last reserve's: with the adapter applied)",
        "model_gguf": describe(a.model),
        "adapters": {n: describe(f) for n, f in adapters.items()},
        "rows": rows,
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
