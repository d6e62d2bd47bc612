//! One signal path for the long commands (`bench-alloc`, `stress`): SIGINT (Ctrl-C) and SIGTERM
//! (what CI runners send on timeout) set one flag; the running phase sees it, stops, frees
//! everything, and the command prints its partial report marked interrupted and exits 128 plus
//! the signal's number (130, 143).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};

use crate::backend::{open_device_within, DeviceSpec, DiscoverOptions};
use crate::device::DeviceMemory;
use crate::exit::Exit;

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
static RECEIVED: AtomicI32 = AtomicI32::new(0);

#[cfg(unix)]
extern "C" fn on_signal(signal: libc::c_int) {
    // Only atomic stores: nothing here may allocate or lock.
    RECEIVED.store(signal, Ordering::SeqCst);
    if let Some(flag) = FLAG.get() {
        flag.store(true, Ordering::SeqCst);
    }
}

/// Installs the handlers (once per process) and returns the flag they set.
pub fn install() -> Arc<AtomicBool> {
    let flag = FLAG
        .get_or_init(|| Arc::new(AtomicBool::new(false)))
        .clone();
    #[cfg(unix)]
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let handler: extern "C" fn(libc::c_int) = on_signal;
        // SAFETY: the handler only stores to atomics, which is async-signal-safe.
        unsafe { libc::signal(signal, handler as libc::sighandler_t) };
    }
    flag
}

/// Opens `spec` under `probe` (whose cancel flag is the one [`install`] returned). A signal
/// while drivers are probed or the device opened, before there is a report to print, ends the
/// command with 128 + the signal; `named` says whether the user named the device or it was
/// picked by probing.
pub fn open_until_signal(
    spec: &DeviceSpec,
    named: bool,
    probe: &DiscoverOptions,
) -> anyhow::Result<Arc<dyn DeviceMemory>> {
    let device = open_device_within(spec, probe);
    if probe.cancelled() {
        let what = if named {
            format!("opening {spec}")
        } else {
            "probing drivers for a device".to_string()
        };
        return Err(crate::error::CliError::Interrupted(
            interrupted_exit(),
            format!("interrupted while {what}"),
        )
        .into());
    }
    Ok(device?)
}

/// The exit for a run a signal cut short: 128 + the signal (130 for SIGINT, 143 for SIGTERM).
#[expect(
    clippy::cast_possible_truncation,
    reason = "signal numbers are below 65"
)]
pub fn interrupted_exit() -> Exit {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => Exit::Interrupted(libc::SIGINT as u8),
        signal => Exit::Interrupted(signal as u8),
    }
}
