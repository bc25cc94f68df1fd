//! The result document put out in connection-name order while its parts are written in
//! parallel.
//!
//! Every part (one connection's value) sends its chunks on its own small channel. The part at
//! the head of the order goes straight through to the output, at the output's pace; every other
//! running part is taken from its channel as fast as it comes and spooled ([`Spool`]: memory up
//! to a bound, then an unnamed temporary file), so a slow consumer never stalls a datasource
//! behind the head. When the head part has ended, the next one's spool is put out, then its
//! channel. Memory is bounded by the channels, the in-memory share of each spool and the
//! output's capacity, whatever the result's size.
//!
//! The engine drives an [`Assembly`] from the loop that also joins the datasources' tasks:
//! [`Assembly::next_move`] only waits in cancellation-safe ways (a `select!` may drop it), and
//! [`Assembly::apply`] and [`Assembly::prepare`], which do file I/O, run outside the `select!`.

use std::future::poll_fn;
use std::task::Poll;

use tokio::sync::mpsc;

use super::budget::Budget;
use super::spool::{SpillPlace, SpillStats, Spool};
use crate::error::{EngineError, Result};

/// Chunks a part may have sent and not yet had taken.
const PART_CHANNEL_CHUNKS: usize = 2;

/// A job's result being put out in order.
pub(crate) struct Assembly {
    out: mpsc::Sender<Vec<u8>>,
    parts: Vec<Slot>,
    /// The part whose chunks go out now; `parts.len()` once every part went out.
    head: usize,
    /// The head's oldest chunk not yet sent, waiting for room in `out`.
    pending: Option<Vec<u8>>,
    place: SpillPlace,
    stats: SpillStats,
    /// Bytes put out so far.
    size: u64,
}

/// One part's channel and what waits of it.
struct Slot {
    chunks: mpsc::Receiver<Vec<u8>>,
    /// Its channel is closed: every chunk it sent was taken.
    closed: bool,
    /// Its datasource ended well (told by [`Assembly::part_done`]).
    done: bool,
    spool: Spool,
}

/// What [`Assembly::next_move`] saw.
pub(crate) enum Move {
    /// The pending chunk went out.
    Sent,
    /// The head part sent a chunk (`None`: its channel closed).
    Head(Option<Vec<u8>>),
    /// A part behind the head sent a chunk (`None`: its channel closed).
    Behind(usize, Option<Vec<u8>>),
}

impl Assembly {
    /// An assembly of `parts` parts into `out`, and the sender each part writes to (in order).
    pub fn new(
        parts: usize,
        out: mpsc::Sender<Vec<u8>>,
        place: SpillPlace,
    ) -> (Assembly, Vec<mpsc::Sender<Vec<u8>>>) {
        let (senders, slots) = (0..parts)
            .map(|_| {
                let (sender, chunks) = mpsc::channel(PART_CHANNEL_CHUNKS);
                let slot = Slot {
                    chunks,
                    closed: false,
                    done: false,
                    spool: Spool::default(),
                };
                (sender, slot)
            })
            .unzip();
        let assembly = Assembly {
            out,
            parts: slots,
            head: 0,
            pending: None,
            place,
            stats: SpillStats::default(),
            size: 0,
        };
        (assembly, senders)
    }

    /// Part `index`'s datasource ended well: once its channel is drained, the next part follows.
    pub fn part_done(&mut self, index: usize) {
        if let Some(slot) = self.parts.get_mut(index) {
            slot.done = true;
        }
    }

    /// Every part went out.
    pub fn complete(&self) -> bool {
        self.head == self.parts.len() && self.pending.is_none()
    }

    /// What was spilled so far.
    pub fn spilled(&self) -> SpillStats {
        self.stats
    }

    /// Moves the head past every part that ended and went out, and takes the head's next
    /// spooled chunk as the pending one.
    pub async fn prepare(&mut self) -> Result<()> {
        while self.pending.is_none() {
            let Some(head) = self.parts.get_mut(self.head) else {
                return Ok(());
            };
            if let Some(chunk) = head.spool.pop(&self.place).await? {
                self.pending = Some(chunk);
            } else if head.closed && head.done {
                self.head += 1;
            } else {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Waits for the next thing to move: room in the output for the pending chunk, or a chunk
    /// (or the end) of any part's channel. Cancellation-safe. Never ready once every channel
    /// closed and nothing is pending.
    pub async fn next_move(&mut self) -> Result<Move> {
        let Assembly {
            out,
            parts,
            head,
            pending,
            ..
        } = self;
        let head = *head;
        let split = head.min(parts.len());
        let (before, rest) = parts.split_at_mut(split);
        debug_assert!(before.iter().all(|slot| slot.closed));
        let (current, behind) = match rest.split_first_mut() {
            Some((current, behind)) => (Some(current), behind),
            None => (None, &mut [][..]),
        };
        // The head's channel is read only when nothing of it waits elsewhere, so order holds.
        let head_readable = pending.is_none()
            && current
                .as_ref()
                .is_some_and(|slot| !slot.closed && slot.spool.is_empty());
        tokio::select! {
            biased;
            permit = out.reserve(), if pending.is_some() => {
                let permit = permit.map_err(|_| EngineError::Abandoned)?;
                if let Some(chunk) = pending.take() {
                    permit.send(chunk);
                }
                Ok(Move::Sent)
            }
            chunk = recv(current), if head_readable => Ok(Move::Head(chunk)),
            (offset, chunk) = recv_any(behind) => Ok(Move::Behind(head + 1 + offset, chunk)),
        }
    }

    /// Applies what [`next_move`](Self::next_move) saw: a head chunk becomes pending, a chunk
    /// behind the head is spooled, a closed channel is noted.
    pub async fn apply(&mut self, moved: Move) -> Result<()> {
        match moved {
            Move::Sent => {}
            Move::Head(Some(chunk)) => {
                self.size += chunk.len() as u64;
                self.pending = Some(chunk);
            }
            Move::Head(None) => self.close(self.head),
            Move::Behind(index, Some(chunk)) => {
                self.size += chunk.len() as u64;
                let place = &self.place;
                if let Some(slot) = self.parts.get_mut(index) {
                    slot.spool.push(chunk, place, &mut self.stats).await?;
                }
            }
            Move::Behind(index, None) => self.close(index),
        }
        Ok(())
    }

    /// Puts out what is pending and the document's end (`{}` for a job without parts), after
    /// every part went out. Returns the document's size.
    pub async fn finish(mut self, budget: &Budget) -> Result<u64> {
        if let Some(chunk) = self.pending.take() {
            self.send(chunk).await?;
        }
        budget.charge(2)?;
        let end = if self.parts.is_empty() {
            b"{}".to_vec()
        } else {
            b"\n}".to_vec()
        };
        self.size += end.len() as u64;
        self.send(end).await?;
        Ok(self.size)
    }

    async fn send(&self, chunk: Vec<u8>) -> Result<()> {
        self.out
            .send(chunk)
            .await
            .map_err(|_| EngineError::Abandoned)
    }

    fn close(&mut self, index: usize) {
        if let Some(slot) = self.parts.get_mut(index) {
            slot.closed = true;
        }
    }
}

/// The next chunk of `slot`'s channel (`None`: closed). Never ready without a slot.
async fn recv(slot: Option<&mut Slot>) -> Option<Vec<u8>> {
    match slot {
        Some(slot) => slot.chunks.recv().await,
        None => std::future::pending().await,
    }
}

/// The next chunk (or end) of any open channel among `slots`, with its offset. Never ready when
/// every one is closed.
async fn recv_any(slots: &mut [Slot]) -> (usize, Option<Vec<u8>>) {
    poll_fn(|cx| {
        for (offset, slot) in slots.iter_mut().enumerate() {
            if slot.closed {
                continue;
            }
            if let Poll::Ready(chunk) = slot.chunks.poll_recv(cx) {
                return Poll::Ready((offset, chunk));
            }
        }
        Poll::Pending
    })
    .await
}

/// Drives an assembly to its end as the engine does, joining the parts' tasks (each returns
/// its index and its rows); returns the document's size, its rows and what was spilled.
#[cfg(test)]
pub(crate) async fn drive(
    mut assembly: Assembly,
    mut tasks: tokio::task::JoinSet<(usize, Result<u64>)>,
    budget: &Budget,
) -> Result<(u64, u64, SpillStats)> {
    let mut rows = 0;
    loop {
        assembly.prepare().await?;
        if assembly.complete() {
            let spilled = assembly.spilled();
            return Ok((assembly.finish(budget).await?, rows, spilled));
        }
        tokio::select! {
            joined = tasks.join_next(), if !tasks.is_empty() => {
                let Some(Ok((index, part_rows))) = joined else {
                    return Err(EngineError::Result("a part's task failed".into()));
                };
                rows += part_rows?;
                assembly.part_done(index);
            }
            moved = assembly.next_move() => assembly.apply(moved?).await?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(memory_bytes: usize) -> SpillPlace {
        SpillPlace {
            dir: std::env::temp_dir(),
            memory_bytes,
        }
    }

    #[tokio::test]
    async fn parts_come_out_in_order_whatever_order_they_are_written_in() {
        let (out, mut document) = mpsc::channel(1);
        let (assembly, senders) = Assembly::new(3, out, place(4));
        let mut tasks = tokio::task::JoinSet::new();
        // The last part writes everything at once, the first one waits for it to end.
        let (last_wrote, wait_last) = tokio::sync::oneshot::channel::<()>();
        let mut senders = senders.into_iter();
        let (first, second, third) = (
            senders.next().expect("0"),
            senders.next().expect("1"),
            senders.next().expect("2"),
        );
        tasks.spawn(async move {
            wait_last.await.expect("the last part wrote");
            for chunk in ["{a", "b", "c"] {
                first.send(chunk.as_bytes().to_vec()).await.expect("send");
            }
            (0, Ok(1))
        });
        tasks.spawn(async move {
            second.send(b",d".to_vec()).await.expect("send");
            (1, Ok(1))
        });
        tasks.spawn(async move {
            for chunk in [",e", "ff", "gg", "hh"] {
                third.send(chunk.as_bytes().to_vec()).await.expect("send");
            }
            last_wrote.send(()).expect("told");
            (2, Ok(1))
        });
        let reader = tokio::spawn(async move {
            let mut text = Vec::new();
            while let Some(chunk) = document.recv().await {
                text.extend_from_slice(&chunk);
            }
            text
        });
        let budget = Budget::new(u64::MAX);
        let (size, rows, spilled) = drive(assembly, tasks, &budget).await.expect("assembled");
        let text = reader.await.expect("read");
        assert_eq!(String::from_utf8_lossy(&text), "{abc,d,effgghh\n}");
        assert_eq!(size, text.len() as u64);
        assert_eq!(rows, 3);
        assert!(
            spilled.files >= 1,
            "the last part outgrew its 4 bytes of memory while the first waited"
        );
    }

    #[tokio::test]
    async fn no_parts_make_an_empty_document() {
        let (out, mut document) = mpsc::channel(1);
        let (assembly, _) = Assembly::new(0, out, place(4));
        let budget = Budget::new(u64::MAX);
        let (size, _, _) = drive(assembly, tokio::task::JoinSet::new(), &budget)
            .await
            .expect("assembled");
        assert_eq!(document.recv().await.as_deref(), Some(&b"{}"[..]));
        assert_eq!(size, 2);
    }

    #[tokio::test]
    async fn a_consumer_that_stops_abandons_the_assembly() {
        let (out, document) = mpsc::channel(1);
        let (mut assembly, senders) = Assembly::new(1, out, place(4));
        drop(document);
        senders[0].send(b"{x".to_vec()).await.expect("send");
        assembly.prepare().await.expect("prepare");
        let moved = assembly.next_move().await.expect("a head chunk");
        assembly.apply(moved).await.expect("pending");
        let error = match assembly.next_move().await {
            Err(error) => error,
            Ok(_) => panic!("the output is gone"),
        };
        assert!(matches!(error, EngineError::Abandoned), "{error}");
    }
}
