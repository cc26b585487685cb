//! Chrome / Perfetto trace output: one track per core, one slice per stretch
//! a vCPU ran there. Opens in ui.perfetto.dev or chrome://tracing.

use serde_json::{json, Value};

/// Slices kept at most: a traced one-hour run of a large host would
/// otherwise fill memory and write gigabytes no viewer opens.
pub const TRACE_LIMIT: usize = 1_000_000;

/// Collects slices during a run, up to a limit ([`TRACE_LIMIT`] by default).
#[derive(Debug)]
pub struct Recorder {
    slices: Vec<Slice>,
    limit: usize,
    /// When the limit was reached (ns); later slices were dropped.
    cut_at: Option<u64>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::with_limit(TRACE_LIMIT)
    }
}

impl Recorder {
    pub fn with_limit(limit: usize) -> Self {
        Recorder {
            slices: Vec::new(),
            limit,
            cut_at: None,
        }
    }

    pub fn record(&mut self, slice: Slice) {
        if self.slices.len() < self.limit {
            self.slices.push(slice);
        } else if self.cut_at.is_none() {
            self.cut_at = Some(slice.start_ns);
        }
    }

    /// The trace document, slices ordered by core then start.
    pub fn into_chrome(mut self, cores: usize, vcpu_names: &[String]) -> Value {
        self.slices.sort_by_key(|s| (s.core, s.start_ns));
        let mut doc = chrome_trace(&self.slices, cores, vcpu_names);
        if let Some(at) = self.cut_at {
            doc["otherData"] =
                json!({"truncated_at_us": at as f64 / 1e3, "slice_limit": self.limit});
        }
        doc
    }
}

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
    fn recorder_stops_at_the_limit_and_says_when() {
        let mut r = Recorder::with_limit(10);
        for i in 0..15 {
            r.record(Slice {
                core: 0,
                vcpu: 0,
                start_ns: 2000 * i,
                end_ns: 2000 * i + 1,
            });
        }
        let doc = r.into_chrome(1, &["v".into()]);
        let kept = doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .count();
        assert_eq!(kept, 10);
        assert_eq!(doc["otherData"]["truncated_at_us"], 20.0);
        assert_eq!(doc["otherData"]["slice_limit"], 10);
    }

    #[test]
    fn untruncated_traces_carry_no_marker() {
        let mut r = Recorder::default();
        r.record(Slice {
            core: 0,
            vcpu: 0,
            start_ns: 0,
            end_ns: 1,
        });
        assert!(r.into_chrome(1, &["v".into()]).get("otherData").is_none());
    }

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
