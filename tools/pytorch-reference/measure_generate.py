#!/usr/bin/env python3
"""PyTorch's own memory figures for transformers generation, allocating nothing.

Builds the model class from a config.json on fake CPU tensors, then runs what
`model.generate` runs for greedy decoding under MemTracker: a prefill of the prompt into a
DynamicCache with logits for the last position only (`logits_to_keep=1`, as generate asks
for), then one forward pass a new token. generate's own loop cannot run on fake tensors (its
stopping criteria read the tokens), so the passes are driven here; the tensors they allocate
are the same. Prints one JSON record: the peak per category (the KV cache counts as
activations), whether it fell in the prefill or the decode, the settings and versions.

    venv/bin/python measure_generate.py --config CONFIG.json --batch 1 --prompt 2048 \
        --new-tokens 256 > record.json

Recorded with torch 2.15.0 and transformers 5.24.0 (see measure_train.py).
"""

import argparse
import json
import sys
import time

import torch
import transformers
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache

# As in measure_train.py: one unpadded sequence needs no mask on real tensors.
transformers.masking_utils.find_packed_sequence_indices = lambda position_ids: None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, required=True)
    ap.add_argument("--new-tokens", type=int, required=True)
    a = ap.parse_args()
    with open(a.config) as f:
        raw = json.load(f)
    cfg = AutoConfig.for_model(**{k: v for k, v in raw.items() if k not in ("torch_dtype", "dtype")})
    cfg._attn_implementation = "sdpa"
    torch.set_default_dtype(torch.bfloat16)
    started = time.time()
    with FakeTensorMode():
        model = AutoModelForCausalLM.from_config(cfg)
        model.eval()
        params = sum(p.numel() for p in model.parameters())
        mt = MemTracker()
        mt.track_external(model)
        with mt, torch.no_grad():
            ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt))
            out = model(input_ids=ids, past_key_values=DynamicCache(config=cfg), use_cache=True,
                        logits_to_keep=1)
            prefill = next(iter(mt.get_tracker_snapshot("peak").values()))["Total"]
            # Each new token: the next id from the last logits, one forward pass.
            for _ in range(a.new_tokens - 1):
                mt.reset_mod_stats()
                nxt = torch.randint(0, cfg.vocab_size, (a.batch, 1))
                out = model(input_ids=nxt, past_key_values=out.past_key_values, use_cache=True,
                            logits_to_keep=1)
        peak = next(iter(mt.get_tracker_snapshot("peak").values()))
    record = {
        "source": "torch.distributed._tools.mem_tracker.MemTracker under FakeTensorMode",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "model": a.config.rsplit("/", 1)[-1].removesuffix(".json"),
        "batch": a.batch,
        "prompt": a.prompt,
        "new_tokens": a.new_tokens,
        "parameters": params,
        "peak": {str(k).split(".")[-1].split(":")[0].strip("<>' ").lower() if not isinstance(k, str) else k: int(v)
                 for k, v in peak.items()},
        "peak_phase": "prefill" if peak["Total"] == prefill else "decode",
        "seconds": round(time.time() - started, 1),
    }
    json.dump(record, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
