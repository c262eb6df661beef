//! `import framepipe`: the Rust pipeline run from Python. `framepipe.open(*inputs, **options)`
//! takes the command line's inputs and flags (`filter="gauss:2"` is `--filter gauss:2`, a
//! `True` is a flag given, a list a flag repeated), runs the same pipeline on a thread of
//! its own (`app::run_embedded`), and yields every input's processed frames, in order, as
//! `Frame`s whose pixels NumPy reads without a copy (`np.asarray(frame)`, through the array
//! interface), or with `batch=N` as `Batch`es of a frame of each of N inputs (waiting at
//! most `batch_timeout` for them: a live input's latest, a file's next, none of a file's
//! lost); `run.dropped` counts each live input's dropped frames.
//! `format=`, `size=`, `fit=`, `mean=` and `std=` shape frames for a model (RGB bytes or
//! normalised float planes, resized: `sink::handover::Shaping`).
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

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use framepipe::desc::Memory;
use framepipe::frame::FrameSize;
use framepipe::pixel::PixelFormat;

mod dlpack;
mod pixels;
use framepipe::sink::handover::{Fit, HandTo, Handed, Layout, Shaping};
use framepipe::sink::marks::{Mark, Marks};
use framepipe::stop::Stop;
use pixels::Pixels;

/// How long a wait for a frame goes without looking at Python's signals.
const POLL: Duration = Duration::from_millis(100);

/// Frames between the run and the loop: a slow loop holds the run back after these.
const QUEUED: usize = 2;

/// Frames of files a batch of N inputs carries to the next ones, at most, for each input:
/// past them the batch goes out without the inputs it lacks (one that ended, or stalled).
const CARRIED: usize = 4;

/// One processed frame: which input, its place and time, its size and format, its pixels
/// (in host memory, or on the GPU where the CUDA backend lends them).
#[pyclass(module = "framepipe", frozen)]
struct Frame {
    /// What it is (its bytes and memory moved to `pixels`).
    handed: Handed,
    name: String,
    pixels: Pixels,
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
    /// With `detect=MODEL`: the newest boxes found on this frame's input as of this frame,
    /// each a dict of `label`, `score`, `box` ([left, top, right, bottom] in the pixels
    /// of the frame as the pipeline made it, before `size=`) and `track` (the object's id),
    /// as `--detections` writes them; None before the first detection. A file's detected frame has its own boxes
    /// (`detections_frame == index`); a live input's frame the newest found on an earlier
    /// one.
    #[getter]
    fn detections<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        let Some((_, found)) = &self.handed.detections else {
            return Ok(None);
        };
        let list = PyList::empty_bound(py);
        for d in found {
            let one = PyDict::new_bound(py);
            one.set_item("label", &d.label)?;
            one.set_item("score", (f64::from(d.score) * 1e4).round() / 1e4)?;
            one.set_item("box", d.rect.to_vec())?;
            one.set_item("track", d.track)?;
            list.append(one)?;
        }
        Ok(Some(list))
    }
    /// The frame `detections` were found on (None before the first detection).
    #[getter]
    fn detections_frame(&self) -> Option<u64> {
        self.handed.detections.as_ref().map(|d| d.0)
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
    /// The pixels' format: "bgr24", "i420", "nv12", "gray", "rgb24", or the float planes
    /// "rgbf32" and "rgbf16".
    #[getter]
    fn format(&self) -> String {
        self.handed.layout.name()
    }
    /// The element type, as NumPy names it: "uint8", "float32" or "float16".
    #[getter]
    fn dtype(&self) -> &'static str {
        match self.handed.layout.element() {
            (false, _) => "uint8",
            (true, 32) => "float32",
            (true, _) => "float16",
        }
    }
    /// The array's shape: (height, width, 3) for BGR and RGB, (height, width) for gray,
    /// (height * 3 / 2, width) for I420 and NV12 (their planes one after another, as a
    /// YUV4MPEG2 frame and OpenCV lay them out), (3, height, width) for the float planes.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> Bound<'py, PyTuple> {
        PyTuple::new_bound(py, self.dims())
    }
    /// Where the pixels are: "cpu", or "cuda:N" (the CUDA backend lends them on its GPU).
    #[getter]
    fn device(&self) -> String {
        match self.pixels.on_device() {
            Some((d, _)) => format!("cuda:{d}"),
            None => "cpu".into(),
        }
    }
    /// The pixels as `bytes` (a copy, from the GPU where they are there).
    fn tobytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        Ok(pyo3::types::PyBytes::new_bound(py, self.pixels.host(py)?))
    }
    fn __len__(&self) -> usize {
        self.pixels.len()
    }
    /// NumPy's array interface (version 3): `np.asarray(frame)` reads the frame's own
    /// memory, read-only, and keeps the frame alive while the array lives (a frame on the
    /// GPU is copied to the host once, the first time).
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        array_interface(py, self.pixels.host(py)?, &self.dims(), self.handed.layout)
    }
    /// DLPack (`torch.from_dlpack(frame)`, `np.from_dlpack(frame)` in host memory): the
    /// pixels where they are, `dtype` of `shape`, without a copy; the tensor keeps the frame
    /// (and so, on the GPU, its buffer) alive. On the GPU the frame is complete before it is
    /// handed over, so the consumer's `stream` waits for nothing; the buffer is reused only
    /// after the work queued on that stream when the frame is released.
    #[pyo3(signature = (stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        slf: &Bound<'_, Self>,
        stream: Option<i64>,
        max_version: Option<PyObject>,
        dl_device: Option<PyObject>,
        copy: Option<bool>,
    ) -> PyResult<PyObject> {
        let _ = (max_version, dl_device); // one version, where the pixels are
        let frame = slf.get();
        let owner = slf.clone().into_any().unbind();
        let element = frame.handed.layout.element();
        let shape = frame.dims();
        frame
            .pixels
            .dlpack(slf.py(), owner, &shape, element, (stream, copy))
    }
    /// Where the pixels are: (kDLCPU, 0), or (kDLCUDA, device).
    fn __dlpack_device__(&self) -> (i32, i32) {
        self.pixels.dlpack_device()
    }
    fn __repr__(&self) -> String {
        let h = &self.handed;
        format!(
            "<framepipe.Frame input {} frame {} {} {}>",
            h.input,
            h.index,
            h.size,
            h.layout.name()
        )
    }
}

impl Frame {
    /// The array's shape (`shape`).
    fn dims(&self) -> Vec<usize> {
        self.handed.layout.dims(self.handed.size)
    }
}

/// NumPy's array interface (version 3) over `bytes` of `shape`, of `layout`'s elements,
/// read-only: the object that returns it keeps the bytes alive while the array lives.
fn array_interface<'py>(
    py: Python<'py>,
    bytes: &[u8],
    shape: &[usize],
    layout: Layout,
) -> PyResult<Bound<'py, PyDict>> {
    let order = if cfg!(target_endian = "little") {
        "<"
    } else {
        ">"
    };
    let typestr = match layout.element() {
        (false, _) => "|u1".to_string(),
        (true, bits) => format!("{order}f{}", bits / 8),
    };
    let d = PyDict::new_bound(py);
    d.set_item("version", 3)?;
    d.set_item("shape", PyTuple::new_bound(py, shape))?;
    d.set_item("typestr", typestr)?;
    d.set_item("data", (bytes.as_ptr() as usize, true))?;
    Ok(d)
}

/// The latest frame of several inputs (`batch=N`): `frames` in input order, and their
/// pixels stacked as one array of shape (len, *frame.shape) where every frame has the same
/// size and format (DeepStream's batch of N streams): in host memory, or on the GPU (the
/// frames' own buffers given back, each frame a view of the batch's).
#[pyclass(module = "framepipe", frozen)]
struct Batch {
    frames: Vec<Py<Frame>>,
    inputs: Vec<usize>,
    /// The frames' pixels one after another, the stacked shape and the frames' layout;
    /// None where they differ.
    stacked: Option<(Pixels, Vec<usize>, Layout)>,
}

impl Batch {
    fn of(py: Python<'_>, mut frames: Vec<Frame>) -> PyResult<Self> {
        let inputs = frames.iter().map(|f| f.handed.input).collect();
        let first = &frames[0];
        let alike = frames.iter().all(|f| {
            f.handed.size == first.handed.size
                && f.handed.layout == first.handed.layout
                && f.pixels.on_device().map(|d| d.0) == first.pixels.on_device().map(|d| d.0)
        });
        let stacked = match alike {
            true => Some(stack(py, &mut frames)?),
            false => None,
        };
        let frames = frames
            .into_iter()
            .map(|f| Py::new(py, f))
            .collect::<PyResult<_>>()?;
        Ok(Self {
            frames,
            inputs,
            stacked,
        })
    }

    fn stacked(&self) -> PyResult<&(Pixels, Vec<usize>, Layout)> {
        self.stacked.as_ref().ok_or_else(|| {
            PyValueError::new_err(
                "the batch's frames differ in size or format: take them one by one (batch.frames)",
            )
        })
    }
}

/// `frames` (alike) stacked into one buffer: copied once, on the host or on the GPU (where
/// each frame becomes a view of it, its own buffer given back); its shape and layout.
fn stack(py: Python<'_>, frames: &mut [Frame]) -> PyResult<(Pixels, Vec<usize>, Layout)> {
    let shape = [vec![frames.len()], frames[0].dims()].concat();
    let layout = frames[0].handed.layout;
    let each = frames[0].pixels.len();
    let Some((device, _)) = frames[0].pixels.on_device() else {
        let mut bytes = Vec::with_capacity(each * frames.len());
        for f in frames.iter() {
            bytes.extend_from_slice(f.pixels.host(py)?);
        }
        let len = bytes.len();
        return Ok((Pixels::new(bytes, Memory::Host, len), shape, layout));
    };
    let parts: Vec<(u64, usize)> = frames
        .iter()
        .filter_map(|f| f.pixels.on_device().map(|(_, ptr)| (ptr, each)))
        .collect();
    let memory = py
        .allow_threads(|| framepipe::backend::lend::stack(device, &parts))
        .map_err(|e| PyRuntimeError::new_err(format!("{e:#}")))?;
    let stacked = Pixels::new(Vec::new(), memory, each * frames.len());
    for (k, f) in frames.iter_mut().enumerate() {
        f.pixels = stacked.view(k * each, each).expect("inside the stack");
    }
    Ok((stacked, shape, layout))
}

#[pymethods]
impl Batch {
    /// The frames, in input order.
    #[getter]
    fn frames(&self, py: Python<'_>) -> Vec<Py<Frame>> {
        self.frames.iter().map(|f| f.clone_ref(py)).collect()
    }
    /// The inputs they came from (an input with no frame in time is left out).
    #[getter]
    fn inputs(&self) -> Vec<usize> {
        self.inputs.clone()
    }
    fn __len__(&self) -> usize {
        self.frames.len()
    }
    /// NumPy's array interface: the frames stacked (copied once, into one buffer, as the
    /// batch was made; from the GPU, once more, the first time), read-only.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (pixels, shape, layout) = self.stacked()?;
        array_interface(py, pixels.host(py)?, shape, *layout)
    }
    /// DLPack (`torch.from_dlpack(batch)`): the stacked frames where they are, as
    /// `Frame.__dlpack__` gives a frame.
    #[pyo3(signature = (stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        slf: &Bound<'_, Self>,
        stream: Option<i64>,
        max_version: Option<PyObject>,
        dl_device: Option<PyObject>,
        copy: Option<bool>,
    ) -> PyResult<PyObject> {
        let _ = (max_version, dl_device);
        let (pixels, shape, layout) = slf.get().stacked()?;
        let owner = slf.clone().into_any().unbind();
        pixels.dlpack(slf.py(), owner, shape, layout.element(), (stream, copy))
    }
    /// Where the stacked frames are.
    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        Ok(self.stacked()?.0.dlpack_device())
    }
}

/// A running pipeline: iterate it for its frames; `close()` ends it, from any thread.
///
/// Its state is behind a lock that a thread holds while it takes a frame, so that another
/// thread's `close()` is never refused as "already borrowed": that one asks the run to stop
/// first (the flag needs no lock), which ends the iterating thread's wait within a second,
/// and then waits for the lock (without the GIL) to finish the run.
#[pyclass(module = "framepipe", frozen)]
struct Run {
    stop: Stop,
    state: Mutex<Running>,
    /// The marks `write` sets, drawn by the run into each input's frames.
    marks: Marks,
    /// `size=` and `fit=`: where a handed frame's pixels lie in the pipeline's frame.
    fit: Option<(FrameSize, Fit)>,
}

/// A run's state (`Run`).
struct Running {
    frames: Option<Receiver<Handed>>,
    stop: Stop,
    thread: Option<JoinHandle<framepipe::app::Ran>>,
    names: Vec<String>,
    /// `batch=N` and `batch_timeout`: frames come as batches of the latest of N inputs.
    batch: Option<(usize, Duration)>,
    /// Frames of files taken while a batch was gathered, for the next batches (`gather`).
    carried: VecDeque<Handed>,
    /// Each input's frames dropped so far.
    dropped: Vec<u64>,
}

impl Run {
    /// The run's state, waited for without the GIL while another thread holds it.
    fn running(&self, py: Python<'_>) -> MutexGuard<'_, Running> {
        loop {
            match self.state.try_lock() {
                Ok(running) => return running,
                Err(TryLockError::Poisoned(p)) => return p.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    py.allow_threads(|| std::thread::sleep(Duration::from_millis(2)));
                }
            }
        }
    }
}

impl Running {
    /// The next frame handed over; None once the run has ended (or, with `deadline`, when
    /// none came before it). Raises the run's error, and Python's signals (Ctrl-C), which
    /// end the run first.
    fn next_frame(
        &mut self,
        py: Python<'_>,
        deadline: Option<Instant>,
    ) -> PyResult<Option<Handed>> {
        loop {
            let Some(rx) = self.frames.clone() else {
                return Ok(None);
            };
            let wait = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(POLL),
                None => POLL,
            };
            match py.allow_threads(|| rx.recv_timeout(wait)) {
                Ok(handed) => {
                    let input = handed.input;
                    if self.dropped.len() <= input {
                        self.dropped.resize(input + 1, 0);
                    }
                    self.dropped[input] = self.dropped[input].max(handed.dropped);
                    return Ok(Some(handed));
                }
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(e) = py.check_signals() {
                        self.end(py);
                        return Err(e);
                    }
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Ok(None);
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

    /// A batch's frames, one an input (module doc): the latest of a live input (an older
    /// one it replaces is dropped, as a camera's frames are), the next of a file (a later
    /// one waits in `carried` for the next batch, so a file loses no frame), gathered until
    /// `n` inputs have one, `timeout` has passed since the first, `CARRIED` frames an input
    /// wait for later batches, or the run has ended (empty then).
    fn gather(&mut self, py: Python<'_>, n: usize, timeout: Duration) -> PyResult<Vec<Handed>> {
        let (mut batch, mut next) = (Vec::new(), VecDeque::new());
        let place = |h: Handed, batch: &mut Vec<Handed>, next: &mut VecDeque<Handed>| match batch
            .iter_mut()
            .find(|b: &&mut Handed| b.input == h.input)
        {
            Some(older) if h.live => *older = h,
            Some(_) => next.push_back(h),
            None => batch.push(h),
        };
        for h in std::mem::take(&mut self.carried) {
            place(h, &mut batch, &mut next);
        }
        let mut deadline = (!batch.is_empty()).then(|| Instant::now() + timeout);
        while batch.len() < n && next.len() < CARRIED * n {
            let Some(h) = self.next_frame(py, deadline)? else {
                break;
            };
            deadline.get_or_insert_with(|| Instant::now() + timeout);
            place(h, &mut batch, &mut next);
        }
        self.carried = next;
        Ok(batch)
    }

    /// `handed` as a Python frame, named after its input.
    fn frame(&self, mut handed: Handed) -> Frame {
        let name = self.names.get(handed.input).cloned().unwrap_or_default();
        let bytes = std::mem::take(&mut handed.bytes);
        let memory = std::mem::take(&mut handed.memory);
        let len = handed.layout.bytes(handed.size);
        Frame {
            pixels: Pixels::new(bytes, memory, len),
            handed,
            name,
        }
    }

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

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        let mut running = self.running(py);
        let running = &mut *running;
        let Some((n, timeout)) = running.batch else {
            return Ok(running
                .next_frame(py, None)?
                .map(|h| running.frame(h).into_py(py)));
        };
        let mut batch = running.gather(py, n, timeout)?;
        if batch.is_empty() {
            return Ok(None);
        }
        batch.sort_by_key(|h| h.input);
        let frames: Vec<Frame> = batch.into_iter().map(|h| running.frame(h)).collect();
        Ok(Some(Batch::of(py, frames)?.into_py(py)))
    }

    /// Draws `overlay` into `frame`'s input's frames from the next one on, on their way to
    /// the window, the outputs, the browser view and the mosaic, until the next `write` of
    /// that input (`overlay=[]` clears it): boxes `(x, y, w, h)`, `(x, y, w, h, label)` or
    /// `(x, y, w, h, label, (r, g, b))` in `frame`'s pixels (the size handed, mapped back
    /// through `size=` and `fit=`), in `color` where a box has none (green by default). The
    /// frames handed to this loop are never drawn on.
    #[pyo3(signature = (frame, overlay=None, color=(0, 255, 0)))]
    fn write(
        &self,
        frame: &Bound<'_, Frame>,
        overlay: Option<&Bound<'_, PyAny>>,
        color: (u8, u8, u8),
    ) -> PyResult<()> {
        let handed = &frame.get().handed;
        let map = match self.fit {
            Some((to, fit)) => framepipe::sink::handover::unfitting(handed.source, to, fit),
            None => (1.0, 1.0, 0.0, 0.0),
        };
        let mut marks = Vec::new();
        for item in overlay.into_iter().flat_map(|o| o.iter()).flatten() {
            marks.push(mark_of(&item?, map, color)?);
        }
        self.marks.set(handed.input, marks);
        Ok(())
    }
    /// Each input's frames dropped so far (a live input that the pipeline or this loop did
    /// not keep up with), by input number, as the last frame of each said.
    #[getter]
    fn dropped(&self, py: Python<'_>) -> Vec<u64> {
        self.running(py).dropped.clone()
    }

    /// Stops the run and waits until it has ended, its outputs finalized; from any thread
    /// (one iterating the run sees its iteration end). Raises the run's error where it
    /// failed.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.stop.request();
        match self.running(py).end(py) {
            Some(e) => Err(PyRuntimeError::new_err(e)),
            None => Ok(()),
        }
    }

    /// Whether the run has ended (closed, or every frame taken); false while another
    /// thread is taking a frame of it.
    #[getter]
    fn closed(&self) -> bool {
        self.state
            .try_lock()
            .is_ok_and(|running| running.thread.is_none())
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*exc))]
    fn __exit__(&self, py: Python<'_>, exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        // An error of the run's own is not raised over the exception that left the block.
        self.stop.request();
        let failed = self.running(py).end(py);
        match (failed, exc.get_item(0).map(|t| t.is_none()).unwrap_or(true)) {
            (Some(e), true) => Err(PyRuntimeError::new_err(e)),
            _ => Ok(false),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.request();
        self.frames = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One overlay item (`Run::write`) as a mark in the pipeline's frame: the box mapped by
/// `(sx, sy, ox, oy)` (`handover::unfitting`), its label, its colour or `color`.
fn mark_of(
    item: &Bound<'_, PyAny>,
    (sx, sy, ox, oy): (f64, f64, f64, f64),
    color: (u8, u8, u8),
) -> PyResult<Mark> {
    let bad = || {
        PyValueError::new_err(format!(
            "overlay item {item}: (x, y, w, h), (x, y, w, h, label) or (x, y, w, h, label, (r, g, b))"
        ))
    };
    let parts: Vec<Bound<'_, PyAny>> = item.iter().map_err(|_| bad())?.collect::<PyResult<_>>()?;
    if !(4..=6).contains(&parts.len()) {
        return Err(bad());
    }
    let num = |k: usize| -> PyResult<f64> {
        let v: f64 = parts[k].extract().map_err(|_| bad())?;
        v.is_finite().then_some(v).ok_or_else(bad)
    };
    let (x, y, w, h) = (num(0)?, num(1)?, num(2)?, num(3)?);
    let label = match parts.get(4) {
        Some(l) if !l.is_none() => l.str()?.to_string(),
        _ => String::new(),
    };
    let (r, g, b) = match parts.get(5) {
        Some(c) => c.extract().map_err(|_| bad())?,
        None => color,
    };
    // Pixels, clamped to what a frame can hold (a box far off the frame is clipped away).
    let px = |v: f64| v.round().clamp(-1e6, 1e6) as i32;
    let (x0, y0) = ((x - ox) * sx, (y - oy) * sy);
    Ok(Mark {
        x: px(x0),
        y: px(y0),
        w: px(w * sx),
        h: px(h * sy),
        label: label.chars().take(200).collect(),
        color: [b, g, r],
    })
}

/// What `open`'s arguments ask for: the command line, and the package's own keywords.
struct Asked {
    argv: Vec<String>,
    shaping: Shaping,
    batch: Option<(usize, Duration)>,
}

/// How long a batch waits for its inputs' frames by default (`batch_timeout`).
const BATCH_TIMEOUT: Duration = Duration::from_millis(100);
/// The longest `batch_timeout` taken: a day (a deadline past the clock's range would
/// overflow).
const MAX_BATCH_TIMEOUT: Duration = Duration::from_secs(86_400);

/// The command line `inputs` and `options` make (module doc), and the package's keywords.
fn command_line(
    inputs: &Bound<'_, PyTuple>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Asked> {
    let mut argv = vec!["framepipe".to_string()];
    for input in inputs.iter() {
        argv.push("--input".into());
        argv.push(input.str()?.to_string());
    }
    let mut headless = true;
    let (mut batch, mut timeout) = (None, BATCH_TIMEOUT);
    let mut model = Model::default();
    for (key, value) in options.into_iter().flat_map(|d| d.iter()) {
        let key: String = key.extract()?;
        match key.as_str() {
            "format" | "size" | "fit" | "mean" | "std" => {
                model.take(&key, &value)?;
                continue;
            }
            "headless" => {
                headless = value.is_truthy()?;
                continue;
            }
            "batch" => {
                let n: usize = value.extract()?;
                if n == 0 {
                    return Err(PyValueError::new_err(
                        "batch=0: a batch holds 1 frame or more",
                    ));
                }
                batch = Some(n);
                continue;
            }
            "batch_timeout" => {
                let t: f64 = value.extract()?;
                timeout = Duration::try_from_secs_f64(t)
                    .ok()
                    .filter(|t| *t <= MAX_BATCH_TIMEOUT)
                    .ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "batch_timeout={t}: seconds, from 0 to {} (a day)",
                            MAX_BATCH_TIMEOUT.as_secs()
                        ))
                    })?;
                continue;
            }
            _ => {}
        }
        // `y=True` is `-y`, as a one-letter flag is written; `no_audio` is `--no-audio`.
        let flag = match key.len() {
            1 => format!("-{key}"),
            _ => format!("--{}", key.replace('_', "-")),
        };
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
    Ok(Asked {
        argv,
        shaping: model.shaping()?,
        batch: batch.map(|n| (n, timeout)),
    })
}

/// The keywords that shape frames for a model: `format`, `size`, `fit`, `mean`, `std`.
#[derive(Default)]
struct Model {
    format: Option<String>,
    size: Option<(usize, usize)>,
    fit: Option<String>,
    mean: Option<[f32; 3]>,
    std: Option<[f32; 3]>,
}

impl Model {
    /// Takes one keyword's value.
    fn take(&mut self, key: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let three = |what: &str| -> PyResult<[f32; 3]> {
            let v: Option<[f32; 3]> = value
                .extract::<Vec<f32>>()
                .ok()
                .and_then(|v| v.try_into().ok());
            v.ok_or_else(|| {
                PyValueError::new_err(format!("{what}=: three numbers, for R, G and B"))
            })
        };
        match key {
            "format" => self.format = Some(value.extract()?),
            "fit" => self.fit = Some(value.extract()?),
            "mean" => self.mean = Some(three("mean")?),
            "std" => self.std = Some(three("std")?),
            _ => {
                let (w, h): (i64, i64) = value.extract().map_err(|_| {
                    PyValueError::new_err("size=: (width, height), two whole numbers")
                })?;
                let side = 1..=framepipe::frame::MAX_SIDE as i64;
                if !side.contains(&w) || !side.contains(&h) {
                    return Err(PyValueError::new_err(format!(
                        "size=({w}, {h}): sides from 1 to {}",
                        framepipe::frame::MAX_SIDE
                    )));
                }
                self.size = Some((w as usize, h as usize));
            }
        }
        Ok(())
    }

    /// What the keywords ask for, checked.
    fn shaping(&self) -> PyResult<Shaping> {
        let name = self.format.as_deref().unwrap_or("bgr24");
        let (mean, std) = (self.mean.unwrap_or([0.0; 3]), self.std.unwrap_or([1.0; 3]));
        let layout = match name {
            "rgb24" => Layout::Rgb24,
            "rgbf32" | "rgbf16" => {
                if let Some(s) = std.iter().find(|s| !s.is_normal()) {
                    return Err(PyValueError::new_err(format!(
                        "std=: each channel's is a finite number other than 0 (not {s})"
                    )));
                }
                if mean.iter().any(|m| !m.is_finite()) {
                    return Err(PyValueError::new_err("mean=: finite numbers"));
                }
                Layout::Planar {
                    half: name == "rgbf16",
                    mean,
                    std,
                }
            }
            other => Layout::Pixels(
                PixelFormat::from_name(other)
                    .filter(|f| f.writable())
                    .ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "format={other:?}: not a format frames are given in (bgr24, i420, nv12, gray, rgb24, rgbf32, rgbf16)"
                        ))
                    })?,
            ),
        };
        if !matches!(layout, Layout::Planar { .. }) && (self.mean.is_some() || self.std.is_some()) {
            return Err(PyValueError::new_err(
                "mean= and std= normalise the float formats: give format=\"rgbf32\" or \"rgbf16\" too",
            ));
        }
        let fit = match self.fit.as_deref() {
            None | Some("letterbox") => Fit::Letterbox,
            Some("crop") => Fit::Crop,
            Some("stretch") => Fit::Stretch,
            Some(other) => {
                return Err(PyValueError::new_err(format!(
                    "fit={other:?}: letterbox, crop or stretch"
                )))
            }
        };
        if self.fit.is_some() && self.size.is_none() {
            return Err(PyValueError::new_err(
                "fit= says how a frame fits size=: give size=(width, height) too",
            ));
        }
        let shaping = Shaping {
            size: self.size.map(|(w, h)| (FrameSize::new(w, h), fit)),
            layout,
        };
        if let Some((size, _)) = shaping.size {
            fits_in_memory(size, layout)?;
        }
        Ok(shaping)
    }
}

/// Frames of one size alive at once between the run and the loop: the queue's, the one
/// being made and the one the loop holds.
const ALIVE: u64 = QUEUED as u64 + 2;

/// Refuses a `size=` whose frames, `ALIVE` at once, would take more than half the memory
/// available now (the command line refuses such a ring the same way).
fn fits_in_memory(size: FrameSize, layout: Layout) -> PyResult<()> {
    let each = layout.bytes(size) as u64;
    match framepipe::host::memory_available() {
        Some(free) if each.saturating_mul(ALIVE) > free / 2 => Err(PyValueError::new_err(format!(
            "size={}: {ALIVE} frames of {} as {} would take more than half the available memory ({})",
            size,
            framepipe::budget::human(each),
            layout.name(),
            framepipe::budget::human(free)
        ))),
        _ => Ok(()),
    }
}

/// Runs framepipe over `inputs` with `options` (the command line's flags) and returns the
/// running `Run`; `format` ("bgr24" by default, "i420", "nv12", "gray", "rgb24", or the
/// float planes "rgbf32" and "rgbf16", normalised by `mean` and `std`) is the frames'
/// format, `size=(W, H)` resizes them as `fit` says ("letterbox", "crop", "stretch"), and
/// `headless=False` shows the window too.
#[pyfunction]
#[pyo3(signature = (*inputs, **options))]
fn open(inputs: &Bound<'_, PyTuple>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Run> {
    use clap::Parser;
    static LOOKED: std::sync::Once = std::sync::Once::new();
    LOOKED.call_once(|| onnx_runtime_beside(inputs.py()));
    let Asked {
        argv,
        shaping,
        batch,
    } = command_line(inputs, options)?;
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
    // quiet=True: nothing but warnings and errors (no summary) in a Python program.
    let level = match (cli.run.quiet, cli.run.verbose) {
        (true, _) => framepipe::msg::Level::Silent,
        (_, true) => framepipe::msg::Level::Verbose,
        _ => framepipe::msg::Level::Normal,
    };
    framepipe::msg::set_level(level);
    let names: Vec<String> = cli.run.sources.input.clone();
    let (to, frames) = crossbeam_channel::bounded(QUEUED);
    let stop = Stop::new();
    let marks = Marks::default();
    let hand = HandTo {
        to,
        shaping: shaping.clone(),
        stop: stop.clone(),
        marks: marks.clone(),
    };
    let start = framepipe::plan::Start::new(cli.run);
    let thread = std::thread::Builder::new()
        .name("framepipe run".into())
        .spawn(move || framepipe::app::run_embedded(start, hand))
        .map_err(|e| PyRuntimeError::new_err(format!("starting the run's thread: {e}")))?;
    Ok(Run {
        state: Mutex::new(Running {
            frames: Some(frames),
            stop: stop.clone(),
            thread: Some(thread),
            names,
            batch,
            carried: VecDeque::new(),
            dropped: Vec::new(),
        }),
        stop,
        marks,
        fit: shaping.size,
    })
}

/// Where `detect=` finds ONNX Runtime besides `ORT_DYLIB_PATH`: the library of PyPI's
/// `onnxruntime` (or `onnxruntime-gpu`) where it is installed, and the project's copy
/// above the folder this module was installed in (`detect::runtime::look_also`).
fn onnx_runtime_beside(py: Python<'_>) {
    let library = py
        .import_bound("importlib.util")
        .and_then(|u| u.call_method1("find_spec", ("onnxruntime",)))
        .ok()
        .filter(|spec| !spec.is_none())
        .and_then(|spec| spec.getattr("origin").ok()?.extract::<String>().ok())
        .and_then(|init| {
            let capi = std::path::Path::new(&init).parent()?.join("capi");
            framepipe::detect::runtime::library_in(&capi)
        });
    // (Known once imported: an extension module has no file while it initialises.)
    let folder = py
        .import_bound("framepipe")
        .and_then(|m| m.getattr("__file__"))
        .ok()
        .and_then(|f| f.extract::<String>().ok())
        .map(std::path::PathBuf::from)
        .and_then(|f| f.parent().map(std::path::Path::to_path_buf));
    if let Some(folder) = folder {
        framepipe::detect::runtime::look_also(library, folder);
    }
}

/// The Python module.
#[pymodule]
#[pyo3(name = "framepipe")]
fn framepipe_py(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_class::<Run>()?;
    m.add_class::<Frame>()?;
    m.add_class::<Batch>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
