//! The job's stage spans (issue 37's traces): `claim`, `extract`, `extract_datasource`, `seal`,
//! `store`, `record`, `publish`, children of the delivery's `job` span. They are DEBUG spans:
//! with traces off and `LOG_LEVEL` above debug, each is a disabled span, nothing more. Their
//! fields are names and ids, never a secret or a row.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use engine::watch::{DatasourceEnd, Observer, Retry};
use tracing::Span;

/// A stage's span, under the current one.
macro_rules! stage {
    ($name:literal) => {
        tracing::debug_span!($name)
    };
}
pub(super) use stage;

/// Opens an `extract_datasource` span (under `parent`) as each datasource starts, closes it as
/// it ends, and passes everything on to the run's own observer.
pub(super) struct DatasourceSpans {
    inner: Arc<dyn Observer>,
    parent: Span,
    open: Mutex<HashMap<String, Span>>,
}

impl DatasourceSpans {
    /// `inner` itself when `parent` is disabled (traces off): no span, no lock.
    pub(super) fn around(inner: Arc<dyn Observer>, parent: &Span) -> Arc<dyn Observer> {
        if parent.is_disabled() {
            return inner;
        }
        Arc::new(DatasourceSpans {
            inner,
            parent: parent.clone(),
            open: Mutex::default(),
        })
    }

    fn spans(&self) -> std::sync::MutexGuard<'_, HashMap<String, Span>> {
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Observer for DatasourceSpans {
    fn started(&self, datasource: &str) {
        let span = tracing::debug_span!(
            parent: &self.parent,
            "extract_datasource",
            datasource,
            status = tracing::field::Empty,
            attempts = tracing::field::Empty,
        );
        self.spans().insert(datasource.to_owned(), span);
        self.inner.started(datasource);
    }

    fn progress(&self, datasource: &str, rows: u64) {
        self.inner.progress(datasource, rows);
    }

    fn retrying(&self, datasource: &str, retry: &Retry<'_>) {
        if let Some(span) = self.spans().get(datasource) {
            span.record("attempts", retry.attempt + 1);
        }
        self.inner.retrying(datasource, retry);
    }

    fn ended(&self, datasource: &str, end: &DatasourceEnd<'_>) {
        if let Some(span) = self.spans().remove(datasource) {
            span.record("status", end.status().as_str());
        }
        self.inner.ended(datasource, end);
    }
}
