//! A datasource password is never sent in the clear over an unencrypted connection unless
//! `sslmode=disable` was chosen explicitly. Fake servers (a TCP listener speaking just enough of
//! each wire protocol) play a server without TLS that asks for a cleartext password (SQL Server:
//! one answering `ENCRYPT_NOT_SUP`, which never gets the login), and record
//! every byte the client sends; the real PostgreSQL checks the TLS path.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use engine::connection::{from_env_vars, Resolver};
use engine::{Engine, EngineConfig, EngineError};
use serde_json::json;
use support::harness::job;
use support::TestDb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const PASSWORD: &str = "cleartext-sentinel-pw";

/// What a fake server was sent, over every connection it accepted.
#[derive(Default)]
struct Received {
    bytes: Vec<u8>,
    /// PostgreSQL `PasswordMessage`s, or MySQL handshake responses, received.
    password_messages: usize,
}

impl Received {
    fn saw_password(&self) -> bool {
        self.bytes
            .windows(PASSWORD.len())
            .any(|w| w == PASSWORD.as_bytes())
    }
}

type Shared = Arc<Mutex<Received>>;

/// An engine whose datasource `ds` is the fake at `port`, with `sslmode` (unset: the default).
fn engine(kind: &str, port: u16, sslmode: Option<&str>) -> Engine {
    let mut vars = vec![
        ("DATASOURCE_DS_TYPE", kind.to_owned()),
        ("DATASOURCE_DS_HOST", "127.0.0.1".to_owned()),
        ("DATASOURCE_DS_PORT", port.to_string()),
        ("DATASOURCE_DS_DATABASE", "ledger".to_owned()),
        ("DATASOURCE_DS_USER", "reader".to_owned()),
        ("DATASOURCE_DS_PASSWORD", PASSWORD.to_owned()),
    ];
    if let Some(mode) = sslmode {
        vars.push(("DATASOURCE_DS_SSLMODE", mode.to_owned()));
    }
    let env = from_env_vars(vars.into_iter().map(|(k, v)| (k.to_owned(), v))).unwrap();
    let config = EngineConfig {
        connect_timeout: Duration::from_secs(5),
        ..EngineConfig::default()
    };
    Engine::new(config, Resolver::new(env, None))
}

async fn extract(engine: &Engine) -> Result<(), EngineError> {
    let message = job(json!({"mappedFields": {"ds": {"t": ["v"]}}}));
    engine
        .extract(&message.mapped_fields, &message.filters)
        .await
        .map(drop)
}

/// Serves every connection on `listener` with `serve`, recording into the returned state.
fn spawn_fake<F, Fut>(listener: TcpListener, serve: F) -> Shared
where
    F: Fn(TcpStream, Shared) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = std::io::Result<()>> + Send + 'static,
{
    let shared = Shared::default();
    let state = shared.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(serve(socket, state.clone()));
        }
    });
    shared
}

fn record(state: &Shared, bytes: &[u8]) {
    state.lock().unwrap().bytes.extend_from_slice(bytes);
}

// ---- PostgreSQL ------------------------------------------------------------------------------

const SSL_REQUEST_CODE: u32 = 80_877_103;

/// The authentication request the fake PostgreSQL sends: 3 = cleartext, 5 = MD5.
#[derive(Clone, Copy)]
enum PgAuth {
    Cleartext,
    Md5,
}

/// Reads one length-prefixed startup-phase packet (length includes itself).
async fn read_startup_packet(socket: &mut TcpStream, state: &Shared) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    socket.read_exact(&mut len).await?;
    let len = u32::from_be_bytes(len) as usize;
    let mut body = vec![0u8; len.saturating_sub(4)];
    socket.read_exact(&mut body).await?;
    record(state, &len.to_be_bytes());
    record(state, &body);
    Ok(body)
}

/// A PostgreSQL server without TLS that answers `N` to `SSLRequest`, asks for `auth`, and
/// fails whatever password it gets.
async fn serve_postgres(mut socket: TcpStream, state: Shared, auth: PgAuth) -> std::io::Result<()> {
    let mut body = read_startup_packet(&mut socket, &state).await?;
    if body.len() == 4 && u32::from_be_bytes(body[..4].try_into().unwrap()) == SSL_REQUEST_CODE {
        socket.write_all(b"N").await?;
        body = read_startup_packet(&mut socket, &state).await?;
    }
    assert!(
        body.starts_with(&196_608u32.to_be_bytes()),
        "a StartupMessage"
    );
    let request: Vec<u8> = match auth {
        PgAuth::Cleartext => [b'R']
            .into_iter()
            .chain(8u32.to_be_bytes())
            .chain(3u32.to_be_bytes())
            .collect(),
        PgAuth::Md5 => [b'R']
            .into_iter()
            .chain(12u32.to_be_bytes())
            .chain(5u32.to_be_bytes())
            .chain(*b"salt")
            .collect(),
    };
    socket.write_all(&request).await?;
    // Whatever comes next (a PasswordMessage, or nothing: the client hung up) is recorded.
    let mut tag = [0u8; 1];
    if socket.read_exact(&mut tag).await.is_err() {
        return Ok(());
    }
    record(&state, &tag);
    let body = read_startup_packet(&mut socket, &state).await?;
    if tag[0] == b'p' {
        state.lock().unwrap().password_messages += 1;
    }
    drop(body);
    let fields = b"SFATAL\0VFATAL\0C28P01\0Mpassword authentication failed\0\0";
    let mut error = vec![b'E'];
    error.extend_from_slice(&((fields.len() + 4) as u32).to_be_bytes());
    error.extend_from_slice(fields);
    socket.write_all(&error).await?;
    Ok(())
}

async fn fake_postgres(auth: PgAuth) -> (u16, Shared) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let shared = spawn_fake(listener, move |socket, state| {
        serve_postgres(socket, state, auth)
    });
    (port, shared)
}

fn assert_cleartext_refused(error: &EngineError) {
    assert!(matches!(error, EngineError::Connect { .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.contains("cleartext password over an unencrypted connection"),
        "{text}"
    );
    assert!(text.contains("sslmode=disable"), "{text}");
    for secret in [PASSWORD, "127.0.0.1", "reader"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
}

#[tokio::test]
async fn postgres_cleartext_without_tls_is_refused_and_the_password_never_sent() {
    for sslmode in [None, Some("prefer"), Some("allow")] {
        let (port, received) = fake_postgres(PgAuth::Cleartext).await;
        let error = extract(&engine("POSTGRESQL", port, sslmode))
            .await
            .expect_err("the fake server fails every login");
        assert_cleartext_refused(&error);
        let received = received.lock().unwrap();
        assert_eq!(received.password_messages, 0, "{sslmode:?}");
        assert!(
            !received.saw_password(),
            "{sslmode:?}: the password was sent"
        );
    }
}

#[tokio::test]
async fn postgres_cleartext_is_sent_when_sslmode_disable_is_explicit() {
    let (port, received) = fake_postgres(PgAuth::Cleartext).await;
    let error = extract(&engine("POSTGRESQL", port, Some("disable")))
        .await
        .expect_err("the fake server fails every login");
    assert!(matches!(error, EngineError::Connect { .. }), "{error:?}");
    assert!(!error.to_string().contains("cleartext"), "{error}");
    assert!(!error.to_string().contains(PASSWORD), "{error}");
    let received = received.lock().unwrap();
    assert_eq!(received.password_messages, 1);
    assert!(received.saw_password());
}

#[tokio::test]
async fn postgres_md5_without_tls_proceeds_without_the_cleartext_password() {
    let (port, received) = fake_postgres(PgAuth::Md5).await;
    let error = extract(&engine("POSTGRESQL", port, None))
        .await
        .expect_err("the fake server fails every login");
    assert!(matches!(error, EngineError::Connect { .. }), "{error:?}");
    assert!(!error.to_string().contains("cleartext"), "{error}");
    let received = received.lock().unwrap();
    assert_eq!(
        received.password_messages, 1,
        "sqlx answered the MD5 request"
    );
    assert!(!received.saw_password());
}

#[tokio::test]
async fn postgres_with_tls_and_a_password_connects_encrypted() {
    let db = TestDb::create().await;
    sqlx::raw_sql(
        "CREATE VIEW t AS SELECT ssl::text AS v FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
    )
    .execute(&db.pool)
    .await
    .expect("view");
    // The local server trusts its clients: the password is configured, never asked for.
    let vars = [
        ("DATASOURCE_DS_TYPE", "POSTGRESQL".to_owned()),
        ("DATASOURCE_DS_HOST", db.options.get_host().to_owned()),
        ("DATASOURCE_DS_PORT", db.options.get_port().to_string()),
        ("DATASOURCE_DS_DATABASE", db.name.clone()),
        ("DATASOURCE_DS_USER", db.options.get_username().to_owned()),
        ("DATASOURCE_DS_PASSWORD", PASSWORD.to_owned()),
    ]
    .map(|(k, v)| (k.to_owned(), v));
    let env = from_env_vars(vars).unwrap();
    let engine = Engine::new(EngineConfig::default(), Resolver::new(env, None));
    for _ in 0..2 {
        let message = job(json!({"mappedFields": {"ds": {"t": ["v"]}}}));
        let extraction = engine
            .extract(&message.mapped_fields, &message.filters)
            .await
            .expect("extracts over TLS");
        let result: serde_json::Value = serde_json::from_slice(&extraction.plaintext).unwrap();
        assert_eq!(result, json!({"ds": {"t": [{"v": "true"}]}}));
    }
    db.drop().await;
}

// ---- MySQL -----------------------------------------------------------------------------------

/// A MySQL server (protocol 10) without TLS whose initial handshake names `plugin`. It fails
/// whatever handshake response it gets.
async fn serve_mysql(
    mut socket: TcpStream,
    state: Shared,
    plugin: &'static str,
) -> std::io::Result<()> {
    const LONG_PASSWORD: u32 = 0x1;
    const CONNECT_WITH_DB: u32 = 0x8;
    const PROTOCOL_41: u32 = 0x200;
    const TRANSACTIONS: u32 = 0x2000;
    const SECURE_CONNECTION: u32 = 0x8000;
    const PLUGIN_AUTH: u32 = 0x8_0000;
    let caps = LONG_PASSWORD
        | CONNECT_WITH_DB
        | PROTOCOL_41
        | TRANSACTIONS
        | SECURE_CONNECTION
        | PLUGIN_AUTH;
    let mut hello = vec![10u8];
    hello.extend_from_slice(b"5.7.99-fake\0");
    hello.extend_from_slice(&7u32.to_le_bytes());
    hello.extend_from_slice(b"abcdefgh\0");
    hello.extend_from_slice(&((caps & 0xffff) as u16).to_le_bytes());
    hello.push(45);
    hello.extend_from_slice(&2u16.to_le_bytes());
    hello.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
    hello.push(21);
    hello.extend_from_slice(&[0u8; 10]);
    hello.extend_from_slice(b"ijklmnopqrst\0");
    hello.extend_from_slice(plugin.as_bytes());
    hello.push(0);
    let mut packet = (hello.len() as u32).to_le_bytes()[..3].to_vec();
    packet.push(0);
    packet.extend_from_slice(&hello);
    socket.write_all(&packet).await?;

    let mut header = [0u8; 4];
    if socket.read_exact(&mut header).await.is_err() {
        return Ok(());
    }
    let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    let mut body = vec![0u8; len];
    socket.read_exact(&mut body).await?;
    record(&state, &header);
    record(&state, &body);
    state.lock().unwrap().password_messages += 1;
    let mut error = vec![0xff];
    error.extend_from_slice(&1045u16.to_le_bytes());
    error.extend_from_slice(b"#28000Access denied");
    let mut packet = (error.len() as u32).to_le_bytes()[..3].to_vec();
    packet.push(2);
    packet.extend_from_slice(&error);
    socket.write_all(&packet).await?;
    Ok(())
}

async fn fake_mysql(plugin: &'static str) -> (u16, Shared) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let shared = spawn_fake(listener, move |socket, state| {
        serve_mysql(socket, state, plugin)
    });
    (port, shared)
}

#[tokio::test]
async fn mysql_cleartext_plugin_without_tls_is_refused_and_the_password_never_sent() {
    let (port, received) = fake_mysql("mysql_clear_password").await;
    let error = extract(&engine("MYSQL", port, None))
        .await
        .expect_err("the fake server fails every login");
    assert_cleartext_refused(&error);
    let received = received.lock().unwrap();
    assert_eq!(received.password_messages, 0);
    assert!(!received.saw_password(), "the password was sent");
}

#[tokio::test]
async fn mysql_cleartext_plugin_is_used_when_sslmode_disable_is_explicit() {
    let (port, received) = fake_mysql("mysql_clear_password").await;
    let error = extract(&engine("MYSQL", port, Some("DISABLED")))
        .await
        .expect_err("the fake server fails every login");
    assert!(!error.to_string().contains("cleartext"), "{error}");
    let received = received.lock().unwrap();
    assert_eq!(received.password_messages, 1);
    assert!(received.saw_password());
}

#[tokio::test]
async fn mysql_native_password_without_tls_proceeds_scrambled() {
    let (port, received) = fake_mysql("mysql_native_password").await;
    let error = extract(&engine("MYSQL", port, None))
        .await
        .expect_err("the fake server fails every login");
    assert!(!error.to_string().contains("cleartext"), "{error}");
    let received = received.lock().unwrap();
    assert_eq!(received.password_messages, 1);
    assert!(!received.saw_password());
}

// ---- SQL Server ------------------------------------------------------------------------------

/// A SQL Server without TLS: the first `PRELOGIN` is answered `ENCRYPT_NOT_SUP`; a `LOGIN7`
/// (packet type 0x10, where the password travels) is counted; anything else (a TLS handshake
/// inside `PRELOGIN` packets) closes the connection, as a server without TLS would.
async fn serve_sqlserver(mut socket: TcpStream, state: Shared) -> std::io::Result<()> {
    let mut answered = false;
    loop {
        let mut header = [0u8; 8];
        socket.read_exact(&mut header).await?;
        let len = usize::from(u16::from_be_bytes([header[2], header[3]]));
        let mut body = vec![0u8; len.saturating_sub(8)];
        socket.read_exact(&mut body).await?;
        record(&state, &header);
        record(&state, &body);
        match header[0] {
            0x12 if !answered => {
                answered = true;
                // VERSION 17.0.1000, ENCRYPTION = ENCRYPT_NOT_SUP.
                let payload = [
                    0x00, 0, 11, 0, 6, 0x01, 0, 17, 0, 1, 0xff, 0x11, 0, 0x03, 0xe8, 0, 0, 0x02,
                ];
                let mut reply = vec![0x04, 0x01, 0, (8 + payload.len()) as u8, 0, 0, 1, 0];
                reply.extend_from_slice(&payload);
                socket.write_all(&reply).await?;
            }
            0x10 => {
                state.lock().unwrap().password_messages += 1;
                return Ok(());
            }
            _ => return Ok(()),
        }
    }
}

async fn fake_sqlserver() -> (u16, Shared) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    (port, spawn_fake(listener, serve_sqlserver))
}

#[tokio::test]
async fn sqlserver_without_encryption_never_gets_the_login_in_any_mode() {
    for sslmode in [None, Some("prefer"), Some("disable"), Some("require")] {
        let (port, received) = fake_sqlserver().await;
        let error = extract(&engine("SQL_SERVER", port, sslmode))
            .await
            .expect_err("the server has no TLS");
        assert!(matches!(error, EngineError::Connect { .. }), "{error:?}");
        let received = received.lock().unwrap();
        assert_eq!(
            received.password_messages, 0,
            "{sslmode:?}: a LOGIN7 was sent"
        );
        assert!(!received.saw_password());
    }
}
