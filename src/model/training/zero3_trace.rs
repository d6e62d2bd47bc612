//! ZeRO-3's parameter coordinator replayed over one training step of a dense Llama-layout
//! model: which weights are gathered whole at each module's turn.
//!
//! DeepSpeed records the order in which modules fetch their weights in the first step and
//! replays it from the second (`PartitionedParameterCoordinator`, deepspeed 0.19). At each
//! fetch it gathers the module's weights, then prefetches the next weights of the trace up to
//! `stage3_prefetch_bucket_size` (5e7 elements, within `stage3_max_live_parameters`, 1e9). At
//! each release it frees the module's weights unless the trace uses them again within
//! `stage3_max_reuse_distance` (1e9 elements of the trace) or a prefetch already passed their
//! next use. Weights of at most `stage3_param_persistence_threshold` (1e5) elements are never
//! gathered or freed. The replay below follows those rules event for event; checked against
//! the coordinator's own count of gathered elements on Llama-3.2-1B-shaped models of 4 and 20
//! layers, with and without checkpointing (every event equal).

use super::Shape;

/// `stage3_param_persistence_threshold`: tensors this small stay whole.
pub(super) const PERSISTENCE: u128 = 100_000;
/// `stage3_max_reuse_distance`, in elements of the trace.
const REUSE_WINDOW: u128 = 1_000_000_000;
/// `stage3_prefetch_bucket_size`, in elements.
const PREFETCH: u128 = 50_000_000;
/// `stage3_max_live_parameters`, in elements.
const MAX_LIVE: u128 = 1_000_000_000;

/// The shape of a dense Llama-layout model, as its modules hold weights.
#[derive(Debug, Clone, Copy)]
pub(super) struct DenseLayout {
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
    pub qkv_bias: bool,
    pub o_bias: bool,
    pub qk_norm: bool,
}

impl DenseLayout {
    /// The layout of a dense Llama-layout `Shape` (the caller has checked it is one).
    pub(super) fn of(s: &Shape) -> DenseLayout {
        DenseLayout {
            layers: s.layers,
            hidden: s.hidden,
            q: s.heads * s.head_dim,
            kv: s.kv_heads * s.head_dim,
            head_dim: s.head_dim,
            intermediate: s.intermediate,
            vocab: s.vocab,
            tied: s.tied,
            qkv_bias: s.qkv_bias,
            o_bias: s.o_bias,
            qk_norm: s.qk_norm,
        }
    }
}

/// Elements gathered (persistent weights aside) where the walk's points fall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Gathered {
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
    /// Index of the head's forward fetch, of forward's last event, of the head's backward
    /// fetch, and of the embedding's backward fetch.
    marks: [usize; 4],
    /// Each layer's backward events, `[start, end)`, by layer index.
    layer_spans: Vec<(usize, usize)>,
}

/// Module handles of one decoder layer.
struct LayerModules {
    layer: usize,
    input_norm: usize,
    attn: usize,
    q: usize,
    q_norm: Option<usize>,
    k: usize,
    k_norm: Option<usize>,
    v: usize,
    o: usize,
    post_norm: usize,
    mlp: usize,
    gate: usize,
    act: usize,
    up: usize,
    down: usize,
}

struct Builder {
    modules: Vec<Vec<(usize, u128)>>,
    params: usize,
    events: Vec<Event>,
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

    fn layer(&mut self, d: &DenseLayout) -> LayerModules {
        let h = d.hidden;
        let with_bias = |w: u128, b: u128, on: bool| if on { vec![w, b] } else { vec![w] };
        LayerModules {
            layer: self.module(&[]),
            input_norm: self.module(&[h]),
            attn: self.module(&[]),
            q: self.module(&with_bias(d.q * h, d.q, d.qkv_bias)),
            k: self.module(&with_bias(d.kv * h, d.kv, d.qkv_bias)),
            v: self.module(&with_bias(d.kv * h, d.kv, d.qkv_bias)),
            o: self.module(&with_bias(h * d.q, h, d.o_bias)),
            q_norm: d.qk_norm.then(|| self.module(&[d.head_dim])),
            k_norm: d.qk_norm.then(|| self.module(&[d.head_dim])),
            post_norm: self.module(&[h]),
            mlp: self.module(&[]),
            gate: self.module(&[d.intermediate * h]),
            act: self.module(&[]),
            up: self.module(&[d.intermediate * h]),
            down: self.module(&[h * d.intermediate]),
        }
    }

    /// A layer's forward; `whole` false is checkpointing's recomputation, which the layer's
    /// own hooks and the down projection's release do not frame.
    fn layer_forward(&mut self, l: &LayerModules, whole: bool) {
        if whole {
            self.fetch(l.layer);
        }
        self.both(l.input_norm);
        self.fetch(l.attn);
        self.both(l.q);
        if let Some(n) = l.q_norm {
            self.both(n);
        }
        self.both(l.k);
        if let Some(n) = l.k_norm {
            self.both(n);
        }
        self.both(l.v);
        self.both(l.o);
        self.release(l.attn);
        self.both(l.post_norm);
        self.fetch(l.mlp);
        self.both(l.gate);
        self.both(l.act);
        self.both(l.up);
        if whole {
            self.both(l.down);
            self.release(l.mlp);
            self.release(l.layer);
        } else {
            self.fetch(l.down);
        }
    }

    fn layer_backward(&mut self, l: &LayerModules, checkpointing: bool) {
        self.fetch(l.layer);
        self.fetch(l.mlp);
        if checkpointing {
            // The pre-backward hooks of the layer's outer modules fire before the
            // recomputation.
            self.fetch(l.down);
            self.layer_forward(l, false);
            self.release(l.down);
        } else {
            self.both(l.down);
        }
        self.both(l.up);
        self.both(l.act);
        self.both(l.gate);
        self.release(l.mlp);
        self.both(l.post_norm);
        self.fetch(l.attn);
        self.both(l.o);
        self.both(l.v);
        if let Some(n) = l.k_norm {
            self.both(n);
        }
        self.both(l.k);
        if let Some(n) = l.q_norm {
            self.both(n);
        }
        self.both(l.q);
        self.both(l.input_norm);
        self.release(l.layer);
    }
}

impl Trace {
    fn of(d: &DenseLayout, checkpointing: bool) -> Trace {
        let mut b = Builder {
            modules: Vec::new(),
            params: 0,
            events: Vec::new(),
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
        b.both(rotary);
        for l in &layers {
            b.layer_forward(l, true);
        }
        b.both(norm);
        b.release(model);
        let head_forward = b.events.len();
        b.both(head);
        b.release(root);
        let forward_end = b.events.len() - 1;
        b.fetch(root);
        let head_backward = b.events.len();
        b.both(head);
        b.fetch(model);
        b.both(norm);
        let mut layer_spans = vec![(0, 0); layers.len()];
        for (i, l) in layers.iter().enumerate().rev() {
            let start = b.events.len();
            b.layer_backward(l, checkpointing);
            layer_spans[i] = (start, b.events.len());
        }
        let embedding = b.events.len();
        b.fetch(embed);
        Trace {
            modules: b.modules,
            events: b.events,
            marks: [head_forward, forward_end, head_backward, embedding],
            layer_spans,
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
    let [head_forward, forward_end, head_backward, embedding] = t.marks;
    Gathered {
        forward_end: n[head_forward],
        loss: n[forward_end],
        head: n[head_backward],
        layers: t
            .layer_spans
            .iter()
            .map(|&(a, b)| n[a..b].iter().copied().max().unwrap_or(0))
            .collect(),
        embedding: n[embedding],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Llama-3.2-1B's layer shape with `layers` layers.
    fn llama_1b(layers: u128) -> DenseLayout {
        DenseLayout {
            layers,
            hidden: 2_048,
            q: 2_048,
            kv: 512,
            head_dim: 64,
            intermediate: 8_192,
            vocab: 128_256,
            tied: true,
            qkv_bias: false,
            o_bias: false,
            qk_norm: false,
        }
    }

    // The coordinator's own counts (`__n_available_params`), logged from deepspeed 0.19.8 over
    // a fake group of 4 ranks at 64 tokens, second step.
    #[test]
    fn replay_matches_the_coordinators_count() {
        let count = |d: &DenseLayout, ckpt| -> Vec<u128> {
            replay(&Trace::of(d, ckpt))
                .into_iter()
                .map(|(n, _)| n)
                .collect()
        };
        let n = count(&llama_1b(20), false);
        assert_eq!(n.iter().copied().max(), Some(1_252_524_032));
        // After the embedding's forward the coordinator has freed it (its next use lies
        // beyond the reuse window) and kept the first layer's prefetched weights.
        assert_eq!(
            &n[..5],
            &[
                262_668_288,
                323_485_696,
                384_303_104,
                121_634_816,
                182_452_224
            ]
        );
        let small = count(&llama_1b(4), true);
        assert_eq!(small.iter().copied().max(), Some(505_937_920));
        assert_eq!(small.last(), Some(&262_668_288));
        let g = gathered(&llama_1b(20), false);
        assert_eq!((g.forward_end, g.loss), (1_009_254_400, 1_009_254_400));
    }

    /// Qwen3-0.6B's layer shape with `layers` layers.
    fn qwen3_06b(layers: u128) -> DenseLayout {
        DenseLayout {
            layers,
            hidden: 1_024,
            q: 2_048,
            kv: 1_024,
            head_dim: 128,
            intermediate: 3_072,
            vocab: 151_936,
            tied: true,
            qkv_bias: false,
            o_bias: false,
            qk_norm: true,
        }
    }

    // The last forward prefetch also gathers the first query projection for backward's end:
    // its flat buffer stays until then beside the copies of the others (MemTracker: a storage
    // of 54,525,952 bytes at 24 layers, none at 12).
    #[test]
    fn a_coalesced_buffer_stays_until_its_last_weight_is_waited_on() {
        let total = |layers: u128| 151_936 * 1_024 + layers * 15_728_640;
        let g = gathered(&qwen3_06b(24), false);
        assert_eq!(g.loss, total(24) + 27_262_976);
        let g = gathered(&qwen3_06b(28), false);
        assert_eq!(g.loss, total(28) + 39_845_888);
        let g = gathered(&qwen3_06b(12), false);
        assert_eq!(g.loss, total(12));
    }
}
