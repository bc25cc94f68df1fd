//! The soak's cancels and deletes (lifecycle §3), sent while the faults run: some cancels before
//! the job's message is even submitted, cancels (forced or not) of slow jobs once they run,
//! forced deletes of running slow jobs, and deletes of completed jobs. Each request goes to a
//! replica's control API and is sent again to another one until a replica answers it (a killed
//! replica refuses connections; a state database that is down answers 503).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use sqlx::PgPool;
use uuid::Uuid;

use super::{Job, Kind, Rng};
use crate::harness::{ControlClient, Signing};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Action {
    Cancel { force: bool },
    Delete { force: bool },
}

/// When the request is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum When {
    /// Before any job is submitted: the job is never seen yet.
    Early,
    /// Once the job is `processing`.
    Running,
    /// Once the job is `completed`.
    Done,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Planned {
    pub job: Uuid,
    pub action: Action,
    pub when: When,
}

/// Every slow job is canceled (half of them with `force`) or, one in four, force-deleted while
/// it runs; one successful job in a hundred is canceled before its message comes, and three in
/// a hundred are deleted once completed.
pub(super) fn plan(jobs: &[Job], rng: &mut Rng) -> Vec<Planned> {
    let mut planned = Vec::new();
    for job in jobs {
        let (action, when) = match job.kind {
            Kind::Slow => match rng.below(4) {
                0 => (Action::Delete { force: true }, When::Running),
                1 => (Action::Cancel { force: false }, When::Running),
                _ => (Action::Cancel { force: true }, When::Running),
            },
            Kind::Success => match rng.below(100) {
                0 => (Action::Cancel { force: false }, When::Early),
                1..=3 => (Action::Delete { force: false }, When::Done),
                _ => continue,
            },
            _ => continue,
        };
        planned.push(Planned {
            job: job.id,
            action,
            when,
        });
    }
    planned
}

/// How the requests were answered.
#[derive(Default, Debug)]
pub(super) struct Answers {
    /// `202`: the job must reach the request's end.
    pub accepted: HashMap<Uuid, Action>,
    /// `409`: the job had moved on (a slow job that ended first, say).
    pub refused: Vec<(Uuid, Action)>,
    /// No replica answered before the deadline, or answered something else.
    pub unanswered: Vec<(Uuid, Action, String)>,
    /// Requests sent again (connection refused, 5xx) before an answer.
    pub resent: usize,
    /// Planned requests whose moment never came (the job never reached that state).
    pub not_sent: usize,
}

/// Sends the `Early` requests now.
pub(super) async fn send_early(
    planned: &[Planned],
    ports: &[u16],
    keys: &crypto::KeySet,
) -> Answers {
    let mut answers = Answers::default();
    for request in planned.iter().filter(|p| p.when == When::Early) {
        send(request, ports, keys, &mut answers).await;
    }
    answers
}

/// Sends the `Running` and `Done` requests as their jobs reach those states, until every one is
/// sent or `deadline` passes.
pub(super) async fn send_when_due(
    planned: Vec<Planned>,
    state: PgPool,
    ports: Vec<u16>,
    keys: crypto::KeySet,
    deadline: Instant,
    mut answers: Answers,
) -> Answers {
    let mut waiting: Vec<Planned> = planned
        .into_iter()
        .filter(|p| p.when != When::Early)
        .collect();
    while !waiting.is_empty() && Instant::now() < deadline {
        let ids: Vec<Uuid> = waiting.iter().map(|p| p.job).collect();
        let statuses: HashMap<Uuid, String> =
            match sqlx::query_as("SELECT job_id, status FROM jobs WHERE job_id = ANY($1)")
                .bind(&ids)
                .fetch_all(&state)
                .await
            {
                Ok(rows) => rows
                    .into_iter()
                    .collect::<Vec<(Uuid, String)>>()
                    .into_iter()
                    .collect(),
                // The state database is down (a fault): look again.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
        let mut due = Vec::new();
        waiting.retain(|p| {
            let status = statuses.get(&p.job).map(String::as_str);
            let now = match p.when {
                When::Running => status.is_some_and(|s| s != "pending"),
                When::Done => matches!(status, Some("completed" | "failed")),
                When::Early => true,
            };
            if now {
                due.push(*p);
            }
            !now
        });
        for request in due {
            send(&request, &ports, &keys, &mut answers).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    answers.not_sent = waiting.len();
    answers
}

/// Sends one request until a replica answers it `202`, `409` or `404`, for at most 3 minutes.
async fn send(request: &Planned, ports: &[u16], keys: &crypto::KeySet, answers: &mut Answers) {
    let (method, suffix, body): (&str, &str, &[u8]) = match request.action {
        Action::Cancel { force: true } => {
            ("POST", "/cancel", br#"{"force":true,"reasonCode":"CHAOS"}"#)
        }
        Action::Cancel { force: false } => ("POST", "/cancel", br#"{"reasonCode":"CHAOS"}"#),
        Action::Delete { force: true } => ("DELETE", "", br#"{"force":true}"#),
        Action::Delete { force: false } => ("DELETE", "", b""),
    };
    let give_up = Instant::now() + Duration::from_secs(180);
    let mut last;
    for attempt in 0.. {
        let client = ControlClient {
            port: ports[attempt % ports.len()],
            keys: keys.clone(),
        };
        let job = request.job;
        let sent = tokio::task::spawn_blocking(move || {
            client.try_send(method, job, suffix, None, body, Signing::Valid)
        })
        .await
        .expect("the request's thread");
        match sent {
            Ok((202, _)) => {
                answers.accepted.insert(request.job, request.action);
                return;
            }
            Ok((409, _)) => {
                answers.refused.push((request.job, request.action));
                return;
            }
            Ok((status, answer)) => last = format!("{status} {answer}"),
            Err(error) => last = error.to_string(),
        }
        if Instant::now() > give_up {
            answers.unanswered.push((request.job, request.action, last));
            return;
        }
        answers.resent += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
