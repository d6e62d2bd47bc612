//! Property tests of the pool against a simple reference model, on real host memory.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::Arc;

use gpumem::alloc::{Allocation, AllocationInfo, MemoryConfig, Pool, PoolError, DEFAULT_STREAM};
use gpumem::backend::HostDevice;
use gpumem::device::DeviceMemory;
use proptest::prelude::*;

const MIB: u64 = 1 << 20;
const CAPACITY: u64 = 160 * MIB;

#[derive(Debug, Clone)]
enum Op {
    Alloc { size: u64, stream: u32 },
    Free { pick: usize },
    Sync { stream: u32 },
    EmptyCache,
}

fn size() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 1u64..=4096,
        3 => 4097u64..=MIB,
        2 => MIB + 1..=12 * MIB,
        1 => 12 * MIB..=48 * MIB,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (size(), 0u32..3).prop_map(|(size, stream)| Op::Alloc { size, stream }),
        5 => any::<usize>().prop_map(|pick| Op::Free { pick }),
        1 => (0u32..3).prop_map(|stream| Op::Sync { stream }),
        1 => Just(Op::EmptyCache),
    ]
}

struct Model {
    /// Each live allocation, what the pool said of it when it was made, and its data tag.
    live: Vec<(Allocation, AllocationInfo, u64)>,
}

fn signature(info: &AllocationInfo, tag: u64) -> [u8; 8] {
    (tag ^ info.offset.rotate_left(17)).to_le_bytes()
}

/// Checks every invariant the pool promises against the model and the device.
fn check(pool: &Pool, device: &HostDevice, model: &Model) {
    let blocks = pool.blocks();
    let stats = pool.stats();
    let mut by_segment: HashMap<_, Vec<_>> = HashMap::new();
    for b in &blocks {
        by_segment.entry(b.segment).or_default().push(*b);
    }
    let mut reserved = 0;
    for blocks in by_segment.values() {
        // Blocks tile their segment exactly: no overlap, no gap, all inside.
        let seg_size = blocks[0].segment_size;
        reserved += seg_size;
        let mut expect = 0;
        for (i, b) in blocks.iter().enumerate() {
            assert_eq!(b.offset, expect, "gap or overlap in {blocks:?}");
            assert_eq!(b.offset % 512, 0, "misaligned block");
            assert!(b.size > 0);
            expect += b.size;
            if i > 0 {
                let prev = blocks[i - 1];
                assert!(
                    prev.allocated || b.allocated || prev.stream != b.stream,
                    "adjacent free blocks of one cache were not merged: {prev:?} {b:?}"
                );
            }
        }
        assert_eq!(expect, seg_size, "blocks do not cover their segment");
    }
    assert_eq!(stats.reserved_bytes, reserved);
    assert_eq!(
        device.reserved(),
        reserved,
        "device and pool disagree on reserved bytes"
    );
    let live_blocks: u64 = blocks.iter().filter(|b| b.allocated).map(|b| b.size).sum();
    let model_alloc: u64 = model.live.iter().map(|(_, a, _)| a.size).sum();
    let model_req: u64 = model.live.iter().map(|(_, a, _)| a.requested).sum();
    assert_eq!(stats.allocated_bytes, live_blocks);
    assert_eq!(stats.allocated_bytes, model_alloc);
    assert_eq!(stats.requested_bytes, model_req);
    assert_eq!(stats.active_buffers, model.live.len() as u64);
    assert_eq!(stats.pooled_bytes, reserved - live_blocks);
    for (handle, a, _) in &model.live {
        // What the pool says of a live allocation never changes while it lives.
        assert_eq!(pool.info(handle).as_ref(), Ok(a));
        // A block is the request rounded to 512 B, plus a remainder too small to split off
        // (under 512 B in the small pool, at most 1 MiB in the large one).
        let rounded = pool.round_size(a.requested);
        assert!(a.size >= rounded && a.size - rounded <= MIB, "{a:?}");
        if rounded <= MIB {
            assert_eq!(a.size, rounded);
        }
        assert!(blocks.iter().any(|b| b.allocated
            && b.segment == a.segment
            && b.offset == a.offset
            && b.size == a.size));
    }
    assert!(stats.fragmentation() >= 0.0 && stats.fragmentation() <= 1.0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn pool_matches_reference_model(
        ops in prop::collection::vec(op(), 1..160),
        expandable in any::<bool>(),
        exclusive in any::<bool>(),
    ) {
        let device = Arc::new(HostDevice::new(Some(CAPACITY)));
        let config = MemoryConfig::default()
            .with_gpu_memory_fraction(1.0)
            .with_min_free_bytes(0)
            .with_cpu_fallback(false)
            .with_expandable_segments(expandable);
        let mut pool = Pool::new(device.clone() as Arc<dyn DeviceMemory>, config).unwrap();
        let mut model = Model { live: Vec::new() };
        let mut tag = 0u64;
        for op in ops {
            match op {
                // The lock-free path for an exclusive owner keeps the same books.
                Op::Alloc { size, stream } => match if exclusive && stream == DEFAULT_STREAM {
                    pool.allocate_exclusive(size)
                } else {
                    pool.allocate_on(size, stream)
                } {
                    Ok(a) => {
                        tag += 1;
                        let info = pool.info(&a).unwrap();
                        prop_assert!(info.size >= size);
                        prop_assert_eq!(info.requested, size);
                        prop_assert!(info.offset + info.size <= CAPACITY);
                        let sig = signature(&info, tag);
                        pool.write(&a, 0, &sig).unwrap();
                        pool.write(&a, info.size - 8, &sig).unwrap();
                        model.live.push((a, info, tag));
                    }
                    // Out of memory is allowed only when, after the retry released every idle
                    // segment, the smallest segment that could hold the request does not fit.
                    Err(PoolError::OutOfMemory { .. }) => {
                        let mut smallest = if size <= MIB { 2 * MIB } else { pool.round_size(size).div_ceil(2 * MIB) * 2 * MIB };
                        if expandable {
                            // Mapped in 20 MiB granules from the end of a free tail or the segment.
                            smallest += 20 * MIB;
                        }
                        let stats = pool.stats();
                        prop_assert!(stats.reserved_bytes + smallest > CAPACITY,
                            "spurious OOM for {size}: {stats}");
                        let blocks = pool.blocks();
                        let idle = blocks.iter().any(|b| !b.allocated && b.size == b.segment_size);
                        prop_assert!(!idle, "the retry left an idle segment cached");
                    }
                    Err(e) => return Err(TestCaseError::fail(format!("unexpected error {e}"))),
                },
                Op::Free { pick } => {
                    if !model.live.is_empty() {
                        let (a, info, t) = model.live.swap_remove(pick % model.live.len());
                        let sig = signature(&info, t);
                        let mut head = [0u8; 8];
                        let mut tail = [0u8; 8];
                        pool.read(&a, 0, &mut head).unwrap();
                        pool.read(&a, info.size - 8, &mut tail).unwrap();
                        prop_assert_eq!(head, sig, "data of a live block changed");
                        prop_assert_eq!(tail, sig, "data of a live block changed");
                        if exclusive {
                            pool.free_exclusive(a).unwrap();
                        } else {
                            pool.free(a).unwrap();
                        }
                    }
                }
                Op::Sync { stream } => pool.synchronize(stream),
                Op::EmptyCache => {
                    pool.empty_cache();
                }
            }
            check(&pool, &device, &model);
        }
        for (a, _, _) in model.live.drain(..) {
            pool.free(a).unwrap();
        }
        check(&pool, &device, &model);
        pool.empty_cache();
        prop_assert_eq!(pool.stats().reserved_bytes, 0);
        prop_assert_eq!(device.reserved(), 0);
        prop_assert!(pool.blocks().is_empty());
    }
}
