//! Reading a model header must cost the same whatever the file size: the GGUF fixture as written
//! (1 MiB) against the same header in front of a 64 GiB sparse file.
//!
//! `cargo bench --bench headers`

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use gpumem::model::read_gguf;

fn headers(c: &mut Criterion) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-llama.gguf");
    let dir = tempfile::tempdir().expect("tempdir");
    let sparse = dir.path().join("sparse-64g.gguf");
    std::fs::copy(&fixture, &sparse).expect("copy");
    // Extending the file leaves a hole: no blocks are written, but the size is 64 GiB.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&sparse)
        .expect("open")
        .set_len(64 << 30)
        .expect("set_len");
    c.bench_function("read_gguf header, 1 MiB file", |b| {
        b.iter(|| read_gguf(&fixture).expect("parse"))
    });
    c.bench_function("read_gguf header, 64 GiB sparse file", |b| {
        b.iter(|| read_gguf(&sparse).expect("parse"))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = headers
}
criterion_main!(benches);
