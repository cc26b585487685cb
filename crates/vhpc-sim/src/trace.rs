//! Chrome / Perfetto trace output: one track per core, one slice per stretch
//! a vCPU ran there. Opens in ui.perfetto.dev or chrome://tracing.
//!
//! The trace is written as the run goes ([`Recorder`] streams each slice to
//! its [`Sink`], a buffered file or a byte vector), so tracing costs a write
//! buffer, not memory per slice. The document is
//! `{"displayTimeUnit":"ms","traceEvents":[...],"otherData":{...}}`: the
//! metadata events (core names, the host) first, then the slices in the order
//! they ended; `otherData` only when the slice limit cut the trace.

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};

use serde::Serialize;

/// Slices written at most: a traced one-hour run of a large host would
/// otherwise write gigabytes no viewer opens (a million slices make a file
/// of about 90 MB).
pub const TRACE_LIMIT: usize = 1_000_000;

/// Bytes the file sink buffers before it writes.
pub const BUFFER_BYTES: usize = 1 << 16;

/// Where a trace goes.
#[derive(Debug)]
pub enum Sink {
    /// Kept in memory (for callers that want the document as text).
    Memory(Vec<u8>),
    /// Streamed to a file through a [`BUFFER_BYTES`] buffer.
    File(BufWriter<File>),
}

impl Sink {
    /// A sink streaming to `file`.
    pub fn file(file: File) -> Sink {
        Sink::File(BufWriter::with_capacity(BUFFER_BYTES, file))
    }

    /// The document, for a memory sink.
    pub fn into_bytes(self) -> Option<Vec<u8>> {
        match self {
            Sink::Memory(bytes) => Some(bytes),
            Sink::File(_) => None,
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Memory(v) => v.write(buf),
            Sink::File(f) => f.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Sink::Memory(v) => v.write_all(buf),
            Sink::File(f) => f.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Memory(_) => Ok(()),
            Sink::File(f) => f.flush(),
        }
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

// The events as the Trace Event Format has them, fields in alphabetical
// order (the order serde_json gave them when the trace was a `Value`).

#[derive(Serialize)]
struct Named<'a> {
    name: &'a str,
}

#[derive(Serialize)]
struct ThreadName<'a> {
    args: Named<'a>,
    name: &'static str,
    ph: &'static str,
    pid: u32,
    tid: usize,
}

#[derive(Serialize)]
struct ProcessName<'a> {
    args: Named<'a>,
    name: &'static str,
    ph: &'static str,
    pid: u32,
}

#[derive(Serialize)]
struct Complete<'a> {
    cat: &'static str,
    dur: f64,
    name: &'a str,
    ph: &'static str,
    pid: u32,
    tid: u32,
    ts: f64,
}

#[derive(Serialize)]
struct Cut {
    slice_limit: usize,
    truncated_at_us: f64,
}

/// Streams a run's slices to a [`Sink`], up to a limit ([`TRACE_LIMIT`] by
/// default). A write error stops the writing; [`Recorder::finish`] returns it.
pub struct Recorder {
    out: Sink,
    vcpu_names: Vec<String>,
    limit: usize,
    written: usize,
    /// When the limit was reached (ns); later slices were dropped.
    cut_at: Option<u64>,
    error: Option<io::Error>,
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("limit", &self.limit)
            .field("written", &self.written)
            .field("cut_at", &self.cut_at)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// Starts the document on `out`: one track per core, named `core N`;
    /// slices are named after `vcpu_names` (indexed by vCPU id).
    pub fn new(out: Sink, cores: usize, vcpu_names: Vec<String>) -> Self {
        Self::with_limit(out, cores, vcpu_names, TRACE_LIMIT)
    }

    pub fn with_limit(out: Sink, cores: usize, vcpu_names: Vec<String>, limit: usize) -> Self {
        let mut r = Recorder {
            out,
            vcpu_names,
            limit,
            written: 0,
            cut_at: None,
            error: None,
        };
        let head = (|| -> io::Result<()> {
            r.out
                .write_all(br#"{"displayTimeUnit":"ms","traceEvents":["#)?;
            for c in 0..cores {
                if c > 0 {
                    r.out.write_all(b",")?;
                }
                let name = format!("core {c}");
                let event = ThreadName {
                    args: Named { name: &name },
                    name: "thread_name",
                    ph: "M",
                    pid: 0,
                    tid: c,
                };
                serde_json::to_writer(&mut r.out, &event)?;
            }
            if cores > 0 {
                r.out.write_all(b",")?;
            }
            let host = ProcessName {
                args: Named { name: "host" },
                name: "process_name",
                ph: "M",
                pid: 0,
            };
            serde_json::to_writer(&mut r.out, &host)?;
            Ok(())
        })();
        r.error = head.err();
        r
    }

    /// Writes one slice (or, past the limit, notes when the trace stops).
    pub fn record(&mut self, slice: Slice) {
        if self.written >= self.limit {
            if self.cut_at.is_none() {
                self.cut_at = Some(slice.start_ns);
            }
            return;
        }
        self.written += 1;
        if self.error.is_some() {
            return;
        }
        let event = Complete {
            cat: "vcpu",
            dur: (slice.end_ns - slice.start_ns) as f64 / 1e3,
            name: &self.vcpu_names[slice.vcpu as usize],
            ph: "X",
            pid: 0,
            tid: slice.core,
            ts: slice.start_ns as f64 / 1e3,
        };
        let out = &mut self.out;
        let res = out
            .write_all(b",")
            .and_then(|()| serde_json::to_writer(&mut *out, &event).map_err(io::Error::from));
        if let Err(e) = res {
            self.error = Some(e);
        }
    }

    /// Slices written so far.
    pub fn written(&self) -> usize {
        self.written
    }

    /// Ends the document (saying where the limit cut it, if it did) and
    /// flushes; the sink, or the first write error.
    pub fn finish(mut self) -> io::Result<Sink> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.write_all(b"]")?;
        if let Some(at) = self.cut_at {
            self.out.write_all(br#","otherData":"#)?;
            let cut = Cut {
                slice_limit: self.limit,
                truncated_at_us: at as f64 / 1e3,
            };
            serde_json::to_writer(&mut self.out, &cut)?;
        }
        self.out.write_all(b"}")?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn slice(core: u32, vcpu: u32, start_ns: u64, end_ns: u64) -> Slice {
        Slice {
            core,
            vcpu,
            start_ns,
            end_ns,
        }
    }

    fn document(r: Recorder) -> Value {
        let bytes = r.finish().unwrap().into_bytes().unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[test]
    fn recorder_stops_at_the_limit_and_says_when() {
        let mut r = Recorder::with_limit(Sink::Memory(Vec::new()), 1, vec!["v".into()], 10);
        for i in 0..15 {
            r.record(slice(0, 0, 2000 * i, 2000 * i + 1));
        }
        assert_eq!(r.written(), 10);
        let doc = document(r);
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
        let mut r = Recorder::new(Sink::Memory(Vec::new()), 1, vec!["v".into()]);
        r.record(slice(0, 0, 0, 1));
        assert!(document(r).get("otherData").is_none());
    }

    #[test]
    fn slices_become_complete_events_on_core_tracks() {
        let mut r = Recorder::new(Sink::Memory(Vec::new()), 2, vec!["dom1.v0".into()]);
        r.record(slice(1, 0, 1500, 4500));
        let doc = document(r);
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
        assert_eq!(doc["displayTimeUnit"], "ms");
    }

    /// Each event is written exactly as serde_json wrote the `Value` the
    /// trace used to be built as (keys in alphabetical order).
    #[test]
    fn events_are_byte_for_byte_what_the_value_form_gave() {
        let mut r = Recorder::with_limit(Sink::Memory(Vec::new()), 2, vec!["d.v0".into()], 1);
        r.record(slice(1, 0, 1234, 5678));
        r.record(slice(0, 0, 9000, 9001));
        let text = String::from_utf8(r.finish().unwrap().into_bytes().unwrap()).unwrap();
        let old = [
            json!({"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": {"name": "core 0"}}),
            json!({"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "core 1"}}),
            json!({"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "host"}}),
            json!({"ph": "X", "name": "d.v0", "cat": "vcpu", "pid": 0, "tid": 1,
                   "ts": 1234.0 / 1e3, "dur": 4444.0 / 1e3}),
        ];
        let events: Vec<String> = old.iter().map(|v| v.to_string()).collect();
        let cut = json!({"truncated_at_us": 9.0, "slice_limit": 1});
        let want = format!(
            r#"{{"displayTimeUnit":"ms","traceEvents":[{}],"otherData":{cut}}}"#,
            events.join(",")
        );
        assert_eq!(text, want);
    }

    #[test]
    fn a_file_sink_streams_and_a_write_error_is_returned() {
        let dir = std::env::temp_dir().join(format!("vhpc-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.json");
        let mut r = Recorder::new(
            Sink::file(File::create(&path).unwrap()),
            1,
            vec!["v".into()],
        );
        for i in 0..10_000 {
            r.record(slice(0, 0, 10 * i, 10 * i + 5));
        }
        // More than the buffer holds is on disk before the end.
        assert!(std::fs::metadata(&path).unwrap().len() > BUFFER_BYTES as u64 / 2);
        assert!(r.finish().unwrap().into_bytes().is_none());
        let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(doc["traceEvents"].as_array().unwrap().len(), 10_002);
        std::fs::remove_dir_all(&dir).unwrap();

        // /dev/full fails every write: the error comes back, nothing panics.
        if let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
            let mut r = Recorder::new(Sink::file(full), 4, vec!["v".into()]);
            for i in 0..100_000 {
                r.record(slice(0, 0, i, i + 1));
            }
            let err = r.finish().unwrap_err();
            assert!(err.to_string().contains("space"), "{err}");
        }
    }
}
