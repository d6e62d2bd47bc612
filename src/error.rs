//! Errors that decide an exit code at the edge of the program.

use thiserror::Error;

/// Errors the command layer raises itself; library errors travel inside `anyhow::Error`.
#[derive(Debug, Error)]
pub enum CliError {
    /// The flags are individually valid but do not make sense together (exit 2).
    #[error("{0}")]
    Usage(String),
    /// A failure found after the report was printed (a missed gate, a corruption: exit 1; no
    /// device on the backends `discover --backend` named: exit 4), and with `--json` no second
    /// document, since stdout already holds the report.
    #[error("{1}")]
    AfterReport(crate::exit::Exit, String),
    /// SIGINT or SIGTERM arrived before there was anything to report (while drivers were
    /// probed or the device opened): exit 128 + the signal, and with `--json` one error
    /// document.
    #[error("{1}")]
    Interrupted(crate::exit::Exit, String),
}

/// The error and its causes joined, so logs and CI annotations stay tidy (control characters
/// are escaped when printed). A cause whose text its parent already shows (e.g. an OS error
/// quoted in "path: error") is not repeated.
pub fn error_line(err: &anyhow::Error) -> String {
    let mut message = err.to_string();
    for cause in err.chain().skip(1) {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    message
}

/// Whether a closed pipe (`gpumem … | head -1`) ended the command.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
