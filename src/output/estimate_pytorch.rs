//! Rendering of `gpumem estimate --engine transformers`: transformers' `generate` peak and a
//! PyTorch training step's parts.

use std::fmt::Write as _;

use super::{thousands, wrap_into};
use crate::plan::engines::pytorch::generate::{GeneratePeak, GeneratePhase};
use crate::plan::engines::pytorch::training::{LoraTargets, Phase, Recipe, ZeroStage};
use crate::plan::engines::TrainingStep;
use crate::units::format_bytes;

/// transformers' `generate`: where its peak falls, or why llama.cpp's figures stand.
pub(super) fn generate_text(
    text: &mut String,
    generate: Option<&GeneratePeak>,
    unwalked: Option<&String>,
) {
    if let Some(g) = generate {
        let phase = match g.phase {
            GeneratePhase::Prefill => "the prompt's prefill",
            GeneratePhase::Decode => "the last token's decoding step",
        };
        let _ = writeln!(
            text,
            "transformers' generate (bf16, a dynamic cache, SDPA), as MemTracker counts it\n  \
             peak: {}, in {phase} (overhead and reserve added above)",
            format_bytes(g.total)
        );
        if let Some(a) = &g.adapter_parameters {
            let _ = writeln!(
                text,
                "  PEFT LoRA adapter (f32): {} of the parameters",
                format_bytes(*a)
            );
        }
        if let Some(a) = &g.assistant {
            let _ = writeln!(
                text,
                "  assistant model: {} weights, {} cache, {} of logits for its {} candidates \
                 a round (every candidate accepted)",
                format_bytes(a.parameters),
                format_bytes(a.kv_cache),
                format_bytes(a.candidate_logits),
                a.candidates
            );
        }
    } else if let Some(why) = unwalked {
        let _ = writeln!(text, "generate: llama.cpp's figures stand instead");
        wrap_into(text, &format!("  {why}"), 80);
    }
}

/// The projections a LoRA run adapts, by their module names.
fn lora_targets_text(t: LoraTargets) -> String {
    let named = [
        (t.q, "q"),
        (t.k, "k"),
        (t.v, "v"),
        (t.o, "o"),
        (t.gate, "gate"),
        (t.up, "up"),
        (t.down, "down"),
    ];
    named
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// How the training figures were counted: PyTorch's step and where it peaks, or the formula
/// and why.
pub(super) fn training_text(
    text: &mut String,
    step: Option<&TrainingStep>,
    unwalked: Option<&String>,
    checkpointing: Option<bool>,
) {
    match (step, unwalked) {
        (Some(step), _) => {
            let recipe = recipe_text(step);
            let phase = match step.peak.phase {
                Phase::Forward => "the forward pass, at the loss",
                Phase::Backward => "the backward pass",
                Phase::Optimizer => "the optimizer step",
            };
            let _ = writeln!(
                text,
                "training: PyTorch {}'s step, as its MemTracker counts it\n  recipe: {recipe}\n  \
                 peak: {}, in {phase} (overhead and reserve added above)",
                crate::plan::engines::pytorch::VERSION.version,
                format_bytes(step.peak.total)
            );
            if checkpointing == Some(true) {
                let why = match step.recipe {
                    Recipe::Qlora(_) => {
                        " (PEFT's prepare_model_for_kbit_training turns it on; \
                         --no-checkpointing turns it off)"
                    }
                    _ => "",
                };
                wrap_into(
                    text,
                    &format!("  activation checkpointing: one input kept a layer{why}"),
                    80,
                );
            }
            if step.grad_accum > 1 {
                // Sharded runs reduce each micro-batch into the rank's share of the gradients.
                let held = match step.deepspeed.map(|d| d.stage) {
                    Some(ZeroStage::Two | ZeroStage::Three) => "the rank's share of the gradients",
                    _ if step.fsdp.is_some() => "the rank's share of the gradients",
                    _ => "every gradient",
                };
                wrap_into(
                    text,
                    &format!(
                        "  gradients accumulated over {} micro-batches: {held} held through the \
                         forward and backward from the second on",
                        thousands(step.grad_accum)
                    ),
                    80,
                );
            }
            sharding_text(text, step);
        }
        (None, why) => {
            let _ = writeln!(
                text,
                "training: a closed formula (fp32 master weights, Korthikanti's activations)"
            );
            if let Some(why) = why {
                wrap_into(text, &format!("  {why}"), 80);
            }
        }
    }
}

/// The recipe a training step runs, in words.
fn recipe_text(step: &TrainingStep) -> String {
    match step.recipe {
        Recipe::Bf16 => "bf16 weights, gradients and optimizer state".to_string(),
        Recipe::Fp32Autocast => "f32 weights, gradients and state under bf16 autocast".to_string(),
        Recipe::MixedFp32Master => {
            "f32 master weights, gradients and state, the layers gathered in bf16 and \
             gradients reduced in f32 (FSDP2's MixedPrecisionPolicy)"
                .to_string()
        }
        Recipe::Lora(l) => format!(
            "LoRA rank {} on {}: {} adapters, the bf16 model frozen",
            l.rank,
            lora_targets_text(l.targets),
            // FSDP2 shards one dtype a group: the adapters are the model's.
            if step.fsdp.is_some() { "bf16" } else { "f32" }
        ),
        Recipe::Qlora(l) => format!(
            "QLoRA rank {} on {}: f32 adapters, the layers frozen in NF4, the rest in f32",
            l.rank,
            lora_targets_text(l.targets)
        ),
    }
}

/// FSDP2's and DeepSpeed's sharding of a training step, in words.
fn sharding_text(text: &mut String, step: &TrainingStep) {
    if let Some(f) = step.fsdp {
        let over = match f.world {
            1 => "one GPU (an f32 master copy is kept so)".to_string(),
            n => format!("{} ranks", thousands(n)),
        };
        let line = format!(
            "  FSDP2 over {over}, layers {}: one rank's figures",
            if f.reshard_after_forward {
                "resharded after their forward"
            } else {
                "gathered until their backward"
            }
        );
        if line.chars().count() <= 80 {
            let _ = writeln!(text, "{line}");
        } else {
            wrap_into(text, &line, 80);
        }
    }
    if let Some(d) = step.deepspeed {
        let what = match d.stage {
            ZeroStage::One => {
                "the weights and gradients whole, master weights and Adam's moments \
                 partitioned"
            }
            ZeroStage::Two => {
                "the weights whole, gradients, master weights and Adam's moments \
                 partitioned"
            }
            ZeroStage::Three => {
                "weights, gradients, master weights and Adam's moments partitioned, \
                 each layer gathered whole while it runs"
            }
        };
        wrap_into(
            text,
            &format!(
                "  DeepSpeed ZeRO-{} over {} ranks: {what}; the fullest rank's figures",
                d.stage.number(),
                thousands(d.world)
            ),
            80,
        );
        if d.offload_optimizer {
            wrap_into(
                text,
                &format!(
                    "  optimizer offloaded (ZeRO-Offload): the rank's master weights, \
                     their gradients and Adam's moments in host memory, {} ({}) at \
                     its peak; the GPU's figures above",
                    format_bytes(step.peak.host),
                    thousands(step.peak.host)
                ),
                80,
            );
        }
    }
}
