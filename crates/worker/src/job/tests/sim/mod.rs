//! A deterministic simulation of the job core: seeded schedules of deliveries, redeliveries,
//! duplicates, cancels, deletes, timeouts, outages, crashes and lapsed leases across two or
//! three replicas sharing one stateful store whose every write the lifecycle machine judged;
//! after each, the invariants of `invariants.rs`.
//!
//! `SIM_SCHEDULES=<n>` runs seeds `0..n` (default 10,000; `SIM_FIRST=<m>` starts at `m`);
//! `SIM_SEED=<n>` replays one seed exactly, with its log lines and writes. A failing seed
//! prints itself.
//!
//! - `chaos.rs`: the seeded generator, latencies and faults.
//! - `store.rs`: the job store (`world.rs`: its tables and judged writes); `ports.rs`: the
//!   result store, event sink and extractor.
//! - `schedule.rs`: one schedule's replicas and actions; `invariants.rs`: what must hold.

mod chaos;
mod invariants;
mod ports;
mod schedule;
mod store;
mod world;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use chaos::Rng;
use schedule::Sim;

const DEFAULT_SCHEDULES: u64 = 10_000;

fn env(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {value:?}")),
    )
}

/// How often each final status and each judged step came up, over every schedule run: what
/// the schedules exercised.
static TALLY: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

fn tally(sim: &Sim) {
    let world = sim.store.world();
    let mut tally = TALLY.lock().expect("tally");
    for row in world.jobs.values() {
        *tally
            .entry(format!("ended {}", row.state.status))
            .or_default() += 1;
        if row.attempts > 1 {
            *tally.entry("claimed again".into()).or_default() += 1;
        }
    }
    for entry in &world.log {
        let from = entry.from.map_or("new".into(), |s| s.status.to_string());
        *tally
            .entry(format!("{from} --{:?}--> {}", entry.step, entry.to.status))
            .or_default() += 1;
    }
}

/// Prints every write of the schedule, on the paused clock, and the objects left.
fn story(sim: &Sim) {
    let world = sim.store.world();
    let Some(start) = world.log.first().map(|e| e.at) else {
        return;
    };
    for e in &world.log {
        let from = e.from.map_or("new".into(), |s| s.status.to_string());
        eprintln!(
            "sim: {:>9.3?} {} {from} --{:?}--> {:?} {:?}",
            e.at - start,
            e.job_id,
            e.step,
            e.to,
            e.events
        );
    }
    let objects = sim.objects.stored.lock().expect("objects").clone();
    eprintln!("sim: objects left {objects:?}");
}

/// Everything a schedule wrote, in order and on the paused clock: two runs of one seed write
/// the same.
fn fingerprint(sim: &Sim) -> String {
    let world = sim.store.world();
    let start = world.log.first().map(|e| e.at);
    let log: Vec<_> = world
        .log
        .iter()
        .map(|e| {
            let at = e.at - start.expect("a first write");
            format!("{at:?} {} {:?} {:?} {:?}", e.job_id, e.from, e.step, e.to)
        })
        .collect();
    let outbox: Vec<_> = world
        .outbox
        .iter()
        .map(|o| (o.event.ce_id(), o.published, o.attempts))
        .collect();
    let objects = sim.objects.stored.lock().expect("objects").clone();
    format!("{}\n{outbox:?}\n{objects:?}", log.join("\n"))
}

/// Runs the schedule of `seed`: the rules it broke (or the panic it ended in), and its
/// fingerprint.
fn simulate(seed: u64) -> (Result<(), String>, String) {
    let mut print = String::new();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let mut rng = Rng::new(seed);
            let mut sim = Sim::new(seed, &mut rng);
            let actions = 3 + rng.below(12) as usize;
            sim.run(&mut rng, actions).await;
            tally(&sim);
            if std::env::var_os("SIM_SEED").is_some() {
                story(&sim);
            }
            print = fingerprint(&sim);
            invariants::check(&sim)
        })
    }));
    let verdict = match outcome {
        Ok(broken) if broken.is_empty() => Ok(()),
        Ok(broken) => Err(broken.join("\n")),
        Err(panic) => Err(panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "a panic".into())),
    };
    (verdict, print)
}

fn run(seed: u64) -> Result<(), String> {
    simulate(seed).0
}

#[test]
fn sim_a_seed_replays_exactly() {
    for seed in (0..50).chain([19366, 84367, 123884]) {
        let (_, first) = simulate(seed);
        let (_, again) = simulate(seed);
        assert!(!first.is_empty());
        if first != again {
            let (one, two): (Vec<_>, Vec<_>) = (first.lines().collect(), again.lines().collect());
            let at = one.iter().zip(&two).position(|(a, b)| a != b);
            panic!(
                "seed {seed} ran two ways; first difference at line {at:?}:\n{:?}\n{:?}",
                at.map(|i| one[i]),
                at.map(|i| two[i])
            );
        }
    }
}

#[test]
fn sim_schedules_keep_the_invariants() {
    let seeds = match env("SIM_SEED") {
        Some(seed) => {
            // One seed: its log lines too (on the paused clock), to read how it went.
            let _ = tracing_subscriber::fmt()
                .with_test_writer()
                .with_ansi(false)
                .without_time()
                .with_env_filter("worker=debug")
                .try_init();
            seed..seed + 1
        }
        None => {
            let first = env("SIM_FIRST").unwrap_or(0);
            first..first + env("SIM_SCHEDULES").unwrap_or(DEFAULT_SCHEDULES)
        }
    };
    let started = std::time::Instant::now();
    let count = seeds.end - seeds.start;
    let mut failed = Vec::new();
    for seed in seeds {
        if let Err(broken) = run(seed) {
            eprintln!("sim: seed {seed} failed (replay: SIM_SEED={seed} cargo test -p worker --lib sim):\n{broken}");
            failed.push(seed);
            if failed.len() >= 5 {
                break;
            }
        }
    }
    eprintln!("sim: {count} schedules in {:.1?}", started.elapsed());
    for (what, n) in TALLY.lock().expect("tally").iter() {
        eprintln!("sim:   {n:>8}  {what}");
    }
    assert!(failed.is_empty(), "sim: failing seeds {failed:?}");
}
