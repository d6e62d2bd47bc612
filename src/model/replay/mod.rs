//! llama.cpp's compute buffer by replay: the prompt graph llama.cpp reserves, built node by node
//! as its graph builder does, and placed by a model of ggml's graph allocator (`ggml-alloc.c`:
//! inputs first, tensors in graph order, parents freed after their last consumer, in-place
//! reuse of a sole consumer's parent, best fit over the free blocks with the last block
//! growing the buffer). The buffer is the highest offset any tensor reaches.
//!
//! Where llama.cpp's graph for an architecture is modelled here, the figure is llama.cpp's own
//! to the byte (CPU backend, 32-byte alignment: `tests/fixtures/llamacpp/`); elsewhere
//! [`compute_buffer`] returns `None` and the estimate falls back to its stage formulas.

mod attention;
mod builder;
mod ffn;
mod graph;
mod recurrent;

use attention::*;
use builder::*;
use ffn::*;
use graph::*;
use recurrent::*;

use super::arch::{Mlp, ModelArch, SsmKind};
use super::dtype::Precision;

/// llama.cpp's CPU compute buffer for `arch`'s prompt graph of `tokens` tokens (every one an
/// output) over `kv_cells` cached cells (`swa_cells` in sliding-window layers), with or without
/// flash attention; `None` where the architecture's graph is not modelled here, or for shapes
/// no device could hold.
pub(crate) fn compute_buffer(
    arch: &ModelArch,
    tokens: u64,
    kv_cells: u64,
    swa_cells: u64,
    flash_attention: bool,
    kv_type: &Precision,
) -> Option<u64> {
    let Builder {
        qkv_bias,
        o_bias,
        qk_norm,
        oss,
        gemma,
        fused,
        llama4,
        cohere,
        falcon,
        neox,
        fused_qkv,
        glm,
        mla,
        recurrent,
        rope_free,
        residual_first,
        unnormalised,
        one_block,
        parallel,
        nextn,
        gated_attention,
        qwen2_moe,
    } = modelled(arch)?;
    // Squared-ReLU feed-forward blocks and experts without a gate (Nemotron-H).
    let plain = arch.mlp == Mlp::Plain;
    // Guards against shapes no device could hold; the estimate's own plausibility checks
    // refuse those first, so this is never the figure a user sees.
    if arch.num_layers > 4096 || tokens == 0 {
        return None;
    }
    let f32 = |elems: u64| elems.checked_mul(4);
    let h = arch.hidden_size;
    let q_dim = arch.num_heads.checked_mul(arch.head_dim)?;
    let kv_dim = arch.num_kv_heads.checked_mul(arch.head_dim)?;
    let width = |n: u64| f32(n.checked_mul(tokens)?);
    let model = width(h)?;
    let query = width(q_dim)?;
    let kv = width(kv_dim)?;
    let ffn = width(arch.intermediate_size)?;
    let logits = width(arch.vocab_size)?;
    let scores = |cells: u64| f32(cells.checked_mul(tokens)?.checked_mul(arch.num_heads)?);
    let scores = (scores(kv_cells)?, scores(swa_cells)?);
    let mask = |cells: u64| {
        cells
            .checked_mul(tokens)?
            .checked_mul(if flash_attention { 2 } else { 4 })
    };
    let mask = (mask(kv_cells)?, mask(swa_cells)?);
    if [
        model, query, kv, ffn, logits, scores.0, scores.1, mask.0, mask.1,
    ]
    .iter()
    .any(|&bytes| bytes > MOST)
    {
        return None;
    }

    let mut g = Graph::default();
    let ids = tokens.checked_mul(4)?;
    let tok_embd = g.external();
    let tokens_in = g.input(ids);
    let embd = g.op(Kind::Fresh, model, MODEL, &[tok_embd, tokens_in]);
    // The embeddings input (for a batch given as vectors) is reserved beside the token path
    // and has no consumer in a token batch, so it stays allocated for the whole graph.
    let embd_in = g.input(model);
    g.expand(embd);
    g.expand(embd_in);
    let pos = g.input(ids);
    // Each cache's inputs: the rows K and V are written to (without flash attention the V
    // cache is transposed and written element by element) and the KQ mask over its cells. A
    // model with sliding-window layers has a second cache, and a second set.
    let cache_inputs = |g: &mut Graph, mask: u64, scores: u64| -> Option<CacheInputs> {
        Some(CacheInputs {
            k_idxs: g.input(tokens.checked_mul(8)?),
            v_idxs: g.input(if flash_attention {
                tokens.checked_mul(8)?
            } else {
                kv.checked_mul(2)?
            }),
            mask: g.input(mask),
            scores,
        })
    };
    let full = cache_inputs(&mut g, mask.0, scores.0)?;
    let swa = cache_inputs(&mut g, mask.1, scores.1)?;
    let out_ids = g.input(ids);
    // The recurrent states' copy indices: one i32 per sequence, the rows past the batch's
    // sequences (none) a second view.
    let state_inputs = recurrent.map(|_| {
        let copy = g.input(4);
        StateInputs {
            main: g.view(copy, OTHER),
            extra: g.view(copy, OTHER),
        }
    });
    let norm = |g: &mut Graph, x: usize, bytes: u64, layout: u64| {
        // ggml computes RMSNorm in place where it can; LayerNorm (`ggml_norm`) never.
        let kind = if cohere || falcon || neox {
            Kind::Fresh
        } else {
            Kind::InPlace
        };
        let n = g.op(kind, bytes, layout, &[x]);
        let w = g.external();
        let n = g.op(Kind::InPlace, bytes, layout, &[n, w]);
        if !(falcon || neox) {
            return n;
        }
        let b = g.external();
        g.op(Kind::InPlace, bytes, layout, &[n, b])
    };
    // The routed feed-forward block (`build_moe_ffn`): router logits and their softmax, the
    // top-k experts by argsort, their weights gathered and normalised, each selected expert's
    // gate, up, SwiGLU and down projection, weighted, then summed expert by expert.
    let moe = match &arch.moe {
        None => None,
        Some(m) => {
            let k = m.experts_per_token;
            Some(Routed {
                k,
                router: width(m.experts)?,
                weights: width(k)?,
                sums: width(1)?,
                expert_ffn: width(m.expert_intermediate.checked_mul(k)?)?,
                gate_up: width(
                    m.expert_intermediate
                        .checked_mul(k)?
                        .checked_mul(if arch.fused_gate_up_exps { 2 } else { 1 })?,
                )?,
                expert_out: width(h.checked_mul(k)?)?,
                shared: width(m.shared_intermediate)?,
                shared_gate: m.shared_gate,
                scaled: m.scaled_weights,
                groups: match m.groups {
                    (groups, used) if groups > 1 => {
                        // llama.cpp refuses other layouts (GGML_ASSERT): not modelled.
                        if m.experts % groups != 0 || used == 0 || used >= groups {
                            return None;
                        }
                        Some((groups, used))
                    }
                    _ => None,
                },
                group_pairs: width(m.groups.0.checked_mul(2)?)?,
                group_scores: width(m.groups.0)?,
                kept_scores: width((m.experts / m.groups.0.max(1)).checked_mul(m.groups.1)?)?,
            })
        }
    };
    if let Some(m) = &moe {
        if [m.router, m.gate_up, m.expert_out]
            .iter()
            .any(|&b| b > MOST)
        {
            return None;
        }
    }
    let experts = |g: &mut Graph, cur: usize, m: &Routed| -> usize {
        let router = g.external();
        let mut logits = g.op(Kind::Fresh, m.router, ROUTER, &[router, cur]);
        let probs = if oss {
            // A biased router, its logits ranked as they are.
            let b = g.external();
            logits = g.op(Kind::InPlace, m.router, ROUTER, &[logits, b]);
            logits
        } else {
            // Softmax, or Llama 4's sigmoid.
            g.op(Kind::InPlace, m.router, ROUTER, &[logits])
        };
        // Llama 4 ranks the raw logits, GLM the scores plus a correction bias, the others what
        // the router made of them.
        let ranked = if llama4 {
            logits
        } else if glm {
            let b = g.external();
            g.op(Kind::InPlace, m.router, ROUTER, &[probs, b])
        } else {
            probs
        };
        let ranked = match m.groups {
            None => ranked,
            Some(_) => {
                // Group-limited routing: each group scored by its best two experts, the best
                // `used` groups kept, every other expert's score set to −∞.
                let by_group = g.view(ranked, OTHER);
                let order = g.op(Kind::Fresh, m.router, ROUTER_IDS, &[by_group]);
                let best_two = g.view(order, OTHER);
                let as_rows = g.view(by_group, OTHER);
                let picked = g.op(Kind::Fresh, m.group_pairs, OTHER, &[as_rows, best_two]);
                let picked = g.view(picked, OTHER);
                let group_scores = g.op(Kind::Fresh, m.group_scores, OTHER, &[picked]);
                let group_scores = g.view(group_scores, OTHER);
                let group_order = g.op(Kind::Fresh, m.group_scores, ROUTER_IDS, &[group_scores]);
                let kept = g.view(group_order, OTHER);
                let kept_scores = g.op(Kind::Fresh, m.kept_scores, OTHER, &[by_group, kept]);
                let masked = g.op(Kind::InPlace, m.router, ROUTER, &[by_group]);
                let merged = g.set_rows(masked, kept_scores, kept);
                g.view(merged, OTHER)
            }
        };
        let order = g.op(Kind::Fresh, m.router, ROUTER_IDS, &[ranked]);
        let selected = g.view(order, OTHER);
        let probs_3d = g.view(probs, OTHER);
        let weights = g.op(Kind::Fresh, m.weights, WEIGHTS, &[probs_3d, selected]);
        let weights_2d = g.view(weights, WEIGHTS);
        let weights = if llama4 || unnormalised {
            weights
        } else if oss {
            // Softmax over the selected experts' logits.
            g.op(Kind::InPlace, m.weights, WEIGHTS, &[weights_2d])
        } else {
            // Normalised to sum to one.
            let sum = g.op(Kind::Fresh, m.sums, SUMS, &[weights_2d]);
            let sum = g.op(Kind::InPlace, m.sums, SUMS, &[sum]);
            g.op(Kind::InPlace, m.weights, WEIGHTS, &[weights_2d, sum])
        };
        let mut weights = if llama4 || unnormalised {
            weights
        } else {
            g.view(weights, OTHER)
        };
        if m.scaled {
            weights = g.op(Kind::InPlace, m.weights, WEIGHTS, &[weights]);
        }
        g.expand(weights);
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
        }
        // `mul_mat_id`: an expert's weights applied to each token's selected experts.
        let per_expert = |g: &mut Graph, bytes: u64, layout: u64, x: usize| {
            let w = g.external();
            let y = g.op(Kind::Fresh, bytes, layout, &[w, x, selected]);
            if !oss {
                return y;
            }
            // Each expert's bias, added by expert id.
            let b = g.external();
            g.op(Kind::InPlace, bytes, layout, &[y, b, selected])
        };
        // With fused experts, gate and up are one tensor of twice the width.
        let up = per_expert(g, m.gate_up, EXPERT_FFN, cur_3d);
        let act = if plain {
            // Squared ReLU, in place.
            let relu = g.op(Kind::InPlace, m.expert_ffn, EXPERT_FFN, &[up]);
            g.op(Kind::InPlace, m.expert_ffn, EXPERT_FFN, &[relu])
        } else if arch.fused_gate_up_exps {
            let gate = g.view(up, EXPERT_FFN);
            let up = g.view(up, EXPERT_FFN);
            g.op(Kind::Fresh, m.expert_ffn, EXPERT_FFN, &[gate, up])
        } else {
            let gate = per_expert(g, m.expert_ffn, EXPERT_FFN, cur_3d);
            g.op(Kind::Fresh, m.expert_ffn, EXPERT_FFN, &[gate, up])
        };
        let mut out = per_expert(g, m.expert_out, EXPERT_OUT, act);
        if !llama4 {
            out = g.op(Kind::InPlace, m.expert_out, EXPERT_OUT, &[out, weights]);
        }
        g.expand(out);
        let each: Vec<usize> = (0..m.k).map(|_| g.view(out, MODEL)).collect();
        for &e in &each {
            g.expand(e);
        }
        let mut sum = each[0];
        for &e in &each[1..] {
            sum = g.op(Kind::InPlace, model, MODEL, &[sum, e]);
            g.expand(sum);
        }
        if m.k == 1 {
            sum = g.op(Kind::Fresh, model, MODEL, &[sum]);
        }
        sum
    };
    // A feed-forward block over `cur`: gated (or Phi-3's fused gate/up, or squared ReLU), or
    // routed experts with any shared expert beside them.
    let ffn_block = |g: &mut Graph, cur: usize, layer: u64| -> Option<usize> {
        let dense = |g: &mut Graph, width: u64| {
            if falcon || neox {
                // GELU between the projections, each biased in GPT-NeoX and StarCoder2.
                let bias = |g: &mut Graph, x: usize, bytes: u64, layout: u64| {
                    if !neox {
                        return x;
                    }
                    let b = g.external();
                    g.op(Kind::InPlace, bytes, layout, &[x, b])
                };
                let (wu, wd) = (g.external(), g.external());
                let up = g.op(Kind::Fresh, width, FFN, &[wu, cur]);
                let up = bias(g, up, width, FFN);
                let act = g.op(Kind::InPlace, width, FFN, &[up]);
                let down = g.op(Kind::Fresh, model, MODEL, &[wd, act]);
                return bias(g, down, model, MODEL);
            }
            if plain {
                let (wu, wd) = (g.external(), g.external());
                let up = g.op(Kind::Fresh, width, FFN, &[wu, cur]);
                let relu = g.op(Kind::InPlace, width, FFN, &[up]);
                let act = g.op(Kind::InPlace, width, FFN, &[relu]);
                return g.op(Kind::Fresh, model, MODEL, &[wd, act]);
            }
            let (wg, wu, wd) = (g.external(), g.external(), g.external());
            let gate = g.op(Kind::Fresh, width, FFN, &[wg, cur]);
            let up = g.op(Kind::Fresh, width, FFN, &[wu, cur]);
            let act = g.op(Kind::Fresh, width, FFN, &[gate, up]);
            g.op(Kind::Fresh, model, MODEL, &[wd, act])
        };
        Some(match moe.as_ref().filter(|_| arch.is_moe_layer(layer)) {
            None if fused => {
                let (wu, wd) = (g.external(), g.external());
                let gate_up = g.op(Kind::Fresh, ffn.checked_mul(2)?, OTHER, &[wu, cur]);
                let act = g.op(Kind::Fresh, ffn, FFN, &[gate_up]);
                g.op(Kind::Fresh, model, MODEL, &[wd, act])
            }
            None => dense(g, ffn),
            Some(m) if m.shared > 0 => {
                let routed = experts(g, cur, m);
                let mut shared = dense(g, m.shared);
                if m.shared_gate {
                    let w = g.external();
                    let x = g.op(Kind::Fresh, width(1)?, SUMS, &[w, cur]);
                    let gate = if qwen2_moe {
                        let silu = g.op(Kind::InPlace, width(1)?, SUMS, &[x]);
                        g.op(Kind::InPlace, width(1)?, SUMS, &[silu, x])
                    } else {
                        g.op(Kind::InPlace, width(1)?, SUMS, &[x])
                    };
                    shared = g.op(Kind::InPlace, model, MODEL, &[shared, gate]);
                }
                g.op(Kind::InPlace, model, MODEL, &[routed, shared])
            }
            Some(m) => experts(g, cur, m),
        })
    };
    let mut attn_scale = None;
    // The transposed V cache's per-element indices when they are wider than a grouped V
    // (DeepSeek's unsplit attn_kv_b caches every head's V).
    let mut full_v_idxs = None;
    let mut inp = embd;
    // Gemma's embeddings are scaled by √width, Granite's by its embedding multiplier.
    if gemma || arch.granite_scales.embedding {
        inp = g.op(Kind::InPlace, model, MODEL, &[embd]);
    }
    for layer in 0..arch.num_layers {
        let CacheInputs {
            k_idxs,
            v_idxs,
            mask: kq_mask,
            scores,
        } = if arch.is_sliding_layer(layer) {
            swa
        } else {
            full
        };
        let residual = inp;
        let normed = norm(&mut g, inp, model, MODEL);
        // Falcon-40B's layout attends on a second norm of the layer's input.
        let cur = if falcon && arch.norms_per_layer == 2 {
            norm(&mut g, inp, model, MODEL)
        } else {
            normed
        };
        let mixer = recurrent
            .zip(state_inputs)
            .filter(|_| arch.is_recurrent_layer(layer));
        let mut cur = if let Some((s, inputs)) = mixer.filter(|_| !parallel) {
            if s.kind == SsmKind::GatedDeltaNet {
                let shape = (model, arch.joint_qkvz);
                delta_net(&mut g, cur, &s, inputs, tokens, shape)?
            } else {
                mamba(&mut g, cur, &s, inputs, tokens, model)?
            }
        } else if one_block && !arch.has_attention(layer) {
            ffn_block(&mut g, cur, layer)?
        } else {
            let attended = if let Some(d) = mla {
                // DeepSeek's latent attention (`deepseek2` builder). Q, optionally through its own
                // low-rank projection and norm; the compressed K/V latent and the shared RoPE key
                // from one projection.
                let heads = arch.num_heads;
                let q_in = match d.q_lora {
                    Some(rank) => {
                        let wa = g.external();
                        let a = g.op(Kind::Fresh, width(rank)?, OTHER, &[wa, cur]);
                        norm(&mut g, a, width(rank)?, OTHER)
                    }
                    None => cur,
                };
                let wq = g.external();
                let q = g.op(
                    Kind::Fresh,
                    width(heads.checked_mul(d.nope + d.rope)?)?,
                    OTHER,
                    &[wq, q_in],
                );
                let q3 = g.view(q, OTHER);
                let w_kv_a = g.external();
                let kv_pe = g.op(
                    Kind::Fresh,
                    width(d.kv_lora + d.rope)?,
                    OTHER,
                    &[w_kv_a, cur],
                );
                let kv_cmpr = g.view(kv_pe, OTHER);
                let k_pe = g.view(kv_pe, OTHER);
                let k_pe = g.op(Kind::InPlace, width(d.rope)?, OTHER, &[k_pe, pos]);
                let kv_cmpr = norm(&mut g, kv_cmpr, width(d.kv_lora)?, LATENT);
                let (k_cache, v_cache) = (g.external(), g.external());
                if d.absorbed {
                    // The query's no-RoPE part absorbed into the latent per head, then the latent
                    // and RoPE parts side by side; the cache holds K only and V is a view of it.
                    let q_nope = g.view(q3, OTHER);
                    let q_pe = g.view(q3, OTHER);
                    let q_pe = g.op(
                        Kind::InPlace,
                        width(heads.checked_mul(d.rope)?)?,
                        OTHER,
                        &[q_pe, pos],
                    );
                    let q_nope = g.view(q_nope, OTHER);
                    let w_kb = g.external();
                    let absorbed = g.op(
                        Kind::Fresh,
                        width(heads.checked_mul(d.kv_lora)?)?,
                        OTHER,
                        &[w_kb, q_nope],
                    );
                    let absorbed = g.view(absorbed, OTHER);
                    let q = g.op(
                        Kind::Fresh,
                        width(heads.checked_mul(d.kv_lora + d.rope)?)?,
                        OTHER,
                        &[absorbed, q_pe],
                    );
                    let latent = g.view(kv_cmpr, OTHER);
                    let k = g.op(
                        Kind::Fresh,
                        width(d.kv_lora + d.rope)?,
                        OTHER,
                        &[latent, k_pe],
                    );
                    g.expand(q);
                    g.expand(latent);
                    g.expand(k);
                    let k_rows = g.view(k, OTHER);
                    let stored = g.set_rows(k_cache, k_rows, k_idxs);
                    g.expand(stored);
                    let k_all = g.view(k_cache, OTHER);
                    let v_all = g.view(k_all, OTHER);
                    let q4 = g.view(q, OTHER);
                    let qp = g.view(q4, OTHER);
                    let kp = g.view(k_all, OTHER);
                    let vp = g.view(v_all, OTHER);
                    let w_vb = g.external();
                    let per_head_v = width(heads.checked_mul(d.v)?)?;
                    let latent_out = width(heads.checked_mul(d.kv_lora)?)?;
                    if flash_attention {
                        let o = g.op(Kind::Fresh, latent_out, OTHER, &[qp, kp, vp, kq_mask]);
                        let o = g.view(o, OTHER);
                        let o = g.op(Kind::Fresh, per_head_v, OTHER, &[w_vb, o]);
                        let o = g.view(o, OTHER);
                        let o = g.op(Kind::Fresh, per_head_v, OTHER, &[o]);
                        g.view(o, QUERY)
                    } else {
                        // V is a view of the (untransposed) cache: copied out transposed, in the
                        // cache's own type.
                        let vt = g.view(vp, OTHER);
                        let v_copy = g.op(
                            Kind::Fresh,
                            sat(kv_type.bytes_for(u128::from(kv_cells) * u128::from(d.kv_lora))),
                            OTHER,
                            &[vt],
                        );
                        let kq = g.op(Kind::Fresh, scores, SCORES, &[kp, qp]);
                        let kq = g.op(Kind::InPlace, scores, SCORES, &[kq, kq_mask]);
                        let kqv = g.op(Kind::Fresh, latent_out, OTHER, &[v_copy, kq]);
                        let kqv = g.op(Kind::Fresh, per_head_v, OTHER, &[w_vb, kqv]);
                        let permuted = g.view(kqv, OTHER);
                        g.op(Kind::Fresh, per_head_v, QUERY, &[permuted])
                    }
                } else {
                    // An unsplit attn_kv_b: full per-head K and V decompressed and cached.
                    let k_dim = heads.checked_mul(d.nope + d.rope)?;
                    let v_dim = heads.checked_mul(d.v)?;
                    let w_kv_b = g.external();
                    let kv_full = g.op(
                        Kind::Fresh,
                        width(heads.checked_mul(d.nope + d.v)?)?,
                        OTHER,
                        &[w_kv_b, kv_cmpr],
                    );
                    let k_nope = g.view(kv_full, OTHER);
                    let v_view = g.view(kv_full, OTHER);
                    let v = g.op(Kind::Fresh, width(v_dim)?, OTHER, &[v_view]);
                    let q = g.op(Kind::InPlace, width(k_dim)?, OTHER, &[q3, pos]);
                    let k_pe_all = g.op(
                        Kind::Fresh,
                        width(heads.checked_mul(d.rope)?)?,
                        OTHER,
                        &[k_pe],
                    );
                    let k = g.op(Kind::Fresh, width(k_dim)?, OTHER, &[k_nope, k_pe_all]);
                    let v_idxs = if flash_attention {
                        v_idxs
                    } else {
                        *full_v_idxs.get_or_insert_with(|| {
                            g.input(v_dim.saturating_mul(tokens).saturating_mul(8))
                        })
                    };
                    let step = AttentionStep {
                        k_idxs,
                        v_idxs,
                        mask: kq_mask,
                        scores,
                        out: width(v_dim)?,
                        v_copy: None,
                        flash_attention,
                    };
                    attend(&mut g, [q, k, v], (k_cache, v_cache), &step)
                }
            } else {
                let project = |g: &mut Graph, bytes: u64, layout: u64| {
                    let w = g.external();
                    let mut t = g.op(Kind::Fresh, bytes, layout, &[w, cur]);
                    if qkv_bias {
                        let b = g.external();
                        t = g.op(Kind::InPlace, bytes, layout, &[t, b]);
                    }
                    t
                };
                // Qwen3-Next's query projection also holds the output gate.
                let mut q_and_gate = None;
                let (mut q, mut k, v) = if gated_attention {
                    let both = project(&mut g, query.checked_mul(2)?, OTHER);
                    q_and_gate = Some(both);
                    let q = g.view(both, OTHER);
                    let k = project(&mut g, kv, KV);
                    let v = project(&mut g, kv, KV);
                    (g.view(q, Q3), g.view(k, K3), g.view(v, OTHER))
                } else if fused_qkv {
                    let qkv = project(
                        &mut g,
                        width(q_dim.checked_add(kv_dim.checked_mul(2)?)?)?,
                        OTHER,
                    );
                    (g.view(qkv, Q3), g.view(qkv, K3), g.view(qkv, OTHER))
                } else {
                    let q = project(&mut g, query, QUERY);
                    let k = project(&mut g, kv, KV);
                    let v = project(&mut g, kv, KV);
                    (g.view(q, Q3), g.view(k, K3), g.view(v, OTHER))
                };
                if qk_norm {
                    q = norm(&mut g, q, query, Q3);
                    k = norm(&mut g, k, kv, K3);
                }
                // Command R7B's global layers, Jamba's and Nemotron-H's skip RoPE; Llama 4's global
                // layers skip it too and scale the query by a per-token temperature instead.
                let global = !arch.is_sliding_layer(layer);
                let (mut q, k) = if rope_free || (cohere && global) {
                    (q, k)
                } else if llama4 && global {
                    let scale = *attn_scale.get_or_insert_with(|| g.input(ids));
                    (g.op(Kind::InPlace, query, Q3, &[q, scale]), k)
                } else {
                    (
                        g.op(Kind::InPlace, query, Q3, &[q, pos]),
                        g.op(Kind::InPlace, kv, K3, &[k, pos]),
                    )
                };
                // Llama 4's L2 norms follow RoPE.
                let k = if llama4 && !global {
                    q = g.op(Kind::InPlace, query, Q3, &[q]);
                    g.op(Kind::InPlace, kv, K3, &[k])
                } else {
                    k
                };
                if gemma || fused {
                    q = g.op(Kind::InPlace, query, Q3, &[q]);
                }
                let step = AttentionStep {
                    k_idxs,
                    v_idxs,
                    mask: kq_mask,
                    scores,
                    out: query,
                    // A view into the fused projection is not contiguous: without flash attention
                    // (a transposed V cache) it is copied out first.
                    v_copy: fused_qkv.then_some(kv),
                    flash_attention,
                };
                let caches = (g.external(), g.external());
                let attended = attend(&mut g, [q, k, v], caches, &step);
                g.expand(attended);
                match q_and_gate {
                    Some(both) => {
                        let gate = g.view(both, OTHER);
                        let gate = g.op(Kind::Fresh, query, QUERY, &[gate]);
                        let gate = g.op(Kind::InPlace, query, QUERY, &[gate]);
                        g.op(Kind::InPlace, query, QUERY, &[attended, gate])
                    }
                    None => attended,
                }
            };
            g.expand(attended);
            let wo = g.external();
            let mut cur = g.op(Kind::Fresh, model, MODEL, &[wo, attended]);
            if o_bias {
                let b = g.external();
                cur = g.op(Kind::InPlace, model, MODEL, &[cur, b]);
            }
            cur
        };
        if cohere || falcon || (neox && arch.parallel_attention) {
            // The feed-forward block beside attention: on the same normed input (Command R7B,
            // Falcon) or on a norm of its own of the gathered input (GPT-NeoX's parallel
            // residual). The layer's output is that block's plus the residual and attention's
            // (Falcon adds attention's first, the others the residual), so attention's output
            // projection runs after the feed-forward block.
            let last = layer + 1 == arch.num_layers;
            let rows = |g: &mut Graph, x: usize| {
                if last {
                    g.op(Kind::Fresh, model, MODEL, &[x, out_ids])
                } else {
                    x
                }
            };
            let attn_out = rows(&mut g, cur);
            let residual = rows(&mut g, residual);
            let normed = if neox {
                norm(&mut g, residual, model, MODEL)
            } else {
                rows(&mut g, normed)
            };
            let out = ffn_block(&mut g, normed, layer)?;
            let (first, second) = if falcon {
                (attn_out, residual)
            } else {
                (residual, attn_out)
            };
            let sum = g.op(Kind::InPlace, model, MODEL, &[out, first]);
            inp = g.op(Kind::InPlace, model, MODEL, &[sum, second]);
            continue;
        }
        if let Some((s, inputs)) = mixer.filter(|_| parallel) {
            let normed = norm(&mut g, residual, model, MODEL);
            let mixed = mamba(&mut g, normed, &s, inputs, tokens, model)?;
            cur = g.op(Kind::InPlace, model, MODEL, &[cur, mixed]);
        }
        let last = layer + 1 == arch.num_layers;
        let mut residual = residual;
        if last && !oss && !nextn && !parallel {
            cur = g.op(Kind::Fresh, model, MODEL, &[cur, out_ids]);
            residual = g.op(Kind::Fresh, model, MODEL, &[residual, out_ids]);
        }
        // Granite scales each block's output before its residual add.
        if arch.granite_scales.residual {
            cur = g.op(Kind::InPlace, model, MODEL, &[cur]);
        }
        let post_norms = gemma && arch.norms_per_layer == 4;
        if post_norms {
            cur = norm(&mut g, cur, model, MODEL);
        }
        let mut ffn_inp = if residual_first {
            g.op(Kind::InPlace, model, MODEL, &[residual, cur])
        } else {
            g.op(Kind::InPlace, model, MODEL, &[cur, residual])
        };
        if one_block {
            inp = ffn_inp;
            continue;
        }
        if last && parallel {
            ffn_inp = g.op(Kind::Fresh, model, MODEL, &[ffn_inp, out_ids]);
        }
        let cur = norm(&mut g, ffn_inp, model, MODEL);
        let out = ffn_block(&mut g, cur, layer)?;
        let out = if post_norms {
            norm(&mut g, out, model, MODEL)
        } else if arch.granite_scales.residual {
            g.op(Kind::InPlace, model, MODEL, &[out])
        } else {
            out
        };
        // Phi-3 adds the residual first, so the add may take the residual's memory.
        inp = if fused || residual_first {
            g.op(Kind::InPlace, model, MODEL, &[ffn_inp, out])
        } else {
            g.op(Kind::InPlace, model, MODEL, &[out, ffn_inp])
        };
    }
    if oss {
        // The last hidden state is an output of its own (for multi-token prediction), and the
        // output rows are gathered after the last layer.
        g.tensors[inp].output = true;
        inp = g.op(Kind::Fresh, model, MODEL, &[inp, out_ids]);
    }
    let mut result_norm = norm(&mut g, inp, model, MODEL);
    if nextn {
        g.tensors[result_norm].output = true;
        result_norm = g.op(Kind::Fresh, model, MODEL, &[result_norm, out_ids]);
    }
    g.tensors[result_norm].output = true;
    let lm_head = g.external();
    let mut result = g.op(Kind::Fresh, logits, OTHER, &[lm_head, result_norm]);
    if arch.granite_scales.logits {
        result = g.op(Kind::InPlace, logits, OTHER, &[result]);
    }
    g.tensors[result].output = true;
    g.expand(result);
    Some(reserve(&g))
}

#[cfg(test)]
mod tests;
