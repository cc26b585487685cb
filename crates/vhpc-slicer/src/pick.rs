//! Who gets the next slice: in turn, or by weight (stride scheduling).

/// The pick rule and the slices granted so far.
///
/// Without weights the next slice goes to the following domain. With
/// weights it goes to the domain furthest behind its weighted share: the
/// smallest `(slices[i] + 1) / weights[i]`, ties to the earlier domain,
/// compared exactly (integers, cross-multiplied), so the order is
/// deterministic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stride {
    weights: Option<Vec<u64>>,
    slices: Vec<u64>,
}

impl Stride {
    /// `n` domains, in turn (`weights` None) or by weight (one positive
    /// weight per domain, else an error saying what is wrong).
    pub fn new(n: usize, weights: Option<Vec<u64>>) -> Result<Self, String> {
        if n == 0 {
            return Err("need at least one domain".into());
        }
        if let Some(w) = &weights {
            if w.len() != n || w.contains(&0) {
                return Err(format!("need one positive weight per domain, got {w:?}"));
            }
        }
        Ok(Self {
            weights,
            slices: vec![0; n],
        })
    }

    /// The domain the next slice goes to, after `current` (None: the first).
    pub fn next(&self, current: Option<usize>) -> usize {
        let n = self.slices.len();
        let Some(weights) = &self.weights else {
            return current.map_or(0, |c| (c + 1) % n);
        };
        // (s_i + 1) / w_i < (s_j + 1) / w_j  <=>  (s_i + 1) w_j < (s_j + 1) w_i
        let behind = |i: usize, j: usize| {
            u128::from(self.slices[i] + 1) * u128::from(weights[j])
                < u128::from(self.slices[j] + 1) * u128::from(weights[i])
        };
        (1..n).fold(0, |best, i| if behind(i, best) { i } else { best })
    }

    /// Counts a slice granted to `domain`.
    pub fn grant(&mut self, domain: usize) {
        self.slices[domain] += 1;
    }

    /// Slices granted to each domain so far.
    pub fn slices(&self) -> &[u64] {
        &self.slices
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first `count` picks, granting each.
    fn picks(stride: &mut Stride, count: usize) -> Vec<usize> {
        let mut current = None;
        (0..count)
            .map(|_| {
                let next = stride.next(current);
                stride.grant(next);
                current = Some(next);
                next
            })
            .collect()
    }

    #[test]
    fn without_weights_domains_take_turns_from_the_first() {
        let mut s = Stride::new(3, None).unwrap();
        assert_eq!(picks(&mut s, 7), [0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(s.slices(), [3, 2, 2]);
    }

    #[test]
    fn equal_weights_alternate_with_ties_to_the_earlier_domain() {
        let mut s = Stride::new(2, Some(vec![256, 256])).unwrap();
        assert_eq!(picks(&mut s, 6), [0, 1, 0, 1, 0, 1]);
    }

    #[test]
    fn slices_follow_weights_exactly_over_a_round() {
        let mut s = Stride::new(3, Some(vec![512, 256, 256])).unwrap();
        // In 512ths: (1, 2, 2) -> 0; (2, 2, 2) ties -> 0; (3, 2, 2) -> 1; (3, 4, 2) -> 2; ...
        assert_eq!(picks(&mut s, 8), [0, 0, 1, 2, 0, 0, 1, 2]);
        assert_eq!(s.slices(), [4, 2, 2]);
    }

    #[test]
    fn shares_converge_for_uneven_weights() {
        let mut s = Stride::new(2, Some(vec![3, 1])).unwrap();
        picks(&mut s, 400);
        assert_eq!(s.slices(), [300, 100]);
    }

    #[test]
    fn picks_are_the_python_rule() {
        // The rule timeslice.py had: min over i of ((slices[i] + 1) / w[i], i).
        let weights = vec![7, 3, 5, 3];
        let mut s = Stride::new(4, Some(weights.clone())).unwrap();
        for _ in 0..200 {
            let expect = (0..4)
                .min_by(|&i, &j| {
                    let a = (s.slices()[i] + 1) as f64 / weights[i] as f64;
                    let b = (s.slices()[j] + 1) as f64 / weights[j] as f64;
                    a.partial_cmp(&b).unwrap().then(i.cmp(&j))
                })
                .unwrap();
            let got = s.next(Some(0));
            assert_eq!(got, expect);
            s.grant(got);
        }
    }

    #[test]
    fn bad_weights_are_refused() {
        assert!(Stride::new(2, Some(vec![1])).is_err());
        assert!(Stride::new(2, Some(vec![1, 0])).is_err());
        assert!(Stride::new(0, None).is_err());
    }
}
