//! The audit's writer: a thread that takes records off the queue, renders them
//! ([`super::line`]) and writes them to standard output or to a file rotated by size
//! ([`Rotating`]), and exports them as OpenTelemetry logs ([`super::otlp`]). It drains the queue
//! between short sleeps (a request never wakes it), flushes at least every [`FLUSH_EVERY`], and
//! stops when the last sending end is dropped (a reload that changed `audit:`, or the process
//! ending) after writing what was queued. A sink that cannot be opened or written loses the record, counted, and is tried
//! again on the next one; the error is logged once per failing stretch.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use super::line::Render;
use super::otlp::Otlp;
use super::{AuditMetrics, Event, Record};
use crate::config::audit::{AuditConfig, AuditSink};

/// Written records go out (file, stdout, OTLP) at least this often.
const FLUSH_EVERY: Duration = Duration::from_millis(200);
/// The writer's sleep between drains while records are coming.
const BUSY_NAP: Duration = Duration::from_millis(2);
/// ... and once none came for a second.
const IDLE_NAP: Duration = Duration::from_millis(20);

/// Start the writer thread for `cfg`, reading `rx`.
pub(super) fn spawn(
    cfg: &AuditConfig,
    rx: Receiver<Record>,
    metrics: AuditMetrics,
) -> anyhow::Result<()> {
    let render = Render {
        full: cfg.arguments == crate::config::audit::AuditArguments::Full,
        full_for: cfg.full_for.clone(),
        redact: super::arguments::Redact::new(&cfg.redact)?,
    };
    let sink = match (&cfg.sink, &cfg.file) {
        (AuditSink::File, Some(f)) => Some(Sink::File(Rotating::new(&f.path, f.max_bytes, f.keep))),
        (AuditSink::Stdout, _) => Some(Sink::Stdout(BufWriter::new(std::io::stdout()))),
        _ => None,
    };
    // The OTLP exporter's blocking HTTP client is made outside any async runtime.
    let otlp = match cfg.otlp.clone() {
        Some(o) => Some(
            std::thread::spawn(move || Otlp::new(&o))
                .join()
                .map_err(|_| anyhow::anyhow!("audit.otlp: building the exporter panicked"))??,
        ),
        None => None,
    };
    let mut w = Writer {
        render,
        sink,
        otlp,
        metrics,
        failing: false,
        unflushed: Vec::new(),
        line: Vec::with_capacity(1024),
    };
    std::thread::Builder::new()
        .name("mcp-edge-audit".into())
        .spawn(move || w.run(&rx))?;
    Ok(())
}

struct Writer {
    render: Render,
    sink: Option<Sink>,
    otlp: Option<Otlp>,
    metrics: AuditMetrics,
    /// The sink failed on the last record (its error was logged).
    failing: bool,
    /// The kinds of the records written to the sink's buffer since its last flush.
    unflushed: Vec<&'static str>,
    /// The line being written (its buffer kept from one record to the next).
    line: Vec<u8>,
}

impl Writer {
    /// Take records until every sender is gone. The writer never blocks on the queue: it sleeps
    /// between drains, so a request that queues a record never has to wake it (a push to a
    /// queue nobody waits on costs no system call); what is written is flushed at least every
    /// [`FLUSH_EVERY`], and at the end.
    fn run(&mut self, rx: &Receiver<Record>) {
        let mut flushed = Instant::now();
        let mut pending = false;
        let mut last_record = Instant::now();
        loop {
            match rx.try_recv() {
                Ok(r) => {
                    self.one(&r);
                    pending = true;
                    last_record = Instant::now();
                }
                Err(TryRecvError::Empty) => {
                    // Idle for a while: sleep longer (a queue of `audit.queue` records covers a
                    // burst meanwhile).
                    let nap = if last_record.elapsed() < Duration::from_secs(1) {
                        BUSY_NAP
                    } else {
                        IDLE_NAP
                    };
                    std::thread::sleep(nap);
                }
                Err(TryRecvError::Disconnected) => break,
            }
            if pending && flushed.elapsed() >= FLUSH_EVERY {
                self.flush();
                pending = false;
                flushed = Instant::now();
            }
        }
        self.flush();
    }

    fn one(&mut self, r: &Record) {
        let kind = match r.event {
            Event::Call(_) => "call",
            Event::Flow(_) => "flow",
            Event::Task(_) => "task",
        };
        let fields = self.render.fields(r);
        if let Some(sink) = self.sink.as_mut() {
            self.line.clear();
            fields.write_line(&mut self.line);
            let line = &self.line;
            let m = &self.metrics;
            match sink.write(line) {
                Ok(()) => {
                    self.failing = false;
                    // Counted once flushed: then it is in the sink.
                    self.unflushed.push(kind);
                }
                Err(e) => {
                    if !self.failing {
                        tracing::error!("audit: {e}; records are lost (mcp_edge_audit_dropped_total{{why=\"sink_error\"}}) until the sink works again");
                    }
                    self.failing = true;
                    m.dropped.with_label_values(&["sink_error"]).inc();
                }
            }
        }
        if let Some(o) = self.otlp.as_mut() {
            o.push(r.time, &fields, kind, &self.metrics);
        }
    }

    /// What is buffered goes out, and the records it held are counted as written (or, when
    /// the flush fails, as lost).
    fn flush(&mut self) {
        if let Some(sink) = self.sink.as_mut() {
            let m = &self.metrics;
            let done = sink.flush();
            for kind in self.unflushed.drain(..) {
                match &done {
                    Ok(()) => m.written.with_label_values(&[kind, sink.name()]).inc(),
                    Err(_) => m.dropped.with_label_values(&["sink_error"]).inc(),
                }
            }
            if let Err(e) = done {
                tracing::error!("audit: flushing the sink: {e}");
            }
        }
        if let Some(o) = self.otlp.as_mut() {
            o.export(&self.metrics);
        }
    }
}

enum Sink {
    Stdout(BufWriter<std::io::Stdout>),
    File(Rotating),
}

impl Sink {
    fn name(&self) -> &'static str {
        match self {
            Sink::Stdout(_) => "stdout",
            Sink::File(_) => "file",
        }
    }

    fn write(&mut self, line: &[u8]) -> std::io::Result<()> {
        match self {
            Sink::Stdout(w) => w.write_all(line),
            Sink::File(f) => f.write(line),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Stdout(w) => w.flush(),
            Sink::File(f) => f.flush(),
        }
    }
}

/// A file of JSON lines that never grows past `max_bytes` (unless one line is longer): before
/// a line would take it past, `path.<keep-1>` becomes `path.<keep>`, ..., `path` becomes
/// `path.1`, and a new `path` is started. Opened on first use (a FIFO's open waits for its
/// reader here, on the writer thread, never in the gateway).
pub(crate) struct Rotating {
    path: PathBuf,
    max_bytes: u64,
    keep: u32,
    file: Option<BufWriter<File>>,
    size: u64,
    /// The file is a regular file (a FIFO or a device is never rotated).
    regular: bool,
}

impl Rotating {
    pub(crate) fn new(path: &Path, max_bytes: u64, keep: u32) -> Self {
        Rotating {
            path: path.to_path_buf(),
            max_bytes,
            keep,
            file: None,
            size: 0,
            regular: false,
        }
    }

    fn open(&mut self) -> std::io::Result<&mut BufWriter<File>> {
        if self.file.is_none() {
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .map_err(|e| with_path(e, &self.path))?;
            let meta = f.metadata().ok();
            self.size = meta.as_ref().map_or(0, |m| m.len());
            self.regular = meta.is_some_and(|m| m.is_file());
            self.file = Some(BufWriter::with_capacity(64 << 10, f));
        }
        Ok(self.file.as_mut().expect("opened above"))
    }

    pub(crate) fn write(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.open()?;
        if self.regular && self.size > 0 && self.size + line.len() as u64 > self.max_bytes {
            self.rotate()?;
        }
        let f = self.open()?;
        if let Err(e) = f.write_all(line) {
            self.file = None; // opened again on the next record
            return Err(with_path(e, &self.path));
        }
        self.size += line.len() as u64;
        Ok(())
    }

    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        match self.file.as_mut() {
            Some(f) => f.flush().map_err(|e| with_path(e, &self.path)),
            None => Ok(()),
        }
    }

    fn rotated(&self, n: u32) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        if let Some(mut f) = self.file.take() {
            f.flush().map_err(|e| with_path(e, &self.path))?;
        }
        for n in (1..self.keep).rev() {
            let from = self.rotated(n);
            if from.exists() {
                std::fs::rename(&from, self.rotated(n + 1))?;
            }
        }
        if self.keep >= 1 {
            std::fs::rename(&self.path, self.rotated(1))?;
        } else {
            std::fs::remove_file(&self.path)?;
        }
        self.size = 0;
        Ok(())
    }
}

fn with_path(e: std::io::Error, path: &Path) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(p: &Path) -> Vec<String> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn rotation_keeps_files_under_max_bytes_and_keep_of_them() {
        let dir = std::env::temp_dir().join(format!("mcp-edge-audit-rot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.jsonl");
        let mut r = Rotating::new(&path, 100, 2);
        // 10 lines of 30 bytes: 3 per file (90 bytes), the 4th would pass 100.
        for i in 0..10 {
            r.write(format!("{{\"n\":{i:02},\"pad\":\"xxxxxxxxxxxx\"}}\n").as_bytes())
                .unwrap();
        }
        r.flush().unwrap();
        let (cur, one, two) = (lines(&path), lines(&r.rotated(1)), lines(&r.rotated(2)));
        assert_eq!((cur.len(), one.len(), two.len()), (1, 3, 3));
        assert!(
            cur[0].contains("\"n\":09") && one[0].contains("\"n\":06"),
            "{cur:?} {one:?}"
        );
        assert!(two[0].contains("\"n\":03"), "{two:?}");
        assert!(!r.rotated(3).exists(), "only keep: 2 rotated files");
        for p in [&path, &r.rotated(1), &r.rotated(2)] {
            assert!(std::fs::metadata(p).unwrap().len() <= 100);
        }
        // A restart appends to the current file and counts its size.
        let mut again = Rotating::new(&path, 100, 2);
        again.write(b"{\"n\":10}\n").unwrap();
        again.flush().unwrap();
        assert_eq!(lines(&path).len(), 2);
        // keep: 0 starts over without a rotated file.
        let solo = dir.join("solo.jsonl");
        let mut s = Rotating::new(&solo, 50, 0);
        for _ in 0..3 {
            s.write(&[b'x'; 29]).unwrap();
        }
        s.flush().unwrap();
        assert_eq!(std::fs::metadata(&solo).unwrap().len(), 29);
        assert!(!s.rotated(1).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
