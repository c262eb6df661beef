//! `import framepipe`: the Rust pipeline run from Python. `framepipe.open(*inputs, **options)`
//! takes the command line's inputs and flags (`filter="gauss:2"` is `--filter gauss:2`, a
//! `True` is a flag given, a list a flag repeated), runs the same pipeline on a thread of
//! its own (`app::run_embedded`), and yields every input's processed frames, in order, as
//! `Frame`s whose pixels NumPy reads without a copy (`np.asarray(frame)`, through the array
//! interface).
//!
//! Invariants: a run's frames are handed over through a bounded channel, so a slow loop
//! makes a file wait and a live input drop (counted, as for any slow output); waiting for a
//! frame never holds the GIL, and a signal (Ctrl-C) raises in the loop within 0.1 s;
//! `close()` (or leaving a `with` block, or dropping the run) asks the run to stop and waits
//! for it, so every output it writes is finalized; a run that failed raises its error, one
//! line, where the loop would have ended.

// pyo3 0.22's #[pymethods] and #[pyfunction] expand a `PyErr` into itself (`.into()`),
// which clippy sees in our signatures.
#![allow(clippy::useless_conversion)]

use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use framepipe::pixel::PixelFormat;
use framepipe::sink::handover::{HandTo, Handed};
use framepipe::stop::Stop;

/// How long a wait for a frame goes without looking at Python's signals.
const POLL: Duration = Duration::from_millis(100);

/// Frames between the run and the loop: a slow loop holds the run back after these.
const QUEUED: usize = 2;

/// One processed frame: which input, its place and time, its size and format, its pixels.
#[pyclass(module = "framepipe", frozen)]
struct Frame {
    handed: Handed,
    name: String,
}

#[pymethods]
impl Frame {
    /// The input's number (the order the inputs were given in).
    #[getter]
    fn input(&self) -> usize {
        self.handed.input
    }
    /// The input as it was given.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }
    /// The frame's place in its input (0, 1, 2, ...).
    #[getter]
    fn index(&self) -> u64 {
        self.handed.index
    }
    /// Its time as the source gave it, a `fractions.Fraction` of seconds (None without).
    #[getter]
    fn pts<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some((ticks, (num, den))) = self.handed.pts else {
            return Ok(None);
        };
        let fraction = py.import_bound("fractions")?.getattr("Fraction")?;
        let top = i128::from(ticks) * i128::from(num);
        Ok(Some(fraction.call1((top, i128::from(den)))?))
    }
    /// The same in seconds (None without).
    #[getter]
    fn seconds(&self) -> Option<f64> {
        self.handed.seconds
    }
    /// Width in pixels.
    #[getter]
    fn width(&self) -> usize {
        self.handed.size.width
    }
    /// Height in pixels.
    #[getter]
    fn height(&self) -> usize {
        self.handed.size.height
    }
    /// The pixels' format: "bgr24", "i420", "nv12" or "gray".
    #[getter]
    fn format(&self) -> String {
        self.handed.format.to_string()
    }
    /// The array's shape: (height, width, 3) for BGR, (height, width) for gray, and
    /// (height * 3 / 2, width) for I420 and NV12 (their planes one after another, as a
    /// YUV4MPEG2 frame and OpenCV lay them out).
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> Bound<'py, PyTuple> {
        let (w, h) = (self.handed.size.width, self.handed.size.height);
        match self.handed.format {
            PixelFormat::Bgr24 => PyTuple::new_bound(py, [h, w, 3]),
            PixelFormat::Gray => PyTuple::new_bound(py, [h, w]),
            _ => PyTuple::new_bound(py, [self.handed.bytes.len() / w, w]),
        }
    }
    /// The pixels as `bytes` (a copy).
    fn tobytes<'py>(&self, py: Python<'py>) -> Bound<'py, pyo3::types::PyBytes> {
        pyo3::types::PyBytes::new_bound(py, &self.handed.bytes)
    }
    fn __len__(&self) -> usize {
        self.handed.bytes.len()
    }
    /// NumPy's array interface (version 3): `np.asarray(frame)` reads the frame's own
    /// memory, read-only, and keeps the frame alive while the array lives.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new_bound(py);
        d.set_item("version", 3)?;
        d.set_item("shape", self.shape(py))?;
        d.set_item("typestr", "|u1")?;
        d.set_item("data", (self.handed.bytes.as_ptr() as usize, true))?;
        Ok(d)
    }
    fn __repr__(&self) -> String {
        let h = &self.handed;
        format!(
            "<framepipe.Frame input {} frame {} {} {}>",
            h.input, h.index, h.size, h.format
        )
    }
}

/// A running pipeline: iterate it for its frames; `close()` ends it.
#[pyclass(module = "framepipe")]
struct Run {
    frames: Option<Receiver<Handed>>,
    stop: Stop,
    thread: Option<JoinHandle<framepipe::app::Ran>>,
    names: Vec<String>,
}

impl Run {
    /// Stops the run (where it still goes) and waits for it; its error, if it failed.
    fn end(&mut self, py: Python<'_>) -> Option<String> {
        self.stop.request();
        self.frames = None; // a run waiting to hand a frame over sees the reader gone
        let thread = self.thread.take()?;
        let ran = py.allow_threads(|| thread.join());
        match ran {
            Ok(ran) => ran.result.err().map(|e| format!("{e:#}")),
            Err(_) => Some("the run's thread panicked".into()),
        }
    }
}

#[pymethods]
impl Run {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Frame>> {
        loop {
            let Some(rx) = self.frames.clone() else {
                return Ok(None);
            };
            match py.allow_threads(|| rx.recv_timeout(POLL)) {
                Ok(handed) => {
                    let name = self.names.get(handed.input).cloned().unwrap_or_default();
                    return Ok(Some(Frame { handed, name }));
                }
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(e) = py.check_signals() {
                        self.end(py);
                        return Err(e);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return match self.end(py) {
                        Some(e) => Err(PyRuntimeError::new_err(e)),
                        None => Ok(None),
                    };
                }
            }
        }
    }

    /// Stops the run and waits until it has ended, its outputs finalized. Raises the run's
    /// error where it failed.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        match self.end(py) {
            Some(e) => Err(PyRuntimeError::new_err(e)),
            None => Ok(()),
        }
    }

    /// Whether the run has ended (closed, or every frame taken).
    #[getter]
    fn closed(&self) -> bool {
        self.thread.is_none()
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*exc))]
    fn __exit__(&mut self, py: Python<'_>, exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        // An error of the run's own is not raised over the exception that left the block.
        let failed = self.end(py);
        match (failed, exc.get_item(0).map(|t| t.is_none()).unwrap_or(true)) {
            (Some(e), true) => Err(PyRuntimeError::new_err(e)),
            _ => Ok(false),
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.stop.request();
        self.frames = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The command line `inputs` and `options` make (module doc), and the format asked for.
fn command_line(
    inputs: &Bound<'_, PyTuple>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(Vec<String>, PixelFormat)> {
    let mut argv = vec!["framepipe".to_string()];
    for input in inputs.iter() {
        argv.push("--input".into());
        argv.push(input.str()?.to_string());
    }
    let (mut format, mut headless) = (PixelFormat::Bgr24, true);
    for (key, value) in options.into_iter().flat_map(|d| d.iter()) {
        let key: String = key.extract()?;
        match key.as_str() {
            "format" => {
                let text: String = value.extract()?;
                format = PixelFormat::from_name(&text)
                    .filter(|f| f.writable())
                    .ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "format={text:?}: not a format frames are given in (bgr24, i420, nv12, gray)"
                        ))
                    })?;
                continue;
            }
            "headless" => {
                headless = value.is_truthy()?;
                continue;
            }
            _ => {}
        }
        let flag = format!("--{}", key.replace('_', "-"));
        if value.is_none() {
            continue;
        }
        if let Ok(b) = value.downcast::<pyo3::types::PyBool>() {
            if b.is_true() {
                argv.push(flag);
            }
            continue;
        }
        let values: Vec<Bound<'_, PyAny>> = match value.downcast::<PyList>() {
            Ok(list) => list.iter().collect(),
            Err(_) => match value.downcast::<PyTuple>() {
                Ok(t) => t.iter().collect(),
                Err(_) => vec![value],
            },
        };
        for v in values {
            argv.push(flag.clone());
            argv.push(v.str()?.to_string());
        }
    }
    if headless {
        argv.push("--headless".into());
    }
    Ok((argv, format))
}

/// Runs framepipe over `inputs` with `options` (the command line's flags) and returns the
/// running `Run`; `format` ("bgr24" by default, "i420", "nv12", "gray") is the frames'
/// format, and `headless=False` shows the window too.
#[pyfunction]
#[pyo3(signature = (*inputs, **options))]
fn open(inputs: &Bound<'_, PyTuple>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Run> {
    use clap::Parser;
    let (argv, format) = command_line(inputs, options)?;
    let cli = framepipe::cli::Cli::try_parse_from(&argv).map_err(|e| {
        let text = e.to_string();
        let line = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("bad options");
        PyValueError::new_err(line.trim_start_matches("error: ").to_string())
    })?;
    if cli.command.is_some() {
        return Err(PyValueError::new_err("framepipe.open runs the pipeline; bench, doctor and check-kernel are the command line's"));
    }
    let level = match (cli.run.quiet, cli.run.verbose) {
        (true, _) => framepipe::msg::Level::Quiet,
        (_, true) => framepipe::msg::Level::Verbose,
        _ => framepipe::msg::Level::Normal,
    };
    framepipe::msg::set_level(level);
    let names: Vec<String> = cli.run.input.clone();
    let (to, frames) = crossbeam_channel::bounded(QUEUED);
    let stop = Stop::new();
    let hand = HandTo {
        to,
        format,
        stop: stop.clone(),
    };
    let args = cli.run;
    let thread = std::thread::Builder::new()
        .name("framepipe run".into())
        .spawn(move || framepipe::app::run_embedded(args, hand))
        .map_err(|e| PyRuntimeError::new_err(format!("starting the run's thread: {e}")))?;
    Ok(Run {
        frames: Some(frames),
        stop,
        thread: Some(thread),
        names,
    })
}

/// The Python module.
#[pymodule]
#[pyo3(name = "framepipe")]
fn framepipe_py(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_class::<Run>()?;
    m.add_class::<Frame>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
