//! Transport selection by priority (`mpi.transports`, as Open MPI picks its
//! BTLs): a pair of ranks uses the first listed transport that reaches it;
//! `ivshmem` reaches only domains of the same group. Observed through the
//! ping-pong's closed form (see `channels_pingpong`) and through the device
//! threads' CPU: domains with virtio NICs whose traffic goes through ivshmem
//! leave dom0 idle.

use vhpc_sim::Scenario;

use crate::util::{assert_invariants, run, run_ns};

/// Three virtio domains on cores of their own; `a` and `b` in ivshmem group
/// "g", `c` in none. Job `pp` ping-pongs between `a` and `peer`.
fn scenario(transports: &str, peer: &str) -> String {
    format!(
        r#"
name = "channels-selection"
[host]
cores = 6
[mpi]
transports = {transports}
[[domains]]
name = "dom0"
dom0 = true
vcpus = 3
pin = [[3], [4], [5]]
[[domains]]
name = "a"
pin = [[0]]
nic = "virtio"
ivshmem = "g"
[[domains]]
name = "b"
pin = [[1]]
nic = "virtio"
ivshmem = "g"
[[domains]]
name = "c"
pin = [[2]]
nic = "virtio"
[[jobs]]
name = "pp"
workload = "pingpong"
ranks = ["a", "{peer}"]
wait_policy = "busy_poll"
params = {{ iterations = 40, bytes = 8 }}
"#
    )
}

/// (completion, dom0's CPU time) of the ping-pong.
fn outcome(transports: &str, peer: &str) -> (u64, u64, Scenario) {
    let text = scenario(transports, peer);
    let origin = format!("selection {transports} a-{peer}");
    let sc = Scenario::from_toml(&text, &origin).unwrap_or_else(|e| panic!("{e}"));
    let out = run(&text, &origin, None, false);
    assert_invariants(&origin, &text, &out);
    let t = out.report.jobs[0].completion_ns.expect("finished");
    (t, run_ns(&out.report, "dom0"), sc)
}

/// One-way cost of 8 B on a channel without back end.
fn direct(ch: &vhpc_sim::scenario::Channel) -> u64 {
    ch.send_ns + ch.recv_ns + ch.latency_ns + (ch.send_ns_per_kib + ch.recv_ns_per_kib) * 8 / 1024
}

#[test]
fn ivshmem_first_is_used_within_the_group_only() {
    let list = r#"["sm", "ivshmem", "net"]"#;
    let (t_ab, dom0_ab, sc) = outcome(list, "b");
    let (t_ac, dom0_ac, _) = outcome(list, "c");
    assert_eq!(dom0_ab, 0, "a-b share group g: no device thread runs");
    assert!(
        dom0_ac > 0,
        "a-c share no group: virtio's vhost threads run"
    );
    // 80 messages at the ivshmem cost, plus the same start-up as below.
    let (t_ab2, _, _) = outcome(list, "b");
    assert_eq!(t_ab, t_ab2, "deterministic");
    assert!(t_ab < t_ac);
    assert!(
        t_ab >= 80 * direct(&sc.mpi.ivshmem) && t_ab < 80 * direct(&sc.mpi.ivshmem) + 100_000,
        "a-b took {t_ab} ns: not the ivshmem channel's 80 × {} ns",
        direct(&sc.mpi.ivshmem)
    );
}

#[test]
fn net_listed_first_wins_even_within_a_group() {
    let (t_net, dom0_net, _) = outcome(r#"["sm", "net", "ivshmem"]"#, "b");
    let (t_ivs, _, _) = outcome(r#"["sm", "ivshmem", "net"]"#, "b");
    assert!(dom0_net > 0, "net first: the vhost threads carry a-b");
    assert!(
        t_net > 2 * t_ivs,
        "net ({t_net} ns) against ivshmem ({t_ivs} ns)"
    );
    // The same pair without any group behaves exactly as net-first.
    let (t_plain, _, _) = outcome(r#"["sm", "net"]"#, "b");
    assert_eq!(t_net, t_plain);
}

#[test]
fn absent_transports_keep_between_domains_meaning() {
    // between_domains = "dom0" (the default) is ["sm", "net"].
    let text = scenario(r#"["sm", "net"]"#, "b");
    let old = text.replace("transports = [\"sm\", \"net\"]\n", "");
    assert_ne!(text, old);
    let a = run(&text, "explicit", None, false).report;
    let b = run(&old, "implicit", None, false).report;
    assert_eq!(a.jobs[0].completion_ns, b.jobs[0].completion_ns);
    assert_eq!(a.events, b.events);
}
