#!/usr/bin/env python3
"""PyTorch's own memory figures for transformers' assisted generation and for generation with a
PEFT LoRA adapter, allocating nothing (a sibling of measure_generate.py; same fake CPU tensors
and MemTracker).

Assisted generation (`generate(assistant_model=...)`, greedy, batch 1, transformers'
`_assisted_decoding` and `AssistedCandidateGenerator`): each round the assistant runs its own
`generate` (its own DynamicCache, `output_scores=True`: one f32 row of logits a candidate, then
stacked), proposing `--num-assistant-tokens` candidates; the target verifies them in one forward
pass over the uncached tokens (the first round: the prompt and the candidates) with
`logits_to_keep = candidates + 1`, whose logits are cast to f32 and cloned. The tokens that
decide how many candidates are accepted are data, which fake tensors cannot read: every
candidate is taken as accepted (the draft agrees with the target), so a round yields
candidates + 1 tokens and neither cache is cropped. The passes are driven here as
`_assisted_decoding` runs them.

LoRA: `peft.get_peft_model` on the bf16 model with PEFT's defaults (adapters in f32,
`autocast_adapter_dtype`), no dropout, then greedy generate's passes as measure_generate.py
drives them.

    venv/bin/python measure_generate_assisted.py --config TARGET.json --assistant DRAFT.json \
        --num-assistant-tokens 20 --prompt 1024 --new-tokens 21 > record.json
    venv/bin/python measure_generate_assisted.py --config CONFIG.json --lora-rank 8 \
        --lora-targets q-v --prompt 1024 --new-tokens 4 > record.json
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

transformers.masking_utils.find_packed_sequence_indices = lambda position_ids: None


class _NoHook:
    def remove(self):
        pass


def _frozen_safe(register):
    # As in measure_train.py: MemTracker hooks every parameter's gradient, which PyTorch refuses
    # on PEFT's frozen base; such a parameter never has a gradient, so it needs no hook.
    def wrapped(self, hook):
        return register(self, hook) if self.requires_grad else _NoHook()

    return wrapped


torch.Tensor.register_hook = _frozen_safe(torch.Tensor.register_hook)
torch.Tensor.register_post_accumulate_grad_hook = _frozen_safe(
    torch.Tensor.register_post_accumulate_grad_hook
)

LORA_TARGETS = {
    "all-linear": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "q-v": ["q_proj", "v_proj"],
}


def config_of(path):
    with open(path) as f:
        raw = json.load(f)
    cfg = AutoConfig.for_model(**{k: v for k, v in raw.items() if k not in ("torch_dtype", "dtype")})
    cfg._attn_implementation = "sdpa"
    return cfg


def with_lora(model, rank, targets):
    """PEFT's adapters as measure_train.py makes them on fake tensors (f32, left on the CPU)."""
    from peft import LoraConfig, get_peft_model
    from peft.tuners.tuners_utils import BaseTunerLayer

    torch.set_default_dtype(torch.float32)
    BaseTunerLayer._move_adapter_to_device_of_base_layer = lambda self, *a, **k: None
    module_to = torch.nn.Module.to
    torch.nn.Module.to = lambda self, *a, **k: self
    model = get_peft_model(
        model,
        LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0,
                   target_modules=LORA_TARGETS[targets]),
        autocast_adapter_dtype=False,
    )
    torch.nn.Module.to = module_to
    torch.set_default_dtype(torch.bfloat16)
    return model


def total(mt):
    return next(iter(mt.get_tracker_snapshot("peak").values()))["Total"]


def plain(model, cfg, a, mt):
    """measure_generate.py's greedy passes."""
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt))
    out = model(input_ids=ids, past_key_values=DynamicCache(config=cfg), use_cache=True,
                logits_to_keep=1)
    prefill = total(mt)
    for _ in range(a.new_tokens - 1):
        mt.reset_mod_stats()
        nxt = torch.randint(0, cfg.vocab_size, (a.batch, 1))
        out = model(input_ids=nxt, past_key_values=out.past_key_values, use_cache=True,
                    logits_to_keep=1)
    return prefill


def draft(assistant, acfg, ids, cache, uncached, k, mt):
    """The assistant's own greedy generate of `k` tokens (output_scores: f32 rows, stacked)."""
    scores = ()
    step = ids[:, -uncached:]
    for _ in range(k):
        mt.reset_mod_stats()  # the tracker's module stats are per call; its peak stays
        out = assistant(input_ids=step, past_key_values=cache, use_cache=True, logits_to_keep=1)
        logits = out.logits[:, -1].to(copy=True, dtype=torch.float32)
        scores += (logits,)
        step = torch.randint(0, acfg.vocab_size, (ids.shape[0], 1))
        ids = torch.cat((ids, step), dim=-1)
        del out, logits
    return ids, torch.stack(scores, dim=1)


def assisted(model, cfg, assistant, acfg, a, mt):
    """`_assisted_decoding`'s rounds, every candidate accepted. Returns the peak of round 1."""
    ids = torch.randint(0, cfg.vocab_size, (1, a.prompt))
    max_length = a.prompt + a.new_tokens
    cache, acache = DynamicCache(config=cfg), DynamicCache(config=acfg)
    first, round_one = True, None
    while ids.shape[1] < max_length:
        k = min(a.num_assistant_tokens, max_length - ids.shape[1] - 1)
        if k > 0:
            # The assistant's cache covers all but the last two tokens from round 2 on.
            uncached = ids.shape[1] if first else 2
            candidates, candidate_logits = draft(assistant, acfg, ids, acache, uncached, k, mt)
        else:
            candidates, candidate_logits = ids, None
        k = candidates.shape[1] - ids.shape[1]
        step = candidates if first else candidates[:, -(k + 1):]
        mt.reset_mod_stats()
        out = model(input_ids=step, past_key_values=cache, use_cache=True, logits_to_keep=k + 1)
        new_logits = out.logits[:, -k - 1:].to(dtype=torch.float32)
        next_token_logits = new_logits.clone()
        selected = new_logits.argmax(dim=-1)
        # Every candidate accepted: the target's choices are the candidates and its own next
        # token, a view of them as `valid_tokens` is.
        valid = selected[:, : max_length - ids.shape[1]]
        ids = torch.cat((ids, valid), dim=-1)
        del out, new_logits, next_token_logits, selected, valid, candidates, candidate_logits
        if first:
            round_one = total(mt)
        first = False
    return round_one


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--assistant")
    ap.add_argument("--num-assistant-tokens", type=int, default=20)
    ap.add_argument("--lora-rank", type=int)
    ap.add_argument("--lora-targets", choices=sorted(LORA_TARGETS), default="q-v")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, required=True)
    ap.add_argument("--new-tokens", type=int, required=True)
    a = ap.parse_args()
    cfg = config_of(a.config)
    torch.set_default_dtype(torch.bfloat16)
    started = time.time()
    with FakeTensorMode():
        model = AutoModelForCausalLM.from_config(cfg)
        params = sum(p.numel() for p in model.parameters())
        if a.lora_rank:
            model = with_lora(model, a.lora_rank, a.lora_targets)
        model.eval()
        modules = [model]
        if a.assistant:
            acfg = config_of(a.assistant)
            assistant = AutoModelForCausalLM.from_config(acfg)
            assistant.eval()
            modules.append(assistant)
        mt = MemTracker()
        mt.track_external(*modules)
        with mt, torch.no_grad():
            if a.assistant:
                first = assisted(model, cfg, assistant, acfg, a, mt)
            else:
                first = plain(model, cfg, a, mt)
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
        "peak_phase": ("first_round" if a.assistant else "prefill") if peak["Total"] <= first
        else ("later_round" if a.assistant else "decode"),
        "seconds": round(time.time() - started, 1),
    }
    if a.assistant:
        record["assistant"] = {
            "model": a.assistant.rsplit("/", 1)[-1].removesuffix(".json"),
            "parameters": sum(p.numel() for p in assistant.parameters()),
            "num_assistant_tokens": a.num_assistant_tokens,
            "accepted": "all",
        }
    if a.lora_rank:
        import peft

        record["peft"] = peft.__version__
        record["lora"] = {"rank": a.lora_rank, "targets": a.lora_targets, "dtype": "f32",
                          "adapter_parameters": sum(p.numel() for n, p in model.named_parameters()
                                                    if "lora_" in n)}
    json.dump(record, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
