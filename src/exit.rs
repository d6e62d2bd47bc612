//! The one exit-code table, shared by `main`, the README and the man page.

/// How a gpumem run ended, as seen by the shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: success.
    Success,
    /// 1: a runtime failure, or a CI threshold (`--min-*`/`--max-*`) was missed.
    Failure,
    /// 2: a usage error (unknown flag, model or backend, malformed value).
    Usage,
    /// 3: does not fit; no suitable device (`select`, `estimate --fits`).
    DoesNotFit,
    /// 4: the device `bench-alloc` or `stress` was to run on is missing or cannot be opened (no
    /// driver, no such index), so CI can tell a lost GPU from a missed gate.
    DeviceUnavailable,
    /// 128 + N: `bench-alloc` or `stress` stopped by signal N (130 SIGINT, 143 SIGTERM) after
    /// freeing everything and printing its partial report.
    Interrupted(u8),
}

impl Exit {
    /// The numeric status passed to the operating system.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::DoesNotFit => 3,
            Exit::DeviceUnavailable => 4,
            Exit::Interrupted(signal) => 128u8.saturating_add(signal),
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        std::process::ExitCode::from(exit.code())
    }
}
