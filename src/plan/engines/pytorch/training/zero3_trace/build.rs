//! The step's trace for the coordinator replay: the model's modules, nested as
//! transformers builds them, and the fetch and release events DeepSpeed's hooks make over
//! forward, backward and checkpointing's recomputation.

use super::super::{Layout, Shape};

/// The shape of a dense model, as its modules hold weights.
#[derive(Debug, Clone, Copy)]
pub(in super::super) struct DenseLayout {
    pub kind: LayerKind,
    pub layers: u128,
    pub hidden: u128,
    /// Query projection rows (heads × head dimension).
    pub q: u128,
    /// Key and value projection rows each.
    pub kv: u128,
    pub head_dim: u128,
    pub intermediate: u128,
    pub vocab: u128,
    pub tied: bool,
    /// Calls of the rotary embedding each forward ([`Shape::rotary_tables`]).
    pub rotary_tables: u128,
    pub qkv_bias: bool,
    pub o_bias: bool,
    pub qk_norm: bool,
}

impl DenseLayout {
    /// The layout of a dense `Shape` whose modules the trace knows: Llama's, Phi-3's fused
    /// one, Gemma's. `None` for experts, latent attention and gpt-oss's layer.
    pub(in super::super) fn of(s: &Shape) -> Option<DenseLayout> {
        let kind = match (s.layout, s.fused, s.moe) {
            _ if s.mla.is_some() => return None,
            // Experts in every layer, none shared.
            (Layout::Llama, false, Some(m))
                if m.layers == s.layers && m.shared_intermediate == 0 =>
            {
                LayerKind::Routed {
                    experts: m.experts,
                    intermediate: m.intermediate,
                    router_first: m.router_first,
                }
            }
            (_, _, Some(_)) => return None,
            (Layout::Llama, false, None) => LayerKind::Llama,
            (Layout::Llama, true, None) => LayerKind::Fused,
            (Layout::Gemma2 | Layout::Gemma3, false, None) => LayerKind::Gemma,
            _ => return None,
        };
        Some(DenseLayout {
            kind,
            layers: s.layers,
            hidden: s.hidden,
            q: s.heads * s.head_dim,
            kv: s.kv_heads * s.head_dim,
            head_dim: s.head_dim,
            intermediate: s.intermediate,
            vocab: s.vocab,
            tied: s.tied,
            rotary_tables: s.rotary_tables,
            qkv_bias: s.qkv_bias,
            o_bias: s.o_bias,
            qk_norm: s.qk_norm || s.layout == Layout::Gemma3,
        })
    }
}

/// Where in backward a gradient is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in super::super) enum HookAt {
    /// The output head's and the final norm's backward.
    Head,
    /// A decoder layer's, by index.
    Layer(u128),
    /// The embedding's (a tied head's gradient summed into it).
    Embedding,
}

#[derive(Clone, Copy)]
pub(super) enum Event {
    Fetch(usize),
    Release(usize),
}

/// The modules (each its weights as `(id, elements)`) and the step's fetch and release
/// events, as transformers' Llama-layout modules and DeepSpeed's hooks make them.
pub(super) struct Trace {
    pub(super) modules: Vec<Vec<(usize, u128)>>,
    pub(super) events: Vec<Event>,
    /// Index of the final norm's forward fetch, of the head's forward fetch, of forward's last
    /// event, of the head's backward fetch, and of the embedding's backward fetch.
    pub(super) marks: [usize; 5],
    /// Each layer's backward events, `[start, end)`, by layer index.
    pub(super) layer_spans: Vec<(usize, usize)>,
    /// Backward's gradient hooks, in order ([`Builder::hooks`]).
    pub(super) hooks: Vec<(usize, HookAt, usize)>,
    /// The weights of each module and every module below it: what the coordinator's reuse
    /// window counts when it releases a leaf.
    pub(super) recursive: Vec<Vec<(usize, u128)>>,
    /// Each module is a ZeRO-3 leaf: it owns none of the weights it fetches.
    pub(super) leaf: Vec<bool>,
}

/// How a layer's modules are nested and called, where families differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in super::super) enum LayerKind {
    /// Llama's: a norm, attention (q, its norm, k, its norm, v, o), a norm, the MLP (gate,
    /// activation, up, down).
    Llama,
    /// Phi-3's: fused q/k/v and gate/up projections, a dropout after attention and one after
    /// the MLP.
    Fused,
    /// Gemma's: attention's per-head norms after v, a norm after attention, one before and one
    /// after the MLP.
    Gemma,
    /// Llama's attention, then routed experts (Mixtral's, Qwen3-MoE's sparse block): DeepSpeed
    /// hooks the block as one module, its router and stacked experts fetched together.
    Routed {
        experts: u128,
        intermediate: u128,
        router_first: bool,
    },
}

/// One of a layer's parts: a module called alone, or a container and the modules it calls.
enum Part {
    Leaf(usize),
    Group {
        module: usize,
        leaves: Vec<usize>,
        /// Its post-backward hook fires (the MLP's, whose input is positional; attention is
        /// called with keyword arguments, which DeepSpeed's hooks do not see).
        released_in_backward: bool,
    },
}

/// Module handles of one decoder layer.
struct LayerModules {
    layer: usize,
    parts: Vec<Part>,
    /// The last module whose forward saves a tensor for backward: checkpointing's
    /// recomputation stops there (torch's non-reentrant checkpoint stops once the last saved
    /// tensor is made again), and backward's hooks reach it before recomputing.
    last_saving: usize,
}

struct Builder {
    modules: Vec<Vec<(usize, u128)>>,
    params: usize,
    events: Vec<Event>,
    /// Backward's gradient hooks: the module whose weights' gradients are ready, where, and
    /// the event after which they are (its release follows).
    hooks: Vec<(usize, HookAt, usize)>,
    /// Where backward is, for the hooks.
    at: HookAt,
    /// Each module's parent, and the parent new modules get.
    parents: Vec<Option<usize>>,
    parent: Option<usize>,
    /// Each module is a ZeRO-3 leaf: its submodules' weights fetched with it, none its own.
    leaf: Vec<bool>,
}

impl Builder {
    fn param(&mut self, elements: u128) -> (usize, u128) {
        self.params += 1;
        (self.params - 1, elements)
    }

    fn module(&mut self, weights: &[u128]) -> usize {
        let params = weights.iter().map(|&n| self.param(n)).collect();
        self.push(params, false)
    }

    fn push(&mut self, params: Vec<(usize, u128)>, leaf: bool) -> usize {
        self.modules.push(params);
        self.parents.push(self.parent);
        self.leaf.push(leaf);
        self.modules.len() - 1
    }

    /// Runs `f` with new modules made under `parent`.
    fn under<T>(&mut self, parent: usize, f: impl FnOnce(&mut Builder) -> T) -> T {
        let outer = self.parent.replace(parent);
        let made = f(self);
        self.parent = outer;
        made
    }

    fn fetch(&mut self, m: usize) {
        self.events.push(Event::Fetch(m));
    }

    fn release(&mut self, m: usize) {
        self.events.push(Event::Release(m));
    }

    fn both(&mut self, m: usize) {
        self.fetch(m);
        self.release(m);
    }

    /// A module's backward: its weights' gradients ready before its release.
    fn backward(&mut self, m: usize) {
        self.fetch(m);
        self.hook(m);
        self.release(m);
    }

    fn hook(&mut self, m: usize) {
        if !self.modules[m].is_empty() {
            self.hooks.push((m, self.at, self.events.len() - 1));
        }
    }

    fn layer(&mut self, d: &DenseLayout) -> LayerModules {
        let layer = self.module(&[]);
        let outer = self.parent.replace(layer);
        let made = self.layer_within(d, layer);
        self.parent = outer;
        made
    }

    /// A layer's modules, made under the layer's own.
    fn layer_within(&mut self, d: &DenseLayout, layer: usize) -> LayerModules {
        let input_norm = self.module(&[d.hidden]);
        let attn = self.module(&[]);
        let attention = self.under(attn, |b| b.attention(d));
        let mut parts = vec![
            Part::Leaf(input_norm),
            Part::Group {
                module: attn,
                leaves: attention,
                released_in_backward: false,
            },
        ];
        let last_saving = self.feed_forward(d, &mut parts);
        LayerModules {
            layer,
            parts,
            last_saving,
        }
    }

    /// Attention's projections and per-head norms, in the order they run.
    fn attention(&mut self, d: &DenseLayout) -> Vec<usize> {
        let h = d.hidden;
        let with_bias = |w: u128, b: u128, on: bool| if on { vec![w, b] } else { vec![w] };
        let mut attention = Vec::new();
        if d.kind == LayerKind::Fused {
            let rows = d.q + 2 * d.kv;
            attention.push(self.module(&with_bias(rows * h, rows, d.qkv_bias)));
        } else {
            let q = self.module(&with_bias(d.q * h, d.q, d.qkv_bias));
            let k = self.module(&with_bias(d.kv * h, d.kv, d.qkv_bias));
            let v = self.module(&with_bias(d.kv * h, d.kv, d.qkv_bias));
            let norms = if d.qk_norm {
                [self.module(&[d.head_dim]), self.module(&[d.head_dim])].to_vec()
            } else {
                Vec::new()
            };
            attention = match (d.kind, norms.as_slice()) {
                (LayerKind::Gemma, _) => [&[q, k, v][..], &norms].concat(),
                (_, [qn, kn]) => vec![q, *qn, k, *kn, v],
                _ => vec![q, k, v],
            };
        }
        attention.push(self.module(&with_bias(h * d.q, h, d.o_bias)));
        attention
    }

    /// What follows attention: the norms, dropouts and MLP (or the experts' block) in the
    /// order they run, pushed to `parts`; the last module that saves a tensor.
    fn feed_forward(&mut self, d: &DenseLayout, parts: &mut Vec<Part>) -> usize {
        let h = d.hidden;
        let i = d.intermediate;
        match d.kind {
            LayerKind::Routed {
                experts,
                intermediate,
                router_first,
            } => {
                parts.push(Part::Leaf(self.module(&[h])));
                let stacks = [experts * 2 * intermediate * h, experts * h * intermediate];
                let router = experts * h;
                let sizes = if router_first {
                    [router, stacks[0], stacks[1]]
                } else {
                    [stacks[0], stacks[1], router]
                };
                let params = sizes.iter().map(|&n| self.param(n)).collect();
                let block = self.push(params, true);
                parts.push(Part::Leaf(block));
                block
            }
            LayerKind::Llama | LayerKind::Gemma => {
                if d.kind == LayerKind::Gemma {
                    parts.push(Part::Leaf(self.module(&[h])));
                }
                parts.push(Part::Leaf(self.module(&[h])));
                let mlp = self.module(&[]);
                let leaves = self.under(mlp, |b| {
                    vec![
                        b.module(&[i * h]),
                        b.module(&[]),
                        b.module(&[i * h]),
                        b.module(&[h * i]),
                    ]
                });
                let down = leaves[3];
                parts.push(Part::Group {
                    module: mlp,
                    leaves,
                    released_in_backward: true,
                });
                if d.kind == LayerKind::Llama {
                    return down;
                }
                // Gemma's norm after the MLP, which saves its input.
                let norm = self.module(&[h]);
                parts.push(Part::Leaf(norm));
                norm
            }
            LayerKind::Fused => {
                parts.push(Part::Leaf(self.module(&[])));
                parts.push(Part::Leaf(self.module(&[h])));
                let mlp = self.module(&[]);
                let leaves = self.under(mlp, |b| {
                    vec![b.module(&[2 * i * h]), b.module(&[]), b.module(&[h * i])]
                });
                let down = leaves[2];
                parts.push(Part::Group {
                    module: mlp,
                    leaves,
                    released_in_backward: true,
                });
                // Phi-3's dropouts (no probability: nothing saved).
                parts.push(Part::Leaf(self.module(&[])));
                down
            }
        }
    }

    /// A layer's forward, its own hooks framing it.
    fn layer_forward(&mut self, l: &LayerModules) {
        self.fetch(l.layer);
        for part in &l.parts {
            match part {
                Part::Leaf(m) => self.both(*m),
                Part::Group { module, leaves, .. } => {
                    self.fetch(*module);
                    for &m in leaves {
                        self.both(m);
                    }
                    self.release(*module);
                }
            }
        }
        self.release(l.layer);
    }

    /// Checkpointing's recomputation of a layer: its forward without the layer's own hooks,
    /// stopped at the last module that saves a tensor, once that module has fetched.
    fn recompute(&mut self, l: &LayerModules) {
        let from = self.events.len();
        self.layer_forward(l);
        let stop = self.events[from..]
            .iter()
            .position(|e| matches!(e, Event::Fetch(m) if *m == l.last_saving))
            .map_or(self.events.len(), |i| from + i + 1);
        self.events.truncate(stop);
        self.events.remove(from);
    }

    /// A layer's backward: its modules in reverse, recomputed (under checkpointing) once
    /// backward reaches the last module that saves a tensor.
    fn layer_backward(&mut self, l: &LayerModules, checkpointing: bool) {
        let leaf = |b: &mut Builder, m: usize| {
            b.fetch(m);
            if checkpointing && m == l.last_saving {
                b.recompute(l);
            }
            b.hook(m);
            b.release(m);
        };
        self.fetch(l.layer);
        for part in l.parts.iter().rev() {
            match part {
                Part::Leaf(m) => leaf(self, *m),
                Part::Group {
                    module,
                    leaves,
                    released_in_backward,
                } => {
                    self.fetch(*module);
                    for &m in leaves.iter().rev() {
                        leaf(self, m);
                    }
                    if *released_in_backward {
                        self.release(*module);
                    }
                }
            }
        }
        self.release(l.layer);
    }
}

impl Trace {
    pub(super) fn of(d: &DenseLayout, checkpointing: bool) -> Trace {
        let mut b = Builder {
            modules: Vec::new(),
            params: 0,
            events: Vec::new(),
            hooks: Vec::new(),
            at: HookAt::Head,
            parents: Vec::new(),
            parent: None,
            leaf: Vec::new(),
        };
        let root = b.module(&[]);
        let model = b.under(root, |b| b.module(&[]));
        let (embed, rotary, layers, norm) = b.under(model, |b| {
            let embed = b.module(&[d.vocab * d.hidden]);
            let rotary = b.module(&[]);
            let layers: Vec<LayerModules> = (0..d.layers).map(|_| b.layer(d)).collect();
            (embed, rotary, layers, b.module(&[d.hidden]))
        });
        let head = b.under(root, |b| {
            if d.tied {
                let shared = b.modules[embed].clone();
                b.push(shared, false)
            } else {
                b.module(&[d.vocab * d.hidden])
            }
        });
        b.fetch(root);
        b.fetch(model);
        b.both(embed);
        for _ in 0..d.rotary_tables {
            b.both(rotary);
        }
        for l in &layers {
            b.layer_forward(l);
        }
        let final_norm = b.events.len();
        b.both(norm);
        b.release(model);
        let head_forward = b.events.len();
        b.both(head);
        b.release(root);
        let forward_end = b.events.len() - 1;
        b.fetch(root);
        let head_backward = b.events.len();
        // A tied head's gradient is the embedding's, ready at the embedding's backward.
        if d.tied {
            b.both(head);
        } else {
            b.backward(head);
        }
        b.fetch(model);
        b.backward(norm);
        let mut layer_spans = vec![(0, 0); layers.len()];
        for (i, l) in layers.iter().enumerate().rev() {
            let start = b.events.len();
            b.at = HookAt::Layer(i as u128);
            b.layer_backward(l, checkpointing);
            layer_spans[i] = (start, b.events.len());
        }
        let embedding = b.events.len();
        b.at = HookAt::Embedding;
        b.fetch(embed);
        b.hook(embed);
        // Children are made after their parents: their weights pass up in reverse order.
        let mut recursive = b.modules.clone();
        for m in (0..b.modules.len()).rev() {
            if let Some(parent) = b.parents[m] {
                let below = recursive[m].clone();
                recursive[parent].extend(below);
            }
        }
        Trace {
            recursive,
            leaf: b.leaf,
            modules: b.modules,
            events: b.events,
            marks: [
                final_norm,
                head_forward,
                forward_end,
                head_backward,
                embedding,
            ],
            layer_spans,
            hooks: b.hooks,
        }
    }
}
