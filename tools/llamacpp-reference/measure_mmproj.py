#!/usr/bin/env python3
"""Records what llama.cpp's clip (tools/mtmd) allocates for a projector GGUF on the CPU, with
flash attention on and off: the compute buffer its warm-up reserve prints (MiB, two decimals)
and mtmd_get_memory_usage's bytes (weights and compute buffer together, what llama-server adds
to its fit's margin), through clip_buffers (built from clip_buffers.cpp). The header is
recorded too (as measure.py --describe, less the image mean and deviation arrays gpumem does
not read), so the test rebuilds the file without it.

usage: measure_mmproj.py CLIP_BUFFERS MMPROJ.gguf OUT.json --shape-of ID --made-by "COMMAND"
"""
import argparse
import json
import re
import subprocess

from measure import describe


def run(tool: str, model: str, fa: str) -> dict:
    out = subprocess.run([tool, model, fa], capture_output=True, text=True, check=True)
    text = out.stdout + out.stderr
    compute = re.search(r"CPU compute buffer size =\s+([0-9.]+) MiB", text)
    usage = re.search(r"memory usage: CPU (\d+)", text)
    flash = re.search(r"flash attention is (enabled|disabled)", text)
    return {
        "flash_attention": fa == "on",
        "clip_says_flash_attention": flash.group(1) == "enabled",
        "cpu_compute_mib": float(compute.group(1)),
        "memory_usage_bytes": int(usage.group(1)),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("tool")
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("--shape-of", required=True)
    p.add_argument("--made-by", required=True)
    a = p.parse_args()
    header = describe(a.model)
    header["metadata"] = {k: v for k, v in header["metadata"].items() if not isinstance(v, list)}
    doc = {
        "source": "llama.cpp b11312 (llama-cpp-python 0.3.36's vendored copy), tools/mtmd, CPU backend",
        "shape_of": a.shape_of,
        "made_by": [a.made_by, f"measure_mmproj.py {a.tool} {a.model} {a.out}"],
        "rows": [run(a.tool, a.model, fa) for fa in ("on", "off")],
        "gguf": header,
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
