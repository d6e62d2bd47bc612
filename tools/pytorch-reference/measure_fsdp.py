#!/usr/bin/env python3
"""PyTorch's own per-rank memory figures for one FSDP2 training step, allocating nothing.

Builds the model class from a config.json on fake CPU tensors (FakeTensorMode), shards it with
FSDP2 (`fully_shard` on every decoder layer, then on the root) over a fake process group of
`--world` ranks (torch.testing's fake backend: collectives return at once, one process plays
rank 0), runs two training steps under
torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker and prints one JSON record: rank
0's peak per category (sharded and unsharded parameters and gradients, all-gather and
reduce-scatter buffers, activations, temporaries, optimizer state), the phase it fell in, and
the run's settings and versions. gpumem's reference test reads these records
(tests/fixtures/pytorch/fsdp-*.json); it never needs torch.

Recorded with torch 2.15.0 and transformers 5.24.0 from PyPI, CPython 3.11:

    venv/bin/python measure_fsdp.py --config CONFIG.json --world 4 --batch 1 --seq 1024 \
        [--no-reshard-after-forward] [--checkpointing] > record.json

Three choices make this the step a real run takes:

- The device mesh is made before FakeTensorMode is entered (a mesh cannot be built on fake
  tensors), and everything else inside it.
- The optimizer runs with foreach=False: on CPU fake tensors DTensor's foreach path
  materialises full (unsharded) tensors for its temporaries, which no GPU run does; the
  per-tensor loop keeps every temporary a shard.
- As in measure_train.py, only the loss is kept and the packed-sequence probe answers as a
  real run does.
"""

import argparse
import json
import sys
import time

import torch
import torch.distributed as dist
import transformers
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.testing._internal.distributed.fake_pg import FakeStore
from transformers import AutoConfig, AutoModelForCausalLM

# The packed-sequence answer and the record's phase bookkeeping are measure_train's.
from measure_train import (micro_batches, phase_record, quantize_layers,
                           share_quantization_maps, totals)


def quantize_for_fsdp(model):
    """measure_train.py's NF4 layers, every parameter frozen (PEFT then adds the adapters).
    FSDP2's gathered parameter is a plain one, so bitsandbytes gives it the module's
    quantization state back by wrapping it in Params4bit, which cannot wrap a fake tensor; the
    state is attached as that wrap would attach it (it allocates nothing)."""
    import bitsandbytes.nn.modules as bnbm

    def restore(module):
        if getattr(module.weight, "quant_state", None) is None:
            module.weight.quant_state = module.quant_state

    bnbm.fix_4bit_weight_quant_state_from_module = restore
    quantize_layers(model)
    for p in model.parameters():
        p.requires_grad = False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--no-reshard-after-forward", action="store_true")
    ap.add_argument("--checkpointing", action="store_true")
    ap.add_argument("--lora-rank", type=int, default=0,
                    help="PEFT LoRA of this rank on every projection (all-linear), its adapters "
                         "in bf16 like the model (FSDP2 reduces one dtype a group), in f32 with "
                         "--qlora")
    ap.add_argument("--mixed", action="store_true",
                    help="mixed precision: f32 parameters (the sharded master copy), gathered "
                         "in bf16 for compute, gradients reduced in f32 "
                         "(MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=f32))")
    ap.add_argument("--autocast", action="store_true",
                    help="HF Trainer's bf16=True on an f32 model: f32 parameters gathered and "
                         "reduced in f32 (no MixedPrecisionPolicy), the forward under bf16 "
                         "autocast")
    ap.add_argument("--qlora", action="store_true",
                    help="with --lora-rank: QLoRA as measure_train.py builds it (the decoder "
                         "layers' projections in NF4, every other parameter and the adapters "
                         "in f32), then sharded")
    ap.add_argument("--grad-accum", type=int, default=1, metavar="N",
                    help="N micro-batches a step (as measure_train.py's), FSDP2 reducing each "
                         "one's gradients into the sharded ones")
    a = ap.parse_args()

    with open(a.config) as f:
        raw = json.load(f)
    cfg = AutoConfig.for_model(**{k: v for k, v in raw.items() if k not in ("torch_dtype", "dtype")})
    cfg._attn_implementation = "sdpa"
    cfg.use_cache = False
    torch.set_default_dtype(torch.float32 if a.mixed or a.autocast or a.qlora else torch.bfloat16)
    if a.qlora:
        share_quantization_maps()
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if a.mixed else MixedPrecisionPolicy()
    dist.init_process_group("fake", rank=0, world_size=a.world, store=FakeStore())
    mesh = init_device_mesh("cpu", (a.world,))
    reshard = not a.no_reshard_after_forward
    started = time.time()
    phases = []
    with FakeTensorMode(allow_non_fake_inputs=a.qlora):
        try:
            model = AutoModelForCausalLM.from_config(cfg)
        except ValueError:
            # Families transformers runs only eagerly (Gemma 2, gpt-oss), as measure_train.py.
            cfg._attn_implementation = "eager"
            model = AutoModelForCausalLM.from_config(cfg)
        params = sum(p.numel() for p in model.parameters())
        decoder = model.model
        if a.qlora:
            quantize_for_fsdp(model)
        if a.lora_rank:
            from peft import LoraConfig, get_peft_model
            from peft.tuners.tuners_utils import BaseTunerLayer

            # As measure_train.py: the adapters are made where they stay (Module.to refuses
            # fake tensors); here in the model's bf16.
            BaseTunerLayer._move_adapter_to_device_of_base_layer = lambda self, *a, **k: None
            module_to = torch.nn.Module.to
            torch.nn.Module.to = lambda self, *a, **k: self
            model = get_peft_model(model, LoraConfig(
                r=a.lora_rank, lora_alpha=2 * a.lora_rank, lora_dropout=0.0,
                target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                "down_proj"]), autocast_adapter_dtype=False)
            torch.nn.Module.to = module_to
        leaves = []
        if a.checkpointing:
            model.gradient_checkpointing_enable()
            if a.lora_rank:
                # As measure_train.py: the frozen embedding's output is made a leaf that
                # requires a gradient, which the tracker's hooks (not a real run) keep alive
                # with its gradient; each step's is emptied after its backward.
                model.get_input_embeddings().register_forward_hook(
                    lambda mod, inp, out: leaves.append(out) if out.is_leaf else None)
        for layer in decoder.layers:
            fully_shard(layer, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp)
        fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp)
        model.train()
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4,
                                foreach=False)
        mt = FSDPMemTracker(model, opt)
        with mt:
            for step in range(2):
                micro_batches(model, cfg.vocab_size, a, a.autocast, mt, step, phases, leaves)
                opt.step()
                opt.zero_grad()
                phases.append((step, "optimizer", mt.get_tracker_snapshot("peak")))
                if step == 0:
                    mt.reset_mod_stats()
        peak = totals(mt.get_tracker_snapshot("peak"))
    first, peaks = phase_record(phases, peak["Total"])
    record = {
        "source": "torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker under FakeTensorMode, fake process group",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "model": a.config.rsplit("/", 1)[-1].removesuffix(".json"),
        "recipe": "qlora" if a.qlora else "lora" if a.lora_rank else "mixed-fp32-master" if a.mixed
        else "fp32-autocast" if a.autocast else "bf16",
        "lora": {"rank": a.lora_rank, "targets": "all-linear"} if a.lora_rank else None,
        "optimizer": "adamw",
        "foreach": False,
        "world": a.world,
        "reshard_after_forward": reshard,
        "batch": a.batch,
        "seq": a.seq,
        "attn": cfg._attn_implementation,
        "checkpointing": a.checkpointing,
        "grad_accum": a.grad_accum,
        "parameters": params,
        "peak": {str(k): int(v) for k, v in peak.items()},
        "peak_phase": first,
        "phase_peaks": peaks,
        "seconds": round(time.time() - started, 1),
    }
    json.dump(record, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
