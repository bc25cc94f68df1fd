//! One schedule: a few jobs, two or three replicas (job cores) sharing the simulated store,
//! objects and events, and a seeded sequence of deliveries, redeliveries, duplicates, cancels,
//! deletes, sweeps, database outages, crashes (a replica's in-flight tasks aborted wherever
//! they wait) and time passing (leases lapse). Then the run settles: faults stop, every
//! requeued message is delivered again, leases lapse and the sweeper passes.

use std::sync::Arc;
use std::time::Duration;

use contract::envelope::{self, HeaderValue, Route, SignatureHeaders, VerifyPolicy};
use contract::lifecycle::{Step, Then};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::chaos::{Chaos, Rng};
use super::ports::{SimEvents, SimExtract, SimObjects, JOB_TIMEOUT_SECS};
use super::store::SimStore;
use crate::job::tests::{Message, QUEUE};
use crate::job::{
    finish_deletion, Disposition, Inbound, InboundHeaders, JobCore, JobSettings, MessageLimits,
    Ports, Sweeper,
};

const LEASE: Duration = Duration::from_secs(30);
const GRACE: Duration = Duration::from_secs(5);
const SOURCE: &str = "//sim/fetcher";

/// The shared world and the replicas on it.
pub struct Sim {
    pub store: Arc<SimStore>,
    pub objects: Arc<SimObjects>,
    pub chaos: Arc<Chaos>,
    pub cores: Vec<Arc<JobCore>>,
    pub jobs: Vec<Arc<Message>>,
    /// Messages given back to the queue (a `Retry`, or a delivery that crashed).
    requeued: Vec<usize>,
    delivered: Vec<bool>,
    inflight: Vec<Task>,
}

/// A replica's task in flight: a delivery (of job `job`) or a control request.
struct Task {
    replica: usize,
    job: Option<usize>,
    handle: JoinHandle<Disposition>,
}

impl Sim {
    pub fn new(seed: u64, rng: &mut Rng) -> Sim {
        let chaos = Arc::new(Chaos::new(seed ^ 0x5eed));
        let store = Arc::new(SimStore::new(chaos.clone()));
        let objects = Arc::new(SimObjects::new(chaos.clone()));
        let ports = Ports {
            jobs: store.clone(),
            objects: objects.clone(),
            events: Arc::new(SimEvents::new(store.clone(), chaos.clone())),
            extractor: Arc::new(SimExtract::new(chaos.clone())),
            slots: None,
        };
        let keys = crypto::KeySet::from_master_bytes(&[7; 32]).expect("keys");
        let replicas = 2 + rng.below(2) as usize;
        let cores = (0..replicas)
            .map(|r| {
                Arc::new(JobCore::new(
                    ports.clone(),
                    JobSettings {
                        keys: keys.clone(),
                        source: SOURCE.into(),
                        worker_id: format!("w{r}"),
                        lease: LEASE,
                        verify: VerifyPolicy::default(),
                        limits: MessageLimits {
                            max_message_bytes: 4096,
                            max_metadata_bytes: 1024,
                        },
                        storage_retry: Duration::from_secs(60),
                        datasource_caps: Default::default(),
                    },
                ))
            })
            .collect();
        let count = 1 + rng.below(3) as usize;
        let jobs: Vec<_> = (0..count)
            .map(|_| {
                let job_id = Uuid::from_u64_pair(rng.next(), rng.next());
                Arc::new(signed(&keys, job_id, rng.one_in(8)))
            })
            .collect();
        Sim {
            store,
            objects,
            chaos,
            cores,
            delivered: vec![false; jobs.len()],
            jobs,
            requeued: Vec::new(),
            inflight: Vec::new(),
        }
    }

    /// Runs `actions` random actions, then settles.
    pub async fn run(&mut self, rng: &mut Rng, actions: usize) {
        for _ in 0..actions {
            self.act(rng);
            let wait = match rng.below(4) {
                0 => 0,
                1 => rng.below(1_000),
                2 => rng.below(10_000),
                _ => rng.below(40_000),
            };
            tokio::time::sleep(Duration::from_millis(wait)).await;
            self.reap().await;
        }
        self.settle(rng).await;
    }

    fn act(&mut self, rng: &mut Rng) {
        let replica = rng.below(self.cores.len() as u64) as usize;
        let job = rng.below(self.jobs.len() as u64) as usize;
        match rng.below(16) {
            0..=3 => self.deliver(replica, job),
            4 | 5 => {
                if let Some(job) = self.requeued.pop() {
                    self.deliver(replica, job);
                }
            }
            // A duplicate copy of a message already delivered.
            6 if self.delivered[job] => self.deliver(replica, job),
            7 | 8 => self.control(
                replica,
                job,
                Step::Cancel {
                    force: rng.one_in(2),
                },
            ),
            9 => self.control(
                replica,
                job,
                Step::Delete {
                    force: rng.one_in(2),
                },
            ),
            10 => self.crash(replica),
            11 => self.sweep(replica),
            12 => {
                let secs = 5 + rng.below(60);
                self.chaos
                    .outage(tokio::time::Instant::now() + Duration::from_secs(secs));
            }
            _ => {}
        }
    }

    fn deliver(&mut self, replica: usize, job: usize) {
        self.delivered[job] = true;
        let core = self.cores[replica].clone();
        let message = self.jobs[job].clone();
        let handle = tokio::spawn(async move { deliver(&core, &message).await });
        self.inflight.push(Task {
            replica,
            job: Some(job),
            handle,
        });
    }

    /// A cancel or delete through the control API on `replica`.
    fn control(&mut self, replica: usize, job: usize, step: Step) {
        let core = self.cores[replica].clone();
        let cores = self.cores.clone();
        let store = self.store.clone();
        let job_id = self.jobs[job].job_id;
        let handle = tokio::spawn(async move {
            let publisher = format!("w{replica}/api/{}", Uuid::new_v4().simple());
            let Ok(outbox::Controlled::Done {
                transition, events, ..
            }) = store.control(job_id, step, SOURCE, &publisher, LEASE).await
            else {
                return Disposition::Ack;
            };
            if matches!(transition.then, Then::StopStatements { .. }) {
                // NOTIFY reaches every replica; the one running the job wakes.
                for core in &cores {
                    core.wake(job_id);
                }
            }
            core.publish(&publisher, &events).await;
            if transition.then == Then::DeleteObject {
                finish_deletion(&core, job_id, None, &publisher).await;
            }
            Disposition::Ack
        });
        self.inflight.push(Task {
            replica,
            job: None,
            handle,
        });
    }

    fn sweep(&mut self, replica: usize) {
        let sweeper = Sweeper {
            core: self.cores[replica].clone(),
            interval: Duration::from_secs(10),
            grace: GRACE,
        };
        let handle = tokio::spawn(async move {
            let _ = sweeper.sweep_once().await;
            Disposition::Ack
        });
        self.inflight.push(Task {
            replica,
            job: None,
            handle,
        });
    }

    /// The replica dies: everything it had in flight is dropped where it waited; its
    /// unacknowledged messages go back to the queue.
    fn crash(&mut self, replica: usize) {
        let (dead, alive) = std::mem::take(&mut self.inflight)
            .into_iter()
            .partition(|task| task.replica == replica);
        self.inflight = alive;
        for task in dead {
            task.handle.abort();
            if let Some(job) = task.job {
                self.requeued.push(job);
            }
        }
    }

    /// Collects the tasks that ended: a `Retry` goes back to the queue.
    async fn reap(&mut self) {
        let (done, running) = std::mem::take(&mut self.inflight)
            .into_iter()
            .partition(|task: &Task| task.handle.is_finished());
        self.inflight = running;
        for task in done {
            self.ended(task).await;
        }
    }

    async fn ended(&mut self, task: Task) {
        let disposition = task.handle.await.expect("a task panicked");
        if let (Some(job), Disposition::Retry(_)) = (task.job, disposition) {
            self.requeued.push(job);
        }
    }

    /// No more faults: every task ends, every message is delivered until acknowledged, every
    /// lease lapses and the sweeper passes.
    async fn settle(&mut self, rng: &mut Rng) {
        self.chaos.calm();
        for round in 0.. {
            assert!(round < 50, "the run does not settle");
            for task in std::mem::take(&mut self.inflight) {
                self.ended(task).await;
            }
            for job in 0..self.jobs.len() {
                if !self.delivered[job] {
                    self.requeued.push(job);
                }
            }
            if self.requeued.is_empty() {
                break;
            }
            for job in std::mem::take(&mut self.requeued) {
                let replica = rng.below(self.cores.len() as u64) as usize;
                self.deliver(replica, job);
            }
        }
        tokio::time::sleep(LEASE + GRACE + Duration::from_secs(1)).await;
        for core in self.cores.clone() {
            let sweeper = Sweeper {
                core,
                interval: Duration::from_secs(10),
                grace: GRACE,
            };
            sweeper.sweep_once().await.expect("a calm sweep");
        }
    }
}

async fn deliver(core: &JobCore, message: &Message) -> Disposition {
    let inbound = Inbound {
        headers: InboundHeaders {
            signature: SignatureHeaders {
                signature: Some(HeaderValue::Text(message.signature.as_bytes())),
                timestamp: Some(HeaderValue::Text(message.timestamp.as_bytes())),
                version: Some(HeaderValue::Text(envelope::SIGNATURE_VERSION.as_bytes())),
            },
            tenant: None,
            request_id: Some("sim"),
            job_id: None,
            ..InboundHeaders::default()
        },
        exchange: "",
        routing_key: QUEUE,
        body: &message.body,
        redelivered: false,
    };
    core.handle(&inbound, &CancellationToken::new()).await
}

/// A job message for `job_id`, signed now (wall clock: the signature's age is checked
/// against it, and a run takes milliseconds of it); `over_limits`: every delivery fails it
/// unrun.
fn signed(keys: &crypto::KeySet, job_id: Uuid, over_limits: bool) -> Message {
    let mapped = if over_limits {
        serde_json::json!({"db": {"payments": ["id"]}, "huge": {"t": ["id"]}})
    } else {
        serde_json::json!({"db": {"payments": ["id"]}})
    };
    let body = serde_json::json!({
        "jobId": job_id,
        "mappedFields": mapped,
        "metadata": {"source": "sim"},
        "timeoutSeconds": JOB_TIMEOUT_SECS,
    })
    .to_string()
    .into_bytes();
    let route = Route {
        tenant: "",
        exchange: "",
        routing_key: QUEUE,
    };
    let signature = envelope::sign(chrono::Utc::now().timestamp(), &route, &body, |payload| {
        keys.internal_hmac().sign_hex(payload)
    });
    Message {
        job_id,
        body,
        signature: signature.signature,
        timestamp: signature.timestamp,
        job_id_header: None,
    }
}
