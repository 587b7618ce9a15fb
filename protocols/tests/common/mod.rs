//! Shared by the tests that feed parsers random and mutated inputs.

use rand::Rng;
use rand::rngs::StdRng;

/// A random mutation of `seed`: a few byte flips, insertions of
/// `interesting` pieces, deletions, truncations and random runs.
pub fn mutate(rng: &mut StdRng, seed: &[u8], interesting: &[&[u8]]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..rng.random_range(0..6) {
        let at = rng.random_range(0..=v.len());
        match rng.random_range(0..5) {
            0 if !v.is_empty() => {
                let i = rng.random_range(0..v.len());
                v[i] = rng.random();
            }
            1 => {
                let piece = interesting[rng.random_range(0..interesting.len())];
                v.splice(at..at, piece.iter().copied());
            }
            2 if at < v.len() => {
                let end = rng.random_range(at..=v.len());
                v.drain(at..end);
            }
            3 => v.truncate(at),
            _ => {
                let n = rng.random_range(1..8);
                v.splice(at..at, (0..n).map(|_| rng.random::<u8>()));
            }
        }
    }
    v
}
