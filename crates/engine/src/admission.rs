//! Whether a datasource may be read now: the caller's concurrency caps, which the engine waits
//! on before each datasource's read (its execution stays queued meanwhile).
//!
//! The engine holds no cap itself: the caller's [`Admission`] decides (the Worker's are slots in
//! its state database, shared by every replica), and the engine only waits for it and keeps
//! what it answered until the datasource's read ends.

use std::any::Any;

use futures_util::future::BoxFuture;

/// Admits each datasource's read.
///
/// Obligations: [`admit`](Admission::admit) waits as long as it takes (the engine's time limit
/// and stops drop the wait, so dropping it must leave nothing taken) and never fails: a cap it
/// cannot check is its own to retry. The permit it answers is held for exactly the read and
/// dropped when the read ends, however it ends; its drop gives the slot back.
pub trait Admission: Send + Sync {
    /// Waits until `datasource` may be read, then answers what holds that right.
    fn admit<'a>(&'a self, datasource: &'a str) -> BoxFuture<'a, Permit>;
}

/// What holds a datasource's right to be read; dropped when its read ends.
pub type Permit = Box<dyn Any + Send>;

/// No cap: every datasource is read at once.
pub struct Unlimited;

impl Admission for Unlimited {
    fn admit<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Permit> {
        Box::pin(async { Box::new(()) as Permit })
    }
}
