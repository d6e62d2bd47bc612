//! Gemma 4's assistant (llama.cpp's `gemma4-assistant` builder, a draft beside a Gemma 4
//! target): the batch's tokens looked up in the target's embeddings (as wide as the target),
//! scaled, set beside the target's hidden states (an input as wide) and projected down to the
//! assistant's width; then Gemma 4's layers, each attending over the target's cache with a
//! query of its own; the last layer's rows gathered after attention; then the final norm, the
//! logits and the projection back to the target's width.

use super::graph::*;
use super::{layer, norm, Ctx, Lazy, Shape, OUTPUT_NORM};

/// The assistant's graph for `shape`, whose target is `backbone` wide.
pub(super) fn whole(shape: Shape<'_>, backbone: u64) -> Option<Graph> {
    let arch = shape.arch;
    let mut g = Graph::default();
    let (c, _) = layer::inputs(&mut g, shape)?;
    // The token path `inputs` starts (the assistant's own embeddings) is not this graph's:
    // only what the ops below read joins it.
    g.nodes.clear();
    g.leafs.clear();
    g.seen.iter_mut().for_each(|s| *s = false);
    g.part = Part::Input;
    g.rows = c.tokens;
    let wide = c.width(backbone)?;
    let tokens = g.input(c.ids);
    let hidden = g.input(wide);
    let table = g.table("token_embd.weight", arch.vocab_size, backbone);
    let x = g.op(Kind::Fresh, wide, OTHER, &[table, tokens]);
    let x = g.op(Kind::InPlace, wide, OTHER, &[x]);
    g.tag(x, Op::Scale);
    let xh = g.op(
        Kind::Fresh,
        c.width(backbone.checked_mul(2)?)?,
        OTHER,
        &[x, hidden],
    );
    // The projection in is the first layer's weight.
    g.part = Part::Layer(0);
    let w = g.matrix(
        "nextn.pre_projection.weight",
        backbone * 2,
        arch.hidden_size,
    );
    let mut inp = g.op(Kind::Fresh, c.model, MODEL, &[w, xh]);
    let full_arch = super::gemma4::full_layers(arch);
    let full = match &full_arch {
        Some(a) => Some(super::gemma4::full_ctx(&c, a)?),
        None => None,
    };
    let mut lazy = Lazy::default();
    for l in 0..arch.num_layers {
        g.part = Part::Layer(l);
        let c = match &full {
            Some(f) if !arch.is_sliding_layer(l) => f,
            _ => &c,
        };
        inp = layer::layer(c, &mut g, &mut lazy, inp, l)?;
    }
    g.part = Part::Output;
    output(&c.gathered()?, &mut g, inp, backbone)?;
    Some(g)
}

/// The final norm over the gathered rows, the logits, and the hidden state projected back to
/// the target's width (`h_nextn`), each expanded into the graph in that order.
fn output(c: &Ctx<'_>, g: &mut Graph, inp: usize, backbone: u64) -> Option<()> {
    let h = c.arch.hidden_size;
    g.rows = c.tokens;
    let result_norm = norm(c, g, inp, (c.model, MODEL), (OUTPUT_NORM, h));
    let lm_head = g.matrix("output.weight", h, c.arch.vocab_size);
    let logits = g.op(Kind::Fresh, c.logits, OTHER, &[lm_head, result_norm]);
    g.tensors[logits].output = true;
    g.expand(logits);
    let w = g.matrix("nextn.post_projection.weight", h, backbone);
    let next = g.op(Kind::Fresh, c.width(backbone)?, OTHER, &[w, result_norm]);
    g.tensors[next].output = true;
    g.expand(next);
    Some(())
}
