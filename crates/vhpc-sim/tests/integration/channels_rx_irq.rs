//! `rx_irq_*`: a VM's receive path below the socket (interrupt, NAPI poll,
//! IP/TCP receive) on one vCPU of the VM, its single-queue NIC's interrupt
//! vCPU (`domains.rx_irq_vcpu`), for every packet the VM receives over
//! `net`. The ping-pong of `channels_pingpong` over virtio (busy_poll, every
//! vCPU on a core of its own, dom0's vCPUs too): VM `a` has two vCPUs, its
//! rank on v0 and its interrupt on v0 or v1; VM `b` one vCPU, its interrupt
//! on its rank's vCPU (it preempts the spinning rank, which resumes after
//! it). One way, for a message of B bytes, λ = latency_ns:
//!
//! send(B) + λ + relay(B) + λ + relay(B) + λ + rx_irq(B) + recv(B)
//!
//! (the interrupt processes the packet, then the spinning rank sees it at
//! once), so T(2N) − T(N) = 2N · one way exactly, and the interrupt vCPU of
//! `a` runs rx_irq(B) more per message `a` receives.

use vhpc_sim::Scenario;

use crate::util::{assert_invariants, field_of, run};

const N: u64 = 40;
const BYTES: u64 = 3000;
const IRQ_NS: u64 = 7000;
const IRQ_PER_KIB: u64 = 700;

/// The ping-pong; `irq` sets the virtio table's `rx_irq_*`, `irq_vcpu` is
/// `a`'s interrupt vCPU.
fn scenario(irq: bool, irq_vcpu: usize, iterations: u64) -> String {
    let (ns, per_kib) = if irq { (IRQ_NS, IRQ_PER_KIB) } else { (0, 0) };
    format!(
        r#"
name = "channels-rx-irq"
[host]
cores = 5
[hypervisor]
scheduler = "credit"
[mpi.virtio]
latency_ns = 1000
send_ns = 5000
send_ns_per_kib = 300
recv_ns = 2000
recv_ns_per_kib = 300
relay_ns = 3000
relay_ns_per_kib = 300
rx_irq_ns = {ns}
rx_irq_ns_per_kib = {per_kib}
[[domains]]
name = "dom0"
dom0 = true
vcpus = 2
pin = [[3], [4]]
[[domains]]
name = "a"
vcpus = 2
pin = [[0], [1]]
nic = "virtio"
rx_irq_vcpu = {irq_vcpu}
[[domains]]
name = "b"
pin = [[2]]
nic = "virtio"
[[jobs]]
name = "pp"
workload = "pingpong"
ranks = ["a", "b"]
wait_policy = "busy_poll"
params = {{ iterations = {iterations}, bytes = {BYTES} }}
"#
    )
}

struct Out {
    completion: u64,
    /// Run time of a.v0 and a.v1.
    a_run: [u64; 2],
    sc: Scenario,
}

fn go(irq: bool, irq_vcpu: usize, iterations: u64) -> Out {
    let text = scenario(irq, irq_vcpu, iterations);
    let origin = format!("rx-irq-{irq}-v{irq_vcpu}-{iterations}");
    let sc = Scenario::from_toml(&text, &origin).unwrap_or_else(|e| panic!("{e}"));
    let out = run(&text, &origin, None, false);
    assert_invariants(&origin, &text, &out);
    let run_of = |k: u32| {
        out.report
            .vcpus
            .iter()
            .find(|v| v.domain == "a" && v.vcpu == k)
            .expect("a has two vCPUs")
            .run_ns
    };
    Out {
        completion: out.report.jobs[0]
            .completion_ns
            .unwrap_or_else(|| panic!("{origin}: the ping-pong did not finish")),
        a_run: [run_of(0), run_of(1)],
        sc,
    }
}

fn one_way(sc: &Scenario) -> u64 {
    let ch = &sc.mpi.virtio;
    let cost = |ns: u64, per_kib: u64| ns + per_kib * BYTES / 1024;
    cost(ch.send_ns, ch.send_ns_per_kib)
        + 2 * ch.relay_cost(BYTES)
        + 3 * ch.latency_ns
        + ch.rx_irq_cost(BYTES)
        + cost(ch.recv_ns, ch.recv_ns_per_kib)
}

fn check_closed_form(irq: bool, irq_vcpu: usize) {
    let (a, b) = (go(irq, irq_vcpu, N), go(irq, irq_vcpu, 2 * N));
    assert_eq!(a.sc.mpi.virtio.rx_irq_ns, if irq { IRQ_NS } else { 0 });
    let expected = 2 * N * one_way(&a.sc);
    assert_eq!(
        b.completion - a.completion,
        expected,
        "rx_irq {irq}, interrupt on a.v{irq_vcpu}: {N} more round trips took {} ns, the closed \
         form says {expected}",
        b.completion - a.completion
    );
}

#[test]
fn the_interrupt_preempting_the_rank_adds_its_work_to_each_message() {
    check_closed_form(true, 0);
}

#[test]
fn the_interrupt_on_another_vcpu_adds_the_same() {
    check_closed_form(true, 1);
}

#[test]
fn off_the_rank_pays_recv_alone() {
    check_closed_form(false, 0);
    check_closed_form(false, 1);
}

/// `a` receives one message per round trip (the pong): N more round trips
/// make its interrupt vCPU run N × rx_irq(B) more, and nothing else runs
/// there. Off, that vCPU never runs.
#[test]
fn the_interrupt_vcpu_runs_rx_irq_per_received_packet() {
    let (a, b) = (go(true, 1, N), go(true, 1, 2 * N));
    assert_eq!(
        b.a_run[1] - a.a_run[1],
        N * a.sc.mpi.virtio.rx_irq_cost(BYTES)
    );
    let off = go(false, 1, N);
    assert_eq!(off.a_run[1], 0, "off: nothing runs on a.v1");
    // The rank's vCPU spins the whole run either way.
    assert!(a.a_run[0] > 0 && off.a_run[0] > 0);
}

#[test]
fn runs_are_deterministic() {
    let text = scenario(true, 0, N);
    let one = run(&text, "det", Some(7), false).report;
    let two = run(&text, "det", Some(7), false).report;
    assert_eq!(
        serde_json::to_string(&one).unwrap(),
        serde_json::to_string(&two).unwrap()
    );
}

#[test]
fn only_vm_nics_take_it() {
    let bridge = crate::channels_pingpong::scenario("bridge", false, 1, 8)
        + "\n[mpi.bridge]\nlatency_ns = 1\nsend_ns = 1\nsend_ns_per_kib = 1\nrecv_ns = 1\n\
           recv_ns_per_kib = 1\nrx_irq_ns = 5\n";
    assert_eq!(field_of(&bridge), "mpi.bridge.rx_irq_ns");
    let tcp = crate::channels_pingpong::scenario("bridge", false, 1, 8)
        + "\n[mpi.tcp]\nlatency_ns = 1\nsend_ns = 1\nsend_ns_per_kib = 1\nrecv_ns = 1\n\
           recv_ns_per_kib = 1\nrx_irq_ns_per_kib = 5\n";
    assert_eq!(field_of(&tcp), "mpi.tcp.rx_irq_ns_per_kib");
}

#[test]
fn bad_values_are_named() {
    let vcpu = scenario(true, 2, 1);
    assert_eq!(field_of(&vcpu), "domains[1].rx_irq_vcpu");
    let slow = scenario(true, 0, 1).replace("rx_irq_ns = 7000", "rx_irq_ns = 2000000000");
    assert_eq!(field_of(&slow), "mpi.virtio.rx_irq_ns");
}

/// The interrupt preempts a computing rank, which resumes where it was: a
/// compute-bound rank (NPB EP, no jitter) on `a`'s interrupt vCPU finishes
/// exactly N × rx_irq(B) later when `a` receives N packets meanwhile (the
/// ping-pong's N pongs, all within EP's run), and not at all later when off.
#[test]
fn a_preempted_computation_loses_exactly_the_interrupt_time() {
    let finish = |irq: bool| {
        let text = scenario(irq, 1, N)
            + "[[jobs]]\nname = \"ep\"\nworkload = \"npb.ep\"\nranks = [\"a\"]\n\
               params = { class = \"S\", jitter_ppm = 0 }\n";
        let out = run(&text, "rx-irq-ep", None, false);
        assert_invariants("rx-irq-ep", &text, &out);
        let r = |job: &str| {
            out.report
                .ranks
                .iter()
                .filter(|r| r.job == job)
                .map(|r| r.finish_ns.expect("finished"))
                .max()
                .unwrap()
        };
        let ep = out.report.ranks.iter().find(|r| r.job == "ep").unwrap();
        assert_eq!(
            (ep.domain.as_str(), ep.vcpu),
            ("a", 1),
            "EP on the interrupt vCPU"
        );
        assert!(r("pp") < r("ep"), "the ping-pong ends within EP's run");
        (r("ep"), Scenario::from_toml(&text, "t").unwrap())
    };
    let ((on, sc), (off, _)) = (finish(true), finish(false));
    assert_eq!(on - off, N * sc.mpi.virtio.rx_irq_cost(BYTES));
}
