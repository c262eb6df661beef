//! `--detect MODEL.onnx`: an object detector run on the pictures, through ONNX Runtime
//! (the `ort` crate, its library loaded at run time: `runtime`). What the model says is read
//! from the model itself: its outputs name the family (`Family::of`), each family's fitting
//! and decoding a file of its own (`db`: PaddleOCR's text detector, a probability map to
//! boxes; `yolo`: Ultralytics' v5, v8/v11 and NMS'd layouts, class names from the model's
//! `names`; `ssd`: boxes, scores and classes as separate outputs, TensorFlow's and SSD's own
//! head). A picture is fitted to the model (`pixel::linear`'s placing, the family's
//! `pixel::lookup`) on the CPU, or on the device where the run's backend is CUDA's
//! (`Model::fit_on`, `backend::fit`: the same floats). The pictures of one size go through
//! the model as one batch where it takes one (`Model::detect_batch`): a batch fitted on the
//! device for a model on a GPU provider is handed over where it lies (`Model::infer_bound`,
//! ONNX Runtime's I/O binding), any other stacked on the host; `seen` keeps what was found
//! last, for those who draw it.
//!
//! Invariants: a model is opened, and its family known, before the first frame (a bad
//! model is one line and exit 1); a machine without ONNX Runtime runs everything else and
//! refuses `--detect` in one line (never a panic inside `ort`); boxes are in the input
//! picture's pixels, clipped to it; nothing here draws or writes (`sink::detecting` does).

pub mod db;
pub mod runtime;
pub mod seen;
pub mod ssd;
pub mod yolo;

use std::path::{Path, PathBuf};

use crate::frame::FrameSize;
use crate::pixel::linear::Placed;
use crate::pixel::lookup::Lookup;

/// What `--detect` and its companions ask for, checked by the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// The model.
    pub model: PathBuf,
    /// The least score a box is kept with (`--detect-score`; each family's own default).
    pub score: Option<f32>,
    /// Detections a second of each input (`--detect-fps`; every frame of a file, 5 a
    /// second of a live input where not given).
    pub fps: Option<f64>,
    /// Where each detected frame's line goes (`--detections FILE.jsonl`).
    pub jsonl: Option<PathBuf>,
    /// Class names, one a line (`--detect-labels`; the model's own where not given).
    pub labels: Option<PathBuf>,
    /// The NMS overlap (`--detect-nms`; `yolo::IOU` where not given).
    pub nms: Option<f32>,
    /// The size a model with free sides is fed at (`--detect-size`; its `imgsz` metadata,
    /// else 640x640, where not given).
    pub size: Option<FrameSize>,
    /// What of the boxes is drawn into the pictures (`--draw`).
    pub draw: Draw,
    /// Where the model runs (`--detect-provider`).
    pub provider: Provider,
}

/// Where the model runs (`--detect-provider`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Provider {
    /// CUDA where ONNX Runtime offers it, else the CPU.
    #[default]
    Auto,
    /// The CPU.
    Cpu,
    /// CUDA.
    Cuda,
    /// TensorRT (then CUDA for what it does not take).
    Tensorrt,
}

/// What of the boxes is drawn into the pictures shown and encoded (`--draw`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Draw {
    /// Nothing.
    None,
    /// Each box's outline.
    Boxes,
    /// The outline, with the label and score above it.
    #[default]
    Labels,
}

/// One box the model found, in the input picture's pixels.
#[derive(Clone, Debug, PartialEq)]
pub struct Detection {
    /// Its class's name.
    pub label: String,
    /// Its score, 0 to 1.
    pub score: f32,
    /// Left, top, right, bottom (right and bottom past the box's last pixel).
    pub rect: [f32; 4],
    /// The object's id across frames, given by the input's tracker (`events::track`).
    pub track: Option<u64>,
}

/// Why a model can't be used; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    /// No ONNX Runtime library found, or it did not load.
    #[error("--detect: {0}")]
    Runtime(#[from] runtime::RuntimeError),
    /// The model can't be read as ONNX.
    #[error("--detect '{}': not an ONNX model ONNX Runtime can load ({why})", model.display())]
    NotOnnx {
        /// The model.
        model: PathBuf,
        /// ONNX Runtime's words.
        why: String,
    },
    /// Its input is not one picture batch.
    #[error("--detect '{}': its input {shape} is not a batch of pictures (N, 3, H, W)", model.display())]
    Input {
        /// The model.
        model: PathBuf,
        /// The input's shape as the model says it.
        shape: String,
    },
    /// Its input is larger than any picture a detector is fed (`MAX_SIDE`, `MAX_BATCH`).
    #[error("--detect '{}': its input {shape} is larger than a detector's ({MAX_SIDE} a side at most, batches of {MAX_BATCH} at most)", model.display())]
    TooLarge {
        /// The model.
        model: PathBuf,
        /// The input's shape as the model says it.
        shape: String,
    },
    /// Outputs of no layout this version reads.
    #[error("--detect '{}': outputs {outputs} are not a layout framepipe reads (DB text detection: one (N, 1, H, W) map; YOLO: (N, 4+C, A), (N, A, 5+C) or (N, K, 6); SSD: boxes (N, K, 4) with scores and classes (N, K), or with scores (N, K, C))", model.display())]
    Layout {
        /// The model.
        model: PathBuf,
        /// Its outputs, named with their shapes.
        outputs: String,
    },
    /// A provider asked for that this ONNX Runtime does not offer.
    #[error("--detect-provider {0}: this ONNX Runtime does not offer it (it offers {1}; onnxruntime-gpu has CUDA and TensorRT)")]
    Provider(&'static str, String),
    /// `--detect-size` where the model can't take it.
    #[error("--detect-size {size}: {why}")]
    Size {
        /// The size asked for.
        size: FrameSize,
        /// Why the model can't be fed at it.
        why: String,
    },
    /// A provider offered whose own libraries do not load (TensorRT's, cuDNN).
    #[error("detection on {0}: ONNX Runtime could not start it ({1}); its libraries (CUDA's, cuDNN's, TensorRT's for TensorRT) must be where the loader finds them (LD_LIBRARY_PATH)")]
    ProviderFailed(&'static str, String),
    /// ONNX Runtime could not make a session at all.
    #[error("detection: ONNX Runtime could not start a session ({0})")]
    Unloadable(String),
    /// A `--detect-labels` file that can't be read as text.
    #[error("--detect-labels '{}': {why}", file.display())]
    Labels {
        /// The file.
        file: PathBuf,
        /// Why.
        why: String,
    },
    /// Inference failed on a frame.
    #[error("--detect: ONNX Runtime failed on a frame: {0}")]
    Run(String),
    /// The inference under way was halted: the run is ending (`Halt`).
    #[error("--detect: halted as the run ends")]
    Halted,
}

/// The family of a model, read from its outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// DB text detection (PaddleOCR's detector): one (N, 1, H, W) probability map.
    Db,
    /// YOLO as Ultralytics exports it, in one of its layouts.
    Yolo(yolo::Layout),
    /// SSD-style: boxes, scores and classes as separate outputs.
    Ssd(ssd::Layout),
}

impl Family {
    /// The family of a model whose input has `input` dims and whose outputs are named and
    /// shaped as `outputs` (-1 where the model leaves a side free). Only an SSD takes its
    /// pictures as (N, H, W, 3).
    pub fn of(input: &[i64], outputs: &[(String, Vec<i64>)]) -> Option<Self> {
        let planes = input.len() == 4 && (input[1] == 3 || input[1] == -1);
        let pixels = input.len() == 4 && input[3] == 3;
        match outputs {
            [(_, map)] if planes && map.len() == 4 && map[1] == 1 => Some(Family::Db),
            [(_, out)] if planes => yolo::Layout::of(out).map(Family::Yolo),
            _ if planes || pixels => ssd::Layout::of(outputs).map(Family::Ssd),
            _ => None,
        }
    }
}

impl Family {
    /// The least score a box is kept with where `--detect-score` does not say.
    fn score(self) -> f32 {
        match self {
            Family::Db => db::BOX_THRESH,
            Family::Yolo(_) => yolo::SCORE,
            Family::Ssd(_) => ssd::SCORE,
        }
    }

    /// The NMS overlap where `--detect-nms` does not say.
    fn nms(self) -> f32 {
        match self {
            Family::Ssd(_) => ssd::IOU,
            _ => yolo::IOU,
        }
    }
}

/// The largest side of a model's input picture taken: a picture of 8192×8192 floats is
/// already 805 MB a batch's picture; a model that asks more is refused before a frame.
const MAX_SIDE: i64 = 8192;
/// The largest fixed batch taken.
const MAX_BATCH: i64 = 256;

/// The family of `model`, whose input has `input` dims and whose outputs are `outputs`;
/// an error naming them where it is none, or where the input is larger than any picture.
fn family_of(
    model: &Path,
    input: &[i64],
    outputs: &[(String, Vec<i64>)],
) -> Result<Family, DetectError> {
    let picture = input.len() == 4 && (input[1] == 3 || input[1] == -1 || input[3] == 3);
    if !picture {
        return Err(DetectError::Input {
            model: model.to_path_buf(),
            shape: format!("{input:?}"),
        });
    }
    let nhwc = input[1] != 3 && input[3] == 3;
    let (h, w) = if nhwc {
        (input[1], input[2])
    } else {
        (input[2], input[3])
    };
    if h > MAX_SIDE || w > MAX_SIDE || input[0] > MAX_BATCH {
        return Err(DetectError::TooLarge {
            model: model.to_path_buf(),
            shape: format!("{input:?}"),
        });
    }
    Family::of(input, outputs).ok_or_else(|| DetectError::Layout {
        model: model.to_path_buf(),
        outputs: outputs
            .iter()
            .map(|(name, d)| format!("{name} {d:?}"))
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// How a model whose input is of `ty` and `dims` takes its pictures, and their size (640
/// a side it leaves free).
fn feed_of(ty: &ort::value::ValueType, dims: &[i64]) -> (Feed, FrameSize) {
    let feed = Feed {
        nhwc: dims[1] != 3 && dims[3] == 3,
        bytes: matches!(
            ty,
            ort::value::ValueType::Tensor {
                ty: ort::tensor::TensorElementType::Uint8,
                ..
            }
        ),
    };
    let side = |d: i64| if d > 0 { d as usize } else { 640 };
    let fed = match feed.nhwc {
        true => FrameSize::new(side(dims[2]), side(dims[1])),
        false => FrameSize::new(side(dims[3]), side(dims[2])),
    };
    (feed, fed)
}

/// The most pictures one inference takes on the CPU (`Model::batch_most`).
pub const CPU_BATCH: usize = 16;
/// The most pictures one inference takes on a GPU provider.
pub const GPU_BATCH: usize = 32;

/// The (height, width) of Ultralytics' `imgsz` metadata (`[320, 320]`, or one side `640`),
/// where it is a sane picture size.
fn imgsz_of(text: &str) -> Option<(usize, usize)> {
    let sides: Vec<usize> = text
        .trim_matches(|c| c == '[' || c == ']' || c == ' ')
        .split(',')
        .map(|v| v.trim().parse().ok())
        .collect::<Option<_>>()?;
    let (h, w) = match sides.as_slice() {
        [s] => (*s, *s),
        [h, w] => (*h, *w),
        _ => return None,
    };
    let sane = |s: usize| (1..=MAX_SIDE as usize).contains(&s);
    (sane(h) && sane(w)).then_some((h, w))
}

/// How the model takes its pictures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Feed {
    /// (N, H, W, 3) rather than (N, 3, H, W).
    nhwc: bool,
    /// 8-bit values (0 to 255) rather than floats.
    bytes: bool,
}

/// A model opened for detection (module doc).
pub struct Model {
    session: ort::session::Session,
    family: Family,
    input: String,
    /// The input's size where the model fixes it (YOLO's letterbox), else 640×640.
    fed: FrameSize,
    /// Class names, by number (the model's `names` metadata).
    names: Vec<String>,
    path: PathBuf,
    score: f32,
    /// The NMS overlap.
    nms: f32,
    /// The batch the model takes at most where it fixes one (None: any).
    batch: Option<usize>,
    /// It runs on a GPU provider (CUDA, TensorRT): larger batches pay there.
    on_gpu: bool,
    /// What halts an inference under way from another thread.
    halt: std::sync::Arc<Halt>,
    feed: Feed,
    /// How its pictures are laid out and normalised (the family's own).
    lookup: Lookup,
    /// Where the pictures are fitted on the device (`fit_on`), else on the CPU.
    device: Option<crate::backend::fit::ModelFit>,
    /// A batch fitted on the device is handed to the model where it lies (ONNX Runtime's
    /// I/O binding): the model runs on the GPU and takes floats (`fit_on`).
    bound: bool,
}

/// The execution providers a session is given for `asked`, and what it runs on, in words;
/// an error where one asked for is not offered.
fn providers(
    asked: Provider,
) -> Result<
    (
        Vec<ort::execution_providers::ExecutionProviderDispatch>,
        &'static str,
    ),
    DetectError,
> {
    use ort::execution_providers::{CUDAExecutionProvider, TensorRTExecutionProvider};
    let offered = runtime::accelerators();
    let has = |name: &str| offered.contains(&name);
    let words = || {
        let mut all = offered.clone();
        all.push("CPU");
        all.join(", ")
    };
    // fp32 as the CPU computes it (TF32 convolutions moved PP-OCR's text boxes: 480 of 500
    // within IoU 0.9 on an H200), and convolutions chosen by cuDNN's heuristics: an exhaustive
    // search for each batch size a wall of cameras makes took half a second each.
    let cuda = || {
        CUDAExecutionProvider::default()
            .with_tf32(false)
            .with_conv_algorithm_search(
                ort::execution_providers::cuda::CuDNNConvAlgorithmSearch::Heuristic,
            )
            .build()
            .error_on_failure()
    };
    match asked {
        Provider::Cpu => Ok((Vec::new(), "the CPU")),
        Provider::Auto if has("CUDA") => Ok((vec![cuda()], "CUDA")),
        Provider::Auto => Ok((Vec::new(), "the CPU")),
        Provider::Cuda if has("CUDA") => Ok((vec![cuda()], "CUDA")),
        Provider::Cuda => Err(DetectError::Provider("cuda", words())),
        Provider::Tensorrt if has("TensorRT") => {
            let cache = std::env::var_os("HOME")
                .map(|h| std::path::PathBuf::from(h).join(".cache/framepipe/tensorrt"))
                .unwrap_or_else(|| std::env::temp_dir().join("framepipe-tensorrt"));
            let _ = std::fs::create_dir_all(&cache);
            let trt = TensorRTExecutionProvider::default()
                .with_engine_cache(true)
                .with_engine_cache_path(cache.display())
                .build()
                .error_on_failure();
            Ok((vec![trt, cuda()], "TensorRT"))
        }
        Provider::Tensorrt => Err(DetectError::Provider("tensorrt", words())),
    }
}

/// A session builder with the providers `asked` names registered, and what it runs on, in
/// words: a provider asked for whose library does not load (onnxruntime-gpu without
/// TensorRT's libraries, or without cuDNN) is an error naming what is missing; `auto` then
/// runs on the CPU, saying why.
fn with_providers(
    asked: Provider,
) -> Result<(ort::session::builder::SessionBuilder, &'static str), DetectError> {
    let builder =
        || ort::session::Session::builder().map_err(|e| DetectError::Unloadable(e.to_string()));
    let (providers, on) = providers(asked)?;
    if providers.is_empty() {
        return Ok((builder()?, on));
    }
    match builder()?.with_execution_providers(providers) {
        Ok(b) => Ok((b, on)),
        Err(e) if asked == Provider::Auto => {
            crate::warn!("detection: --detect-provider auto: {on} could not start ({e}); the CPU runs the model");
            Ok((builder()?, "the CPU"))
        }
        Err(e) => Err(DetectError::ProviderFailed(on, e.to_string())),
    }
}

/// The size a model is fed at, `fed` where it fixes its sides: sides the model leaves free (an
/// Ultralytics export with dynamic=True) as `--detect-size` (`asked`) says, else the size it
/// was made for (its `imgsz` metadata), else `fed` (640); sides it fixes are `asked`'s too,
/// or it is refused.
fn fed_size(
    session: &ort::session::Session,
    feed: Feed,
    mut fed: FrameSize,
    input_dims: &[i64],
    family: Family,
    asked_size: Option<FrameSize>,
) -> Result<FrameSize, DetectError> {
    // Sides the model leaves free (an Ultralytics export with dynamic=True): as
    // `--detect-size` says, else the size it was made for (its `imgsz` metadata), else
    // 640; sides it fixes are `--detect-size`'s too, or it is refused.
    let (h, w) = match feed.nhwc {
        true => (input_dims[1], input_dims[2]),
        false => (input_dims[2], input_dims[3]),
    };
    let made_for = session
        .metadata()
        .ok()
        .and_then(|m| m.custom("imgsz").ok().flatten())
        .and_then(|t| imgsz_of(&t))
        .filter(|_| h <= 0 || w <= 0);
    let asked = asked_size.map(|s| (s.height, s.width));
    if let Some((mh, mw)) = asked.or(made_for) {
        let side = |d: i64, m: usize| if d > 0 { d as usize } else { m };
        fed = FrameSize::new(side(w, mw), side(h, mh));
    }
    if let Some(size) = asked_size.filter(|&s| s != fed || family == Family::Db) {
        return Err(DetectError::Size {
            size,
            why: match family {
                Family::Db => "DB text detection sizes each picture as it comes".into(),
                _ => format!("the model fixes its input at {fed}"),
            },
        });
    }
    Ok(fed)
}

/// Class names from a labels file: one a line, the first for class 0 (blank lines kept as
/// classes without a name; a trailing newline is not a class).
fn labels_of(file: &Path) -> Result<Vec<String>, DetectError> {
    let text = std::fs::read_to_string(file).map_err(|e| DetectError::Labels {
        file: file.to_path_buf(),
        why: e.to_string(),
    })?;
    Ok(text.lines().map(|l| l.trim().to_string()).collect())
}

impl Model {
    /// Opens `settings.model` on the CPU, reading its family from its outputs.
    pub fn open(settings: &Settings) -> Result<Self, DetectError> {
        runtime::init()?;
        let path = settings.model.clone();
        let not_onnx = |e: ort::Error| DetectError::NotOnnx {
            model: path.clone(),
            why: e.to_string(),
        };
        let (builder, on) = with_providers(settings.provider)?;
        let session = builder.commit_from_file(&path).map_err(not_onnx)?;
        let dims = |t: &ort::value::ValueType| match t {
            ort::value::ValueType::Tensor { shape, .. } => shape.iter().copied().collect(),
            _ => Vec::new(),
        };
        let input = session.inputs.first().ok_or_else(|| DetectError::Input {
            model: path.clone(),
            shape: "(none)".into(),
        })?;
        let input_dims: Vec<i64> = dims(&input.input_type);
        let outputs: Vec<(String, Vec<i64>)> = session
            .outputs
            .iter()
            .map(|o| (o.name.clone(), dims(&o.output_type)))
            .collect();
        let family = family_of(&path, &input_dims, &outputs)?;
        let (feed, fed) = feed_of(&input.input_type, &input_dims);
        let fed = fed_size(&session, feed, fed, &input_dims, family, settings.size)?;
        let input = input.name.clone();
        let names = match &settings.labels {
            Some(file) => labels_of(file)?,
            None => session
                .metadata()
                .ok()
                .and_then(|m| m.custom("names").ok().flatten())
                .map(|n| yolo::names_of(&n))
                .unwrap_or_default(),
        };
        crate::info!("detection: {} ({family:?}) on {on}", path.display());
        let lookup = match family {
            Family::Db => db::lookup(),
            Family::Yolo(_) => yolo::lookup(),
            Family::Ssd(_) => ssd::lookup(feed.nhwc, !feed.bytes),
        };
        Ok(Self {
            lookup,
            device: None,
            bound: false,
            session,
            family,
            input,
            fed,
            names,
            path,
            score: settings.score.unwrap_or(family.score()),
            nms: settings.nms.unwrap_or(family.nms()),
            feed,
            batch: (input_dims[0] > 0).then_some(input_dims[0] as usize),
            on_gpu: on != "the CPU",
            halt: std::sync::Arc::new(Halt::new()?),
        })
    }

    /// Fits its pictures to the model on `ctx`'s device from now on (the run's backend is
    /// CUDA's): the same floats as on the CPU (`backend::fit`), checked on a picture first;
    /// where the device can't, or its floats differ, it says so and goes on with the CPU.
    pub fn fit_on(&mut self, ctx: &std::sync::Arc<cudarc::driver::CudaContext>) {
        let checked = crate::backend::fit::ModelFit::new(ctx).and_then(|mut fit| {
            // Odd sides, every byte value: the device's floats must be the CPU's.
            let size = FrameSize::new(97, 61);
            let bgr: Vec<u8> = (0..size.bytes()).map(|i| (i * 151 % 256) as u8).collect();
            let (placed, _) = self.placing(size);
            let there = fit.fit(&bgr, size, &placed, &self.lookup)?;
            let here = self.fit_here(&bgr, size, &placed);
            let same = there.len() == here.len()
                && there
                    .iter()
                    .zip(&here)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
            anyhow::ensure!(same, "its floats differ from the CPU's");
            Ok(fit)
        });
        match checked {
            Ok(fit) => {
                self.bound = self.on_gpu && !self.feed.bytes;
                match self.bound {
                    true => crate::info!("detection: pictures fitted to the model on the GPU, each batch handed to it in device memory"),
                    false => crate::info!("detection: pictures fitted to the model on the GPU"),
                }
                self.device = Some(fit);
            }
            Err(e) => {
                crate::warn!("detection: pictures fitted on the CPU (the GPU could not: {e:#})")
            }
        }
    }

    /// Its family.
    pub fn family(&self) -> Family {
        self.family
    }

    /// The model's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The boxes in one packed BGR picture of `size`.
    pub fn detect(&mut self, bgr: &[u8], size: FrameSize) -> Result<Vec<Detection>, DetectError> {
        Ok(self.detect_batch(&[(bgr, size)])?.pop().unwrap_or_default())
    }

    /// The boxes in each of `pictures` (packed BGR, of their sizes), by picture: pictures
    /// fed at one size go through the model as one batch where its batch side is free
    /// (or as large), else one at a time.
    pub fn detect_batch(
        &mut self,
        pictures: &[(&[u8], FrameSize)],
    ) -> Result<Vec<Vec<Detection>>, DetectError> {
        let prepared: Vec<Prepared> = pictures
            .iter()
            .map(|&(bgr, size)| self.prepare(bgr, size))
            .collect();
        let mut found = Vec::with_capacity(pictures.len());
        let mut at = 0;
        while at < prepared.len() {
            let fed = prepared[at].fed;
            let same = prepared[at..].iter().take_while(|p| p.fed == fed).count();
            let n = same.min(self.batch.unwrap_or(usize::MAX)).max(1);
            let group = &prepared[at..at + n];
            // A model that fixes its batch is fed that many, the rest zeros.
            let fed_n = self.batch.unwrap_or(n);
            let outputs = self.infer_group(&pictures[at..at + n], group, fed_n, fed)?;
            if let Some((dims, _)) = outputs.iter().find(|(d, _)| d.first() != Some(&fed_n)) {
                return Err(DetectError::Run(format!(
                    "the model answered a batch of {fed_n} pictures with an output of {dims:?}"
                )));
            }
            let ones: Vec<Vec<usize>> = outputs
                .iter()
                .map(|(d, _)| {
                    std::iter::once(1)
                        .chain(d.iter().skip(1).copied())
                        .collect()
                })
                .collect();
            for (k, p) in group.iter().enumerate() {
                let shares: Vec<(&[f32], &[usize])> = outputs
                    .iter()
                    .zip(&ones)
                    .map(|((_, data), one)| {
                        let each = data.len() / fed_n;
                        (&data[k * each..(k + 1) * each], &one[..])
                    })
                    .collect();
                found.push(self.decode(&shares, p));
            }
            at += n;
        }
        Ok(found)
    }

    /// One picture made ready for the model: placed as its family places it, laid out
    /// and normalised by its lookup, on the device where `fit_on` put it there; where its
    /// batch will be handed over in device memory (`bound`), only placed: it is fitted
    /// into its batch there (`infer_bound`).
    fn prepare(&mut self, bgr: &[u8], size: FrameSize) -> Prepared {
        let (placed, letterbox) = self.placing(size);
        if self.bound {
            return Prepared {
                tensor: Vec::new(),
                placed,
                fed: placed.canvas,
                size,
                letterbox,
            };
        }
        let on_device = self
            .device
            .as_mut()
            .map(|d| d.fit(bgr, size, &placed, &self.lookup));
        let tensor = match on_device {
            Some(Ok(tensor)) => tensor,
            Some(Err(e)) => {
                crate::warn!(
                    "detection: pictures fitted on the CPU from now on (the GPU failed: {e:#})"
                );
                self.device = None;
                self.fit_here(bgr, size, &placed)
            }
            None => self.fit_here(bgr, size, &placed),
        };
        Prepared {
            tensor,
            placed,
            fed: placed.canvas,
            size,
            letterbox,
        }
    }

    /// Where a `size` picture lies in what the model is fed, as its family places it, and
    /// YOLO's letterbox.
    fn placing(&self, size: FrameSize) -> (Placed, Option<yolo::Letterbox>) {
        match self.family {
            Family::Db => (Placed::whole(db::fed_size(size)), None),
            Family::Yolo(_) => {
                let (placed, lb) = yolo::letterbox(size, self.fed);
                (placed, Some(lb))
            }
            Family::Ssd(_) => (Placed::whole(self.fed), None),
        }
    }

    /// A picture fitted as `placed` says, on the CPU.
    fn fit_here(&self, bgr: &[u8], size: FrameSize, placed: &Placed) -> Vec<f32> {
        let canvas = crate::pixel::linear::place(bgr, size, placed);
        self.lookup.apply_f32(placed.canvas, &canvas)
    }

    /// One picture's boxes from its share of each output (values, and dimensions with a
    /// batch of one).
    fn decode(&self, outputs: &[(&[f32], &[usize])], p: &Prepared) -> Vec<Detection> {
        let (data, dims) = outputs[0];
        match (self.family, p.letterbox) {
            (Family::Yolo(layout), Some(lb)) => {
                let keep = yolo::Keep {
                    score: self.score,
                    nms: self.nms,
                };
                yolo::boxes((data, dims, layout), lb, p.size, keep, &self.names)
            }
            (Family::Ssd(layout), _) => {
                let keep = ssd::Keep {
                    score: self.score,
                    nms: self.nms,
                    names: &self.names,
                };
                ssd::boxes(outputs, layout, (p.fed, p.size), &keep)
            }
            _ => {
                let map = FrameSize::new(dims[3], dims[2]);
                db::boxes(data, map, p.size, self.score)
            }
        }
    }

    /// The outputs of one inference of `group` (of `pictures`), `fed_n` fed: in device
    /// memory where the model takes it there (`infer_bound`), else stacked on the host; a
    /// binding that fails is said once and the host's way taken from then on.
    fn infer_group(
        &mut self,
        pictures: &[(&[u8], FrameSize)],
        group: &[Prepared],
        fed_n: usize,
        fed: FrameSize,
    ) -> Result<Vec<Output>, DetectError> {
        if self.bound {
            match self.infer_bound(pictures, group, fed_n, fed) {
                Err(DetectError::Halted) => return Err(DetectError::Halted),
                Err(e) => {
                    crate::warn!("detection: batches stacked on the host from now on (handing them over in device memory failed: {e})");
                    self.bound = false;
                }
                done => return done,
            }
            let again: Vec<Prepared> = pictures
                .iter()
                .map(|&(bgr, size)| self.prepare(bgr, size))
                .collect();
            return self.infer(again.iter().map(|p| &p.tensor[..]), fed_n, fed);
        }
        self.infer(group.iter().map(|p| &p.tensor[..]), fed_n, fed)
    }

    /// One inference of `group` (of `pictures`, `fed_n` fed) fitted into a batch on the
    /// device and bound there as the model's input (ONNX Runtime's I/O binding, CUDA
    /// memory of the context both share); only the outputs come to the host.
    fn infer_bound(
        &mut self,
        pictures: &[(&[u8], FrameSize)],
        group: &[Prepared],
        fed_n: usize,
        fed: FrameSize,
    ) -> Result<Vec<Output>, DetectError> {
        use ort::memory::{AllocationDevice, AllocatorType, MemoryInfo, MemoryType};
        let run = |e: ort::Error| DetectError::Run(e.to_string());
        let fit = self
            .device
            .as_mut()
            .ok_or_else(|| DetectError::Run("no device fits the pictures".into()))?;
        let placed: Vec<(&[u8], FrameSize, Placed)> = pictures
            .iter()
            .zip(group)
            .map(|(&(bgr, size), p)| (bgr, size, p.placed))
            .collect();
        let batch = fit
            .fit_batch(&placed, fed_n, &self.lookup)
            .map_err(|e| DetectError::Run(format!("{e:#}")))?;
        let shape: Vec<i64> = match self.feed.nhwc {
            true => [fed_n, fed.height, fed.width, 3],
            false => [fed_n, 3, fed.height, fed.width],
        }
        .iter()
        .map(|&d| d as i64)
        .collect();
        let on_device = MemoryInfo::new(
            AllocationDevice::CUDA,
            batch.ordinal as i32,
            AllocatorType::Device,
            MemoryType::Default,
        )
        .map_err(run)?;
        debug_assert_eq!(batch.floats as i64, shape.iter().product::<i64>());
        // SAFETY: `batch.ptr` is the device address of `batch.floats` floats on device
        // `batch.ordinal` in the primary context ONNX Runtime's CUDA provider uses
        // (`ModelFit::fit_batch`), exactly the shape's elements; they stay as they are until
        // the next fitting, which comes after this inference has returned, and the tensor
        // (a view, owning nothing) is dropped before then.
        let tensor = unsafe {
            ort::value::TensorRefMut::<f32>::from_raw(
                on_device,
                batch.ptr as usize as *mut std::ffi::c_void,
                shape.into(),
            )
        }
        .map_err(run)?;
        let host = MemoryInfo::new(
            AllocationDevice::CPU,
            0,
            AllocatorType::Device,
            MemoryType::Default,
        )
        .map_err(run)?;
        let mut binding = self.session.create_binding().map_err(run)?;
        binding
            .bind_input(self.input.as_str(), &tensor)
            .map_err(run)?;
        for output in &self.session.outputs {
            binding
                .bind_output_to_device(output.name.as_str(), &host)
                .map_err(run)?;
        }
        let halt = self.halt.clone();
        let ran = self
            .session
            .run_binding_with_options(&binding, &halt.options);
        read_outputs(ran, &halt)
    }

    /// One inference of `n` `tensors` of `fed` pictures, stacked (zeros where fewer are
    /// given), as the model takes them (`Feed`): every output's dimensions and values.
    fn infer<'t>(
        &mut self,
        tensors: impl Iterator<Item = &'t [f32]>,
        n: usize,
        fed: FrameSize,
    ) -> Result<Vec<Output>, DetectError> {
        let run = |e: ort::Error| DetectError::Run(e.to_string());
        let shape = match self.feed.nhwc {
            true => [n, fed.height, fed.width, 3],
            false => [n, 3, fed.height, fed.width],
        };
        let mut stacked = Vec::with_capacity(n * 3 * fed.width * fed.height);
        tensors.for_each(|t| stacked.extend_from_slice(t));
        stacked.resize(n * 3 * fed.width * fed.height, 0.0);
        let value = match self.feed.bytes {
            true => {
                let bytes: Vec<u8> = stacked.iter().map(|&v| v as u8).collect();
                ort::value::Tensor::from_array((shape, bytes))
                    .map_err(run)?
                    .into_dyn()
            }
            false => ort::value::Tensor::from_array((shape, stacked))
                .map_err(run)?
                .into_dyn(),
        };
        let halt = self.halt.clone();
        let ran = self
            .session
            .run_with_options(ort::inputs![self.input.as_str() => value], &halt.options);
        read_outputs(ran, &halt)
    }
}

/// What an inference that `ran` gave: each output's dimensions and values, or why it failed
/// (`Halted` where `halt` ended it).
fn read_outputs(
    ran: Result<ort::session::SessionOutputs<'_>, ort::Error>,
    halt: &Halt,
) -> Result<Vec<Output>, DetectError> {
    let run = |e: ort::Error| DetectError::Run(e.to_string());
    let outputs = ran.map_err(|e| match halt.is_halted() {
        true => DetectError::Halted,
        false => run(e),
    })?;
    outputs
        .iter()
        .map(|(_, v)| values_of(&v).map_err(run))
        .collect()
}

/// Halts a model's inference under way from another thread (ONNX Runtime's terminate flag
/// of the options every run is made with), so that a run's end never waits for a slow
/// model; once halted, every later inference is too.
pub struct Halt {
    options: ort::session::RunOptions,
    halted: std::sync::atomic::AtomicBool,
}

impl Halt {
    fn new() -> Result<Self, DetectError> {
        let options =
            ort::session::RunOptions::new().map_err(|e| DetectError::Run(e.to_string()))?;
        Ok(Self {
            options,
            halted: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Halts the inference under way and every later one.
    pub fn halt(&self) {
        self.halted.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Err(e) = self.options.terminate() {
            crate::debug!("detection: halting the model: {e}");
        }
    }

    fn is_halted(&self) -> bool {
        self.halted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Model {
    /// The most frames one inference should take: 32 on a GPU provider, where a batch of
    /// every camera's picture costs little more than one, 16 on the CPU (taken round the
    /// inputs: `sink::detecting::slots`); a model that fixes its batch splits a larger one.
    pub fn batch_most(&self) -> usize {
        match self.on_gpu {
            true => GPU_BATCH,
            false => CPU_BATCH,
        }
    }

    /// What halts its inferences from another thread.
    pub fn halt(&self) -> std::sync::Arc<Halt> {
        self.halt.clone()
    }

    /// Bytes of pictures fitted on the device that were brought to the host for the model
    /// (none where its batches are handed over in device memory); None where the CPU fits.
    pub fn fitted_to_host(&self) -> Option<u64> {
        self.device.as_ref().map(|d| d.brought_down())
    }
}

/// One output of an inference: its dimensions and values.
type Output = (Vec<usize>, Vec<f32>);

/// An output's dimensions and values as floats (classes may come as integers).
fn values_of(v: &ort::value::DynValue) -> Result<Output, ort::Error> {
    let dims = |d: &ort::tensor::Shape| d.iter().map(|&d| d.max(0) as usize).collect();
    if let Ok((d, data)) = v.try_extract_tensor::<f32>() {
        return Ok((dims(d), data.to_vec()));
    }
    if let Ok((d, data)) = v.try_extract_tensor::<i64>() {
        return Ok((dims(d), data.iter().map(|&x| x as f32).collect()));
    }
    let (d, data) = v.try_extract_tensor::<i32>()?;
    Ok((dims(d), data.iter().map(|&x| x as f32).collect()))
}

/// A picture made ready for the model: its tensor (none yet where its batch is fitted on
/// the device), where it is placed, the size it is fed at, its own size, and where YOLO's
/// letterbox put it.
struct Prepared {
    tensor: Vec<f32>,
    placed: Placed,
    fed: FrameSize,
    size: FrameSize,
    letterbox: Option<yolo::Letterbox>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ultralytics_imgsz_is_read() {
        assert_eq!(imgsz_of("[320, 320]"), Some((320, 320)));
        assert_eq!(imgsz_of("[384, 640]"), Some((384, 640)));
        assert_eq!(imgsz_of("640"), Some((640, 640)));
        assert_eq!(imgsz_of("[0, 320]"), None);
        assert_eq!(imgsz_of("[100000, 100000]"), None);
        assert_eq!(imgsz_of("big"), None);
    }
}
