//! gpumem's pool beside the best peers, on the same allocation sequences.
//!
//! `cargo run --release --manifest-path benches/peers/Cargo.toml [ROUNDS]`
//!
//! On the first Vulkan device (lavapipe on a machine with no GPU), each sequence is replayed
//! through gpumem's pool (default configuration, with the whole heap as its budget as the peers
//! have), gpu-allocator and VMA (through vk-mem), all in their default configurations, and VMA
//! once more with 20 MiB preferred blocks (PyTorch's large segment; VMA then gives a request
//! over half a block memory of its own); and, for the bookkeeping alone, through gpumem's pool on the
//! simulated device and offset-allocator (TLSF bookkeeping, no device). Every allocate call has
//! its own timer; each figure is the median over ROUNDS (default 5) runs, the subjects' order
//! rotating between runs. Reserved bytes are read after every allocate (outside the timer). The
//! bookkeeping subjects also replay each sequence once more with a single timer around it (ns
//! per allocate or free): where the clock steps in 10 ns, that is the finer comparison.
//!
//! The sequences:
//! - `random`: RMM's random allocations, 10,000 allocations of 1 KiB – 16 MiB (uniform), at
//!   most 1 GiB live.
//! - `transformer`: TinyLlama-1.1B decoding with a contiguous KV cache that is reallocated as it
//!   grows (512 → 1,024 → 2,048 → 4,096 tokens: 11 → 22 → 44 → 88 MiB, old and new live during
//!   the copy); at each size, 512 tokens prefilled in chunks of 128, then 64 decode steps, each
//!   layer's activations allocated and freed in turn.
//! - `pytorch-trace`: the PyTorch training snapshot in `tests/fixtures/traces`, sizes / 4 so it
//!   fits a 2 GiB device.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use ash::vk;
use gpumem::alloc::{Allocation, MemoryConfig, Pool};
use gpumem::backend::{SimDevice, VulkanMemory};
use gpumem::device::DeviceMemory;
use gpumem::workload::{load_trace, random, Op, RandomParams, SizeDist};
use vk_mem::Alloc as _;

const MIB: u64 = 1 << 20;

struct Sequence {
    name: &'static str,
    ops: Vec<Op>,
    peak_live: u64,
}

fn peak_live(ops: &[Op]) -> u64 {
    let mut sizes = std::collections::HashMap::new();
    let (mut live, mut peak) = (0u64, 0u64);
    for op in ops {
        match *op {
            Op::Alloc { id, size, .. } => {
                sizes.insert(id, size);
                live += size;
                peak = peak.max(live);
            }
            Op::Free { id } => live -= sizes[&id],
        }
    }
    peak
}

/// A sequence from `ops` with every request size mapped through `size`.
fn sequence(name: &'static str, ops: Vec<Op>, size: impl Fn(u64) -> u64) -> Sequence {
    let ops: Vec<Op> = ops
        .into_iter()
        .map(|op| match op {
            Op::Alloc {
                id,
                size: s,
                stream,
            } => Op::Alloc {
                id,
                size: size(s),
                stream,
            },
            free => free,
        })
        .collect();
    Sequence {
        name,
        peak_live: peak_live(&ops),
        ops,
    }
}

fn random_sequence() -> Sequence {
    let w = random(RandomParams {
        allocations: 10_000,
        max_size: 16 * MIB,
        max_live: 1 << 30,
        dist: SizeDist::Uniform,
        seed: 42,
    });
    sequence("random", w.ops, |size| size.max(1024))
}

/// TinyLlama-1.1B: 22 layers, hidden 2,048, 32 heads of 64, 4 KV heads, FFN 5,632, vocab 32,000.
fn transformer_sequence() -> Sequence {
    let (layers, hidden, heads, kv_heads, head_dim, ffn, vocab) =
        (22u64, 2048u64, 32u64, 4u64, 64u64, 5632u64, 32_000u64);
    let kv_per_token = layers * 2 * kv_heads * head_dim * 2;
    let mut ops = Vec::new();
    let mut ids = 0u32..;
    let mut alloc = |ops: &mut Vec<Op>, size: u64| {
        let id = ids.next().unwrap_or(u32::MAX);
        ops.push(Op::Alloc {
            id,
            size,
            stream: 0,
        });
        id
    };
    let mut kv: Option<u32> = None;
    let mut context = 0u64;
    for capacity in [512u64, 1024, 2048, 4096] {
        let grown = alloc(&mut ops, capacity * kv_per_token);
        if let Some(old) = kv.replace(grown) {
            ops.push(Op::Free { id: old });
        }
        let mut pass = |ops: &mut Vec<Op>, tokens: u64, context: u64| {
            let x = alloc(ops, tokens * hidden * 2);
            for _ in 0..layers {
                let normed = alloc(ops, tokens * hidden * 2);
                let q = alloc(ops, tokens * heads * head_dim * 2);
                let k = alloc(ops, tokens * kv_heads * head_dim * 2);
                let v = alloc(ops, tokens * kv_heads * head_dim * 2);
                let scores = alloc(ops, heads * tokens * context * 4);
                let attn = alloc(ops, tokens * heads * head_dim * 2);
                for id in [scores, v, k, q, normed] {
                    ops.push(Op::Free { id });
                }
                let out = alloc(ops, tokens * hidden * 2);
                ops.push(Op::Free { id: attn });
                let gate = alloc(ops, tokens * ffn * 2);
                let up = alloc(ops, tokens * ffn * 2);
                let down = alloc(ops, tokens * hidden * 2);
                for id in [up, gate, out, down] {
                    ops.push(Op::Free { id });
                }
            }
            let logits = alloc(ops, tokens * vocab * 4);
            ops.push(Op::Free { id: logits });
            ops.push(Op::Free { id: x });
        };
        let target = capacity;
        // Prefill up to the capacity in chunks of 128, then decode 64 tokens (the next growth
        // happens before the cache overflows).
        while context + 128 <= target.saturating_sub(64) || (context == 0 && target > 0) {
            context += 128;
            pass(&mut ops, 128, context);
        }
        for _ in 0..64 {
            context += 1;
            pass(&mut ops, 1, context);
        }
    }
    if let Some(id) = kv {
        ops.push(Op::Free { id });
    }
    Sequence {
        name: "transformer",
        peak_live: peak_live(&ops),
        ops,
    }
}

fn trace_sequence() -> Sequence {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/traces/pytorch-snapshot-transformer-training.pickle");
    let w = load_trace(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    sequence("pytorch-trace", w.ops, |size| (size / 4).max(1))
}

/// One allocator under test. `alloc` returns whether it succeeded.
trait Subject {
    fn alloc(&mut self, id: u32, size: u64) -> bool;
    fn free(&mut self, id: u32);
    /// Bytes held from the device (or, for bookkeeping alone, the span handed out).
    fn reserved(&self) -> u64;
}

struct GpumemSubject {
    pool: Pool,
    live: Vec<Option<Allocation>>,
}

impl GpumemSubject {
    fn new(device: Arc<dyn DeviceMemory>) -> Self {
        // The default configuration but for the budget: the peers hold none back, so neither
        // does gpumem (its driver-reserve rule would otherwise cap it below the heap).
        let config = MemoryConfig::default()
            .with_tracking(false)
            .with_gpu_memory_fraction(1.0)
            .with_min_free_bytes(0)
            .with_driver_reserve(false);
        let pool = Pool::new(device, config).expect("gpumem pool");
        GpumemSubject {
            pool,
            live: Vec::new(),
        }
    }
}

fn slot<T>(v: &mut Vec<Option<T>>, id: u32) -> &mut Option<T> {
    let i = id as usize;
    if v.len() <= i {
        v.resize_with(i + 1, || None);
    }
    &mut v[i]
}

/// Stores a successful allocation under `id`; says whether there was one.
fn keep<T>(live: &mut Vec<Option<T>>, id: u32, made: Option<T>) -> bool {
    let ok = made.is_some();
    *slot(live, id) = made;
    ok
}

impl Subject for GpumemSubject {
    fn alloc(&mut self, id: u32, size: u64) -> bool {
        // The peers are driven through `&mut` (gpu-allocator, offset-allocator) or lock
        // inside (VMA); one owner of a gpumem pool may skip its lock the same way.
        keep(&mut self.live, id, self.pool.allocate_exclusive(size).ok())
    }
    fn free(&mut self, id: u32) {
        if let Some(a) = slot(&mut self.live, id).take() {
            self.pool.free_exclusive(a).expect("free");
        }
    }
    fn reserved(&self) -> u64 {
        self.pool.reserved_bytes()
    }
}

struct OffsetSubject {
    alloc: offset_allocator::Allocator,
    live: Vec<Option<offset_allocator::Allocation>>,
    high: u64,
}

/// offset-allocator counts in u32 units; 256 B units give it 1 TiB.
const OFFSET_UNIT: u64 = 256;

impl Subject for OffsetSubject {
    fn alloc(&mut self, id: u32, size: u64) -> bool {
        let units = size.div_ceil(OFFSET_UNIT) as u32;
        match self.alloc.allocate(units) {
            Some(a) => {
                self.high = self
                    .high
                    .max((u64::from(a.offset) + u64::from(units)) * OFFSET_UNIT);
                *slot(&mut self.live, id) = Some(a);
                true
            }
            None => false,
        }
    }
    fn free(&mut self, id: u32) {
        if let Some(a) = slot(&mut self.live, id).take() {
            self.alloc.free(a);
        }
    }
    fn reserved(&self) -> u64 {
        self.high
    }
}

/// The peers' own Vulkan instance and device, on the same physical device as gpumem's.
struct Vk {
    _entry: ash::Entry,
    instance: ash::Instance,
    physical: vk::PhysicalDevice,
    device: ash::Device,
    device_local_bits: u32,
}

impl Vk {
    fn new() -> Self {
        // SAFETY: loading the system's Vulkan loader.
        let entry = unsafe { ash::Entry::load() }.expect("Vulkan loader");
        let app = vk::ApplicationInfo::default().api_version(vk::make_api_version(0, 1, 1, 0));
        let info = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: valid create info.
        let instance = unsafe { entry.create_instance(&info, None) }.expect("instance");
        // SAFETY: valid instance.
        let physical = unsafe { instance.enumerate_physical_devices() }.expect("devices")[0];
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(0)
            .queue_priorities(&priorities)];
        let create = vk::DeviceCreateInfo::default().queue_create_infos(&queues);
        // SAFETY: valid physical device and create info.
        let device = unsafe { instance.create_device(physical, &create, None) }.expect("device");
        // SAFETY: valid physical device.
        let mem = unsafe { instance.get_physical_device_memory_properties(physical) };
        let device_local_bits = (0..mem.memory_type_count)
            .filter(|&i| {
                mem.memory_types[i as usize]
                    .property_flags
                    .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
            })
            .fold(0u32, |bits, i| bits | (1 << i));
        Vk {
            _entry: entry,
            instance,
            physical,
            device,
            device_local_bits,
        }
    }

    fn requirements(&self, size: u64) -> vk::MemoryRequirements {
        vk::MemoryRequirements {
            size,
            alignment: 256,
            memory_type_bits: self.device_local_bits,
        }
    }
}

impl Drop for Vk {
    fn drop(&mut self) {
        // SAFETY: every allocator made from them is gone.
        unsafe {
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

struct GpuAllocatorSubject<'a> {
    vk: &'a Vk,
    alloc: gpu_allocator::vulkan::Allocator,
    live: Vec<Option<gpu_allocator::vulkan::Allocation>>,
}

impl<'a> GpuAllocatorSubject<'a> {
    fn new(vk: &'a Vk) -> Self {
        let alloc =
            gpu_allocator::vulkan::Allocator::new(&gpu_allocator::vulkan::AllocatorCreateDesc {
                instance: vk.instance.clone(),
                device: vk.device.clone(),
                physical_device: vk.physical,
                debug_settings: Default::default(),
                buffer_device_address: false,
                allocation_sizes: Default::default(),
            })
            .expect("gpu-allocator");
        GpuAllocatorSubject {
            vk,
            alloc,
            live: Vec::new(),
        }
    }
}

impl Subject for GpuAllocatorSubject<'_> {
    fn alloc(&mut self, id: u32, size: u64) -> bool {
        let desc = gpu_allocator::vulkan::AllocationCreateDesc {
            name: "",
            requirements: self.vk.requirements(size),
            location: gpu_allocator::MemoryLocation::GpuOnly,
            linear: true,
            allocation_scheme: gpu_allocator::vulkan::AllocationScheme::GpuAllocatorManaged,
        };
        keep(&mut self.live, id, self.alloc.allocate(&desc).ok())
    }
    fn free(&mut self, id: u32) {
        if let Some(a) = slot(&mut self.live, id).take() {
            self.alloc.free(a).expect("free");
        }
    }
    fn reserved(&self) -> u64 {
        self.alloc.capacity()
    }
}

struct VmaSubject<'a> {
    vk: &'a Vk,
    alloc: vk_mem::Allocator,
    live: Vec<Option<vk_mem::Allocation>>,
}

impl<'a> VmaSubject<'a> {
    /// VMA with `block` bytes as its preferred block size (0: its default, 256 MiB on a heap
    /// over 1 GiB).
    fn new(vk: &'a Vk, block: u64) -> Self {
        let mut info = vk_mem::AllocatorCreateInfo::new(&vk.instance, &vk.device, vk.physical);
        info.preferred_large_heap_block_size = block;
        // SAFETY: the instance and device outlive the allocator (it borrows `vk`).
        let alloc = unsafe { vk_mem::Allocator::new(info) }.expect("VMA");
        VmaSubject {
            vk,
            alloc,
            live: Vec::new(),
        }
    }
}

impl Subject for VmaSubject<'_> {
    fn alloc(&mut self, id: u32, size: u64) -> bool {
        let info = vk_mem::AllocationCreateInfo {
            // VMA's AUTO usages need a buffer or image create info; plain memory names the flags.
            usage: vk_mem::MemoryUsage::Unknown,
            required_flags: vk::MemoryPropertyFlags::DEVICE_LOCAL,
            ..Default::default()
        };
        // SAFETY: valid requirements for this device.
        let made = unsafe {
            self.alloc
                .allocate_memory(&self.vk.requirements(size), &info)
        };
        keep(&mut self.live, id, made.ok())
    }
    fn free(&mut self, id: u32) {
        if let Some(mut a) = slot(&mut self.live, id).take() {
            // SAFETY: a live allocation of this allocator, freed once.
            unsafe { self.alloc.free_memory(&mut a) };
        }
    }
    fn reserved(&self) -> u64 {
        self.alloc
            .calculate_statistics()
            .map_or(0, |s| s.total.statistics.blockBytes)
    }
}

impl Drop for VmaSubject<'_> {
    fn drop(&mut self) {
        for id in 0..self.live.len() as u32 {
            self.free(id);
        }
    }
}

#[derive(Default, Clone, Copy)]
struct Run {
    p50: u64,
    p99: u64,
    peak_reserved: u64,
    growths: u64,
    failed: u64,
    /// Picoseconds per operation (allocate or free) of a replay with no timer per call.
    ps_per_op: u64,
}

fn replay(subject: &mut dyn Subject, seq: &Sequence) -> Run {
    let mut times = Vec::with_capacity(seq.ops.len() / 2);
    let mut run = Run::default();
    let mut reserved = subject.reserved();
    for op in &seq.ops {
        match *op {
            Op::Alloc { id, size, .. } => {
                let start = Instant::now();
                let ok = black_box(subject.alloc(id, size));
                times.push(start.elapsed().as_nanos() as u64);
                if !ok {
                    run.failed += 1;
                }
                let now = subject.reserved();
                if now > reserved {
                    run.growths += 1;
                }
                reserved = now;
                run.peak_reserved = run.peak_reserved.max(now);
            }
            Op::Free { id } => subject.free(id),
        }
    }
    times.sort_unstable();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    run.p50 = at(0.50);
    run.p99 = at(0.99);
    run
}

/// The whole sequence replayed with one timer around it: picoseconds per operation. Beside the
/// per-call p50 (quantised by the clock's step), this resolves differences well under a step.
fn replay_untimed(subject: &mut dyn Subject, seq: &Sequence) -> u64 {
    let start = Instant::now();
    for op in &seq.ops {
        match *op {
            Op::Alloc { id, size, .. } => {
                black_box(subject.alloc(id, size));
            }
            Op::Free { id } => subject.free(id),
        }
    }
    let elapsed = start.elapsed().as_nanos() as u64;
    elapsed * 1000 / seq.ops.len().max(1) as u64
}

/// The p50 of a timed call that does nothing, and the smallest step the clock takes (on a
/// virtual machine the TSC may tick in ~10 ns steps, which quantises every p50 here).
fn timer_floor() -> (u64, u64) {
    let mut times: Vec<u64> = (0..100_000)
        .map(|_| {
            let start = Instant::now();
            black_box(());
            start.elapsed().as_nanos() as u64
        })
        .collect();
    times.sort_unstable();
    // Readings come in clusters a nanosecond or two wide (20, 21 | 29, 30, 31 | 40 ...): the
    // step is the smallest distance between the commonest reading of neighbouring clusters
    // that are not rare.
    let mut clusters: Vec<(u64, usize)> = Vec::new(); // (commonest reading, its count)
    let (mut last, mut run_value, mut run) = (u64::MAX, 0, 0usize);
    let mut best = (0u64, 0usize);
    for &t in times.iter().chain(std::iter::once(&u64::MAX)) {
        if t == run_value {
            run += 1;
            continue;
        }
        if run > best.1 {
            best = (run_value, run);
        }
        if t == u64::MAX || (last != u64::MAX && t > last + 2) {
            if best.1 * 1000 >= times.len() {
                clusters.push(best);
            }
            best = (0, 0);
        }
        (last, run_value, run) = (t, t, 1);
    }
    let step = clusters
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .min()
        .unwrap_or(1);
    (times[times.len() / 2], step)
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

const SUBJECTS: [&str; 6] = [
    "gpumem",
    "gpu-allocator",
    "VMA",
    "gpumem (sim)",
    "offset-allocator",
    "VMA (20 MiB blocks)",
];

/// `PEERS_ONLY=3,4` runs only those subjects (by index in `SUBJECTS`), and
/// `PEERS_SEQUENCES=transformer` only those sequences, e.g. under a profiler.
fn wanted(which: usize) -> bool {
    std::env::var("PEERS_ONLY").map_or(true, |only| {
        only.split(',').any(|w| w.trim().parse() == Ok(which))
    })
}

fn measure(seq: &Sequence, vk: &Vk, rounds: usize) -> Vec<Run> {
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); SUBJECTS.len()];
    for round in 0..rounds {
        for k in 0..SUBJECTS.len() {
            let which = (k + round) % SUBJECTS.len();
            if !wanted(which) {
                runs[which].push(Run::default());
                continue;
            }
            let run = match which {
                0 => {
                    let device = VulkanMemory::open(0).expect("gpumem on vulkan:0");
                    replay(&mut GpumemSubject::new(Arc::new(device)), seq)
                }
                1 => replay(&mut GpuAllocatorSubject::new(vk), seq),
                2 => replay(&mut VmaSubject::new(vk, 0), seq),
                5 => replay(&mut VmaSubject::new(vk, 20 * MIB), seq),
                3 | 4 => {
                    // Bookkeeping alone: a timed replay, then an untimed one on a fresh subject.
                    let subject = |which| -> Box<dyn Subject> {
                        if which == 3 {
                            Box::new(GpumemSubject::new(Arc::new(SimDevice::new(1 << 40))))
                        } else {
                            Box::new(OffsetSubject {
                                alloc: offset_allocator::Allocator::with_max_allocs(
                                    u32::MAX,
                                    1 << 20,
                                ),
                                live: Vec::new(),
                                high: 0,
                            })
                        }
                    };
                    let mut run = replay(&mut *subject(which), seq);
                    run.ps_per_op = replay_untimed(&mut *subject(which), seq);
                    run
                }
                _ => unreachable!("{} subjects", SUBJECTS.len()),
            };
            runs[which].push(run);
        }
    }
    runs.into_iter()
        .map(|rs| Run {
            p50: median(rs.iter().map(|r| r.p50).collect()),
            p99: median(rs.iter().map(|r| r.p99).collect()),
            peak_reserved: median(rs.iter().map(|r| r.peak_reserved).collect()),
            growths: median(rs.iter().map(|r| r.growths).collect()),
            failed: rs.iter().map(|r| r.failed).max().unwrap_or(0),
            // The fastest round: a replay this short (0.1-0.3 ms) is otherwise at the mercy of
            // page faults on the subject's fresh memory and of the host.
            ps_per_op: rs.iter().map(|r| r.ps_per_op).min().unwrap_or(0),
        })
        .collect()
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("ROUNDS: a number"))
        .unwrap_or(5)
        .max(1);
    let vk = Vk::new();
    let seqs: Vec<Sequence> = [random_sequence(), transformer_sequence(), trace_sequence()]
        .into_iter()
        .filter(|s| {
            std::env::var("PEERS_SEQUENCES")
                .map_or(true, |only| only.split(',').any(|n| n.trim() == s.name))
        })
        .collect();
    let results: Vec<Vec<Run>> = seqs
        .iter()
        .map(|s| {
            eprintln!(
                "{}: {} operations, peak live {:.1} MiB",
                s.name,
                s.ops.len(),
                s.peak_live as f64 / MIB as f64
            );
            measure(s, &vk, rounds)
        })
        .collect();
    for (s, r) in seqs.iter().zip(&results) {
        for (name, run) in SUBJECTS.iter().zip(r) {
            if run.failed > 0 {
                eprintln!("{}: {name}: {} allocations failed", s.name, run.failed);
            }
        }
    }
    let row = |label: &str, cell: &dyn Fn(&[Run], &Sequence) -> String| {
        let cells: Vec<String> = results.iter().zip(&seqs).map(|(r, s)| cell(r, s)).collect();
        println!("| {label} | {} |", cells.join(" | "));
    };
    println!(
        "| | {} |",
        seqs.iter().map(|s| s.name).collect::<Vec<_>>().join(" | ")
    );
    println!("| --- |{}", " --- |".repeat(seqs.len()));
    let ratio = |a: u64, b: u64| format!("{:.2}×", a as f64 / b.max(1) as f64);
    row("alloc p50 ns, gpumem / gpu-allocator / VMA", &|r, _| {
        format!("{} / {} / {}", r[0].p50, r[1].p50, r[2].p50)
    });
    row("alloc p50, gpumem / best peer on the device", &|r, _| {
        ratio(r[0].p50, r[1].p50.min(r[2].p50))
    });
    row("alloc p99 ns, gpumem / gpu-allocator / VMA", &|r, _| {
        format!("{} / {} / {}", r[0].p99, r[1].p99, r[2].p99)
    });
    row("alloc p99, gpumem / VMA", &|r, _| ratio(r[0].p99, r[2].p99));
    row(
        "bookkeeping alloc p50 ns, gpumem on sim / offset-allocator",
        &|r, _| {
            format!(
                "{} / {} ({})",
                r[3].p50,
                r[4].p50,
                ratio(r[3].p50, r[4].p50)
            )
        },
    );
    row(
        "bookkeeping replay ns per operation (untimed, fastest round), gpumem on sim / offset-allocator",
        &|r, _| {
            format!(
                "{:.1} / {:.1} ({})",
                r[3].ps_per_op as f64 / 1000.0,
                r[4].ps_per_op as f64 / 1000.0,
                ratio(r[3].ps_per_op, r[4].ps_per_op)
            )
        },
    );
    let fmt_ratio = |run: &Run, s: &Sequence| {
        format!(
            "{:.3}",
            run.peak_reserved as f64 / s.peak_live.max(1) as f64
        )
    };
    row("peak reserved / peak live: gpumem", &|r, s| {
        fmt_ratio(&r[0], s)
    });
    row("… gpu-allocator / VMA / VMA with 20 MiB blocks", &|r, s| {
        format!(
            "{} / {} / {}",
            fmt_ratio(&r[1], s),
            fmt_ratio(&r[2], s),
            fmt_ratio(&r[5], s)
        )
    });
    row("… gpumem on sim", &|r, s| fmt_ratio(&r[3], s));
    row(
        "device allocations: gpumem / gpu-allocator / VMA / VMA with 20 MiB blocks",
        &|r, _| {
            format!(
                "{} / {} / {} / {}",
                r[0].growths, r[1].growths, r[2].growths, r[5].growths
            )
        },
    );
    let (floor, step) = timer_floor();
    println!(
        "\nTimer: an empty timed call's p50 is {floor} ns, and the clock moves in steps of about \
         {step} ns; every p50 above includes the first and is rounded to the second."
    );
    println!(
        "{rounds} rounds; peak live: {}",
        seqs.iter()
            .map(|s| format!("{} {:.1} MiB", s.name, s.peak_live as f64 / MIB as f64))
            .collect::<Vec<_>>()
            .join(", ")
    );
}
