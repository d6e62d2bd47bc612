//! SGLang's accounting in words: the fraction it keeps, what the weights leave, and the lines
//! SGLang itself prints at start-up (its "GB" are 2^30 bytes, two decimals).

use std::fmt::Write as _;

use super::thousands;
use crate::plan::engines::sglang::{SglangFit, SglangOutcome, VERSION};
use crate::units::format_bytes;

/// SGLang's "GB": bytes ÷ 2^30, as its logs print them.
#[expect(
    clippy::cast_precision_loss,
    reason = "a figure printed to two decimals"
)]
fn gb(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / f64::from(1u32 << 30))
}

/// SGLang's accounting on one rank, then what SGLang would print (or why it would refuse).
pub fn sglang_text(text: &mut String, f: &SglangFit) {
    let fraction = match f.default_reserve_mib {
        Some(r) => format!(
            "its default for {} MiB GPUs, keeping {} MiB out",
            thousands(f.gpu_mib),
            thousands(r)
        ),
        None => "as asked".to_string(),
    };
    let _ = writeln!(
        text,
        "\n{} {} on each GPU (TP {}), --mem-fraction-static {} ({fraction}):",
        VERSION.engine, VERSION.version, f.tensor_parallel, f.mem_fraction_static
    );
    let rows = [
        (
            "free at start (after the CUDA context)",
            f.free_bytes,
            "  (modelled)",
        ),
        ("weights", f.weights_bytes, ""),
        ("kept out (graphs, activations)", f.kept_out_bytes, ""),
        ("KV pool", f.pool_bytes, ""),
    ];
    for (name, bytes, basis) in rows {
        let _ = writeln!(text, "  {name:<40} {:>11}{basis}", format_bytes(bytes));
    }
    if let Some(d) = &f.draft {
        let _ = writeln!(
            text,
            "  with the {} draft: {} of weights (modelled) and {} KV layer{} in the pool",
            d.algorithm.flag(),
            format_bytes(d.weights_bytes),
            d.layers,
            if d.layers == 1 { "" } else { "s" }
        );
    }
    let _ = writeln!(
        text,
        "  {} bytes a token; CUDA graphs up to batch {}, prefill chunks of {} tokens",
        thousands(f.cell_bytes),
        f.cuda_graph_max_bs,
        thousands(f.chunked_prefill_size)
    );
    match f.outcome {
        SglangOutcome::NoKvMemory { short_bytes } => {
            let _ = writeln!(
                text,
                "  SGLang refuses: Loaded weights leave no GPU memory for the KV cache under \
                 --mem-fraction-static={} ({} short).",
                f.mem_fraction_static,
                format_bytes(short_bytes)
            );
        }
        SglangOutcome::Serves | SglangOutcome::PoolShorterThanContext => printed(text, f),
    }
    if let Some((tp, tokens)) = f.fewest_gpus {
        let _ = writeln!(
            text,
            "  On the fewest GPUs: TP {tp} serves it too (max_total_num_tokens={tokens})."
        );
    }
}

/// The lines SGLang prints once its pool is sized.
fn printed(text: &mut String, f: &SglangFit) {
    let tokens = f.max_total_num_tokens;
    let pool_line = match f.k_v_bytes {
        Some((k, v)) => format!(
            "KV Cache is allocated. dtype: {}, #tokens: {tokens}, K size: {} GB, V size: {} GB",
            f.kv_dtype,
            gb((tokens + 1) * k),
            gb((tokens + 1) * v)
        ),
        None => match f.swa_tokens {
            Some(swa) => format!(
                "Use sliding window memory pool. full_layer_tokens={tokens}, \
                 swa_layer_tokens={swa}"
            ),
            None => format!(
                "KV Cache is allocated. dtype: {}, #tokens: {tokens}, KV size: {} GB",
                f.kv_dtype,
                gb((tokens + 1) * f.cell_bytes)
            ),
        },
    };
    let v = super::table::VERBATIM;
    let _ = writeln!(
        text,
        "  SGLang would print:\n{v}    {pool_line}\n{v}    \
         max_total_num_tokens={tokens}, chunked_prefill_size={}, max_prefill_tokens={}, \
         max_running_requests={}, context_len={}",
        f.chunked_prefill_size, f.max_prefill_tokens, f.max_running_requests, f.context_len
    );
    if f.outcome == SglangOutcome::PoolShorterThanContext {
        let _ = writeln!(
            text,
            "  and warn: KV pool holds {tokens} tokens, fewer than --context-length {}. One \
             full-length request cannot fit.",
            f.context_len
        );
    }
}
