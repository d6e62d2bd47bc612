//! Opening the files a user names: regular files only, read within a stated bound.
//!
//! Every file input (`--config`, `--gguf`, `--safetensors` and its shards, `--inventory`,
//! `--trace`) goes through here, so a FIFO cannot hang gpumem, `/dev/zero` cannot fill memory,
//! and a directory is named as one. Files are opened non-blocking, so even a FIFO swapped in
//! after a check does not block the open; the type is then checked on the open handle.

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
}
