//! The lab's own SSOR kernel, `bench/npb_ssor.c`, as a phase program: NPB
//! LU's pipelined wavefront sweeps on a scalar equation. It is not `npb.lu`:
//! the lab kernel sends one row of N-2 doubles per plane and rank boundary
//! (LU: 5 doubles a point), has no ghost-face exchange or right-hand side in
//! its timed part, and does all its work inside the two sweeps, so the
//! pipeline carries all of it. Only the timed part (`ssor()`) is modelled.
//!
//! Work is counted in point updates (one `relax` call): 2 (N-2)^3 per
//! iteration over all ranks. `ps_per_unit` is this host's cost of one, from
//! the profile's one-rank run of the same class (`vhpc lab predict`); without
//! it, LU's S0 calibration (`npb.lu`'s cost per point and iteration, counted
//! as two updates).

use super::{int_param, known_params, Shape, Step, WorkloadInfo};

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "npb.ssor",
    description: "the lab's npb_ssor (bench/npb_ssor.c): per iteration a pipelined lower and \
                  upper wavefront sweep over rank blocks of rows, one row of N-2 doubles per \
                  plane and boundary, no other exchange",
    check,
    build,
    endless: false,
};

/// Grid edge (boundary included) and iterations of a class, as bench/npb_ssor.c.
fn class_size(class: &str) -> Option<(u64, u64)> {
    Some(match class {
        "S" => (12, 50),
        "W" => (33, 300),
        "A" => (64, 250),
        _ => return None,
    })
}

fn class_of(p: &toml::Table) -> Result<&str, (String, String)> {
    super::npb::class_param(p, "S", "S, W or A")
}

fn check(p: &toml::Table, ranks: u32) -> Result<(), (String, String)> {
    known_params(p, &["class", "jitter_ppm", "ps_per_unit"])?;
    int_param(p, "ps_per_unit", 1, 1, 1_000_000_000)?;
    int_param(p, "jitter_ppm", 10_000, 0, 1_000_000)?;
    let class = class_of(p)?;
    let Some((n, _)) = class_size(class) else {
        return Err((
            "class".into(),
            format!("must be one of S, W, A, got {class:?}"),
        ));
    };
    if ranks as u64 > n - 2 {
        return Err((
            String::new(),
            format!(
                "npb.ssor class {class} splits {} rows: at most that many ranks, got {ranks}",
                n - 2
            ),
        ));
    }
    Ok(())
}

/// The rows of `rows` a rank owns: even blocks, the first ones one longer
/// (bench/kernel.h's block_range).
fn block(rows: u64, s: Shape) -> u64 {
    let (size, rank) = (s.ranks as u64, s.rank as u64);
    rows / size + u64::from(rank < rows % size)
}

/// ns per update: the host's, or `npb.lu`'s S0 cost per point and iteration
/// split over its two sweeps.
fn ns_per_update(p: &toml::Table) -> f64 {
    match int_param(p, "ps_per_unit", 0, 0, 1_000_000_000).expect("checked") {
        0 => super::npb::lu_ns_per_point() / 2.0,
        ps => ps as f64 / 1000.0,
    }
}

fn build(p: &toml::Table, s: Shape) -> Vec<Step> {
    let (n, iterations) = class_size(class_of(p).expect("checked")).expect("checked");
    let jitter_ppm = int_param(p, "jitter_ppm", 10_000, 0, 1_000_000).expect("checked") as u32;
    let (inner, r, last) = (n - 2, s.rank, s.ranks - 1);
    let plane = Step::Compute {
        ns: (block(inner, s) as f64 * inner as f64 * ns_per_update(p)) as u64,
        jitter_ppm,
    };
    let row = inner * 8;
    // One sweep: receive from `from`, update the plane, send to `to` (None at
    // the pipeline's ends).
    let sweep = |from: Option<u32>, to: Option<u32>| {
        let mut steps = Vec::new();
        steps.extend(from.map(|peer| Step::Recv { peer, bytes: row }));
        steps.push(plane);
        steps.extend(to.map(|peer| Step::Send { peer, bytes: row }));
        steps
    };
    let (left, right) = (r.checked_sub(1), (r < last).then_some(r + 1));
    let lower = sweep(left, right);
    let upper = sweep(right, left);
    let mut steps = vec![Step::Loop {
        count: iterations,
        len: (lower.len() + upper.len() + 2) as u32,
    }];
    for part in [lower, upper] {
        steps.push(Step::Loop {
            count: inner,
            len: part.len() as u32,
        });
        steps.extend(part);
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(class: &str, ps: i64) -> toml::Table {
        let mut p = toml::Table::new();
        p.insert("class".into(), class.into());
        p.insert("jitter_ppm".into(), 0.into());
        p.insert("ps_per_unit".into(), ps.into());
        p
    }

    #[test]
    fn each_rank_updates_its_block_and_passes_one_row_a_plane() {
        // W: 31 interior rows over 2 ranks, 16 and 15; 31 planes a sweep.
        let p = params("W", 2000);
        let first = build(&p, Shape { rank: 0, ranks: 2 });
        let second = build(&p, Shape { rank: 1, ranks: 2 });
        let plane = |steps: &[Step]| match steps.iter().find(|s| matches!(s, Step::Compute { .. }))
        {
            Some(Step::Compute { ns, .. }) => *ns,
            _ => panic!("no compute"),
        };
        assert_eq!((plane(&first), plane(&second)), (16 * 31 * 2, 15 * 31 * 2));
        // rank 0 sends down in the lower sweep and receives in the upper one
        assert!(matches!(first[2], Step::Compute { .. }));
        assert!(matches!(
            first[3],
            Step::Send {
                peer: 1,
                bytes: 248
            }
        ));
        assert!(matches!(
            first[5],
            Step::Recv {
                peer: 1,
                bytes: 248
            }
        ));
        assert!(matches!(
            second[2],
            Step::Recv {
                peer: 0,
                bytes: 248
            }
        ));
        assert!(matches!(first[0], Step::Loop { count: 300, len: 6 }));
        assert!(matches!(first[1], Step::Loop { count: 31, len: 2 }));
    }

    #[test]
    fn one_rank_does_every_update_and_sends_nothing() {
        let steps = build(&params("S", 1000), Shape { rank: 0, ranks: 1 });
        assert!(steps
            .iter()
            .all(|s| matches!(s, Step::Loop { .. } | Step::Compute { .. })));
        // S: 10^3 points, 2 updates each per iteration, 50 iterations at 1 ns
        let Step::Compute { ns, .. } = steps[2] else {
            panic!()
        };
        assert_eq!(ns * 10 * 2 * 50, 2 * 1000 * 50);
    }

    #[test]
    fn classes_and_rank_counts_are_checked() {
        assert!(check(&params("W", 1), 31).is_ok());
        assert!(check(&params("W", 1), 3).is_ok()); // any count up to the rows
        assert!(check(&params("W", 1), 32).is_err());
        assert_eq!(check(&params("B", 1), 2).unwrap_err().0, "class");
        assert_eq!(check(&params("W", 0), 2).unwrap_err().0, "ps_per_unit");
    }
}
