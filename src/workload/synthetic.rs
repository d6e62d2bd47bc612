//! Synthetic workloads.

use super::{Op, Rng, Workload};
use crate::model::ModelArch;

/// Request size distributions for [`random`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeDist {
    /// Uniform in [1 B, max].
    Uniform,
    /// Normal with mean max/2 and standard deviation max/6, clamped to [1 B, max].
    Normal,
    /// Log-normal with median max/32 and σ = 1.5 (natural log), clamped: many small, few large.
    Lognormal,
    /// max / 2^k with k geometric (p = 1/2): max, max/2, max/4, … each half as likely.
    Geometric,
}

impl SizeDist {
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a float cast saturates; sizes from a bounded distribution"
    )]
    fn sample(self, rng: &mut Rng, max: u64) -> u64 {
        let max = max.max(1);
        let v = match self {
            SizeDist::Uniform => return rng.range(1, max),
            SizeDist::Normal => max as f64 / 2.0 + rng.normal() * max as f64 / 6.0,
            SizeDist::Lognormal => ((max as f64 / 32.0).ln() + 1.5 * rng.normal()).exp(),
            SizeDist::Geometric => {
                let mut k = 0;
                while k < 40 && rng.next_u64() & 1 == 0 {
                    k += 1;
                }
                return (max >> k).max(1);
            }
        };
        (v.round() as u64).clamp(1, max)
    }
}

/// Parameters of RMM's `random_allocations` benchmark.
#[derive(Debug, Clone, Copy)]
pub struct RandomParams {
    /// Allocations to make (each is freed before the end).
    pub allocations: u32,
    /// Largest request in bytes.
    pub max_size: u64,
    /// Live bytes are kept under this.
    pub max_live: u64,
    /// How request sizes are drawn.
    pub dist: SizeDist,
    /// Seed of the size and lifetime draws; the same seed gives the same workload.
    pub seed: u64,
}

/// RMM's random allocations: for 2 × N steps, allocate with probability 0.73 while allocations
/// remain and the live total stays under the limit (always when nothing is live), otherwise free
/// a uniformly chosen live allocation; then free what is left.
#[expect(
    clippy::cast_possible_truncation,
    reason = "usize is 64 bits (lib.rs refuses other targets)"
)]
pub fn random(p: RandomParams) -> Workload {
    let mut rng = Rng::new(p.seed);
    let mut ops = Vec::with_capacity(p.allocations as usize * 2);
    let mut live: Vec<(u32, u64)> = Vec::new();
    let mut live_bytes = 0u64;
    let mut next = 0u32;
    for _ in 0..u64::from(p.allocations) * 2 {
        let size = p.dist.sample(&mut rng, p.max_size);
        let mut alloc = true;
        if !live.is_empty() {
            let chance = rng.below(100);
            alloc = chance < 73 && next < p.allocations && live_bytes + size < p.max_live;
        }
        if alloc && next < p.allocations {
            ops.push(Op::Alloc {
                id: next,
                size,
                stream: 0,
            });
            live.push((next, size));
            live_bytes += size;
            next += 1;
        } else if !live.is_empty() {
            let (id, size) = live.swap_remove(rng.below(live.len() as u64) as usize);
            live_bytes -= size;
            ops.push(Op::Free { id });
        }
    }
    ops.extend(live.into_iter().map(|(id, _)| Op::Free { id }));
    Workload {
        name: "random".into(),
        ops,
        allocations: next,
        seed: Some(p.seed),
        preexisting: 0,
        reference: None,
        skipped: Vec::new(),
        recorded_ops: None,
        completed_frees: false,
        reference_reserved: Vec::new(),
    }
}

/// `n` allocations of one size, up to 64 live at a time (allocate with probability 1/2).
#[expect(
    clippy::cast_possible_truncation,
    reason = "usize is 64 bits (lib.rs refuses other targets)"
)]
pub fn same_size(n: u32, size: u64, seed: u64) -> Workload {
    let mut rng = Rng::new(seed);
    let mut ops = Vec::new();
    let mut live: Vec<u32> = Vec::new();
    let mut next = 0;
    while next < n {
        if live.is_empty() || (live.len() < 64 && rng.below(2) == 0) {
            ops.push(Op::Alloc {
                id: next,
                size,
                stream: 0,
            });
            live.push(next);
            next += 1;
        } else {
            let id = live.swap_remove(rng.below(live.len() as u64) as usize);
            ops.push(Op::Free { id });
        }
    }
    ops.extend(live.into_iter().map(|id| Op::Free { id }));
    Workload {
        name: "same-size".into(),
        ops,
        allocations: n,
        seed: Some(seed),
        preexisting: 0,
        reference: None,
        skipped: Vec::new(),
        recorded_ops: None,
        completed_frees: false,
        reference_reserved: Vec::new(),
    }
}

/// A mix: 90 % small requests (log-uniform 256 B – 1 MiB), 10 % large (uniform 1 MiB – max),
/// with the random workload's alloc/free rule.
#[expect(
    clippy::cast_possible_truncation,
    reason = "usize is 64 bits (lib.rs refuses other targets)"
)]
pub fn mixed(n: u32, max_size: u64, max_live: u64, seed: u64) -> Workload {
    let mut rng = Rng::new(seed);
    let mut ops = Vec::new();
    let mut live: Vec<(u32, u64)> = Vec::new();
    let mut live_bytes = 0;
    let mut next = 0;
    while next < n || !live.is_empty() {
        let size = if rng.below(10) < 9 {
            let octave = rng.range(8, 19);
            (1u64 << octave) + rng.below(1 << octave)
        } else {
            rng.range(1 << 20, max_size.max((1 << 20) + 1))
        };
        let alloc =
            next < n && (live.is_empty() || (rng.below(100) < 60 && live_bytes + size < max_live));
        if alloc {
            ops.push(Op::Alloc {
                id: next,
                size,
                stream: 0,
            });
            live.push((next, size));
            live_bytes += size;
            next += 1;
        } else {
            let (id, s) = live.swap_remove(rng.below(live.len() as u64) as usize);
            live_bytes -= s;
            ops.push(Op::Free { id });
        }
    }
    Workload {
        name: "mixed".into(),
        ops,
        allocations: n,
        seed: Some(seed),
        preexisting: 0,
        reference: None,
        skipped: Vec::new(),
        recorded_ops: None,
        completed_frees: false,
        reference_reserved: Vec::new(),
    }
}

/// Parameters of the transformer workload.
#[derive(Debug, Clone)]
pub struct TransformerParams {
    /// The model whose forward passes are replayed.
    pub arch: ModelArch,
    /// Sequences decoded at once.
    pub batch: u64,
    /// Prompt tokens (prefilled in chunks of `ubatch`).
    pub prompt: u64,
    /// Decode steps after the prompt.
    pub decode_steps: u64,
    /// Prefill chunk in tokens.
    pub ubatch: u64,
    /// Tokens per KV block (paged KV cache).
    pub kv_block_tokens: u64,
}

/// An inference run as an allocator sees it: for each forward pass (prefill chunks, then one
/// token per sequence per decode step) and each layer, the residual, normed input, q/k/v,
/// attention scores, attention output and feed-forward buffers are allocated and freed in turn;
/// the KV cache grows by one block per layer whenever a sequence crosses a block boundary, and
/// stays until the end. Activations are 2-byte, scores 4-byte, as in the estimate.
pub fn transformer(p: &TransformerParams) -> Workload {
    let a = &p.arch;
    let mut ops = Vec::new();
    let mut next = 0u32;
    let mut alloc = |ops: &mut Vec<Op>, size: u64| {
        let id = next;
        next += 1;
        ops.push(Op::Alloc {
            id,
            size: size.max(1),
            stream: 0,
        });
        id
    };
    let kv_block = a.kv_elements_per_token_layer() * 2 * p.kv_block_tokens * p.batch;
    let mut kv_blocks: Vec<u32> = Vec::new();
    let mut done = 0u64;
    let total = p.prompt + p.decode_steps;
    let inter = a.moe.as_ref().map_or(a.intermediate_size, |m| {
        m.expert_intermediate * m.experts_per_token
    });
    while done < total {
        // Prefill in chunks, then one token at a time.
        let tokens = if done < p.prompt {
            p.ubatch.min(p.prompt - done)
        } else {
            1
        };
        let context = done + tokens;
        let t = tokens * p.batch;
        // New KV blocks when the context crosses block boundaries (one per layer).
        let blocks_needed = context.div_ceil(p.kv_block_tokens) * a.num_layers;
        while (kv_blocks.len() as u64) < blocks_needed {
            kv_blocks.push(alloc(&mut ops, kv_block));
        }
        let hidden = alloc(&mut ops, t * a.hidden_size * 2);
        for _ in 0..a.num_layers {
            let normed = alloc(&mut ops, t * a.hidden_size * 2);
            let q = alloc(&mut ops, t * a.num_heads * a.head_dim * 2);
            let k = alloc(&mut ops, t * a.num_kv_heads * a.head_dim * 2);
            let v = alloc(&mut ops, t * a.num_kv_heads * a.head_dim * 2);
            let scores = alloc(&mut ops, p.batch * a.num_heads * tokens * context * 4);
            let attn = alloc(&mut ops, t * a.num_heads * a.head_dim * 2);
            for id in [scores, v, k, q] {
                ops.push(Op::Free { id });
            }
            let out = alloc(&mut ops, t * a.hidden_size * 2);
            ops.push(Op::Free { id: attn });
            ops.push(Op::Free { id: normed });
            let normed2 = alloc(&mut ops, t * a.hidden_size * 2);
            let gate = alloc(&mut ops, t * inter * 2);
            let up = alloc(&mut ops, t * inter * 2);
            let down = alloc(&mut ops, t * a.hidden_size * 2);
            for id in [up, gate, normed2, out] {
                ops.push(Op::Free { id });
            }
            ops.push(Op::Free { id: down });
        }
        let logits = alloc(&mut ops, p.batch * a.vocab_size * 4);
        ops.push(Op::Free { id: logits });
        ops.push(Op::Free { id: hidden });
        done += tokens;
    }
    ops.extend(kv_blocks.into_iter().map(|id| Op::Free { id }));
    Workload {
        name: format!("transformer:{}", a.name),
        ops,
        allocations: next,
        seed: None,
        preexisting: 0,
        reference: None,
        skipped: Vec::new(),
        recorded_ops: None,
        completed_frees: false,
        reference_reserved: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_follows_rmm_rules() {
        let w = random(RandomParams {
            allocations: 1000,
            max_size: 64 << 20,
            max_live: 4 << 30,
            dist: SizeDist::Uniform,
            seed: 7,
        });
        w.validate().unwrap();
        assert_eq!(w.allocations, 1000);
        let allocs = w
            .ops
            .iter()
            .filter(|o| matches!(o, Op::Alloc { .. }))
            .count();
        assert_eq!(allocs, 1000);
        assert_eq!(w.ops.len(), 2000);
        // The same seed gives the same sequence.
        let again = random(RandomParams {
            allocations: 1000,
            max_size: 64 << 20,
            max_live: 4 << 30,
            dist: SizeDist::Uniform,
            seed: 7,
        });
        assert_eq!(w.ops, again.ops);
        // Live bytes never pass the limit.
        let mut sizes = vec![0; 1000];
        let mut live = 0u64;
        for op in &w.ops {
            match *op {
                Op::Alloc { id, size, .. } => {
                    sizes[id as usize] = size;
                    live += size;
                    assert!(live < (4 << 30) + (64 << 20));
                }
                Op::Free { id } => live -= sizes[id as usize],
            }
        }
    }

    #[test]
    fn distributions_stay_in_range() {
        let mut rng = Rng::new(3);
        for dist in [
            SizeDist::Uniform,
            SizeDist::Normal,
            SizeDist::Lognormal,
            SizeDist::Geometric,
        ] {
            for _ in 0..5000 {
                let s = dist.sample(&mut rng, 1 << 20);
                assert!((1..=1 << 20).contains(&s), "{dist:?} {s}");
            }
        }
    }

    #[test]
    fn other_workloads_are_consistent() {
        same_size(500, 1 << 20, 1).validate().unwrap();
        mixed(500, 64 << 20, 1 << 30, 1).validate().unwrap();
        let arch = crate::model::find_model("mistral-7b").unwrap().arch;
        let w = transformer(&TransformerParams {
            arch,
            batch: 4,
            prompt: 1024,
            decode_steps: 8,
            ubatch: 512,
            kv_block_tokens: 16,
        });
        w.validate().unwrap();
        assert!(w.allocations > 1000);
    }
}
