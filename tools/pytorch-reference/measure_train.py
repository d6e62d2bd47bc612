#!/usr/bin/env python3
"""PyTorch's own memory figures for one transformers training step, allocating nothing.

Builds the model class from a config.json on fake CPU tensors (FakeTensorMode), runs two
training steps under torch.distributed._tools.mem_tracker.MemTracker and prints one JSON
record: the peak per category (PARAM, BUFFER, GRAD, ACT, TEMP, OPT, Total), the phase in
which the peak fell, and the run's settings and versions. gpumem's reference test reads
these records (tests/fixtures/pytorch/); it never needs torch.

Recorded with torch 2.15.0 and transformers 5.24.0 from PyPI, CPython 3.11:

    python3 -m venv venv && venv/bin/pip install torch==2.15.0 transformers==5.24.0
    venv/bin/python measure_train.py --config CONFIG.json --recipe bf16 \
        --optimizer adamw --batch 1 --seq 512 [--checkpointing] > record.json

Recipes (what exists per tensor class):
  bf16           weights, gradients and optimizer state in bf16 (pure bf16 training);
  fp32-autocast  f32 weights, gradients and state; the forward under bf16 autocast
                 (HF Trainer's bf16=True on a model loaded in f32).
  lora           PEFT's f32 adapters on the frozen bf16 model.
  qlora          PEFT's f32 adapters on the layers frozen in NF4 (bitsandbytes), every other
                 weight in f32 (prepare_model_for_kbit_training).
The optimizer runs with foreach=True, the default on CUDA (on CPU tensors PyTorch would
otherwise pick its per-tensor loop); zero_grad sets gradients to None, as by default.
"""

import argparse
import json
import sys
import time

import torch
import transformers
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker
from transformers import AutoConfig, AutoModelForCausalLM

# On real tensors transformers finds that one unpadded sequence needs no mask (SDPA runs with
# is_causal and GQA). On fake tensors it cannot read the position ids, takes them for packed
# sequences and builds a mask (and repeats K/V), which a real run never does: answer as the real
# run would.
transformers.masking_utils.find_packed_sequence_indices = lambda position_ids: None

class _NoHook:
    def remove(self):
        pass


def _frozen_safe(register):
    # MemTracker hooks every parameter's gradient, and PyTorch refuses a gradient hook on a
    # parameter that takes none (LoRA's frozen base): such a parameter never has a gradient,
    # so it needs no hook.
    def wrapped(self, hook):
        return register(self, hook) if self.requires_grad else _NoHook()

    return wrapped


torch.Tensor.register_hook = _frozen_safe(torch.Tensor.register_hook)
torch.Tensor.register_post_accumulate_grad_hook = _frozen_safe(
    torch.Tensor.register_post_accumulate_grad_hook
)

RECIPES = {"bf16": torch.bfloat16, "fp32-autocast": torch.float32, "lora": torch.bfloat16,
           "qlora": torch.float32}
LORA_TARGETS = {
    "all-linear": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "attention": ["q_proj", "k_proj", "v_proj", "o_proj"],
}


def quantize_layers(model):
    """QLoRA's base model as transformers' bitsandbytes loader and PEFT's
    `prepare_model_for_kbit_training` leave it: every linear layer of the decoder layers
    (not the output head) in NF4 with double quantization (`bnb_4bit_quant_type="nf4"`,
    `bnb_4bit_use_double_quant=True`, `bnb_4bit_compute_dtype=torch.bfloat16`, uint8 storage),
    every other parameter cast to f32 (the model is built in f32 here, which is the same).

    bitsandbytes' `Params4bit` cannot wrap a fake tensor, so each layer is a
    `bitsandbytes.nn.Linear4bit` whose weight is a plain frozen parameter holding the packed
    bytes, with bitsandbytes' own `QuantState` attached (made by `bitsandbytes.functional.
    quantize_4bit` on the bf16 weight); the forward is Linear4bit's own. The quantization
    statistics (absmax and the nested state) are registered as buffers so MemTracker counts
    them (on a GPU they are tensors like any other; MemTracker would not see them otherwise).
    """
    import bitsandbytes as bnb
    import bitsandbytes.functional as bnbf

    layers = model.get_decoder().layers
    for layer in layers:
        for name, lin in list(layer.named_modules()):
            if type(lin) is not torch.nn.Linear:
                continue
            packed, qs = bnbf.quantize_4bit(lin.weight.detach().to(torch.bfloat16), blocksize=64,
                                            compress_statistics=True, quant_type="nf4",
                                            quant_storage=torch.uint8)
            q = bnb.nn.Linear4bit.__new__(bnb.nn.Linear4bit)
            torch.nn.Module.__init__(q)
            q.in_features, q.out_features = lin.in_features, lin.out_features
            q.weight = torch.nn.Parameter(packed, requires_grad=False)
            q.weight.quant_state = qs
            q.weight.compress_statistics, q.weight.quant_type = True, "nf4"
            q.quant_state, q.quant_storage = qs, torch.uint8
            q.compute_dtype, q.compute_type_is_set = torch.bfloat16, True
            q.support_avx512bf16_for_cpu = False
            # A bias stays a plain (f32) parameter; Linear4bit casts it to bf16 in its forward.
            q.bias = lin.bias
            q.register_buffer("absmax", qs.absmax)
            q.register_buffer("absmax2", qs.state2.absmax)
            q.register_buffer("code", qs.code)
            q.register_buffer("code2", qs.state2.code)
            q.register_buffer("offset", qs.offset)
            parent = layer.get_submodule(name.rsplit(".", 1)[0]) if "." in name else layer
            setattr(parent, name.rsplit(".", 1)[-1], q)
    model.is_loaded_in_4bit = True


def share_quantization_maps():
    """bitsandbytes builds its quantization maps by reading tensor values, which fake tensors
    cannot give: made once outside the fake mode (two real 256-entry f32 tensors, as on a GPU),
    then shared."""
    import bitsandbytes.functional as bnbf

    made = {}
    build = bnbf.create_dynamic_map

    def cached(*args, **kwargs):
        key = (args, tuple(sorted(kwargs.items())))
        if key not in made:
            made[key] = build(*args, **kwargs)
        return made[key]

    bnbf.create_dynamic_map = cached
    cached(signed=True)
    cached(signed=False)
    cached()


def micro_batches(runner, vocab, a, autocast, mt, step, phases, leaves):
    """One step's `a.grad_accum` forwards and backwards (each loss divided by their count, as
    HF Trainer does); returns the tracker's state after the first forward."""
    import contextlib

    after_forward = None
    for micro in range(a.grad_accum):
        ids = torch.randint(0, vocab, (a.batch, a.seq))
        # Under DDP every micro-batch but the last runs without its all-reduce, as
        # Accelerate's `accumulate` (HF Trainer) does.
        sync = micro + 1 == a.grad_accum or not hasattr(runner, "no_sync")
        with contextlib.nullcontext() if sync else runner.no_sync():
            # Only the loss is kept, as HF Trainer's training_step does: the logits and the
            # rest of the output are dropped before backward.
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = runner(input_ids=ids, labels=ids).loss
            phases.append((step, "forward", mt.get_tracker_snapshot("peak")))
            if micro == 0:
                after_forward = mt.get_tracker_snapshot("current")
            if a.grad_accum > 1:
                loss = loss / a.grad_accum
            loss.backward()
            del loss
        # The frozen embedding's output leaf (LoRA under checkpointing), emptied as the
        # graph's end would.
        for leaf in leaves:
            leaf.grad = None
            leaf.data = torch.empty(0, dtype=leaf.dtype)
        leaves.clear()
        phases.append((step, "backward", mt.get_tracker_snapshot("peak")))
        if micro + 1 < a.grad_accum:
            # The tracker takes each module once an iteration; its running peak is kept.
            mt.reset_mod_stats()
    return after_forward


def start_fake_ddp(rank, world):
    """A fake process group of `world` ranks, this one `rank` (torch.testing's: collectives return at once) for DDP, and
    DDP's start-up checks that read parameter values across ranks, which fake tensors cannot
    give, skipped (they allocate nothing that stays)."""
    import torch.distributed as dist
    import torch.nn.parallel.distributed as ddp_module
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())
    ddp_module._verify_param_shape_across_processes = lambda *args, **kwargs: None
    ddp_module._sync_module_states = lambda *args, **kwargs: None


class _NoRebuild:
    """DDP's reducer, but for the bucket rebuild before the second step: it syncs bucket
    indices across ranks (values fake tensors cannot give) and only reorders the same buckets."""

    def __init__(self, reducer):
        object.__setattr__(self, "_reducer", reducer)

    def __getattr__(self, name):
        return getattr(self._reducer, name)

    def _rebuild_buckets(self):
        return False


def fake_ddp(model, bucket_view):
    """`model` in DistributedDataParallel (25 MiB buckets, its defaults), its all-reduce done in
    place on the bucket as NCCL does (the fake group's future carries no tensor)."""
    from torch.nn.parallel import DistributedDataParallel

    ddp = DistributedDataParallel(model, gradient_as_bucket_view=bucket_view)

    def in_place(state, bucket):
        fut = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut

    ddp.register_comm_hook(None, in_place)
    ddp.reducer = _NoRebuild(ddp.reducer)
    return ddp


def totals(snapshot, device="cpu"):
    """A tracker snapshot's categories on `device`, where the fake tensors live: the CPU, or
    for measure_deepspeed's offload runs `meta` playing the GPU (DeepSpeed also makes meta
    tensors of no elements, placeholders that hold no memory; on the CPU they are left out)."""
    for dev, categories in snapshot.items():
        if torch.device(dev).type == device:
            return categories
    raise ValueError(f"no {device} figures in {snapshot}")


def peak_fields(snap, phases, started, device="cpu"):
    """The record's peak, the phase it fell in, each phase's running peak and the time taken."""
    first, peaks = phase_record(phases, snap["Total"], device)
    return {
        "peak": {k: int(v) for k, v in snap.items()},
        "peak_phase": first,
        "phase_peaks": peaks,
        "seconds": round(time.time() - started, 1),
    }


def phase_record(phases, total, device="cpu"):
    """The phase where the peak `total` was first reached, and each phase's running peak."""
    first = next((ph for _, ph, sn in phases if totals(sn, device)["Total"] == total), None)
    peaks = [
        {"step": st, "phase": ph, "total": int(totals(sn, device)["Total"])}
        for st, ph, sn in phases
    ]
    return first, peaks


def every_rank(world):
    """Runs this script once a rank and prints the fullest rank's record, with every rank's
    total beside it."""
    import subprocess

    records = []
    for rank in range(world):
        out = subprocess.run([sys.executable] + sys.argv + ["--rank", str(rank)],
                             capture_output=True, text=True, check=True).stdout
        records.append(json.loads(out))
    worst = max(records, key=lambda r: r["peak"]["Total"])
    worst["ddp"]["rank_totals"] = [r["peak"]["Total"] for r in records]
    json.dump(worst, sys.stdout, indent=1)
    print()


def optimizer_kwargs(name):
    """The torch optimizers' settings, as optimizer_for makes them."""
    return {"adamw": {"lr": 1e-4, "foreach": True}, "adam": {"lr": 1e-4, "foreach": True},
            "sgd": {"lr": 1e-4, "momentum": 0.9, "foreach": True}}[name]


def optimizer_for(name, params):
    if name == "adamw8bit":
        import bitsandbytes as bnb

        return bnb.optim.AdamW8bit(params, lr=1e-4)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, foreach=True)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-4, foreach=True)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-4, momentum=0.9, foreach=True)
    if name == "adafactor":
        # As HF Trainer builds it for optim="adafactor": a fixed learning rate, no parameter
        # scaling, no first moment (beta1=None): factored second moments of 2-D tensors.
        from transformers.optimization import Adafactor

        return Adafactor(params, lr=1e-4, scale_parameter=False, relative_step=False,
                         warmup_init=False)
    raise SystemExit(f"unknown optimizer {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--recipe", choices=sorted(RECIPES), default="bf16")
    ap.add_argument("--optimizer", choices=["adamw", "adam", "sgd", "adamw8bit", "adafactor"],
                    default="adamw")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=512)
    # auto: SDPA where the model class supports it, else eager (transformers' own default).
    ap.add_argument("--attn", choices=["auto", "sdpa", "eager"], default="auto")
    ap.add_argument("--checkpointing", action="store_true")
    ap.add_argument("--grad-accum", type=int, default=1, metavar="N",
                    help="gradient accumulation: N micro-batches a step, each loss divided by N "
                         "(HF Trainer's gradient_accumulation_steps), gradients zeroed after the "
                         "step")
    ap.add_argument("--lora-rank", type=int, default=16)
    ap.add_argument("--lora-targets", choices=sorted(LORA_TARGETS), default="all-linear")
    ap.add_argument("--ddp", action="store_true",
                    help="wrap the model in DistributedDataParallel (a fake 2-rank group)")
    ap.add_argument("--bucket-view", action="store_true",
                    help="DDP's gradient_as_bucket_view=True")
    ap.add_argument("--zero1", type=int, default=0, metavar="N",
                    help="with --ddp: ZeroRedundancyOptimizer over N ranks")
    ap.add_argument("--rank", type=int, default=-1,
                    help="with --zero1: the rank measured (-1: every rank, each in a process "
                         "of its own, the fullest one's record kept with every rank's total)")
    a = ap.parse_args()
    if a.zero1 and a.rank < 0:
        return every_rank(a.zero1)
    if a.ddp:
        start_fake_ddp(a.rank, max(a.zero1, 2))

    with open(a.config) as f:
        raw = json.load(f)
    # The recipe sets the weights' dtype: a config's own torch_dtype would override it.
    cfg = AutoConfig.for_model(**{k: v for k, v in raw.items() if k not in ("torch_dtype", "dtype")})
    cfg._attn_implementation = "sdpa" if a.attn == "auto" else a.attn
    cfg.use_cache = False
    torch.set_default_dtype(RECIPES[a.recipe])
    started = time.time()
    phases = []
    if a.optimizer == "adamw8bit" or a.recipe == "qlora":
        share_quantization_maps()
    with FakeTensorMode(allow_non_fake_inputs=a.optimizer == "adamw8bit" or a.recipe == "qlora"):
        try:
            model = AutoModelForCausalLM.from_config(cfg)
        except ValueError:
            if a.attn != "auto":
                raise
            cfg._attn_implementation = "eager"
            model = AutoModelForCausalLM.from_config(cfg)
        assert next(model.parameters()).dtype == RECIPES[a.recipe]
        params = sum(p.numel() for p in model.parameters())
        if a.recipe == "qlora":
            quantize_layers(model)
            for p in model.parameters():
                p.requires_grad = False
        if a.recipe in ("lora", "qlora"):
            # PEFT's defaults: adapters in f32 (autocast_adapter_dtype), no dropout here.
            from peft import LoraConfig, get_peft_model
            from peft.tuners.tuners_utils import BaseTunerLayer

            # PEFT makes the adapters, moves them to the base layer's device and dtype, then
            # casts them back to f32 (autocast_adapter_dtype), all with Module.to, which fake
            # tensors refuse (a parameter cannot be swapped in place). Everything is on the CPU
            # already: made in f32 and left there, the adapters end as PEFT leaves them.
            torch.set_default_dtype(torch.float32)
            BaseTunerLayer._move_adapter_to_device_of_base_layer = lambda self, *a, **k: None
            module_to = torch.nn.Module.to
            torch.nn.Module.to = lambda self, *a, **k: self
            model = get_peft_model(
                model,
                LoraConfig(
                    r=a.lora_rank,
                    lora_alpha=2 * a.lora_rank,
                    lora_dropout=0.0,
                    target_modules=LORA_TARGETS[a.lora_targets],
                ),
                autocast_adapter_dtype=False,
            )
            torch.nn.Module.to = module_to
            torch.set_default_dtype(RECIPES[a.recipe])
            assert all(p.dtype == torch.float32 for p in model.parameters() if p.requires_grad)
        leaves = []
        if a.checkpointing:
            model.gradient_checkpointing_enable()
            if a.recipe in ("lora", "qlora"):
                # transformers makes the frozen embedding's output a leaf that requires a
                # gradient (enable_input_require_grads). MemTracker's module hooks keep every
                # such leaf, and the gradient backward gives it, alive for good (a reference
                # cycle through autograd's nodes); a run without the tracker frees both with
                # the graph. Each step's leaf is emptied after its backward, as the graph's
                # end would free it.
                model.get_input_embeddings().register_forward_hook(
                    lambda mod, inp, out: leaves.append(out) if out.is_leaf else None)
        model.train()
        runner = fake_ddp(model, a.bucket_view) if a.ddp else model
        trained = [p for p in model.parameters() if p.requires_grad]
        if a.zero1:
            from torch.distributed.optim import ZeroRedundancyOptimizer

            # ZeRO-1 as PyTorch has it: each rank keeps its share of the optimizer state.
            opt = ZeroRedundancyOptimizer(trained, optimizer_class=type(optimizer_for(
                a.optimizer, trained[:1])), **optimizer_kwargs(a.optimizer))
        else:
            opt = optimizer_for(a.optimizer, trained)
        mt = MemTracker()
        mt.track_external(runner, opt)
        autocast = a.recipe == "fp32-autocast"
        with mt:
            for step in range(2):
                after_forward = micro_batches(runner, cfg.vocab_size, a, autocast, mt, step,
                                              phases, leaves)
                opt.step()
                opt.zero_grad()
                phases.append((step, "optimizer", mt.get_tracker_snapshot("peak")))
                if step == 0:
                    mt.reset_mod_stats()
        peak = mt.get_tracker_snapshot("peak")
    snap = totals(peak)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    record = {
        "source": "torch.distributed._tools.mem_tracker.MemTracker under FakeTensorMode",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "model": a.config.rsplit("/", 1)[-1].removesuffix(".json"),
        "recipe": a.recipe,
        "optimizer": a.optimizer,
        "foreach": a.optimizer not in ("adamw8bit", "adafactor"),
        "batch": a.batch,
        "seq": a.seq,
        "attn": cfg._attn_implementation,
        "checkpointing": a.checkpointing,
        "grad_accum": a.grad_accum,
        "lora": {"rank": a.lora_rank, "targets": a.lora_targets}
        if a.recipe in ("lora", "qlora") else None,
        "ddp": {"bucket_view": a.bucket_view, "zero1": a.zero1 or None, "rank": a.rank}
        if a.ddp else None,
        "parameters": params,
        "trainable": trainable,
        "after_forward": {k: int(v) for k, v in totals(after_forward).items()},
        **peak_fields(snap, phases, started),
    }
    json.dump(record, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
