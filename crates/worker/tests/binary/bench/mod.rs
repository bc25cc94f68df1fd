//! Benchmarks of the real binary (`#[ignore]`d: run with `make bench`; figures go to
//! BENCHMARKS.md, never into an assertion about time).

mod cancel_latency;
