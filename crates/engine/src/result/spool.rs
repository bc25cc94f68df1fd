//! A part of the result waiting its turn: its chunks kept in memory up to a bound, then appended
//! to a temporary file, and read back in order.
//!
//! The file is created private (mode 0600) and unnamed (`O_TMPFILE`, or unlinked at once where
//! that is not supported) in `ENGINE_SPILL_DIR`: it has no name on disk, so nothing is left
//! behind on any path, a crash included; its space is freed when the spool is drained or
//! dropped. File I/O runs on the blocking pool.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{EngineError, Result};

/// Bytes read back from a spill file per chunk.
const READ_BYTES: u64 = 512 * 1024;

/// Where and from when parts waiting their turn spill.
#[derive(Debug, Clone)]
pub(crate) struct SpillPlace {
    /// `ENGINE_SPILL_DIR`.
    pub dir: PathBuf,
    /// Bytes a waiting part keeps in memory before it spills.
    pub memory_bytes: usize,
}

/// What an extraction spilled to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpillStats {
    /// Temporary files created.
    pub files: u64,
    /// Bytes written to them.
    pub bytes: u64,
}

/// The chunks of one part not yet put out, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Spool {
    memory: VecDeque<Vec<u8>>,
    memory_bytes: usize,
    /// Chunks that came once memory was full; every chunk in memory is older than these.
    file: Option<SpillFile>,
}

#[derive(Debug)]
struct SpillFile {
    file: Arc<File>,
    written: u64,
    read: u64,
}

impl Spool {
    pub fn is_empty(&self) -> bool {
        self.memory.is_empty() && self.file.is_none()
    }

    /// Appends a chunk: in memory while the part's share lasts and nothing is on disk, else to
    /// the file (created on the first need).
    pub async fn push(
        &mut self,
        chunk: Vec<u8>,
        place: &SpillPlace,
        stats: &mut SpillStats,
    ) -> Result<()> {
        if self.file.is_none() && self.memory_bytes + chunk.len() <= place.memory_bytes {
            self.memory_bytes += chunk.len();
            self.memory.push_back(chunk);
            return Ok(());
        }
        if self.file.is_none() {
            let dir = place.dir.clone();
            let file = blocking(&place.dir, move || tempfile::tempfile_in(&dir)).await?;
            stats.files += 1;
            self.file = Some(SpillFile {
                file: Arc::new(file),
                written: 0,
                read: 0,
            });
        }
        let Some(spill) = self.file.as_mut() else {
            unreachable!("the spill file was created above");
        };
        let (file, at, len) = (spill.file.clone(), spill.written, chunk.len() as u64);
        blocking(&place.dir, move || file.write_all_at(&chunk, at)).await?;
        spill.written += len;
        stats.bytes += len;
        Ok(())
    }

    /// Takes the oldest chunk, if any. A drained file is closed, which frees its space.
    pub async fn pop(&mut self, place: &SpillPlace) -> Result<Option<Vec<u8>>> {
        if let Some(chunk) = self.memory.pop_front() {
            self.memory_bytes -= chunk.len();
            return Ok(Some(chunk));
        }
        let Some(spill) = self.file.as_mut() else {
            return Ok(None);
        };
        let len = (spill.written - spill.read).min(READ_BYTES);
        let (file, at) = (spill.file.clone(), spill.read);
        let chunk = blocking(&place.dir, move || {
            // At most `READ_BYTES`: the length fits in memory.
            let mut chunk = vec![0; usize::try_from(len).unwrap_or(usize::MAX)];
            file.read_exact_at(&mut chunk, at).map(|()| chunk)
        })
        .await?;
        spill.read += len;
        if spill.read == spill.written {
            self.file = None;
        }
        Ok(Some(chunk))
    }
}

/// Creates, writes and drops one spill file in `dir`, as a spill does: whether the directory
/// takes them (it exists, is writable and has room for a byte). The Worker checks
/// `ENGINE_SPILL_DIR` with it at start.
pub fn probe_spill_dir(dir: &Path) -> std::io::Result<()> {
    let file = tempfile::tempfile_in(dir)?;
    file.write_all_at(b"\n", 0)?;
    file.sync_data()
}

/// Runs file I/O on the blocking pool; a failure is a spill error naming `dir`.
async fn blocking<T: Send + 'static>(
    dir: &Path,
    io: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T> {
    let detail = match tokio::task::spawn_blocking(io).await {
        Ok(Ok(value)) => return Ok(value),
        Ok(Err(error)) => error.to_string(),
        Err(join_error) => join_error.to_string(),
    };
    Err(EngineError::Spill {
        dir: dir.to_owned(),
        detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(dir: &std::path::Path, memory_bytes: usize) -> SpillPlace {
        SpillPlace {
            dir: dir.to_owned(),
            memory_bytes,
        }
    }

    #[tokio::test]
    async fn chunks_come_back_in_order_across_memory_and_file_and_leave_no_file() {
        let dir = tempfile::tempdir().expect("dir");
        let place = place(dir.path(), 10);
        let mut stats = SpillStats::default();
        let mut spool = Spool::default();
        let mut expected = Vec::new();
        // 4 + 4 fit in memory; the rest spills, popping in between included.
        for (i, chunk) in [&b"aaaa"[..], b"bbbb", b"cccc", b"dd"].iter().enumerate() {
            spool
                .push(chunk.to_vec(), &place, &mut stats)
                .await
                .expect("push");
            expected.extend_from_slice(chunk);
            if i == 2 {
                assert_eq!(stats.files, 1, "the third chunk passes the memory share");
            }
        }
        let mut got = spool.pop(&place).await.expect("pop").expect("a chunk");
        spool
            .push(b"ee".to_vec(), &place, &mut stats)
            .await
            .expect("push");
        expected.extend_from_slice(b"ee");
        while let Some(chunk) = spool.pop(&place).await.expect("pop") {
            got.extend_from_slice(&chunk);
        }
        assert_eq!(got, expected);
        assert!(spool.is_empty());
        assert_eq!(stats, SpillStats { files: 1, bytes: 8 });
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("list").count(),
            0,
            "the spill file never had a name in the directory"
        );
    }

    #[tokio::test]
    async fn a_missing_spill_directory_fails_the_job_naming_the_directory() {
        let place = place(Path::new("/nonexistent/fetcher-spill"), 0);
        let mut spool = Spool::default();
        let error = spool
            .push(b"x".to_vec(), &place, &mut SpillStats::default())
            .await
            .expect_err("no directory");
        assert!(matches!(error, EngineError::Spill { .. }), "{error}");
        assert!(
            !error.is_retriable(),
            "the Worker's own disk: the job fails"
        );
        let text = error.to_string();
        assert!(
            text.starts_with(
                "the spill directory ENGINE_SPILL_DIR (/nonexistent/fetcher-spill) could not be written: "
            ),
            "{text}"
        );
        assert_eq!(contract::redact(&text), text, "nothing in it is redacted");
    }

    #[test]
    fn the_probe_takes_a_writable_directory_and_refuses_one_root_cannot_write() {
        let dir = tempfile::tempdir().expect("dir");
        probe_spill_dir(dir.path()).expect("a fresh directory takes spill files");
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("list").count(),
            0,
            "the probe leaves nothing behind"
        );
        // sysfs takes no new file, even from root (tests run as root, so mode bits would not do).
        let refused = probe_spill_dir(Path::new("/sys")).expect_err("sysfs takes no file");
        assert_eq!(
            refused.kind(),
            std::io::ErrorKind::PermissionDenied,
            "{refused}"
        );
        let missing = probe_spill_dir(Path::new("/nonexistent/fetcher-spill"))
            .expect_err("no such directory");
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound, "{missing}");
    }
}
