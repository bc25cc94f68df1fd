//! `fetcher-worker`'s command line: the Worker runs with no argument or `run`; `--help` and
//! `--version` print and exit without reading the environment; `config ...` is
//! [`crate::config::command`]; anything else is a usage error (exit 2) that starts nothing.

use crate::build_info;
use crate::config;
use crate::config::command::Outcome;

/// What `fetcher-worker <args>` (`args` without the program name) prints and exits with before
/// any Worker starts; `None`: run the Worker.
pub fn run(args: &[String]) -> Option<Outcome> {
    match parse(args) {
        Command::Run => None,
        Command::Done(outcome) => Some(outcome),
        Command::Config(args) => config::command::run(&args, config::env_vars()),
    }
}

/// What the arguments ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Run the Worker.
    Run,
    /// Print this and exit, the Worker never started.
    Done(Outcome),
    /// `config reference | check`: its arguments, the environment read only for `check`.
    Config(Vec<String>),
}

/// The exit code of a usage error.
pub const USAGE_ERROR: u8 = 2;

/// Reads `args` (without the program name).
pub fn parse(args: &[String]) -> Command {
    let Some(first) = args.first() else {
        return Command::Run;
    };
    match (first.as_str(), args.len()) {
        ("run", 1) => Command::Run,
        ("--help" | "-h", 1) => Command::Done(printed(help())),
        ("--version" | "-V", 1) => {
            Command::Done(printed(format!("{}\n", build_info::version_line())))
        }
        ("config", _) => Command::Config(args.to_vec()),
        ("run" | "--help" | "-h" | "--version" | "-V", _) => Command::Done(usage(&format!(
            "{first} takes no argument, {} is one too many",
            shown(&args[1])
        ))),
        _ => Command::Done(usage(&format!("unknown argument {}", shown(first)))),
    }
}

/// `--help`.
fn help() -> String {
    format!(
        "{version}
Consumes signed extraction jobs, extracts, seals, stores, records and publishes their outcome.

Usage:
  fetcher-worker [run]              Run the Worker; every setting comes from the environment
                                    (docs/configuration.md in the repository).
  fetcher-worker config check       Check the environment's settings; connects to nothing.
  fetcher-worker config reference [--env-example]
                                    Print the configuration reference, or an example env file.
  fetcher-worker -V, --version      Print the version, git revision and build date.
  fetcher-worker -h, --help         Print this help.
",
        version = build_info::version_line()
    )
}

/// An argument as a usage error repeats it: quoted when it looks like an option or a word,
/// otherwise not at all, since a misplaced value (`APP_ENC_KEY=...`) may be a secret and the
/// message may end up in a log.
fn shown(argument: &str) -> String {
    let plain = argument.len() <= 40
        && argument
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if plain {
        format!("{argument:?}")
    } else {
        "(not repeated: it may hold a secret)".to_owned()
    }
}

fn printed(stdout: String) -> Outcome {
    Outcome {
        code: 0,
        stdout,
        stderr: String::new(),
    }
}

/// One line on stderr, exit 2.
fn usage(why: &str) -> Outcome {
    Outcome {
        code: USAGE_ERROR,
        stdout: String::new(),
        stderr: format!("fetcher-worker: {why} (fetcher-worker --help lists the commands)\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|a| (*a).to_owned()).collect()
    }

    fn done(list: &[&str]) -> Outcome {
        match parse(&args(list)) {
            Command::Done(outcome) => outcome,
            other => panic!("{list:?} is {other:?}"),
        }
    }

    #[test]
    fn the_worker_runs_with_no_argument_or_run() {
        assert_eq!(parse(&[]), Command::Run);
        assert_eq!(parse(&args(&["run"])), Command::Run);
    }

    #[test]
    fn help_and_version_print_and_succeed() {
        for flag in ["--help", "-h"] {
            let outcome = done(&[flag]);
            assert_eq!(outcome.code, 0);
            assert!(outcome.stdout.contains("Usage:"), "{}", outcome.stdout);
            assert!(outcome.stdout.contains("config check"));
        }
        for flag in ["--version", "-V"] {
            let outcome = done(&[flag]);
            assert_eq!(outcome.code, 0);
            assert_eq!(
                outcome.stdout,
                format!(
                    "fetcher-worker {} (revision {}, built {})\n",
                    build_info::VERSION,
                    build_info::REVISION,
                    build_info::BUILD_DATE
                )
            );
        }
    }

    #[test]
    fn config_is_handed_on_whole() {
        assert_eq!(
            parse(&args(&["config", "check"])),
            Command::Config(args(&["config", "check"]))
        );
    }

    #[test]
    fn anything_else_is_a_one_line_usage_error() {
        for list in [
            &["--verbose"][..],
            &["start"],
            &["run", "now"],
            &["--version", "--json"],
            &["-hV"],
        ] {
            let outcome = done(list);
            assert_eq!(outcome.code, USAGE_ERROR, "{list:?}");
            assert!(outcome.stdout.is_empty());
            assert_eq!(outcome.stderr.lines().count(), 1, "{}", outcome.stderr);
            assert!(outcome.stderr.starts_with("fetcher-worker: "));
        }
        assert!(done(&["--verbose"]).stderr.contains("\"--verbose\""));
    }

    #[test]
    fn an_argument_that_may_be_a_secret_is_not_repeated() {
        let outcome = done(&["APP_ENC_KEY=c2VjcmV0LWtleS1ieXRlcw=="]);
        assert!(!outcome.stderr.contains("c2VjcmV0"), "{}", outcome.stderr);
        assert!(
            outcome.stderr.contains("not repeated"),
            "{}",
            outcome.stderr
        );
    }
}
