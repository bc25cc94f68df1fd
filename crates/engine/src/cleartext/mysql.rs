//! The MySQL probe: the server's initial handshake (the server speaks first), read for its TLS
//! capability and the authentication plugin it names; nothing is sent.

use std::io;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::Offer;

/// `CLIENT_SSL`.
const SSL: u32 = 0x800;
/// `CLIENT_SECURE_CONNECTION`: the handshake carries the second part of the scramble.
const SECURE_CONNECTION: u32 = 0x8000;
/// `CLIENT_PLUGIN_AUTH`: the handshake names its authentication plugin.
const PLUGIN_AUTH: u32 = 0x8_0000;
/// Handshakes are a few dozen bytes; anything this large is not one.
const MAX_HANDSHAKE: usize = 16 * 1024;

pub(super) async fn probe(host: &str, port: u16) -> io::Result<Offer> {
    let mut socket = TcpStream::connect((host, port)).await?;
    let mut header = [0u8; 4];
    socket.read_exact(&mut header).await?;
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    if len > MAX_HANDSHAKE {
        return Ok(Offer::PlainOther);
    }
    let mut payload = vec![0u8; len];
    socket.read_exact(&mut payload).await?;
    Ok(offer_of(&payload))
}

/// Reads a protocol-10 handshake as sqlx-mysql does (`protocol/connect/handshake.rs`). An
/// error packet or anything unreadable is [`Offer::PlainOther`]: the driver reports it.
fn offer_of(payload: &[u8]) -> Offer {
    let Some(handshake) = Handshake::parse(payload) else {
        return Offer::PlainOther;
    };
    if handshake.capabilities & SSL != 0 {
        Offer::Tls
    } else if handshake.plugin.as_deref() == Some(b"mysql_clear_password".as_slice()) {
        Offer::PlainCleartext
    } else {
        Offer::PlainOther
    }
}

struct Handshake {
    capabilities: u32,
    plugin: Option<Vec<u8>>,
}

impl Handshake {
    fn parse(payload: &[u8]) -> Option<Handshake> {
        let mut r = Reader(payload);
        if r.take(1)?[0] != 10 {
            return None;
        }
        r.nul_terminated()?; // server version
        r.take(4 + 8 + 1)?; // connection id, scramble part 1, filler
        let low = r.u16()?;
        let mut capabilities = u32::from(low);
        // A pre-4.1 handshake ends here.
        if r.0.is_empty() {
            return Some(Handshake {
                capabilities,
                plugin: None,
            });
        }
        r.take(1 + 2)?; // character set, status
        capabilities |= u32::from(r.u16()?) << 16;
        let scramble_len = usize::from(r.take(1)?[0]);
        r.take(10)?; // reserved (MariaDB's extended capabilities included)
        if capabilities & SECURE_CONNECTION != 0 {
            r.take(scramble_len.saturating_sub(8).max(13))?;
        }
        let plugin = if capabilities & PLUGIN_AUTH != 0 {
            Some(r.nul_terminated().unwrap_or(r.0).to_vec())
        } else {
            None
        };
        Some(Handshake {
            capabilities,
            plugin,
        })
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }

    fn u16(&mut self) -> Option<u16> {
        let bytes = self.take(2)?;
        Some(u16::from_le_bytes([bytes[0], bytes[1]]))
    }

    fn nul_terminated(&mut self) -> Option<&'a [u8]> {
        let end = self.0.iter().position(|b| *b == 0)?;
        let text = self.take(end)?;
        self.take(1)?;
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A MySQL 8.0.18 handshake as sqlx-mysql's own test has it (TLS offered).
    const MYSQL_8_0_18: &[u8] = b"\n8.0.18\x00\x19\x00\x00\x00\x114aB0c\x06g\x00\xff\xff\xff\x02\x00\xff\xc7\x15\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00tL\x03s\x0f[4\rl4. \x00caching_sha2_password\x00";

    /// The same handshake with other low capabilities and another plugin name.
    fn variant(low_capabilities: u16, plugin: &str) -> Vec<u8> {
        let name_at = MYSQL_8_0_18.len() - b"caching_sha2_password\0".len();
        let mut bytes = MYSQL_8_0_18[..name_at].to_vec();
        let caps_at = 1 + b"8.0.18\0".len() + 4 + 8 + 1;
        bytes[caps_at..caps_at + 2].copy_from_slice(&low_capabilities.to_le_bytes());
        bytes.extend_from_slice(plugin.as_bytes());
        bytes.push(0);
        bytes
    }

    #[test]
    fn a_server_offering_tls_is_tls_whatever_its_plugin() {
        assert_eq!(offer_of(MYSQL_8_0_18), Offer::Tls);
        assert_eq!(
            offer_of(&variant(0xffff, "mysql_clear_password")),
            Offer::Tls
        );
    }

    #[test]
    fn without_tls_only_the_cleartext_plugin_is_cleartext() {
        let no_tls = !(SSL as u16);
        assert_eq!(
            offer_of(&variant(no_tls, "mysql_clear_password")),
            Offer::PlainCleartext
        );
        assert_eq!(
            offer_of(&variant(no_tls, "mysql_native_password")),
            Offer::PlainOther
        );
        assert_eq!(
            offer_of(&variant(no_tls, "caching_sha2_password")),
            Offer::PlainOther
        );
    }

    #[test]
    fn error_packets_and_garbage_are_left_to_the_driver() {
        assert_eq!(offer_of(b"\xff\x69\x04Host is blocked"), Offer::PlainOther);
        assert_eq!(offer_of(b""), Offer::PlainOther);
        assert_eq!(offer_of(b"\n8.0"), Offer::PlainOther);
    }
}
