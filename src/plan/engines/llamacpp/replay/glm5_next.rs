//! GLM-5-next's graph (llama.cpp's `glm5-next` builder): Kimi's delta attention
//! ([`super::kda`]) beside nope-only latent attention over a pooled indexer's selection
//! ([`super::glm5_next_attention`]), the residual kept as `hc_mult` streams that DeepSeek-V4's
//! fused hyper-connection ops ([`super::deepseek4`]) mix around every block, and sigmoid-routed
//! experts. Shapes are ggml's, as in DeepSeek-V4's replay: ggml's in-place reuse compares them.

use super::deepseek4::{
    expert_sum, expert_weights, hc_post, hc_pre, swiglu, Hc, HcMix, HC_ATTN, HC_FFN,
};
use super::glm5_next_attention::{dsa_layer, Dims, Inputs};
use super::graph::*;
use super::kda::{kda, KdaKind};
use super::recurrent::StateInputs;
use super::shaped::{node, rms, view, Ne, F16, F32, FRESH, I32, INPLACE};
use super::Shape;
use crate::model::arch::{Attention, G5nLayout};

impl Dims<'_> {
    fn hc(&self) -> Hc {
        Hc {
            mult: self.g5n.hc_mult,
            h: self.h,
            tokens: self.tokens,
        }
    }

    /// The masks' element size: flash attention reads f16 masks.
    pub(super) fn mask_type(&self) -> u64 {
        if self.fa {
            F16
        } else {
            F32
        }
    }
}

impl Inputs {
    fn new(g: &mut Graph, d: &Dims<'_>) -> Inputs {
        let (t, kpool) = (d.tokens, d.g5n.kpool);
        // A state row a sequence.
        let copy = g.input(4 * d.seqs);
        let extra = g.view_spanning(copy, OTHER, 0);
        let states = StateInputs {
            main: g.view(copy, OTHER),
            extra,
        };
        Inputs {
            pool_cells: g.input(d.pools * 4),
            pool_idxs: g.input(kpool * d.pools * 4),
            // The fused lightning indexer reads an f16 mask, with or without flash attention.
            pool_mask: g.input(d.pools * t * 2),
            tail_idxs: g.input(kpool.saturating_sub(1) * t * 4),
            gather_mask: g.input(d.selected * t * 4),
            idx_k_idxs: g.input(t * 8),
            new_pool_idxs: g.input(kpool * d.new_pools * 4),
            new_pool_rep: g.input(d.new_pools * 8),
            k_idxs: g.input(t * 8),
            kq_mask: g.input(d.mask_type() * d.cells * t),
            states,
        }
    }
}

/// The whole graph for `s`, or `None` for a shape past the replay's bounds.
pub(super) fn whole(s: Shape<'_>, g5n: &G5nLayout) -> Option<Graph> {
    let d = dims(&s, g5n)?;
    let mut g = Graph {
        rows: d.tokens,
        ..Graph::default()
    };
    let t = d.tokens;
    let tok_embd = g.table("token_embd.weight", d.vocab, d.h);
    let tokens = g.input(t * 4);
    let embd = node(
        &mut g,
        (FRESH, Op::GetRows),
        (F32, d.h, t, 1),
        &[tok_embd, tokens],
    );
    let embd_in = g.input(d.h * t * 4);
    g.expand(embd);
    g.expand(embd_in);
    let inputs = Inputs::new(&mut g, &d);
    for i in [
        inputs.pool_cells,
        inputs.pool_idxs,
        inputs.pool_mask,
        inputs.tail_idxs,
        inputs.gather_mask,
    ] {
        g.expand(i);
    }
    let flat = view(&mut g, embd);
    let mut inp = node(
        &mut g,
        (FRESH, Op::Other),
        (F32, d.h, d.g5n.hc_mult, t),
        &[flat],
    );
    let mut sel = None;
    for l in 0..s.arch.num_layers {
        g.part = Part::Layer(l);
        inp = layer(
            &d,
            &mut g,
            &inputs,
            (inp, l),
            (s.arch.is_recurrent_layer(l), &mut sel),
        )?;
    }
    g.part = Part::Output;
    let out_ids = g.input(d.outputs * 4);
    output(&d, &mut g, inp, out_ids);
    Some(g)
}

fn dims<'a>(s: &Shape<'a>, g5n: &'a G5nLayout) -> Option<Dims<'a>> {
    let arch = s.arch;
    let moe = arch.moe.as_ref()?;
    let ssm = arch.ssm?;
    let Attention::Mla {
        q_lora_rank: Some(q_lora),
        kv_lora_rank,
        qk_nope_head_dim,
        qk_rope_head_dim: 0,
        v_head_dim,
    } = arch.attention
    else {
        return None;
    };
    let kpool = g5n.kpool;
    if kpool < 2 || g5n.hc_mult == 0 || g5n.indexer.top_k % kpool != 0 {
        return None;
    }
    // Cells of a stream: each sequence's under separate streams, the whole cache's in one.
    let cells = s.kv_cells;
    // llama.cpp's reserve plans a pool completed for every cell's of every sequence's
    // stream (each of the whole cache under `--kv-unified`), padded to 64 (at least 64).
    let new_pools = (cells / kpool).checked_mul(s.parallel)?.max(1);
    let pools = (new_pools + 1).div_ceil(64).max(1) * 64;
    // The tail's incomplete pool (`indexer_kpool_select_tail`, as GLM-5.3-Flash's GGUF sets).
    let selected = kpool * pools.min(g5n.indexer.top_k / kpool) + kpool - 1;
    let d = Dims {
        // The reserve's micro-batch: an equal share of every sequence's.
        tokens: s.tokens.div_ceil(s.parallel).checked_mul(s.parallel)?,
        seqs: s.parallel,
        streams: s.seqs,
        outputs: s.outputs,
        fa: s.flash_attention,
        h: arch.hidden_size,
        heads: arch.num_heads,
        head_k: qk_nope_head_dim,
        head_v: v_head_dim,
        q_lora,
        kv_lora: kv_lora_rank,
        vocab: arch.vocab_size,
        cells,
        pools,
        new_pools,
        selected,
        g5n,
        ssm,
        experts: moe.experts,
        used: moe.experts_per_token,
        expert_ffn: moe.expert_intermediate,
        shared_ffn: moe.shared_intermediate,
        dense_ffn: arch.intermediate_size,
        dense_lead: moe.first_dense_layers,
    };
    // The widest tensors (the logits, the streams, the scores over the cache) in bounds.
    let t = u128::from(d.tokens);
    let widest = [
        d.vocab,
        d.h * g5n.hc_mult,
        d.heads * (d.cells + d.selected),
        d.heads * d.kv_lora,
        d.ssm.inner * 2,
    ];
    let fits = widest
        .iter()
        .all(|&w| u128::from(w) * t * 4 < u128::from(MOST));
    // An f16 cache only (what the measured rows hold).
    let f16_cache = s.kv_type.block_elems <= 1 && s.kv_type.block_bytes == 2;
    (fits && f16_cache).then_some(d)
}

/// One layer over the streams `inp`: the mixer (KDA, or latent attention whose selection a
/// full-indexer layer makes and a shared one reuses, `sel`) and the feed-forward half, each
/// between its hyper-connections.
fn layer(
    d: &Dims<'_>,
    g: &mut Graph,
    inputs: &Inputs,
    (inp, l): (usize, u64),
    (recurrent, sel): (bool, &mut Option<usize>),
) -> Option<usize> {
    let hc = d.hc();
    let ne = (F32, d.h, d.tokens, 1);
    let mix = HcMix::new(hc, g, inp, HC_ATTN);
    let pre = mix.affine(hc, g);
    let cur = hc_pre(hc, g, inp, pre);
    let cur = rms(g, cur, ne, ("attn_norm.weight", d.h));
    g.expand(cur);
    let mixed = if recurrent {
        let kind = KdaKind {
            bounded: true,
            full_gate: false,
        };
        kda(
            g,
            cur,
            (&d.ssm, kind),
            inputs.states,
            (d.tokens, d.seqs),
            d.h * d.tokens * 4,
        )?
    } else {
        dsa_layer(d, g, inputs, cur, (l, sel))?
    };
    let pc = mix.post(hc, g);
    let streams = hc_post(hc, g, mixed, inp, pc);
    let mix = HcMix::new(hc, g, streams, HC_FFN);
    let pre = mix.affine(hc, g);
    let cur = hc_pre(hc, g, streams, pre);
    let cur = rms(g, cur, ne, ("ffn_norm.weight", d.h));
    let out = if l < d.dense_lead {
        swiglu(g, cur, (d.h, d.dense_ffn, d.tokens), DENSE)
    } else {
        let routed = experts(d, g, cur);
        let shared = swiglu(g, cur, (d.h, d.shared_ffn, d.tokens), SHARED);
        node(g, (INPLACE, Op::Add), ne, &[routed, shared])
    };
    let pc = mix.post(hc, g);
    Some(hc_post(hc, g, out, streams, pc))
}

const DENSE: super::deepseek4::FfnNames = ("ffn_gate.weight", "ffn_up.weight", "ffn_down.weight");
const SHARED: super::deepseek4::FfnNames = (
    "ffn_gate_shexp.weight",
    "ffn_up_shexp.weight",
    "ffn_down_shexp.weight",
);

/// `build_moe_ffn` with sigmoid scores: the top scores after the correction bias, their
/// weights normalised and scaled, the chosen experts' gated products summed.
fn experts(d: &Dims<'_>, g: &mut Graph, cur: usize) -> usize {
    let (t, e, k, h, f) = (d.tokens, d.experts, d.used, d.h, d.expert_ffn);
    let router = g.ffn_weight(FfnClass::Gate, ("ffn_gate_inp.weight", h * e, true));
    let logits = node(g, (FRESH, Op::MulMat), (F32, e, t, 1), &[router, cur]);
    let probs = node(g, (INPLACE, Op::Unary), (F32, e, t, 1), &[logits]);
    let probs3 = view(g, probs);
    let bias = g.vector("exp_probs_b.bias", e);
    let biased = node(g, (INPLACE, Op::Add), (F32, e, t, 1), &[probs, bias]);
    let sorted = node(g, (FRESH, Op::ArgSort), (I32, e, t, 1), &[biased]);
    let selected = view(g, sorted);
    let weights = expert_weights(g, (probs3, selected), (k, t));
    // `build_moe_ffn` expands the weights before the experts' products.
    g.expand(weights);
    expert_sum(g, cur, (selected, weights), (e, k, t, h, f))
}

/// The output head: the output rows of the streams gathered, the streams averaged (a sum of
/// views, scaled), the final norm and the logits.
fn output(d: &Dims<'_>, g: &mut Graph, inp: usize, out_ids: usize) {
    let (hc, o) = (d.g5n.hc_mult, d.outputs);
    g.rows = o;
    let flat = view(g, inp);
    let rows = node(
        g,
        (FRESH, Op::GetRows),
        (F32, hc * d.h, o, 1),
        &[flat, out_ids],
    );
    let x = view(g, rows);
    let ne: Ne = (F32, d.h, o, 1);
    let mut acc = view(g, x);
    for _ in 1..hc {
        let xh = view(g, x);
        acc = node(g, (INPLACE, Op::Add), ne, &[acc, xh]);
    }
    let mean = node(g, (INPLACE, Op::Scale), ne, &[acc]);
    let result_norm = rms(g, mean, ne, ("output_norm.weight", d.h));
    g.tensors[result_norm].output = true;
    let lm_head = g.matrix("output.weight", d.h, d.vocab);
    let logits = node(
        g,
        (FRESH, Op::MulMat),
        (F32, d.vocab, o, 1),
        &[lm_head, result_norm],
    );
    g.tensors[logits].output = true;
    g.expand(logits);
}
