#!/usr/bin/env python3
"""DeepSpeed's per-rank memory over one ZeRO training step, allocating nothing.

Builds the model class from a config.json on fake CPU tensors (FakeTensorMode), hands it to
`deepspeed.initialize` with ZeRO stage 1, 2 or 3 in bf16 over a fake process group of
`--world` ranks (torch.testing's fake backend: collectives return at once, one process plays
one rank, by default the last), runs two training steps under torch.distributed._tools.mem_tracker.MemTracker and
prints one JSON record: that rank's peak per category, the phase it fell in, and the run's
settings and versions. gpumem's reference test reads these records
(tests/fixtures/pytorch/deepspeed-*.json); it never needs torch or DeepSpeed.

Recorded with torch 2.15.0, transformers 5.24.0 and deepspeed 0.19.8 from PyPI, CPython 3.11,
on DeepSpeed's CPU accelerator (DS_ACCELERATOR=cpu; it builds its shared-memory collective op
once, which needs ninja on PATH):

    PATH=venv/bin:$PATH venv/bin/python measure_deepspeed.py --config CONFIG.json \
        --stage 2 --world 4 --batch 1 --seq 1024 [--checkpointing] > record.json

DeepSpeed's defaults are kept (reduce and all-gather buckets of 5e8 elements, contiguous
gradients, overlap_comm off as the CPU accelerator sets it). The optimizer is DeepSpeed's
`AdamW` with `torch_adam: true`, i.e. torch.optim.AdamW stepping each flat partition (on a GPU
DeepSpeed would pick its fused Adam, which makes no temporaries: this reference is above such
a run by the step's temporaries, never below). What fake tensors cannot give is answered as a
real run does, and allocates nothing:

- `module.to(device)`: the model is already where the fake tensors live (the CPU);
- the overflow checks and the gradient norm's finiteness: no overflow (bf16 has no loss scale);
- stage 3's check that every rank traced the same module order (rank 0's list, broadcast
  over the fake group, comes back empty): they agree, as ranks running one model do;
- the packed-sequence probe, as in measure_train.py.

Stage 3 keeps DeepSpeed's defaults too: parameters of at most 1e5 elements persistent, a
prefetch bucket of 5e7 elements, reuse distance and live parameters of 1e9, optimizer
sub-groups of 1e9 elements.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import transformers  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.distributed._tools.mem_tracker import MemTracker  # noqa: E402
from torch.utils._python_dispatch import _disable_current_modes  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

# The packed-sequence answer and the record's bookkeeping are measure_train's.
from measure_train import peak_fields, totals  # noqa: E402


def answer_as_a_real_run():
    """The value-dependent checks fake tensors cannot answer, answered as a bf16 run would."""
    import deepspeed.runtime.zero.stage_1_and_2 as stage12
    import deepspeed.runtime.zero.stage3 as stage3

    torch.nn.Module.to = lambda self, *a, **k: self
    stage12.DeepSpeedZeroOptimizer.has_overflow = lambda self, *a, **k: False
    stage12.is_invalid_grad_norm = lambda norm: False
    # ZeRO-Offload checks each gradient as it leaves for the host; the check's scalars are
    # made, its answer is no overflow.
    stage12.DeepSpeedZeroOptimizer.update_offload_overflow_tracker = (
        lambda self, grad: grad is not None and stage12.has_inf_or_nan(grad.data) is None)

    # Its gradient norm sums each parameter's norm as Python floats; the finite norm a real
    # run gets is answered as the tensor it returns (on the host, `self.device`; the 4-byte
    # sum it all-reduces on the way is left out).
    def offload_norm(self, params):
        return torch.tensor(1.0, device=self.device, dtype=torch.float)

    stage12.DeepSpeedZeroOptimizer.complete_grad_norm_calculation_for_cpu_offload = offload_norm
    stage3.DeepSpeedZeroOptimizer_Stage3.complete_grad_norm_calculation_for_cpu_offload = (
        lambda self, params: torch.tensor(1.0, device="cpu", dtype=torch.float))
    stage3.DeepSpeedZeroOptimizer_Stage3.has_overflow = lambda self, *a, **k: False
    if hasattr(stage3, "is_invalid_grad_norm"):
        stage3.is_invalid_grad_norm = lambda norm: False
    import deepspeed.runtime.zero.partitioned_param_coordinator as coordinator

    # Each rank traces the same module order; rank 0's list comes back empty over the fake
    # group, so the comparison is answered as agreeing ranks answer it.
    coordinator.assert_ints_same_as_other_ranks = lambda ints: None


def play_the_gpu_on_meta():
    """Offload's runs: the accelerator's device is `meta`, so that what DeepSpeed keeps on the
    GPU and what it moves to the host ('cpu') are tracked apart; MemTracker reports each
    device. Fake tensors on `meta` run forward and backward as the CPU's do (CUDA's fake
    tensors cannot: autograd asks the driver for a context), once attention takes the CPU's
    fused kernel: on `meta`, SDPA would fall back to its unfused math, which saves the scores."""
    from deepspeed.accelerator import get_accelerator

    functional = torch.nn.functional
    unfused = functional.scaled_dot_product_attention

    def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False):
        if q.device.type != "meta":
            return unfused(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                           is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
        # The CPU's kernel takes grouped key/value heads as they are.
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)[0]

    functional.scaled_dot_product_attention = sdpa

    # ZeRO-1/2 keep each parameter's shape as a `meta` tensor, which on a GPU holds no memory
    # but here would count on the device playing it: made a real meta tensor, out of the
    # tracker's sight (DeepSpeed reads only its shape).
    zeros_like = torch.zeros_like

    def placeholder(t, *args, device=None, **kwargs):
        if device is not None and torch.device(device).type == "meta":
            with _disable_current_modes():
                return torch.empty(t.shape, dtype=t.dtype, device="meta")
        return zeros_like(t, *args, device=device, **kwargs)

    torch.zeros_like = placeholder

    # Autocast has no state for `meta`; ZeRO-3's linear asks it for the device's, and the
    # CPU's (off) answers as a GPU's does where autocast is off.
    import deepspeed.runtime.zero.linear as zero_linear

    class AutocastOnTheCpu:
        def device_name(self, device_index=None):
            return "cpu"

    zero_linear.get_accelerator = AutocastOnTheCpu

    acc = type(get_accelerator())
    acc.device_name = lambda self, device_index=None: "meta"
    acc.current_device_name = lambda self: "meta"
    acc.current_device = lambda self: 0


def step_peak_from_here(mt):
    """The step's peak is counted from here on, the tracker's so far returned: initialization
    flattens the weights beside the model's own copy where the GPU has room (else on the
    CPU), which is DeepSpeed's start-up, not the step's (it is the peak of ZeRO-Offload's
    larger runs, whose step no longer holds the optimizer)."""
    so_far = mt.get_tracker_snapshot("peak")
    mt._peak_mem_snap = mt.get_tracker_snapshot("current")
    mt._peak_mem = {dev: snap["Total"] for dev, snap in mt._peak_mem_snap.items()}
    return so_far


def host_fields(gpu, peak, after, phases):
    """Where the GPU is played on `meta`, the host's figures too: its peak per category, what it
    holds after the step, and each phase's running peak."""
    if gpu == "cpu":
        return {}
    host = [(st, ph, sn) for st, ph, sn in phases if any(
        torch.device(d).type == "cpu" for d in sn)]
    return {
        "host_peak": {k: int(v) for k, v in totals(peak).items()},
        "host_after_step": {k: int(v) for k, v in totals(after).items()},
        "host_phase_peaks": [
            {"step": st, "phase": ph, "total": int(totals(sn)["Total"])} for st, ph, sn in host
        ],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--stage", type=int, choices=(1, 2, 3), required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--checkpointing", action="store_true")
    ap.add_argument("--offload-optimizer", action="store_true",
                    help="ZeRO-Offload: the f32 master partition, its gradients and Adam's "
                         "moments in host memory (offload_optimizer.device cpu, pinned)")
    ap.add_argument("--gpu-on-meta", action="store_true",
                    help="play the GPU on `meta` without offloading (a check that both devices "
                         "give the CPU-only run's figures; implied by --offload-optimizer)")
    ap.add_argument("--grad-accum", type=int, default=1, metavar="N",
                    help="gradient_accumulation_steps: N micro-batches a step, engine.step() "
                         "after each (DeepSpeed steps the optimizer at the boundary only)")
    ap.add_argument("--rank", type=int, default=None,
                    help="the rank measured (default: the last, whose partition holds the "
                         "output end of the model, the first gradients backward makes)")
    a = ap.parse_args()
    rank = a.world - 1 if a.rank is None else a.rank

    with open(a.config) as f:
        raw = json.load(f)
    cfg = AutoConfig.for_model(**{k: v for k, v in raw.items() if k not in ("torch_dtype", "dtype")})
    cfg._attn_implementation = "sdpa"
    cfg.use_cache = False
    dist.init_process_group("fake", rank=rank, world_size=a.world, store=FakeStore())
    os.environ.update(RANK=str(rank), LOCAL_RANK="0", WORLD_SIZE=str(a.world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
    import deepspeed

    answer_as_a_real_run()
    gpu = "meta" if a.offload_optimizer or a.gpu_on_meta else "cpu"
    if gpu == "meta":
        play_the_gpu_on_meta()
    ds_config = {
        "train_micro_batch_size_per_gpu": a.batch,
        "gradient_accumulation_steps": a.grad_accum,
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": a.stage, **(
            {"offload_optimizer": {"device": "cpu", "pin_memory": True}}
            if a.offload_optimizer else {})},
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": True}},
    }
    torch.set_default_dtype(torch.bfloat16)
    started = time.time()
    phases = []
    with FakeTensorMode(), torch.device(gpu):
        try:
            model = AutoModelForCausalLM.from_config(cfg)
        except ValueError:
            # transformers' own default where the class has no SDPA path (Gemma 2): eager.
            cfg._attn_implementation = "eager"
            model = AutoModelForCausalLM.from_config(cfg)
        params = sum(p.numel() for p in model.parameters())
        if a.checkpointing:
            model.gradient_checkpointing_enable()
        model.train()
        mt = MemTracker()
        mt.track_external(model)
        with mt:
            engine, optimizer, _, _ = deepspeed.initialize(
                model=model, model_parameters=model.parameters(), config=ds_config)
            phases.append((-1, "initialize", mt.get_tracker_snapshot("peak")))
            initialize_peak = step_peak_from_here(mt)
            for step in range(2):
                for micro in range(a.grad_accum):
                    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), device=gpu)
                    loss = engine(input_ids=ids, labels=ids).loss
                    phases.append((step, "forward", mt.get_tracker_snapshot("peak")))
                    engine.backward(loss)
                    del loss
                    phases.append((step, "backward", mt.get_tracker_snapshot("peak")))
                    # Before the boundary DeepSpeed's step only counts the micro-batch.
                    engine.step()
                    last = micro + 1 == a.grad_accum
                    phases.append((step, "optimizer" if last else "backward",
                                   mt.get_tracker_snapshot("peak")))
                    mt.reset_mod_stats()
            after = mt.get_tracker_snapshot("current")
        peak = mt.get_tracker_snapshot("peak")
    snap = totals(peak, gpu)
    record = {
        "source": "torch.distributed._tools.mem_tracker.MemTracker under FakeTensorMode, "
                  "DeepSpeed on its CPU accelerator over a fake process group",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "deepspeed": deepspeed.__version__,
        "model": a.config.rsplit("/", 1)[-1].removesuffix(".json"),
        "recipe": "bf16",
        "optimizer": "adamw",
        "attn": cfg._attn_implementation,
        "stage": a.stage,
        "world": a.world,
        "rank": rank,
        "batch": a.batch,
        "seq": a.seq,
        "checkpointing": a.checkpointing,
        "grad_accum": a.grad_accum,
        "offload_optimizer": a.offload_optimizer,
        "gpu_device": gpu,
        "ds_config": ds_config,
        **host_fields(gpu, peak, after, phases),
        "parameters": params,
        "initialize_peak": {k: int(v) for k, v in totals(initialize_peak, gpu).items()},
        "after_step": {k: int(v) for k, v in totals(after, gpu).items()},
        **peak_fields(snap, phases, started, gpu),
    }
    return record


if __name__ == "__main__":
    # DeepSpeed reports on stdout (its op builds, its engine); the record alone goes there.
    out = sys.stdout
    sys.stdout = sys.stderr
    record = main()
    json.dump(record, out, indent=1)
    print(file=out)
