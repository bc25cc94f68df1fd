//! Every state × every step, against the table of lifecycle §1 and §3 written out by hand; and
//! over random paths, the invariants of §6 (one terminal event, deletion only after it).

use super::*;

const STEPS: [(&str, Step); 9] = [
    ("cancel", Step::Cancel { force: false }),
    ("cancel!", Step::Cancel { force: true }),
    ("delete", Step::Delete { force: false }),
    ("delete!", Step::Delete { force: true }),
    ("claim", Step::Claim),
    ("completed", Step::Completed),
    ("failed", Step::Failed),
    ("stopped", Step::Stopped),
    ("object_deleted", Step::ObjectDeleted),
];

fn state(status: JobStatus, flags: &str) -> Option<JobState> {
    Some(JobState {
        status,
        cancel_requested: flags.contains('r'),
        force: flags.contains('f'),
        delete_requested: flags.contains('d'),
    })
}

/// `status+flags events then`, or the refusal's status code.
fn show(answer: Result<Transition, Refusal>) -> String {
    let t = match answer {
        Ok(t) => t,
        Err(Refusal::Unknown) => return "404".into(),
        Err(Refusal::InvalidTransition { .. }) => return "409".into(),
    };
    let mut status = t.to.status.as_str().to_owned();
    for (on, flag) in [
        (t.to.cancel_requested, "+requested"),
        (t.to.force, "+force"),
        (t.to.delete_requested, "+delete"),
    ] {
        if on {
            status.push_str(flag);
        }
    }
    let events: Vec<_> = t
        .events
        .iter()
        .map(|e| match e {
            Event::CancellationInProgress => "cip",
            Event::DeletionInProgress => "dip",
            other => other.operation(),
        })
        .collect();
    let events = if events.is_empty() {
        "-".to_owned()
    } else {
        events.join(",")
    };
    let then = match t.then {
        Then::Nothing => "-",
        Then::Run => "run",
        Then::StopStatements { force: false } => "stop",
        Then::StopStatements { force: true } => "stop!",
        Then::DiscardObject => "discard",
        Then::DeleteObject => "delete",
    };
    format!("{status} {events} {then}")
}

#[test]
fn every_state_and_step_answers_as_the_lifecycle_says() {
    use JobStatus as S;
    let cip_ends = "canceled canceled discard";
    let cipf_ends = "canceled+force canceled discard";
    let cipfd_ends = "deletion_in_progress+force+delete canceled,dip delete";
    let terminal = [
        "409",
        "409",
        "deletion_in_progress dip delete",
        "deletion_in_progress dip delete",
        "409",
        "409",
        "409",
        "409",
        "409",
    ];
    #[rustfmt::skip]
    let table: Vec<(&str, Option<JobState>, [&str; 9])> = vec![
        ("unseen", None, [
            "pending+requested - -", "pending+requested+force - -", "404", "404",
            "processing - run", "404", "failed failed -", "404", "404"]),
        ("pending", state(S::Pending, ""), [
            "canceled cip,canceled -", "canceled cip,canceled -", "409",
            "deletion_in_progress cip,canceled,dip delete",
            "processing - run", "409", "failed failed -", "409", "409"]),
        ("pending, cancel requested", state(S::Pending, "r"), [
            "pending+requested - -", "pending+requested+force - -", "409",
            "deletion_in_progress+requested cip,canceled,dip delete",
            "canceled+requested cip,canceled -", "409", "canceled+requested cip,canceled -",
            "409", "409"]),
        ("processing", state(S::Processing, ""), [
            "cancellation_in_progress cip stop", "cancellation_in_progress+force cip stop!", "409",
            "cancellation_in_progress+force+delete cip stop!",
            "processing - run", "completed completed -", "failed failed -", "409", "409"]),
        ("cancellation_in_progress", state(S::CancellationInProgress, ""), [
            "cancellation_in_progress - -", "cancellation_in_progress+force - stop!", "409",
            "cancellation_in_progress+force+delete - stop!",
            cip_ends, cip_ends, cip_ends, cip_ends, "409"]),
        ("cancellation_in_progress, forced", state(S::CancellationInProgress, "f"), [
            "cancellation_in_progress+force - -", "cancellation_in_progress+force - -", "409",
            "cancellation_in_progress+force+delete - stop!",
            cipf_ends, cipf_ends, cipf_ends, cipf_ends, "409"]),
        ("cancellation_in_progress, forced delete", state(S::CancellationInProgress, "fd"), [
            "cancellation_in_progress+force+delete - -",
            "cancellation_in_progress+force+delete - -", "409",
            "cancellation_in_progress+force+delete - stop!",
            cipfd_ends, cipfd_ends, cipfd_ends, cipfd_ends, "409"]),
        ("completed", state(S::Completed, ""), terminal),
        ("failed", state(S::Failed, ""), terminal),
        ("canceled", state(S::Canceled, ""), [
            "canceled - -", "canceled - -",
            "deletion_in_progress dip delete", "deletion_in_progress dip delete",
            "409", "409", "409", "409", "409"]),
        ("deletion_in_progress", state(S::DeletionInProgress, ""), [
            "409", "409", "deletion_in_progress - delete", "deletion_in_progress - delete",
            "409", "409", "409", "409", "deleted deleted -"]),
        ("deleted", state(S::Deleted, ""), [
            "409", "409", "deleted - -", "deleted - -", "409", "409", "409", "409", "409"]),
    ];
    let covered: std::collections::HashSet<_> = table
        .iter()
        .filter_map(|(_, s, _)| s.map(|s| s.status))
        .collect();
    assert_eq!(
        covered.len(),
        JobStatus::ALL.len(),
        "every status is in the table"
    );
    let mut wrong = Vec::new();
    for (name, from, expected) in &table {
        for ((step_name, s), want) in STEPS.iter().zip(expected) {
            let got = show(step(*from, *s));
            if got != *want {
                wrong.push(format!("{name} × {step_name}: got {got:?}, want {want:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn a_refused_step_names_the_status_it_met() {
    let completed = Some(JobState::new(JobStatus::Completed));
    assert_eq!(
        step(completed, Step::Cancel { force: true }),
        Err(Refusal::InvalidTransition {
            from: JobStatus::Completed
        })
    );
    assert_eq!(
        Refusal::InvalidTransition {
            from: JobStatus::Completed
        }
        .to_string(),
        "the job is completed"
    );
}

/// A xorshift generator: the same seed, the same paths.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 as usize
    }
}

#[test]
fn along_any_path_a_job_has_one_terminal_event_and_is_deleted_only_after_it() {
    let mut rng = Rng(0x5EED_CAFE_F00D);
    for _ in 0..20_000 {
        let mut state = None;
        let mut events = Vec::new();
        for _ in 0..12 {
            let (_, s) = STEPS[rng.next() % STEPS.len()];
            if let Ok(t) = step(state, s) {
                events.extend(t.events);
                state = Some(t.to);
            }
        }
        let terminal = events.iter().filter(|e| e.is_terminal()).count();
        assert!(terminal <= 1, "{events:?}");
        for (at, event) in events.iter().enumerate() {
            let before = &events[..at];
            match event {
                Event::Canceled => {
                    assert!(
                        before.contains(&Event::CancellationInProgress),
                        "{events:?}"
                    )
                }
                Event::DeletionInProgress => {
                    assert!(before.iter().any(|e| e.is_terminal()), "{events:?}")
                }
                _ => {}
            }
        }
        if let Some(deleted) = events.iter().position(|e| *e == Event::Deleted) {
            assert!(
                events[..deleted].contains(&Event::DeletionInProgress),
                "{events:?}"
            );
            assert_eq!(
                deleted,
                events.len() - 1,
                "nothing after deleted: {events:?}"
            );
        }
        if state.map(|s| s.status) == Some(JobStatus::Deleted) {
            assert!(events.contains(&Event::Deleted));
        }
    }
}
