//! A tiny deterministic pseudo-random generator (SplitMix64) and the few distributions the
//! generators need.
//!
//! Everything here uses integer arithmetic and IEEE `+ - * /` only (no `exp`, `ln` or `cos`
//! from the platform's maths library), so the same seed gives the same numbers on every
//! platform and every run.

/// SplitMix64: 64 bits of state, good enough statistics for test data, and trivially seeded.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// An index in `0..n` (0 when `n` is 0).
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True with probability `per_mille / 1000`.
    pub fn chance(&mut self, per_mille: u32) -> bool {
        self.below(1000) < u64::from(per_mille)
    }

    /// A uniform number in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// An approximately standard normal number (Irwin-Hall: the sum of twelve uniforms, less
    /// six), so always within ±6.
    pub fn normal(&mut self) -> f64 {
        (0..12).map(|_| self.unit()).sum::<f64>() - 6.0
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    /// An index chosen with the given integer weights (which must not all be zero).
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        let mut x = self.below(total);
        for (i, &w) in weights.iter().enumerate() {
            if x < u64::from(w) {
                return i;
            }
            x -= u64::from(w);
        }
        weights.len().saturating_sub(1)
    }

    /// A new generator whose stream is independent of this one's next numbers.
    pub fn fork(&mut self) -> Rng {
        Rng::new(self.next_u64())
    }
}

/// Derives the seed of item `n` of a stream seeded with `seed`.
pub fn derive(seed: u64, n: u64) -> u64 {
    Rng::new(seed ^ n.wrapping_mul(0xD6E8_FEB8_6659_FD93)).next_u64()
}

/// `2^x`, computed with a fixed series so the result is the same everywhere.
pub fn exp2(x: f64) -> f64 {
    let whole = x.floor();
    let t = (x - whole) * std::f64::consts::LN_2;
    let (mut term, mut sum) = (1.0f64, 1.0f64);
    for k in 1..=10 {
        term = term * t / f64::from(k);
        sum += term;
    }
    let shift = (whole as i64).clamp(-62, 62);
    if shift >= 0 {
        sum * (1u64 << shift) as f64
    } else {
        sum / (1u64 << -shift) as f64
    }
}

/// A log-normal number: `median * 2^(N(0,1) * sigma_log2)`.
pub fn log_normal(rng: &mut Rng, median: f64, sigma_log2: f64) -> f64 {
    median * exp2(rng.normal() * sigma_log2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_numbers() {
        let a: Vec<u64> = {
            let mut r = Rng::new(7);
            (0..100).map(|_| r.next_u64()).collect()
        };
        let mut r = Rng::new(7);
        let b: Vec<u64> = (0..100).map(|_| r.next_u64()).collect();
        assert_eq!(a, b);
        assert_ne!(Rng::new(8).next_u64(), a[0]);
    }

    #[test]
    fn exp2_is_close_to_the_real_thing() {
        for x in [-6.5, -1.0, -0.25, 0.0, 0.5, 1.0, 3.3, 9.99] {
            let want = 2f64.powf(x);
            assert!((exp2(x) - want).abs() / want < 1e-6, "{x}");
        }
    }

    #[test]
    fn below_stays_below() {
        let mut r = Rng::new(1);
        assert!((0..10_000).all(|_| r.below(7) < 7));
        assert_eq!(r.below(0), 0);
    }
}
