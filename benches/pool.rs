//! The pool's own cost on a simulated device (no device calls after warm-up).
//!
//! `cargo bench --bench pool`. Targets on a 2-core machine: a cache-hit allocate+free pair under
//! 100 ns; a random mixed workload (512 B – 64 MiB, about 1,000 live blocks) under 250 ns per
//! operation.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use gpumem::alloc::{Allocation, MemoryConfig, Pool};
use gpumem::backend::SimDevice;

fn sim_pool() -> Pool {
    let config = MemoryConfig::for_inference()
        .with_tracking(false)
        .with_gpu_memory_fraction(1.0)
        .with_min_free_bytes(0);
    Pool::new(Arc::new(SimDevice::new(1 << 40)), config).expect("sim pool")
}

fn cache_hit_pair(c: &mut Criterion) {
    let pool = sim_pool();
    // Warm: the block is cached after the first pair.
    let a = pool.allocate(1 << 20).expect("warm");
    pool.free(a).expect("free");
    c.bench_function("alloc+free pair, cache hit (1 MiB, sim)", |b| {
        b.iter(|| {
            let a = pool.allocate(black_box(1 << 20)).expect("alloc");
            pool.free(black_box(a)).expect("free");
        })
    });
}

/// The same pair through `&mut Pool`, which skips the lock.
fn cache_hit_pair_exclusive(c: &mut Criterion) {
    let mut pool = sim_pool();
    let a = pool.allocate_exclusive(1 << 20).expect("warm");
    pool.free_exclusive(a).expect("free");
    c.bench_function("alloc+free pair, cache hit, exclusive (1 MiB, sim)", |b| {
        b.iter(|| {
            let a = pool.allocate_exclusive(black_box(1 << 20)).expect("alloc");
            pool.free_exclusive(black_box(a)).expect("free");
        })
    });
}

struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Log-uniform in [512 B, 64 MiB]: as many small requests as large ones per octave.
    fn size(&mut self) -> u64 {
        let octave = 9 + self.next() % 17;
        let base = 1u64 << octave;
        (base + self.next() % base).min(64 << 20)
    }
}

fn random_mixed(c: &mut Criterion) {
    let pool = sim_pool();
    let mut rng = SplitMix(7);
    let mut live: Vec<Allocation> = Vec::with_capacity(2048);
    // Reach the steady state (about 1,000 live blocks, segments reserved) before measuring.
    for _ in 0..1000 {
        live.push(pool.allocate(rng.size()).expect("warm"));
    }
    for _ in 0..200_000 {
        let i = (rng.next() % live.len() as u64) as usize;
        let old = live.swap_remove(i);
        pool.free(old).expect("free");
        live.push(pool.allocate(rng.size()).expect("alloc"));
    }
    c.bench_function("random mixed 512 B-64 MiB, ~1000 live (sim), per op", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                // One operation: a free when over 1,000 live blocks, else an allocation, so the
                // live count hovers around 1,000.
                if live.len() > 1000 || (live.len() > 900 && rng.next() % 2 == 0) {
                    let i = (rng.next() % live.len() as u64) as usize;
                    pool.free(live.swap_remove(i)).expect("free");
                } else {
                    live.push(pool.allocate(rng.size()).expect("alloc"));
                }
            }
            start.elapsed()
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    targets = cache_hit_pair, cache_hit_pair_exclusive, random_mixed
}
criterion_main!(benches);
