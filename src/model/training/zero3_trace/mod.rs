//! ZeRO-3's parameter coordinator replayed over one training step of a dense model (Llama's,
//! Phi-3's or Gemma's layer): which weights are gathered whole at each module's turn.
//!
//! DeepSpeed records the order in which modules fetch their weights in the first step and
//! replays it from the second (`PartitionedParameterCoordinator`, deepspeed 0.19). At each
//! fetch it gathers the module's weights, then prefetches the next weights of the trace up to
//! `stage3_prefetch_bucket_size` (5e7 elements, within `stage3_max_live_parameters`, 1e9). At
//! each release it frees the module's weights unless the trace uses them again within
//! `stage3_max_reuse_distance` (1e9 elements of the trace) or a prefetch already passed their
//! next use. Weights of at most `stage3_param_persistence_threshold` (1e5) elements are never
//! gathered or freed. The replay below follows those rules event for event; checked against
//! the coordinator's own count of gathered elements (every event equal) on Llama-3.2-1B-shaped
//! models of 4 and 20 layers, Phi-3-mini's of 12, Gemma-3-1B and 8 of Gemma-2-2B's layers,
//! with and without checkpointing.

use super::{Layout, Shape};

/// `stage3_param_persistence_threshold`: tensors this small stay whole.
pub(super) const PERSISTENCE: u128 = 100_000;
/// `stage3_max_reuse_distance`, in elements of the trace.
const REUSE_WINDOW: u128 = 1_000_000_000;
/// `stage3_prefetch_bucket_size`, in elements.
const PREFETCH: u128 = 50_000_000;
/// `stage3_max_live_parameters`, in elements.
const MAX_LIVE: u128 = 1_000_000_000;

/// The shape of a dense model, as its modules hold weights.
#[derive(Debug, Clone, Copy)]
pub(super) struct DenseLayout {
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
    pub(super) fn of(s: &Shape) -> Option<DenseLayout> {
        let kind = match (s.layout, s.fused) {
            _ if s.moe.is_some() || s.mla.is_some() => return None,
            (Layout::Llama, false) => LayerKind::Llama,
            (Layout::Llama, true) => LayerKind::Fused,
            (Layout::Gemma2 | Layout::Gemma3, false) => LayerKind::Gemma,
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

/// Elements gathered (persistent weights aside) where the walk's points fall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Gathered {
    /// At the final norm's forward (what the last layers prefetched for the head still there).
    pub final_norm: u128,
    /// At the output head's forward (the logits made).
    pub forward_end: u128,
    /// After forward, at the loss's backward.
    pub loss: u128,
    /// At the output head's backward.
    pub head: u128,
    /// The most during each layer's backward (recomputation included), by layer index.
    pub layers: Vec<u128>,
    /// At the embedding's backward.
    pub embedding: u128,
    /// Each weight's gradient as backward makes it ready, in that order.
    pub hooks: Vec<Hook>,
}

/// Where in backward a gradient is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HookAt {
    /// The output head's and the final norm's backward.
    Head,
    /// A decoder layer's, by index.
    Layer(u128),
    /// The embedding's (a tied head's gradient summed into it).
    Embedding,
}

/// A weight's gradient ready in backward, handed to the reduce bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Hook {
    pub at: HookAt,
    pub elements: u128,
    /// Elements the coordinator holds gathered then (persistent weights aside).
    pub gathered: u128,
}

#[derive(Clone, Copy)]
enum Event {
    Fetch(usize),
    Release(usize),
}

/// The modules (each its weights as `(id, elements)`) and the step's fetch and release
/// events, as transformers' Llama-layout modules and DeepSpeed's hooks make them.
struct Trace {
    modules: Vec<Vec<(usize, u128)>>,
    events: Vec<Event>,
    /// Index of the final norm's forward fetch, of the head's forward fetch, of forward's last
    /// event, of the head's backward fetch, and of the embedding's backward fetch.
    marks: [usize; 5],
    /// Each layer's backward events, `[start, end)`, by layer index.
    layer_spans: Vec<(usize, usize)>,
    /// Backward's gradient hooks, in order ([`Builder::hooks`]).
    hooks: Vec<(usize, HookAt, usize)>,
}

/// How a layer's modules are nested and called, where families differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LayerKind {
    /// Llama's: a norm, attention (q, its norm, k, its norm, v, o), a norm, the MLP (gate,
    /// activation, up, down).
    Llama,
    /// Phi-3's: fused q/k/v and gate/up projections, a dropout after attention and one after
    /// the MLP.
    Fused,
    /// Gemma's: attention's per-head norms after v, a norm after attention, one before and one
    /// after the MLP.
    Gemma,
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
}

impl Builder {
    fn param(&mut self, elements: u128) -> (usize, u128) {
        self.params += 1;
        (self.params - 1, elements)
    }

    fn module(&mut self, weights: &[u128]) -> usize {
        let params = weights.iter().map(|&n| self.param(n)).collect();
        self.modules.push(params);
        self.modules.len() - 1
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
        let h = d.hidden;
        let with_bias = |w: u128, b: u128, on: bool| if on { vec![w, b] } else { vec![w] };
        let layer = self.module(&[]);
        let input_norm = self.module(&[h]);
        let attn = self.module(&[]);
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
        let mut parts = vec![
            Part::Leaf(input_norm),
            Part::Group {
                module: attn,
                leaves: attention,
                released_in_backward: false,
            },
        ];
        let (mlp, down);
        match d.kind {
            LayerKind::Llama | LayerKind::Gemma => {
                if d.kind == LayerKind::Gemma {
                    parts.push(Part::Leaf(self.module(&[h])));
                }
                parts.push(Part::Leaf(self.module(&[h])));
                mlp = self.module(&[]);
                let gate = self.module(&[d.intermediate * h]);
                let act = self.module(&[]);
                let up = self.module(&[d.intermediate * h]);
                down = self.module(&[h * d.intermediate]);
                parts.push(Part::Group {
                    module: mlp,
                    leaves: vec![gate, act, up, down],
                    released_in_backward: true,
                });
            }
            LayerKind::Fused => {
                parts.push(Part::Leaf(self.module(&[])));
                parts.push(Part::Leaf(self.module(&[h])));
                mlp = self.module(&[]);
                let gate_up = self.module(&[2 * d.intermediate * h]);
                let act = self.module(&[]);
                down = self.module(&[h * d.intermediate]);
                parts.push(Part::Group {
                    module: mlp,
                    leaves: vec![gate_up, act, down],
                    released_in_backward: true,
                });
            }
        }
        // Phi-3's dropouts (no probability: nothing saved); Gemma's norm after the MLP, which
        // saves its input.
        let last_saving = match d.kind {
            LayerKind::Llama => down,
            LayerKind::Fused => {
                parts.push(Part::Leaf(self.module(&[])));
                down
            }
            LayerKind::Gemma => {
                let norm = self.module(&[h]);
                parts.push(Part::Leaf(norm));
                norm
            }
        };
        LayerModules {
            layer,
            parts,
            last_saving,
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
    fn of(d: &DenseLayout, checkpointing: bool) -> Trace {
        let mut b = Builder {
            modules: Vec::new(),
            params: 0,
            events: Vec::new(),
            hooks: Vec::new(),
            at: HookAt::Head,
        };
        let root = b.module(&[]);
        let model = b.module(&[]);
        let embed = b.module(&[d.vocab * d.hidden]);
        let rotary = b.module(&[]);
        let layers: Vec<LayerModules> = (0..d.layers).map(|_| b.layer(d)).collect();
        let norm = b.module(&[d.hidden]);
        let head = if d.tied {
            b.modules.push(b.modules[embed].clone());
            b.modules.len() - 1
        } else {
            b.module(&[d.vocab * d.hidden])
        };
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
        Trace {
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

/// Gathered weights in memory: each weight's own copy once it is waited on (or gathered
/// alone), and the flat buffer of a coalesced all-gather until its last weight is waited on.
#[derive(Default)]
struct Memory {
    /// Per weight: its copy is there.
    copied: Vec<bool>,
    /// Per weight: the coalesced gather it is in flight in.
    inflight: Vec<Option<usize>>,
    /// Per coalesced gather: its flat buffer's elements, its weights, and how many are not
    /// yet waited on.
    handles: Vec<(u128, Vec<usize>, usize)>,
    elements: u128,
}

impl Memory {
    fn gather(&mut self, weights: &[usize], sizes: &[u128]) {
        match weights {
            [] => {}
            [p] => {
                self.copied[*p] = true;
                self.elements += sizes[*p];
            }
            _ => {
                let flat: u128 = weights.iter().map(|&p| sizes[p]).sum();
                for &p in weights {
                    self.inflight[p] = Some(self.handles.len());
                }
                self.handles.push((flat, weights.to_vec(), weights.len()));
                self.elements += flat;
            }
        }
    }

    /// The module's weight `p` waited on: the first wait copies every weight of its gather
    /// out of the flat buffer, which goes with the last.
    fn wait(&mut self, p: usize, sizes: &[u128]) {
        let Some(h) = self.inflight[p].take() else {
            return;
        };
        let (flat, members, waiting) = &mut self.handles[h];
        // A weight waited on, used and freed since is not copied again.
        for &q in members.iter() {
            let pending = q == p || self.inflight[q] == Some(h);
            if pending && !std::mem::replace(&mut self.copied[q], true) {
                self.elements += sizes[q];
            }
        }
        *waiting -= 1;
        if *waiting == 0 {
            self.elements -= *flat;
        }
    }

    fn release(&mut self, p: usize, sizes: &[u128]) {
        if std::mem::take(&mut self.copied[p]) {
            self.elements -= sizes[p];
        }
    }
}

/// DeepSpeed's coordinator over a complete trace: its queue of weights in the order the
/// trace uses them, what is gathered, and which modules use each weight now.
struct Coordinator<'t> {
    trace: &'t Trace,
    /// The modules in the order they fetch.
    order: Vec<usize>,
    /// Each fetch's weights, with the step that uses them.
    queue: Vec<(usize, u128, usize)>,
    next: usize,
    sizes: Vec<u128>,
    /// The last step each weight's queue entries were passed at (none: never).
    recent: Vec<Option<usize>>,
    available: Vec<bool>,
    active: Vec<Vec<usize>>,
    /// The coordinator's own count, which its prefetch limit reads.
    gathered: u128,
    step: usize,
    memory: Memory,
}

impl<'t> Coordinator<'t> {
    fn new(trace: &'t Trace) -> Self {
        let order: Vec<usize> = trace
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Fetch(m) => Some(*m),
                Event::Release(_) => None,
            })
            .collect();
        let queue: Vec<(usize, u128, usize)> = order
            .iter()
            .enumerate()
            .flat_map(|(step, &m)| trace.modules[m].iter().map(move |&(p, n)| (p, n, step)))
            .collect();
        let params = trace.modules.iter().flatten().map(|&(p, _)| p + 1).max();
        let params = params.unwrap_or(0);
        let mut sizes = vec![0u128; params];
        for &(p, n, _) in &queue {
            sizes[p] = n;
        }
        Coordinator {
            trace,
            order,
            queue,
            next: 0,
            sizes,
            recent: vec![None; params],
            available: vec![false; params],
            active: vec![Vec::new(); params],
            gathered: 0,
            step: 0,
            memory: Memory {
                copied: vec![false; params],
                inflight: vec![None; params],
                ..Memory::default()
            },
        }
    }

    /// A module's fetch: its weights gathered and waited on, then the prefetch.
    fn fetch(&mut self, m: usize) {
        let mut fetch = Vec::new();
        for &(p, n) in &self.trace.modules[m] {
            if n > PERSISTENCE && !self.available[p] {
                self.available[p] = true;
                self.gathered += n;
                fetch.push(p);
            }
            if !self.active[p].contains(&m) {
                self.active[p].push(m);
            }
        }
        self.memory.gather(&fetch, &self.sizes);
        for &(p, _) in &self.trace.modules[m] {
            self.memory.wait(p, &self.sizes);
        }
        // This module's weights come off the queue unless a prefetch took them.
        let due = self.trace.modules[m]
            .iter()
            .filter(|(p, _)| self.recent[*p].is_none_or(|r| r < self.step))
            .count();
        for _ in 0..due {
            if let Some(&(p, _, s)) = self.queue.get(self.next) {
                self.recent[p] = Some(s);
                self.next += 1;
            }
        }
        let most = MAX_LIVE.saturating_sub(self.gathered).min(PREFETCH);
        let mut taken = 0;
        let mut prefetched: Vec<usize> = Vec::new();
        while self.next < self.queue.len() && taken < most {
            let (p, n, s) = self.queue[self.next];
            self.next += 1;
            if n > PERSISTENCE && !self.available[p] && !prefetched.contains(&p) {
                prefetched.push(p);
                taken += n;
            }
            self.recent[p] = Some(self.recent[p].map_or(s, |r| r.max(s)));
        }
        for &p in &prefetched {
            self.available[p] = true;
            self.gathered += self.sizes[p];
        }
        self.memory.gather(&prefetched, &self.sizes);
        self.step += 1;
    }

    /// A module's release: each weight freed unless another module uses it now, the trace
    /// uses it again within the reuse window, or a prefetch already passed its next use.
    fn release(&mut self, m: usize) {
        let reused = self.reused_within_window();
        for &(p, n) in &self.trace.modules[m] {
            self.active[p].retain(|&a| a != m);
            let free = n > PERSISTENCE
                && self.recent[p].is_none_or(|r| r <= self.step)
                && !reused.contains(&p)
                && self.available[p]
                && self.active[p].is_empty();
            if free {
                self.available[p] = false;
                self.gathered -= n;
                self.memory.release(p, &self.sizes);
            }
        }
    }

    /// The weights the trace uses within the reuse window from this step on.
    fn reused_within_window(&self) -> Vec<usize> {
        let mut seen = Vec::new();
        let mut traversed = 0u128;
        for &m in self.order.get(self.step..).unwrap_or(&[]) {
            if traversed >= REUSE_WINDOW {
                break;
            }
            for &(p, n) in &self.trace.modules[m] {
                seen.push(p);
                traversed += n;
            }
        }
        seen
    }
}

/// After each event: the coordinator's count of gathered elements, and the elements its
/// gathered weights take in memory.
fn replay(t: &Trace) -> Vec<(u128, u128)> {
    let mut c = Coordinator::new(t);
    t.events
        .iter()
        .map(|e| {
            match *e {
                Event::Fetch(m) => c.fetch(m),
                Event::Release(m) => c.release(m),
            }
            (c.gathered, c.memory.elements)
        })
        .collect()
}

/// What the coordinator holds gathered at the walk's points of one step (from the second on,
/// when the trace is complete).
pub(super) fn gathered(d: &DenseLayout, checkpointing: bool) -> Gathered {
    let t = Trace::of(d, checkpointing);
    let n: Vec<u128> = replay(&t).into_iter().map(|(_, memory)| memory).collect();
    let [final_norm, head_forward, forward_end, head_backward, embedding] = t.marks;
    Gathered {
        final_norm: n[final_norm],
        forward_end: n[head_forward],
        loss: n[forward_end],
        head: n[head_backward],
        layers: t
            .layer_spans
            .iter()
            .map(|&(a, b)| n[a..b].iter().copied().max().unwrap_or(0))
            .collect(),
        embedding: n[embedding],
        hooks: t
            .hooks
            .iter()
            .flat_map(|&(m, at, event)| {
                let gathered = n[event];
                t.modules[m].iter().map(move |&(_, elements)| Hook {
                    at,
                    elements,
                    gathered,
                })
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests;
