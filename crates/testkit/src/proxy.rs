//! A small TCP fault proxy: listens on 127.0.0.1:0 and forwards every connection to a target,
//! with faults switchable at run time:
//!
//! - `set_latency(d)`: every forwarded chunk waits `d` first (both directions);
//! - `set_stall(true)`: connections (current and new) are accepted but nothing is forwarded;
//! - `set_refuse(true)`: new connections are accepted and reset at once (the client sees a
//!   connection reset before any byte), current ones continue;
//! - `refuse_next(n)`: the next `n` new connections are reset at once, as with `set_refuse`,
//!   then they are forwarded again (a dependency that comes back);
//! - `reset_all()`: every current connection is closed with a TCP reset on both sides;
//! - `set_cut_after(Some(n))`: every connection (current and new) is reset once it has forwarded
//!   `n` more bytes (both directions counted) since the cut was armed: a publish or a transaction
//!   is cut mid-way. `None` disarms it.
//! - `set_trap(trap)`: a one-shot cut aimed at one step of a protocol: the first connection whose
//!   client sends `on` (after `after`, when given) is reset either before those bytes reach the
//!   server (the step never happens) or, with [`Trap::reply_lost`], after the server got them and
//!   before its answer comes back (the step happens; the client cannot know). A `COMMIT`, an
//!   `INSERT`, a publish to a named exchange: a transaction or a publish cut at a chosen point.
//!   [`Trap::hold`] holds those bytes (and all the client sends after them on that connection)
//!   instead, until `release_held()`: a step caught in flight, its connection left open.
//!   [`Trap::times`] makes it fire on the first `n` sends of `on` instead of once: a write and
//!   the driver's retry of it, both cut, while everything else goes through.
//! - `heal()`: clears every fault (it does not reopen what was closed).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

#[derive(Clone, Debug, Default)]
struct Faults {
    latency: Duration,
    stall: bool,
    refuse: bool,
    /// New connections still to be reset by `refuse_next`.
    refuse_next: u64,
    /// (arming epoch, bytes each connection may still forward after it was armed)
    cut: Option<(u64, u64)>,
    /// (arming epoch, the trap): disarmed once it fires.
    trap: Option<(u64, Trap)>,
}

/// A one-shot cut triggered by what the client sends; see the module docs.
#[derive(Clone, Debug)]
pub struct Trap {
    after: Option<Vec<u8>>,
    on: Vec<u8>,
    reply_lost: bool,
    down: bool,
    hold: bool,
    /// Firings left before it disarms.
    times: u64,
}

impl Trap {
    /// Resets the connection before `on` reaches the server.
    pub fn before(on: &[u8]) -> Trap {
        Trap {
            after: None,
            on: on.to_vec(),
            reply_lost: false,
            down: false,
            hold: false,
            times: 1,
        }
    }

    /// Holds `on` (and whatever the client sends after it on that connection) before it reaches
    /// the server, until [`FaultProxy::release_held`]; the connection stays open.
    pub fn hold(on: &[u8]) -> Trap {
        Trap {
            hold: true,
            ..Trap::before(on)
        }
    }

    /// Lets `on` reach the server, then resets the connection instead of forwarding the server's
    /// next bytes (its answer).
    pub fn reply_lost(on: &[u8]) -> Trap {
        Trap {
            reply_lost: true,
            ..Trap::before(on)
        }
    }

    /// Fires only on a connection whose client has already sent `earlier`.
    pub fn after(mut self, earlier: &[u8]) -> Trap {
        self.after = Some(earlier.to_vec());
        self
    }

    /// Fires on the first `n` sends of `on` (at least one), each as it would once; disarmed
    /// after the last.
    pub fn times(mut self, n: u64) -> Trap {
        self.times = n.max(1);
        self
    }

    /// When it fires, the whole dependency goes down with it: every connection is reset and new
    /// ones are refused (as with `set_refuse(true)`) until `heal()`.
    pub fn and_go_down(mut self) -> Trap {
        self.down = true;
        self
    }

    fn longest(&self) -> usize {
        self.on.len().max(self.after.as_ref().map_or(0, Vec::len))
    }
}

/// What one connection has seen of the armed trap.
#[derive(Default)]
struct TrapState {
    epoch: u64,
    /// The tail of the client's previous chunk, so a pattern split across chunks is seen.
    tail: Vec<u8>,
    after_seen: bool,
    /// The trap fired with `reply_lost`: the server's next bytes reset the connection.
    drop_reply: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    ToServer,
    ToClient,
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

struct Shared {
    target: SocketAddr,
    faults: Mutex<Faults>,
    /// Cancelled by `reset_all`; replaced by a fresh token at once.
    reset: Mutex<CancellationToken>,
    epoch: AtomicU64,
    killed: AtomicU64,
    fired: AtomicU64,
    /// Bytes a [`Trap::hold`] caught may go on.
    released: AtomicBool,
}

impl Shared {
    fn reset_all(&self) {
        let old = std::mem::replace(
            &mut *self.reset.lock().unwrap_or_else(|e| e.into_inner()),
            CancellationToken::new(),
        );
        old.cancel();
    }

    fn faults(&self) -> Faults {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: tokio::task::JoinHandle<()>,
}

struct Killed;

impl FaultProxy {
    /// Starts a proxy to `target` on a free port of 127.0.0.1. It runs on its own runtime, so a
    /// test that blocks its own threads (a synchronous HTTP probe) never stalls the proxy.
    pub async fn start(target: SocketAddr) -> FaultProxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("proxy addr");
        let shared = Arc::new(Shared {
            target,
            faults: Mutex::new(Faults::default()),
            reset: Mutex::new(CancellationToken::new()),
            epoch: AtomicU64::new(0),
            killed: AtomicU64::new(0),
            fired: AtomicU64::new(0),
            released: AtomicBool::new(false),
        });
        let accept = runtime().spawn(accept_loop(listener, shared.clone()));
        FaultProxy {
            addr,
            shared,
            accept,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    fn update(&self, change: impl FnOnce(&mut Faults)) {
        change(&mut self.shared.faults.lock().unwrap_or_else(|e| e.into_inner()));
    }

    pub fn set_latency(&self, latency: Duration) {
        self.update(|f| f.latency = latency);
    }

    pub fn set_stall(&self, on: bool) {
        self.update(|f| f.stall = on);
    }

    pub fn set_refuse(&self, on: bool) {
        self.update(|f| f.refuse = on);
    }

    /// Resets the next `n` new connections at once, then forwards again.
    pub fn refuse_next(&self, n: u64) {
        self.update(|f| f.refuse_next = n);
    }

    pub fn set_cut_after(&self, bytes: Option<u64>) {
        let epoch = self.shared.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        self.update(|f| f.cut = bytes.map(|n| (epoch, n)));
    }

    /// Arms a one-shot [`Trap`] (replacing one not yet fired).
    pub fn set_trap(&self, trap: Trap) {
        let epoch = self.shared.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        self.shared.released.store(false, Ordering::SeqCst);
        self.update(|f| f.trap = Some((epoch, trap)));
    }

    /// Lets the bytes a [`Trap::hold`] caught go on to the server.
    pub fn release_held(&self) {
        self.shared.released.store(true, Ordering::SeqCst);
    }

    /// How many traps have fired.
    pub fn trap_fired(&self) -> u64 {
        self.shared.fired.load(Ordering::SeqCst)
    }

    /// Resets every current connection.
    pub fn reset_all(&self) {
        self.shared.reset_all();
    }

    /// Clears every fault.
    pub fn heal(&self) {
        self.update(|f| *f = Faults::default());
    }

    /// Connections the proxy has reset so far (refused, reset or cut).
    pub fn killed(&self) -> u64 {
        self.shared.killed.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.reset_all();
    }
}

fn rst(stream: &TcpStream) {
    #[allow(deprecated)]
    let _ = stream.set_linger(Some(Duration::ZERO));
}

/// The proxies' own runtime.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("fault-proxy")
            .enable_all()
            .build()
            .expect("proxy runtime")
    })
}

async fn accept_loop(listener: std::net::TcpListener, shared: Arc<Shared>) {
    let listener = TcpListener::from_std(listener).expect("proxy listener");
    loop {
        let Ok((client, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let refused = {
            let mut faults = shared.faults.lock().unwrap_or_else(|e| e.into_inner());
            let next = faults.refuse_next > 0;
            faults.refuse_next = faults.refuse_next.saturating_sub(1);
            faults.refuse || next
        };
        if refused {
            shared.killed.fetch_add(1, Ordering::SeqCst);
            rst(&client);
            drop(client);
            continue;
        }
        let token = shared
            .reset
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        tokio::spawn(handle(client, shared.clone(), token));
    }
}

async fn handle(mut client: TcpStream, shared: Arc<Shared>, token: CancellationToken) {
    let _ = client.set_nodelay(true);
    let mut upstream = match TcpStream::connect(shared.target).await {
        Ok(upstream) => upstream,
        Err(_) => {
            rst(&client);
            return;
        }
    };
    let _ = upstream.set_nodelay(true);
    // (epoch seen, bytes forwarded since then), shared by both directions.
    let budget = Mutex::new((0u64, 0u64));
    let trap = Mutex::new(TrapState::default());
    let killed = {
        let (cr, cw) = client.split();
        let (ur, uw) = upstream.split();
        let to_server = Link {
            shared: &shared,
            budget: &budget,
            trap: &trap,
            token: &token,
            direction: Direction::ToServer,
        };
        let to_client = Link {
            direction: Direction::ToClient,
            ..to_server
        };
        tokio::select! {
            _ = token.cancelled() => true,
            r = async {
                tokio::try_join!(pump(cr, uw, to_server), pump(ur, cw, to_client))
            } => r.is_err(),
        }
    };
    if killed {
        shared.killed.fetch_add(1, Ordering::SeqCst);
        rst(&client);
        rst(&upstream);
    }
    drop(client);
    drop(upstream);
}

/// One direction of a proxied connection and the state both directions share.
#[derive(Clone, Copy)]
struct Link<'a> {
    shared: &'a Shared,
    budget: &'a Mutex<(u64, u64)>,
    trap: &'a Mutex<TrapState>,
    token: &'a CancellationToken,
    direction: Direction,
}

/// What the armed trap makes of a chunk.
enum Sprung {
    /// Not fired (or not armed): forward.
    No,
    /// Fired: reset before forwarding.
    Before,
    /// Fired with `reply_lost`: forward, and reset on the server's next bytes.
    AfterForwarding,
    /// Fired with `hold`: forward once released.
    Hold,
}

impl Link<'_> {
    fn spring(&self, chunk: &[u8]) -> Sprung {
        let mut state = self.trap.lock().unwrap_or_else(|e| e.into_inner());
        if self.direction == Direction::ToClient {
            return if state.drop_reply {
                Sprung::Before
            } else {
                Sprung::No
            };
        }
        let mut faults = self.shared.faults.lock().unwrap_or_else(|e| e.into_inner());
        let Some((epoch, trap)) = faults.trap.clone() else {
            return Sprung::No;
        };
        if state.epoch != epoch {
            *state = TrapState {
                epoch,
                ..TrapState::default()
            };
        }
        let mut seen = std::mem::take(&mut state.tail);
        seen.extend_from_slice(chunk);
        let keep = trap.longest().saturating_sub(1).min(seen.len());
        state.tail = seen[seen.len() - keep..].to_vec();
        let from = match &trap.after {
            _ if state.after_seen => 0,
            None => 0,
            Some(after) => match find(&seen, after) {
                Some(at) => {
                    state.after_seen = true;
                    at + after.len()
                }
                None => return Sprung::No,
            },
        };
        if find(&seen[from..], &trap.on).is_none() {
            return Sprung::No;
        }
        faults.trap = (trap.times > 1).then(|| {
            let left = Trap {
                times: trap.times - 1,
                ..trap.clone()
            };
            (epoch, left)
        });
        self.shared.fired.fetch_add(1, Ordering::SeqCst);
        if trap.down {
            faults.refuse = true;
            self.shared.reset_all();
            return Sprung::Before;
        }
        if trap.hold {
            Sprung::Hold
        } else if trap.reply_lost {
            state.drop_reply = true;
            Sprung::AfterForwarding
        } else {
            Sprung::Before
        }
    }
}

async fn pump<R, W>(mut from: R, mut to: W, link: Link<'_>) -> Result<(), Killed>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return Ok(());
            }
            Ok(n) => n,
        };
        let (shared, budget, token) = (link.shared, link.budget, link.token);
        match link.spring(&buf[..n]) {
            Sprung::No => {}
            Sprung::Before => return Err(Killed),
            Sprung::AfterForwarding => {
                let _ = to.write_all(&buf[..n]).await;
                let _ = to.flush().await;
                continue;
            }
            Sprung::Hold => {
                while !shared.released.load(Ordering::SeqCst) {
                    if token.is_cancelled() {
                        return Err(Killed);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
        // Stalled: hold the bytes until the stall is lifted (or the connection is reset).
        loop {
            let faults = shared.faults();
            if !faults.stall {
                if !faults.latency.is_zero() {
                    tokio::time::sleep(faults.latency).await;
                }
                break;
            }
            if token.is_cancelled() {
                return Err(Killed);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut allowed = n;
        let mut cut = false;
        if let Some((epoch, limit)) = shared.faults().cut {
            let mut b = budget.lock().unwrap_or_else(|e| e.into_inner());
            if b.0 != epoch {
                *b = (epoch, 0);
            }
            let left = limit.saturating_sub(b.1) as usize;
            if n > left {
                allowed = left;
                cut = true;
            }
            b.1 += allowed as u64;
        }
        if allowed > 0 && to.write_all(&buf[..allowed]).await.is_err() {
            return Err(Killed);
        }
        if cut {
            let _ = to.flush().await;
            return Err(Killed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server; its address.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    /// Sends `msg` and reads the same number of bytes back, within `within`.
    async fn roundtrip(
        s: &mut TcpStream,
        msg: &[u8],
        within: Duration,
    ) -> std::io::Result<Vec<u8>> {
        let work = async {
            s.write_all(msg).await?;
            let mut back = vec![0u8; msg.len()];
            s.read_exact(&mut back).await?;
            Ok(back)
        };
        tokio::time::timeout(within, work)
            .await
            .unwrap_or_else(|_| Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "timeout")))
    }

    /// Round-trips `msg` within 2 s, failing the test otherwise.
    async fn passes(s: &mut TcpStream, msg: &[u8]) {
        roundtrip(s, msg, Duration::from_secs(2))
            .await
            .unwrap_or_else(|e| panic!("{:?} did not pass: {e}", String::from_utf8_lossy(msg)));
    }

    /// Whether the round trip of `msg` fails (or does not end) within `within`.
    async fn fails(s: &mut TcpStream, msg: &[u8], within: Duration) -> bool {
        roundtrip(s, msg, within).await.is_err()
    }

    #[tokio::test]
    async fn forwards_and_applies_latency() {
        let proxy = FaultProxy::start(echo().await).await;
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        assert_eq!(
            roundtrip(&mut s, b"hello", Duration::from_secs(2))
                .await
                .unwrap(),
            b"hello"
        );
        proxy.set_latency(Duration::from_millis(150));
        let t = std::time::Instant::now();
        passes(&mut s, b"slow").await;
        assert!(
            t.elapsed() >= Duration::from_millis(300),
            "{:?}",
            t.elapsed()
        );
        proxy.heal();
        let t = std::time::Instant::now();
        passes(&mut s, b"fast").await;
        assert!(t.elapsed() < Duration::from_millis(150));
    }

    #[tokio::test]
    async fn stall_holds_bytes_until_lifted() {
        let proxy = FaultProxy::start(echo().await).await;
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        passes(&mut s, b"a").await;
        proxy.set_stall(true);
        assert!(fails(&mut s, b"b", Duration::from_millis(300)).await);
        // A new connection is accepted but stalled too.
        let mut s2 = TcpStream::connect(proxy.addr()).await.unwrap();
        assert!(fails(&mut s2, b"c", Duration::from_millis(300)).await);
        proxy.set_stall(false);
        let mut back = [0u8; 1];
        s2.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"c");
        let mut fresh = TcpStream::connect(proxy.addr()).await.unwrap();
        passes(&mut fresh, b"d").await;
    }

    #[tokio::test]
    async fn refuse_resets_new_connections_only() {
        let proxy = FaultProxy::start(echo().await).await;
        let mut old = TcpStream::connect(proxy.addr()).await.unwrap();
        passes(&mut old, b"x").await;
        proxy.set_refuse(true);
        // The reset may already reach the client's connect.
        if let Ok(mut new) = TcpStream::connect(proxy.addr()).await {
            assert!(fails(&mut new, b"y", Duration::from_secs(2)).await);
        }
        passes(&mut old, b"z").await;
        proxy.set_refuse(false);
        let mut again = TcpStream::connect(proxy.addr()).await.unwrap();
        passes(&mut again, b"w").await;
    }

    #[tokio::test]
    async fn reset_all_closes_current_connections() {
        let proxy = FaultProxy::start(echo().await).await;
        let mut a = TcpStream::connect(proxy.addr()).await.unwrap();
        let mut b = TcpStream::connect(proxy.addr()).await.unwrap();
        passes(&mut a, b"1").await;
        passes(&mut b, b"2").await;
        proxy.reset_all();
        assert!(fails(&mut a, b"3", Duration::from_secs(2)).await);
        assert!(fails(&mut b, b"4", Duration::from_secs(2)).await);
        let mut c = TcpStream::connect(proxy.addr()).await.unwrap();
        passes(&mut c, b"5").await;
        for _ in 0..50 {
            if proxy.killed() >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(proxy.killed() >= 2, "{}", proxy.killed());
    }

    #[tokio::test]
    async fn cut_closes_after_n_bytes() {
        let proxy = FaultProxy::start(echo().await).await;
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        passes(&mut s, b"before").await;
        // 10 bytes out + 10 back = 20: the connection survives; the next 10 out cut it at 25.
        proxy.set_cut_after(Some(25));
        passes(&mut s, b"0123456789").await;
        s.write_all(b"abcdefghij").await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            match tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
                Err(_) => panic!("the connection was not cut"),
            }
        }
        assert!(
            got.len() < 10,
            "only part of the message got through: {got:?}"
        );
        proxy.set_cut_after(None);
        let mut fresh = TcpStream::connect(proxy.addr()).await.unwrap();
        passes(&mut fresh, &[7u8; 5000]).await;
    }

    /// An echo server that also keeps everything it received.
    async fn recording_echo() -> (SocketAddr, Arc<Mutex<Vec<u8>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = s.read(&mut buf).await {
                        log.lock().unwrap().extend_from_slice(&buf[..n]);
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        (addr, received)
    }

    #[tokio::test]
    async fn trap_before_stops_the_step_after_its_prelude_once() {
        let (target, received) = recording_echo().await;
        let proxy = FaultProxy::start(target).await;
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        proxy.set_trap(Trap::before(b"COMMIT").after(b"INSERT"));
        // `COMMIT` before any `INSERT` on this connection passes.
        passes(&mut s, b"BEGIN;COMMIT").await;
        // The pattern split across two writes is still seen.
        passes(&mut s, b"BEGIN;INS").await;
        passes(&mut s, b"ERT x;").await;
        assert!(fails(&mut s, b"COMMIT", Duration::from_secs(2)).await);
        assert_eq!(proxy.trap_fired(), 1);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let seen = received.lock().unwrap().clone();
        assert_eq!(
            seen, b"BEGIN;COMMITBEGIN;INSERT x;",
            "the server never got it"
        );
        // One shot: the next connection passes the same bytes.
        let mut again = TcpStream::connect(proxy.addr()).await.unwrap();
        passes(&mut again, b"INSERT;COMMIT").await;
        assert_eq!(proxy.trap_fired(), 1);
    }

    #[tokio::test]
    async fn a_trap_set_to_fire_twice_cuts_a_step_and_its_retry_then_lets_it_through() {
        let (target, received) = recording_echo().await;
        let proxy = FaultProxy::start(target).await;
        proxy.set_trap(Trap::before(b"UPDATE").times(2));
        for _ in 0..2 {
            let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
            roundtrip(&mut s, b"find", Duration::from_secs(2))
                .await
                .unwrap();
            assert!(roundtrip(&mut s, b"UPDATE", Duration::from_secs(2))
                .await
                .is_err());
        }
        assert_eq!(proxy.trap_fired(), 2);
        let mut third = TcpStream::connect(proxy.addr()).await.unwrap();
        roundtrip(&mut third, b"UPDATE", Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(proxy.trap_fired(), 2);
        assert_eq!(received.lock().unwrap().as_slice(), b"findfindUPDATE");
    }

    #[tokio::test]
    async fn trap_hold_keeps_the_step_until_released_and_the_connection_open() {
        let (target, received) = recording_echo().await;
        let proxy = FaultProxy::start(target).await;
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        proxy.set_trap(Trap::hold(b"getMore"));
        passes(&mut s, b"find").await;
        assert!(fails(&mut s, b"getMore", Duration::from_millis(300)).await);
        assert_eq!(proxy.trap_fired(), 1);
        // Other connections pass meanwhile.
        let mut other = TcpStream::connect(proxy.addr()).await.unwrap();
        passes(&mut other, b"killCursors").await;
        assert_eq!(received.lock().unwrap().as_slice(), b"findkillCursors");
        proxy.release_held();
        let mut back = [0u8; 7];
        s.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"getMore");
    }

    #[tokio::test]
    async fn trap_reply_lost_lets_the_step_happen_and_drops_the_answer() {
        let (target, received) = recording_echo().await;
        let proxy = FaultProxy::start(target).await;
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        proxy.set_trap(Trap::reply_lost(b"publish"));
        passes(&mut s, b"hello").await;
        assert!(fails(&mut s, b"publish", Duration::from_secs(2)).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(received.lock().unwrap().as_slice(), b"hellopublish");
        assert_eq!(proxy.trap_fired(), 1);
    }
}
