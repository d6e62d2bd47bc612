//! Feed-forward blocks: the dense MLPs (gated, Phi-3's fused gate/up, GELU, squared ReLU) and
//! routed experts (`build_moe_ffn`) with any shared expert beside them.

use super::graph::*;
use super::{Builder, Ctx};
use crate::model::arch::{ModelArch, Moe};

/// A dense MLP's gate, up and down projections by name; a shared expert's.
const DENSE_NAMES: [&str; 3] = ["ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"];
const SHARED_NAMES: [&str; 3] = [
    "ffn_gate_shexp.weight",
    "ffn_up_shexp.weight",
    "ffn_down_shexp.weight",
];

/// A routed expert's projection: its class, its weight's and its bias's names, its rows and
/// columns (the bias has as many values as the columns, per expert).
type ExpertWeight = (FfnClass, &'static str, &'static str, u64, u64);

/// Tensor sizes of a routed feed-forward block.
#[derive(Debug, Clone, Copy)]
pub(super) struct Routed {
    pub(super) k: u64,
    pub(super) router: u64,
    /// The top-k view of the router's ranking: `k` ids a token, strided by the expert count,
    /// spanning `ggml_nbytes` of it (what a copy to another backend holds).
    pub(super) selected: u64,
    pub(super) weights: u64,
    pub(super) sums: u64,
    pub(super) expert_ffn: u64,
    /// The first projection's output: `expert_ffn`, or twice it where gate and up are fused.
    pub(super) gate_up: u64,
    pub(super) expert_out: u64,
    /// The selected experts' outputs summed: the model's width, or Kimi-K3's latent one.
    pub(super) sum: u64,
    /// A shared expert's width (Llama 4, GLM-4.5, Qwen3-Next), 0 without one.
    pub(super) shared: u64,
    /// The shared expert's output is scaled by a sigmoid gate of its own (Qwen3-Next).
    pub(super) shared_gate: bool,
    /// The weights are scaled by an op of their own.
    pub(super) scaled: bool,
    /// Routing within expert groups: the groups and how many a token uses.
    pub(super) groups: Option<(u64, u64)>,
    /// Group-limited routing's tensors: two scores per group, one per group, and the kept
    /// groups' experts.
    pub(super) group_pairs: u64,
    pub(super) group_scores: u64,
    pub(super) kept_scores: u64,
}

/// The routed block's sizes for `m`, `width(n)` giving the bytes of `n` f32 values per token;
/// `None` for a group layout llama.cpp refuses or a tensor past 256 TiB.
pub(super) fn routed(
    arch: &ModelArch,
    m: &Moe,
    width: &dyn Fn(u64) -> Option<u64>,
) -> Option<Routed> {
    let k = m.experts_per_token;
    let groups = match m.groups {
        (groups, used) if groups > 1 => {
            // llama.cpp refuses other layouts (GGML_ASSERT): not modelled.
            if m.experts % groups != 0 || used == 0 || used >= groups {
                return None;
            }
            Some((groups, used))
        }
        _ => None,
    };
    let r = Routed {
        k,
        router: width(m.experts)?,
        selected: width(m.experts)?.checked_sub(4 * m.experts.checked_sub(k)?)?,
        weights: width(k)?,
        sums: width(1)?,
        expert_ffn: width(m.expert_intermediate.checked_mul(k)?)?,
        gate_up: width(
            m.expert_intermediate
                .checked_mul(k)?
                .checked_mul(if arch.fused_gate_up_exps { 2 } else { 1 })?,
        )?,
        expert_out: width(arch.expert_width().checked_mul(k)?)?,
        sum: width(arch.expert_width())?,
        shared: width(m.shared_intermediate)?,
        shared_gate: m.shared_gate,
        scaled: m.scaled_weights,
        groups,
        group_pairs: width(m.groups.0.checked_mul(2)?)?,
        group_scores: width(m.groups.0)?,
        kept_scores: width((m.experts / m.groups.0.max(1)).checked_mul(m.groups.1)?)?,
    };
    if [r.router, r.gate_up, r.expert_out]
        .iter()
        .any(|&b| b > MOST)
    {
        return None;
    }
    Some(r)
}

/// A feed-forward block over `cur`: gated (or Phi-3's fused gate/up, or squared ReLU), or
/// routed experts with any shared expert beside them.
pub(super) fn ffn_block(c: &Ctx<'_>, g: &mut Graph, cur: usize, layer: u64) -> Option<usize> {
    let model = c.model;
    Some(match c.moe.filter(|_| c.arch.is_moe_layer(layer)) {
        None if c.b.fused => {
            // Phi-3's fused gate/up is named `ffn_up`.
            let (h, n) = (c.arch.hidden_size, c.arch.intermediate_size);
            let wu = g.ffn_weight(
                FfnClass::Up,
                ("ffn_up.weight", h.saturating_mul(2).saturating_mul(n), true),
            );
            let wd = g.ffn_weight(
                FfnClass::Down,
                ("ffn_down.weight", n.saturating_mul(h), true),
            );
            let gate_up = g.op(Kind::Fresh, c.ffn.checked_mul(2)?, OTHER, &[wu, cur]);
            let act = g.op(Kind::Fresh, c.ffn, FFN, &[gate_up]);
            g.op(Kind::Fresh, model, MODEL, &[wd, act])
        }
        // Gemma 4 E2B's KV-sharing layers are twice as wide.
        None => {
            let n = c.arch.layer_intermediate(layer);
            let width = if n == c.arch.intermediate_size {
                c.ffn
            } else {
                c.width(n)?
            };
            dense(c, g, cur, (width, n), false)
        }
        Some(m) if m.shared > 0 => {
            let routed = experts(c, g, cur, &m);
            let n = c.arch.moe.as_ref().map_or(0, |m| m.shared_intermediate);
            let mut shared = dense(c, g, cur, (m.shared, n), true);
            if m.shared_gate {
                let one = c.width(1)?;
                let h = c.arch.hidden_size;
                let w = g.ffn_weight(FfnClass::Gate, ("ffn_gate_inp_shexp.weight", h, false));
                let x = g.op(Kind::Fresh, one, SUMS, &[w, cur]);
                g.tag(x, Op::MulMat);
                let gate = if c.b.qwen2_moe {
                    let silu = g.op(Kind::InPlace, one, SUMS, &[x]);
                    g.tag(silu, Op::Unary);
                    g.op(Kind::InPlace, one, SUMS, &[silu, x])
                } else {
                    let sigmoid = g.op(Kind::InPlace, one, SUMS, &[x]);
                    g.tag(sigmoid, Op::Unary)
                };
                shared = g.op(Kind::InPlace, model, MODEL, &[shared, gate]);
                g.tag(shared, Op::Mul);
            }
            let sum = g.op(Kind::InPlace, model, MODEL, &[routed, shared]);
            g.tag(sum, Op::Add)
        }
        Some(m) => experts(c, g, cur, &m),
    })
}

/// A dense MLP over `cur` of `width` bytes a token, `n` wide (the shared expert's when
/// `shared`): GELU between biased projections (Falcon unbiased; GPT-NeoX and StarCoder2
/// biased), squared ReLU (Nemotron-H), else SwiGLU.
pub(super) fn dense(
    c: &Ctx<'_>,
    g: &mut Graph,
    cur: usize,
    (width, n): (u64, u64),
    shared: bool,
) -> usize {
    let model = c.model;
    let h = c.arch.hidden_size;
    let Builder { falcon, neox, .. } = c.b;
    let names = if shared { SHARED_NAMES } else { DENSE_NAMES };
    let up = |g: &mut Graph| g.ffn_weight(FfnClass::Up, (names[1], h.saturating_mul(n), true));
    let down = |g: &mut Graph| g.ffn_weight(FfnClass::Down, (names[2], n.saturating_mul(h), true));
    if falcon || neox {
        let bias = |g: &mut Graph, x: usize, bytes: u64, layout: u64, class: FfnClass| {
            if !neox {
                return x;
            }
            let b = match class {
                FfnClass::Down => g.ffn_weight(class, ("ffn_down.bias", h, false)),
                _ => g.ffn_weight(class, ("ffn_up.bias", n, false)),
            };
            g.op(Kind::InPlace, bytes, layout, &[x, b])
        };
        let (wu, wd) = (up(g), down(g));
        let up = g.op(Kind::Fresh, width, FFN, &[wu, cur]);
        let up = bias(g, up, width, FFN, FfnClass::Up);
        let act = g.op(Kind::InPlace, width, FFN, &[up]);
        g.tag(act, Op::Unary);
        let down = g.op(Kind::Fresh, model, MODEL, &[wd, act]);
        return bias(g, down, model, MODEL, FfnClass::Down);
    }
    if c.plain {
        let (wu, wd) = (up(g), down(g));
        let up = g.op(Kind::Fresh, width, FFN, &[wu, cur]);
        let relu = g.op(Kind::InPlace, width, FFN, &[up]);
        g.tag(relu, Op::Unary);
        let act = g.op(Kind::InPlace, width, FFN, &[relu]);
        return g.op(Kind::Fresh, model, MODEL, &[wd, act]);
    }
    let (wg, wu, wd) = (
        g.ffn_weight(FfnClass::Gate, (names[0], h.saturating_mul(n), true)),
        up(g),
        down(g),
    );
    let gate = g.op(Kind::Fresh, width, FFN, &[wg, cur]);
    let up = g.op(Kind::Fresh, width, FFN, &[wu, cur]);
    let act = match c.b.k3 {
        Some(k) => situ(g, (gate, up), (width, FFN), k.situ_up),
        None => {
            let act = g.op(Kind::Fresh, width, FFN, &[gate, up]);
            g.tag(act, Op::Glu)
        }
    };
    g.op(Kind::Fresh, model, MODEL, &[wd, act])
}

/// Kimi-K3's SiTU of `gate` and `up` (`bytes` each): β·tanh(gate/β)·σ(gate), times
/// β'·tanh(up/β') where `squashed_up` (β' > 0) or up as it is; every op element-wise, so in place
/// where ggml's allocator lets it be.
pub(super) fn situ(
    g: &mut Graph,
    (gate, up): (usize, usize),
    (bytes, layout): (u64, u64),
    squashed_up: bool,
) -> usize {
    let chain = |g: &mut Graph, x: usize, ops: &[Op]| {
        ops.iter().fold(x, |x, &op| {
            let y = g.op(Kind::InPlace, bytes, layout, &[x]);
            g.tag(y, op)
        })
    };
    let squash = [Op::Scale, Op::Unary, Op::Scale];
    let a = chain(g, gate, &squash);
    let sigmoid = chain(g, gate, &[Op::Unary]);
    let a = g.op(Kind::InPlace, bytes, layout, &[a, sigmoid]);
    g.tag(a, Op::Mul);
    let up = if squashed_up {
        chain(g, up, &squash)
    } else {
        up
    };
    let out = g.op(Kind::InPlace, bytes, layout, &[a, up]);
    g.tag(out, Op::Mul)
}

/// The routed experts over `cur` (`build_moe_ffn`): routing, each selected expert's gate, up,
/// activation and down projection, weighted, then summed expert by expert.
fn experts(c: &Ctx<'_>, g: &mut Graph, cur: usize, m: &Routed) -> usize {
    experts_over(c, g, cur, m, None)
}

/// [`experts`] with the router's logits made by the caller (`logits`: Gemma 4's router over a
/// norm of its own), and each selected expert's output scaled by its own factor where the
/// builder has one (Gemma 4's `ffn_down_exps.scale`).
pub(super) fn experts_over(
    c: &Ctx<'_>,
    g: &mut Graph,
    cur: usize,
    m: &Routed,
    logits: Option<usize>,
) -> usize {
    let Builder { oss, llama4, .. } = c.b;
    let (selected, weights) = route(c, g, cur, m, logits);
    let mut cur_3d = g.view(cur, OTHER);
    if llama4 {
        // The input repeated for each selected expert and weighted before the experts.
        let repeated = g.op(Kind::Fresh, m.expert_out, EXPERT_OUT, &[cur_3d]);
        cur_3d = g.op(
            Kind::InPlace,
            m.expert_out,
            EXPERT_OUT,
            &[repeated, weights],
        );
        g.tag(cur_3d, Op::Mul);
    }
    let (h, (n, e)) = (
        c.arch.expert_width(),
        c.arch
            .moe
            .as_ref()
            .map_or((0, 0), |m| (m.expert_intermediate, m.experts)),
    );
    let ids = (selected, e, oss);
    let per_expert = |g: &mut Graph, bytes: u64, layout: u64, x: usize, w: ExpertWeight| {
        per_expert(g, ids, (bytes, layout), x, w)
    };
    // With fused experts, gate and up are one tensor of twice the width.
    let first = if c.arch.fused_gate_up_exps {
        (
            FfnClass::Gate,
            "ffn_gate_up_exps.weight",
            "ffn_gate_up_exps.bias",
            h,
            n.saturating_mul(2),
        )
    } else {
        (FfnClass::Up, "ffn_up_exps.weight", "ffn_up_exps.bias", h, n)
    };
    let up = per_expert(g, m.gate_up, EXPERT_FFN, cur_3d, first);
    let act = expert_activation(c, g, m, (cur_3d, up), (ids, h, n));
    let w = (
        FfnClass::Down,
        "ffn_down_exps.weight",
        "ffn_down_exps.bias",
        n,
        h,
    );
    let mut out = per_expert(g, m.expert_out, EXPERT_OUT, act, w);
    if c.b.gemma4 {
        // One factor an expert, gathered for the selected ones and multiplied in.
        let s = g.expert_weight(FfnClass::Down, ("ffn_down_exps.scale", e, false));
        let s = g.view(s, OTHER);
        g.tag(s, Op::Reshape);
        let s = g.op(Kind::Fresh, m.weights, WEIGHTS, &[s, selected]);
        g.tag(s, Op::GetRows);
        out = g.op(Kind::InPlace, m.expert_out, EXPERT_OUT, &[out, s]);
        g.tag(out, Op::Mul);
    }
    if !llama4 {
        out = g.op(Kind::InPlace, m.expert_out, EXPERT_OUT, &[out, weights]);
        g.tag(out, Op::Mul);
    }
    g.expand(out);
    sum_experts(g, out, m.sum, m.k)
}

/// `mul_mat_id`: an expert's weights applied to each token's selected experts (`ids`: the
/// selection, the experts, and whether each expert's bias is added by id, gpt-oss's).
fn per_expert(
    g: &mut Graph,
    (selected, e, oss): (usize, u64, bool),
    (bytes, layout): (u64, u64),
    x: usize,
    w: ExpertWeight,
) -> usize {
    let (class, name, bias, rows, cols) = w;
    let w = g.expert_weight(
        class,
        (name, rows.saturating_mul(cols).saturating_mul(e), true),
    );
    let y = g.op(Kind::Fresh, bytes, layout, &[w, x, selected]);
    g.tensors[y].metal_extra = super::metal::expert_product_extra(e, g.rows);
    if !oss {
        return y;
    }
    let b = g.expert_weight(class, (bias, cols.saturating_mul(e), false));
    g.op(Kind::InPlace, bytes, layout, &[y, b, selected])
}

/// The experts' activation over their up products: a squared ReLU in place (plain MLPs), the
/// fused gate-up tensor's halves gated, or the gate's own product gated (Kimi-K3's in-situ
/// activation).
fn expert_activation(
    c: &Ctx<'_>,
    g: &mut Graph,
    m: &Routed,
    (x, up): (usize, usize),
    (ids, h, n): ((usize, u64, bool), u64, u64),
) -> usize {
    if c.plain {
        let relu = g.op(Kind::InPlace, m.expert_ffn, EXPERT_FFN, &[up]);
        g.tag(relu, Op::Unary);
        return g.op(Kind::InPlace, m.expert_ffn, EXPERT_FFN, &[relu]);
    }
    if c.arch.fused_gate_up_exps {
        let gate = g.view(up, EXPERT_FFN);
        let up = g.view(up, EXPERT_FFN);
        let act = g.op(Kind::Fresh, m.expert_ffn, EXPERT_FFN, &[gate, up]);
        return g.tag(act, Op::Glu);
    }
    let w = (
        FfnClass::Gate,
        "ffn_gate_exps.weight",
        "ffn_gate_exps.bias",
        h,
        n,
    );
    let gate = per_expert(g, ids, (m.expert_ffn, EXPERT_FFN), x, w);
    match c.b.k3 {
        Some(k) => situ(g, (gate, up), (m.expert_ffn, EXPERT_FFN), k.situ_up),
        None => {
            let act = g.op(Kind::Fresh, m.expert_ffn, EXPERT_FFN, &[gate, up]);
            g.tag(act, Op::Glu)
        }
    }
}

/// The `k` selected experts' weighted outputs `out` summed a token at a time: one view an
/// expert, added in a chain (one expert: its view made contiguous), `model` bytes each.
fn sum_experts(g: &mut Graph, out: usize, model: u64, k: u64) -> usize {
    let each: Vec<usize> = (0..k).map(|_| g.view(out, MODEL)).collect();
    for &e in &each {
        g.expand(e);
    }
    let mut sum = each[0];
    for &e in &each[1..] {
        sum = g.op(Kind::InPlace, model, MODEL, &[sum, e]);
        g.tag(sum, Op::Add);
        g.expand(sum);
    }
    if k == 1 {
        sum = g.op(Kind::Fresh, model, MODEL, &[sum]);
    }
    sum
}

/// The router over `cur`: its logits and their softmax (Llama 4's sigmoid; gpt-oss's biased
/// logits as they are), the top-k experts by argsort (within the best groups where routing is
/// group-limited), their weights gathered and normalised (and maybe scaled). Returns the
/// selected experts' ids and their weights.
fn route(
    c: &Ctx<'_>,
    g: &mut Graph,
    cur: usize,
    m: &Routed,
    given: Option<usize>,
) -> (usize, usize) {
    let Builder {
        oss,
        llama4,
        glm,
        unnormalised,
        ..
    } = c.b;
    let (h, e) = (
        c.arch.hidden_size,
        c.arch.moe.as_ref().map_or(0, |m| m.experts),
    );
    let mut logits = match given {
        Some(logits) => logits,
        None => router_logits(g, cur, m.router, (h, e)),
    };
    let probs = if oss {
        // A biased router (`ffn_gate_inp.bias`), its logits ranked as they are.
        let b = g.ffn_weight(FfnClass::Gate, ("ffn_gate_inp.bias", e, false));
        logits = g.op(Kind::InPlace, m.router, ROUTER, &[logits, b]);
        logits
    } else {
        // Softmax, or Llama 4's and GLM's sigmoid.
        let p = g.op(Kind::InPlace, m.router, ROUTER, &[logits]);
        g.tag(
            p,
            if llama4 || glm {
                Op::Unary
            } else {
                Op::SoftMax
            },
        )
    };
    // Llama 4 ranks the raw logits, GLM the scores plus a correction bias, the others what
    // the router made of them.
    let ranked = if llama4 {
        logits
    } else if glm {
        let b = g.vector("exp_probs_b.bias", e);
        g.op(Kind::InPlace, m.router, ROUTER, &[probs, b])
    } else {
        probs
    };
    let ranked = match m.groups {
        None => ranked,
        Some(_) => group_limited(g, ranked, m),
    };
    let order = g.op(Kind::Fresh, m.router, ROUTER_IDS, &[ranked]);
    g.tag(order, Op::ArgSort);
    // ggml-metal sorts through a second buffer of the output's size.
    g.tensors[order].metal_extra = m.router;
    let selected = g.view_spanning(order, OTHER, m.selected);
    let probs_3d = g.view(probs, OTHER);
    g.tag(probs_3d, Op::Reshape);
    let weights = g.op(Kind::Fresh, m.weights, WEIGHTS, &[probs_3d, selected]);
    g.tag(weights, Op::GetRows);
    let weights_2d = g.view(weights, WEIGHTS);
    g.tag(weights_2d, Op::Reshape);
    let weights = if llama4 || unnormalised {
        weights
    } else if oss {
        // Softmax over the selected experts' logits.
        let w = g.op(Kind::InPlace, m.weights, WEIGHTS, &[weights_2d]);
        g.tag(w, Op::SoftMax)
    } else {
        // Normalised to sum to one.
        let sum = g.op(Kind::Fresh, m.sums, SUMS, &[weights_2d]);
        g.tag(sum, Op::SumRows);
        let sum = g.op(Kind::InPlace, m.sums, SUMS, &[sum]);
        g.tag(sum, Op::Clamp);
        let w = g.op(Kind::InPlace, m.weights, WEIGHTS, &[weights_2d, sum]);
        g.tag(w, Op::Div)
    };
    let mut weights = if llama4 || unnormalised {
        weights
    } else {
        let w = g.view(weights, OTHER);
        g.tag(w, Op::Reshape)
    };
    if m.scaled {
        weights = g.op(Kind::InPlace, m.weights, WEIGHTS, &[weights]);
        g.tag(weights, Op::Scale);
    }
    g.expand(weights);
    (selected, weights)
}

/// The router's logits over `cur` (`router` bytes), `h` wide into `e` experts.
pub(super) fn router_logits(g: &mut Graph, cur: usize, router: u64, (h, e): (u64, u64)) -> usize {
    // llama-quantize keeps the router in f32.
    let w = g.ffn_weight(
        FfnClass::Gate,
        ("ffn_gate_inp.weight", h.saturating_mul(e), false),
    );
    let logits = g.op(Kind::Fresh, router, ROUTER, &[w, cur]);
    g.tag(logits, Op::MulMat)
}

/// Group-limited routing: each group scored by its best two experts, the best `used` groups
/// kept, every other expert's score set to −∞. Returns the scores to rank.
fn group_limited(g: &mut Graph, ranked: usize, m: &Routed) -> usize {
    let by_group = g.view(ranked, OTHER);
    let order = g.op(Kind::Fresh, m.router, ROUTER_IDS, &[by_group]);
    g.tensors[order].metal_extra = m.router;
    let best_two = g.view(order, OTHER);
    let as_rows = g.view(by_group, OTHER);
    let picked = g.op(Kind::Fresh, m.group_pairs, OTHER, &[as_rows, best_two]);
    let picked = g.view(picked, OTHER);
    let group_scores = g.op(Kind::Fresh, m.group_scores, OTHER, &[picked]);
    let group_scores = g.view(group_scores, OTHER);
    let group_order = g.op(Kind::Fresh, m.group_scores, ROUTER_IDS, &[group_scores]);
    g.tensors[group_order].metal_extra = m.group_scores;
    let kept = g.view(group_order, OTHER);
    let kept_scores = g.op(Kind::Fresh, m.kept_scores, OTHER, &[by_group, kept]);
    let masked = g.op(Kind::InPlace, m.router, ROUTER, &[by_group]);
    let merged = g.set_rows(masked, kept_scores, kept);
    g.view(merged, OTHER)
}
