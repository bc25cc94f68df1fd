//! `fetcher-worker`: the binary operators deploy (`fetcher-worker --help` lists its commands).
//! Everything it does lives in the library.

use std::process::ExitCode;

use tokio_util::sync::CancellationToken;
use worker::config::Settings;
use worker::startup::Application;

/// The stack of threads the Worker does not size itself, lapin's I/O thread above all. lapin
/// parses AMQP header tables recursively, and anyone who can publish to the work queue chooses
/// their depth: a table nested as deep as one 128 KiB frame allows (18,000 levels of tables,
/// 25,000 of arrays) overflowed the default 2 MiB stack and aborted the process. An unoptimised
/// build needs about 10 KiB a level. Only the pages a thread touches become resident.
const THREAD_STACK_BYTES: usize = 1 << 30;
/// The runtime's threads only drop those tables (recursively too, with far smaller frames).
const RUNTIME_STACK_BYTES: usize = 64 << 20;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(done) = worker::command::run(&args) {
        print!("{}", done.stdout);
        eprint!("{}", done.stderr);
        return ExitCode::from(done.code);
    }
    // Before any thread exists: the standard library reads this once, at the first spawn.
    let asked = std::env::var("RUST_MIN_STACK")
        .ok()
        .and_then(|v| v.parse::<usize>().ok());
    if asked.is_none_or(|bytes| bytes < THREAD_STACK_BYTES) {
        std::env::set_var("RUST_MIN_STACK", THREAD_STACK_BYTES.to_string());
    }
    // Tokio reads `TOKIO_WORKER_THREADS` itself when no count is given, and panics on a bad
    // one: the count is always given, and a bad value is refused with the other settings'
    // problems (the runtime starts with the default to report them).
    let threads = worker::config::runtime_threads(
        std::env::var(worker::config::RUNTIME_THREADS)
            .ok()
            .as_deref(),
    )
    .ok()
    .flatten()
    .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .worker_threads(threads)
        .thread_stack_size(RUNTIME_STACK_BYTES)
        .build();
    match runtime {
        Ok(runtime) => {
            let code = runtime.block_on(run());
            // Dropping the runtime would wait, without limit, for blocking work still running:
            // a DNS lookup that a timed-out datasource connect left behind lasts as long as the
            // resolver's timeouts, and kept a drained Worker alive past its drain for a minute.
            runtime.shutdown_background();
            code
        }
        Err(error) => {
            eprintln!("fetcher-worker: cannot start the async runtime: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> ExitCode {
    let settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let traces = worker::telemetry::init(&settings.log, settings.traces.as_ref());
    for warning in &settings.warnings {
        tracing::warn!(
            warning = %warning,
            "A setting was replaced by its default, a variable set is not read, or a setting protects less than it reads."
        );
    }
    let shutdown = CancellationToken::new();
    tokio::spawn(worker::shutdown::on_signal(shutdown.clone()));
    let limit = worker::shutdown::drain_limit(&settings.shutdown);
    let running = async {
        match Application::build(settings).await {
            Ok(app) => app.run_until_stopped(shutdown.clone()).await,
            Err(error) => Err(error),
        }
    };
    // A drain cut short is still the stop that was asked for: what it had not settled, the
    // broker redelivers.
    let outcome = worker::shutdown::bounded(running, shutdown.clone(), limit)
        .await
        .unwrap_or(Ok(()));
    if let Some(traces) = traces {
        traces.flush().await;
    }
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // `error`, as every log line names an error; `:#` adds its causes.
            tracing::error!(error = %format_args!("{error:#}"), "The Worker stopped on an error.");
            eprintln!("fetcher-worker: {error:#}");
            ExitCode::FAILURE
        }
    }
}
