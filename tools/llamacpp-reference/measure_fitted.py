#!/usr/bin/env python3
"""Records llama.cpp's per-device bytes (model, context, compute, as `breakdown` prints them)
for the placements its own fit chose: each row of a `measure_fit.py` fixture is run again
through `breakdown` with the fitted `-ngl`, `-ts` and `-ot`, on the same RPC devices, into a
fixture for tests/it/llamacpp_devices.rs. The fit's partial layers (experts, all feed-forward
weights, or gate and down, or down alone on the CPU or the next device) are then held to the
byte like every other placement.

    measure_fitted.py BREAKDOWN MODEL.gguf FIT.json OUT.json
"""
import argparse
import json
import shlex
import subprocess

from measure_devices import measure


def main():
    p = argparse.ArgumentParser()
    p.add_argument("breakdown")
    p.add_argument("model")
    p.add_argument("fit")
    p.add_argument("out")
    a = p.parse_args()
    fit = json.load(open(a.fit))
    rows = []
    for row in fit["rows"]:
        args = shlex.split(row["printed"])
        flags = dict(zip(args[0::2], args[1::2]))
        n_devices = len(row["device_mib"]) if isinstance(row["device_mib"], list) else 1
        rpc = ",".join(fit["rpc"][:n_devices])
        ngl = int(flags["-ngl"])
        if ngl < 0:
            continue
        r = measure(a.breakdown, a.model, rpc, ngl, int(flags["-c"]), "on", 512,
                    flags.get("-ts"), ot=flags.get("-ot"))
        r["fitted_for_mib"] = row["device_mib"]
        rows.append(r)
    doc = {
        "llama_cpp": "vendored by llama-cpp-python 0.3.36, built with -DGGML_RPC=ON",
        "backend": "RPC (ggml-rpc-server on 127.0.0.1, CPU-backed)",
        "shape": fit["shape"],
        "made_by": fit.get("made_by"),
        "fitted_by": a.fit.rsplit("/", 1)[-1],
        "rpc": fit["rpc"],
        "rows": rows,
        "gguf": fit["gguf_header"],
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
