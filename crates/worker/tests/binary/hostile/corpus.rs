//! The flood's messages: a seeded generator of forged, malformed, huge, deeply nested and
//! injection-laden job messages, each with what the Worker must do with it.

use contract::envelope::{self, Route};
use lapin::types::AMQPValue;
use serde_json::json;
use uuid::Uuid;

use crate::harness::World;
use crate::harness::{signed, work_route, Headers, RUN_HEADER};

/// One mebibyte: the size of the flood's huge bodies.
pub const ONE_MIB: usize = 1 << 20;

/// SplitMix64: a small deterministic generator, so every run sends the same messages.
pub struct Rng(pub u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    fn uuid(&mut self) -> Uuid {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.next().to_le_bytes());
        bytes[8..].copy_from_slice(&self.next().to_le_bytes());
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    }

    /// Bytes with no `"`, so no accidental `"jobId":"<uuid>"` can appear in them.
    fn garbage(&mut self, len: usize, printable: bool) -> Vec<u8> {
        (0..len)
            .map(|_| {
                let b = if printable {
                    0x20 + self.below(0x5f) as u8
                } else {
                    self.next() as u8
                };
                if b == b'"' {
                    b'x'
                } else {
                    b
                }
            })
            .collect()
    }
}

/// What the Worker must do with a message.
pub enum Expect {
    /// Refused signature: dead-lettered; the job id in its body must never get a row.
    DeadLetter(Uuid),
    /// Signed, unusable, no job id: acknowledged and dropped.
    Dropped,
    /// Signed, unusable or invalid, job id recoverable: the job is recorded `failed`.
    Fails(Uuid),
    /// Signed and valid, with hostile names: the job ends in some terminal state.
    Runs(Uuid),
    /// Signed and valid, hostile filter values only: the values are bound, the job completes.
    Completes(Uuid),
}

pub struct Message {
    pub body: Vec<u8>,
    pub headers: Headers,
    pub expect: Expect,
}

/// Names and values an injection would use.
const HOSTILE: &[&str] = &[
    "\"",
    "'",
    "payments\"; DROP TABLE payments; --",
    "payments'; DELETE FROM payments; --",
    "' OR '1'='1",
    "\" OR \"1\"=\"1",
    "id) UNION SELECT usename FROM pg_user --",
    "/* comment */ payments",
    "payments -- trailing comment",
    "`payments`",
    "payments\\",
    "$1",
    "%s%n",
    "payments\n",
    "public.payments\"; --",
    "../../etc/passwd",
    "pg_catalog.pg_authid",
    "information_schema.tables",
    "ｐａｙｍｅｎｔｓ",
    "payments; SELECT pg_sleep(30)",
    "'; SELECT pg_sleep(30); --",
];

fn job(id: Uuid, connection: &str, table: &str, fields: &[&str]) -> serde_json::Value {
    json!({
        "jobId": id,
        "mappedFields": {connection: {table: fields}},
        "metadata": {"source": "hostile"},
    })
}

fn nested(levels: usize, object: bool) -> Vec<u8> {
    let (open, close) = if object {
        (&b"{\"a\":"[..], &b"}"[..])
    } else {
        (&b"["[..], &b"]"[..])
    };
    let mut body = Vec::with_capacity(levels * (open.len() + 1));
    for _ in 0..levels {
        body.extend_from_slice(open);
    }
    body.extend_from_slice(b"1");
    for _ in 0..levels {
        body.extend_from_slice(close);
    }
    body
}

pub fn message(world: &World, rng: &mut Rng, i: usize, now: i64) -> Message {
    let route = work_route(world, "");
    let sign = |body: &[u8]| signed(world, now, &route, body, None);

    // A few special shapes at fixed positions.
    if i % 20_000 == 7 {
        let body = rng.garbage(ONE_MIB, true);
        let headers = sign(&body);
        return Message {
            body,
            headers,
            expect: Expect::Dropped,
        };
    }
    if i % 25_000 == 11 {
        let id = rng.uuid();
        let mut body = job(id, "src", "payments", &["id"]).to_string().into_bytes();
        body.truncate(body.len() - 1);
        body.extend_from_slice(b",\"pad\":\"");
        body.extend(rng.garbage(ONE_MIB, true));
        body.extend_from_slice(b"\"}");
        let headers = sign(&body).text(envelope::SIGNATURE_HEADER, &"0".repeat(64));
        let headers = Headers(dedup(headers.0));
        return Message {
            body,
            headers,
            expect: Expect::DeadLetter(id),
        };
    }
    if i % 500 == 3 {
        let body = nested(10_000, i % 1000 == 3);
        let headers = sign(&body);
        return Message {
            body,
            headers,
            expect: Expect::Dropped,
        };
    }
    if i % 2_000 == 5 {
        let id = rng.uuid();
        let mut body = format!("{{\"jobId\":\"{id}\",\"mappedFields\":").into_bytes();
        body.extend(nested(10_000, false));
        body.push(b'}');
        let headers = sign(&body);
        return Message {
            body,
            headers,
            expect: Expect::Fails(id),
        };
    }

    match rng.below(1000) {
        0..450 => bad_signature(world, rng, now),
        450..950 => {
            let body = unusable_without_id(rng);
            let headers = sign(&body);
            Message {
                body,
                headers,
                expect: Expect::Dropped,
            }
        }
        950..985 => {
            let id = rng.uuid();
            let (body, header_id) = unusable_with_id(rng, id);
            let mut headers = sign(&body);
            if header_id {
                headers = headers.text("jobId", &id.to_string());
            }
            Message {
                body,
                headers,
                expect: Expect::Fails(id),
            }
        }
        _ => hostile_names(world, rng, now),
    }
}

/// Keeps the last value of each header name.
fn dedup(headers: Vec<(String, AMQPValue)>) -> Vec<(String, AMQPValue)> {
    let mut out: Vec<(String, AMQPValue)> = Vec::new();
    for (name, value) in headers {
        out.retain(|(n, _)| *n != name);
        out.push((name, value));
    }
    out
}

fn bad_signature(world: &World, rng: &mut Rng, now: i64) -> Message {
    let id = rng.uuid();
    let body = job(id, "src", "payments", &["id", "memo"])
        .to_string()
        .into_bytes();
    let route = work_route(world, "");
    let good = signed(world, now, &route, &body, None);
    let replace = |headers: Headers, name: &str, value: AMQPValue| {
        Headers(dedup(headers.value(name, value).0))
    };
    let text = |s: &str| AMQPValue::LongString(s.into());
    let headers = match rng.below(16) {
        0 => {
            let hex: String = (0..64)
                .map(|_| char::from(b"0123456789abcdef"[rng.below(16) as usize]))
                .collect();
            replace(good, envelope::SIGNATURE_HEADER, text(&hex))
        }
        1 => good.without(envelope::SIGNATURE_HEADER),
        2 => good.without(envelope::TIMESTAMP_HEADER),
        3 => good.without(envelope::VERSION_HEADER),
        4 => replace(good, envelope::VERSION_HEADER, text("v2")),
        5 => {
            let t = now - 301 - rng.below(1_000_000) as i64;
            signed(world, t, &route, &body, None)
        }
        6 => {
            let t = now + 120 + rng.below(1_000_000) as i64;
            signed(world, t, &route, &body, None)
        }
        7 => {
            let upper = signature_of(&good).to_uppercase();
            replace(good, envelope::SIGNATURE_HEADER, text(&upper))
        }
        8 => {
            // A genuine signature, replayed onto another body.
            let other = job(rng.uuid(), "src", "payments", &["id"]).to_string();
            let replayed = signed(world, now, &route, other.as_bytes(), None);
            replace(
                good,
                envelope::SIGNATURE_HEADER,
                text(&signature_of(&replayed)),
            )
        }
        9 => {
            let t = *rng.pick(&[
                "abc",
                "+1",
                " 1",
                "1.5",
                "",
                "1e9",
                "99999999999999999999999",
            ]);
            replace(good, envelope::TIMESTAMP_HEADER, text(t))
        }
        10 => replace(
            good,
            envelope::SIGNATURE_HEADER,
            AMQPValue::LongLongInt(rng.next() as i64),
        ),
        11 => {
            // Signed for one tenant, delivered as another.
            let acme = work_route(world, "acme");
            signed(world, now, &acme, &body, Some("acme")).text("X-Tenant-ID", "evil")
        }
        12 => {
            // Signed for another queue, delivered to this one.
            let other = Route {
                tenant: "",
                exchange: "",
                routing_key: "fetcher.other.queue",
            };
            signed(world, now, &other, &body, None)
        }
        13 => Headers(dedup(good.bytes(envelope::SIGNATURE_HEADER, &[0xff; 64]).0)),
        14 => {
            let payload = envelope::signing_payload(&now.to_string(), &route, &body);
            let external = world.keys.external_hmac().sign_hex(&payload);
            replace(good, envelope::SIGNATURE_HEADER, text(&external))
        }
        _ => {
            // The legacy form, refused while the fallback is off.
            let payload = envelope::legacy_payload(&now.to_string(), &body);
            let legacy = world.keys.internal_hmac().sign_hex(&payload);
            replace(good, envelope::SIGNATURE_HEADER, text(&legacy))
        }
    };
    Message {
        body,
        headers: headers_with_marker(world, headers),
        expect: Expect::DeadLetter(id),
    }
}

pub fn headers_with_marker(world: &World, headers: Headers) -> Headers {
    Headers(dedup(headers.text(RUN_HEADER, &world.id).0))
}

fn signature_of(headers: &Headers) -> String {
    headers
        .0
        .iter()
        .find_map(|(n, v)| match v {
            AMQPValue::LongString(s) if n == envelope::SIGNATURE_HEADER => {
                Some(String::from_utf8_lossy(s.as_bytes()).into_owned())
            }
            _ => None,
        })
        .unwrap_or_default()
}

fn unusable_without_id(rng: &mut Rng) -> Vec<u8> {
    let mapped = r#"{"src":{"payments":["id"]}}"#;
    match rng.below(13) {
        0 => {
            let len = 1 + rng.below(200) as usize;
            rng.garbage(len, true)
        }
        1 => {
            let len = 1 + rng.below(200) as usize;
            let mut bytes = rng.garbage(len, false);
            bytes.insert(0, 0xff);
            bytes
        }
        2 => br#"{"mappedFields": {"src": {"payments": ["id""#.to_vec(),
        3 => rng
            .pick(&["[1,2,3]", "\"jobId\"", "42", "null", "true", "[]", "{}"])
            .as_bytes()
            .to_vec(),
        4 => format!(r#"{{"jobId":{},"mappedFields":{mapped}}}"#, rng.next()).into_bytes(),
        5 => format!(r#"{{"jobId":"not-a-uuid","mappedFields":{mapped}}}"#).into_bytes(),
        6 => format!(r#"{{"mappedFields":{mapped}}}"#).into_bytes(),
        7 => {
            format!(r#"{{"jobId":"00000000-0000-0000-0000-000000000000","mappedFields":{mapped}}}"#)
                .into_bytes()
        }
        8 => Vec::new(),
        9 => br#"{"jobId":null}"#.to_vec(),
        10 => b"{\"metadata\":{\"x\":\"\xff\xfe\xc0\x80\"}}".to_vec(),
        11 => format!(r#"{{"jobId":{{"$ne":null}},"mappedFields":{mapped}}}"#).into_bytes(),
        _ => b"\xef\xbb\xbf{\"a\":1} trailing".to_vec(),
    }
}

/// An unusable body whose job id can be recovered; whether the id rides in the `jobId` header.
fn unusable_with_id(rng: &mut Rng, id: Uuid) -> (Vec<u8>, bool) {
    let mapped = r#"{"src":{"payments":["id"]}}"#;
    let body = match rng.below(10) {
        0 => return (rng.garbage(50, true), true),
        1 => format!(r#"{{"jobId":"{id}","mappedFields":5}}"#),
        2 => format!(r#"{{"jobId":"{id}"}}"#),
        3 => format!(
            r#"{{"jobId":"{id}","mappedFields":{mapped},"filters":{{"src":{{"payments":{{"id":{{"$where":["1"]}}}}}}}}}}"#
        ),
        4 => format!(r#"{{"jobId":"{id}","mappedFields":{{"src":{{}}}}}}"#),
        5 => {
            let mut body = format!(r#"{{"jobId":"{id}","metadata":{{"x":""#).into_bytes();
            body.extend_from_slice(b"\xff\xfe\"}}");
            return (body, false);
        }
        6 => format!(r#"{{"jobId":"{id}","mappedFields":{{"#),
        7 => format!(
            r#"{{"jobId":"{id}","mappedFields":{mapped},"filters":{{"src":{{"payments":{{"memo":{{"like":[5]}}}}}}}}}}"#
        ),
        8 => format!(r#"{{"jobId":"{id}","mappedFields":{{"src":{{"payments":[""]}}}}}}"#),
        _ => format!(
            r#"{{"jobId":"{id}","mappedFields":{mapped},"filters":{{"src":{{"payments":{{"id":{{"between":[1,2,3]}}}}}}}}}}"#
        ),
    };
    (body.into_bytes(), false)
}

fn hostile_names(world: &World, rng: &mut Rng, now: i64) -> Message {
    let id = rng.uuid();
    let evil = *rng.pick(HOSTILE);
    let mut tenant = None;
    let (body, expect) = match rng.below(8) {
        0 => (job(id, evil, "payments", &["id"]), Expect::Runs(id)),
        1 => (job(id, "src", evil, &["id"]), Expect::Runs(id)),
        2 => (job(id, "src", "payments", &["id", evil]), Expect::Runs(id)),
        3 => {
            let op = *rng.pick(&["eq", "ne", "like", "in", "nin"]);
            let mut body = job(id, "src", "payments", &["id", "memo"]);
            body["filters"] = json!({"src": {"payments": {"memo": {op: [evil]}}}});
            (body, Expect::Completes(id))
        }
        4 => {
            let mut body = job(id, "src", "payments", &["id"]);
            body["filters"] = json!({"src": {"payments": {evil: {"eq": [1]}}}});
            (body, Expect::Runs(id))
        }
        5 => {
            let mut body = job(id, "src", "payments", &["id"]);
            body["filters"] = json!({"src": {"payments": {"id": {"gt": [evil]}}}});
            (body, Expect::Runs(id))
        }
        6 => {
            // A NUL no identifier can hold and PostgreSQL cannot store: refused, the job fails.
            let nul = *rng.pick(&["me\u{0}mo", "\u{0}", "payments\u{0}; DROP TABLE payments"]);
            let body = match rng.below(3) {
                0 => job(id, nul, "payments", &["id"]),
                1 => job(id, "src", nul, &["id"]),
                _ => job(id, "src", "payments", &["id", nul]),
            };
            (body, Expect::Fails(id))
        }
        _ => {
            let evil_tenant = *rng.pick(&[
                "../other-tenant",
                "a/b",
                "..",
                "'; DROP TABLE jobs; --",
                "tenant\nnewline",
                "\"quoted\"",
            ]);
            tenant = Some(evil_tenant);
            (job(id, "src", "payments", &["id"]), Expect::Runs(id))
        }
    };
    let body = body.to_string().into_bytes();
    let route = work_route(world, tenant.unwrap_or(""));
    let headers = signed(world, now, &route, &body, tenant);
    Message {
        body,
        headers,
        expect,
    }
}
