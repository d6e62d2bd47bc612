//! Behaviour of the pool on real host memory and simulated devices.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use gpumem::alloc::*;
use gpumem::backend::{HostDevice, SimDevice};
use gpumem::device::*;

const MIB: u64 = 1 << 20;

fn host(cap: u64, config: MemoryConfig) -> Pool {
    Pool::new(Arc::new(HostDevice::new(Some(cap))), config).unwrap()
}

fn sim(cap: u64) -> Pool {
    Pool::new(Arc::new(SimDevice::new(cap)), plain()).unwrap()
}

/// No fraction or min-free headroom, so the limit is the device's capacity.
fn plain() -> MemoryConfig {
    MemoryConfig::default()
        .with_gpu_memory_fraction(1.0)
        .with_min_free_bytes(0)
        .with_tracking(true)
}

#[test]
fn rounds_to_512_and_uses_size_classes() {
    let pool = sim(1 << 30);
    let a = pool.allocate(1).unwrap();
    assert_eq!(pool.info(&a).unwrap().size, 512);
    let b = pool.allocate(513).unwrap();
    assert_eq!(pool.info(&b).unwrap().size, 1024);
    // Both small requests share one 2 MiB segment.
    assert_eq!(pool.stats().reserved_bytes, 2 * MIB);
    let c = pool.allocate(MIB + 1).unwrap();
    // A medium request takes a 20 MiB segment.
    assert_eq!(pool.stats().reserved_bytes, 22 * MIB);
    let d = pool.allocate(30 * MIB + 5).unwrap();
    // One of a large segment or more gets its own, of its size in whole pages.
    assert_eq!(pool.stats().reserved_bytes, 22 * MIB + 30 * MIB + 4096);
    assert_eq!(
        pool.stats().allocated_bytes,
        // The large block is its whole segment: the rest of the page is too small to split.
        512 + 1024 + (MIB + 512) + (30 * MIB + 4096)
    );
    assert_eq!(
        pool.stats().requested_bytes,
        1 + 513 + MIB + 1 + 30 * MIB + 5
    );
    for x in [a, b, c, d] {
        pool.free(x).unwrap();
    }
}

#[test]
fn freed_blocks_are_reused_and_coalesced() {
    let pool = sim(1 << 30);
    let a = pool.allocate(4096).unwrap();
    let b = pool.allocate(4096).unwrap();
    let c = pool.allocate(4096).unwrap();
    let offset = |x| pool.info(x).unwrap().offset;
    assert_eq!((offset(&a), offset(&b), offset(&c)), (0, 4096, 8192));
    pool.free(b).unwrap();
    // Best fit: the 4 KiB hole, not the tail of the segment.
    let b2 = pool.allocate(4000).unwrap();
    assert_eq!(offset(&b2), 4096);
    pool.free(a).unwrap();
    pool.free(b2).unwrap();
    pool.free(c).unwrap();
    let blocks = pool.blocks();
    assert_eq!(
        blocks.len(),
        1,
        "neighbours merge back into one block: {blocks:?}"
    );
    assert_eq!(blocks[0].size, 2 * MIB);
    let s = pool.stats();
    assert_eq!((s.pool_hits, s.pool_misses, s.device_allocs), (3, 1, 1));
    assert_eq!(s.fragmentation(), 0.0);
    assert_eq!(pool.empty_cache(), 2 * MIB);
    assert_eq!(pool.stats().reserved_bytes, 0);
}

#[test]
fn fragmentation_is_largest_free_over_total_free() {
    let pool = sim(1 << 30);
    let blocks: Vec<_> = (0..4).map(|_| pool.allocate(512 * 1024).unwrap()).collect();
    let mut it = blocks.into_iter();
    let (a, b, c, d) = (
        it.next().unwrap(),
        it.next().unwrap(),
        it.next().unwrap(),
        it.next().unwrap(),
    );
    // Segment is full (4 × 512 KiB = 2 MiB). Free two non-adjacent blocks.
    pool.free(a).unwrap();
    pool.free(c).unwrap();
    let s = pool.stats();
    assert_eq!(s.pooled_bytes, MIB);
    assert_eq!(s.largest_free_block, 512 * 1024);
    assert_eq!(s.fragmentation(), 0.5);
    assert_eq!(s.inactive_split_bytes, MIB);
    pool.free(b).unwrap();
    pool.free(d).unwrap();
    assert_eq!(pool.stats().fragmentation(), 0.0);
}

#[test]
fn other_streams_wait_for_synchronize() {
    let pool = sim(1 << 30);
    let a = pool.allocate_on(MIB, 1).unwrap();
    pool.free(a).unwrap();
    let reserved = pool.stats().reserved_bytes;
    // Stream 2 cannot take stream 1's freed block yet: a new segment is reserved.
    let b = pool.allocate_on(MIB, 2).unwrap();
    assert!(pool.stats().reserved_bytes > reserved);
    pool.free(b).unwrap();
    // Stream 1 reuses its own block at once.
    let misses = pool.stats().pool_misses;
    let c = pool.allocate_on(MIB, 1).unwrap();
    assert_eq!(pool.stats().pool_misses, misses);
    pool.free(c).unwrap();
    pool.synchronize(1);
    let before = pool.stats().reserved_bytes;
    let d = pool.allocate_on(MIB, 3).unwrap();
    assert_eq!(
        pool.stats().reserved_bytes,
        before,
        "after synchronize any stream reuses the block"
    );
    assert_eq!(pool.info(&d).unwrap().stream, 3);
    pool.free(d).unwrap();
}

/// PyTorch's fixed size classes, which keep idle segments until memory runs out.
fn classic() -> MemoryConfig {
    plain().with_max_segment(0)
}

#[test]
fn oversize_blocks_are_not_split() {
    let config = classic().with_max_split_size(40 * MIB);
    let pool = Pool::new(Arc::new(SimDevice::new(1 << 30)), config).unwrap();
    let big = pool.allocate(100 * MIB).unwrap();
    pool.free(big).unwrap();
    // A small request may not eat the oversize block.
    let small = pool.allocate(30 * MIB).unwrap();
    assert_eq!(pool.stats().segments, 2);
    // An oversize request close in size takes it whole.
    let near = pool.allocate(90 * MIB).unwrap();
    assert_eq!(pool.info(&near).unwrap().size, 100 * MIB);
    assert_eq!(pool.stats().segments, 2);
    pool.free(small).unwrap();
    pool.free(near).unwrap();
}

#[test]
fn out_of_memory_retries_after_releasing_the_cache() {
    let pool = host(64 * MIB, classic());
    let a = pool.allocate(40 * MIB).unwrap();
    pool.free(a).unwrap();
    // 40 MiB are cached; 50 MiB do not fit next to them, but do once the cache is released.
    let b = pool.allocate(50 * MIB).unwrap();
    let s = pool.stats();
    assert_eq!(s.retries, 1);
    assert_eq!(s.ooms, 0);
    assert_eq!(s.device_frees, 1);
    pool.free(b).unwrap();
}

// A device smaller than the pool's preferred segment (2 MiB for small requests, 20 MiB for
// large ones) still serves whatever fits: the segment shrinks to the room left.
#[test]
fn a_device_smaller_than_a_segment_serves_what_fits() {
    for config in [plain(), classic()] {
        let pool = Pool::new(Arc::new(SimDevice::new(MIB)), config).unwrap();
        let small = pool.allocate(4096).unwrap();
        let large = pool.allocate(MIB / 2).unwrap();
        assert!(pool.stats().reserved_bytes <= MIB);
        // What no longer fits is refused, not served beyond the device.
        assert!(matches!(
            pool.allocate(MIB / 2),
            Err(PoolError::OutOfMemory { .. })
        ));
        pool.free(small).unwrap();
        pool.free(large).unwrap();
        assert_eq!(pool.stats().allocated_bytes, 0);
    }
}

// A growing pool gives idle segments back before it reserves more, so a request that outgrows
// every cached segment (a KV cache or attention scores growing step by step) does not leave a
// trail of dead segments; and it grows by a share of what it holds, not by each request.
#[test]
fn a_growing_pool_returns_idle_segments_before_reserving_more() {
    let pool = host(64 * MIB, plain());
    let a = pool.allocate(40 * MIB).unwrap();
    pool.free(a).unwrap();
    // 50 MiB do not fit beside the idle 40: it goes back first, with no out-of-memory retry.
    let b = pool.allocate(50 * MIB).unwrap();
    let s = pool.stats();
    assert_eq!((s.retries, s.ooms, s.device_frees), (0, 0, 1));
    assert_eq!(s.reserved_bytes, 50 * MIB);
    pool.free(b).unwrap();

    let pool = sim(1 << 30);
    let mut size = 16 * MIB;
    while size <= 64 * MIB {
        let scores = pool.allocate(size).unwrap();
        pool.free(scores).unwrap();
        size += 2 * MIB;
    }
    let s = pool.stats();
    assert!(
        s.peak_reserved_bytes <= 64 * MIB + 64 * MIB / 4,
        "reserved peaked at {} MiB for one live 64 MiB block",
        s.peak_reserved_bytes / MIB
    );
    assert_eq!(s.device_allocs - s.device_frees, s.segments);

    // Many live blocks: new segments are a share of the pool, not one per request.
    let pool = sim(4 << 30);
    let held: Vec<_> = (0..200).map(|_| pool.allocate(3 * MIB).unwrap()).collect();
    let s = pool.stats();
    assert!(
        s.device_allocs <= 20,
        "{} device allocations",
        s.device_allocs
    );
    assert!(
        s.reserved_bytes as f64 <= 1.3 * (600 * MIB) as f64,
        "{} MiB reserved for 600",
        s.reserved_bytes / MIB
    );
    for a in held {
        pool.free(a).unwrap();
    }
}

#[test]
fn out_of_memory_error_says_what_and_where() {
    let pool = host(64 * MIB, plain().with_cpu_fallback(false));
    let held = pool.allocate(40 * MIB).unwrap();
    let err = pool.allocate(30 * MIB).unwrap_err();
    let PoolError::OutOfMemory {
        requested,
        total,
        free,
        allocated,
        reserved_unallocated,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(
        (*requested, *total, *free, *allocated, *reserved_unallocated),
        (30 * MIB, 64 * MIB, 24 * MIB, 40 * MIB, 0)
    );
    assert_eq!(
        err.to_string(),
        "out of memory on host:64.00 MiB: tried to allocate 30.00 MiB; device total 64.00 MiB, free 24.00 MiB; \
         pool has 40.00 MiB allocated and 0 B reserved but unallocated (usable limit 64.00 MiB)"
    );
    let s = pool.stats();
    assert_eq!((s.ooms, s.retries), (1, 1));
    // With fallback off, a buffer request fails too.
    assert!(matches!(
        pool.buffer(30 * MIB),
        Err(PoolError::OutOfMemory { .. })
    ));
    pool.free(held).unwrap();
}

#[test]
fn cpu_fallback_serves_what_the_device_cannot() {
    let pool = host(32 * MIB, plain());
    let held = pool.buffer(24 * MIB).unwrap();
    let mut spill = pool.buffer(16 * MIB).unwrap();
    assert_eq!(spill.location(), BufferLocation::Cpu);
    spill.write(16 * MIB - 3, b"end").unwrap();
    let mut out = [0u8; 3];
    spill.read(16 * MIB - 3, &mut out).unwrap();
    assert_eq!(&out, b"end");
    let s = pool.stats();
    assert_eq!((s.cpu_fallbacks, s.ooms, s.retries), (1, 1, 1));
    assert_eq!(pool.tracker().unwrap().count(), 2);
    drop(spill);
    drop(held);
    assert_eq!(pool.tracker().unwrap().count(), 0);
    assert_eq!(pool.stats().active_buffers, 0);
}

#[test]
fn usable_limit_honours_fraction_min_free_and_max_pool() {
    let dev: Arc<dyn DeviceMemory> = Arc::new(SimDevice::new(100 * MIB));
    let p = Pool::new(
        dev.clone(),
        MemoryConfig::default()
            .with_gpu_memory_fraction(0.5)
            .with_min_free_bytes(0),
    )
    .unwrap();
    assert_eq!(p.usable_limit(), 50 * MIB);
    let p = Pool::new(
        dev.clone(),
        MemoryConfig::default()
            .with_gpu_memory_fraction(1.0)
            .with_min_free_bytes(30 * MIB),
    )
    .unwrap();
    assert_eq!(p.usable_limit(), 70 * MIB);
    let p = Pool::new(dev, plain().with_max_pool_bytes(10 * MIB)).unwrap();
    assert_eq!(p.usable_limit(), 10 * MIB);
    assert!(p.allocate(11 * MIB).is_err());
}

#[test]
fn pressure_callbacks_fire_once_per_change() {
    let pool = sim(100 * MIB);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    pool.on_pressure_change(move |old, new| log.lock().unwrap().push((old, new)));
    assert_eq!(pool.pressure(), MemoryPressure::Low);
    let mut held = Vec::new();
    for _ in 0..97 {
        held.push(pool.allocate(MIB).unwrap());
    }
    assert_eq!(pool.pressure(), MemoryPressure::Critical);
    use MemoryPressure::*;
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(Low, Medium), (Medium, High), (High, Critical)]
    );
    for a in held {
        pool.free(a).unwrap();
    }
    assert_eq!(seen.lock().unwrap().last(), Some(&(Medium, Low)));
    assert_eq!(seen.lock().unwrap().len(), 6);
}

#[test]
fn buffers_return_on_drop_and_batches_together() {
    let pool = host(64 * MIB, plain());
    {
        let mut b = pool.buffer(1000).unwrap();
        b.write(0, b"hello").unwrap();
        assert_eq!(pool.stats().active_buffers, 1);
        let batch = pool.batch(&[10, 20 * MIB, 300]).unwrap();
        assert_eq!(batch.len(), 3);
        assert_eq!(pool.stats().active_buffers, 4);
    }
    assert_eq!(pool.stats().active_buffers, 0);
    // A batch that cannot be satisfied returns what it took.
    let fallback_off = host(16 * MIB, plain().with_cpu_fallback(false));
    assert!(fallback_off.batch(&[4 * MIB, 4 * MIB, 64 * MIB]).is_err());
    assert_eq!(fallback_off.stats().active_buffers, 0);
}

#[test]
fn double_free_is_an_error_not_corruption() {
    let pool = sim(1 << 30);
    let a = pool.allocate(100).unwrap();
    let stale = a;
    let was = pool.info(&a).unwrap();
    pool.free(a).unwrap();
    assert_eq!(pool.free(stale), Err(PoolError::NotLive(stale)));
    // The block is handed out again; the stale copy still cannot free it, nor reach it.
    let b = pool.allocate(100).unwrap();
    let now = pool.info(&b).unwrap();
    assert_eq!((now.segment, now.offset), (was.segment, was.offset));
    assert_ne!(now.id, was.id);
    // An id, once given, is the allocation's for good (the pool hands them out when asked).
    assert_ne!(now.id.0, 0);
    assert_eq!(pool.info(&b).unwrap().id, now.id);
    assert_ne!(b, stale);
    assert!(matches!(pool.free(stale), Err(PoolError::NotLive(_))));
    assert!(matches!(pool.info(&stale), Err(PoolError::NotLive(_))));
    assert!(matches!(
        pool.write(&stale, 0, b"x"),
        Err(PoolError::NotLive(_))
    ));
    let message = pool.free(stale).unwrap_err().to_string();
    assert!(message.contains("is not live in this pool"), "{message}");
    // The exclusive owner's lock-free path refuses it the same way.
    let mut pool = pool;
    let c = pool.allocate_exclusive(100).unwrap();
    let stale = c;
    pool.free_exclusive(c).unwrap();
    assert!(matches!(
        pool.free_exclusive(stale),
        Err(PoolError::NotLive(_))
    ));
    assert_eq!(pool.stats().active_buffers, 1);
    pool.free(b).unwrap();
    assert!(matches!(pool.allocate(0), Err(PoolError::ZeroSize)));
}

#[test]
fn warmup_and_max_pooled_per_bucket() {
    let pool = Pool::new(
        Arc::new(SimDevice::new(1 << 30)),
        plain().with_pre_allocate(vec![MIB, MIB, MIB]),
    )
    .unwrap();
    // Three live 1 MiB blocks at once need two 2 MiB segments, kept cached afterwards.
    assert_eq!(pool.stats().reserved_bytes, 4 * MIB);
    assert_eq!(pool.stats().allocated_bytes, 0);
    let misses = pool.stats().pool_misses;
    let a = pool.allocate(MIB).unwrap();
    assert_eq!(pool.stats().pool_misses, misses);
    pool.free(a).unwrap();

    let pool = Pool::new(
        Arc::new(SimDevice::new(1 << 30)),
        plain().with_max_pooled_per_bucket(2),
    )
    .unwrap();
    let held: Vec<_> = (0..5).map(|_| pool.allocate(30 * MIB).unwrap()).collect();
    for a in held {
        pool.free(a).unwrap();
    }
    let s = pool.stats();
    assert_eq!(s.segments, 2, "only two idle 30 MiB segments are kept");
    assert_eq!(s.device_frees, 3);
}

#[test]
fn named_buffers_grow_and_keep_contents() {
    let pool = host(256 * MIB, plain().with_growth_factor(2.0));
    let info = pool.ensure_capacity("positions", 1000).unwrap();
    assert_eq!((info.capacity, info.resized), (1000, false));
    pool.write_named("positions", 0, b"keep me").unwrap();
    assert!(!pool.ensure_capacity("positions", 900).unwrap().resized);
    let grown = pool.ensure_capacity("positions", 1500).unwrap();
    assert_eq!(
        (grown.capacity, grown.resized, grown.resizes),
        (2000, true, 1)
    );
    let mut out = [0u8; 7];
    pool.read_named("positions", 0, &mut out).unwrap();
    assert_eq!(&out, b"keep me");
    assert_eq!(
        pool.ensure_capacity("positions", 10_000).unwrap().capacity,
        10_000
    );
    assert_eq!(pool.named_buffers(), vec!["positions".to_string()]);
    pool.free_named("positions").unwrap();
    assert!(matches!(
        pool.free_named("positions"),
        Err(PoolError::UnknownName(_))
    ));
    assert_eq!(pool.stats().active_buffers, 0);
}

#[test]
fn tracker_finds_live_buffers_with_tags() {
    let pool = sim(1 << 30);
    let _a = pool.buffer_on(4096, 0, Some("kv_cache")).unwrap();
    let report = pool.tracker().unwrap().leak_report();
    assert_eq!(report.len(), 1);
    assert_eq!(report[0].tag.as_deref(), Some("kv_cache"));
    assert_eq!(report[0].size_bytes, 4096);
}

#[test]
fn emergency_cleanup_releases_stream_caches() {
    let pool = sim(1 << 30);
    let a = pool.allocate_on(MIB, 5).unwrap();
    let b = pool.allocate_on(MIB, 5).unwrap();
    pool.free(a).unwrap();
    pool.free(b).unwrap();
    assert_eq!(pool.emergency_cleanup(), 2 * MIB);
    assert_eq!(pool.stats().reserved_bytes, 0);
}

#[test]
fn multi_device_prefers_affinity_then_headroom() {
    let pools = vec![sim(100 * MIB), sim(300 * MIB)];
    let multi = MultiDevicePool::new(pools);
    let (dev, a) = multi.allocate_on_best_device(10 * MIB, "layer0").unwrap();
    assert_eq!(dev, 1, "most headroom");
    let (dev2, b) = multi.allocate_on_best_device(10 * MIB, "layer0").unwrap();
    assert_eq!(dev2, 1, "affinity");
    let (dev3, c) = multi.allocate_on_best_device(250 * MIB, "big").unwrap();
    assert_eq!(dev3, 1);
    let (dev4, d) = multi.allocate_on_best_device(50 * MIB, "other").unwrap();
    assert_eq!(dev4, 0);
    drop((a, b, c, d));
    assert_eq!(multi.pools()[1].stats().active_buffers, 0);
}

#[test]
fn trait_object_view() {
    let pool = sim(64 * MIB);
    let dynpool: &dyn GpuMemoryPool = &pool;
    assert_eq!(dynpool.total_memory(), 64 * MIB);
    assert_eq!(dynpool.backend_name(), "sim:64.00 MiB");
    let a = pool.allocate(MIB).unwrap();
    pool.free(a).unwrap();
    assert_eq!(dynpool.shrink(), 2 * MIB);
}

#[test]
fn arena_mode_carves_everything_from_one_segment() {
    let config = plain().with_initial_pool_bytes(256 * MIB);
    let pool = Pool::new(Arc::new(SimDevice::new(1 << 30)), config).unwrap();
    let a = pool.allocate(100).unwrap();
    let b = pool.allocate(30 * MIB).unwrap();
    let c = pool.allocate(3 * MIB).unwrap();
    let s = pool.stats();
    assert_eq!(
        (s.segments, s.reserved_bytes, s.device_allocs),
        (1, 256 * MIB, 1)
    );
    let offset = |x| pool.info(x).unwrap().offset;
    assert_eq!(
        (offset(&a), offset(&b), offset(&c)),
        (0, 512, 512 + 30 * MIB)
    );
    // Full: the next arena is reserved.
    let d = pool.allocate(250 * MIB).unwrap();
    assert_eq!(pool.stats().segments, 2);
    for x in [b, a, d, c] {
        pool.free(x).unwrap();
    }
    // Everything coalesces back into whole arenas.
    assert_eq!(pool.blocks().len(), 2);
    let s = pool.stats();
    assert_eq!(s.largest_free_block, 256 * MIB);
    assert!((s.fragmentation() - 0.5).abs() < 1e-9);
}

#[test]
fn injected_failures_take_the_retry_path() {
    let dev = Arc::new(FaultInjector::new(SimDevice::new(1 << 30), 0.5, 3));
    let config = MemoryConfig::default()
        .with_gpu_memory_fraction(1.0)
        .with_min_free_bytes(0)
        .with_cpu_fallback(true);
    let pool = Pool::new(dev.clone(), config).unwrap();
    let mut held = Vec::new();
    for _ in 0..50 {
        held.push(pool.buffer(30 << 20).unwrap());
    }
    let s = pool.stats();
    assert!(dev.injected() > 0);
    // Every injected failure led to a retry; what failed twice went to the CPU.
    assert!(s.retries >= s.ooms);
    assert_eq!(s.cpu_fallbacks, s.ooms);
    assert_eq!(s.active_buffers + s.cpu_fallbacks, 50);
}

/// A simulated device that says it has a driver, as a GPU does.
struct WithDriver(SimDevice);

impl DeviceMemory for WithDriver {
    fn name(&self) -> String {
        "gpu-like".into()
    }
    fn reserve(&self, bytes: u64) -> Result<Segment, DeviceError> {
        self.0.reserve(bytes)
    }
    fn release(&self, segment: SegmentHandle) -> Result<(), DeviceError> {
        self.0.release(segment)
    }
    fn mem_info(&self) -> Result<(u64, u64), DeviceError> {
        self.0.mem_info()
    }
    fn write(&self, segment: SegmentHandle, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.0.write(segment, offset, data)
    }
    fn read(&self, segment: SegmentHandle, offset: u64, out: &mut [u8]) -> Result<(), DeviceError> {
        self.0.read(segment, offset, out)
    }
}

// The driver-reserve design's reserve is the default budget on a device with a driver, and the pool says which
// rule set its limit.
#[test]
fn the_driver_reserve_bounds_the_pool_on_a_gpu() {
    let gpu = |total: u64, config: MemoryConfig| {
        Pool::new(Arc::new(WithDriver(SimDevice::new(total))), config).unwrap()
    };
    // 16 GB: 0.9 × total = 14.4 GB, total − 512 MiB = 15.46 GB, total − min(600 MB + 1.6 GB,
    // 2 GB) = 14 GB: the reserve sets it.
    let pool = gpu(16_000_000_000, MemoryConfig::default());
    assert_eq!(pool.usable_limit(), 14_000_000_000);
    assert_eq!(
        pool.limit_rule(),
        LimitRule::DriverReserve {
            reserve_bytes: 2_000_000_000
        }
    );
    // 4 GB: total − (600 MB + 400 MB) = 3 GB, below 0.9 × total = 3.6 GB.
    let pool = gpu(4_000_000_000, MemoryConfig::default());
    assert_eq!(pool.usable_limit(), 3_000_000_000);
    // Configured away, or on host memory, the fraction rules again.
    let pool = gpu(
        16_000_000_000,
        MemoryConfig::default().with_driver_reserve(false),
    );
    assert_eq!(pool.usable_limit(), 14_400_000_000);
    assert_eq!(pool.limit_rule(), LimitRule::MemoryFraction);
    let pool = host(256 * MIB, MemoryConfig::default().with_min_free_bytes(0));
    assert_eq!(pool.limit_rule(), LimitRule::MemoryFraction);
    let pool = gpu(
        16_000_000_000,
        MemoryConfig::default().with_max_pool_bytes(1 << 30),
    );
    assert_eq!(pool.limit_rule(), LimitRule::MaxPool);
}

// Expandable segments: one address range per stream and pool, mapped as demand grows. A
// request that outgrows everything (attention scores growing step by step) extends the same
// range instead of leaving dead segments, and emptying the cache unmaps the free tail.
#[test]
fn expandable_segments_grow_in_place_and_unmap_their_tail() {
    let pool = Pool::new(
        Arc::new(SimDevice::new(1 << 30)),
        plain().with_expandable_segments(true),
    )
    .unwrap();
    assert!(pool.expandable_segments());
    let kv = pool.allocate(11 * MIB).unwrap();
    let mut size = 16 * MIB;
    while size <= 64 * MIB {
        let scores = pool.allocate(size).unwrap();
        pool.free(scores).unwrap();
        size += 2 * MIB;
    }
    let s = pool.stats();
    assert_eq!(s.segments, 1, "one range for the large pool of stream 0");
    assert!(
        s.peak_reserved_bytes <= 11 * MIB + 64 * MIB + 20 * MIB,
        "reserved peaked at {} MiB",
        s.peak_reserved_bytes / MIB
    );
    // Emptying the cache unmaps the free tail down to the granule holding the live block.
    pool.empty_cache();
    assert_eq!(pool.stats().reserved_bytes, 20 * MIB);
    pool.free(kv).unwrap();
    pool.empty_cache();
    let s = pool.stats();
    assert_eq!((s.reserved_bytes, s.segments), (0, 0));
}

// On real host memory: data survives growth, freed space is reused in place, other streams get
// ranges of their own, and everything goes back to the OS.
#[test]
fn expandable_segments_on_host_memory() {
    let device = Arc::new(HostDevice::new(Some(256 * MIB)));
    let pool = Pool::new(
        device.clone() as Arc<dyn DeviceMemory>,
        plain().with_expandable_segments(true),
    )
    .unwrap();
    assert!(pool.expandable_segments());
    let a = pool.allocate(10 * MIB).unwrap();
    pool.write(&a, 0, b"first").unwrap();
    let b = pool.allocate(30 * MIB).unwrap();
    pool.write(&b, 30 * MIB - 6, b"second").unwrap();
    let (ai, bi) = (pool.info(&a).unwrap(), pool.info(&b).unwrap());
    assert_eq!(bi.segment, ai.segment, "one range grows");
    assert_eq!(bi.address, ai.address.map(|x| x + bi.offset));
    let mut out = [0u8; 5];
    pool.read(&a, 0, &mut out).unwrap();
    assert_eq!(&out, b"first");
    let reserved = pool.stats().reserved_bytes;
    assert_eq!(device.reserved(), reserved);
    pool.free(a).unwrap();
    let c = pool.allocate(8 * MIB).unwrap();
    let ci = pool.info(&c).unwrap();
    assert_eq!(
        (ci.segment, ci.offset),
        (bi.segment, 0),
        "freed space reused in place"
    );
    assert_eq!(pool.stats().reserved_bytes, reserved);
    let other = pool.allocate_on(4 * MIB, 7).unwrap();
    assert_ne!(
        pool.info(&other).unwrap().segment,
        bi.segment,
        "each stream has its own range"
    );
    for x in [b, c, other] {
        pool.free(x).unwrap();
    }
    pool.empty_cache();
    assert_eq!(pool.stats().reserved_bytes, 0);
    assert_eq!(device.reserved(), 0);
}

// A device without virtual memory gets ordinary segments, and the pool says so.
#[test]
fn expandable_segments_fall_back_where_the_device_cannot_map() {
    let pool = Pool::new(
        Arc::new(WithDriver(SimDevice::new(1 << 30))),
        plain()
            .with_expandable_segments(true)
            .with_driver_reserve(false),
    )
    .unwrap();
    assert!(!pool.expandable_segments());
    let a = pool.allocate(3 * MIB).unwrap();
    pool.free(a).unwrap();
}

// Mapping memory into an expandable segment fails like a reservation under fault injection: the
// pool retries after releasing its cache, reports out-of-memory when that fails too, and
// nothing is left mapped afterwards.
#[test]
fn expandable_segments_survive_injected_map_failures() {
    let device = Arc::new(FaultInjector::new(SimDevice::new(1 << 30), 0.3, 7));
    let pool = Pool::new(
        device.clone() as Arc<dyn DeviceMemory>,
        plain().with_expandable_segments(true),
    )
    .unwrap();
    assert!(pool.expandable_segments());
    let mut held = Vec::new();
    let mut failed = 0;
    for i in 0..200u64 {
        match pool.allocate((1 + i % 7) * 3 * MIB) {
            Ok(a) => held.push(a),
            Err(PoolError::OutOfMemory { .. }) => failed += 1,
            Err(e) => panic!("{e}"),
        }
        if held.len() > 20 {
            pool.free(held.remove(0)).unwrap();
        }
    }
    assert!(device.injected() > 0);
    assert!(failed < 200, "some allocations got through");
    for a in held {
        pool.free(a).unwrap();
    }
    pool.empty_cache();
    assert_eq!(pool.stats().reserved_bytes, 0);
    assert_eq!(device.mem_info().unwrap().0, 1 << 30);
}
