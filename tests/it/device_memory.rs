//! The pool's raw device trait on every backend that allocates: real OpenCL (PoCL) and Vulkan
//! (lavapipe) devices, and the stand-in CUDA and HIP drivers.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;

use gpumem::alloc::{MemoryConfig, Pool};
use gpumem::backend::{open_device, DeviceSpec, OpenclMemory, VulkanMemory, VulkanOptions};
use gpumem::device::{DeviceError, DeviceMemory};

const MIB: u64 = 1 << 20;

/// Reserve, write, read back, bounds, release, double release, capacity, and a pool on top;
/// free memory must come back to within `slack` bytes.
fn exercise_with(device: Arc<dyn DeviceMemory>, slack: u64) {
    let (free0, total) = device.mem_info().unwrap();
    assert!(total > 0 && free0 <= total, "{free0} / {total}");
    assert!(device.alignment().is_power_of_two());
    let seg = device.reserve(4 * MIB).unwrap();
    assert_eq!(seg.size, 4 * MIB);
    let pattern: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
    device.write(seg.handle, 0, &pattern).unwrap();
    device.write(seg.handle, 4 * MIB - 8192, &pattern).unwrap();
    let mut back = vec![0u8; 8192];
    device.read(seg.handle, 4 * MIB - 8192, &mut back).unwrap();
    assert_eq!(back, pattern);
    device.read(seg.handle, 0, &mut back).unwrap();
    assert_eq!(back, pattern);
    assert!(matches!(
        device.write(seg.handle, 4 * MIB - 1, &[1, 2]),
        Err(DeviceError::OutOfBounds { .. })
    ));
    let (free1, _) = device.mem_info().unwrap();
    // Host-backed devices' free memory moves with the rest of the host: within the slack.
    assert!(free1 <= free0 + slack, "free grew from {free0} to {free1}");
    device.release(seg.handle).unwrap();
    assert_eq!(
        device.release(seg.handle),
        Err(DeviceError::InvalidSegment(seg.handle))
    );
    assert!(matches!(
        device.reserve(total + MIB),
        Err(DeviceError::OutOfMemory { .. })
    ));

    // The pool on this device: real allocations, data checked, nothing left behind.
    // The stand-in drivers' devices are 256 MiB, less than the driver-reserve design's driver reserve.
    let config = MemoryConfig::default()
        .with_min_free_bytes(0)
        .with_driver_reserve(false);
    let pool = Pool::new(device.clone(), config).unwrap();
    let mut held = Vec::new();
    for i in 0..64u64 {
        let size = 1 + (i * 37_993) % (3 * MIB);
        let a = pool.allocate(size).unwrap();
        pool.write(&a, 0, &i.to_le_bytes()).unwrap();
        held.push((a, i));
    }
    for (a, i) in held {
        let mut tag = [0u8; 8];
        pool.read(&a, 0, &mut tag).unwrap();
        assert_eq!(u64::from_le_bytes(tag), i);
        pool.free(a).unwrap();
    }
    assert!(pool.stats().reserved_bytes > 0);
    pool.empty_cache();
    assert_eq!(pool.stats().reserved_bytes, 0);
    let (free_end, _) = device.mem_info().unwrap();
    assert!(
        free_end + slack >= free0,
        "free memory not back: {free_end} vs {free0}"
    );
}

/// [`exercise_with`] on a device with memory of its own: free memory back to within 1 MiB.
fn exercise(device: Arc<dyn DeviceMemory>) {
    exercise_with(device, MIB);
}

/// [`exercise_with`] on a device whose memory is host RAM (PoCL, lavapipe): its free memory is
/// capped by the host's, which other processes (and this one's heap) move, so the check
/// allows 1 % of the total, as `stress` does.
fn exercise_host_backed(device: Arc<dyn DeviceMemory>) {
    let total = device.mem_info().unwrap().1;
    exercise_with(device, (total / 100).max(MIB));
}

fn opencl_present() -> bool {
    common::backend_present(
        "opencl",
        OpenclMemory::open(0).map(|_| ()).map_err(|e| e.to_string()),
    )
}

fn vulkan_present() -> bool {
    common::backend_present(
        "vulkan",
        VulkanMemory::open(0).map(|_| ()).map_err(|e| e.to_string()),
    )
}

#[test]
fn opencl_device_memory() {
    if opencl_present() {
        exercise_host_backed(open_device(&"opencl:0".parse().unwrap()).unwrap());
    }
}

#[test]
fn vulkan_device_memory_mapped() {
    if vulkan_present() {
        exercise_host_backed(open_device(&"vulkan:0".parse().unwrap()).unwrap());
    }
}

#[test]
fn vulkan_device_memory_through_staging_copies() {
    if vulkan_present() {
        let device = VulkanMemory::open_with(
            0,
            VulkanOptions {
                force_staging: true,
            },
        )
        .unwrap();
        exercise_host_backed(Arc::new(device));
    }
}

#[test]
fn host_and_sim_devices() {
    exercise(open_device(&"host:256MiB".parse().unwrap()).unwrap());
    let sim = open_device(&DeviceSpec::Sim {
        capacity: 80 << 30,
        gpu: None,
    })
    .unwrap();
    assert!(sim.simulated());
    assert_eq!(sim.mem_info().unwrap(), (80 << 30, 80 << 30));
}

#[test]
fn unknown_indices_and_monitor_only_backends_are_refused() {
    let err = open_device(&"nvml:0".parse().unwrap()).err().unwrap();
    assert!(err.to_string().contains("NVML only monitors"), "{err}");
    if opencl_present() {
        let err = open_device(&"opencl:99".parse().unwrap()).err().unwrap();
        assert!(
            err.to_string()
                .starts_with("cannot open opencl:99: probe failed: no OpenCL device 99"),
            "{err}"
        );
    }
}

#[test]
fn cuda_device_memory_on_the_stand_in_driver() {
    let dir = common::fake_gpu_drivers("memory-cuda", &[]);
    if common::in_child_with_drivers(
        concat!(
            module_path!(),
            "::cuda_device_memory_on_the_stand_in_driver"
        ),
        &dir,
        &[("GPUMEM_FAKE_TOTAL", "268435456")],
    ) {
        let device = open_device(&"cuda:0".parse().unwrap()).unwrap();
        assert_eq!(device.mem_info().unwrap(), (256 * MIB, 256 * MIB));
        exercise(device.clone());
        assert_eq!(device.mem_info().unwrap(), (256 * MIB, 256 * MIB));
        let err = open_device(&"cuda:3".parse().unwrap()).err().unwrap();
        assert!(err.to_string().contains("no CUDA device 3"), "{err}");
    }
}

// Expandable segments on the stand-in driver's virtual memory API (cuMemAddressReserve,
// cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease, cuMemAddressFree): data
// survives growth, the free tail is unmapped, and every byte goes back to the driver.
#[test]
fn cuda_expandable_segments_on_the_stand_in_driver() {
    let dir = common::fake_gpu_drivers("memory-cuda-vmm", &[]);
    if common::in_child_with_drivers(
        concat!(
            module_path!(),
            "::cuda_expandable_segments_on_the_stand_in_driver"
        ),
        &dir,
        &[("GPUMEM_FAKE_TOTAL", "268435456")],
    ) {
        let device = open_device(&"cuda:0".parse().unwrap()).unwrap();
        let vmm = device
            .virtual_memory()
            .expect("the stand-in driver has VMM");
        assert_eq!(vmm.granularity(), 2 * MIB);
        // Raw: unmapped addresses are refused, not touched.
        let range = vmm.reserve_range(64 * MIB).unwrap();
        assert!(matches!(
            device.write(range.handle, 0, b"x"),
            Err(DeviceError::OutOfBounds { .. })
        ));
        vmm.map(range.handle, 0, 4 * MIB).unwrap();
        assert_eq!(device.mem_info().unwrap().0, 252 * MIB);
        device.write(range.handle, 4 * MIB - 2, b"ok").unwrap();
        assert!(
            vmm.map(range.handle, 2 * MIB, 2 * MIB).is_err(),
            "mapped twice"
        );
        vmm.unmap(range.handle, 2 * MIB, 2 * MIB).unwrap();
        assert!(device.read(range.handle, 3 * MIB, &mut [0u8; 1]).is_err());
        device.release(range.handle).unwrap();
        assert_eq!(device.mem_info().unwrap(), (256 * MIB, 256 * MIB));

        let config = MemoryConfig::default()
            .with_min_free_bytes(0)
            .with_driver_reserve(false)
            .with_expandable_segments(true);
        let pool = Pool::new(device.clone(), config).unwrap();
        assert!(pool.expandable_segments());
        let a = pool.allocate(10 * MIB).unwrap();
        pool.write(&a, 0, b"first").unwrap();
        let b = pool.allocate(50 * MIB).unwrap();
        assert_eq!(
            pool.info(&b).unwrap().segment,
            pool.info(&a).unwrap().segment
        );
        pool.write(&b, 50 * MIB - 6, b"second").unwrap();
        let mut out = [0u8; 5];
        pool.read(&a, 0, &mut out).unwrap();
        assert_eq!(&out, b"first");
        // More than the device holds fails cleanly after the retry.
        assert!(pool.allocate(300 * MIB).is_err());
        pool.free(b).unwrap();
        pool.empty_cache();
        assert_eq!(pool.stats().reserved_bytes, 20 * MIB);
        assert_eq!(device.mem_info().unwrap().0, 236 * MIB);
        pool.free(a).unwrap();
        pool.empty_cache();
        drop(pool);
        assert_eq!(device.mem_info().unwrap(), (256 * MIB, 256 * MIB));
    }
}

#[test]
fn rocm_device_memory_on_the_stand_in_driver() {
    let dir = common::fake_driver("fake_hip.c", "libamdhip64.so", "memory-hip", &[]);
    if common::in_child_with_drivers(
        concat!(
            module_path!(),
            "::rocm_device_memory_on_the_stand_in_driver"
        ),
        &dir,
        &[("GPUMEM_FAKE_TOTAL", "268435456")],
    ) {
        let device = open_device(&"rocm:0".parse().unwrap()).unwrap();
        exercise(device.clone());
        assert_eq!(device.mem_info().unwrap(), (256 * MIB, 256 * MIB));
    }
}

#[test]
fn cuda_without_a_driver_is_a_clear_error() {
    if std::env::var_os("LD_LIBRARY_PATH")
        .is_some_and(|p| p.to_string_lossy().contains("fake-drivers"))
    {
        return;
    }
    let err = open_device(&"cuda:0".parse().unwrap()).err().unwrap();
    assert!(
        err.to_string()
            .starts_with("cannot open cuda:0: library not found (tried libcuda.so"),
        "{err}"
    );
}

// host:SIZE bounds what the OS really commits: a 512-byte mapping costs a whole page, so a
// 1 MiB cap holds at most 1 MiB / page of them, not 2048 (which would commit 8 MiB).
#[test]
fn host_cap_counts_whole_pages() {
    let device = open_device(&"host:1MiB".parse().unwrap()).unwrap();
    let mut held = Vec::new();
    while let Ok(seg) = device.reserve(512) {
        device.write(seg.handle, 0, &[1u8; 512]).unwrap();
        held.push(seg);
        assert!(held.len() <= 2048, "the cap did not hold");
    }
    let page = (1u64 << 20) / held.len() as u64;
    assert!(
        held.len() <= 256 && [4096, 16384, 65536].contains(&page),
        "{} buffers of 512 B on host:1MiB",
        held.len()
    );
    for seg in held {
        device.release(seg.handle).unwrap();
    }
    assert_eq!(device.mem_info().unwrap().0, 1 << 20);
}

/// A pool opened on the caller's own OpenCL context hands out memory the caller's kernels
/// write: a kernel built in that context fills one allocation through `native_buffer`, and
/// the pool reads back exactly what the kernel wrote (PoCL on CI).
#[test]
fn opencl_pool_on_the_callers_context_feeds_its_kernels() {
    use opencl3::{context::Context, device::Device, kernel::Kernel, program::Program};
    if !opencl_present() {
        return;
    }
    let id = OpenclMemory::open(0).unwrap().native_device();
    let mine = Context::from_device(&Device::new(id)).unwrap();
    // SAFETY: `mine` is live for the whole test and holds `id`.
    let device = Arc::new(unsafe { OpenclMemory::with_context(mine.get(), id) }.unwrap());
    assert_eq!(device.native_context(), mine.get());
    let pool = Pool::new(
        device.clone(),
        MemoryConfig::default().with_min_free_bytes(0),
    )
    .unwrap();
    // Two allocations, so that the second one sits at a non-zero offset in its segment.
    let first = pool.allocate(4096).unwrap();
    let a = pool.allocate(4096).unwrap();
    let info = pool.info(&a).unwrap();
    let src = "__kernel void fill(__global uint* b, uint at) { \
               size_t i = get_global_id(0); b[at + i] = (uint)i * 3u + 1u; }";
    let program = Program::create_and_build_from_source(&mine, src, "").unwrap();
    let kernel = Kernel::create(&program, "fill").unwrap();
    let mem = device.native_buffer(info.segment).unwrap();
    let at = u32::try_from(info.offset / 4).unwrap();
    let words: usize = 1024;
    // SAFETY: the arguments match the kernel's signature; `mem` is live until `a` is freed,
    // and the launch covers exactly the 4096 bytes of `a`.
    unsafe {
        kernel.set_arg(0, &mem).unwrap();
        kernel.set_arg(1, &at).unwrap();
        opencl3::command_queue::enqueue_nd_range_kernel(
            device.native_queue(),
            kernel.get(),
            1,
            std::ptr::null(),
            &words,
            std::ptr::null(),
            0,
            std::ptr::null(),
        )
        .unwrap();
    }
    opencl3::command_queue::finish(device.native_queue()).unwrap();
    let mut back = vec![0u8; 4096];
    device.read(info.segment, info.offset, &mut back).unwrap();
    let got: Vec<u32> = back
        .chunks_exact(4)
        .map(|w| u32::from_ne_bytes(w.try_into().unwrap()))
        .collect();
    let want: Vec<u32> = (0..1024u32).map(|i| i * 3 + 1).collect();
    assert_eq!(got, want);
    pool.free(a).unwrap();
    pool.free(first).unwrap();
}

/// The raw Vulkan handles name what the pool holds: one `VkDeviceMemory` per segment, on
/// the pool's own device, refused once the segment is released.
#[test]
fn vulkan_native_handles_follow_segments() {
    use ash::vk::Handle;
    if !vulkan_present() {
        return;
    }
    let device = VulkanMemory::open(0).unwrap();
    assert!(!device.native_device().is_null());
    let a = device.reserve(MIB).unwrap();
    let b = device.reserve(MIB).unwrap();
    let (ma, mb) = (
        device.native_memory(a.handle).unwrap(),
        device.native_memory(b.handle).unwrap(),
    );
    assert!(!ma.is_null() && ma != mb);
    device.release(a.handle).unwrap();
    assert!(device.native_memory(a.handle).is_err());
    device.release(b.handle).unwrap();
}
