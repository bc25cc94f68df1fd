//! The simulation's one source of chance: a seeded SplitMix64 the schedule and every simulated
//! port draw from, so a seed replays the same run (tokio's single-threaded runtime with a paused
//! clock runs the tasks in the same order each time).

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// SplitMix64 (Steele, Lea, Flood 2014): small, fast and good enough to pick schedules.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True once in `n` draws.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// The chance the simulated ports share: their latencies and the faults they inject. Faults
/// stop once the schedule is over, so the end of a run settles.
pub struct Chaos {
    rng: Mutex<Rng>,
    faults: Mutex<bool>,
    /// The state database is away until then (a failover): every call fails.
    outage: Mutex<Option<Instant>>,
}

impl Chaos {
    pub fn new(seed: u64) -> Chaos {
        Chaos {
            rng: Mutex::new(Rng::new(seed)),
            faults: Mutex::new(true),
            outage: Mutex::new(None),
        }
    }

    pub fn draw<T>(&self, f: impl FnOnce(&mut Rng) -> T) -> T {
        f(&mut self.rng.lock().expect("rng"))
    }

    /// A fault, once in `n` calls while faults are on.
    pub fn fault(&self, n: u64) -> bool {
        *self.faults.lock().expect("faults") && self.draw(|rng| rng.one_in(n))
    }

    pub fn calm(&self) {
        *self.faults.lock().expect("faults") = false;
        *self.outage.lock().expect("outage") = None;
    }

    pub fn outage(&self, until: Instant) {
        *self.outage.lock().expect("outage") = Some(until);
    }

    /// The state database is away now.
    pub fn database_down(&self) -> bool {
        self.outage
            .lock()
            .expect("outage")
            .is_some_and(|until| Instant::now() < until)
    }

    /// A port call's latency: 0 to 3 ms of the paused clock, so calls interleave and a crash
    /// lands between any two of them.
    pub async fn pause(&self) {
        let ms = self.draw(|rng| rng.below(4));
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}
