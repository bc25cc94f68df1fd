//! Benchmarks of the real binary (`#[ignore]`d: run with `make bench`; figures go to
//! BENCHMARKS.md, never into an assertion about time).
//!
//! - [`cancel_latency`]: from a force-cancel request to `canceled`, the event and the
//!   statement's end.
//! - [`big_results`]: results of 256 MiB to 4 GiB end to end against `psql \copy`, and the
//!   Worker's peak memory, before and after the result became a stream (issue 17).
//! - [`small_jobs`]: jobs per second and latency through 1, 2 and 4 replicas, against the bare
//!   S3 and PostgreSQL rates a job's writes meet (issue 17).
//! - [`manager_jobs`]: the same small jobs in the Manager mode: jobs per second, MongoDB
//!   commands per job and CPU per job of the Worker and of the server (issue 35).
//! - [`instructions`], [`syscalls`]: a small job's instructions (callgrind) and system calls
//!   (strace), counted rather than timed (issue 36).
//!
//! [`procfs`] reads memory and CPU from `/proc`, [`stats`] makes medians and percentiles,
//! [`knobs`] reads the sizes and counts from the environment, and [`plot`] draws the figures
//! into `docs/bench/`.

mod big_results;
mod cancel_latency;
mod instructions;
mod knobs;
mod manager_jobs;
mod plot;
mod procfs;
mod small_jobs;
mod stats;
mod syscalls;
