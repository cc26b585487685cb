//! Chrome / Perfetto trace output: one track per core, one slice per stretch
//! a vCPU ran there. Opens in ui.perfetto.dev or chrome://tracing.

use serde_json::{json, Value};

/// One stretch of a vCPU on a core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    pub core: u32,
    pub vcpu: u32,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// The Trace Event Format document: `X` (complete) events in microseconds,
/// with thread names naming the cores.
pub fn chrome_trace(slices: &[Slice], cores: usize, vcpu_names: &[String]) -> Value {
    let mut events: Vec<Value> = (0..cores)
        .map(|c| json!({"ph": "M", "name": "thread_name", "pid": 0, "tid": c, "args": {"name": format!("core {c}")}}))
        .collect();
    events.push(json!({"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "host"}}));
    events.extend(slices.iter().map(|s| {
        json!({
            "ph": "X",
            "name": vcpu_names[s.vcpu as usize],
            "cat": "vcpu",
            "pid": 0,
            "tid": s.core,
            "ts": s.start_ns as f64 / 1e3,
            "dur": (s.end_ns - s.start_ns) as f64 / 1e3,
        })
    }));
    json!({"traceEvents": events, "displayTimeUnit": "ms"})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_become_complete_events_on_core_tracks() {
        let doc = chrome_trace(
            &[Slice {
                core: 1,
                vcpu: 0,
                start_ns: 1500,
                end_ns: 4500,
            }],
            2,
            &["dom1.v0".into()],
        );
        let events = doc["traceEvents"].as_array().unwrap();
        let x: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(x.len(), 1);
        assert_eq!(x[0]["tid"], 1);
        assert_eq!(x[0]["ts"], 1.5);
        assert_eq!(x[0]["dur"], 3.0);
        assert_eq!(x[0]["name"], "dom1.v0");
        assert_eq!(
            events.iter().filter(|e| e["name"] == "thread_name").count(),
            2
        );
    }
}
