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
    /// driver, no such index), or no backend `discover --backend` named has a device, so CI can
    /// tell a lost GPU from a missed gate.
    DeviceUnavailable,
    /// 5: a model named by its Hub id could not be read: offline and not cached, a gated
    /// repository without access, or the network failed after its retries.
    HubUnavailable,
    /// 6: a `bench-alloc --max-regression` gate could not be decided: the median moved by more
    /// than the allowance, but the runs are too few or too noisy to call it significant at
    /// `--confidence` (with `--min-runs`/`--max-runs`: still after `--max-runs`, or out of
    /// their reach against the baseline's runs). Distinct from 1 so that CI can rerun with more
    /// `--runs` rather than report a regression, and never 0: a regression that could not be
    /// ruled out is not a pass.
    Undecided,
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
            Exit::HubUnavailable => 5,
            Exit::Undecided => 6,
            Exit::Interrupted(signal) => 128u8.saturating_add(signal),
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        std::process::ExitCode::from(exit.code())
    }
}

/// Every exit status and what it means: the one table `--help`, the man pages and the README
/// print (a test holds the README to it).
pub const TABLE: &[(&str, &str)] = &[
    ("0", "success"),
    (
        "1",
        "runtime failure, or a `--min-*`/`--max-*` threshold or a `--max-regression` gate was missed",
    ),
    (
        "2",
        "usage error (unknown flag, model or backend, malformed value)",
    ),
    (
        "3",
        "does not fit: no suitable device (`select`, `estimate --fits`)",
    ),
    (
        "4",
        "the device `bench-alloc` or `stress` was to use is missing or cannot be opened, or no backend `discover --backend` named has a device (a lost GPU, not a missed gate)",
    ),
    (
        "5",
        "a model named by its Hub id could not be read: offline (`--offline`, `HF_HUB_OFFLINE=1`) and not cached, a gated repository without access, or the network failed after retries",
    ),
    (
        "6",
        "a `--max-regression` gate was undecided: the median moved by more than PCT, but the runs are too few or too noisy for the Mann-Whitney test to call it significant at `--confidence` (rerun both with more `--runs`, or let `--min-runs`/`--max-runs` add runs until decided); a missed gate (1) takes precedence",
    ),
    (
        "130, 143",
        "`bench-alloc` or `stress` interrupted by SIGINT or SIGTERM: everything is freed and the partial report is marked interrupted and not passed",
    ),
];

/// Said after the table: how errors and a closed pipe end.
pub const NOTE: &str = "Errors are one line on stderr; with --json an error document is \
printed on stdout too. A closed output pipe (e.g. `gpumem discover | head -1`) exits 0 quietly.";
