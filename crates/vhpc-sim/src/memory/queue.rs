//! Loaded latency (`memory.queueing`): the wait of a cache-line request
//! queued at a busy memory controller or link, from exact mean value
//! analysis (MVA) of a closed queueing network.
//!
//! Why closed: a core keeps a bounded number of misses in flight, so the
//! requests a resource sees are a fixed population cycling between the
//! resource (service `s`: one 64-byte line at its bandwidth) and the rest
//! of the access (a delay of `Z = L − s`, `L` the idle latency of a local
//! access). For `n` requests, MVA (Reiser and Lavenberg, J. ACM 1980) gives
//! exactly, with `Q(0) = 0`:
//!
//! ```text
//! R(k) = s · (1 + Q(k − 1))      Q(k) = k · R(k) / (Z + R(k))
//! wait(n) = R(n) − s             (time an access spends queued)
//! ```
//!
//! `wait` is 0 for one request (nobody to queue behind), grows with `n`,
//! and tends to `n · s − L`: the access time `L + wait` tends to `n · s`,
//! the bandwidth bound, so at saturation this is the roofline's
//! utilisation term and below it adds the queueing the roofline omits
//! (`max(latency, utilisation)` is the closed network's pair of asymptotes;
//! MVA is the curve between them). The population comes from the demand by
//! Little's law: `n = U · L / s`, `U` the resource's utilisation at the
//! streaming ranks' unloaded demand. Approximations, stated: one queue at a
//! time (each resource is evaluated as if it were the only queue, and a
//! route pays the largest of its resources' waits, its bottleneck's: queues
//! behind a bottleneck see only what it lets through, so adding their
//! offered-load waits would count saturation twice), the delay is the local
//! latency whatever the route, and a non-integer population interpolates
//! linearly.

use super::PPM;

/// Most populations tabulated per resource; beyond, the asymptote.
const MAX_TABLE: usize = 4096;

/// One resource's wait curve.
#[derive(Debug, Clone)]
pub struct Queue {
    /// `L / s`, ppm: requests in flight per unit of utilisation.
    per_util_ppm: u64,
    /// `wait(k) / L`, ppm, for k = 0..len.
    wait: Vec<u64>,
    /// `s / L`, ppm.
    s_ppm: u64,
}

impl Queue {
    /// The curve of a resource of `bandwidth_mb_s` reached with idle latency
    /// `latency_ns`, tabulated up to `max_util_ppm` (its utilisation were
    /// every core streaming through it).
    pub fn new(bandwidth_mb_s: u64, latency_ns: u64, max_util_ppm: u64) -> Queue {
        // s = 64 B / bandwidth = 64000 / bandwidth_mb_s ns; L / s in ppm.
        let per_util_ppm =
            (latency_ns as u128 * bandwidth_mb_s.max(1) as u128 * PPM as u128 / 64_000) as u64;
        let s_ppm =
            (PPM as u128 * PPM as u128 / per_util_ppm.max(1) as u128).clamp(1, PPM as u128) as u64;
        let z = PPM - s_ppm.min(PPM);
        let top = (max_util_ppm as u128 * per_util_ppm as u128).div_ceil(PPM as u128 * PPM as u128)
            as usize
            + 1;
        let len = top.clamp(2, MAX_TABLE);
        let mut wait = Vec::with_capacity(len);
        wait.push(0);
        let mut q: u128 = 0; // Q(k − 1), ppm of a request
        for k in 1..len as u128 {
            let r = s_ppm as u128 * (PPM as u128 + q) / PPM as u128;
            q = k * r * PPM as u128 / (z as u128 + r);
            wait.push((r - s_ppm as u128) as u64);
        }
        Queue {
            per_util_ppm,
            wait,
            s_ppm,
        }
    }

    /// The wait (ppm of the idle latency) at utilisation `util_ppm`.
    pub fn wait_ppm(&self, util_ppm: u64) -> u64 {
        let n = util_ppm as u128 * self.per_util_ppm as u128 / PPM as u128; // ppm of a request
        let i = (n / PPM as u128) as usize;
        let frac = (n % PPM as u128) as u64;
        if i + 1 < self.wait.len() {
            let (a, b) = (self.wait[i], self.wait[i + 1]);
            a + ((b - a) as u128 * frac as u128 / PPM as u128) as u64
        } else {
            // Saturated far beyond the table: access time n · s, so the
            // wait is n · s − L (never below the table's last value).
            let asym = (n * self.s_ppm as u128 / PPM as u128).saturating_sub(PPM as u128) as u64;
            asym.max(*self.wait.last().expect("tabulated"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node of 10000 MB/s at 128 ns: s = 6.4 ns, L / s = 20.
    fn node() -> Queue {
        Queue::new(10_000, 128, 3 * PPM)
    }

    #[test]
    fn nothing_waits_when_idle_or_for_a_single_request() {
        let q = node();
        assert_eq!(q.wait_ppm(0), 0);
        // U = 0.05: one request in flight on average, nobody ahead of it.
        assert_eq!(q.wait_ppm(50_000), 0);
    }

    #[test]
    fn the_wait_grows_with_utilisation() {
        let q = node();
        let mut last = 0;
        for u in (0..=3 * PPM).step_by(10_000) {
            let w = q.wait_ppm(u);
            assert!(w >= last, "wait fell at U = {u}");
            last = w;
        }
        assert!(q.wait_ppm(900_000) > 0);
    }

    #[test]
    fn two_requests_match_the_closed_form() {
        // n = 2: R(1) = s, Q(1) = s / (Z + s) = s / L; R(2) = s (1 + s / L),
        // wait = s² / L = L / 400 with s = L / 20: 2500 ppm of L.
        let q = node();
        assert_eq!(q.wait_ppm(100_000), 2_500);
    }

    #[test]
    fn saturation_approaches_the_bandwidth_bound() {
        // At U = 3, access time ≈ 3 L (wait ≈ 2 L), within MVA's knee.
        let q = node();
        let w = q.wait_ppm(3 * PPM);
        assert!((1_990_000..=2_000_000).contains(&w), "{w}");
        // Beyond the table: the asymptote n · s − L.
        assert_eq!(q.wait_ppm(10 * PPM), 9 * PPM);
    }
}
