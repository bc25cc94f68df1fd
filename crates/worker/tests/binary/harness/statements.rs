//! [`StatementCounter`]: a TCP proxy in front of PostgreSQL or MariaDB that reads the client's
//! side of the wire protocol and notes every statement the server is asked to run, with its
//! text, and the round trips that run none (the pool's pings, first prepares).
//!
//! Exact where server-side counters are not: it sees only the connections made to its own port
//! (one test's pools), and needs no server setting (`pg_stat_statements`, a statement log) and
//! no restart.
//!
//! - PostgreSQL: a simple `Query` is a statement; in the extended protocol each `Execute` is
//!   one (its text from the `Parse` its `Bind` names). A `Sync` that closes a `Parse` without an
//!   `Execute` is a prepare; one alone is a ping (sqlx tests a connection so when it is taken
//!   from the pool and when it is given back).
//! - MariaDB / MySQL: commands are the packets with sequence number 0; `COM_QUERY` and
//!   `COM_STMT_EXECUTE` are statements (an execute's text from the `COM_STMT_PREPARE` whose
//!   answer gave its id), `COM_STMT_PREPARE` a prepare and `COM_PING` a ping.
//! - MongoDB: every `OP_MSG` is a command and a round trip; its text is the command's name and
//!   its collection (`update job`, `commitTransaction`), with ` +txn` when it starts a
//!   transaction. The driver's handshakes and monitoring (`hello`, `isMaster`, `ping`,
//!   authentication, `endSessions`, a legacy `OP_QUERY` hello) count as pings.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The protocol the proxied server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Postgres,
    MySql,
    Mongo,
}

/// What the server was asked, in order, over every connection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// The text of each statement run.
    pub statements: Vec<String>,
    /// Round trips that only prepared a statement (its first use on a connection).
    pub prepares: usize,
    /// Round trips that ran nothing (the pool's liveness tests).
    pub pings: usize,
}

impl Tally {
    /// What was asked after `earlier` (a tally taken before).
    pub fn since(&self, earlier: &Tally) -> Tally {
        Tally {
            statements: self.statements[earlier.statements.len()..].to_vec(),
            prepares: self.prepares - earlier.prepares,
            pings: self.pings - earlier.pings,
        }
    }

    /// One statement a line, first words only, for a failure message or the benchmarks.
    pub fn listing(&self) -> String {
        self.statements
            .iter()
            .map(|sql| {
                let flat = sql.split_whitespace().collect::<Vec<_>>().join(" ");
                let short: String = flat.chars().take(110).collect();
                format!("  {short}\n")
            })
            .collect()
    }
}

pub struct StatementCounter {
    addr: SocketAddr,
    tally: Arc<Mutex<Tally>>,
    accept: tokio::task::JoinHandle<()>,
}

impl StatementCounter {
    /// Starts counting in front of `target` on a free port of 127.0.0.1.
    pub async fn start(target: SocketAddr, protocol: Protocol) -> StatementCounter {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind counter");
        let addr = listener.local_addr().expect("counter addr");
        let tally = Arc::new(Mutex::new(Tally::default()));
        let accept = tokio::spawn({
            let tally = tally.clone();
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    tokio::spawn(relay(client, target, protocol, tally.clone()));
                }
            }
        });
        StatementCounter {
            addr,
            tally,
            accept,
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Everything counted so far.
    pub fn tally(&self) -> Tally {
        self.tally.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for StatementCounter {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// One connection's state of the protocol, shared by its two directions.
#[derive(Default)]
struct Session {
    /// PostgreSQL: prepared statements' text by name; the statement each portal was bound to.
    /// MySQL: prepared statements' text by id.
    prepared: HashMap<String, String>,
    portals: HashMap<String, String>,
    /// MySQL: the text of a `COM_STMT_PREPARE` whose answer (its id) is awaited.
    preparing: Option<String>,
    /// PostgreSQL: what the messages since the last `Sync` asked for.
    parsed: bool,
    executed: bool,
}

async fn relay(
    client: TcpStream,
    target: SocketAddr,
    protocol: Protocol,
    tally: Arc<Mutex<Tally>>,
) {
    let Ok(server) = TcpStream::connect(target).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let session = Mutex::new(Session::default());
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let to_server = async {
        let mut reader = ClientReader::new(protocol);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            reader.feed(&buf[..n], &session, &tally);
            if sw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = sw.shutdown().await;
    };
    let to_client = async {
        let mut reader = ServerReader::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match sr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if protocol == Protocol::MySql {
                reader.feed(&buf[..n], &session);
            }
            if cw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = cw.shutdown().await;
    };
    tokio::join!(to_server, to_client);
}

/// The client's bytes, cut into messages.
struct ClientReader {
    protocol: Protocol,
    pending: Vec<u8>,
    /// PostgreSQL: still in the untyped startup messages (SSL request, startup).
    startup: bool,
}

impl ClientReader {
    fn new(protocol: Protocol) -> ClientReader {
        ClientReader {
            protocol,
            pending: Vec::new(),
            startup: true,
        }
    }

    fn feed(&mut self, bytes: &[u8], session: &Mutex<Session>, tally: &Mutex<Tally>) {
        self.pending.extend_from_slice(bytes);
        loop {
            let used = match self.protocol {
                Protocol::Postgres => self.postgres_message(session, tally),
                Protocol::MySql => mysql_packet(&self.pending, |seq, payload| {
                    if seq == 0 {
                        mysql_command(payload, session, tally);
                    }
                }),
                Protocol::Mongo => mongo_message(&self.pending, tally),
            };
            match used {
                Some(n) => {
                    self.pending.drain(..n);
                }
                None => return,
            }
        }
    }

    /// Reads one message off `pending`; its length, or `None` until it is whole.
    fn postgres_message(
        &mut self,
        session: &Mutex<Session>,
        tally: &Mutex<Tally>,
    ) -> Option<usize> {
        let p = &self.pending;
        if self.startup {
            let len = u32::from_be_bytes(p.get(..4)?.try_into().ok()?) as usize;
            if p.len() < len.max(8) {
                return None;
            }
            let code = u32::from_be_bytes(p.get(4..8)?.try_into().ok()?);
            // SSLRequest and GSSENCRequest are followed by another untyped message.
            self.startup = matches!(code, 80_877_103 | 80_877_104);
            return Some(len);
        }
        let kind = *p.first()?;
        let len = u32::from_be_bytes(p.get(1..5)?.try_into().ok()?) as usize + 1;
        let body = p.get(5..len)?;
        let mut session = session.lock().unwrap_or_else(|e| e.into_inner());
        let mut tally = tally.lock().unwrap_or_else(|e| e.into_inner());
        match kind {
            b'Q' => tally.statements.push(cstr(body, 0).0),
            b'P' => {
                let (name, at) = cstr(body, 0);
                let (sql, _) = cstr(body, at);
                session.prepared.insert(name, sql);
                session.parsed = true;
            }
            b'B' => {
                let (portal, at) = cstr(body, 0);
                let (statement, _) = cstr(body, at);
                let sql = session
                    .prepared
                    .get(&statement)
                    .cloned()
                    .unwrap_or_default();
                session.portals.insert(portal, sql);
            }
            b'E' => {
                let (portal, _) = cstr(body, 0);
                let sql = session.portals.get(&portal).cloned().unwrap_or_default();
                tally.statements.push(sql);
                session.executed = true;
            }
            b'S' => {
                if !session.executed {
                    if session.parsed {
                        tally.prepares += 1;
                    } else {
                        tally.pings += 1;
                    }
                }
                (session.parsed, session.executed) = (false, false);
            }
            _ => {}
        }
        Some(len)
    }
}

/// A NUL-terminated string at `at`, and where the next field starts.
fn cstr(body: &[u8], at: usize) -> (String, usize) {
    let rest = body.get(at..).unwrap_or_default();
    let end = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
    (
        String::from_utf8_lossy(&rest[..end]).into_owned(),
        at + end + 1,
    )
}

/// Reads one MySQL packet (3-byte length, sequence number, payload) off `pending`, handing its
/// sequence number and payload to `each`; its length, or `None` until it is whole.
fn mysql_packet(pending: &[u8], each: impl FnOnce(u8, &[u8])) -> Option<usize> {
    let header = pending.get(..4)?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    let payload = pending.get(4..4 + len)?;
    each(header[3], payload);
    Some(4 + len)
}

const COM_QUERY: u8 = 0x03;
const COM_PING: u8 = 0x0e;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;

fn mysql_command(payload: &[u8], session: &Mutex<Session>, tally: &Mutex<Tally>) {
    let Some((&command, rest)) = payload.split_first() else {
        return;
    };
    let mut session = session.lock().unwrap_or_else(|e| e.into_inner());
    let mut tally = tally.lock().unwrap_or_else(|e| e.into_inner());
    match command {
        COM_QUERY => tally
            .statements
            .push(String::from_utf8_lossy(rest).into_owned()),
        COM_STMT_PREPARE => {
            tally.prepares += 1;
            session.preparing = Some(String::from_utf8_lossy(rest).into_owned());
        }
        COM_PING => tally.pings += 1,
        COM_STMT_EXECUTE => {
            let id = rest
                .get(..4)
                .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            let sql = session
                .prepared
                .get(&id.to_string())
                .cloned()
                .unwrap_or_default();
            tally.statements.push(sql);
        }
        _ => {}
    }
}

const OP_QUERY: i32 = 2004;
const OP_MSG: i32 = 2013;

/// The driver's own round trips, which run no command of the application's.
const MONGO_HOUSEKEEPING: [&str; 8] = [
    "hello",
    "isMaster",
    "ismaster",
    "ping",
    "buildInfo",
    "saslStart",
    "saslContinue",
    "endSessions",
];

/// Reads one MongoDB message (a 16-byte header whose first field is the length) off
/// `pending`; its length, or `None` until it is whole.
fn mongo_message(pending: &[u8], tally: &Mutex<Tally>) -> Option<usize> {
    let len = i32::from_le_bytes(pending.get(..4)?.try_into().ok()?) as usize;
    let message = pending.get(..len.max(16))?;
    let opcode = i32::from_le_bytes(message[12..16].try_into().ok()?);
    let mut tally = tally.lock().unwrap_or_else(|e| e.into_inner());
    match opcode {
        // flagBits (4 bytes), then the body: section kind 0 and a BSON document.
        OP_MSG if message.get(20) == Some(&0) => {
            let (name, collection, starts) = mongo_command(message.get(21..).unwrap_or_default());
            if MONGO_HOUSEKEEPING.contains(&name.as_str()) {
                tally.pings += 1;
            } else {
                let mut text = name;
                if let Some(collection) = collection {
                    text = format!("{text} {collection}");
                }
                if starts {
                    text.push_str(" +txn");
                }
                tally.statements.push(text);
            }
        }
        OP_MSG | OP_QUERY => tally.pings += 1,
        _ => {}
    }
    Some(len.max(16))
}

/// A command document's name (its first key), its collection (the first value, when a string)
/// and whether it carries `startTransaction: true`.
fn mongo_command(document: &[u8]) -> (String, Option<String>, bool) {
    // An element: type byte, NUL-terminated key, value.
    let Some(&kind) = document.get(4) else {
        return (String::new(), None, false);
    };
    let (name, at) = cstr(document, 5);
    let collection = (kind == 0x02)
        .then(|| {
            let len = i32::from_le_bytes(document.get(at..at + 4)?.try_into().ok()?) as usize;
            let text = document.get(at + 4..at + 4 + len.checked_sub(1)?)?;
            Some(String::from_utf8_lossy(text).into_owned())
        })
        .flatten();
    // `startTransaction` is a boolean element (type 0x08) whose value byte is 1.
    let key = b"\x08startTransaction\x00\x01";
    let starts = document.windows(key.len()).any(|w| w == key);
    (name, collection, starts)
}

/// The server's bytes (MySQL only): the id a `COM_STMT_PREPARE` was answered with.
#[derive(Default)]
struct ServerReader {
    pending: Vec<u8>,
}

impl ServerReader {
    fn feed(&mut self, bytes: &[u8], session: &Mutex<Session>) {
        self.pending.extend_from_slice(bytes);
        while let Some(n) = mysql_packet(&self.pending, |seq, payload| {
            let mut session = session.lock().unwrap_or_else(|e| e.into_inner());
            // COM_STMT_PREPARE_OK: status 0x00, then the statement id.
            if seq == 1 && payload.first() == Some(&0) && payload.len() >= 5 {
                if let Some(sql) = session.preparing.take() {
                    let id = u32::from_le_bytes([payload[1], payload[2], payload[3], payload[4]]);
                    session.prepared.insert(id.to_string(), sql);
                }
            }
        }) {
            self.pending.drain(..n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut message = vec![kind];
        message.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        message.extend_from_slice(body);
        message
    }

    fn mysql(seq: u8, payload: &[u8]) -> Vec<u8> {
        let len = (payload.len() as u32).to_le_bytes();
        let mut packet = vec![len[0], len[1], len[2], seq];
        packet.extend_from_slice(payload);
        packet
    }

    /// Feeds `bytes` one at a time: a message split anywhere is still read whole.
    fn read(protocol: Protocol, bytes: &[u8]) -> Tally {
        let (session, tally) = (Mutex::new(Session::default()), Mutex::new(Tally::default()));
        let mut reader = ClientReader::new(protocol);
        for byte in bytes {
            reader.feed(std::slice::from_ref(byte), &session, &tally);
        }
        tally.into_inner().unwrap()
    }

    #[test]
    fn postgres_statements_prepares_and_pings_are_told_apart() {
        let mut wire = Vec::new();
        // SSLRequest, then the startup message: both untyped.
        wire.extend_from_slice(&8u32.to_be_bytes());
        wire.extend_from_slice(&80_877_103u32.to_be_bytes());
        wire.extend_from_slice(&9u32.to_be_bytes());
        wire.extend_from_slice(&196_608u32.to_be_bytes());
        wire.push(0);
        // A first use: Parse + Describe + Sync, then Bind + Execute + Sync.
        wire.extend(pg(b'P', b"s1\0SELECT 1\0\0\0"));
        wire.extend(pg(b'D', b"Ss1\0"));
        wire.extend(pg(b'S', b""));
        wire.extend(pg(b'B', b"\0s1\0\0\0\0\0\0\0"));
        wire.extend(pg(b'E', b"\0\0\0\0\0"));
        wire.extend(pg(b'S', b""));
        // A ping, then a simple query.
        wire.extend(pg(b'S', b""));
        wire.extend(pg(b'Q', b"COMMIT\0"));
        let tally = read(Protocol::Postgres, &wire);
        assert_eq!(tally.statements, ["SELECT 1", "COMMIT"]);
        assert_eq!((tally.prepares, tally.pings), (1, 1));
    }

    fn op_msg(command: mongodb::bson::Document) -> Vec<u8> {
        let mut body = Vec::new();
        command.to_writer(&mut body).unwrap();
        let len = 16 + 4 + 1 + body.len();
        let mut message = Vec::new();
        message.extend_from_slice(&(len as i32).to_le_bytes());
        message.extend_from_slice(&[0; 8]);
        message.extend_from_slice(&OP_MSG.to_le_bytes());
        message.extend_from_slice(&[0; 4]);
        message.push(0);
        message.extend(body);
        message
    }

    #[test]
    fn mongo_commands_are_told_from_the_drivers_own_round_trips() {
        use mongodb::bson::doc;
        let mut wire = op_msg(doc! {"hello": 1, "$db": "admin"});
        wire.extend(op_msg(
            doc! {"find": "job", "filter": {}, "startTransaction": true, "autocommit": false},
        ));
        wire.extend(op_msg(doc! {"update": "job", "autocommit": false}));
        wire.extend(op_msg(doc! {"commitTransaction": 1, "$db": "admin"}));
        let tally = read(Protocol::Mongo, &wire);
        assert_eq!(
            tally.statements,
            ["find job +txn", "update job", "commitTransaction"]
        );
        assert_eq!((tally.prepares, tally.pings), (0, 1));
    }

    #[test]
    fn mysql_commands_are_read_after_the_handshake() {
        let mut wire = mysql(1, b"handshake response, not a command");
        wire.extend(mysql(0, b"\x03SELECT 1"));
        wire.extend(mysql(0, b"\x16SELECT ?"));
        wire.extend(mysql(0, b"\x0e"));
        wire.extend(mysql(0, b"\x17\x07\x00\x00\x00\x00\x01\x00\x00\x00"));
        let tally = read(Protocol::MySql, &wire);
        // The execute's text comes from the server's answer to the prepare, not seen here.
        assert_eq!(tally.statements, ["SELECT 1", ""]);
        assert_eq!((tally.prepares, tally.pings), (1, 1));
    }
}
