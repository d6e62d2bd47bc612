//! ZeRO-3's parameter coordinator replayed over one training step (Llama's, Phi-3's or Gemma's
//! layer, or experts in every layer): which weights are gathered whole at each module's turn.
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
//! models of 4 and 20 layers, Phi-3-mini's of 12, Gemma-3-1B, 8 of Gemma-2-2B's layers,
//! 2 of Qwen3-MoE's and 4 of a Mixtral's, with and without checkpointing.

mod build;

#[cfg(test)]
use build::LayerKind;
pub(super) use build::{DenseLayout, HookAt};
use build::{Event, Trace};

/// `stage3_param_persistence_threshold`: tensors this small stay whole.
pub(super) const PERSISTENCE: u128 = 100_000;
/// `stage3_max_reuse_distance`, in elements of the trace.
const REUSE_WINDOW: u128 = 1_000_000_000;
/// `stage3_prefetch_bucket_size`, in elements.
const PREFETCH: u128 = 50_000_000;
/// `stage3_max_live_parameters`, in elements.
const MAX_LIVE: u128 = 1_000_000_000;

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

/// A weight's gradient ready in backward, handed to the reduce bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Hook {
    pub at: HookAt,
    pub elements: u128,
    /// Elements the coordinator holds gathered then (persistent weights aside).
    pub gathered: u128,
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
        let reused = self.reused_within_window(self.trace.leaf[m]);
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

    /// The weights the trace uses within the reuse window from this step on. DeepSpeed walks
    /// each module's own weights, or (releasing a leaf) each module's and all below it.
    fn reused_within_window(&self, leaf: bool) -> Vec<usize> {
        let mut seen = Vec::new();
        let mut traversed = 0u128;
        let none = Vec::new();
        for &m in self.order.get(self.step..).unwrap_or(&[]) {
            if traversed >= REUSE_WINDOW {
                break;
            }
            // A module's own weights: a leaf owns none of those it fetches.
            let weights = match (leaf, self.trace.leaf[m]) {
                (true, _) => &self.trace.recursive[m],
                (false, true) => &none,
                (false, false) => &self.trace.modules[m],
            };
            for &(p, n) in weights {
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
