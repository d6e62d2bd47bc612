//! gpumem: know your GPU memory before you deploy.
//!
//! The library behind the `gpumem` command: what memory a machine has, what a model needs,
//! where it fits, and a caching pool allocator that runs on every device it finds. It computes
//! and never prints; the binary's `output` layer alone turns its typed results into tables,
//! sentences and JSON.
//!
//! # Layout
//! Data flows one way, from the command line down to the devices and back up as reports:
//!
//! - `cli` (clap types) → `commands` (orchestration; `commands::options` is the one place
//!   flags become library options) → the library modules below → `output`.
//! - [`model`]: model shapes from the catalog, `config.json`, GGUF and safetensors, apart from
//!   any engine: the architecture, its parameters and weights.
//! - [`plan`]: where a requirement fits over a set of devices (`select`), and each engine's own
//!   accounting in [`plan::engines`] (llama.cpp, vLLM, PyTorch), with the memory
//!   [`plan::engines::estimate`] of each part.
//! - [`workload`]: allocation sequences (synthetic, traces) and the `bench-alloc` and `stress`
//!   drivers.
//! - [`alloc`]: the one pool allocator.
//! - [`backend`]: device discovery, and each backend's raw memory (host, sim, OpenCL, Vulkan,
//!   CUDA, HIP).
//! - [`device`]: the device contract ([`device::DeviceMemory`]) below both `alloc` and
//!   `backend`.
//!
//! The binary's own layers (`cli`, `commands`, `output`, `error`) sit behind the default `cli`
//! feature: with `default-features = false` the library builds without clap, comfy-table,
//! indicatif or env_logger, for a program that embeds the pool or the planner.
//!
//! Several functions keep the names the design documents give them —
//! [`backend::best_available_backend`], [`plan::estimate_inference_memory`],
//! [`plan::select_backend_for_model`], [`plan::init_backend_with_memory_check`],
//! [`alloc::GpuMemoryPool`] — so that code written against those documents works unchanged;
//! [`design`] collects them all, and `docs/design.md` describes the documents.
//!
//! # Discovering devices
//! Every backend is probed at once, each under a timeout; one that is missing or broken is
//! reported with its reason instead of failing the call.
//!
//! ```
//! use gpumem::backend::{discover_backends, recommend, BackendKind};
//!
//! let found = discover_backends();
//! // The CPU backend is always there; the others say why when they are not.
//! let cpu = found.iter().find(|b| b.backend == BackendKind::Cpu).unwrap();
//! assert!(cpu.available && cpu.devices[0].total_bytes > 0);
//! for b in found.iter().filter(|b| !b.available) {
//!     assert!(b.reason.is_some());
//! }
//! // Hardware GPUs first (most free memory wins), then system RAM.
//! let best = recommend(&found).unwrap();
//! println!("recommended: {}:{}", best.backend, best.device);
//! ```
//!
//! # Estimating a model
//! The unified-pool design's Llama-style formula; [`plan::engines::estimate::estimate`] gives the full breakdown for
//! any [`model::ModelArch`] (catalog, config.json, GGUF, safetensors).
//!
//! ```
//! use gpumem::plan::estimate_inference_memory;
//!
//! // Llama-2-7B's shape, bf16 weights, 4096 tokens of context.
//! let e = estimate_inference_memory(4096, 11008, 32, 32000, 32, 32, 4096, 2);
//! assert_eq!(e.model_bytes, 6_738_415_616 * 2);
//! // K and V: 2 × 32 layers × 32 heads × 128 × 4096 tokens × 2 bytes.
//! assert_eq!(e.kv_cache_bytes, 2 * 32 * 32 * 128 * 4096 * 2);
//! assert!(e.total_bytes > e.model_bytes + e.kv_cache_bytes);
//! ```
//!
//! # Choosing and opening a device
//! ```
//! use gpumem::plan::{init_backend_with_memory_check, select_backend_for_model, Rejected};
//!
//! // 1 MiB fits somewhere on any machine (the CPU at least).
//! let (backend, device) = select_backend_for_model(1 << 20).unwrap();
//! println!("1 MiB goes to {backend}:{device}");
//!
//! // Opening checks free memory now; the error lists every backend and device tried.
//! let dev = init_backend_with_memory_check(None, 1 << 20).unwrap();
//! assert!(dev.mem_info().unwrap().0 >= 1 << 20);
//! let err = init_backend_with_memory_check(None, u64::MAX / 2).err().unwrap();
//! assert!(err
//!     .tried
//!     .iter()
//!     .any(|(_, why)| matches!(why, Rejected::TooSmall { .. })));
//! ```
//!
//! # A pool and its buffers
//! [`alloc::Pool`] works over any [`device::DeviceMemory`]: real host memory here, a GPU from
//! [`backend::open_device`] in production. A [`alloc::Buffer`] goes back to the pool's cache
//! when dropped, so the next request of a similar size costs no device allocation.
//!
//! ```
//! use std::sync::Arc;
//! use gpumem::alloc::{MemoryConfig, Pool};
//! use gpumem::backend::HostDevice;
//!
//! // 64 MiB of real host memory, all of it usable by the pool.
//! let device = Arc::new(HostDevice::new(Some(64 << 20)));
//! let config = MemoryConfig::default()
//!     .with_gpu_memory_fraction(1.0)
//!     .with_min_free_bytes(0);
//! let pool = Pool::new(device, config).unwrap();
//!
//! let mut a = pool.buffer(1000).unwrap();
//! a.write(0, b"weights").unwrap();
//! let mut back = [0u8; 7];
//! a.read(0, &mut back).unwrap();
//! assert_eq!(&back, b"weights");
//! assert_eq!(a.len(), 1000);
//! // Blocks are whole 512-byte units.
//! assert_eq!(pool.info(a.allocation().unwrap()).unwrap().size, 1024);
//! drop(a);
//!
//! let b = pool.buffer(900).unwrap(); // served from the cache
//! let stats = pool.stats();
//! assert_eq!(stats.device_allocs, 1);
//! assert!(stats.hit_rate() > 0.0);
//! drop(b);
//! pool.empty_cache();
//! assert_eq!(pool.stats().reserved_bytes, 0);
//! ```
//!
//! # Raw allocations
//! An [`alloc::Allocation`] is an 8-byte handle (a block and its generation), what an engine
//! keeps per tensor; [`alloc::Pool::info`] says where it is. A copy kept past its free is
//! refused, even once the block is handed out again.
//! ```
//! # use std::sync::Arc;
//! # use gpumem::alloc::{MemoryConfig, Pool, PoolError};
//! # use gpumem::backend::SimDevice;
//! let pool = Pool::new(Arc::new(SimDevice::new(1 << 30)), MemoryConfig::default()).unwrap();
//! let a = pool.allocate(3000).unwrap();
//! assert_eq!(std::mem::size_of_val(&a), 8);
//! let info = pool.info(&a).unwrap();
//! assert_eq!((info.requested, info.size), (3000, 3072));
//! let stale = a;
//! pool.free(a).unwrap();
//! let b = pool.allocate(3000).unwrap(); // the same block, a new generation
//! assert_eq!(pool.info(&b).unwrap().offset, info.offset);
//! assert_eq!(pool.free(stale), Err(PoolError::NotLive(stale)));
//! pool.free(b).unwrap();
//! ```
//!
//! # Named buffers that grow
//! ```
//! # use std::sync::Arc;
//! # use gpumem::alloc::{MemoryConfig, Pool};
//! # use gpumem::backend::HostDevice;
//! # let pool = Pool::new(
//! #     Arc::new(HostDevice::new(Some(64 << 20))),
//! #     MemoryConfig::default().with_gpu_memory_fraction(1.0).with_min_free_bytes(0),
//! # ).unwrap();
//! // A KV cache that grows with the conversation keeps its contents.
//! pool.ensure_capacity("kv", 4096).unwrap();
//! pool.write_named("kv", 0, b"first turn").unwrap();
//! let grown = pool.ensure_capacity("kv", 1 << 20).unwrap();
//! assert!(grown.resized && grown.capacity >= 1 << 20);
//! let mut back = [0u8; 10];
//! pool.read_named("kv", 0, &mut back).unwrap();
//! assert_eq!(&back, b"first turn");
//! pool.free_named("kv").unwrap();
//! ```
//!
//! # Presets, pressure callbacks and the leak report
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//! use gpumem::alloc::{MemoryConfig, MemoryPressure, Pool, Preset};
//! use gpumem::backend::SimDevice;
//!
//! // Presets are starting points; builder calls adjust them.
//! let config = MemoryConfig::from_preset(Preset::Inference, 0)
//!     .with_gpu_memory_fraction(1.0)
//!     .with_min_free_bytes(0)
//!     .with_tracking(true);
//! assert_eq!(config, MemoryConfig::for_inference()
//!     .with_gpu_memory_fraction(1.0)
//!     .with_min_free_bytes(0)
//!     .with_tracking(true));
//!
//! // A simulated 100 MiB card: capacity only, nothing is reserved.
//! let pool = Pool::new(Arc::new(SimDevice::new(100 << 20)), config).unwrap();
//! let changes = Arc::new(AtomicUsize::new(0));
//! let seen = changes.clone();
//! pool.on_pressure_change(move |_old, _new| {
//!     seen.fetch_add(1, Ordering::Relaxed);
//! });
//! let big = pool.allocate(90 << 20).unwrap();
//! assert_eq!(pool.pressure(), MemoryPressure::High);
//! assert_eq!(changes.load(Ordering::Relaxed), 1); // Low → High, one call
//!
//! // Whatever is still allocated is what the leak report lists.
//! let report = pool.tracker().unwrap().leak_report();
//! assert_eq!(report.len(), 1);
//! assert_eq!(report[0].size_bytes, 90 << 20);
//! pool.free(big).unwrap();
//! assert!(pool.tracker().unwrap().leak_report().is_empty());
//! ```

// A cast that can lose bits needs a reason where it is allowed.
#![warn(clippy::cast_possible_truncation)]

// Device sizes and offsets are u64 and host buffers are indexed by usize: on a 64-bit target
// every u64 → usize conversion is lossless, which the casts allowed across the crate rely on.
#[cfg(not(target_pointer_width = "64"))]
compile_error!("gpumem needs a 64-bit target");

pub mod alloc;
pub mod backend;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "cli")]
pub mod commands;
pub mod design;
pub mod device;
#[cfg(feature = "cli")]
pub mod error;
pub mod exit;
pub mod hub;
pub mod input;
pub mod model;
#[cfg(feature = "cli")]
pub mod output;
pub mod plan;
pub mod spelling;
pub mod units;
pub mod workload;
