//! What `/readyz` reports: one check per dependency, run at most once per [`CACHE_FOR`] however
//! many probes ask, and 503 from the moment the drain starts.
//!
//! The body uses upstream's words: `{"status": "healthy"|"unhealthy", "checks": {"<dep>":
//! {"status": "up"|"down", "latency_ms": N, "error": "..."}}, "version": "..."}`, plus this
//! build's `revision` and `build_date` ([`crate::build_info`]), with a `draining` check (`down`, "graceful drain in progress") during the drain. Each check run is
//! also counted in `readyz_check_status{dep,status}` and timed in
//! `readyz_check_duration_ms{dep,status}`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::build_info;

/// How long one dependency check may take before it counts as down.
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a report is reused: a flood of probes costs one round of checks (one `HeadBucket`,
/// one `SELECT 1`) per this period, not one per probe.
pub const CACHE_FOR: Duration = Duration::from_millis(1500);

/// The outcome of one check: `Err` carries a redacted reason.
pub type CheckResult = Result<(), String>;

/// One dependency's readiness check.
pub trait Check: Send + Sync {
    fn name(&self) -> &'static str;
    fn check(&self) -> Pin<Box<dyn Future<Output = CheckResult> + Send + '_>>;
}

/// The checks' last round.
#[derive(Clone)]
struct Round {
    at: Instant,
    all_up: bool,
    checks: Map<String, Value>,
}

/// What `/readyz` reports on.
pub struct Readiness {
    draining: AtomicBool,
    checks: Vec<Box<dyn Check>>,
    /// Held while a round runs, so concurrent probes wait for that round instead of starting
    /// their own.
    last: Mutex<Option<Round>>,
}

impl Readiness {
    pub fn new(checks: Vec<Box<dyn Check>>) -> Arc<Readiness> {
        Arc::new(Readiness {
            draining: AtomicBool::new(false),
            checks,
            last: Mutex::new(None),
        })
    }

    /// From now on `/readyz` answers 503: the Worker is leaving.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// The report and whether the Worker is ready: the checks of a round at most
    /// [`CACHE_FOR`] old, and the drain as it is now.
    pub async fn report(&self) -> (bool, Value) {
        let round = {
            let mut last = self.last.lock().await;
            match last.as_ref() {
                Some(round) if round.at.elapsed() < CACHE_FOR => round.clone(),
                _ => {
                    let round = self.run_checks().await;
                    *last = Some(round.clone());
                    round
                }
            }
        };
        let draining = self.is_draining();
        let mut checks = round.checks;
        if draining {
            checks.insert(
                "draining".to_owned(),
                json!({"status": "down", "reason": "graceful drain in progress"}),
            );
        }
        let ready = round.all_up && !draining;
        let status = if ready { "healthy" } else { "unhealthy" };
        (
            ready,
            json!({
                "status": status,
                "checks": checks,
                "version": build_info::VERSION,
                "revision": build_info::REVISION,
                "build_date": build_info::BUILD_DATE,
            }),
        )
    }

    /// Runs every check at once.
    async fn run_checks(&self) -> Round {
        let runs = self.checks.iter().map(|c| async move {
            let started = Instant::now();
            let outcome = match tokio::time::timeout(CHECK_TIMEOUT, c.check()).await {
                Ok(outcome) => outcome,
                Err(_) => Err(format!("no answer within {CHECK_TIMEOUT:?}")),
            };
            (c.name(), outcome, started.elapsed())
        });
        let mut all_up = true;
        let mut checks = Map::new();
        for (name, outcome, latency) in futures_util::future::join_all(runs).await {
            let latency_ms = latency.as_secs_f64() * 1000.0;
            crate::metrics::readiness_check(name, outcome.is_ok(), latency_ms);
            let entry = match outcome {
                Ok(()) => json!({"status": "up", "latency_ms": latency_ms}),
                Err(error) => {
                    all_up = false;
                    json!({"status": "down", "latency_ms": latency_ms, "error": error})
                }
            };
            checks.insert(name.to_owned(), entry);
        }
        Round {
            at: Instant::now(),
            all_up,
            checks,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    struct Counting(Arc<AtomicUsize>);

    impl Check for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }

        fn check(&self) -> Pin<Box<dyn Future<Output = CheckResult> + Send + '_>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test]
    async fn a_flood_of_probes_runs_the_checks_once_per_period() {
        let runs = Arc::new(AtomicUsize::new(0));
        let readiness = Readiness::new(vec![Box::new(Counting(runs.clone()))]);
        let probes = (0..200).map(|_| readiness.report());
        let reports = futures_util::future::join_all(probes).await;
        assert!(reports.iter().all(|(ready, _)| *ready));
        assert_eq!(reports[0].1["status"], "healthy");
        assert_eq!(reports[0].1["version"], build_info::VERSION);
        assert_eq!(reports[0].1["revision"], build_info::REVISION);
        assert_eq!(reports[0].1["build_date"], build_info::BUILD_DATE);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn the_drain_shows_at_once_even_from_a_cached_round() {
        let runs = Arc::new(AtomicUsize::new(0));
        let readiness = Readiness::new(vec![Box::new(Counting(runs.clone()))]);
        assert!(readiness.report().await.0);
        readiness.start_draining();
        let (ready, body) = readiness.report().await;
        assert!(!ready);
        assert_eq!(body["status"], "unhealthy");
        assert_eq!(body["checks"]["draining"]["status"], "down");
        assert_eq!(body["checks"]["counting"]["status"], "up");
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_round_older_than_the_period_is_run_again() {
        let runs = Arc::new(AtomicUsize::new(0));
        let readiness = Readiness::new(vec![Box::new(Counting(runs.clone()))]);
        readiness.report().await;
        tokio::time::advance(CACHE_FOR - Duration::from_millis(1)).await;
        readiness.report().await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        tokio::time::advance(Duration::from_millis(2)).await;
        readiness.report().await;
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }
}
