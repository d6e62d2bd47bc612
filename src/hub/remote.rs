//! A large file read from its start, fetched in growing Range requests as a parser asks for
//! more (a GGUF header's length is known only by walking it), and kept in the cache after.

use std::io::Read;

use super::{Hub, HubError, Repo};

/// The first request's size; each later one doubles, up to [`MAX_CHUNK`].
const FIRST_CHUNK: u64 = 1 << 20;
const MAX_CHUNK: u64 = 16 << 20;
/// The most of one file ever fetched: a header longer than this is refused.
pub const MAX_HEAD: u64 = 256 << 20;

/// A remote file's leading bytes, read on demand. Implements [`Read`]; a failed fetch ends the
/// reading and is kept for [`RemoteFile::take_error`], so a parser's "unexpected end" can be
/// reported as the network failure it was.
pub struct RemoteFile<'a> {
    hub: &'a Hub,
    repo: &'a Repo,
    path: String,
    size: u64,
    data: Vec<u8>,
    pos: usize,
    chunk: u64,
    fetched: bool,
    error: Option<HubError>,
}

impl<'a> RemoteFile<'a> {
    pub(super) fn open(
        hub: &'a Hub,
        repo: &'a Repo,
        path: &str,
    ) -> Result<RemoteFile<'a>, HubError> {
        let (size, data, fetched) = match hub.cache.head(&repo.id, &repo.commit, path) {
            Some((size, data)) => (size, data, false),
            None => {
                let (size, data) = hub.range(repo, path, 0..FIRST_CHUNK)?;
                (size, data, true)
            }
        };
        Ok(RemoteFile {
            hub,
            repo,
            path: path.to_string(),
            size,
            data,
            pos: 0,
            chunk: FIRST_CHUNK * 2,
            fetched,
            error: None,
        })
    }

    /// The file's size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The path in the repository.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Bytes fetched or read from the cache so far.
    pub fn held(&self) -> u64 {
        self.data.len() as u64
    }

    /// The fetch that ended the reading, if one did.
    pub fn take_error(&mut self) -> Option<HubError> {
        self.error.take()
    }

    /// Keeps what was read in the cache, for the next run.
    pub fn keep(&self) {
        if self.fetched {
            self.hub.keep(self.hub.cache.set_head(
                &self.repo.id,
                &self.repo.commit,
                &self.path,
                self.size,
                &self.data,
            ));
        }
    }

    fn fetch_more(&mut self) -> Result<(), HubError> {
        let start = self.data.len() as u64;
        let end = (start + self.chunk).min(self.size).min(MAX_HEAD);
        if start >= end {
            return Ok(());
        }
        let (_, more) = self.hub.range(self.repo, &self.path, start..end)?;
        self.data.extend_from_slice(&more);
        self.chunk = (self.chunk * 2).min(MAX_CHUNK);
        self.fetched = true;
        Ok(())
    }
}

impl Read for RemoteFile<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos >= self.data.len() && self.error.is_none() {
            let before = self.data.len();
            if let Err(e) = self.fetch_more() {
                self.error = Some(e);
            } else if self.data.len() == before && (before as u64) < self.size {
                self.error = Some(HubError::BadReply {
                    url: self.path.clone(),
                    why: format!("a header longer than {} MiB", MAX_HEAD >> 20),
                });
            }
        }
        let have = &self.data[self.pos.min(self.data.len())..];
        let n = have.len().min(buf.len());
        buf[..n].copy_from_slice(&have[..n]);
        self.pos += n;
        Ok(n)
    }
}
