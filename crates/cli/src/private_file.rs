//! Writing a file only its owner can read, never through a symbolic link: `fetch --out` puts
//! customer data in clear there.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::Path;

use anyhow::{anyhow, bail, Context};

/// Writes `data` to `path` as a new file with mode 0600.
///
/// A symbolic link at `path` is refused, and so is anything else that is not a regular file. The
/// data goes to a temporary file in the same directory, created exclusively (`O_CREAT|O_EXCL`
/// follows no link) with mode 0600, which then replaces `path` by a rename. A rename replaces the
/// directory entry and writes through nothing, so a link that appears at `path` after the check
/// is replaced, its target left untouched, and an existing file of any mode, or with other hard
/// links, is replaced rather than rewritten in place.
pub fn write_private(path: &Path, data: &[u8]) -> anyhow::Result<()> {
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
    let written = write_new(&temp, data).and_then(|()| {
        std::fs::rename(&temp, path)
            .with_context(|| format!("Failed to replace {}", path.display()))
    });
    if written.is_err() {
        // Best effort: the temporary file may not exist.
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// Creates `path`, which must not exist, with mode 0600, and writes `data` to disk.
fn write_new(path: &Path, data: &[u8]) -> anyhow::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("Failed to create {}", path.display()))?;
    #[cfg(unix)]
    {
        // The umask may have taken bits from 0600; the owner must still read the result.
        use std::os::unix::fs::PermissionsExt as _;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("Failed to set the mode of {}", path.display()))?;
    }
    file.write_all(data)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("Failed to write {}", path.display()))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::PathBuf;

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
}
