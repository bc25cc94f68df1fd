//! The PostgreSQL probe: `SSLRequest`, then (without TLS) a `StartupMessage` and the server's
//! authentication request, never a password.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Offer;

/// `SSLRequest`: length 8, code 1234.5679.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
/// Protocol 3.0.
const PROTOCOL_3_0: u32 = 196_608;
/// `AuthenticationCleartextPassword`.
const AUTH_CLEARTEXT: u32 = 3;

pub(super) async fn probe(host: &str, port: u16, user: &str, database: &str) -> io::Result<Offer> {
    let mut socket = TcpStream::connect((host, port)).await?;
    socket.write_all(&SSL_REQUEST).await?;
    let mut answer = [0u8; 1];
    socket.read_exact(&mut answer).await?;
    match answer[0] {
        b'S' => return Ok(Offer::Tls),
        b'N' => {}
        // A server too old for SSLRequest answers with an error: the driver reports it.
        _ => return Ok(Offer::PlainOther),
    }
    socket.write_all(&startup_message(user, database)).await?;
    let mut header = [0u8; 9];
    if socket.read_exact(&mut header).await.is_err() {
        return Ok(Offer::PlainOther);
    }
    Ok(offer_of(&header))
}

/// The `StartupMessage` sqlx would send, without the run-time parameters (`pg_hba.conf` picks
/// the authentication method by user, database, address and TLS only).
fn startup_message(user: &str, database: &str) -> Vec<u8> {
    let mut body = PROTOCOL_3_0.to_be_bytes().to_vec();
    for (key, value) in [("user", user), ("database", database)] {
        body.extend_from_slice(key.as_bytes());
        body.push(0);
        body.extend_from_slice(value.as_bytes());
        body.push(0);
    }
    body.push(0);
    // Names come from configuration and are far below u32::MAX.
    let len = u32::try_from(body.len() + 4).unwrap_or(u32::MAX);
    let mut message = len.to_be_bytes().to_vec();
    message.extend_from_slice(&body);
    message
}

/// The offer a server's first answer to the `StartupMessage` makes: `R`, length, code.
fn offer_of(header: &[u8; 9]) -> Offer {
    let code = u32::from_be_bytes([header[5], header[6], header[7], header[8]]);
    if header[0] == b'R' && code == AUTH_CLEARTEXT {
        Offer::PlainCleartext
    } else {
        Offer::PlainOther
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_startup_message_names_user_and_database_only() {
        let message = startup_message("reader", "ledger");
        assert_eq!(&message[..4], &(message.len() as u32).to_be_bytes());
        assert_eq!(&message[4..8], &PROTOCOL_3_0.to_be_bytes());
        assert_eq!(&message[8..], b"user\0reader\0database\0ledger\0\0");
    }

    #[test]
    fn only_the_cleartext_request_is_cleartext() {
        let request = |code: u32| {
            let mut header = [b'R', 0, 0, 0, 8, 0, 0, 0, 0];
            header[5..].copy_from_slice(&code.to_be_bytes());
            header
        };
        assert_eq!(offer_of(&request(3)), Offer::PlainCleartext);
        for code in [0, 5, 10] {
            assert_eq!(offer_of(&request(code)), Offer::PlainOther, "{code}");
        }
        let mut error = request(3);
        error[0] = b'E';
        assert_eq!(offer_of(&error), Offer::PlainOther);
    }
}
