#!/usr/bin/env python3
"""Records the compute buffer llama.cpp's clip grows to when it encodes the largest image a
dynamic-resolution projector accepts (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Gemma 4), beside its warm-up
reserve, flash attention on and off, through clip_max_buffers (built from
clip_max_buffers.cpp). The largest image is the square one clip's resize
(calc_size_preserved_ratio) gives for any square image past the pixel limit: floor(sqrt(max
pixels) / align) * align pixels a side, align = patch × merge, max pixels = max tokens × align²
(the projector's own: Qwen's 4096, Gemma 4's 1120; or `--image-max-tokens N`). Both buffers are in bytes, read from ggml's
scheduler after clip's own calls; the MiB clip prints at warm-up is kept as a check.

usage: measure_mmproj_max.py CLIP_MAX_BUFFERS MMPROJ.gguf OUT.json --shape-of ID
       --made-by "COMMAND" [--max-tokens 0,1024]   (0: the projector's own limit)
"""
import argparse
import json
import math
import re
import subprocess


def run(tool: str, model: str, fa: str, max_tokens: int, align: int) -> dict:
    probe = subprocess.run([tool, model, fa, "0", str(max_tokens)], capture_output=True, text=True)
    max_pixels = int(re.search(r"image_max_pixels:\s+(\d+)", probe.stdout + probe.stderr).group(1))
    side = math.floor(math.sqrt(max_pixels) / align) * align
    out = subprocess.run([tool, model, fa, str(side), str(max_tokens)], capture_output=True, text=True)
    text = out.stdout + out.stderr
    if out.returncode != 0:
        raise SystemExit(f"{model} {fa} {max_tokens}: exit {out.returncode}\n{text[-2000:]}")
    printed = re.search(r"CPU compute buffer size =\s+([0-9.]+) MiB", text)
    warm = re.search(r"get_dummy_batch: warmup with image size = (\d+) x", text)
    return {
        "flash_attention": fa == "on",
        "image_max_tokens": max_tokens if max_tokens > 0 else None,
        "image_max_pixels": max_pixels,
        "warmup_side_px": int(warm.group(1)),
        "warmup_cpu_compute_mib": float(printed.group(1)),
        "warmup_compute_bytes": int(re.search(r"warmup buffer: CPU (\d+)", text).group(1)),
        "largest_side_px": side,
        "largest_compute_bytes": int(re.search(r"encode buffer: CPU (\d+)", text).group(1)),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("tool")
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("--shape-of", required=True)
    p.add_argument("--made-by", required=True)
    p.add_argument("--patch", type=int, required=True)
    p.add_argument("--merge", type=int, default=2)
    p.add_argument("--max-tokens", default="0,1024")
    a = p.parse_args()
    align = a.patch * a.merge
    limits = [int(n) for n in a.max_tokens.split(",")]
    doc = {
        "source": "llama.cpp b11312 (llama-cpp-python 0.3.36's vendored copy), tools/mtmd clip.cpp, CPU backend: "
        "warm-up reserve, then clip_image_batch_encode of the largest image, buffers from "
        "ggml_backend_sched_get_buffer_size",
        "shape_of": a.shape_of,
        "made_by": [
            a.made_by,
            f"measure_mmproj_max.py {a.tool} {a.model} {a.out} --patch {a.patch} --merge {a.merge} "
            f"--max-tokens {a.max_tokens}",
        ],
        "rows": [run(a.tool, a.model, fa, n, align) for n in limits for fa in ("on", "off")],
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
