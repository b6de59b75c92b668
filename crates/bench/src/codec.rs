//! Byte encodings shared by the workloads. Keys are order-preserving: unsigned integers are
//! big-endian, signed integers have their sign bit flipped, and strings end with a 0 byte
//! (workload strings never contain 0), so the engine's lexicographic byte order is the
//! column order. Rows are a compact positional encoding: fixed-width little-endian integers
//! and length-prefixed strings, declared once per row type with the `row!` macro.
//!
//! Decoding never panics on bad bytes; it returns `CodecError` naming what was short.

use std::fmt;

/// A value could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecError(pub String);

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "decode: {}", self.0)
    }
}

impl std::error::Error for CodecError {}

/// Builds an order-preserving key.
#[derive(Debug, Default, Clone)]
pub struct Key(Vec<u8>);

impl Key {
    pub fn new() -> Self {
        Key(Vec::with_capacity(24))
    }
    pub fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    pub fn u16(mut self, v: u16) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn i64(mut self, v: i64) -> Self {
        self.0
            .extend_from_slice(&((v as u64) ^ (1 << 63)).to_be_bytes());
        self
    }
    pub fn str(mut self, v: &str) -> Self {
        debug_assert!(!v.as_bytes().contains(&0));
        self.0.extend_from_slice(v.as_bytes());
        self.0.push(0);
        self
    }
    pub fn build(self) -> Vec<u8> {
        self.0
    }
}

/// Reads an order-preserving key back, field by field.
pub struct KeyReader<'a>(&'a [u8]);

impl<'a> KeyReader<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        KeyReader(b)
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if self.0.len() < n {
            return Err(CodecError(format!(
                "key short: wanted {n} bytes, have {}",
                self.0.len()
            )));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    pub fn u32(&mut self) -> Result<u32, CodecError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn u64(&mut self) -> Result<u64, CodecError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(a))
    }
    pub fn i64(&mut self) -> Result<i64, CodecError> {
        Ok((self.u64()? ^ (1 << 63)) as i64)
    }
    pub fn str(&mut self) -> Result<String, CodecError> {
        let end = self
            .0
            .iter()
            .position(|&c| c == 0)
            .ok_or_else(|| CodecError("key string without terminator".into()))?;
        let s = utf8_string(self.take(end)?);
        self.take(1)?;
        Ok(s)
    }
}

/// A column type of a row: how it is written and read.
pub trait Field: Sized {
    fn put(&self, out: &mut Vec<u8>);
    fn get(inp: &mut &[u8]) -> Result<Self, CodecError>;
}

fn take<'a>(inp: &mut &'a [u8], n: usize) -> Result<&'a [u8], CodecError> {
    if inp.len() < n {
        return Err(CodecError(format!(
            "row short: wanted {n} bytes, have {}",
            inp.len()
        )));
    }
    let (a, b) = inp.split_at(n);
    *inp = b;
    Ok(a)
}

macro_rules! int_field {
    ($t:ty, $n:expr) => {
        impl Field for $t {
            fn put(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(inp: &mut &[u8]) -> Result<Self, CodecError> {
                let mut a = [0u8; $n];
                a.copy_from_slice(take(inp, $n)?);
                Ok(<$t>::from_le_bytes(a))
            }
        }
    };
}

int_field!(u8, 1);
int_field!(u16, 2);
int_field!(u32, 4);
int_field!(u64, 8);
int_field!(i64, 8);

impl Field for String {
    fn put(&self, out: &mut Vec<u8>) {
        let len = u16::try_from(self.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&self.as_bytes()[..usize::from(len)]);
    }
    fn get(inp: &mut &[u8]) -> Result<Self, CodecError> {
        let len = u16::get(inp)?;
        let b = take(inp, usize::from(len))?;
        Ok(utf8_string(b))
    }
}

/// `b` as a string: checked by the standard library's fast path (the workload's strings are
/// ASCII), lossily only when that fails (a field cut inside a character).
fn utf8_string(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(b).into_owned(),
    }
}

/// A row type with a positional encoding.
pub trait RowCodec: Sized {
    fn encode(&self) -> Vec<u8>;
    fn decode(b: &[u8]) -> Result<Self, CodecError>;
}

/// Declares a row struct and its `RowCodec` (fields in declaration order).
macro_rules! row {
    ($(#[$m:meta])* pub struct $name:ident { $(pub $f:ident : $t:ty,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Default)]
        pub struct $name { $(pub $f: $t,)* }

        impl $crate::codec::RowCodec for $name {
            fn encode(&self) -> Vec<u8> {
                let mut out = Vec::with_capacity(64);
                $( $crate::codec::Field::put(&self.$f, &mut out); )*
                out
            }
            fn decode(b: &[u8]) -> Result<Self, $crate::codec::CodecError> {
                let mut inp = b;
                let r = $name { $($f: <$t as $crate::codec::Field>::get(&mut inp)?,)* };
                if !inp.is_empty() {
                    return Err($crate::codec::CodecError(format!(
                        "{}: {} trailing bytes", stringify!($name), inp.len())));
                }
                Ok(r)
            }
        }
    };
}
pub(crate) use row;

#[cfg(test)]
mod tests {
    use super::*;

    row! {
        /// A test row.
        pub struct T { pub a: u32, pub b: String, pub c: i64, }
    }

    #[test]
    fn keys_sort_like_columns() {
        let a = Key::new().u32(1).str("AB").u32(9).build();
        let b = Key::new().u32(1).str("ABC").u32(0).build();
        let c = Key::new().u32(2).str("A").u32(0).build();
        assert!(a < b && b < c);
        assert!(Key::new().i64(-5).build() < Key::new().i64(3).build());
        let mut r = KeyReader::new(&b);
        assert_eq!(
            (r.u32().unwrap(), r.str().unwrap(), r.u32().unwrap()),
            (1, "ABC".into(), 0)
        );
    }

    #[test]
    fn rows_round_trip_and_reject_garbage() {
        let t = T {
            a: 7,
            b: "héllo".into(),
            c: -42,
        };
        assert_eq!(T::decode(&t.encode()).unwrap(), t);
        assert!(T::decode(&[1, 2, 3]).is_err());
        let mut long = t.encode();
        long.push(0);
        assert!(T::decode(&long).is_err());
    }
}
