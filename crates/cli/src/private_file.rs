//! Writing a file only its owner can read, never through a symbolic link: `fetch --out` puts
//! customer data in clear there, and its spool for standard output is private too.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};

/// A file that will replace `path`, written first as a temporary file in the same directory.
///
/// A symbolic link at `path` is refused, and so is anything else that is not a regular file. The
/// temporary file is created exclusively (`O_CREAT|O_EXCL` follows no link) with mode 0600, and
/// replaces `path` by a rename in [`commit`](Self::commit). A rename replaces the directory entry
/// and writes through nothing, so a link that appears at `path` after the check is replaced, its
/// target left untouched, and an existing file of any mode, or with other hard links, is
/// replaced rather than rewritten in place. Dropped without a commit (any failure), the
/// temporary file is removed and `path` is left as it was.
pub struct PrivateFile {
    file: File,
    temp: PathBuf,
    path: PathBuf,
    committed: bool,
}

impl PrivateFile {
    /// Checks `path` and creates the temporary file beside it.
    pub fn beside(path: &Path) -> anyhow::Result<PrivateFile> {
        match std::fs::symlink_metadata(path) {
            Ok(found) if found.file_type().is_symlink() => bail!(
                "{} is a symbolic link: refusing to write the result through it",
                path.display()
            ),
            Ok(found) if !found.is_file() => bail!(
                "{} exists and is not a regular file: refusing to replace it",
                path.display()
            ),
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(error).with_context(|| format!("Failed to inspect {}", path.display()))
            }
        }
        let name = path
            .file_name()
            .ok_or_else(|| anyhow!("{} does not name a file", path.display()))?;
        let dir = path
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let temp = dir.join(format!(
            ".{}.{}.tmp",
            name.to_string_lossy(),
            uuid::Uuid::new_v4().simple()
        ));
        let file = create_private(&temp, false)?;
        Ok(PrivateFile {
            file,
            temp,
            path: path.to_owned(),
            committed: false,
        })
    }

    /// Writes the data to disk and moves the temporary file to `path`.
    pub fn commit(mut self) -> anyhow::Result<()> {
        self.file
            .sync_all()
            .with_context(|| format!("Failed to write {}", self.temp.display()))?;
        std::fs::rename(&self.temp, &self.path)
            .with_context(|| format!("Failed to replace {}", self.path.display()))?;
        self.committed = true;
        Ok(())
    }
}

impl std::io::Write for PrivateFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.file.write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Drop for PrivateFile {
    fn drop(&mut self) {
        if !self.committed {
            // Best effort: nothing more can be done about a file that cannot be removed.
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// A private file in the system's temporary directory with no name: created with mode 0600 and
/// removed from the directory at once, so it disappears with its last handle whatever happens.
/// For data that must be held before it may be shown (`fetch` to standard output).
pub fn anonymous() -> anyhow::Result<File> {
    let path =
        std::env::temp_dir().join(format!("fetcherctl-{}.tmp", uuid::Uuid::new_v4().simple()));
    let file = create_private(&path, true)?;
    std::fs::remove_file(&path)
        .with_context(|| format!("Failed to unlink the spool file {}", path.display()))?;
    Ok(file)
}

/// Creates `path`, which must not exist, with mode 0600 (readable too when `read`).
fn create_private(path: &Path, read: bool) -> anyhow::Result<File> {
    let mut options = OpenOptions::new();
    options.read(read).write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let file = options
        .open(path)
        .with_context(|| format!("Failed to create {}", path.display()))?;
    #[cfg(unix)]
    {
        // The umask may have taken bits from 0600; the owner must still read the result.
        use std::os::unix::fs::PermissionsExt as _;
        if let Err(error) = file.set_permissions(std::fs::Permissions::from_mode(0o600)) {
            let _ = std::fs::remove_file(path);
            return Err(error)
                .with_context(|| format!("Failed to set the mode of {}", path.display()));
        }
    }
    Ok(file)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::PathBuf;

    /// Writes `data` to `path` through a [`PrivateFile`].
    fn write_private(path: &Path, data: &[u8]) -> anyhow::Result<()> {
        let mut file = PrivateFile::beside(path)?;
        file.write_all(data)?;
        file.commit()
    }

    /// A fresh directory under the system's temporary one, removed on drop.
    struct Dir(PathBuf);

    impl Dir {
        fn new() -> Dir {
            let dir = std::env::temp_dir().join(format!(
                "fetcherctl-private-file-{}",
                uuid::Uuid::new_v4().simple()
            ));
            std::fs::create_dir(&dir).expect("temp dir");
            Dir(dir)
        }

        fn names(&self) -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(&self.0)
                .expect("list")
                .map(|entry| {
                    entry
                        .expect("entry")
                        .file_name()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            names.sort();
            names
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn a_new_file_is_owner_only() {
        let dir = Dir::new();
        let path = dir.0.join("out.json");
        write_private(&path, b"{}").expect("written");
        assert_eq!(std::fs::read(&path).expect("read"), b"{}");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(dir.names(), ["out.json"]);
    }

    #[test]
    fn an_existing_file_is_replaced_by_an_owner_only_one() {
        let dir = Dir::new();
        let path = dir.0.join("out.json");
        std::fs::write(&path, "older and longer").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let other_link = dir.0.join("hard-link");
        std::fs::hard_link(&path, &other_link).expect("hard link");

        write_private(&path, b"new").expect("written");
        assert_eq!(std::fs::read(&path).expect("read"), b"new");
        assert_eq!(mode(&path), 0o600);
        // The old inode, reachable through its other name, was not rewritten.
        assert_eq!(
            std::fs::read(&other_link).expect("read"),
            b"older and longer"
        );
        assert_eq!(dir.names(), ["hard-link", "out.json"]);
    }

    #[test]
    fn a_symlink_is_refused_and_its_target_untouched() {
        let dir = Dir::new();
        let target = dir.0.join("target");
        std::fs::write(&target, "precious").expect("write");
        let link = dir.0.join("link");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        // A dangling link too: following it would create the file elsewhere.
        let dangling = dir.0.join("dangling");
        std::os::unix::fs::symlink(dir.0.join("nowhere"), &dangling).expect("symlink");

        for path in [&link, &dangling] {
            let error = write_private(path, b"x").expect_err("a link");
            assert!(error.to_string().contains("is a symbolic link"), "{error}");
        }
        assert_eq!(std::fs::read(&target).expect("read"), b"precious");
        assert_eq!(dir.names(), ["dangling", "link", "target"]);
    }

    #[test]
    fn a_directory_is_not_replaced() {
        let dir = Dir::new();
        let error = write_private(&dir.0, b"x").expect_err("a directory");
        assert!(error.to_string().contains("not a regular file"), "{error}");
    }

    #[test]
    fn an_uncommitted_file_leaves_nothing_behind() {
        let dir = Dir::new();
        let path = dir.0.join("out.json");
        std::fs::write(&path, "kept").expect("write");
        let mut file = PrivateFile::beside(&path).expect("created");
        file.write_all(b"unverified").expect("written");
        assert_eq!(mode(&file.temp), 0o600);
        assert_eq!(
            dir.names().len(),
            2,
            "the temporary file is beside the output"
        );
        drop(file);
        assert_eq!(dir.names(), ["out.json"]);
        assert_eq!(std::fs::read(&path).expect("read"), b"kept");
    }

    #[test]
    fn an_anonymous_file_reads_back_what_was_written() {
        use std::io::{Read as _, Seek as _};
        let mut file = anonymous().expect("created");
        file.write_all(b"spooled").expect("written");
        file.rewind().expect("rewind");
        let mut back = String::new();
        file.read_to_string(&mut back).expect("read");
        assert_eq!(back, "spooled");
    }
}
