//! The pickle decoder's memory is bounded by its input: random and adversarial opcode streams
//! (stack floods, DUP and memo chains, nested containers, shared lists) never make a snapshot
//! parse allocate more than a small constant per input byte. Heap use is measured by a
//! counting global allocator that counts, per thread, only what the measuring thread does.

#![allow(clippy::unwrap_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use gpumem::workload::parse_pytorch_snapshot;
use proptest::prelude::*;

struct Counting;

// Counted per thread, and only while a thread measures: the other tests of the binary run on
// threads of their own and leave these counts alone.
thread_local! {
    static MEASURING: Cell<bool> = const { Cell::new(false) };
    static CURRENT: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    // try_with: a thread being torn down has no counts, and must still allocate.
    let _ = MEASURING.try_with(|on| {
        if on.get() {
            let now = CURRENT.with(|c| {
                c.set(c.get() + delta);
                c.get()
            });
            PEAK.with(|p| p.set(p.get().max(now)));
        }
    });
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes the parse allocated on this thread at its peak, above what it had when it began.
fn peak_during(data: &[u8]) -> usize {
    CURRENT.with(|c| c.set(0));
    PEAK.with(|p| p.set(0));
    MEASURING.with(|m| m.set(true));
    let _ = parse_pytorch_snapshot("fuzz.pickle", data);
    MEASURING.with(|m| m.set(false));
    PEAK.with(|p| p.get()).max(0) as usize
}

/// What a parse may cost: a constant per input byte, plus a fixed allowance.
fn allowance(len: usize) -> usize {
    96 * len + (2 << 20)
}

// Opcode snippets a hostile pickle is made of: containers, marks, values, memo and stack
// operations, and the builders that consume them.
const SNIPPETS: &[&[u8]] = &[
    b"}",
    b"]",
    b")",
    b"(",
    b"N",
    b"\x88",
    b"\x89",
    b"K\x07",
    b"J\x01\x02\x03\x04",
    b"M\x05\x00",
    b"\x8a\x02\x10\x27",
    b"G\x3f\xf0\x00\x00\x00\x00\x00\x00",
    b"X\x03\x00\x00\x00abc",
    b"\x8c\x06action",
    b"C\x02hi",
    b"\x94",
    b"q\x00",
    b"r\x01\x00\x00\x00",
    b"h\x00",
    b"j\x01\x00\x00\x00",
    b"2",
    b"0",
    b"1",
    b"s",
    b"u",
    b"a",
    b"e",
    b"t",
    b"\x85",
    b"\x86",
    b"\x87",
    b"l",
    b"d",
];

fn pickle_from(parts: &[(usize, usize)]) -> Vec<u8> {
    let mut out = b"\x80\x04".to_vec();
    for &(snippet, times) in parts {
        for _ in 0..times {
            out.extend_from_slice(SNIPPETS[snippet % SNIPPETS.len()]);
        }
    }
    out.push(b'.');
    out
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_opcode_streams_stay_within_memory_bounds(
        parts in prop::collection::vec((any::<usize>(), 1usize..2_000), 1..40)
    ) {
        let _guard = serial();
        let data = pickle_from(&parts);
        let peak = peak_during(&data);
        prop_assert!(peak <= allowance(data.len()), "{} bytes of input took {peak} bytes", data.len());
    }
}

// The amplification patterns the reliability issue found, at a few MB each.
#[test]
fn known_amplifications_stay_within_memory_bounds() {
    let _guard = serial();
    let floods: Vec<(&str, Vec<u8>)> = vec![
        ("None flood", pickle_from(&[(4, 3_000_000)])),
        ("MEMOIZE flood", pickle_from(&[(1, 1), (15, 2_000_000)])),
        ("DUP flood", pickle_from(&[(1, 1), (20, 3_000_000)])),
        (
            "memo GET flood",
            pickle_from(&[(1, 1), (16, 1), (18, 1_000_000)]),
        ),
        ("nested tuples", pickle_from(&[(4, 1), (28, 2_000_000)])),
        ("marks", pickle_from(&[(3, 3_000_000)])),
    ];
    for (name, data) in floods {
        let peak = peak_during(&data);
        assert!(
            peak <= allowance(data.len()),
            "{name}: {} bytes of input took {peak} bytes",
            data.len()
        );
    }
}
