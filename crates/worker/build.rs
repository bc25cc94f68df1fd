//! Build facts for `fetcher-worker --version`, `/readyz` and `fetcher_worker_build_info`: the
//! git revision (`git rev-parse --short HEAD`, or `unknown` where there is no repository or no
//! git, as in a build from a source tarball; `FETCHER_BUILD_REVISION` when set, as the image's
//! build, whose context has no `.git`, passes it) and the UTC date of the build (`SOURCE_DATE_EPOCH`
//! when set, for reproducible builds).
//!
//! The script runs again only when this file, `SOURCE_DATE_EPOCH`, `HEAD` or the branch `HEAD`
//! points to changes, so the date is that of the build that last saw a new commit. Without any
//! `rerun-if-changed`, Cargo would run it, and rebuild the Worker, on every change in the crate.
//! The files are git's own answers (`git rev-parse --git-path`), so a worktree, whose `.git` is a
//! file and whose branches live in the main repository, is watched where its files really are.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    println!("cargo:rerun-if-env-changed=FETCHER_BUILD_REVISION");
    let revision = std::env::var("FETCHER_BUILD_REVISION")
        .ok()
        .filter(|r| {
            !r.is_empty()
                && r.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        })
        .or_else(|| git(&["rev-parse", "--short", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    for watched in watched_git_files() {
        println!("cargo:rerun-if-changed={}", watched.display());
    }
    println!("cargo:rustc-env=FETCHER_WORKER_REVISION={revision}");
    println!("cargo:rustc-env=FETCHER_WORKER_BUILD_DATE={}", build_date());
}

/// What git prints for `args` in this crate's directory, trimmed; `None` when git is missing,
/// fails, or prints nothing.
fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (output.status.success() && !text.is_empty()).then_some(text)
}

/// `HEAD`, the loose file of the branch it names and `packed-refs`, those that exist (a path
/// that does not exist would make Cargo run the script on every build). A branch that is only
/// in `packed-refs` gets its loose file at its next commit: then the branch's folder is watched,
/// to see it appear.
fn watched_git_files() -> Vec<PathBuf> {
    let path = |name: &str| {
        // Relative to this crate's directory, where git ran, or absolute.
        git(&["rev-parse", "--git-path", name])
            .map(|p| Path::new(env!("CARGO_MANIFEST_DIR")).join(p))
    };
    let mut watched: Vec<PathBuf> = ["HEAD", "packed-refs"]
        .into_iter()
        .filter_map(path)
        .collect();
    // `refs/heads/<branch>`; a detached HEAD holds the commit itself.
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]).and_then(|b| path(&b)) {
        match branch.parent() {
            Some(folder) if !branch.is_file() => watched.push(folder.to_owned()),
            _ => watched.push(branch),
        }
    }
    watched.retain(|path| path.exists());
    watched
}

/// The build's UTC date, `YYYY-MM-DD`.
fn build_date() -> String {
    let seconds = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_secs())
        });
    let (year, month, day) = civil_date(seconds / 86_400);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_date(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}
