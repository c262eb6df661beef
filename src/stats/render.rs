//! How the exit summary is written: for people (`Summary::render`, the lines the run
//! prints) and for machines (`Summary::to_json`, `--summary-json`). The counts are `stats`'s.

use std::fmt::Write as _;

use super::*;

impl Summary {
    /// The summary for machines (`--summary-json`): the counts, times and changes of
    /// `render`, and `error` when the run failed.
    pub fn to_json(&self, error: Option<&str>) -> serde_json::Value {
        let (c, p) = (&self.capture, &self.process);
        let per = |total: f64, n: u64| if n == 0 { 0.0 } else { total / n as f64 };
        let overlap = self.trace.as_ref().and_then(|t| t.overlap()).map(|o| {
            serde_json::json!({
                "window_ms": o.window_ms,
                "h2d_busy": o.h2d_busy,
                "d2h_busy": o.d2h_busy,
                "both": o.both,
            })
        });
        serde_json::json!({
            "ok": error.is_none(),
            "error": error,
            "frames": {
                "captured": c.captured,
                "processed": p.processed,
                "consumed": self.sink_stats.consumed,
                "written": self.written(),
                "dropped": c.dropped,
            },
            "sink": self.sink,
            "input": self.input,
            "backend": self.backend,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "fps": self.fps(),
            "per_frame_ms": {
                "capture": per(c.read_ms, c.captured),
                "process": per(p.latency_ms, p.processed),
                "output": per(self.sink_stats.sink_ms, self.sink_stats.consumed),
            },
            "gpu_per_frame_ms": (p.stage_frames > 0).then(|| serde_json::json!({
                "h2d": p.stages.h2d_ms / p.stage_frames as f64,
                "kernels": p.stages.kernel_ms / p.stage_frames as f64,
                "d2h": p.stages.d2h_ms / p.stage_frames as f64,
                "span": p.stages.span_ms / p.stage_frames as f64,
            })),
            "changes": p.controls,
            "pauses": self.sink_stats.pauses,
            "overlap": overlap,
            "reloads": self.reloads,
            "inputs": self.inputs.iter().map(InputStats::to_json).collect::<Vec<_>>(),
            "streams": self.sink_stats.streams,
            "mosaic": self.sink_stats.mosaic,
            "detection": self.sink_stats.detection,
        })
    }

    /// The multi-line text printed at exit.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let c = &self.capture;
        let p = &self.process;
        if !self.input.is_empty() {
            let _ = writeln!(out, "input: {}", self.input);
        }
        let _ = writeln!(
            out,
            "frames: {} captured, {} processed, {} {}, {} dropped",
            c.captured,
            p.processed,
            self.written(),
            self.sink,
            c.dropped
        );
        let _ = writeln!(
            out,
            "time: {:.2} s, {:.1} fps average; backend: {}",
            self.elapsed.as_secs_f64(),
            self.fps(),
            self.backend
        );
        let _ = write!(
            out,
            "per frame: capture {:.3} ms, process {:.3} ms (submit to ready), output {:.3} ms",
            avg(c.read_ms, c.captured),
            avg(p.latency_ms, p.processed),
            avg(self.sink_stats.sink_ms, self.sink_stats.consumed)
        );
        self.render_inputs(&mut out);
        self.render_outputs(&mut out);
        self.render_changes(&mut out);
        self.render_gpu(&mut out);
        out
    }

    /// Each input's line, where there are several.
    fn render_inputs(&self, out: &mut String) {
        if self.inputs.len() > 1 {
            for (i, n) in self.inputs.iter().enumerate() {
                let _ = write!(
                    out,
                    "\ninput {i}: {}\n  {} captured, {} {}, {} dropped, {} reconnects; latency {:.2} ms mean, {:.2} ms p99{}",
                    n.name,
                    n.captured,
                    n.stored.unwrap_or(n.consumed),
                    self.sink,
                    n.dropped,
                    n.reconnects,
                    n.latency.mean_ms(),
                    n.latency.quantile_ms(0.99),
                    match n.ended.as_deref() {
                        Some(e) if e.starts_with("failed") => format!("; {e}"),
                        _ => String::new(),
                    }
                );
            }
        }
    }

    /// Each stream's line and the mosaic's recording.
    fn render_outputs(&self, out: &mut String) {
        for st in &self.sink_stats.streams {
            let _ = write!(
                out,
                "\nstream {}: {} of {} frames sent, {} dropped, {} reconnect(s)",
                st.url, st.sent, st.taken, st.dropped, st.reconnects
            );
        }
        if let Some(m) = &self.sink_stats.mosaic {
            let _ = write!(
                out,
                "\nmosaic: {} pictures written to {} (one a tick of its rate, by the run's clock)",
                m.pictures, m.to
            );
        }
    }

    /// What changed while the run ran: the window's controls, pauses, kernel reloads.
    fn render_changes(&self, out: &mut String) {
        let p = &self.process;
        if !p.controls.is_empty() {
            let _ = write!(out, "\nchanges while running: {}", p.controls.join(", "));
        }
        if self.sink_stats.pauses > 0 {
            let _ = write!(out, "\npaused {} time(s)", self.sink_stats.pauses);
        }
        if !self.reloads.is_empty() {
            let failed = self.reloads.iter().filter(|r| r.error.is_some()).count();
            let _ = write!(
                out,
                "\nkernel reloads: {} swapped in, {failed} failed",
                self.reloads.len() - failed
            );
            for r in &self.reloads {
                let what = match (&r.chain, &r.error) {
                    (Some(chain), _) => format!("now {chain}"),
                    (None, Some(e)) => format!("failed: {}", e.lines().nth(1).unwrap_or(e)),
                    (None, None) => String::new(),
                };
                let _ = write!(out, "\n  {:.1} s, {}: {what}", r.at_s, r.cause);
            }
        }
    }

    /// The GPU's stages per frame, where they were timed.
    fn render_gpu(&self, out: &mut String) {
        let p = &self.process;
        if p.stage_frames > 0 {
            let n = p.stage_frames;
            let _ = write!(
                out,
                "\ngpu per frame: H2D {:.3} ms, kernels {:.3} ms, D2H {:.3} ms (summed over bands), first copy to last {:.3} ms",
                avg(p.stages.h2d_ms, n),
                avg(p.stages.kernel_ms, n),
                avg(p.stages.d2h_ms, n),
                avg(p.stages.span_ms, n)
            );
        }
    }
}
