//! The key space of `bench kv`: row `i` (0 ≤ i < rows) has a 16-byte key, the big-endian
//! 128-bit integer `scramble(i) << 64 | i`, and a 100-byte value. `scramble` is a bijection
//! of u64 (odd multiplications and xor-shifts, each invertible), so keys are distinct, loading
//! `i = 0, 1, 2, ...` inserts them in an order unrelated to key order, and a uniformly drawn
//! `i` names an existing key, without holding a permutation in memory (which would count
//! against the process's memory beyond the buffer pool).

/// Bytes of every key.
pub const KEY_BYTES: usize = 16;
/// Bytes of every value.
pub const VALUE_BYTES: usize = 100;

/// A bijection of u64: each step (multiply by an odd constant, xor with a right shift) is
/// invertible modulo 2^64, so the whole is.
pub fn scramble(i: u64) -> u64 {
    let mut x = i.wrapping_mul(0xd6e8_feb8_6659_fd93);
    x ^= x >> 32;
    x = x.wrapping_mul(0xa076_1d64_78bd_642f);
    x ^= x >> 29;
    x = x.wrapping_mul(0xe703_7ed1_a0b4_28db);
    x ^ (x >> 32)
}

/// The key of row `i`.
pub fn key_of(i: u64) -> [u8; KEY_BYTES] {
    let mut k = [0u8; KEY_BYTES];
    k[..8].copy_from_slice(&scramble(i).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

/// Fill `v` with bytes derived from `seed` (not compressible, cheap to make).
pub fn fill_value(v: &mut [u8; VALUE_BYTES], seed: u64) {
    let mut x = seed;
    for chunk in v.chunks_mut(8) {
        x = scramble(x.wrapping_add(1));
        let bytes = x.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn keys_are_distinct_and_unordered() {
        let keys: Vec<[u8; KEY_BYTES]> = (0..10_000).map(key_of).collect();
        let set: HashSet<_> = keys.iter().collect();
        assert_eq!(set.len(), keys.len());
        let ascending = keys.windows(2).filter(|w| w[0] < w[1]).count();
        // Random order: about half of the neighbours ascend.
        assert!((4000..6000).contains(&ascending), "{ascending}");
    }

    #[test]
    fn values_differ_by_seed() {
        let (mut a, mut b) = ([0u8; VALUE_BYTES], [0u8; VALUE_BYTES]);
        fill_value(&mut a, 1);
        fill_value(&mut b, 2);
        assert_ne!(a, b);
        assert!(a.iter().any(|&x| x != 0));
    }
}
