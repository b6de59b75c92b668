//! escape: the line format `load` reads and `dump` writes: `key<TAB>value<LF>`, one row a line.
//!
//! Inside a key or value a backslash starts an escape: `\t` (tab), `\n` (line feed), `\\`
//! (backslash) and `\xHH` (any byte, two hex digits, either case). Nothing else is an escape.
//! `encode` writes `\t`, `\n`, `\\` for those bytes and `\xHH` (lowercase) for control bytes,
//! DEL and bytes that are not part of valid UTF-8; every other byte is written as is. What must
//! stay true: `decode(encode(x)) == x` for every byte string, and `encode` output never holds a
//! raw TAB or LF, so one line is one row and the first raw TAB splits key from value.

use std::fmt;

/// Why a line could not be decoded; the caller adds the line number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError(pub String);

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_hex(out: &mut Vec<u8>, b: u8) {
    out.extend_from_slice(&[b'\\', b'x', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
}

/// Appends `field` to `out` in the escaped form.
pub fn encode_into(out: &mut Vec<u8>, field: &[u8]) {
    for chunk in field.utf8_chunks() {
        for &b in chunk.valid().as_bytes() {
            match b {
                b'\t' => out.extend_from_slice(b"\\t"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\\' => out.extend_from_slice(b"\\\\"),
                0..=0x1f | 0x7f => push_hex(out, b),
                _ => out.push(b),
            }
        }
        for &b in chunk.invalid() {
            push_hex(out, b);
        }
    }
}

/// Appends one whole line (`key<TAB>value<LF>`) to `out`.
pub fn encode_row(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    encode_into(out, key);
    out.push(b'\t');
    encode_into(out, value);
    out.push(b'\n');
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Shows a byte in an error message without printing control characters raw.
fn show(b: u8) -> String {
    match b {
        b'\t' => "<TAB>".to_string(),
        0x20..=0x7e => (b as char).to_string(),
        _ => format!("<0x{b:02x}>"),
    }
}

/// Decodes one escaped field into `out` (cleared first). `what` names it in errors.
/// A raw TAB inside the field is an error: only the first raw TAB of a line is a separator.
fn decode_field(out: &mut Vec<u8>, field: &[u8], what: &str) -> Result<(), LineError> {
    out.clear();
    let mut i = 0;
    while i < field.len() {
        let Some(off) = field[i..].iter().position(|&b| b == b'\\' || b == b'\t') else {
            out.extend_from_slice(&field[i..]);
            break;
        };
        out.extend_from_slice(&field[i..i + off]);
        let at = i + off;
        if field[at] == b'\t' {
            return Err(LineError(format!(
                "more than one TAB (the {what} holds a raw TAB at byte {}); write a TAB inside a \
                 key or value as \\t",
                at + 1
            )));
        }
        let bad = |seq: &[u8]| {
            let seq: String = seq.iter().map(|&b| show(b)).collect();
            LineError(format!(
                "bad escape `{seq}` in the {what} at byte {}; valid escapes are \\t \\n \\\\ \
                 \\xHH",
                at + 1
            ))
        };
        match field.get(at + 1) {
            Some(b't') => out.push(b'\t'),
            Some(b'n') => out.push(b'\n'),
            Some(b'\\') => out.push(b'\\'),
            Some(b'x') => {
                let hi = field.get(at + 2).copied().and_then(hex_digit);
                let lo = field.get(at + 3).copied().and_then(hex_digit);
                match (hi, lo) {
                    (Some(hi), Some(lo)) => out.push(hi << 4 | lo),
                    _ => return Err(bad(&field[at..field.len().min(at + 4)])),
                }
                i = at + 4;
                continue;
            }
            Some(_) => return Err(bad(&field[at..at + 2])),
            None => {
                return Err(LineError(format!(
                    "the {what} ends in a lone backslash; write a backslash as \\\\"
                )))
            }
        }
        i = at + 2;
    }
    Ok(())
}

/// Splits one line (without its LF) at the first raw TAB and decodes both sides.
pub fn decode_row(line: &[u8], key: &mut Vec<u8>, value: &mut Vec<u8>) -> Result<(), LineError> {
    let Some(tab) = line.iter().position(|&b| b == b'\t') else {
        return Err(LineError(
            "no TAB: each line must be key<TAB>value".to_string(),
        ));
    };
    decode_field(key, &line[..tab], "key")?;
    decode_field(value, &line[tab + 1..], "value")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_row(&mut out, key, value);
        out
    }

    fn dec(line: &[u8]) -> Result<(Vec<u8>, Vec<u8>), LineError> {
        let (mut k, mut v) = (Vec::new(), Vec::new());
        decode_row(line, &mut k, &mut v).map(|()| (k, v))
    }

    #[test]
    fn plain_text_is_written_as_is() {
        assert_eq!(
            enc(b"key", b"h\xc3\xa9llo w\xc3\xb6rld"),
            b"key\th\xc3\xa9llo w\xc3\xb6rld\n"
        );
    }

    #[test]
    fn specials_are_escaped() {
        assert_eq!(enc(b"a\tb", b"c\nd\\e"), b"a\\tb\tc\\nd\\\\e\n");
        assert_eq!(
            enc(b"\x00\r\x7f", b"\xff\xc3"),
            b"\\x00\\x0d\\x7f\t\\xff\\xc3\n"
        );
        assert_eq!(enc(b"", b""), b"\t\n");
    }

    #[test]
    fn every_byte_and_pairs_round_trip() {
        let all: Vec<u8> = (0..=255u8).collect();
        let mut pairs = Vec::new();
        for a in (0..=255u8).step_by(7) {
            for b in 0..=255u8 {
                pairs.extend_from_slice(&[a, b]);
            }
        }
        for field in [
            all.clone(),
            pairs,
            b"\\x41\\t".to_vec(),
            "ünï\u{1F600}".into(),
        ] {
            let line = enc(&field, &all);
            assert_eq!(line.iter().filter(|&&b| b == b'\t').count(), 1);
            assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
            let (k, v) = dec(&line[..line.len() - 1]).unwrap();
            assert_eq!((k, v), (field, all.clone()));
        }
    }

    #[test]
    fn hex_escapes_accept_either_case() {
        assert_eq!(
            dec(b"\\xFf\\x0A\t\\x41").unwrap(),
            (vec![0xff, 0x0a], b"A".to_vec())
        );
    }

    #[test]
    fn bad_lines_say_why() {
        let err = |l: &[u8]| dec(l).unwrap_err().0;
        assert!(err(b"no tab here").contains("no TAB"));
        assert!(err(b"").contains("no TAB"));
        assert!(err(b"k\tv\tw").contains("more than one TAB"));
        assert!(err(b"k\\q\tv").contains("bad escape `\\q` in the key at byte 2"));
        assert!(err(b"k\tv\\x4").contains("bad escape `\\x4` in the value"));
        assert!(err(b"k\tv\\xzz").contains("bad escape `\\xzz`"));
        assert!(err(b"k\\\tv").contains("the key ends in a lone backslash"));
        assert!(err(b"k\tv\\").contains("lone backslash"));
    }
}
