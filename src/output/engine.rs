//! An engine's own accounting in words: each term with how it was obtained, and the lines the
//! engine itself prints at start-up.

use std::fmt::Write as _;

use super::thousands;
use crate::model::FfnMove;
use crate::plan::engines::llamacpp::TensorOverride;
use crate::plan::engines::llamacpp::{DraftAccount, LlamaDevice, UnmeasuredRule};
use crate::plan::engines::vllm::{VllmFit, VllmOutcome};
use crate::plan::engines::LlamaCppAccount;
use crate::plan::engines::{Basis, TermKind};
use crate::units::format_bytes;

fn term_name(t: TermKind) -> &'static str {
    match t {
        TermKind::Budget => "budget (total × utilization)",
        TermKind::Weights => "weights",
        TermKind::CpuOffload => "  + weights in host memory",
        TermKind::ProfilePeak => "profile-run peak",
        TermKind::NonTorch => "non-torch after start-up",
        TermKind::CudaGraphs => "CUDA-graph pool",
        TermKind::KvCache => "KV cache",
        TermKind::Startup => "start-up, outside the budget",
    }
}

/// vLLM's accounting on one rank, then what vLLM would print (or why it would refuse).
pub fn vllm_text(text: &mut String, f: &VllmFit, serves: bool, max_model_len: u64) {
    let layout = if f.pipeline_parallel > 1 {
        let layers: Vec<String> = f.stage_layers.iter().map(u64::to_string).collect();
        format!(
            "TP {} × PP {}, layers {}; stage {}'s rank,\nwhich has the fewest blocks",
            f.tensor_parallel,
            f.pipeline_parallel,
            layers.join("/"),
            f.binding_stage + 1
        )
    } else {
        format!("TP {}", f.tensor_parallel)
    };
    let _ = writeln!(
        text,
        "\n{} {} on each GPU ({layout}), profiled at {} tokens and {} sequences:",
        crate::plan::engines::vllm::VERSION.engine,
        crate::plan::engines::vllm::VERSION.version,
        thousands(f.max_num_batched_tokens),
        thousands(f.max_num_seqs)
    );
    for t in &f.terms {
        let basis = match t.basis {
            Basis::Computed => "",
            Basis::Modelled => "  (modelled)",
        };
        let _ = writeln!(
            text,
            "  {:<30} {:>12}{basis}",
            term_name(t.term),
            format_bytes(t.bytes)
        );
    }
    vllm_features_text(text, f);
    vllm_outcome_text(text, f, serves, max_model_len);
}

/// The features that add to vLLM's terms: the LoRA slots, the vision encoder, the draft.
fn vllm_features_text(text: &mut String, f: &VllmFit) {
    if let Some((l, bytes)) = &f.lora {
        let _ = writeln!(
            text,
            "  with LoRA: {} slot{} of rank {}: {} (in the weights)",
            l.max_loras,
            if l.max_loras == 1 { "" } else { "s" },
            l.max_lora_rank,
            format_bytes(*bytes)
        );
    }
    if let Some(e) = &f.encoder {
        // vLLM prints the same budget and item count ("Encoder cache will be initialized...").
        let _ = writeln!(
            text,
            "  with the vision encoder: a budget of {} tokens, profiled with {} {} item{} of {} \
             tokens: {} at its peak (modelled, in the profile peak)",
            thousands(e.budget),
            e.items,
            match e.modality {
                crate::plan::engines::vllm::Modality::Image => "image",
                crate::plan::engines::vllm::Modality::Video => "video",
            },
            if e.items == 1 { "" } else { "s" },
            thousands(e.tokens_per_item),
            format_bytes(e.peak_bytes)
        );
    }
    if let Some(crate::plan::engines::vllm::VllmDraft { draft: d, tokens }) = &f.draft {
        let _ = writeln!(
            text,
            "  with the {} draft ({tokens} token{} a step): {} of weights (modelled, in the \
             weights) and {} KV layer{} in the pool",
            d.algorithm.flag(),
            if *tokens == 1 { "" } else { "s" },
            format_bytes(d.weights_bytes),
            d.layers,
            if d.layers == 1 { "" } else { "s" }
        );
    }
}

/// What vLLM would print at start-up, or why it would refuse to start.
fn vllm_outcome_text(text: &mut String, f: &VllmFit, serves: bool, max_model_len: u64) {
    match f.outcome {
        VllmOutcome::Serves if serves => {
            let _ = writeln!(
                text,
                "  vLLM would print: GPU KV cache size: {} tokens\n                    \
                 Maximum concurrency for {} tokens per request: {}.{:02}x",
                thousands(f.kv_tokens),
                thousands(max_model_len),
                f.max_concurrency_centi / 100,
                f.max_concurrency_centi % 100
            );
            if let Some(a) = &f.fewest_gpus {
                let layout = if a.pipeline_parallel > 1 {
                    format!("TP {} × PP {}", a.tensor_parallel, a.pipeline_parallel)
                } else {
                    format!("TP {}", a.tensor_parallel)
                };
                let _ = writeln!(
                    text,
                    "  On the fewest GPUs: {layout} on {} GPUs serves it too ({} tokens of KV \
                     cache).",
                    a.gpus,
                    thousands(a.kv_tokens)
                );
            }
        }
        VllmOutcome::Serves => {}
        VllmOutcome::NoKvMemory { short_bytes } => {
            let _ = writeln!(
                text,
                "  vLLM refuses: no memory for the cache blocks ({} over the budget).",
                format_bytes(short_bytes)
            );
        }
        VllmOutcome::ModelLenTooLong {
            needed_bytes,
            available_bytes,
            estimated_max_model_len,
        } => {
            let _ = writeln!(
                text,
                "  vLLM refuses: one request needs {} of KV cache, {} is available;\n  its \
                 estimated maximum model length is {} tokens.",
                format_bytes(needed_bytes),
                format_bytes(available_bytes),
                thousands(estimated_max_model_len)
            );
        }
        VllmOutcome::LongerThanTrained { trained } => {
            let _ = writeln!(
                text,
                "  vLLM refuses: --max-model-len is longer than the model's {} tokens \
                 (max_position_embeddings).",
                thousands(trained)
            );
        }
        VllmOutcome::BudgetAboveFree { short_bytes } => {
            let _ = writeln!(
                text,
                "  vLLM refuses: the budget is {} more than the GPU has free after start-up.",
                format_bytes(short_bytes)
            );
        }
    }
}

/// llama.cpp's placement: its memory breakdown per device, as `llama_memory_breakdown_print`
/// lays it out (model, context, compute), and the `-ngl` its fit chose.
pub fn llamacpp_text(text: &mut String, a: &LlamaCppAccount) {
    let split = a.tensor_split.as_ref().map_or(String::new(), |t| {
        let t: Vec<String> = t.iter().map(u64::to_string).collect();
        format!(" -ts {}", t.join(","))
    });
    let margin = if a.devices.is_empty() {
        String::new()
    } else {
        format!(
            ", keeping {} free on each GPU",
            format_bytes(a.margin_bytes)
        )
    };
    let _ = writeln!(
        text,
        "\nllama.cpp {}{}{} (-fa {}{}, -ngl {}{split}{margin}):",
        crate::plan::engines::llamacpp::VERSION.version,
        if a.devices.is_empty() {
            " on the CPU"
        } else {
            rules_phrase(a.device_rules)
        },
        rpc_phrase(&a.rpc_device_rules, a.device_rules),
        if a.flash_attention { "on" } else { "off" },
        if a.device_rules.offloads_ops() && !a.op_offload {
            ", --no-op-offload"
        } else {
            ""
        },
        a.n_gpu_layers,
    );
    if a.context_fitted {
        let _ = writeln!(
            text,
            "  context {} tokens, as llama.cpp's fit chooses it without -c",
            thousands(a.context)
        );
    }
    let _ = writeln!(
        text,
        "  {:<6} {:>12} {:>12} {:>12} {:>12}",
        "", "model", "context", "compute", "total"
    );
    // llama.cpp's order: other hosts' GPUs first (its RPC devices), then the server's own.
    let rpc = usize::try_from(a.rpc_devices).unwrap_or(usize::MAX);
    let names = (0..a.devices.len()).map(|i| device_name(i, a.devices.len(), rpc));
    let rows = names.zip(a.devices.iter().copied());
    for (name, d) in rows.chain([("host".to_string(), a.host)]) {
        let _ = writeln!(
            text,
            "  {name:<6} {:>12} {:>12} {:>12} {:>12}",
            format_bytes(d.model),
            format_bytes(d.context),
            format_bytes(d.compute),
            format_bytes(d.total())
        );
    }
    if let Some(d) = &a.draft {
        draft_text(text, d, a.devices.len(), rpc);
    }
    if let Some(p) = &a.projector {
        projector_text(text, p, device_name(0, a.devices.len(), rpc));
    }
    if let Some(l) = &a.lora {
        lora_text(text, l, rpc);
    }
    for line in override_lines(&a.overrides, a.repeating_layers) {
        let _ = writeln!(text, "  {line}");
    }
    for rule in &a.unmeasured_rules {
        let line = match rule {
            UnmeasuredRule::CudaQuantizedRowPadding => {
                "(unmeasured: ggml-cuda's padding of quantized rows to 512 values, read from its source)"
            }
            UnmeasuredRule::MetalBuffers => {
                "(unmeasured: ggml-metal's buffers, read from its source)"
            }
        };
        let _ = writeln!(text, "  {line}");
    }
}

/// The draft's share of the rows above, device by device.
fn draft_text(text: &mut String, d: &DraftAccount, gpus: usize, rpc: usize) {
    let _ = writeln!(
        text,
        "  of which the draft {} (-ngld {}, up to {} tokens drafted a step):",
        d.model, d.n_gpu_layers, d.n_max
    );
    let names = (0..gpus).map(|i| device_name(i, gpus, rpc));
    for (name, u) in names
        .zip(d.devices.iter().copied())
        .chain([("host".to_string(), d.host)])
    {
        let _ = writeln!(
            text,
            "  {name:<6} {:>12} {:>12} {:>12} {:>12}",
            format_bytes(u.model),
            format_bytes(u.context),
            format_bytes(u.compute),
            format_bytes(u.total())
        );
    }
}

/// The projector's share of the first GPU's row (the host's without GPUs).
fn projector_text(
    text: &mut String,
    p: &crate::plan::engines::llamacpp::ProjectorAccount,
    gpu: String,
) {
    let on = if p.on_gpu { gpu } else { "host".to_string() };
    let kind = p.projector_type.as_deref().unwrap_or("unnamed");
    let _ = match (p.compute_bytes, p.largest_image_compute_bytes) {
        (Some(c), Some(l)) if l > c => writeln!(
            text,
            "  of which the {kind} projector on {on}: {} of weights, {} to encode its largest \
             image, kept free beside the fit's margin ({} at warm-up, all llama-server's fit \
             counts)",
            format_bytes(p.weights_bytes),
            format_bytes(l),
            format_bytes(c)
        ),
        (Some(c), _) => writeln!(
            text,
            "  of which the {kind} projector on {on}: {} of weights, {} to encode an image \
             (kept free beside the fit's margin, as llama-server does)",
            format_bytes(p.weights_bytes),
            format_bytes(c)
        ),
        (None, _) => writeln!(
            text,
            "  of which the {kind} projector on {on}: {} of weights; its image buffer is not \
             modelled for this projector type",
            format_bytes(p.weights_bytes)
        ),
    };
}

/// The LoRA adapters' share of the rows above, where it is not nothing.
fn lora_text(text: &mut String, l: &crate::plan::engines::llamacpp::LoraAccount, rpc: usize) {
    let gpus = l.devices_bytes.len();
    let shares: Vec<String> = l
        .devices_bytes
        .iter()
        .enumerate()
        .map(|(i, &b)| (device_name(i, gpus, rpc), b))
        .chain([("host".to_string(), l.host_bytes)])
        .filter(|&(_, b)| b > 0)
        .map(|(name, b)| format!("{} on {name}", format_bytes(b)))
        .collect();
    let (what, adapts, it) = if l.files.len() == 1 {
        ("the LoRA adapter".to_string(), "it adapts", "it")
    } else {
        (
            format!("{} LoRA adapters", l.files.len()),
            "they adapt",
            "them",
        )
    };
    let _ = writeln!(
        text,
        "  of which {what}: {} (beside the matrices {adapts}; llama.cpp's own fit does not \
         count {it}, this plan does)",
        shares.join(", ")
    );
}

/// A device's row name: `GPU` alone, else llama.cpp's order (other hosts' GPUs first, its RPC
/// devices).
fn device_name(i: usize, gpus: usize, rpc: usize) -> String {
    if gpus == 1 {
        "GPU".to_string()
    } else if i < rpc {
        format!("RPC {i}")
    } else {
        format!("GPU {}", i - rpc)
    }
}

/// The RPC devices' backends where any differs from the server's GPUs' (`local`), each named
/// once: ", RPC devices on Vulkan and Metal".
fn rpc_phrase(remote: &[LlamaDevice], local: LlamaDevice) -> String {
    if remote.iter().all(|&r| r == local) {
        return String::new();
    }
    let mut names: Vec<&str> = Vec::new();
    for &r in remote {
        let name = match r {
            LlamaDevice::Cuda => "CUDA",
            LlamaDevice::CpuRules | LlamaDevice::CpuRulesOffload => "the CPU backend",
            LlamaDevice::Vulkan(_) => "Vulkan",
            LlamaDevice::Metal => "Metal",
        };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    format!(", RPC devices on {}", names.join(" and "))
}

/// The backend a device's buffers follow, as the account's heading names it.
fn rules_phrase(d: LlamaDevice) -> &'static str {
    match d {
        LlamaDevice::Cuda => " on CUDA",
        LlamaDevice::CpuRules => "",
        LlamaDevice::CpuRulesOffload => " on RPC with CUDA's offload",
        LlamaDevice::Vulkan(_) => " on Vulkan",
        LlamaDevice::Metal => " on Metal",
    }
}

/// The fit's `-ot` overrides in words: runs of layers whose same weights go to the same place.
fn override_lines(overrides: &[TensorOverride], layers: u64) -> Vec<String> {
    let mut lines = Vec::new();
    let mut i = 0;
    // llama.cpp's fit may name the output layer too; its pattern matches no weight.
    let real: Vec<&TensorOverride> = overrides.iter().filter(|o| o.layer < layers).collect();
    while i < real.len() {
        let first = real[i];
        let mut j = i;
        while j + 1 < real.len()
            && real[j + 1].what == first.what
            && real[j + 1].to == first.to
            && real[j + 1].layer == real[j].layer + 1
        {
            j += 1;
        }
        let layers = if i == j {
            format!("layer {}", first.layer)
        } else {
            format!("layers {}–{}", first.layer, real[j].layer)
        };
        let what = match first.what {
            FfnMove::Nothing => "nothing",
            FfnMove::Experts => "routed experts",
            FfnMove::AllFfn => "feed-forward weights",
            FfnMove::GateDown => "feed-forward gate and down weights",
            FfnMove::Down => "feed-forward down weights",
        };
        let to = first
            .to
            .map_or_else(|| "system RAM".to_string(), |d| format!("GPU {d}"));
        lines.push(format!("-ot: the {what} of {layers} in {to}"));
        i = j + 1;
    }
    lines
}
