//! Driver probes in a child process, so that a driver which crashes (a `cuInit` that
//! segfaults or aborts) or hangs takes down only that child: the parent reports the backend as
//! unavailable with the signal and the driver call it happened in, kills a child that outlives
//! the timeout, and goes on with every other backend.
//!
//! The child is the same executable, started with [`CHILD_ENV`] naming one backend. It probes
//! that backend, writes the [`BackendInfo`] as JSON on stdout and exits. Before each driver call
//! that may misbehave it writes a step line on stderr ([`step`]); the last one seen names the
//! call when the child dies of a signal.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{probe_kind, BackendInfo, BackendKind, Unavailable};

/// Set (to a backend's name) in the environment of a probe child.
pub const CHILD_ENV: &str = "GPUMEM_INTERNAL_PROBE";

/// The probe child's one argument: [`CHILD_ENV`] is read only beside it, so the variable set in
/// a user's environment (or inherited by a program gpumem starts) changes nothing.
pub const CHILD_ARG: &str = "--internal-probe-child";

const STEP_PREFIX: &str = "gpumem-probe-step: ";

// Bounds on what the parent keeps of a child's output; a well-behaved child writes a few KiB.
const MAX_CHILD_OUTPUT: u64 = 4 << 20;

static IN_CHILD: AtomicBool = AtomicBool::new(false);

/// Where driver probes run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Isolation {
    /// In this process, each backend on its own thread (a driver crash ends the process; a hang
    /// is abandoned at the timeout). What the library does unless told otherwise.
    #[default]
    InProcess,
    /// Each driver-backed backend in a child process started from `exe`, which must be the
    /// gpumem binary (it answers [`CHILD_ENV`] through [`run_probe_child`]).
    Subprocess {
        /// The gpumem executable.
        exe: PathBuf,
    },
}

impl Isolation {
    /// Child processes started from the running executable (for the gpumem binary itself).
    pub fn current_exe() -> Self {
        match std::env::current_exe() {
            Ok(exe) => Isolation::Subprocess { exe },
            Err(e) => {
                log::warn!("probing drivers in-process: cannot find this executable: {e}");
                Isolation::InProcess
            }
        }
    }
}

/// Marks the driver call about to be made, so a crash inside it can be named. Costs nothing
/// outside a probe child.
pub(crate) fn step(call: &str) {
    if IN_CHILD.load(Ordering::Relaxed) {
        // Unbuffered: the line must be out before the call that may kill the process.
        eprintln!("{STEP_PREFIX}{call}");
    }
}

/// The probe-child entry point: when [`CHILD_ENV`] names a backend, probes it, prints its
/// [`BackendInfo`] as JSON on stdout and returns the exit status; otherwise returns `None` and
/// the program goes on. `main` calls this before anything else.
pub fn run_probe_child() -> Option<std::process::ExitCode> {
    if std::env::args_os().nth(1).as_deref() != Some(std::ffi::OsStr::new(CHILD_ARG)) {
        return None;
    }
    let name = std::env::var(CHILD_ENV).unwrap_or_default();
    let kind: BackendKind = match name.parse() {
        Ok(kind) => kind,
        Err(_) => {
            eprintln!(
                "gpumem: error: {CHILD_ENV}=\"{}\" names no backend",
                name.escape_debug()
            );
            return Some(std::process::ExitCode::from(2));
        }
    };
    IN_CHILD.store(true, Ordering::Relaxed);
    let began = Instant::now();
    let result = std::panic::catch_unwind(|| probe_kind(kind))
        .unwrap_or_else(|_| Err(Unavailable::Failed("the probe panicked".into())));
    let info = BackendInfo::from_probe(kind, result, began.elapsed());
    match serde_json::to_string(&info) {
        Ok(json) => {
            println!("{json}");
            Some(std::process::ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("gpumem: error: {e}");
            Some(std::process::ExitCode::FAILURE)
        }
    }
}

/// A probe child dies with the thread that started it (Linux's parent-death signal): when
/// gpumem is killed, even by SIGKILL, no child is left behind sleeping in a driver call.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec the closure calls only prctl and getppid, which are
    // async-signal-safe, and touches no memory of the parent's.
    let parent = std::process::id();
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before the signal was asked for.
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_: &mut Command) {}

/// Probes `kind` in a child started from `exe`, killing it at `timeout`, or as soon as
/// `cancel` is set.
pub(crate) fn probe_in_child(
    exe: &Path,
    kind: BackendKind,
    timeout: Duration,
    cancel: Option<&AtomicBool>,
) -> BackendInfo {
    let began = Instant::now();
    let unavailable =
        |why: Unavailable| BackendInfo::unavailable(kind, why, began.elapsed().as_secs_f64() * 1e3);
    let mut command = Command::new(exe);
    command
        .arg(CHILD_ARG)
        .env(CHILD_ENV, kind.name())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    die_with_parent(&mut command);
    let spawned = command.spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return unavailable(Unavailable::Failed(format!("cannot start a probe: {e}"))),
    };
    // Read both pipes on their own threads so a chatty child cannot block on a full pipe.
    let collect = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(pipe) = pipe {
                let _ = pipe.take(MAX_CHILD_OUTPUT).read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = collect(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = collect(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = began + timeout;
    let cancelled = || cancel.is_some_and(|c| c.load(Ordering::SeqCst));
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline || cancelled() => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return unavailable(Unavailable::Failed(format!("waiting for the probe: {e}")));
            }
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    let last_step = String::from_utf8_lossy(&stderr)
        .lines()
        .filter_map(|l| l.strip_prefix(STEP_PREFIX))
        .next_back()
        .map(str::to_string);
    let Some(status) = status else {
        return unavailable(if cancelled() {
            Unavailable::Cancelled
        } else {
            Unavailable::TimedOut(timeout)
        });
    };
    if let Some(signal) = terminating_signal(&status) {
        return unavailable(Unavailable::DriverCrashed {
            signal: signal_name(signal),
            during: last_step,
        });
    }
    match serde_json::from_slice::<BackendInfo>(&stdout) {
        Ok(info) if status.success() => info,
        _ => unavailable(Unavailable::Failed(format!(
            "the probe exited with {status} without a result{}",
            last_step.map_or(String::new(), |s| format!(" (last in {s})"))
        ))),
    }
}

#[cfg(unix)]
fn terminating_signal(status: &std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

#[cfg(not(unix))]
fn terminating_signal(_: &std::process::ExitStatus) -> Option<i32> {
    None
}

/// The conventional name of a signal that kills a process.
fn signal_name(signal: i32) -> String {
    match signal {
        4 => "SIGILL".into(),
        6 => "SIGABRT".into(),
        7 => "SIGBUS".into(),
        8 => "SIGFPE".into(),
        9 => "SIGKILL".into(),
        11 => "SIGSEGV".into(),
        13 => "SIGPIPE".into(),
        15 => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}
