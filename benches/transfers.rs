//! Blocking versus double-buffered transfers on the devices this machine has (host RAM, PoCL,
//! lavapipe): 64 MiB in 4 MiB chunks, each chunk checksummed by the host (download) or filled
//! (upload). Prints GB/s, the speedup of double buffering and the overlap it achieved, best of
//! five runs each.
//!
//! `cargo bench --bench transfers`

#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use gpumem::alloc::transfer::{download, upload, Buffering, TransferReport};
use gpumem::alloc::{MemoryConfig, Pool};
use gpumem::backend::open_device;
use gpumem::device::DeviceMemory;

const LEN: u64 = 64 << 20;
const CHUNK: usize = 4 << 20;

fn checksum(buf: &[u8]) -> u64 {
    buf.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .fold(0u64, |acc, v| {
            acc.rotate_left(5) ^ v.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        })
}

fn fill(at: u64, buf: &mut [u8]) {
    for (k, c) in buf.chunks_exact_mut(8).enumerate() {
        let v = (at / 8 + k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        c.copy_from_slice(&v.to_le_bytes());
    }
}

fn best(mut run: impl FnMut() -> TransferReport) -> TransferReport {
    (0..5)
        .map(|_| run())
        .min_by(|a, b| a.elapsed.cmp(&b.elapsed))
        .expect("five runs")
}

fn bench(name: &str, device: Arc<dyn DeviceMemory>) {
    let pool = Pool::new(device, MemoryConfig::default().with_min_free_bytes(0)).expect("pool");
    let a = pool.allocate(LEN).expect("64 MiB");
    let mut sink = 0u64;
    let up = |mode| best(|| upload(&pool, &a, LEN, CHUNK, mode, fill).expect("upload"));
    let (up_b, up_d) = (up(Buffering::Blocking), up(Buffering::Double));
    let mut down = |mode| {
        best(|| {
            download(&pool, &a, LEN, CHUNK, mode, |_, b| sink ^= checksum(b)).expect("download")
        })
    };
    let (down_b, down_d) = (down(Buffering::Blocking), down(Buffering::Double));
    black_box(sink);
    for (dir, blocking, double) in [("host→device", up_b, up_d), ("device→host", down_b, down_d)]
    {
        println!(
            "| {name} | {dir} | {:.2} | {:.2} | {:.2}× | {:.0} % |",
            blocking.bytes_per_second() / 1e9,
            double.bytes_per_second() / 1e9,
            blocking.elapsed.as_secs_f64() / double.elapsed.as_secs_f64(),
            double.overlap() * 100.0
        );
    }
    pool.free(a).expect("free");
}

fn main() {
    println!("| device | direction | blocking GB/s | double-buffered GB/s | speedup | overlap |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for spec in ["host", "opencl:0", "vulkan:0"] {
        match open_device(&spec.parse().expect("spec")) {
            Ok(device) => bench(spec, device),
            Err(e) => println!("| {spec} | unavailable: {e} | | | | |"),
        }
    }
}
