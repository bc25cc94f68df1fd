//! `fetcher-worker config reference | check`: the configuration reference, printed from
//! [`super::variables`], and a check of an environment that starts nothing.

use super::{variables, Settings};

/// What a `config` command printed and its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub code: u8,
    pub stdout: String,
    pub stderr: String,
}

const USAGE: &str =
    "usage: fetcher-worker config reference [--env-example] | fetcher-worker config check";

/// Runs `fetcher-worker <args>` when `args` (without the program name) are a `config` command;
/// `None` otherwise ([`crate::command`] reads the rest). `vars` are the environment `check`
/// reads.
pub fn run(args: &[String], vars: impl IntoIterator<Item = (String, String)>) -> Option<Outcome> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (first, rest) = args.split_first()?;
    if *first != "config" {
        return None;
    }
    Some(match rest {
        ["reference"] => ok(variables::markdown()),
        ["reference", "--env-example"] => ok(variables::env_example()),
        ["check"] => check(vars),
        _ => usage("unknown config command".to_owned()),
    })
}

/// Reads the variables as the Worker would at start, and connects to nothing. Problems and
/// warnings name variables, never their values; a refusal lists the warnings too, since a
/// misspelt name often explains a problem.
fn check(vars: impl IntoIterator<Item = (String, String)>) -> Outcome {
    match Settings::from_vars(vars) {
        Ok(settings) => {
            let mut stdout = format!(
                "configuration OK ({} warning(s)); nothing was connected to\n  state backend: \
                 {} ({})\n",
                settings.warnings.len(),
                settings.state.name(),
                settings.state_chosen_by
            );
            for warning in &settings.warnings {
                stdout.push_str(&format!("  warning: {warning}\n"));
            }
            ok(stdout)
        }
        Err(error) => Outcome {
            code: 2,
            stdout: String::new(),
            stderr: format!("{error}\n"),
        },
    }
}

fn ok(stdout: String) -> Outcome {
    Outcome {
        code: 0,
        stdout,
        stderr: String::new(),
    }
}

fn usage(why: String) -> Outcome {
    Outcome {
        code: 2,
        stdout: String::new(),
        stderr: format!("fetcher-worker: {why} ({USAGE})\n"),
    }
}
