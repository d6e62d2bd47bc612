//! Chunked transfers between pool allocations and the host, blocking and double-buffered, on
//! real devices (host RAM, PoCL, lavapipe, the stand-in CUDA driver): every byte verified both
//! ways, chunks in order, a failing device ends the transfer with its error.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;

use gpumem::alloc::transfer::{download, upload, Buffering};
use gpumem::alloc::{MemoryConfig, Pool};
use gpumem::backend::{open_device, OpenclMemory, VulkanMemory, VulkanOptions};
use gpumem::device::DeviceMemory;

const MIB: usize = 1 << 20;

fn byte(i: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

/// Uploads a pattern and downloads it back, both ways and both modes, on `device`;
/// `device_async`: whether double buffering should use the device's own asynchronous copies.
fn round_trips(device: Arc<dyn DeviceMemory>, device_async: bool) {
    // The stand-in CUDA device is 256 MiB, less than the driver-reserve design's driver reserve.
    let config = MemoryConfig::default()
        .with_min_free_bytes(0)
        .with_driver_reserve(false);
    let pool = Pool::new(device, config).unwrap();
    // Not a multiple of the chunk: the last chunk is short.
    let len = (8 * MIB - 1000) as u64;
    let a = pool.allocate(len).unwrap();
    let chunk = MIB;
    for double in [false, true] {
        let fill = |at: u64, buf: &mut [u8]| {
            for (k, b) in buf.iter_mut().enumerate() {
                *b = byte(at + k as u64 + u64::from(double));
            }
        };
        let mode = |double| {
            if double {
                Buffering::Double
            } else {
                Buffering::Blocking
            }
        };
        let up = upload(&pool, &a, len, chunk, mode(double), fill).unwrap();
        assert_eq!((up.bytes, up.chunks), (len, 8));
        assert_eq!(up.device_async, double && device_async);
        for read_double in [false, true] {
            let mut next = 0u64;
            let mut bad = 0u64;
            let check = |at: u64, buf: &[u8]| {
                assert_eq!(at, next, "chunks out of order");
                next += buf.len() as u64;
                bad += buf
                    .iter()
                    .enumerate()
                    .filter(|(k, b)| **b != byte(at + *k as u64 + u64::from(double)))
                    .count() as u64;
            };
            let down = download(&pool, &a, len, chunk, mode(read_double), check).unwrap();
            assert_eq!((down.bytes, down.chunks, next, bad), (len, 8, len, 0));
            assert_eq!(down.device_async, read_double && device_async);
            assert!((0.0..=1.0).contains(&down.overlap()));
        }
    }
    pool.free(a).unwrap();
}

#[test]
fn host_memory_round_trips() {
    round_trips(open_device(&"host:64MiB".parse().unwrap()).unwrap(), false);
}

#[test]
fn opencl_round_trips() {
    if common::backend_present(
        "opencl",
        OpenclMemory::open(0).map(|_| ()).map_err(|e| e.to_string()),
    ) {
        round_trips(open_device(&"opencl:0".parse().unwrap()).unwrap(), true);
    }
}

#[test]
fn vulkan_round_trips() {
    if common::backend_present(
        "vulkan",
        VulkanMemory::open(0).map(|_| ()).map_err(|e| e.to_string()),
    ) {
        round_trips(open_device(&"vulkan:0".parse().unwrap()).unwrap(), false);
        // Device-local memory that is not host-visible (a discrete GPU's), forced on lavapipe:
        // staged copies on the transfer queue, fences waited for, are the asynchronous path.
        let staged = VulkanMemory::open_with(
            0,
            VulkanOptions {
                force_staging: true,
            },
        )
        .unwrap();
        round_trips(Arc::new(staged), true);
    }
}

// CUDA's asynchronous copies (a stream, events, page-locked staging) on the stand-in driver.
#[test]
fn cuda_round_trips_on_the_stand_in_driver() {
    let dir = common::fake_gpu_drivers("transfers-cuda", &[]);
    if common::in_child_with_drivers(
        concat!(module_path!(), "::cuda_round_trips_on_the_stand_in_driver"),
        &dir,
        &[("GPUMEM_FAKE_TOTAL", "268435456")],
    ) {
        let device = open_device(&"cuda:0".parse().unwrap()).unwrap();
        assert!(device.async_copies().is_some());
        round_trips(device.clone(), true);
        assert_eq!(device.mem_info().unwrap(), (256 << 20, 256 << 20));
    }
}

// HIP's asynchronous copies (hipMemcpyAsync on a stream, events) on the stand-in runtime.
#[test]
fn hip_round_trips_on_the_stand_in_runtime() {
    let dir = common::fake_driver("fake_hip.c", "libamdhip64.so", "transfers-hip", &[]);
    if common::in_child_with_drivers(
        concat!(module_path!(), "::hip_round_trips_on_the_stand_in_runtime"),
        &dir,
        &[("GPUMEM_FAKE_TOTAL", "268435456")],
    ) {
        let device = open_device(&"rocm:0".parse().unwrap()).unwrap();
        assert!(device.async_copies().is_some());
        round_trips(device.clone(), true);
        assert_eq!(device.mem_info().unwrap(), (256 << 20, 256 << 20));
    }
}

// A device that cannot copy (sim holds no data) ends the transfer with its error in both
// modes; nothing hangs, and the allocation is still the caller's to free.
#[test]
fn a_failing_device_ends_the_transfer() {
    let device = open_device(&"sim:1GiB".parse().unwrap()).unwrap();
    let pool = Pool::new(device, MemoryConfig::default()).unwrap();
    let a = pool.allocate(4 * MIB as u64).unwrap();
    let len = pool.info(&a).unwrap().size;
    assert!(download(&pool, &a, len, MIB, Buffering::Double, |_, _| {}).is_err());
    assert!(upload(&pool, &a, len, MIB, Buffering::Double, |_, _| {}).is_err());
    assert!(download(&pool, &a, len, 0, Buffering::Blocking, |_, _| {}).is_err());
    pool.free(a).unwrap();
    assert_eq!(pool.stats().active_buffers, 0);
}

// Typed transfers: f32 up and back through host memory, indices per chunk, and more elements
// than the allocation holds refused.
#[test]
fn typed_f32_round_trip() {
    use gpumem::alloc::transfer::{download_typed, upload_typed};
    let device = open_device(&"host:64MiB".parse().unwrap()).unwrap();
    let pool = Pool::new(device, MemoryConfig::default().with_min_free_bytes(0)).unwrap();
    let count = 100_000u64;
    let a = pool.allocate(count * 4).unwrap();
    upload_typed::<f32>(&pool, &a, count, 4096, Buffering::Double, |first, xs| {
        for (k, x) in xs.iter_mut().enumerate() {
            *x = (first + k as u64) as f32 * 0.5;
        }
    })
    .unwrap();
    let mut seen = 0u64;
    download_typed::<f32>(&pool, &a, count, 4096, Buffering::Double, |first, xs| {
        assert_eq!(first, seen);
        for (k, x) in xs.iter().enumerate() {
            assert_eq!(*x, (first + k as u64) as f32 * 0.5);
        }
        seen += xs.len() as u64;
    })
    .unwrap();
    assert_eq!(seen, count);
    // More elements than the allocation holds: refused before anything moves.
    let past = download_typed::<f32>(
        &pool,
        &a,
        pool.info(&a).unwrap().size / 4 + 1,
        4096,
        Buffering::Double,
        |_, _| panic!("nothing may be delivered"),
    );
    assert!(past.unwrap_err().to_string().contains("outside a segment"));
    pool.free(a).unwrap();
}

// Named buffers (the consolidated-manager design's positions buffer): typed transfers by name, within the capacity,
// an unknown name refused.
#[test]
fn named_buffers_transfer_by_name() {
    use gpumem::alloc::transfer::{download_named, upload_named};
    let device = open_device(&"host:64MiB".parse().unwrap()).unwrap();
    let pool = Pool::new(device, MemoryConfig::default().with_min_free_bytes(0)).unwrap();
    let count = 10_000u64;
    let value = |i: u64| i as u32 ^ 0xA5A5;
    pool.ensure_capacity("positions", count * 4).unwrap();
    let fill = |first: u64, xs: &mut [u32]| {
        for (k, x) in xs.iter_mut().enumerate() {
            *x = value(first + k as u64);
        }
    };
    upload_named::<u32>(&pool, "positions", count, 1000, Buffering::Double, fill).unwrap();
    let mut seen = 0u64;
    let check = |first: u64, xs: &[u32]| {
        for (k, x) in xs.iter().enumerate() {
            assert_eq!(*x, value(first + k as u64));
            seen += 1;
        }
    };
    let report = download_named(&pool, "positions", count, 1000, Buffering::Double, check);
    assert_eq!((seen, report.unwrap().chunks), (count, 10));
    let past = download_named::<u32>(
        &pool,
        "positions",
        count + 1,
        1000,
        Buffering::Double,
        |_, _| panic!("nothing may be delivered"),
    );
    assert!(past.is_err());
    let unknown = upload_named::<u32>(&pool, "velocities", 1, 1, Buffering::Blocking, |_, _| {});
    assert!(unknown.unwrap_err().to_string().contains("velocities"));
    pool.free_named("positions").unwrap();
}
