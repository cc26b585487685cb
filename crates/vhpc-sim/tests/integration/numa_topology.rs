//! Host topologies and memory settings the checks reject, each naming the
//! field; presets fill the topology and refuse contradictions.

use vhpc_sim::Scenario;

const BASE: &str = r#"
[host]
HOST
[[domains]]
name = "vm"
vcpus = 2
DOMAIN
[[jobs]]
name = "j"
workload = "npb.cg"
ranks = ["vm", "vm"]
params = { class = "S" }
MEMORY
"#;

fn field_of(host: &str, domain: &str, memory: &str) -> Result<Scenario, String> {
    let text = BASE
        .replace("HOST", host)
        .replace("DOMAIN", domain)
        .replace("MEMORY", memory);
    Scenario::from_toml(&text, "t.toml").map_err(|e| e.field)
}

#[test]
fn a_preset_fills_the_topology() {
    let sc = field_of("preset = \"opteron-numa-4x4\"", "", "[memory]").unwrap();
    assert_eq!(
        (sc.host.cores, sc.host.sockets, sc.host.numa_nodes),
        (16, 4, 4)
    );
    assert_eq!(sc.host.nodes.len(), 4);
    assert_eq!(sc.host.nodes[3].cores, vec![12, 13, 14, 15]);
    assert_eq!(sc.host.distance[0], vec![10, 11, 11, 13]);
    // Agreeing fields beside it are fine.
    assert!(field_of(
        "preset = \"nehalem-numa-2x4\"\ncores = 8\nnuma_nodes = 2",
        "",
        ""
    )
    .is_ok());
}

#[test]
fn invalid_topologies_are_rejected_naming_the_field() {
    let cases: &[(&str, &str, &str, &str)] = &[
        ("preset = \"cray\"", "", "", "host.preset"),
        (
            "preset = \"opteron-numa-4x4\"\ncores = 8",
            "",
            "",
            "host.cores",
        ),
        (
            "preset = \"opteron-numa-4x4\"\nsockets = 2",
            "",
            "",
            "host.sockets",
        ),
        (
            "preset = \"nehalem-numa-2x4\"\ndistance = [[10, 21], [21, 10]]",
            "",
            "",
            "host.distance",
        ),
        (
            "preset = \"nehalem-numa-2x4\"\n[[host.nodes]]\nbandwidth_mb_s = 1",
            "",
            "",
            "host.nodes[0].bandwidth_mb_s",
        ),
        (
            "cores = 4\nnuma_nodes = 2\ndistance = [[10, 20]]",
            "",
            "",
            "host.distance",
        ),
        (
            "cores = 4\nnuma_nodes = 2\ndistance = [[10, 20], [20, 12]]",
            "",
            "",
            "host.distance[1][1]",
        ),
        (
            "cores = 4\nnuma_nodes = 2\ndistance = [[10, 5], [20, 10]]",
            "",
            "",
            "host.distance[0][1]",
        ),
        (
            "cores = 4\nnuma_nodes = 3\n[[host.nodes]]\n[[host.nodes]]",
            "",
            "",
            "host.numa_nodes",
        ),
        (
            "cores = 4\nnuma_nodes = 2\n[[host.nodes]]\n[[host.nodes]]\n[[host.nodes]]",
            "",
            "",
            "host.nodes",
        ),
        (
            "cores = 4\n[[host.nodes]]\ncores = [0, 1]\n[[host.nodes]]\ncores = [1, 2, 3]",
            "",
            "",
            "host.nodes[1].cores",
        ),
        (
            "cores = 4\n[[host.nodes]]\ncores = [0, 1]\n[[host.nodes]]\ncores = [2, 9]",
            "",
            "",
            "host.nodes[1].cores",
        ),
        (
            "cores = 4\n[[host.nodes]]\ncores = [0, 1]\n[[host.nodes]]\ncores = [2]",
            "",
            "",
            "host.nodes",
        ),
        ("cores = 4", "warm = true", "", "domains[0].warm"),
        ("cores = 4", "vnuma = true", "", "domains[0].vnuma"),
        (
            "cores = 4",
            "",
            "[memory]\nplacement = \"interleave\"",
            "memory.placement",
        ),
        (
            "cores = 4",
            "",
            "[memory]\nhost_fault_share_ppm = 1000001",
            "memory.host_fault_share_ppm",
        ),
        ("cores = 4", "mem_mib = 1", "[memory]", "domains[0].mem_mib"),
        (
            "cores = 4\n[[host.nodes]]\nmem_mib = 1",
            "",
            "[memory]\nplacement = \"preallocate\"",
            "domains[0].mem_mib",
        ),
    ];
    for (host, domain, memory, field) in cases {
        let got = field_of(host, domain, memory);
        assert_eq!(
            got.as_ref().err().map(String::as_str),
            Some(*field),
            "{host} / {domain} / {memory}"
        );
    }
}

#[test]
fn openmp_threads_must_share_one_domain() {
    let text = r#"
[host]
cores = 4
[[domains]]
name = "a"
[[domains]]
name = "b"
[mpi]
between_domains = "shm"
[[jobs]]
name = "j"
workload = "npb.omp.cg"
ranks = ["a", "b"]
params = { class = "S" }
"#;
    let err = Scenario::from_toml(text, "t.toml").unwrap_err();
    assert_eq!(err.field, "jobs[0].ranks");
}
