//! Recorded allocation traces: RMM's logging-resource CSV and PyTorch memory snapshots.

use std::collections::HashMap;
use std::path::Path;

use super::pickle::{decode, PyValue};
use super::{Op, Reference, Workload, WorkloadError};

/// Largest trace read into memory.
const MAX_TRACE_BYTES: u64 = 2 << 30;

/// Builds a workload from events (address, size, stream, alloc or free), placing first the
/// allocations that predate the recording: frees of addresses never allocated, and blocks
/// `live_at_end` says were allocated when the snapshot was taken.
struct Builder {
    ops: Vec<Op>,
    live: HashMap<u64, u32>,
    preexisting: Vec<(u64, u32)>,
    next: u32,
    streams: HashMap<i128, u32>,
}

impl Builder {
    fn new() -> Self {
        Builder {
            ops: Vec::new(),
            live: HashMap::new(),
            preexisting: Vec::new(),
            next: 0,
            streams: HashMap::new(),
        }
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "streams are bounded by the trace's byte limit"
    )]
    fn stream(&mut self, raw: i128) -> u32 {
        let n = self.streams.len() as u32;
        *self.streams.entry(raw).or_insert(n)
    }

    fn alloc(&mut self, addr: u64, size: u64, stream: u32) {
        // An address reused without a recorded free: the earlier block was freed unrecorded.
        if let Some(old) = self.live.remove(&addr) {
            self.ops.push(Op::Free { id: old });
        }
        let id = self.next;
        self.next += 1;
        self.ops.push(Op::Alloc {
            id,
            size: size.max(1),
            stream,
        });
        self.live.insert(addr, id);
    }

    /// Operations recorded so far (the pre-recording allocations not counted).
    fn recorded(&self) -> u64 {
        self.ops.len() as u64
    }

    fn free(&mut self, addr: u64, size: u64) {
        match self.live.remove(&addr) {
            Some(id) => self.ops.push(Op::Free { id }),
            None if size > 0 => {
                // Allocated before recording began: allocate it up front, free it here.
                let id = self.next;
                self.next += 1;
                self.preexisting.push((size, id));
                self.ops.push(Op::Free { id });
            }
            None => {}
        }
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "entries are bounded by the trace's byte limit"
    )]
    fn finish(
        mut self,
        name: String,
        snapshot_live: &[(u64, u64)],
        reference: Option<Reference>,
        skipped: Vec<(String, u64)>,
    ) -> Workload {
        // Blocks live at snapshot time that the trace never allocated predate it as well.
        for &(addr, size) in snapshot_live {
            if !self.live.contains_key(&addr) {
                let id = self.next;
                self.next += 1;
                self.preexisting.push((size, id));
                self.live.insert(addr, id);
            }
        }
        let mut ops: Vec<Op> = self
            .preexisting
            .iter()
            .map(|&(size, id)| Op::Alloc {
                id,
                size,
                stream: 0,
            })
            .collect();
        ops.append(&mut self.ops);
        let recorded_ops = Some(ops.len());
        // Free what is still live, so the replay ends clean and leaks can be checked.
        let mut rest: Vec<u32> = self.live.into_values().collect();
        rest.sort_unstable();
        ops.extend(rest.into_iter().map(|id| Op::Free { id }));
        Workload {
            name,
            ops,
            allocations: self.next,
            seed: None,
            preexisting: self.preexisting.len() as u32,
            reference,
            skipped,
            recorded_ops,
            completed_frees: false,
            reference_reserved: Vec::new(),
        }
    }
}

fn malformed(path: &str, why: impl Into<String>) -> WorkloadError {
    WorkloadError::Malformed {
        path: path.to_string(),
        why: why.into(),
    }
}

fn parse_hex_or_dec(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Parses the CSV written by RMM's `logging_resource_adaptor`
/// (`Thread,Time,Action,Pointer,Size,Stream`; actions `allocate`, `allocate failure`, `free`).
pub fn parse_rmm_csv(path: &str, text: &str) -> Result<Workload, WorkloadError> {
    let mut lines = text.lines().enumerate();
    let header = lines.next().map(|(_, l)| l.trim()).unwrap_or("");
    let columns: Vec<&str> = header.split(',').map(str::trim).collect();
    let col = |name: &str| columns.iter().position(|c| c.eq_ignore_ascii_case(name));
    let (Some(action), Some(pointer), Some(size), stream) =
        (col("Action"), col("Pointer"), col("Size"), col("Stream"))
    else {
        return Err(malformed(path, "not an RMM log: the header must name Action, Pointer and Size (Thread,Time,Action,Pointer,Size,Stream)"));
    };
    let mut b = Builder::new();
    let mut failures = 0u64;
    for (n, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').collect();
        let field = |i: usize| {
            fields
                .get(i)
                .copied()
                .ok_or_else(|| malformed(path, format!("line {}: too few fields", n + 1)))
        };
        let act = field(action)?.trim();
        let ptr = parse_hex_or_dec(field(pointer)?)
            .ok_or_else(|| malformed(path, format!("line {}: bad pointer", n + 1)))?;
        let sz = parse_hex_or_dec(field(size)?)
            .ok_or_else(|| malformed(path, format!("line {}: bad size", n + 1)))?;
        let st = match stream {
            Some(i) => parse_hex_or_dec(field(i)?).unwrap_or(0),
            None => 0,
        };
        match act {
            "allocate" => {
                let s = b.stream(i128::from(st));
                b.alloc(ptr, sz, s);
            }
            "free" => b.free(ptr, sz),
            "allocate failure" => failures += 1,
            other => {
                return Err(malformed(
                    path,
                    format!("line {}: unknown action '{other}'", n + 1),
                ))
            }
        }
    }
    let skipped = if failures > 0 {
        vec![("allocate failure".to_string(), failures)]
    } else {
        Vec::new()
    };
    Ok(b.finish(format!("trace:{}", file_name(path)), &[], None, skipped))
}

fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string())
}

fn int_field(entry: &PyValue, key: &str) -> Option<i128> {
    entry.get(key).and_then(|v| v.as_int())
}

/// Parses a PyTorch `torch.cuda.memory._snapshot()` pickle (data only; see `pickle`).
pub fn parse_pytorch_snapshot(path: &str, data: &[u8]) -> Result<Workload, WorkloadError> {
    let root = decode(data).map_err(|e| malformed(path, e.to_string()))?;
    let traces = root
        .get("device_traces")
        .and_then(|t| t.items())
        .ok_or_else(|| {
            malformed(
                path,
                "no 'device_traces' list: not a PyTorch memory snapshot",
            )
        })?;
    // The device with the most events (snapshots usually hold one).
    // Compared by length first: copying every device's list would cost quadratic time when a
    // hostile file makes them all one shared list.
    let (device, _) = traces
        .iter()
        .enumerate()
        .map(|(i, t)| (i, t.seq_len().unwrap_or(0)))
        .max_by_key(|&(_, n)| n)
        .ok_or_else(|| malformed(path, "'device_traces' is empty"))?;
    let mut b = Builder::new();
    let events = replay_events(path, &traces[device].items().unwrap_or_default(), &mut b)?;
    let segments = read_segments(path, &root, device)?;
    let expandable = segments.expandable
        || root
            .get("allocator_settings")
            .and_then(|a| a.get("expandable_segments"))
            .is_some_and(|v| matches!(v, PyValue::Bool(true)));
    // Segments that predate the recording are in the snapshot but in no event: PyTorch's
    // reserved at any moment is those plus the net of the events, so they count at the peak.
    let (reserved, has_segment_events) = (events.reserved, events.has_segment_events);
    let predating = i128::from(segments.reserved) - reserved;
    let peak = if has_segment_events && segments.reserved > 0 && predating > 0 {
        events.peak + predating
    } else {
        events.peak
    };
    let peak = u64::try_from(peak)
        .map_err(|_| malformed(path, "segment events reserve more than 2^64 bytes"))?;
    let reference = Reference {
        source: "pytorch",
        peak_reserved_bytes: has_segment_events.then_some(peak),
        snapshot_reserved_bytes: (segments.reserved > 0).then_some(segments.reserved),
        snapshot_allocated_bytes: (segments.reserved > 0).then_some(segments.allocated),
        expandable_segments: expandable,
    };
    let mut skipped: Vec<(String, u64)> = events.skipped.into_iter().collect();
    skipped.sort();
    let mut workload = b.finish(
        format!("trace:{}", file_name(path)),
        &segments.live_blocks,
        Some(reference),
        skipped,
    );
    // PyTorch records `free_completed` once the block's stream work has finished.
    workload.completed_frees = true;
    // The recording's operations follow the pre-recording allocations placed first, and its
    // reserved bytes sit on top of the segments that predate it.
    let shift = u64::from(workload.preexisting);
    let base = predating.max(0);
    workload.reference_reserved = events
        .curve
        .iter()
        .filter_map(|&(op, r)| Some((op + shift, u64::try_from(r + base).ok()?)))
        .collect();
    Ok(workload)
}

/// What a device's trace events add up to besides the operations: the net and peak reserved
/// bytes of its segment events, whether it has any, and the actions not replayed.
struct Events {
    reserved: i128,
    /// `(operations recorded so far, reserved)` after each segment event.
    curve: Vec<(u64, i128)>,
    peak: i128,
    has_segment_events: bool,
    skipped: HashMap<String, u64>,
}

/// Feeds one device's trace events to `b` (allocations and completed frees) and sums up its
/// segment events.
fn replay_events(path: &str, events: &[PyValue], b: &mut Builder) -> Result<Events, WorkloadError> {
    let mut out = Events {
        reserved: 0,
        curve: Vec::new(),
        peak: 0,
        has_segment_events: false,
        skipped: HashMap::new(),
    };
    for (i, e) in events.iter().enumerate() {
        let action = e
            .get("action")
            .and_then(|a| a.as_str().map(str::to_string))
            .ok_or_else(|| malformed(path, format!("trace entry {i} has no 'action'")))?;
        let field = |key: &str| {
            int_field(e, key)
                .and_then(|a| u64::try_from(a).ok())
                .ok_or_else(|| {
                    malformed(
                        path,
                        format!("trace entry {i} ({action}) has no valid '{key}'"),
                    )
                })
        };
        match action.as_str() {
            "alloc" => {
                let stream = b.stream(int_field(e, "stream").unwrap_or(0));
                b.alloc(field("addr")?, field("size")?, stream);
            }
            "free_completed" => b.free(field("addr")?, field("size")?),
            "free_requested" => {}
            "segment_alloc" | "segment_map" => {
                out.has_segment_events = true;
                out.reserved += i128::from(field("size")?);
                out.peak = out.peak.max(out.reserved);
                out.curve.push((b.recorded(), out.reserved));
            }
            "segment_free" | "segment_unmap" => {
                out.has_segment_events = true;
                out.reserved -= i128::from(field("size")?);
                out.curve.push((b.recorded(), out.reserved));
            }
            other => *out.skipped.entry(other.to_string()).or_default() += 1,
        }
    }
    Ok(out)
}

/// The snapshot's segments on `device`: their total, the live blocks in them and their sum,
/// and whether any is expandable.
struct Segments {
    reserved: u64,
    allocated: u64,
    live_blocks: Vec<(u64, u64)>,
    expandable: bool,
}

fn read_segments(path: &str, root: &PyValue, device: usize) -> Result<Segments, WorkloadError> {
    let mut out = Segments {
        reserved: 0,
        allocated: 0,
        live_blocks: Vec::new(),
        expandable: false,
    };
    for seg in root
        .get("segments")
        .and_then(|s| s.items())
        .unwrap_or_default()
    {
        if int_field(&seg, "device").is_some_and(|d| d != device as i128) {
            continue;
        }
        out.reserved = int_field(&seg, "total_size")
            .and_then(|v| u64::try_from(v).ok())
            .and_then(|v| out.reserved.checked_add(v))
            .ok_or_else(|| {
                malformed(
                    path,
                    "segment total_size values are not byte counts that sum below 2^64",
                )
            })?;
        out.expandable |= matches!(seg.get("is_expandable"), Some(PyValue::Bool(true)));
        for block in seg
            .get("blocks")
            .and_then(|b| b.items())
            .unwrap_or_default()
        {
            let state = block
                .get("state")
                .and_then(|s| s.as_str().map(str::to_string))
                .unwrap_or_default();
            if state != "active_allocated" && state != "active_pending_free" {
                continue;
            }
            let (Some(a), Some(s)) = (int_field(&block, "address"), int_field(&block, "size"))
            else {
                continue;
            };
            let (Ok(a), Ok(s)) = (u64::try_from(a), u64::try_from(s)) else {
                continue;
            };
            out.allocated = out
                .allocated
                .checked_add(s)
                .ok_or_else(|| malformed(path, "live block sizes sum past 2^64 bytes"))?;
            out.live_blocks.push((a, s));
        }
    }
    Ok(out)
}

// Protocols 0 and 1 have no PROTO header: such a pickle opens with a container, MARK or
// GLOBAL opcode and ends with STOP, which no RMM CSV (a header line, rows, a newline) does.
fn looks_like_old_pickle(data: &[u8]) -> bool {
    matches!(
        data.first(),
        Some(b'(' | b'}' | b']' | b')' | b'c' | b'd' | b'l')
    ) && data.last() == Some(&b'.')
}

/// Reads a trace file, telling the formats apart by their first bytes.
pub fn load_trace(path: &Path) -> Result<Workload, WorkloadError> {
    let shown = path.display().to_string();
    let data = crate::input::read_bounded(path, MAX_TRACE_BYTES, "a trace")?;
    let workload = if data.first() == Some(&0x80) {
        parse_pytorch_snapshot(&shown, &data)?
    } else if looks_like_old_pickle(&data) {
        return Err(malformed(
            &shown,
            "a pickle of protocol 0 or 1; gpumem reads protocols 2-5, which \
             torch.cuda.memory._dump_snapshot writes (re-save it with pickle protocol 4)",
        ));
    } else {
        let text = std::str::from_utf8(&data)
            .map_err(|_| malformed(&shown, "neither a pickle nor a UTF-8 CSV"))?;
        parse_rmm_csv(&shown, text)?
    };
    if workload.allocations == 0 {
        return Err(malformed(&shown, "the trace holds no allocations"));
    }
    workload.validate()?;
    Ok(workload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_events_give_the_recorders_reserved_curve() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/snapshot-segment-events.pickle"
        );
        let data = std::fs::read(path).unwrap();
        let w = parse_pytorch_snapshot("events.pickle", &data).unwrap();
        let mib = 1u64 << 20;
        // segment_alloc before any operation, another after two allocations, the free after the
        // two frees that follow the third.
        assert_eq!(
            w.reference_reserved,
            vec![(0, 20 * mib), (2, 60 * mib), (5, 20 * mib)]
        );
    }

    #[test]
    fn rmm_csv_with_preexisting_and_failures() {
        let csv = "Thread,Time,Action,Pointer,Size,Stream\n\
                   1,0.1,allocate,0x7f0000000000,1024,0x0\n\
                   1,0.2,allocate failure,0x0,99999999999,0x0\n\
                   1,0.3,free,0x7f0000000000,1024,0x0\n\
                   1,0.4,free,0x7f0000100000,4096,0x0\n\
                   2,0.5,allocate,0x7f0000200000,2048,0x1234\n";
        let w = parse_rmm_csv("log.csv", csv).unwrap();
        w.validate().unwrap();
        assert_eq!(w.allocations, 3);
        assert_eq!(w.preexisting, 1);
        assert_eq!(
            w.ops[0],
            Op::Alloc {
                id: 1,
                size: 4096,
                stream: 0
            }
        );
        assert_eq!(w.skipped, vec![("allocate failure".to_string(), 1)]);
        assert!(w.ops.contains(&Op::Alloc {
            id: 2,
            size: 2048,
            stream: 1
        }));
        assert!(parse_rmm_csv("x.csv", "a,b\n1,2").is_err());
        assert!(parse_rmm_csv(
            "x.csv",
            "Thread,Time,Action,Pointer,Size,Stream\n1,0,allocate,zz,1,0"
        )
        .is_err());
    }
}
