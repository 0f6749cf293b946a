//! A small deterministic random generator for property-style tests that must replay a failure:
//! a test draws its seed with [`seed_from_env`], prints it in every assertion, and a run is
//! repeated exactly by setting the variable to that seed.
//!
//! xorshift64* is enough here: the tests need a cheap, reproducible spread of choices, not
//! statistical quality, and no dependency is pulled in for it.

/// xorshift64* over a 64-bit state. A zero state stays zero, so seeds are made odd
/// ([`seed_from_env`] does this for the time-based default).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator that starts from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`0` when `n` is `0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// An index into a collection of `len` items (`0` when it is empty).
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }
}

/// The seed named by the environment variable `var` when it holds a whole number; otherwise one
/// taken from the clock (odd, so never zero), or `fallback` if the clock reads before 1970.
pub fn seed_from_env(var: &str, fallback: u64) -> u64 {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64 | 1)
            .unwrap_or(fallback)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_same_seed_replays_the_same_sequence() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        let first: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let second: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert_eq!(first, second);
    }

    #[test]
    fn rng_below_and_index_stay_in_range_and_accept_zero() {
        let mut rng = Rng::new(7);
        for n in [0u64, 1, 2, 3, 1000] {
            for _ in 0..100 {
                assert!(rng.below(n) < n.max(1));
                assert!(rng.index(n as usize) < (n as usize).max(1));
            }
        }
    }
}
