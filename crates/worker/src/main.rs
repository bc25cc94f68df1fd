//! `fetcher-worker`: the binary operators deploy. Everything it does lives in the library.

use std::process::ExitCode;

use tokio_util::sync::CancellationToken;
use worker::config::Settings;
use worker::startup::Application;

#[tokio::main]
async fn main() -> ExitCode {
    let settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    worker::telemetry::init(&settings.log);
    let shutdown = CancellationToken::new();
    tokio::spawn(worker::shutdown::on_signal(shutdown.clone()));
    let outcome = match Application::build(settings).await {
        Ok(app) => app.run_until_stopped(shutdown).await,
        Err(error) => Err(error),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(error.message = %error, error.cause_chain = ?error, "The Worker stopped on an error.");
            eprintln!("fetcher-worker: {error:#}");
            ExitCode::FAILURE
        }
    }
}
