//! Go-compatible JSON: the exact bytes of Go's `encoding/json` `Marshal` (compact, event bodies)
//! and `MarshalIndent(v, "", "  ")` (indented, the result JSON), streamed into any `io::Write`.
//!
//! - [`JsonWriter`] writes a document piece by piece (rows are streamed, never collected); keys
//!   come out in the order given, so the caller sorts them once; keys written on every row are
//!   escaped once ([`EncodedKey`]).
//! - [`JsonWriter::value`] and the `to_vec_*` / `write_*` helpers write a `serde_json::Value`,
//!   sorting object keys by byte order as Go sorts map keys.
//!
//! What makes it Go's bytes rather than serde_json's: `<` `>` `&` and U+2028/U+2029 are escaped,
//! control characters use `\u00XX` with lowercase hex unless they have a short escape, invalid
//! UTF-8 becomes `\ufffd` one byte at a time, and floats use Go's layout (`1e+21`, `1e-7`,
//! `123456789` for an integral float, `-0`; a `float32` with its own shortest digits).
//! [`GoTime`] is the text of a `time.Time`.

mod encoded_key;
mod error;
mod escape;
mod float;
mod integer;
mod style;
mod time;
mod value;
mod writer;

pub use encoded_key::EncodedKey;
pub use error::{JsonError, Result};
pub use style::Style;
pub use time::GoTime;
pub use value::{to_vec, to_vec_compact, to_vec_indented, write_compact, write_indented};
pub use writer::JsonWriter;
