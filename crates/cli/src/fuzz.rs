//! The dump/load line-format fuzz entry point, called by the cargo-fuzz target in `fuzz/` and
//! by the proptest replay in `tests/it/fuzz.rs`; not part of the command's interface.

use crate::escape::{decode_row, encode_row};

/// `data` as `load` reads it (lines split at LF, each decoded as `key<TAB>value`), then as
/// one key and one value `dump` writes. Every line that decodes must re-encode to a line that
/// decodes to the same row, and every byte string must survive encode then decode.
pub fn lines(data: &[u8]) {
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let (mut key2, mut value2) = (Vec::new(), Vec::new());
    for line in data.split(|&b| b == b'\n') {
        match decode_row(line, &mut key, &mut value) {
            Ok(()) => {
                let mut out = Vec::new();
                encode_row(&mut out, &key, &value);
                check_encoded(&out);
                let r = decode_row(&out[..out.len() - 1], &mut key2, &mut value2);
                assert!(r.is_ok(), "re-encoded line does not decode: {r:?}");
                assert!(
                    (&key2, &value2) == (&key, &value),
                    "line round trip changed the row"
                );
            }
            Err(e) => assert!(!e.0.is_empty(), "an error without a reason"),
        }
    }
    let split = data
        .first()
        .map_or(0, |&b| usize::from(b) % (data.len() + 1));
    let (k, v) = data.split_at(split);
    let mut out = Vec::new();
    encode_row(&mut out, k, v);
    check_encoded(&out);
    let r = decode_row(&out[..out.len() - 1], &mut key, &mut value);
    assert!(r.is_ok(), "encoded row does not decode: {r:?}");
    assert!(
        (&key[..], &value[..]) == (k, v),
        "encode then decode changed the row"
    );
}

/// An encoded row is one line with one TAB.
fn check_encoded(out: &[u8]) {
    assert!(
        out.iter().filter(|&&b| b == b'\t').count() == 1,
        "not one TAB"
    );
    assert!(
        out.iter().position(|&b| b == b'\n') == Some(out.len() - 1),
        "not one line"
    );
}
