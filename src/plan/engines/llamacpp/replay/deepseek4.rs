//! DeepSeek-V4's graph (llama.cpp's `deepseek4` builder), whose layer loop is its own: the
//! residual is `hc_mult` streams mixed by hyper-connections (ggml's fused `dsv4_hc_pre`,
//! `dsv4_hc_comb` and `dsv4_hc_post`, which the CPU runs), the attention reads its sliding
//! window beside a compressed cache ([`super::deepseek4_attention`]), and the experts of the
//! first layers are chosen by a token-id table. Shapes are ggml's: every tensor's layout is
//! its element type and dimensions, which is what ggml's in-place reuse compares.

use super::deepseek4_attention::{attention, Dims, Inputs};
use super::graph::*;
use super::shaped::{node, rms, view, F32, FRESH, I32, INPLACE};
use super::Shape;
use crate::model::arch::{Compression, V4Layout};

/// The whole graph for `s`, or `None` for a shape past the replay's bounds.
pub(super) fn whole(s: Shape<'_>, v4: &V4Layout) -> Option<Graph> {
    let d = dims(&s, v4)?;
    let mut g = Graph {
        rows: d.tokens,
        ..Graph::default()
    };
    let inputs = Inputs::new(&mut g, &d);
    let t = d.tokens;
    let tok_embd = g.table("token_embd.weight", d.vocab, d.h);
    let embd = node(
        &mut g,
        (FRESH, Op::GetRows),
        (F32, d.h, t, 1),
        &[tok_embd, inputs.tokens],
    );
    g.expand(embd);
    g.expand(inputs.embd);
    g.expand(inputs.raw_mask);
    if let Some(rot) = inputs.raw_rot {
        g.expand(rot.input);
    }
    let hc = v4.hc_mult;
    let flat = view(&mut g, embd);
    let mut inp = node(&mut g, (FRESH, Op::Other), (F32, d.h, hc, t), &[flat]);
    for l in 0..s.arch.num_layers {
        g.part = Part::Layer(l);
        inp = layer(&d, &mut g, &inputs, inp, l)?;
    }
    g.part = Part::Output;
    output(&d, &mut g, inp, inputs.out_ids);
    Some(g)
}

fn dims<'a>(s: &Shape<'a>, v4: &'a V4Layout) -> Option<Dims<'a>> {
    let arch = s.arch;
    let moe = arch.moe.as_ref()?;
    let comp = |ratio: u64| s.kv_cells.div_ceil(ratio).max(1).div_ceil(256) * 256;
    // llama.cpp keeps a cache stream a sequence even under `--kv-unified`, and reserves a
    // micro-batch of every sequence's equal share (its tokens rounded up to a multiple).
    let seqs = s.parallel;
    let d = Dims {
        tokens: s.tokens.div_ceil(seqs).checked_mul(seqs)?,
        seqs,
        outputs: s.outputs,
        fa: s.flash_attention,
        h: arch.hidden_size,
        heads: arch.num_heads,
        head: arch.head_dim,
        vocab: arch.vocab_size,
        raw: s.swa_cells,
        csa: comp(4),
        hca: comp(128),
        v4,
        experts: moe.experts,
        used: moe.experts_per_token,
        expert_ffn: moe.expert_intermediate,
        shared_ffn: moe.shared_intermediate,
        rot: super::attention::rotation_size(s.kv_type, arch.head_dim, true),
        cached_row: s
            .kv_type
            .bytes_for(u128::from(arch.head_dim))
            .try_into()
            .ok()?,
    };
    // The widest tensors (the logits, the streams, the scores over the caches) in bounds.
    let t = u128::from(d.tokens);
    let widest = [
        d.vocab,
        d.h * v4.hc_mult,
        d.heads * (d.raw + d.csa.max(d.hca)),
        d.heads * d.head,
    ];
    let fits = widest
        .iter()
        .all(|&w| u128::from(w) * t * 4 < u128::from(MOST));
    // An f16 cache, or a quantized one under flash attention (llama.cpp refuses it without);
    // an f32 cache's keys are cast for flash attention, which is not modelled.
    let f16_cache = s.kv_type.block_elems <= 1 && s.kv_type.block_bytes == 2;
    let quantized = s.kv_type.block_elems > 1 && d.rot.is_some() && d.fa;
    let ok = fits
        && (f16_cache || quantized)
        && v4.hc_mult > 0
        && v4.o_groups > 0
        && d.heads % v4.o_groups == 0
        && (v4.compression.iter().all(|&c| c != Compression::Csa)
            || (v4.indexer_heads > 0 && v4.indexer_dim > 0 && v4.indexer_top_k > 0));
    ok.then_some(d)
}

/// The hyper-connections' mixes of a layer's half: the streams `x` flattened and RMS-normed,
/// projected to the mixes, and the pre-weights (`hc_pre`) taken from them; the post-weights
/// and the combination are made where the half's output is mixed back ([`HcMix::post`]).
pub(super) struct HcMix {
    mixes: usize,
    scale: usize,
    base: usize,
}

/// The streams' widths: `hc_mult` streams of `h` values, over `tokens` rows.
#[derive(Clone, Copy)]
pub(super) struct Hc {
    pub(super) mult: u64,
    pub(super) h: u64,
    pub(super) tokens: u64,
}

impl Dims<'_> {
    fn hc(&self) -> Hc {
        Hc {
            mult: self.v4.hc_mult,
            h: self.h,
            tokens: self.tokens,
        }
    }
}

pub(super) type HcNames = (&'static str, &'static str, &'static str);

pub(super) const HC_ATTN: HcNames = (
    "hc_attn_fn.weight",
    "hc_attn_scale.weight",
    "hc_attn_base.weight",
);
pub(super) const HC_FFN: HcNames = (
    "hc_ffn_fn.weight",
    "hc_ffn_scale.weight",
    "hc_ffn_base.weight",
);

impl HcMix {
    pub(super) fn new(d: Hc, g: &mut Graph, x: usize, names: HcNames) -> HcMix {
        let (hc, t) = (d.mult, d.tokens);
        let mix = (2 + hc) * hc;
        let flat = view(g, x);
        let normed = node(g, (INPLACE, Op::RmsNorm), (F32, hc * d.h, t, 1), &[flat]);
        let w = g.matrix(names.0, hc * d.h, mix);
        let mixes = node(g, (FRESH, Op::MulMat), (F32, mix, t, 1), &[w, normed]);
        let scale = g.vector(names.1, 3);
        let base = g.vector(names.2, mix);
        HcMix { mixes, scale, base }
    }

    /// `sigmoid(mixes' slice × scale + base)`, then scaled (and for `hc_pre` biased).
    pub(super) fn affine(&self, d: Hc, g: &mut Graph) -> usize {
        let ne = (F32, d.mult, d.tokens, 1);
        let slice = view(g, self.mixes);
        let scale = view(g, self.scale);
        let x = node(g, (INPLACE, Op::Mul), ne, &[slice, scale]);
        let base = view(g, self.base);
        let x = node(g, (INPLACE, Op::Add), ne, &[x, base]);
        let x = node(g, (INPLACE, Op::Unary), ne, &[x]);
        node(g, (INPLACE, Op::Scale), ne, &[x])
    }

    /// The post-weights and the combination (`dsv4_hc_comb`, its Sinkhorn iterations fused).
    pub(super) fn post(&self, d: Hc, g: &mut Graph) -> (usize, usize) {
        let post = self.affine(d, g);
        let hc = d.mult;
        let srcs = [self.mixes, self.scale, self.base];
        let comb = node(g, (FRESH, Op::Other), (F32, hc, hc, d.tokens), &srcs);
        (post, comb)
    }
}

/// `dsv4_hc_pre`: the streams weighted into one.
pub(super) fn hc_pre(d: Hc, g: &mut Graph, x: usize, pre: usize) -> usize {
    node(g, (FRESH, Op::Other), (F32, d.h, d.tokens, 1), &[x, pre])
}

/// `dsv4_hc_post`: the block's output `x` and the residual streams mixed into new streams.
pub(super) fn hc_post(
    d: Hc,
    g: &mut Graph,
    x: usize,
    residual: usize,
    pc: (usize, usize),
) -> usize {
    let ne = (F32, d.h, d.mult, d.tokens);
    node(g, (FRESH, Op::Other), ne, &[x, residual, pc.0, pc.1])
}

/// One layer over the streams `inp`: attention's half and the experts' half, each between its
/// hyper-connections.
fn layer(d: &Dims<'_>, g: &mut Graph, inputs: &Inputs, inp: usize, l: u64) -> Option<usize> {
    let hc = d.hc();
    let mix = HcMix::new(hc, g, inp, HC_ATTN);
    let pre = mix.affine(hc, g);
    let cur = hc_pre(hc, g, inp, pre);
    let ne = (F32, d.h, d.tokens, 1);
    let cur = rms(g, cur, ne, ("attn_norm.weight", d.h));
    let attended = attention(d, g, inputs, cur, l)?;
    let pc = mix.post(hc, g);
    let streams = hc_post(hc, g, attended, inp, pc);
    let mix = HcMix::new(hc, g, streams, HC_FFN);
    let pc = mix.post(hc, g);
    let pre = mix.affine(hc, g);
    g.expand(streams);
    g.expand(pc.0);
    g.expand(pc.1);
    let cur = hc_pre(hc, g, streams, pre);
    let cur = rms(g, cur, ne, ("ffn_norm.weight", d.h));
    let routed = experts(d, g, cur, inputs.tokens, l);
    let shared = swiglu(g, cur, (d.h, d.shared_ffn, d.tokens), SHARED);
    let out = node(g, (INPLACE, Op::Add), ne, &[routed, shared]);
    Some(hc_post(hc, g, out, streams, pc))
}

pub(super) type FfnNames = (&'static str, &'static str, &'static str);

const SHARED: FfnNames = (
    "ffn_gate_shexp.weight",
    "ffn_up_shexp.weight",
    "ffn_down_shexp.weight",
);

/// A gated MLP of `n` over `cur` (`swiglu` clamped, as V4's `swiglu_limit` asks).
pub(super) fn swiglu(
    g: &mut Graph,
    cur: usize,
    (h, n, t): (u64, u64, u64),
    names: FfnNames,
) -> usize {
    let gate_w = g.ffn_weight(FfnClass::Gate, (names.0, h * n, true));
    let gate = node(g, (FRESH, Op::MulMat), (F32, n, t, 1), &[gate_w, cur]);
    let up_w = g.ffn_weight(FfnClass::Up, (names.1, h * n, true));
    let up = node(g, (FRESH, Op::MulMat), (F32, n, t, 1), &[up_w, cur]);
    let act = node(g, (FRESH, Op::Glu), (F32, n, t, 1), &[gate, up]);
    let down_w = g.ffn_weight(FfnClass::Down, (names.2, n * h, true));
    node(g, (FRESH, Op::MulMat), (F32, h, t, 1), &[down_w, act])
}

/// `build_moe_ffn` with sqrt-softplus scores: the experts a hash layer's token-id table names,
/// or elsewhere the top scores after the correction bias; their weights normalised and scaled.
fn experts(d: &Dims<'_>, g: &mut Graph, cur: usize, tokens: usize, l: u64) -> usize {
    let (t, e, k, h, f) = (d.tokens, d.experts, d.used, d.h, d.expert_ffn);
    let router = g.ffn_weight(FfnClass::Gate, ("ffn_gate_inp.weight", h * e, true));
    let logits = node(g, (FRESH, Op::MulMat), (F32, e, t, 1), &[router, cur]);
    let probs = node(g, (INPLACE, Op::Unary), (F32, e, t, 1), &[logits]);
    let probs = node(g, (INPLACE, Op::Other), (F32, e, t, 1), &[probs]);
    let probs3 = view(g, probs);
    let selected = if l < d.v4.hash_layers {
        let table = g.table("ffn_gate_tid2eid.weight", d.vocab, k);
        node(g, (FRESH, Op::GetRows), (I32, k, t, 1), &[table, tokens])
    } else {
        let bias = g.vector("exp_probs_b.bias", e);
        let biased = node(g, (INPLACE, Op::Add), (F32, e, t, 1), &[probs, bias]);
        let sorted = node(g, (FRESH, Op::ArgSort), (I32, e, t, 1), &[biased]);
        view(g, sorted)
    };
    let weights = expert_weights(g, (probs3, selected), (k, t));
    expert_sum(g, cur, (selected, weights), (e, k, t, h, f))
}

/// The selected experts' weights: their probabilities gathered, divided by their (clamped) sum
/// and scaled, as `build_moe_ffn` normalizes them (DeepSeek-V4's and GLM-5-next's layers).
pub(super) fn expert_weights(
    g: &mut Graph,
    (probs3, selected): (usize, usize),
    (k, t): (u64, u64),
) -> usize {
    let weights = node(g, (FRESH, Op::GetRows), (F32, 1, k, t), &[probs3, selected]);
    let weights = view(g, weights);
    let sum = node(g, (FRESH, Op::SumRows), (F32, 1, t, 1), &[weights]);
    let sum = node(g, (INPLACE, Op::Clamp), (F32, 1, t, 1), &[sum]);
    let weights = node(g, (INPLACE, Op::Div), (F32, k, t, 1), &[weights, sum]);
    let weights = view(g, weights);
    node(g, (INPLACE, Op::Scale), (F32, 1, k, t), &[weights])
}

/// The selected experts' gated products over `cur`, each weighted and the `k` summed:
/// `(e, k, t, h, f)` are the experts, those used, the tokens, the width and an expert's.
pub(super) fn expert_sum(
    g: &mut Graph,
    cur: usize,
    (selected, weights): (usize, usize),
    (e, k, t, h, f): (u64, u64, u64, u64, u64),
) -> usize {
    let x = view(g, cur);
    let product = |g: &mut Graph,
                   (name, class): (&'static str, FfnClass),
                   (n_in, n_out): (u64, u64),
                   x: usize| {
        let w = g.expert_weight(class, (name, n_in * n_out * e, true));
        node(
            g,
            (FRESH, Op::MulMatId),
            (F32, n_out, k, t),
            &[w, x, selected],
        )
    };
    let gate = product(g, ("ffn_gate_exps.weight", FfnClass::Gate), (h, f), x);
    let up = product(g, ("ffn_up_exps.weight", FfnClass::Up), (h, f), x);
    let act = node(g, (FRESH, Op::Glu), (F32, f, k, t), &[gate, up]);
    let down = product(g, ("ffn_down_exps.weight", FfnClass::Down), (f, h), act);
    let weighted = node(g, (INPLACE, Op::Mul), (F32, h, k, t), &[down, weights]);
    let each: Vec<usize> = (0..k).map(|_| view(g, weighted)).collect();
    let ne = (F32, h, t, 1);
    let mut sum = each[0];
    for &x in each.iter().skip(1) {
        sum = node(g, (INPLACE, Op::Add), ne, &[sum, x]);
    }
    sum
}

/// The output head: the output rows of the streams gathered, the head's hyper-connection
/// weighting the streams into one (unfused: `dsv4_hc_pre` is fused in the layers only), the
/// final norm and the logits.
fn output(d: &Dims<'_>, g: &mut Graph, inp: usize, out_ids: usize) {
    let (hc, o) = (d.v4.hc_mult, d.outputs);
    g.rows = o;
    let flat = view(g, inp);
    let rows = node(
        g,
        (FRESH, Op::GetRows),
        (F32, hc * d.h, o, 1),
        &[flat, out_ids],
    );
    let x = view(g, rows);
    let flat = view(g, x);
    let normed = node(g, (INPLACE, Op::RmsNorm), (F32, hc * d.h, o, 1), &[flat]);
    let w = g.matrix("output_hc_fn.weight", hc * d.h, hc);
    let ne = (F32, hc, o, 1);
    let mixes = node(g, (FRESH, Op::MulMat), ne, &[w, normed]);
    let scale = g.vector("output_hc_scale.weight", 1);
    let pre = node(g, (INPLACE, Op::Mul), ne, &[mixes, scale]);
    let base = g.vector("output_hc_base.weight", hc);
    let pre = node(g, (INPLACE, Op::Add), ne, &[pre, base]);
    let pre = node(g, (INPLACE, Op::Unary), ne, &[pre]);
    let pre = node(g, (INPLACE, Op::Scale), ne, &[pre]);
    let ne = (F32, d.h, o, 1);
    let mut sum = None;
    for _ in 0..hc {
        let xh = g.view(rows, OTHER);
        g.tag(xh, Op::View);
        let wh = g.view(pre, OTHER);
        g.tag(wh, Op::View);
        let cur = node(g, (INPLACE, Op::Mul), ne, &[xh, wh]);
        sum = Some(match sum {
            None => cur,
            Some(s) => node(g, (INPLACE, Op::Add), ne, &[s, cur]),
        });
    }
    let Some(sum) = sum else { return };
    let result_norm = rms(g, sum, ne, ("output_norm.weight", d.h));
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
