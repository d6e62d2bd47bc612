//! The files gpumem touches: regular files only, read within a stated bound, and outputs
//! written whole or not at all.
//!
//! Every file gpumem reads (`--config`, `--gguf` and its shards, `--safetensors` and its shards,
//! `--inventory`, `--trace`, the model stores' refs and manifests, `/proc` and sysfs) goes
//! through here, so a FIFO cannot hang gpumem, `/dev/zero` cannot fill memory, and a directory
//! is named as one. Files are opened non-blocking, so even a FIFO swapped in after a check does
//! not block the open; the type is then checked on the open handle.
//!
//! Every output gpumem writes (`--timeline`, `--save-baseline`, `--export-*`) goes through
//! [`write_output`], which asks [`output_kind`] what the path names. A regular file, or a path
//! that does not exist yet, is written by [`write_atomic`]: a temporary file in the
//! destination's folder renamed over it, so an interrupted write leaves the old file, a symlink
//! is replaced rather than followed, and a destination that is one of the run's inputs (the same
//! device and inode, whatever the path: a hard link, a symlink) is refused. A FIFO or a
//! character device (`/dev/null`, a terminal) is opened and written through, never replaced;
//! `-`, `/dev/stdout` and `/dev/stderr` (and `/dev/fd/1`, `/dev/fd/2`) are the process's own
//! streams. A write error (`/dev/full`: no space left) is returned, never lost.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Why a named file cannot be read.
#[derive(Debug, Error)]
pub enum InputError {
    /// The path exists but is not a regular file.
    #[error("{}: not a regular file ({kind})", path.display())]
    NotRegular {
        /// The path as the user gave it.
        path: PathBuf,
        /// What it is instead: a directory, a FIFO, a socket, a device.
        kind: &'static str,
    },
    /// The file is larger than gpumem reads for this kind of input.
    #[error("{}: {size} bytes is larger than the {limit}-byte limit for {what}", path.display())]
    TooLarge {
        /// The path as the user gave it.
        path: PathBuf,
        /// Its size (or, for files whose size the OS does not report, what was read).
        size: u64,
        /// The size cap in bytes that the file exceeds.
        limit: u64,
        /// The kind of input, e.g. "a config.json".
        what: &'static str,
    },
    /// An output would replace one of the run's inputs.
    #[error("{} is the input {}: refusing to overwrite it", path.display(), input.display())]
    WouldOverwriteInput {
        /// The output as given.
        path: PathBuf,
        /// The input it is the same file as.
        input: PathBuf,
    },
    /// An output names something that cannot take one: a directory, a socket, a block device.
    #[error("{} is {kind}: an output goes to a file, a FIFO or a character device", path.display())]
    NotWritable {
        /// The output as given.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// A FIFO's reader went away before the whole output was written.
    #[error("{}: the FIFO's reader closed it before the output was written", path.display())]
    ReaderGone {
        /// The FIFO as given.
        path: PathBuf,
    },
    /// The OS refused (missing file, permissions).
    #[error("{}: {source}", path.display())]
    Io {
        /// The path as the user gave it.
        path: PathBuf,
        /// Why the operating system refused to open or read it.
        source: std::io::Error,
    },
}

fn kind_of(ft: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_socket() {
            return "a socket";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
    }
    if ft.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// Opens `path` for reading if it is a regular file; returns the file and its size.
pub fn open_regular(path: &Path) -> Result<(File, u64), InputError> {
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // A FIFO opened for reading blocks until a writer appears; O_NONBLOCK returns at once.
        // Regular files ignore the flag, so reads below behave as usual.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(InputError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(meta.file_type()),
        });
    }
    Ok((file, meta.len()))
}

/// Reads the whole of a regular file of at most `limit` bytes. The bound holds even for files
/// whose reported size is wrong (`/proc`): at most `limit + 1` bytes are ever read.
#[expect(
    clippy::cast_possible_truncation,
    reason = "usize is 64 bits (lib.rs refuses other targets)"
)]
pub fn read_bounded(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, InputError> {
    let (file, size) = open_regular(path)?;
    let too_large = |size| InputError::TooLarge {
        path: path.to_path_buf(),
        size,
        limit,
        what,
    };
    if size > limit {
        return Err(too_large(size));
    }
    let mut data = Vec::with_capacity(size as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(|source| InputError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if data.len() as u64 > limit {
        return Err(too_large(data.len() as u64));
    }
    Ok(data)
}

/// A small text file the kernel provides (`/proc`, sysfs, cgroupfs), through the same reader:
/// `None` when it is absent, not a regular file, over `limit` bytes or not UTF-8, since such
/// files are optional facts, never inputs whose fault to report.
pub fn read_system_text(path: &Path, limit: u64) -> Option<String> {
    let bytes = read_bounded(path, limit, "a system file").ok()?;
    String::from_utf8(bytes).ok()
}

/// What makes a file itself whatever path names it: its device and inode on Unix, its
/// canonical path elsewhere. `None` when the path cannot be looked up.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FileId(#[cfg(unix)] (u64, u64), #[cfg(not(unix))] PathBuf);

/// The identity of the file `path` names (following symlinks).
pub fn file_id(path: &Path) -> Option<FileId> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path)
            .ok()
            .map(|m| FileId((m.dev(), m.ino())))
    }
    #[cfg(not(unix))]
    {
        std::fs::canonicalize(path).ok().map(FileId)
    }
}

/// Whether `a` and `b` are the same file (see [`FileId`]). Paths that cannot be looked up are
/// not the same file.
pub fn same_file(a: &Path, b: &Path) -> bool {
    file_id(a).is_some_and(|x| file_id(b) == Some(x))
}

/// Writes `data` to `path` whole: into a new temporary file beside it, synced, then renamed
/// over `path`. Refused when `path` is the same file as any of `inputs` (checked on the
/// destination as it is now, and on what a symlink there points to), so an output can never
/// be written onto a file the run reads.
pub fn write_atomic(path: &Path, data: &[u8], inputs: &[&Path]) -> Result<(), InputError> {
    use std::io::Write;
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(input) = inputs.iter().find(|i| same_file(path, i)) {
        return Err(InputError::WouldOverwriteInput {
            path: path.to_path_buf(),
            input: input.to_path_buf(),
        });
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "names no file",
        ))
    })?;
    // create_new: never opens (or truncates) anything already there, a planted symlink included.
    let mut attempt = 0u32;
    let (tmp, mut file) = loop {
        let tmp = dir.join(format!(
            ".{}.gpumem-{}-{attempt}.tmp",
            name.to_string_lossy(),
            std::process::id()
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(file) => break (tmp, file),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 100 => {
                attempt += 1
            }
            Err(e) => return Err(io(e)),
        }
    };
    let written = file
        .write_all(data)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    Ok(())
}

/// What an output path names, and so how [`write_output`] writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// A regular file (or a symlink to one), or nothing yet: written whole beside it and renamed
    /// over it.
    File,
    /// A FIFO or a character device: opened for writing and written through, never replaced.
    Stream,
    /// The process's standard output: `-`, `/dev/stdout`, `/dev/fd/1`, `/proc/self/fd/1`.
    Stdout,
    /// The process's standard error: `/dev/stderr`, `/dev/fd/2`, `/proc/self/fd/2`.
    Stderr,
}

impl OutputKind {
    /// Whether the output is written through rather than replaced.
    pub fn is_stream(self) -> bool {
        self != OutputKind::File
    }
}

/// How `path` is to be written: by its name for the standard streams (whatever they are
/// redirected to, they are never replaced), else by what it is now, following symlinks. A
/// directory, a socket or a block device is refused.
pub fn output_kind(path: &Path) -> Result<OutputKind, InputError> {
    let name = path.as_os_str();
    if name == "-" || name == "/dev/stdout" || name == "/dev/fd/1" || name == "/proc/self/fd/1" {
        return Ok(OutputKind::Stdout);
    }
    if name == "/dev/stderr" || name == "/dev/fd/2" || name == "/proc/self/fd/2" {
        return Ok(OutputKind::Stderr);
    }
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        // Nothing there (or a dangling symlink, replaced as any symlink is).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(OutputKind::File),
        Err(source) => {
            return Err(InputError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let ft = meta.file_type();
    if ft.is_file() {
        return Ok(OutputKind::File);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() || ft.is_char_device() {
            return Ok(OutputKind::Stream);
        }
    }
    Err(InputError::NotWritable {
        path: path.to_path_buf(),
        kind: kind_of(ft),
    })
}

/// What two outputs must not share: the same standard stream, the same file (by device and
/// inode, whatever the path), or for a file not yet there, the same canonical folder and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OutputTarget {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
    /// A file or node that exists.
    Existing(FileId),
    /// A file still to be created, by its canonical path.
    New(PathBuf),
}

/// The target `path` writes to (see [`OutputTarget`]).
pub fn output_target(path: &Path) -> OutputTarget {
    match output_kind(path) {
        Ok(OutputKind::Stdout) => return OutputTarget::Stdout,
        Ok(OutputKind::Stderr) => return OutputTarget::Stderr,
        _ => {}
    }
    if let Some(id) = file_id(path) {
        return OutputTarget::Existing(id);
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    OutputTarget::New(path.file_name().map_or(dir.clone(), |n| dir.join(n)))
}

/// Writes `data` to the output `path` as [`output_kind`] classifies it: a file atomically
/// ([`write_atomic`]), a FIFO or character device through an open handle, `-`/`/dev/stdout`
/// and `/dev/stderr` to the process's own streams. Never onto one of `inputs`; every write
/// error is returned (a closed standard output as the `BrokenPipe` it is).
pub fn write_output(path: &Path, data: &[u8], inputs: &[&Path]) -> Result<(), InputError> {
    use std::io::Write;
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    match output_kind(path)? {
        OutputKind::File => write_atomic(path, data, inputs),
        OutputKind::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(data).and_then(|()| out.flush()).map_err(io)
        }
        OutputKind::Stderr => {
            let mut err = std::io::stderr().lock();
            err.write_all(data).and_then(|()| err.flush()).map_err(io)
        }
        OutputKind::Stream => {
            if let Some(input) = inputs.iter().find(|i| same_file(path, i)) {
                return Err(InputError::WouldOverwriteInput {
                    path: path.to_path_buf(),
                    input: input.to_path_buf(),
                });
            }
            // No create, no truncate: the node is written as it is (a FIFO's open waits for
            // its reader, as any writer's does).
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(io)?;
            // Checked again on the handle: a regular file swapped in since is not written
            // through (it would be neither truncated nor replaced).
            if file.metadata().map_err(io)?.is_file() {
                return Err(io(std::io::Error::other(
                    "became a regular file while being opened",
                )));
            }
            file.write_all(data)
                .and_then(|()| file.flush())
                .map_err(|e| match e.kind() {
                    std::io::ErrorKind::BrokenPipe => InputError::ReaderGone {
                        path: path.to_path_buf(),
                    },
                    _ => io(e),
                })
        }
    }
}

/// A path from the environment variable `key`; unset and empty are the same (as the Hugging
/// Face and Ollama tools read their folders).
pub fn env_path(key: &str) -> Option<PathBuf> {
    std::env::var_os(key)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_directories_devices_and_oversized_files() {
        let dir = std::env::temp_dir();
        assert!(matches!(
            read_bounded(&dir, 10, "a test"),
            Err(InputError::NotRegular {
                kind: "a directory",
                ..
            })
        ));
        #[cfg(unix)]
        assert!(matches!(
            read_bounded(Path::new("/dev/zero"), 10, "a test"),
            Err(InputError::NotRegular {
                kind: "a character device",
                ..
            })
        ));
        let file = dir.join(format!("gpumem-input-{}", std::process::id()));
        std::fs::write(&file, b"0123456789ab").unwrap();
        let err = read_bounded(&file, 10, "a test").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: 12 bytes is larger than the 10-byte limit for a test",
                file.display()
            )
        );
        assert_eq!(read_bounded(&file, 12, "a test").unwrap(), b"0123456789ab");
        std::fs::remove_file(&file).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn atomic_writes_replace_links_and_refuse_inputs() {
        let dir = std::env::temp_dir().join(format!("gpumem-write-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let input = dir.join("trace.pickle");
        std::fs::write(&input, b"input").unwrap();
        let hard = dir.join("hard.svg");
        std::fs::hard_link(&input, &hard).unwrap();
        let soft = dir.join("soft.svg");
        std::os::unix::fs::symlink(&input, &soft).unwrap();
        for out in [&input, &hard, &soft] {
            let err = write_atomic(out, b"svg", &[&input]).unwrap_err();
            assert!(
                matches!(err, InputError::WouldOverwriteInput { .. }),
                "{err}"
            );
        }
        assert_eq!(std::fs::read(&input).unwrap(), b"input");
        // A symlink to a file that is not an input is replaced, its target left alone.
        let other = dir.join("other.txt");
        std::fs::write(&other, b"keep").unwrap();
        let link = dir.join("link.svg");
        std::os::unix::fs::symlink(&other, &link).unwrap();
        write_atomic(&link, b"svg", &[&input]).unwrap();
        assert_eq!(std::fs::read(&other).unwrap(), b"keep");
        assert_eq!(std::fs::read(&link).unwrap(), b"svg");
        assert!(!std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn outputs_are_classified_by_what_they_name() {
        assert_eq!(output_kind(Path::new("-")).unwrap(), OutputKind::Stdout);
        assert_eq!(
            output_kind(Path::new("/dev/stdout")).unwrap(),
            OutputKind::Stdout
        );
        assert_eq!(
            output_kind(Path::new("/dev/stderr")).unwrap(),
            OutputKind::Stderr
        );
        assert_eq!(
            output_kind(Path::new("/dev/null")).unwrap(),
            OutputKind::Stream
        );
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new.xml");
        assert_eq!(output_kind(&new).unwrap(), OutputKind::File);
        assert!(matches!(
            output_kind(dir.path()),
            Err(InputError::NotWritable {
                kind: "a directory",
                ..
            })
        ));
        // The same stream, file or new path under another spelling is the same target.
        assert_eq!(
            output_target(Path::new("-")),
            output_target(Path::new("/dev/stdout"))
        );
        assert_ne!(
            output_target(Path::new("/dev/stdout")),
            output_target(Path::new("/dev/stderr"))
        );
        let dotted = dir.path().join(".").join("new.xml");
        assert_eq!(output_target(&new), output_target(&dotted));
        // A character device is written through: /dev/full's ENOSPC comes back, and the node
        // is still there (guarded: only a node classified as a stream is ever written).
        if output_kind(Path::new("/dev/full")).ok() == Some(OutputKind::Stream) {
            let err = write_output(Path::new("/dev/full"), b"x", &[]).unwrap_err();
            assert!(
                matches!(&err, InputError::Io { source, .. } if source.raw_os_error() == Some(libc::ENOSPC)),
                "{err}"
            );
            use std::os::unix::fs::FileTypeExt;
            assert!(std::fs::metadata("/dev/full")
                .unwrap()
                .file_type()
                .is_char_device());
        }
    }
}
