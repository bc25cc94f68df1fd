//! Job message decoding (`JobMessage::parse`) and job id recovery on arbitrary bytes: never a
//! panic, and whatever is accepted satisfies the contract's validation rules.

#![no_main]

use contract::message::recover_job_id;
use contract::JobMessage;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte splits the input into a `jobId` header and a body, so both are explored.
    let (header, body) = match data.split_first() {
        Some((&n, rest)) if n & 0x80 != 0 => {
            let cut = usize::from(n & 0x7f).min(rest.len());
            (Some(&rest[..cut]), &rest[cut..])
        }
        Some((_, rest)) => (None, rest),
        None => (None, data),
    };

    match JobMessage::parse(body) {
        Ok(job) => {
            assert!(!job.job_id.is_nil(), "a nil job id was accepted");
            assert!(!job.mapped_fields.is_empty(), "empty mappedFields accepted");
            for (connection, tables) in &job.mapped_fields {
                assert!(!connection.is_empty());
                assert!(!tables.is_empty());
                for (table, fields) in tables {
                    assert!(!table.is_empty());
                    assert!(!fields.is_empty() && fields.iter().all(|f| !f.is_empty()));
                }
            }
            // A parsed message's id is always recoverable from its body.
            assert!(matches!(recover_job_id(None, body), Ok(Some(_))));
        }
        Err(error) => {
            assert!(!error.code().is_empty());
            let _ = error.to_string();
        }
    }
    if let Ok(Some(id)) = recover_job_id(header, body) {
        assert!(!id.is_nil(), "recover_job_id returned the nil UUID");
    }
    let _ = contract::envelope::signed_job_id(body);
});
