//! The write concern of the Worker's state writes: journaled (`j: true`) unless the connection
//! string asks for one of its own.
//!
//! Why: a server acknowledges a `w: 1, j: false` write before it is on disk, so a server that
//! dies (SIGKILL, power loss) after the acknowledgement may come back without it. The Worker
//! acts on an acknowledged write at once — a terminal write, then its event published and its
//! outbox row marked published; a claim, then the message acknowledged — so a write lost after
//! its acknowledgement rolls a job back behind what was already published. MongoDB's default for
//! a replica set (`w: majority`, journaled by `writeConcernMajorityJournalDefault`) already
//! waits for the journal; asking for it keeps the Worker's guarantee when an operator's server
//! defaults to `w: 1`. (secantusdb, the test server, honours `j` on single writes but not on
//! `commitTransaction`: the chaos soak runs it with `--sync-on-commit`, docs/TEST-SERVERS.md
//! "Restart and durability".)

use mongodb::options::{ClientOptions, WriteConcern};

/// Sets a journaled write concern on `options` when the connection string set none (an
/// operator's `w`, `journal` or `wtimeoutMS` in `MONGO_PARAMETERS` is kept as given).
pub fn journaled_writes(options: &mut ClientOptions) {
    if options.write_concern.is_none() {
        options.write_concern = Some(WriteConcern::builder().journal(true).build());
    }
}
