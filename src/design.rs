//! The names the user's design documents give the library, collected once.
//!
//! Five design documents came before this crate; code written against them calls these
//! names, and each one is also the library's own item, re-exported here unchanged.
//! `docs/design.md` describes each document, what the crate kept from it and where it
//! differs:
//!
//! - the **unified-pool design**: a common pool trait ([`GpuMemoryPool`]), statistics
//!   ([`MemoryStats`]), tracking ([`AllocationTracker`]), pressure levels
//!   ([`MemoryPressure`]), backend discovery ([`best_available_backend`],
//!   [`print_backend_summary`], [`BackendInfo`], [`DeviceInfo`]), the Llama-style estimate
//!   ([`estimate_inference_memory`] and its parts) and the planner's two calls
//!   ([`select_backend_for_model`], [`init_backend_with_memory_check`]);
//! - the **driver-reserve design**: the reserve kept back on a GPU ([`DriverReserve`]) and
//!   one pool a device ([`MultiDevicePool`]);
//! - the **consolidated-manager design**: growable named buffers
//!   ([`Pool::ensure_capacity`], [`NamedInfo`]) and ping-pong transfers
//!   ([`crate::alloc::transfer`]);
//! - the **segment-caching design**: the segment and block caching pool ([`Pool`]);
//! - the **RAII-pool design**: buffers returned when dropped ([`Buffer`]) and the emergency
//!   clean-up ([`Pool::emergency_cleanup`]).
//!
//! ```
//! use gpumem::design::{estimate_inference_memory, select_backend_for_model};
//!
//! let e = estimate_inference_memory(4096, 11008, 32, 32000, 32, 32, 4096, 2);
//! let (backend, device) = select_backend_for_model(e.model_bytes as u64 / 1024).unwrap();
//! println!("a thousandth of Llama-2-7B goes to {backend}:{device}");
//! ```

pub use crate::alloc::{
    AllocationTracker, Buffer, GpuMemoryPool, MemoryPressure, MemoryStats, MultiDevicePool,
    NamedInfo, Pool,
};
pub use crate::backend::{best_available_backend, print_backend_summary, BackendInfo, DeviceInfo};
pub use crate::device::DriverReserve;
pub use crate::model::{estimate_kv_cache_memory, estimate_model_memory, InferenceMemoryEstimate};
pub use crate::plan::{
    estimate_inference_memory, init_backend_with_memory_check, select_backend_for_model,
};
