//! llama.cpp's inference activations: the compute buffer of its reserved prompt graph, replayed
//! node by node where the architecture's graph is modelled and by its largest stage elsewhere,
//! plus its host output buffer.

use super::kv::KV_CELL_PAD;
use super::replay;
use super::stages::Stages;
use crate::model::ModelArch;
use crate::plan::engines::breakdown::ActivationsBasis;
use crate::plan::engines::settings::Settings;

fn sat(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Inference activation scratch, per the module docs (saturating at `u64::MAX`): llama.cpp's
/// compute buffer for its reserved prompt graph plus its host output buffer.
pub fn inference_activations(arch: &ModelArch, s: &Settings) -> u64 {
    sat(inference_activations_wide(arch, s).0)
}

// llama.cpp reserves its compute buffer for the prompt graph of one micro-batch of `ub` tokens
// with every token an output, and computes it in f32 whatever the weights' type; the graph
// allocator reuses memory between stages, so the buffer is the largest stage's live tensors
// plus the graph inputs. Fitted to, and checked against, llama.cpp's own reports
// (tests/fixtures/llamacpp/).
pub(crate) fn inference_activations_wide(
    arch: &ModelArch,
    s: &Settings,
) -> (u128, ActivationsBasis) {
    let w = u128::from;
    let ub = w(s.ubatch.min(s.batch.saturating_mul(s.context)).max(1));
    let n_kv = w(s.context.div_ceil(KV_CELL_PAD) * KV_CELL_PAD);
    let sliding = arch.sliding_window.as_ref();
    // The host output buffer: one row of logits per sequence, and an encoder's embeddings.
    let output_buffer = w(s.batch) * w(output_row_floats(arch)) * 4;
    // The cells of the sliding-window layers' own cache: the window plus a micro-batch unless
    // --swa-full.
    let swa_cells = match sliding {
        Some(win) if !s.llamacpp.swa_full => {
            n_kv.min((w(win.window) + ub).div_ceil(w(KV_CELL_PAD)) * w(KV_CELL_PAD))
        }
        _ => n_kv,
    };
    // Where llama.cpp's graph is modelled node by node, its allocator's own figure.
    if let Some(bytes) = replay::compute_buffer_of(&replay::Batch {
        arch,
        tokens: sat(ub),
        kv_cells: sat(n_kv),
        swa_cells: sat(swa_cells),
        flash_attention: s.flash_attention,
        kv_type: &s.kv_dtype,
        seqs: s.batch.max(1),
        parallel: s.llamacpp.parallel.max(s.batch).max(1),
        outputs: s.llamacpp.outputs,
    }) {
        return (w(bytes) + output_buffer, ActivationsBasis::GraphReplay);
    }
    // DeepSeek-V4's graph is replayed for an f16 cache (or a quantized one under flash
    // attention), GLM-5-next's for an f16 cache only: elsewhere a plain decoder's stages
    // stand in, and say so.
    let basis = if arch.deepseek_v4.is_some() || arch.glm5_next.is_some() {
        ActivationsBasis::Unmodelled
    } else {
        ActivationsBasis::StageEstimate
    };
    let st = Stages::new(arch, s, ub, n_kv, swa_cells);
    // Token ids, positions and output ids (one i32 each per token), and 64 KiB for tensor
    // alignment and the graph's small tensors, which llama.cpp rounds into its buffers.
    let inputs = ub * 12 + (64 << 10);
    let largest = st
        .output()
        .max(st.attention())
        .max(st.mixer())
        .max(st.ffn());
    (inputs + largest + output_buffer, basis)
}

/// Floats of llama.cpp's output buffer a sequence: the logits, and an encoder's embeddings
/// beside them (llama.cpp reserves both when it computes embeddings).
pub fn output_row_floats(arch: &ModelArch) -> u64 {
    match arch.encoder {
        Some(_) => arch.vocab_size.saturating_add(arch.hidden_size),
        None => arch.vocab_size,
    }
}
