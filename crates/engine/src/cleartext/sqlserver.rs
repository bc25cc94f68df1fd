//! The SQL Server probe: a TDS `PRELOGIN` that offers login-only encryption, read for the
//! server's answer; no `LOGIN7` (and so no password) is sent.
//!
//! tiberius (built with rustls, and never configured `EncryptionLevel::NotSupported`) always
//! encrypts the login: against a server answering `ENCRYPT_NOT_SUP` it attempts TLS anyway and
//! fails, so no answer is cleartext. The probe's use is the other way round: a server that can
//! encrypt gets the whole session encrypted (`require`), not only the login.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Offer;

/// Packet type of `PRELOGIN`, and of the server's reply (a tabular result).
const PRELOGIN: u8 = 0x12;
const REPLY: u8 = 0x04;
/// Option tokens.
const VERSION: u8 = 0x00;
const ENCRYPTION: u8 = 0x01;
const TERMINATOR: u8 = 0xff;
/// `ENCRYPT_NOT_SUP`.
const NOT_SUPPORTED: u8 = 0x02;
/// Replies are a few dozen bytes; anything this large is not one.
const MAX_REPLY: usize = 4096;

/// The `PRELOGIN` packet: `VERSION` (zero) and `ENCRYPTION` = `ENCRYPT_OFF`, in one packet.
fn prelogin() -> Vec<u8> {
    // Two options of 5 bytes and the terminator, then 6 bytes of version and 1 of encryption.
    let payload: [u8; 18] = [
        VERSION, 0, 11, 0, 6, ENCRYPTION, 0, 17, 0, 1, TERMINATOR, 0, 0, 0, 0, 0, 0, 0x00,
    ];
    let len = (8 + payload.len()) as u16;
    let mut packet = vec![PRELOGIN, 0x01];
    packet.extend_from_slice(&len.to_be_bytes());
    packet.extend_from_slice(&[0, 0, 1, 0]);
    packet.extend_from_slice(&payload);
    packet
}

pub(super) async fn probe(host: &str, port: u16) -> io::Result<Offer> {
    let mut socket = TcpStream::connect((host, port)).await?;
    socket.write_all(&prelogin()).await?;
    let mut header = [0u8; 8];
    socket.read_exact(&mut header).await?;
    let len = usize::from(u16::from_be_bytes([header[2], header[3]]));
    if header[0] != REPLY || !(8..=MAX_REPLY).contains(&len) {
        return Ok(Offer::PlainOther);
    }
    let mut payload = vec![0u8; len - 8];
    socket.read_exact(&mut payload).await?;
    Ok(offer_of(&payload))
}

/// The server's `ENCRYPTION` answer: any value but `ENCRYPT_NOT_SUP` means it has TLS. Without
/// TLS, or without the option, it is [`Offer::PlainOther`]: the driver fails on its own.
fn offer_of(payload: &[u8]) -> Offer {
    let mut at = 0;
    while let Some(&token) = payload.get(at) {
        if token == TERMINATOR {
            break;
        }
        let Some(option) = payload.get(at..at + 5) else {
            break;
        };
        let offset = usize::from(u16::from_be_bytes([option[1], option[2]]));
        let len = u16::from_be_bytes([option[3], option[4]]);
        if token == ENCRYPTION && len >= 1 {
            return match payload.get(offset) {
                Some(&NOT_SUPPORTED) => Offer::PlainOther,
                Some(_) => Offer::Tls,
                None => Offer::PlainOther,
            };
        }
        at += 5;
    }
    Offer::PlainOther
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply as pysqlbridge and SQL Server write it: VERSION, ENCRYPTION, terminator, data.
    fn reply(encryption: u8) -> Vec<u8> {
        vec![
            VERSION, 0, 11, 0, 6, ENCRYPTION, 0, 17, 0, 1, TERMINATOR, 0x11, 0, 0x03, 0xe8, 0, 0,
            encryption,
        ]
    }

    #[test]
    fn every_answer_but_encrypt_not_sup_is_tls() {
        assert_eq!(offer_of(&reply(0x00)), Offer::Tls);
        assert_eq!(offer_of(&reply(0x01)), Offer::Tls);
        assert_eq!(offer_of(&reply(0x03)), Offer::Tls);
        assert_eq!(offer_of(&reply(NOT_SUPPORTED)), Offer::PlainOther);
    }

    #[test]
    fn replies_without_the_option_are_left_to_the_driver() {
        assert_eq!(offer_of(&[]), Offer::PlainOther);
        assert_eq!(offer_of(&[TERMINATOR]), Offer::PlainOther);
        assert_eq!(
            offer_of(&[ENCRYPTION, 0, 99, 0, 1, TERMINATOR]),
            Offer::PlainOther
        );
        assert_eq!(offer_of(&[ENCRYPTION, 0]), Offer::PlainOther);
    }

    #[test]
    fn the_prelogin_packet_offers_login_only_encryption() {
        let packet = prelogin();
        assert_eq!(packet.len(), 26);
        assert_eq!(&packet[..4], &[PRELOGIN, 0x01, 0, 26]);
        assert_eq!(
            offer_of(&packet[8..]),
            Offer::Tls,
            "ENCRYPT_OFF is not NOT_SUP"
        );
        assert_eq!(packet[25], 0x00);
    }
}
