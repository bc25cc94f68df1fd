use super::*;

/// A binary copy of `rows`, each field `None` for a NULL, with `extension` header extension
/// bytes.
fn copy_of(rows: &[Vec<Option<&[u8]>>], extension: &[u8]) -> Vec<u8> {
    let mut out = SIGNATURE.to_vec();
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&u32::try_from(extension.len()).unwrap().to_be_bytes());
    out.extend_from_slice(extension);
    for row in rows {
        out.extend_from_slice(&i16::try_from(row.len()).unwrap().to_be_bytes());
        for field in row {
            match field {
                Some(bytes) => {
                    out.extend_from_slice(&i32::try_from(bytes.len()).unwrap().to_be_bytes());
                    out.extend_from_slice(bytes);
                }
                None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
    }
    out.extend_from_slice(&(-1i16).to_be_bytes());
    out
}

fn rows() -> Vec<Vec<Option<&'static [u8]>>> {
    vec![
        vec![Some(b"\0\0\0\0\0\0\0\x2a"), None, Some(b"text")],
        vec![None, Some(b""), Some(b"\xff")],
        vec![Some(b"x"), Some(b"yy"), None],
    ]
}

/// Reads `chunks` in turn; every tuple as owned fields.
fn read(columns: usize, chunks: &[&[u8]]) -> Result<Vec<Vec<Option<Vec<u8>>>>, FramingError> {
    let mut tuples = Tuples::new(columns);
    let mut read = Vec::new();
    for chunk in chunks {
        let mut chunk = tuples.chunk(*chunk);
        while let Some(tuple) = chunk.next_tuple()? {
            read.push(
                (0..columns)
                    .map(|i| tuple.field(i).map(<[u8]>::to_vec))
                    .collect(),
            );
        }
    }
    tuples.finish()?;
    Ok(read)
}

fn owned(rows: &[Vec<Option<&[u8]>>]) -> Vec<Vec<Option<Vec<u8>>>> {
    rows.iter()
        .map(|row| row.iter().map(|f| f.map(<[u8]>::to_vec)).collect())
        .collect()
}

#[test]
fn tuples_are_read_from_one_chunk_and_from_any_split() {
    let copy = copy_of(&rows(), b"");
    assert_eq!(read(3, &[&copy]).unwrap(), owned(&rows()));
    for cut in 0..=copy.len() {
        let (a, b) = copy.split_at(cut);
        assert_eq!(read(3, &[a, b]).unwrap(), owned(&rows()), "cut at {cut}");
    }
    let bytes: Vec<&[u8]> = copy.chunks(1).collect();
    assert_eq!(read(3, &bytes).unwrap(), owned(&rows()));
}

#[test]
fn a_header_extension_is_skipped_and_an_empty_copy_has_no_tuples() {
    let copy = copy_of(&rows(), b"ext!");
    assert_eq!(read(3, &[&copy]).unwrap(), owned(&rows()));
    let bytes: Vec<&[u8]> = copy.chunks(1).collect();
    assert_eq!(read(3, &bytes).unwrap(), owned(&rows()));
    assert!(read(3, &[&copy_of(&[], b"")]).unwrap().is_empty());
}

#[test]
fn what_is_not_the_copy_expected_is_refused() {
    let copy = copy_of(&rows(), b"");
    assert_eq!(
        read(2, &[&copy]),
        Err(FramingError::FieldCount {
            expected: 2,
            found: 3
        })
    );
    let mut bad = copy.clone();
    bad[0] = b'X';
    assert_eq!(read(3, &[&bad]), Err(FramingError::Signature));
    assert_eq!(read(3, &[&bad[..3]]), Err(FramingError::Signature));
    let mut oids = copy.clone();
    oids[12] = 1;
    assert_eq!(read(3, &[&oids]), Err(FramingError::Flags(1 << 16)));
    let mut negative = copy_of(&[vec![Some(b"ab")]], b"");
    negative[21..25].copy_from_slice(&(-2i32).to_be_bytes());
    assert_eq!(read(1, &[&negative]), Err(FramingError::FieldLength(-2)));
    let mut after = copy.clone();
    after.push(0);
    assert_eq!(read(3, &[&after]), Err(FramingError::AfterTrailer));
    assert_eq!(read(3, &[&copy, b"\0"]), Err(FramingError::AfterTrailer));
    for cut in 0..copy.len() {
        assert_eq!(
            read(3, &[&copy[..cut]]),
            Err(FramingError::Truncated),
            "cut at {cut}"
        );
    }
}
