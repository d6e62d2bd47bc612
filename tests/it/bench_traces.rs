//! `gpumem bench-alloc --trace` on hostile and unusual recordings: malformed files, pickles built
//! to exhaust memory or overflow totals, old pickle protocols, thousands of streams, segments
//! older than the recording.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use super::bench_alloc::{bench, fails, trace};
use crate::common::{self, gpumem};

#[test]
fn malformed_traces_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.bin");
    std::fs::write(&garbage, [0xffu8, 0, 1, 2]).unwrap();
    let (code, msg) = fails(&["--device", "sim:1GiB", "--trace", garbage.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(msg.contains("garbage.bin"), "{msg}");
    let evil = dir.path().join("evil.pickle");
    std::fs::write(&evil, b"\x80\x02cos\nsystem\n(S'echo pwned'\ntR.").unwrap();
    let (code, msg) = fails(&["--device", "sim:1GiB", "--trace", evil.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(msg.contains("refusing opcode GLOBAL"), "{msg}");
    let real = std::fs::read(trace("pytorch-snapshot-format-sample.pickle")).unwrap();
    let cut = dir.path().join("cut.pickle");
    std::fs::write(&cut, &real[..real.len() / 2]).unwrap();
    let (code, msg) = fails(&["--device", "sim:1GiB", "--trace", cut.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(msg.contains("malformed pickle"), "{msg}");
    let csv = dir.path().join("bad.csv");
    std::fs::write(
        &csv,
        "Thread,Time,Action,Pointer,Size,Stream\n1,0,allocate,notahex,12,0\n",
    )
    .unwrap();
    let (code, msg) = fails(&["--device", "sim:1GiB", "--trace", csv.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(msg.contains("line 2: bad pointer"), "{msg}");
    let (code, _) = fails(&["--device", "sim:1GiB", "--trace", "/nonexistent/trace.csv"]);
    assert_eq!(code, 1);
}

#[test]
fn hostile_traces_end_in_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    // 200,000 nested tuples: decoded and dropped without deep recursion.
    let mut nested = b"\x80\x04K\x01".to_vec();
    nested.extend(std::iter::repeat_n(0x85u8, 200_000));
    nested.push(b'.');
    // 5 MB of None: the decoder's stack cap ends it.
    let mut nones = b"\x80\x04".to_vec();
    nones.extend(std::iter::repeat_n(b'N', 5_000_000));
    nones.push(b'.');
    for (name, data, want) in [
        ("nested.pickle", nested, "not a PyTorch memory snapshot"),
        ("nones.pickle", nones, "values on the stack"),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, data).unwrap();
        let out = gpumem()
            .args(["bench-alloc", "--device", "sim:1GiB", "--trace"])
            .arg(&path)
            .timeout(std::time::Duration::from_secs(30))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(want) && err.lines().count() == 1,
            "{name}: {err}"
        );
    }
    // Output checked before the run: a missing folder, and the trace itself.
    let trace = dir.path().join("t.pickle");
    std::fs::copy(
        common::fixture("traces/pytorch-snapshot-format-sample.pickle"),
        &trace,
    )
    .unwrap();
    let before = std::fs::read(&trace).unwrap();
    // A hard link and a symlink to the trace are the trace.
    let hard = dir.path().join("hard.svg");
    std::fs::hard_link(&trace, &hard).unwrap();
    let soft = dir.path().join("soft.svg");
    std::os::unix::fs::symlink(&trace, &soft).unwrap();
    for timeline in [dir.path().join("no/such/t.svg"), trace.clone(), hard, soft] {
        let out = gpumem()
            .args(["bench-alloc", "--device", "sim:8GiB", "--trace"])
            .arg(&trace)
            .arg("--timeline")
            .arg(&timeline)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(out.stdout.is_empty());
    }
    assert_eq!(std::fs::read(&trace).unwrap(), before);
}

/// `bench-alloc --trace path` on a simulated device: its one-line error (exit 1).
fn trace_error(path: &Path) -> String {
    common::one_line_error(
        gpumem()
            .args(["bench-alloc", "--device", "sim:1GiB", "--trace"])
            .arg(path),
        1,
    )
}

/// A minimal pickle writer (protocol 2 opcodes) so tests build hostile snapshots themselves.
enum Py {
    Int(i128),
    Str(&'static str),
    List(Vec<Py>),
    Dict(Vec<(&'static str, Py)>),
}

fn pickle(v: &Py) -> Vec<u8> {
    fn put(v: &Py, out: &mut Vec<u8>) {
        match v {
            Py::Int(i) => {
                // LONG1: length byte, then little-endian two's complement.
                out.extend([0x8a, 16]);
                out.extend(i.to_le_bytes());
            }
            Py::Str(s) => {
                out.push(b'X');
                out.extend((s.len() as u32).to_le_bytes());
                out.extend(s.as_bytes());
            }
            Py::List(items) => {
                out.extend(b"](");
                items.iter().for_each(|i| put(i, out));
                out.push(b'e');
            }
            Py::Dict(items) => {
                out.extend(b"}(");
                for (k, v) in items {
                    put(&Py::Str(k), out);
                    put(v, out);
                }
                out.push(b'u');
            }
        }
    }
    let mut out = vec![0x80, 2];
    put(v, &mut out);
    out.push(b'.');
    out
}

#[test]
fn snapshot_totals_past_64_bits_are_refused() {
    let alloc = || {
        Py::Dict(vec![
            ("action", Py::Str("alloc")),
            ("addr", Py::Int(4096)),
            ("size", Py::Int(512)),
        ])
    };
    let huge_segment = || {
        Py::Dict(vec![
            ("device", Py::Int(0)),
            ("total_size", Py::Int(1 << 63)),
            ("blocks", Py::List(vec![])),
        ])
    };
    let segment_event = || {
        Py::Dict(vec![
            ("action", Py::Str("segment_alloc")),
            ("addr", Py::Int(0)),
            ("size", Py::Int(u64::MAX as i128)),
        ])
    };
    let cases = [
        (
            "segments.pickle",
            Py::Dict(vec![
                ("segments", Py::List(vec![huge_segment(), huge_segment()])),
                ("device_traces", Py::List(vec![Py::List(vec![alloc()])])),
            ]),
            "sum below 2^64",
        ),
        (
            "events.pickle",
            Py::Dict(vec![(
                "device_traces",
                Py::List(vec![Py::List(vec![
                    segment_event(),
                    segment_event(),
                    alloc(),
                ])]),
            )]),
            "more than 2^64 bytes",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, doc, want) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, pickle(&doc)).unwrap();
        let err = trace_error(&path);
        assert!(err.contains(want), "{name}: {err}");
    }
}

#[test]
fn protocol_0_and_1_pickles_are_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [
        (
            "p0.pickle",
            &b"(dp0\nVdevice_traces\np1\n(lp2\n(lp3\nas."[..],
        ),
        (
            "p1.pickle",
            &b"}q\x00X\r\x00\x00\x00device_tracesq\x01]q\x02]q\x03as."[..],
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let err = trace_error(&path);
        assert!(err.contains("a pickle of protocol 0 or 1"), "{err}");
    }
}

// 20,000 streams, one allocate/free pair each: every stream gets its own cache and the whole
// log replays. (Replay time per stream, linear in the stream count since the caches were
// indexed, is a benchmark's figure, not a test's: a wall-clock limit here was killed under load.)
#[test]
fn an_rmm_log_with_20k_streams_replays_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("Thread,Time,Action,Pointer,Size,Stream\n");
    for i in 0..20_000u64 {
        let ptr = 0x10000 + i * 4096;
        csv.push_str(&format!("1,0.1,allocate,{ptr:#x},1024,{:#x}\n", i + 1));
        csv.push_str(&format!("1,0.1,free,{ptr:#x},1024,{:#x}\n", i + 1));
    }
    let path = dir.path().join("streams.csv");
    std::fs::write(&path, csv).unwrap();
    let doc = common::json_ok(
        gpumem()
            .args([
                "--json",
                "bench-alloc",
                "--device",
                "sim:8GiB",
                "--no-raw",
                "--trace",
            ])
            .arg(&path),
    );
    assert_eq!(doc["workload"]["ops"], 40_000);
    assert_eq!(doc["interrupted"], false);
}

// A snapshot whose segments include one from before the recording: PyTorch's reserved peak is
// that segment plus the events' net peak, not the events' alone.
#[test]
fn segments_that_predate_the_recording_count_in_pytorchs_peak() {
    const MIB: i128 = 1 << 20;
    let event = |action: &'static str, addr: i128, size: i128| {
        Py::Dict(vec![
            ("action", Py::Str(action)),
            ("addr", Py::Int(addr)),
            ("size", Py::Int(size)),
        ])
    };
    let segment = |addr: i128, size: i128| {
        Py::Dict(vec![
            ("device", Py::Int(0)),
            ("address", Py::Int(addr)),
            ("total_size", Py::Int(size)),
            ("blocks", Py::List(vec![])),
        ])
    };
    let doc = Py::Dict(vec![
        (
            "segments",
            Py::List(vec![segment(0, 20 * MIB), segment(1 << 40, 8 * MIB)]),
        ),
        (
            "device_traces",
            Py::List(vec![Py::List(vec![
                event("segment_alloc", 0, 20 * MIB),
                event("alloc", 0, MIB),
                event("segment_alloc", 1 << 30, 40 * MIB),
                event("segment_free", 1 << 30, 40 * MIB),
                event("free_completed", 0, MIB),
            ])]),
        ),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("predating.pickle");
    std::fs::write(&path, pickle(&doc)).unwrap();
    let doc = bench(&["--device", "sim:1GiB", "--trace", path.to_str().unwrap()]);
    assert_eq!(doc["reference"]["measured_as"], "segment_events");
    assert_eq!(
        doc["reference"]["peak_reserved_bytes"],
        68u64 << 20,
        "{}",
        doc["reference"]
    );
}
