//! TPC-C's random data (clause 4.3.2) and non-uniform random numbers (clause 2.1.6):
//! NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x, with one C per A
//! chosen at load time and a run-time C for last names whose distance from the load-time C
//! obeys clause 2.1.6.1 (65..=119, not 96 or 112).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// The NURand C constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NuRandC {
    /// C for A = 255 (customer last names) used by the loader.
    pub c_last_load: u32,
    /// C for A = 255 used by the transactions.
    pub c_last_run: u32,
    /// C for A = 1023 (customer ids).
    pub c_id: u32,
    /// C for A = 8191 (item ids).
    pub ol_i_id: u32,
}

impl NuRandC {
    /// Fresh constants for a load.
    pub fn generate(rng: &mut impl Rng) -> Self {
        let c_last_load = rng.gen_range(0..=255);
        NuRandC {
            c_last_load,
            c_last_run: Self::pick_run(rng, c_last_load),
            c_id: rng.gen_range(0..=1023),
            ol_i_id: rng.gen_range(0..=8191),
        }
    }

    /// A run-time C for last names valid against the load-time one.
    pub fn pick_run(rng: &mut impl Rng, c_load: u32) -> u32 {
        loop {
            let c_run = rng.gen_range(0..=255u32);
            let delta = c_run.abs_diff(c_load);
            if (65..=119).contains(&delta) && delta != 96 && delta != 112 {
                return c_run;
            }
        }
    }
}

/// NURand(A, x, y) with constant `c`.
pub fn nurand(rng: &mut impl Rng, a: u32, c: u32, x: u32, y: u32) -> u32 {
    (((rng.gen_range(0..=a) | rng.gen_range(x..=y)) + c) % (y - x + 1)) + x
}

const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// The customer last name for a number 0-999 (three syllables by its digits).
pub fn last_name(n: u32) -> String {
    let n = n % 1000;
    let mut s = String::with_capacity(15);
    for digit in [n / 100, (n / 10) % 10, n % 10] {
        s.push_str(SYLLABLES[digit as usize]);
    }
    s
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A random alphanumeric string with length in `min..=max`.
pub fn astring(rng: &mut impl Rng, min: usize, max: usize) -> String {
    let len = rng.gen_range(min..=max);
    (0..len)
        .map(|_| char::from(ALNUM[rng.gen_range(0..ALNUM.len())]))
        .collect()
}

/// A random numeric string with length in `min..=max`.
pub fn nstring(rng: &mut impl Rng, min: usize, max: usize) -> String {
    let len = rng.gen_range(min..=max);
    (0..len)
        .map(|_| char::from(b'0' + rng.gen_range(0..10u8)))
        .collect()
}

/// A zip code: four random digits then "11111".
pub fn zip(rng: &mut impl Rng) -> String {
    let mut z = nstring(rng, 4, 4);
    z.push_str("11111");
    z
}

/// I_DATA / S_DATA: 26-50 characters, 10% of them containing "ORIGINAL".
pub fn data_with_original(rng: &mut impl Rng) -> String {
    let mut s = astring(rng, 26, 50);
    if rng.gen_bool(0.1) {
        let at = rng.gen_range(0..=s.len() - 8);
        s.replace_range(at..at + 8, "ORIGINAL");
    }
    s
}

/// A seeded fast generator; each client thread gets its own.
pub fn rng_for(seed: u64, stream: u64) -> SmallRng {
    SmallRng::seed_from_u64(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut rng = rng_for(7, 0);
        let c = NuRandC::generate(&mut rng);
        let mut hits = vec![0u32; 3001];
        for _ in 0..200_000 {
            let v = nurand(&mut rng, 1023, c.c_id, 1, 3000);
            assert!((1..=3000).contains(&v));
            hits[v as usize] += 1;
            let i = nurand(&mut rng, 8191, c.ol_i_id, 1, 100_000);
            assert!((1..=100_000).contains(&i));
            let l = nurand(&mut rng, 255, c.c_last_run, 0, 999);
            assert!(l <= 999);
        }
        // Non-uniform: the most popular id is drawn far more often than the uniform mean.
        let max = hits.iter().copied().max().unwrap_or(0);
        assert!(max > 3 * 200_000 / 3000, "max {max}");
    }

    #[test]
    fn run_constant_obeys_delta_rule() {
        let mut rng = rng_for(1, 1);
        for load in 0..=255 {
            let run = NuRandC::pick_run(&mut rng, load);
            let d = run.abs_diff(load);
            assert!((65..=119).contains(&d) && d != 96 && d != 112);
        }
    }

    #[test]
    fn last_names_and_strings() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        let mut rng = rng_for(3, 0);
        for _ in 0..100 {
            let s = data_with_original(&mut rng);
            assert!((26..=50).contains(&s.len()));
            assert_eq!(zip(&mut rng).len(), 9);
        }
    }
}
