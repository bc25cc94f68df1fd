//! What the code under test recorded with the `metrics` facade, read back in a test.

use std::future::Future;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::CompositeKey;

/// Every metric recorded since the previous [`take`], with its value.
pub type Snapshot = Vec<(CompositeKey, DebugValue)>;

/// Runs `body` on a current-thread runtime with a debugging recorder installed for this thread.
///
/// `metrics::with_local_recorder` installs the recorder for the current thread only, so every
/// task of `body` (and everything it awaits) records on that thread; a thread of its own (lapin's
/// I/O thread) records nothing.
pub fn with_recorder<F>(body: impl FnOnce(Snapshotter) -> F)
where
    F: Future<Output = ()>,
{
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    ::metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(body(snapshotter));
    });
}

/// What was recorded since the previous snapshot (counters and gauges are reset by taking one).
pub fn take(snapshotter: &Snapshotter) -> Snapshot {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| (key, value))
        .collect()
}

/// The sum of the counter `name` over every label set that has all of `labels`.
pub fn counter(snapshot: &Snapshot, name: &str, labels: &[(&str, &str)]) -> u64 {
    snapshot
        .iter()
        .filter(|(key, _)| key.key().name() == name)
        .filter(|(key, _)| {
            labels.iter().all(|(k, v)| {
                key.key()
                    .labels()
                    .any(|label| label.key() == *k && label.value() == *v)
            })
        })
        .map(|(_, value)| match value {
            DebugValue::Counter(n) => *n,
            other => panic!("{name} is not a counter: {other:?}"),
        })
        .sum()
}

/// The value of the gauge `name`, which must have been set once, without labels.
pub fn gauge(snapshot: &Snapshot, name: &str) -> f64 {
    let values: Vec<f64> = snapshot
        .iter()
        .filter(|(key, _)| key.key().name() == name)
        .map(|(_, value)| match value {
            DebugValue::Gauge(v) => v.into_inner(),
            other => panic!("{name} is not a gauge: {other:?}"),
        })
        .collect();
    assert_eq!(values.len(), 1, "gauge {name} set once, without labels");
    values[0]
}
