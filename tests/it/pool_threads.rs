//! Many threads allocating, writing, verifying and freeing on real host memory at once.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use gpumem::alloc::{MemoryConfig, Pool};
use gpumem::backend::HostDevice;
use gpumem::device::DeviceMemory;

const THREADS: u64 = 8;
const OPS_PER_THREAD: u64 = 100_000;

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Bytes a buffer should hold: a window into a per-thread random pattern chosen by its id.
fn expected(pattern: &[u8], id: u64, len: usize) -> &[u8] {
    let start = (id as usize * 64) % (pattern.len() / 2);
    &pattern[start..start + len]
}

#[test]
fn eight_threads_no_corruption_no_leaks() {
    let device = Arc::new(HostDevice::new(Some(2 << 30)));
    let config = MemoryConfig::default()
        .with_gpu_memory_fraction(1.0)
        .with_min_free_bytes(0)
        .with_cpu_fallback(false);
    let pool = Pool::new(device.clone() as Arc<dyn DeviceMemory>, config).unwrap();
    let corruptions = AtomicU64::new(0);
    let ops = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (pool, corruptions, ops) = (&pool, &corruptions, &ops);
            scope.spawn(move || {
                let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ (t + 1));
                let pattern: Vec<u8> = (0..(2 << 20)).map(|_| rng.next() as u8).collect();
                let mut live = Vec::new();
                let stream = (t % 3) as u32;
                for op in 0..OPS_PER_THREAD {
                    let allocate = live.is_empty() || (live.len() < 48 && rng.next() % 100 < 55);
                    if allocate {
                        // Mostly small, sometimes up to 1 MiB, rarely up to 8 MiB.
                        let size = match rng.next() % 100 {
                            0..=79 => 1 + rng.next() % 4096,
                            80..=97 => 4097 + rng.next() % (1 << 20),
                            _ => (1 << 20) + rng.next() % (7 << 20),
                        };
                        let a = pool.allocate_on(size, stream).unwrap();
                        let id = pool.info(&a).unwrap().id.0;
                        // Whole buffer when small, head and tail windows when large.
                        let len = size.min(64 << 10) as usize;
                        pool.write(&a, 0, expected(&pattern, id, len)).unwrap();
                        pool.write(&a, size - len as u64, expected(&pattern, id + 1, len))
                            .unwrap();
                        live.push((a, id, size, len));
                    } else {
                        let pick = (rng.next() % live.len() as u64) as usize;
                        let (a, id, size, len) = live.swap_remove(pick);
                        let mut head = vec![0u8; len];
                        let mut tail = vec![0u8; len];
                        pool.read(&a, size - len as u64, &mut tail).unwrap();
                        pool.read(&a, 0, &mut head).unwrap();
                        if size > 2 * len as u64 && head != expected(&pattern, id, len) {
                            corruptions.fetch_add(1, Ordering::Relaxed);
                        }
                        if tail != expected(&pattern, id + 1, len) {
                            corruptions.fetch_add(1, Ordering::Relaxed);
                        }
                        pool.free(a).unwrap();
                    }
                    if op % 10_000 == 9_999 {
                        pool.synchronize(stream);
                    }
                    ops.fetch_add(1, Ordering::Relaxed);
                }
                for (a, _, _, _) in live {
                    pool.free(a).unwrap();
                }
            });
        }
    });
    assert_eq!(ops.load(Ordering::Relaxed), THREADS * OPS_PER_THREAD);
    assert_eq!(corruptions.load(Ordering::Relaxed), 0);
    let stats = pool.stats();
    assert_eq!(stats.active_buffers, 0, "leaked buffers");
    assert_eq!(stats.allocated_bytes, 0);
    assert_eq!(stats.ooms, 0);
    assert!(stats.hit_rate() > 0.99, "{stats}");
    pool.emergency_cleanup();
    assert_eq!(pool.stats().reserved_bytes, 0);
    assert_eq!(device.reserved(), 0, "segments not returned to the device");
}
