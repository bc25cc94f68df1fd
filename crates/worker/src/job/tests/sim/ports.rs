//! The other three simulated ports: a result store whose objects the invariants read, an event
//! sink that marks the outbox rows it publishes, and an extractor whose runs take a random time
//! and end in a random way (success, failure, transient failure, the job's timeout), drawn
//! from the schedule's seed.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use contract::message::{Filters, MappedFields};
use engine::{DatasourceEnd, EngineError, Extracted, TimeLimit, Watch};
use futures_util::future::BoxFuture;
use outbox::{OutboxError, PendingEvent};
use storage::{Cause, RetryPolicy, StorageError};
use tokio::sync::mpsc;

use super::chaos::Chaos;
use super::store::SimStore;
use crate::job::ports::{EventSink, Extractor, ResultStore, ResultUpload};

/// The longest an extraction takes, and the jobs' timeout (`timeoutSeconds`).
pub const LONGEST_EXTRACTION: Duration = Duration::from_secs(90);
pub const JOB_TIMEOUT_SECS: u32 = 60;

/// Objects by key.
pub struct SimObjects {
    pub stored: Arc<Mutex<BTreeSet<String>>>,
    chaos: Arc<Chaos>,
}

impl SimObjects {
    pub fn new(chaos: Arc<Chaos>) -> SimObjects {
        SimObjects {
            stored: Arc::default(),
            chaos,
        }
    }
}

fn cause() -> Cause {
    Cause::new("simulated outage", true)
}

#[async_trait]
impl ResultStore for SimObjects {
    fn key_prefix(&self) -> &str {
        ""
    }

    fn upload(&self, key: &str, retry: Arc<dyn RetryPolicy>) -> Box<dyn ResultUpload> {
        Box::new(SimUpload {
            stored: self.stored.clone(),
            chaos: self.chaos.clone(),
            key: key.to_owned(),
            retry,
        })
    }

    async fn delete(&self, key: &str) -> Result<(), StorageError> {
        self.chaos.pause().await;
        if self.chaos.fault(20) {
            return Err(StorageError::Delete {
                key: key.to_owned(),
                cause: cause(),
            });
        }
        self.stored.lock().expect("objects").remove(key);
        Ok(())
    }
}

struct SimUpload {
    stored: Arc<Mutex<BTreeSet<String>>>,
    chaos: Arc<Chaos>,
    key: String,
    retry: Arc<dyn RetryPolicy>,
}

#[async_trait]
impl ResultUpload for SimUpload {
    async fn write(&mut self, _: &[u8]) -> Result<(), StorageError> {
        self.chaos.pause().await;
        Ok(())
    }

    /// The check, then the completing request, which can be slow (longer than a lease, once
    /// in a while) and can fail (tried again as the retry policy says).
    async fn finish(
        self: Box<Self>,
        check: BoxFuture<'_, Result<(), String>>,
    ) -> Result<u64, StorageError> {
        check.await.map_err(|reason| StorageError::Refused {
            key: self.key.clone(),
            reason,
        })?;
        let slow = self.chaos.fault(50);
        if slow {
            tokio::time::sleep(Duration::from_secs(45)).await;
        }
        // As `storage::retry::retrying`, but the wait is drawn from the seed: the policy's
        // own is jittered by the operating system's generator, which would make a seed run
        // two ways. The policy still decides whether to try again.
        let mut failures = 0;
        loop {
            self.chaos.pause().await;
            if !self.chaos.fault(10) {
                self.stored
                    .lock()
                    .expect("objects")
                    .insert(self.key.clone());
                return Ok(1);
            }
            failures += 1;
            let error = StorageError::CompleteMultipart {
                key: self.key.clone(),
                cause: cause(),
            };
            if self.retry.next_wait(failures, &error).is_none() {
                return Err(error);
            }
            let ceiling = 250u64 << failures.min(5);
            let wait = self.chaos.draw(|rng| rng.below(ceiling.min(5_000)));
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
    }

    async fn abort(self: Box<Self>) {}
}

/// Publishes what is leased to the caller: marks the outbox row published.
pub struct SimEvents {
    pub store: Arc<SimStore>,
    chaos: Arc<Chaos>,
}

impl SimEvents {
    pub fn new(store: Arc<SimStore>, chaos: Arc<Chaos>) -> SimEvents {
        SimEvents { store, chaos }
    }
}

#[async_trait]
impl EventSink for SimEvents {
    async fn deliver(&self, owner: &str, events: &[PendingEvent]) -> Result<(), OutboxError> {
        for pending in events {
            self.chaos.pause().await;
            if self.chaos.fault(20) {
                continue; // The broker did not confirm: the repairer's.
            }
            let mut world = self.store.world();
            if let Some(row) = world
                .outbox
                .iter_mut()
                .find(|row| outbox::RowId::Serial(row.id) == pending.id)
            {
                if row.leased_by.as_deref() == Some(owner) {
                    row.published = true;
                }
            }
        }
        Ok(())
    }
}

/// Extractions of random length and outcome.
pub struct SimExtract {
    chaos: Arc<Chaos>,
}

impl SimExtract {
    pub fn new(chaos: Arc<Chaos>) -> SimExtract {
        SimExtract { chaos }
    }
}

#[async_trait]
impl Extractor for SimExtract {
    /// A job naming the datasource `huge` is over the limits: it fails unrun.
    fn check_limits(&self, mapped: &MappedFields) -> Result<(), EngineError> {
        if mapped.contains_key("huge") {
            return Err(EngineError::LimitExceeded {
                what: "datasources",
                limit: 1,
            });
        }
        Ok(())
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(300)
    }

    async fn extract(
        &self,
        mapped: &MappedFields,
        _: &Filters,
        limit: TimeLimit,
        watch: Watch,
        out: mpsc::Sender<Vec<u8>>,
    ) -> Result<Extracted, EngineError> {
        let (takes, answer, stops_early) = self.chaos.draw(|rng| {
            let takes = Duration::from_millis(rng.below(LONGEST_EXTRACTION.as_millis() as u64));
            let answer = match rng.below(10) {
                0 => Err(EngineError::Query {
                    connection: "db".into(),
                    detail: "simulated".into(),
                    transient: false,
                }),
                1 => Err(EngineError::Store("simulated".into())),
                _ => Ok(()),
            };
            (takes, answer, rng.one_in(2))
        });
        for name in mapped.keys() {
            watch.observer.started(name);
        }
        let remaining = limit.remaining().unwrap_or_default();
        tokio::select! {
            // In order: tokio picks among ready branches at random otherwise.
            biased;
            _ = tokio::time::sleep(takes.min(remaining)) => {}
            _ = watch.graceful.cancelled(), if stops_early => return Err(EngineError::Canceled),
        }
        if takes >= remaining {
            return Err(EngineError::Timeout(limit.timeout));
        }
        answer?;
        for name in mapped.keys() {
            watch
                .observer
                .ended(name, &DatasourceEnd::Succeeded { rows: 1 });
        }
        // No chunk is sent: the result's bytes are not what is simulated, and sealing a chunk
        // runs on a blocking thread whose real-time end would reorder the tasks ready at the
        // same instant of the paused clock (a seed would run two ways).
        drop(out);
        Ok(Extracted {
            row_count: 1,
            size_bytes: 20,
            spilled: Default::default(),
        })
    }
}
