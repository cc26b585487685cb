//! Invalid channel settings are rejected naming the field, and the new
//! fields' defaults leave old scenarios alone.

use crate::util;
use vhpc_sim::Scenario;

fn base(mpi: &str, a: &str, b: &str, dom0: bool) -> String {
    let dom0 = if dom0 {
        "[[domains]]\nname = \"dom0\"\ndom0 = true\n"
    } else {
        ""
    };
    format!(
        "name = \"v\"\n[host]\ncores = 2\n[mpi]\n{mpi}\n{dom0}\
         [[domains]]\nname = \"a\"\n{a}\n[[domains]]\nname = \"b\"\n{b}\n\
         [[jobs]]\nname = \"j\"\nworkload = \"pingpong\"\nranks = [\"a\", \"b\"]\n"
    )
}

#[test]
fn unknown_nic_names_the_domain_field() {
    let t = base("", "nic = \"e1000\"", "", true);
    assert_eq!(util::field_of(&t), "domains[1].nic");
    let msg = Scenario::from_toml(&t, "t.toml").unwrap_err().message;
    assert!(msg.contains("virtio"), "lists the known kinds: {msg}");
}

#[test]
fn bad_transports_name_the_entry() {
    let t = base("transports = [\"sm\", \"tcp\"]", "", "", true);
    assert_eq!(util::field_of(&t), "mpi.transports[1]");
    let t = base("transports = [\"sm\", \"net\", \"sm\"]", "", "", true);
    assert_eq!(util::field_of(&t), "mpi.transports[2]");
    let t = base("transports = []", "", "", true);
    assert_eq!(util::field_of(&t), "mpi.transports");
}

#[test]
fn transports_with_old_shm_spelling_conflict() {
    let t = base(
        "between_domains = \"shm\"\ntransports = [\"sm\", \"net\"]",
        "",
        "",
        true,
    );
    assert_eq!(util::field_of(&t), "mpi.between_domains");
}

#[test]
fn unreachable_pairs_name_the_rank_or_the_list() {
    // No net and no common group: a-b cannot talk.
    let t = base(
        "transports = [\"sm\", \"ivshmem\"]",
        "ivshmem = \"g\"",
        "",
        true,
    );
    assert_eq!(util::field_of(&t), "jobs[0].ranks[1]");
    // Ranks sharing a domain need sm.
    let t = base("transports = [\"net\"]", "", "", true)
        .replace("ranks = [\"a\", \"b\"]", "ranks = [\"a\", \"a\", \"b\"]");
    assert_eq!(util::field_of(&t), "mpi.transports");
    // All in one group, ivshmem listed: fine without net and without dom0.
    let t = base(
        "transports = [\"sm\", \"ivshmem\"]",
        "ivshmem = \"g\"",
        "ivshmem = \"g\"",
        false,
    );
    Scenario::from_toml(&t, "t.toml").unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn device_and_relay_nics_need_dom0_and_bridge_does_not() {
    let t = base(
        "transports = [\"sm\", \"net\"]",
        "nic = \"virtio\"",
        "nic = \"virtio\"",
        false,
    );
    assert_eq!(util::field_of(&t), "domains[0].nic");
    let t = base("", "nic = \"bridge\"", "nic = \"emulated\"", false);
    assert_eq!(util::field_of(&t), "domains[1].nic");
    let t = base("", "nic = \"bridge\"", "nic = \"bridge\"", false);
    Scenario::from_toml(&t, "t.toml").unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn dom0_has_no_nic_or_group_and_groups_have_names() {
    let t = base("", "", "", true).replace("dom0 = true\n", "dom0 = true\nnic = \"virtio\"\n");
    assert_eq!(util::field_of(&t), "domains[0].nic");
    let t = base("", "ivshmem = \"\"", "", true);
    assert_eq!(util::field_of(&t), "domains[1].ivshmem");
}

#[test]
fn new_cost_tables_are_checked_like_the_old() {
    let t = base("[mpi.virtio]\nlatency_ns = 2000000000\nsend_ns = 1\nsend_ns_per_kib = 1\nrecv_ns = 1\nrecv_ns_per_kib = 1", "", "", true);
    assert_eq!(util::field_of(&t), "mpi.virtio.latency_ns");
    let t = base("[mpi.ivshmem]\nlatency_ns = 1\nsend_ns = 1\nsend_ns_per_kib = 1\nrecv_ns = 1\nrecv_ns_per_kib = 1\nwindow = 0", "", "", true);
    assert_eq!(util::field_of(&t), "mpi.ivshmem.chunk_bytes");
}
