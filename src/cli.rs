//! Command-line interface: `framepipe [OPTIONS]` runs the pipeline; `framepipe bench`,
//! `framepipe doctor` and `framepipe check-kernel FILE` are the other commands.

use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand};

use crate::backend::{BackendKind, IssueOrder, StreamLayout};
use crate::detect::{Draw, Provider};
use crate::filter::Chain;
use crate::frame::FrameSize;
use crate::output::{encode::OutPixel, Codec};
use crate::pixel::PixelFormat;
use crate::source::{open::Decode, stdin::InputFormat};

#[derive(Parser, Debug)]
#[command(
    name = "framepipe",
    version,
    about = "Live video processing through a banded, overlapped CUDA pipeline",
    long_about = "Live video processing through a banded, overlapped CUDA pipeline.\n\n\
        Frames are captured into a ring of page-locked buffers, cut into horizontal bands \
        that travel on separate CUDA streams (copy in, filter, copy out) with several frames \
        in flight, and shown in a window (q or Esc quits) or written to a file.",
    args_conflicts_with_subcommands = true,
    after_help = "Window keys: q or Esc quit, h figures, 1-9 filter presets, p page-locking, b/B bands, t timeline strip, space pause, . step one frame, r reload kernel files, s save frame.\n\
        Exit codes: 0 done (the input ended, --frames reached, or stopped with q, Ctrl-C or a stop signal: \
        every frame captured before the stop is written and the output finalized); \
        1 any error, bad arguments included (one line says what), or a stop that something blocked for a second; \
        130 aborted by a second stop signal (the output still finalized)."
)]
/// The command line.
pub struct Cli {
    /// `bench` or `doctor`; none runs the pipeline.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The pipeline's options.
    #[command(flatten)]
    pub run: RunArgs,
}

/// Commands besides running the pipeline.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Measure the pipeline against the copy-engine bound on this GPU.
    Bench(Box<BenchArgs>),
    /// Show the GPU, PCIe link, copy bandwidth, OpenCV, display and cameras.
    Doctor,
    /// Run a kernel file on the GPU with 1 band and with 2-16 bands, over several frame
    /// sizes, and say whether the outputs are identical (and if not, where and why).
    CheckKernel(CheckKernelArgs),
    /// Serve one API over every shard of a wall (`--inputs … --shard K/N` on many hosts):
    /// their inputs, events, recordings, health and metrics merged, each change sent to the
    /// camera's owner.
    Front(FrontArgs),
}

/// `framepipe front --shards URL,… --serve [ADDR:]PORT`.
#[derive(Args, Debug, Clone)]
pub struct FrontArgs {
    /// The shards' --serve addresses, in the order of their --shard K (comma-separated
    /// http://HOST:PORT; {A..B} stands for each number: http://wall-{0..3}.wall:8080).
    #[arg(long, value_name = "URL,…", required = true)]
    pub shards: Vec<String>,
    /// Where the front listens ([ADDR:]PORT, as --serve).
    #[arg(long, value_name = "[ADDR:]PORT")]
    pub serve: String,
    /// Read the front's own token from the first line of this file (or
    /// FRAMEPIPE_SERVE_TOKEN); every request but /healthz carries it.
    #[arg(long, value_name = "FILE")]
    pub serve_token_file: Option<String>,
    /// Another host name the front answers to (besides its IP addresses and localhost).
    #[arg(long, value_name = "NAME")]
    pub serve_host: Vec<String>,
    /// Serve on an address other machines reach without a token (refused otherwise).
    #[arg(long)]
    pub serve_insecure: bool,
    /// Read the token the shards ask for from the first line of this file.
    #[arg(long, value_name = "FILE")]
    pub shard_token_file: Option<String>,
}

/// `framepipe check-kernel FILE [--radius R] [--fn NAME] [NAME=VALUE …]`.
#[derive(Args, Debug, Clone)]
pub struct CheckKernelArgs {
    /// The kernel's `.cu` file.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Rows the kernel reads above and below its pixel, as `radius=R` in a chain.
    #[arg(long, default_value_t = 0)]
    pub radius: usize,
    /// The `__global__` function, where the file has several.
    #[arg(long = "fn", value_name = "NAME")]
    pub function: Option<String>,
    /// The kernel's parameters.
    #[arg(value_name = "NAME=VALUE")]
    pub params: Vec<String>,
    /// Frame sizes to try, comma-separated [default: 33x17,321x241,640x480,1920x1080].
    #[arg(long, value_delimiter = ',')]
    pub size: Vec<FrameSize>,
}

impl CheckKernelArgs {
    /// The chain the check runs: this kernel alone.
    pub fn chain(&self) -> Result<Chain, crate::filter::user::KernelError> {
        let mut settings = vec![format!("radius={}", self.radius)];
        settings.extend(self.function.iter().map(|f| format!("fn={f}")));
        settings.extend(self.params.iter().cloned());
        let kernel = crate::filter::user::UserKernel::parse(&self.file, &settings)?;
        Ok(Chain::from_filters(vec![crate::filter::Filter::Kernel(
            std::sync::Arc::new(kernel),
        )]))
    }
}

/// Options of a pipeline run (`framepipe [OPTIONS]`), in groups: each group is read by the
/// plan alone (`plan::Start`, `RunPlan::from_args`).
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Where frames come from (`--input`, `--inputs`, `--shard`) and how they are read.
    #[command(flatten)]
    pub sources: InputArgs,

    /// The part of each input that is read, as ffmpeg's input options count it.
    #[command(flatten)]
    pub trim: TrimArgs,

    /// What runs on the frames, and how the pipeline runs it.
    #[command(flatten)]
    pub engine: EngineArgs,

    /// Where processed frames are written, and how a file is replaced.
    #[command(flatten)]
    pub outputs: OutputArgs,

    /// What a video output's encoder is told, named as ffmpeg names it.
    #[command(flatten)]
    pub encode: EncodeArgs,

    /// Each input's own packets, written as they came (`--record`).
    #[command(flatten)]
    pub recording: RecordArgs,

    /// What a person watches: the window, the mosaic and the browser view.
    #[command(flatten)]
    pub view: ViewArgs,

    /// What the pictures hold: an object detector run on them.
    #[command(flatten)]
    pub detect: DetectArgs,

    /// What the detected objects do: tracks, zones, lines, events.
    #[command(flatten)]
    pub events: EventArgs,

    /// What the run writes about itself.
    #[command(flatten)]
    pub reports: ReportArgs,

    /// Print only errors, warnings and the summary.
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,

    /// Print details too, OpenCV's own log lines among them.
    #[arg(short, long)]
    pub verbose: bool,
}

/// Where frames come from (`--input`, `--inputs`, `--shard`) and how they are read.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Inputs")]
pub struct InputArgs {
    /// Camera index, video file, URL, GStreamer pipeline (holds '!'), still image, named
    /// pipe (YUV4MPEG2 or raw frames, as standard input), '-' (standard input), or
    /// 'pattern' (its own size, format and rate as 'pattern:640x360:nv12:25'). Default:
    /// camera 0, or the test pattern where there is no camera. Give it again for several
    /// inputs in one run: one GPU thread serves them all, the window shows a mosaic.
    #[arg(short, long, value_name = "SOURCE")]
    pub input: Vec<String>,

    /// Read inputs from FILE too, after any --input: one a line as --input takes it, or
    /// 'NAME = SOURCE' to name it ({name} in --output and --record), 'NAME [detect=off,
    /// detect-fps=N, record=off, segment=10m, retain=7d, decode=gpu] = SOURCE' to give it
    /// settings of its own; '#' starts a comment. A FILE ending in .toml is a camera file ([[camera]]
    /// tables: name, source and those settings; docs/service.md); --config is its other
    /// name. The file is read again when it changes and on SIGHUP (which then stops
    /// nothing): where this process's inputs change, those gone leave the running wall and
    /// new ones join it, the others untouched; a file that no longer reads keeps the inputs
    /// running as they are.
    #[arg(long, visible_alias = "config", value_name = "FILE")]
    pub inputs: Option<String>,

    /// Run one shard of the inputs: K/N (shard K of N, from 0), or N with K taken from
    /// JOB_COMPLETION_INDEX (a Kubernetes indexed Job) or the -ORDINAL ending the host name
    /// (a StatefulSet's pod). An input belongs to one shard by a stable hash of its name:
    /// adding a camera moves no other.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,

    /// Open a live network stream again (with a growing pause, up to 8 s) when it ends or
    /// fails, until the run stops. On by default with several inputs.
    #[arg(long)]
    pub reconnect: bool,

    /// Who decodes a video file or a network stream (not a GStreamer pipeline): cpu
    /// (FFmpeg's libavcodec; frames go to the GPU in the decoder's own YUV, converted
    /// there), gpu (NVDEC through libavcodec, for H.264 and HEVC; with the CUDA backend the
    /// frames stay on the GPU as NV12; where NVDEC can't, the CPU decodes and the run says
    /// why), auto (NVDEC where it decodes faster than this machine's cores would, by the
    /// H200's figures, with the CUDA backend; else the CPU; `framepipe doctor` says what it
    /// picks here), or opencv (OpenCV's capture, which converts every frame to BGR on the
    /// CPU: for comparison, and as a fallback).
    #[arg(long, value_enum, default_value = "cpu")]
    pub decode: crate::source::open::Decode,

    /// What `--input -` reads from standard input: a YUV4MPEG2 stream (ffmpeg -f
    /// yuv4mpegpipe -), or raw frames of this format (with --size, and --fps). With
    /// `--input pattern`, the pattern's format (y4m: bgr24).
    #[arg(long, value_enum, default_value = "y4m")]
    pub input_format: crate::source::stdin::InputFormat,

    /// Size of the test pattern [default: 1280x720]; a camera is asked for it (and says
    /// what it gave); a file or stream keeps its own size.
    #[arg(long, value_name = "WxH")]
    pub size: Option<FrameSize>,

    /// Frame rate of the test pattern (0: as fast as the pipeline goes) [default: 30]; a
    /// camera is asked for it; also the rate written to --output when the input does not say.
    #[arg(long, value_name = "FPS")]
    pub fps: Option<f64>,

    /// Show or send a file as fast as it decodes instead of at its own rate (so does --fps
    /// 0): in the window, and where every output is live (--realtime's default).
    #[arg(long, conflicts_with = "realtime")]
    pub no_pace: bool,

    /// Read a file at its own rate, as ffmpeg's -re. On by default where a file's only
    /// outputs are live (streams, HLS, --serve) or in the window; headless runs that write
    /// a file or standard output go as fast as they can.
    #[arg(long, visible_alias = "re")]
    pub realtime: bool,

    /// In the window, close at the end of a file instead of keeping its last frame up
    /// until q.
    #[arg(long)]
    pub exit_at_end: bool,
}

/// The part of each input that is read, as ffmpeg's input options count it.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Trimming")]
pub struct TrimArgs {
    /// Start a file at this time (seconds, or [HH:]MM:SS[.mmm]), as ffmpeg's -ss before -i:
    /// seeked to the keyframe before, decoded from there, frames before it dropped; the
    /// outputs' times start at 0 there.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub ss: Option<f64>,

    /// Stop reading at this time of the input (as ffmpeg's -to).
    #[arg(long, value_name = "TIME", value_parser = parse_time, conflicts_with = "duration")]
    pub to: Option<f64>,

    /// Read this long from --ss (or the start), as ffmpeg's -t.
    #[arg(short = 't', long, value_name = "TIME", value_parser = parse_time)]
    pub duration: Option<f64>,
}

/// What runs on the frames, and how the pipeline runs it.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Processing")]
pub struct EngineArgs {
    /// Filter chain, e.g. 'gray,gain:1.5,10'. Filters: copy, invert, gray, gain:ALPHA[,BETA],
    /// blur:K (K odd), gauss:SIGMA or gauss:K,SIGMA, sobel, sharpen:AMOUNT, median3,
    /// scale:W:H[:area], crop:W:H[:X:Y], pad:W:H[:X:Y[:RRGGBB]], hflip, vflip, transpose[:DIR],
    /// fps:N, text:TEXT[,x=X,y=Y,size=PX,color=RRGGBB,box=0] ({time} {pts} {name} {input}
    /// {frame} put in), timestamp[:pts], and your own CUDA kernel: kernel:FILE.cu[,radius=R][,fn=NAME][,PARAM=VALUE…] (CUDA only;
    /// written against kernels/framepipe.cuh; reloaded when the file is saved). ffmpeg's
    /// forms are taken too: scale=320:180, crop=w=64:h=64, transpose=1, fps=30000/1001,
    /// negate, gblur=sigma=2, format=gray.
    #[arg(short, long, value_name = "CHAIN", default_value = "copy")]
    pub filter: Chain,

    /// Where filters run: auto (CUDA if present, else CPU), cuda, cpu.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendKind,

    /// Stop after N frames.
    #[arg(long, value_name = "N")]
    pub frames: Option<u64>,

    /// Horizontal bands of a frame that finds the GPU idle (each band's copies and kernels
    /// overlap the others'; --streams says which streams carry them) [default: by frame
    /// height: 1 up to 360 rows, 4 up to 1200, else 8; half that for 4:2:0 frames, whose
    /// bands take three copies each way].
    #[arg(long, value_name = "N")]
    pub bands: Option<usize>,

    /// Bands for a frame submitted while others are still on the GPU (a steady stream, such
    /// as a file): overlap with its neighbours hides its copies, so fewer bands cost less.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub busy_bands: usize,

    /// Frame slots in the ring (at least 2; refused when the ring would not fit in the
    /// machine's available memory) [default: 8, fewer for frames so large that 8 would
    /// take more than 2 GiB]. NVDEC's pictures stay on the GPU for rings of up to 8 slots;
    /// a larger ring has them brought down into its slots.
    #[arg(long, value_name = "N")]
    pub ring: Option<usize>,

    /// Frames on the GPU at once [default: ring - 2, at least 1, at most 4; 6 above 1200 rows].
    #[arg(long, value_name = "N")]
    pub in_flight: Option<usize>,

    /// Leave frame buffers pageable instead of page-locking them (the original
    /// question's mistake; for comparison).
    #[arg(long)]
    pub pageable: bool,

    /// How CUDA streams carry the bands: per-stage (one copy-in, one compute and one
    /// copy-out stream) or per-band (a stream per band and frame in flight).
    #[arg(long, value_enum, default_value = "per-stage")]
    pub streams: crate::backend::StreamLayout,

    /// Issue a frame that finds the GPU idle call by call instead of replaying a CUDA graph
    /// captured from the same calls (one launch for all its bands, which wakes the GPU
    /// sooner at a live rate: BENCHMARKS.md).
    #[arg(long)]
    pub no_graphs: bool,

    /// Don't watch the chain's kernel files for changes (r in the window still reloads).
    #[arg(long)]
    pub no_watch: bool,

    /// Not a flag: every input's frames are also handed, in this format, to the program
    /// that embeds framepipe (`app::run_embedded`, the Python package).
    #[arg(skip)]
    pub handover: Option<crate::pixel::PixelFormat>,
}

/// Where processed frames are written, and how a file is replaced.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Outputs")]
pub struct OutputArgs {
    // The help texts below write `{n}` with a word joiner after the brace (clap reads a
    // plain `{n}` as a line break); `options_markdown` takes it out.
    #[arg(
        short,
        long,
        value_name = "PATH",
        help = "Video file (.mp4, .mov, .mkv, .avi, .webm: H.264 by default, --codec ffv1 keeps \
            every pixel), image sequence ('frames/%05d.png', .ppm; its folder is created), '-' \
            (standard output), a stream (udp://, srt://: MPEG-TS; rtmp://: FLV; rtsp://: \
            published to a server) or an HLS playlist (live/index.m3u8). With several inputs, \
            {\u{2060}n} in the name is the input's number and {\u{2060}name} its name: one \
            output per input (without either, the mosaic is written). A video keeps a file \
            input's frame times and rate, and copies its audio streams (--no-audio leaves them \
            out). Give it again for streams beside a file (one file, image sequence or \
            standard output, any number of streams)."
    )]
    /// Where the frames go (`help` above).
    pub output: Vec<String>,

    /// What `--output -` writes: YUV4MPEG2 frames in i420 (C420jpeg) or gray (Cmono), or
    /// headerless nv12 or bgr24 frames (which Y4M can't hold) [possible values: i420, gray,
    /// nv12, bgr24; also ffmpeg's yuv420p, grey, bgr].
    #[arg(long, value_name = "FORMAT", value_parser = writable_format)]
    pub output_format: Option<crate::pixel::PixelFormat>,

    /// Replace an --output that exists (as ffmpeg -y): the new file is written beside it
    /// and renamed over it once finished with at least one frame. Without -y an existing
    /// output is refused.
    #[arg(short = 'y', long = "overwrite")]
    pub overwrite: bool,

    /// Never replace an existing --output (as ffmpeg -n): refuse it (the default, said
    /// explicitly).
    #[arg(short = 'n', long = "no-overwrite", conflicts_with = "overwrite")]
    pub no_overwrite: bool,

    /// Write an .mp4 or .mov in fragments of at most 0.5 s, so that a crash or kill -9 keeps
    /// all but the last half second (the default for live sources: cameras, streams, the pattern).
    #[arg(long)]
    pub fragmented: bool,

    /// Leave the input's audio out of a video --output (by default it is copied as it is).
    #[arg(long)]
    pub no_audio: bool,
}

/// `--detect` and its companions.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Detection")]
pub struct DetectArgs {
    /// Run this ONNX object detector on the pictures (ONNX Runtime, loaded at run time from
    /// ORT_DYLIB_PATH or the copy scripts/setup.sh installs; its family read from its
    /// outputs: DB text detection, as PaddleOCR's PP-OCRv4 detector; YOLO as Ultralytics
    /// exports it, v5, v8/v11 or with NMS; SSD-style, boxes, scores and classes apart).
    #[arg(long, value_name = "MODEL.onnx")]
    pub detect: Option<std::path::PathBuf>,

    /// The least score a box is kept with, 0 to 1 [default: the family's own: 0.5 for DB
    /// and SSD, 0.25 for YOLO].
    #[arg(long, value_name = "SCORE", value_parser = parse_score)]
    pub detect_score: Option<f32>,

    /// Detections a second of each input [default: every frame of a file or of frames piped
    /// in; 5 of a live input]. A detector slower than that skips frames (counted), never
    /// video.
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    pub detect_fps: Option<f64>,

    /// Write each detected frame's boxes as one JSON line to FILE (input, name, frame,
    /// seconds, frame size, and each box's label, score and [left, top, right, bottom] in
    /// the input's pixels); an existing FILE is replaced only with -y.
    #[arg(long, value_name = "FILE.jsonl")]
    pub detections: Option<std::path::PathBuf>,

    /// Class names, one a line, the first for class 0 [default: the model's own `names`,
    /// else "class N"; DB text detection: "text"].
    #[arg(long, value_name = "FILE")]
    pub detect_labels: Option<std::path::PathBuf>,

    /// The overlap (IoU, 0 to 1) above which the lower-scored of two boxes of one class is
    /// dropped (NMS; YOLO and SSD's raw head) [default: 0.7 for YOLO, Ultralytics' own;
    /// 0.45 for SSD].
    #[arg(long, value_name = "IOU", value_parser = parse_score)]
    pub detect_nms: Option<f32>,

    /// The picture size a YOLO or SSD model whose input leaves its sides free (an
    /// Ultralytics export with dynamic=True) is fed at [default: its `imgsz` metadata, else
    /// 640x640]. A model that fixes its sides is fed at them, and this must agree.
    #[arg(long, value_name = "WxH")]
    pub detect_size: Option<FrameSize>,

    /// Where the model runs: auto (CUDA where ONNX Runtime offers it, as onnxruntime-gpu
    /// does, else the CPU), cpu, cuda, or tensorrt (TensorRT, its engines kept in
    /// ~/.cache/framepipe/tensorrt; the first run builds them). A provider asked for and not
    /// offered is an error before the first frame.
    #[arg(long, value_name = "WHERE", default_value = "auto")]
    pub detect_provider: Provider,

    /// What of the boxes is drawn into the pictures shown and encoded (window, mosaic,
    /// browser view, video outputs; recordings and copies stay untouched).
    #[arg(long, value_name = "WHAT", default_value = "labels")]
    pub draw: Draw,
}

/// `--zone`, `--line` and where their events go.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Events")]
pub struct EventArgs {
    /// A zone: NAME:X1,Y1,X2,Y2,X3,Y3… (a polygon, in the input's pixels), on every input or
    /// the one @INPUT names (its number or name) at the end. An object (where its box
    /// stands: the bottom middle) entering, leaving or staying makes events. Repeatable.
    #[arg(long, value_name = "NAME:X,Y,…[@INPUT]")]
    pub zone: Vec<String>,

    /// A line: NAME:X1,Y1,X2,Y2 [@INPUT]; an object crossing it makes an event saying which
    /// way (left-to-right as one walking from the first point to the second sees its sides).
    /// Repeatable.
    #[arg(long, value_name = "NAME:X1,Y1,X2,Y2[@INPUT]")]
    pub line: Vec<String>,

    /// Where events go: FILE.jsonl (a JSON line each; replaced only with -y),
    /// http://HOST[:PORT]/PATH (a JSON POST each, retried while the receiver is down), or
    /// mqtt://HOST[:PORT]/PREFIX (PREFIX/INPUT/events, retained zone counts on
    /// PREFIX/INPUT/zones/ZONE; ?discovery=homeassistant: each camera described to Home
    /// Assistant). Repeatable. Without --detect: motion's events and the
    /// cameras' own (down, up, recording failed).
    #[arg(long, value_name = "WHERE")]
    pub events: Vec<String>,

    /// Only these labels make events (comma-separated) [default: every label].
    #[arg(long, value_name = "LABEL,…", value_delimiter = ',')]
    pub event_labels: Vec<String>,

    /// Seconds in a zone after which an object's stay is an event of its own.
    #[arg(long, value_name = "SECONDS", value_parser = parse_positive)]
    pub stay: Option<f64>,

    /// Write a clip of each event: the camera's own packets, untouched, from the keyframe at
    /// or before --pre seconds before it to --post seconds after the last event of the clip
    /// (events meanwhile extend it), and beside it a JPEG snapshot of each event's frame with
    /// its box (the clip's name with .jpg; -2.jpg, -3.jpg for the events that extend it).
    /// PATTERN (.mp4, .mov, .mkv or .ts) takes {name} (the input's), {event} (type and zone
    /// or line, or motion), {track} and {time} (local, YYYYmmdd-HHMMSS); its folder is made
    /// where missing.
    #[arg(long, value_name = "PATTERN")]
    pub clip: Option<String>,

    /// Watch each input for motion (a cheap frame difference): motion-start and motion-end
    /// events (clipped with --clip), and with --detect the detector run only while there is
    /// motion, as NVRs save their detectors' time.
    #[arg(long)]
    pub motion: bool,

    /// Seconds of a clip before its event [default: 5].
    #[arg(long, value_name = "SECONDS", value_parser = parse_positive)]
    pub pre: Option<f64>,

    /// Seconds of a clip after its last event [default: 10].
    #[arg(long, value_name = "SECONDS", value_parser = parse_positive)]
    pub post: Option<f64>,
}

/// A score, 0 to 1.
fn parse_score(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a score from 0 to 1")),
    }
}

/// A positive number.
fn parse_positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("'{s}' is not a positive number")),
    }
}

/// What a video output's encoder is told, named as ffmpeg names it.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Encoding")]
pub struct EncodeArgs {
    /// Codec of a video --output [default: h264 in .mp4/.mov/.mkv/.ts/.flv, mjpeg in .avi,
    /// vp9 in .webm; ffv1 keeps every pixel; copy writes the input's own packets, neither
    /// decoded nor encoded, as ffmpeg -c copy does].
    #[arg(long, value_enum)]
    pub codec: Option<CodecArg>,

    /// Quality, 1-100, of Motion JPEG or MPEG-4 Part 2 (a fixed quantiser, 31 to 1)
    /// [default: quantiser 3, like ffmpeg -q:v 3].
    #[arg(long, value_name = "Q", value_parser = clap::value_parser!(u8).range(1..=100))]
    pub quality: Option<u8>,

    /// Constant quality of an h264, hevc or vp9 --output (ffmpeg's -crf: lower is better;
    /// 0-51, vp9 0-63) [default: the encoder's, 23 for h264].
    #[arg(long, value_name = "N")]
    pub crf: Option<f32>,

    /// Target bit rate of a video --output (ffmpeg's -b:v), e.g. 2M or 800k.
    #[arg(long, value_name = "RATE", value_parser = crate::output::encode::parse_rate)]
    pub bitrate: Option<u64>,

    /// Highest bit rate (ffmpeg's -maxrate), with --bufsize.
    #[arg(long, value_name = "RATE", value_parser = crate::output::encode::parse_rate)]
    pub maxrate: Option<u64>,

    /// The rate control's buffer (ffmpeg's -bufsize), with --maxrate, e.g. 4M.
    #[arg(long, value_name = "BITS", value_parser = crate::output::encode::parse_rate)]
    pub bufsize: Option<u64>,

    /// h264/hevc speed against size (ffmpeg's -preset): ultrafast … medium … veryslow.
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,

    /// h264/hevc tuning (ffmpeg's -tune), e.g. zerolatency, film, animation.
    #[arg(long, value_name = "NAME")]
    pub tune: Option<String>,

    /// Keyframe interval of a video --output, in frames (ffmpeg's -g).
    #[arg(long, value_name = "N")]
    pub gop: Option<u32>,

    /// Pixel format a video --output stores (ffmpeg's -pix_fmt): yuv420p [default],
    /// yuv422p or yuv444p (h264, hevc, vp9).
    #[arg(long, value_name = "FORMAT", value_enum)]
    pub pix_fmt: Option<crate::output::encode::OutPixel>,

    /// Any other option of the video encoder, KEY=VALUE, repeatable (ffmpeg's -KEY VALUE),
    /// e.g. profile=high, x264-params=ref=2.
    #[arg(long, value_name = "KEY=VALUE", value_parser = crate::output::encode::parse_opt)]
    pub codec_opt: Vec<(String, String)>,
}

/// Each input's own packets, written as they came (`--record`).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Recording")]
pub struct RecordArgs {
    #[arg(
        long,
        value_name = "PATH",
        help = "Record each input's own stream as it arrives, video and audio, neither \
            decoded nor encoded (what an NVR keeps), beside the outputs: .mp4, .mov, .mkv or \
            .ts; {\u{2060}n} is the input's number and {\u{2060}name} its name (one of them \
            needed with several inputs). Written under a hidden .NAME.part and renamed when \
            finished; nothing is replaced. A file that can't be written fails the run."
    )]
    /// Where each input's own packets go (`help` above).
    pub record: Option<String>,

    /// Cut each --record into files of about this length (90, 90s, 10m, 1h), each from a
    /// keyframe; the name takes {seg} (the segment's number, 00000 on) or the local time
    /// (%Y%m%d-%H%M%S).
    #[arg(long, value_name = "DURATION", requires = "record", value_parser = parse_duration)]
    pub segment: Option<std::time::Duration>,

    /// Delete recorded segments that ended longer ago than this (12h, 7d, 2w), oldest first;
    /// only closed segments this recorder wrote and indexed are ever deleted.
    #[arg(long, value_name = "AGE", requires = "record", value_parser = parse_age)]
    pub retain: Option<std::time::Duration>,

    /// Keep the recordings under this size in all (500M, 20G, 1.5T; Mi, Gi, Ti for powers of
    /// 1024): the camera holding the most loses its oldest segment first.
    #[arg(long, value_name = "SIZE", requires = "record", value_parser = parse_size)]
    pub retain_size: Option<u64>,

    /// Keep at least this share of the recordings' disk free (10%), deleting the oldest
    /// segments as --retain-size does.
    #[arg(long, value_name = "PERCENT", requires = "record", value_parser = parse_percent)]
    pub retain_free: Option<f64>,
}

/// What a person watches: the window, the mosaic and the browser view.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Window and browser view")]
pub struct ViewArgs {
    /// No window: write --output, or process and discard.
    #[arg(long)]
    pub headless: bool,

    /// With several inputs: the mosaic's grid, as COLUMNSxROWS [default: as square as the
    /// inputs allow, wider than tall].
    #[arg(long, value_name = "CxR")]
    pub grid: Option<FrameSize>,

    /// With several inputs: one window per input instead of the mosaic.
    #[arg(long)]
    pub no_mosaic: bool,

    /// Serve a page that shows the processed video live, its figures and the window's
    /// controls, at http://127.0.0.1:PORT/ (or at ADDRESS:PORT, given whole: 0.0.0.0:8080
    /// for every interface).
    #[arg(long, value_name = "[ADDR:]PORT")]
    pub serve: Option<String>,

    /// Require this token on every request to --serve (?token=… in the page's address, or
    /// `Authorization: Bearer`). Other users can read it with `ps`: --serve-token-file or
    /// FRAMEPIPE_SERVE_TOKEN keep it from them.
    #[arg(long, value_name = "TOKEN", conflicts_with = "serve_token_file")]
    pub serve_token: Option<String>,

    /// Read --serve's token from the first line of this file.
    #[arg(long, value_name = "FILE")]
    pub serve_token_file: Option<String>,

    /// Another host name the browser view answers to (besides its IP addresses and
    /// localhost: requests naming any other host are refused, against DNS rebinding).
    #[arg(long, value_name = "NAME")]
    pub serve_host: Vec<String>,

    /// Serve on an address other machines reach without a token (refused otherwise).
    #[arg(long)]
    pub serve_insecure: bool,

    /// Let cameras added through --serve's API listen for a stream pushed to this host
    /// (tcp://…?listen=1, srt://…?mode=listener, udp:// on an address beyond loopback);
    /// refused otherwise.
    #[arg(long)]
    pub serve_listening_sources: bool,

    /// A STUN or TURN server the browser view's WebRTC viewers use to reach it from behind
    /// a NAT: stun:HOST[:PORT], or turn:USER:PASSWORD@HOST[:PORT] (turns: over TLS).
    /// Repeatable.
    #[arg(long, value_name = "URL")]
    pub ice_server: Vec<String>,

    /// Serve each input's own packets (video and audio, neither decoded nor encoded) over
    /// RTSP, to any number of players over TCP or UDP, at rtsp://127.0.0.1:PORT/NAME (the
    /// input's name as shown, or its number); ADDRESS:PORT listens there, with a token
    /// beyond loopback as --serve (--serve-token-file, FRAMEPIPE_SERVE_TOKEN; players give
    /// it as ?token= or rtsp://user:TOKEN@…).
    #[arg(long, value_name = "[ADDR:]PORT")]
    pub rtsp_serve: Option<String>,

    /// --serve's /healthz answers 503 once an input has been down this long (reconnecting,
    /// or not open yet), or has failed; 200 otherwise (30s, 2m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
    pub health_budget: std::time::Duration,
}

/// What the run writes about itself.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Reports")]
pub struct ReportArgs {
    /// Write a Chrome trace (Perfetto, chrome://tracing) of the first frames: every band's
    /// H2D, kernels and D2H on its stream's track, capture and output on theirs.
    #[arg(long, value_name = "FILE.json")]
    pub trace: Option<String>,

    /// Draw the first frames of that trace as an SVG timeline, one row per track.
    #[arg(long, value_name = "FILE.svg")]
    pub timeline: Option<String>,

    /// Frames --trace and --timeline record: the first N (first:N, or N) or the last N
    /// before the run ended (last:N; every frame is then timed, a bounded ring keeping the
    /// last N).
    #[arg(long, value_name = "first:N|last:N", default_value = "first:100")]
    pub trace_frames: crate::trace::TraceFrames,

    /// Also write the exit summary as JSON to this file (counts, times, changes, overlap,
    /// and the error when the run failed), for scripts and tests.
    #[arg(long, value_name = "FILE.json")]
    pub summary_json: Option<String>,
}

/// `framepipe bench`: what to measure.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Frame sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1920x1080,3840x2160")]
    pub size: Vec<FrameSize>,
    /// Filter chain to measure; repeat for several.
    #[arg(long, default_values = ["copy", "gray"])]
    pub filter: Vec<Chain>,
    /// Pixel formats of the frames, comma-separated: `i420` in and out, or `i420:bgr` (in,
    /// then out; bgr out is the window's path). Each is measured against its own bound.
    #[arg(long, value_delimiter = ',', default_value = "bgr")]
    pub format: Vec<crate::pixel::Formats>,
    /// Band counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,8,16")]
    pub bands: Vec<usize>,
    /// Frames in flight, comma-separated (the ring holds four more).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,6")]
    pub in_flight: Vec<usize>,
    /// Band counts measured with pageable buffers.
    #[arg(long, value_delimiter = ',', default_value = "1,3,8")]
    pub pageable_bands: Vec<usize>,
    /// Frames in flight measured with pageable buffers.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    pub pageable_in_flight: Vec<usize>,
    /// Also measure breadth-first issue order (every band's upload first, …).
    #[arg(long)]
    pub compare_issue: bool,
    /// Also measure the per-band stream layout (a stream per band and frame in flight).
    #[arg(long)]
    pub compare_streams: bool,
    /// Also measure frames that find the GPU idle issued call by call instead of replayed
    /// as CUDA graphs (one frame in flight, and the defaults unpaced and live).
    #[arg(long)]
    pub compare_graphs: bool,
    /// Also measure the defaults with stream priorities (downloads, then kernels, then
    /// uploads).
    #[arg(long)]
    pub compare_priorities: bool,
    /// Also measure the defaults driven from one thread with no capture or consumer
    /// thread: what the pipeline's threads cost.
    #[arg(long)]
    pub compare_threads: bool,
    /// Rate of the paced "live" run with the default settings.
    #[arg(long, default_value_t = 60.0)]
    pub live_fps: f64,
    /// Target duration of each measurement in seconds.
    #[arg(long, default_value_t = 0.3)]
    pub seconds: f64,
    /// Only the bound, the original question's configuration and the app's defaults (no
    /// grid): a quick comparison of filters.
    #[arg(long)]
    pub only_defaults: bool,
    /// Draw the first frames of the app's defaults (page-locked) above the original
    /// question's configuration (pageable, 3 bands, one frame at a time), for the first
    /// size and filter, as an SVG timeline.
    #[arg(long, value_name = "FILE.svg")]
    pub timeline: Option<String>,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

/// `--output-format`: a pixel format framepipe writes (the others are read only).
/// A flag's value that does not parse (clap shows it after the flag's name).
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    /// Not a length of time in range.
    #[error("'{0}' is not a length of time from 0.1 s to 7 days (90, 90s, 10m, 1h)")]
    Duration(String),
    /// Not a pixel format.
    #[error("unknown pixel format '{0}' (framepipe writes i420, gray, nv12 or bgr24 frames)")]
    Format(String),
    /// Not an age.
    #[error("'{0}' is not an age: a number with s, m, h, d or w (12h, 7d, 2w)")]
    Age(String),
    /// Not a size.
    #[error(
        "'{0}' is not a size: a number with k, M, G or T, or Ki, Mi, Gi, Ti (500M, 20G, 1.5T)"
    )]
    Size(String),
    /// Not a share.
    #[error("'{0}' is not a share of the disk: a percentage above 0 and below 100 (10%)")]
    Percent(String),
    /// Not a time.
    #[error("'{0}' is not a time: seconds (3.2) or [HH:]MM:SS[.mmm] (00:01:02.5), not negative")]
    Time(String),
    /// A format framepipe reads only.
    #[error("{0} is read, not written: framepipe writes i420, gray, nv12 or bgr24 frames (a 4:2:2 or 4:4:4 input is written as 4:2:0 i420, or as bgr24 with every pixel's colour)")]
    ReadOnly(PixelFormat),
}

/// A length of time: seconds, or a number with s, m or h.
pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, ValueError> {
    let t = s.trim();
    let (number, unit) = match t.char_indices().last() {
        Some((i, 's')) => (&t[..i], 1.0),
        Some((i, 'm')) => (&t[..i], 60.0),
        Some((i, 'h')) => (&t[..i], 3600.0),
        _ => (t, 1.0),
    };
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v * unit >= 0.1 && v * unit <= 86_400.0 * 7.0 => {
            Ok(std::time::Duration::from_secs_f64(v * unit))
        }
        _ => Err(ValueError::Duration(s.into())),
    }
}

/// An age: a number with s, m, h, d (days) or w (weeks); seconds without a unit.
pub(crate) fn parse_age(s: &str) -> Result<std::time::Duration, ValueError> {
    let t = s.trim();
    let unit: f64 = match t.chars().last() {
        Some('s') => 1.0,
        Some('m') => 60.0,
        Some('h') => 3_600.0,
        Some('d') => 86_400.0,
        Some('w') => 7.0 * 86_400.0,
        _ => 0.0,
    };
    let number = match unit > 0.0 {
        true => &t[..t.len() - 1],
        false => t,
    };
    match (number.parse::<f64>(), unit.max(1.0)) {
        (Ok(v), unit) if v.is_finite() && v > 0.0 && v * unit <= 100.0 * 365.0 * 86_400.0 => {
            Ok(std::time::Duration::from_secs_f64(v * unit))
        }
        _ => Err(ValueError::Age(s.into())),
    }
}

/// A size in bytes: a number with k, M, G or T (powers of 1000, as disks are sold) or Ki,
/// Mi, Gi, Ti (of 1024), and an optional B.
fn parse_size(s: &str) -> Result<u64, ValueError> {
    let t = s.trim();
    let t = t.strip_suffix(['B', 'b']).unwrap_or(t);
    let (t, base) = match t.strip_suffix('i') {
        Some(rest) => (rest, 1024f64),
        None => (t, 1000f64),
    };
    let (number, power) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1),
        Some('M') => (&t[..t.len() - 1], 2),
        Some('G') => (&t[..t.len() - 1], 3),
        Some('T') => (&t[..t.len() - 1], 4),
        _ => (t, 0),
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v * base.powi(power) < 1e18 => {
            Ok((v * base.powi(power)) as u64)
        }
        _ => Err(ValueError::Size(s.into())),
    }
}

/// A share of the disk: 10% (or 10), from above 0 to below 100.
fn parse_percent(s: &str) -> Result<f64, ValueError> {
    let t = s.trim();
    let t = t.strip_suffix('%').unwrap_or(t);
    match t.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v < 100.0 => Ok(v / 100.0),
        _ => Err(ValueError::Percent(s.into())),
    }
}

/// A time as ffmpeg writes one: seconds (`3.2`), or `[HH:]MM:SS[.mmm]`.
fn parse_time(s: &str) -> Result<f64, ValueError> {
    let bad = || ValueError::Time(s.into());
    let mut total = 0.0;
    let parts: Vec<&str> = s.trim().split(':').collect();
    if parts.len() > 3 {
        return Err(bad());
    }
    for (i, part) in parts.iter().enumerate() {
        let v: f64 = part.parse().map_err(|_| bad())?;
        let whole_unit = i + 1 < parts.len();
        if !v.is_finite() || v < 0.0 || (i > 0 && v >= 60.0) || (whole_unit && v.fract() != 0.0) {
            return Err(bad());
        }
        total = total * 60.0 + v;
    }
    Ok(total)
}

fn writable_format(s: &str) -> Result<crate::pixel::PixelFormat, ValueError> {
    let f = PixelFormat::from_name(s).ok_or_else(|| ValueError::Format(s.into()))?;
    if !f.writable() {
        return Err(ValueError::ReadOnly(f));
    }
    Ok(f)
}

/// `clap::ValueEnum` for a type of the domain: its values' names, aliases and help are the
/// command line's, written here, so that the domain's types know nothing of clap.
macro_rules! values {
    ($ty:ident { $($variant:ident => $name:literal : $help:literal),+ $(,)? }) => {
        impl clap::ValueEnum for $ty {
            fn value_variants<'a>() -> &'a [Self] {
                &[$($ty::$variant),+]
            }
            fn to_possible_value(&self) -> Option<PossibleValue> {
                Some(match self {
                    $($ty::$variant => PossibleValue::new($name).help($help),)+
                })
            }
        }
    };
}

values!(Decode {
    Cpu => "cpu": "FFmpeg's libavcodec on the CPU, frames kept in its YUV layout",
    Opencv => "opencv": "OpenCV's capture (frames converted to BGR on the CPU)",
    Gpu => "gpu": "NVDEC, the GPU's decoder, through libavcodec's CUDA hwaccel (H.264 and HEVC where the GPU and the build have it); where it can't decode the stream, the CPU does, and the run says why",
    Auto => "auto": "NVDEC where it decodes faster than this machine's cores would (from the H200's figures: `framepipe doctor` says what it picks here), with the CUDA backend; else libavcodec on the CPU",
});

values!(BackendKind {
    Auto => "auto": "CUDA when a driver and a GPU are present, else the CPU",
    Cuda => "cuda": "CUDA, or an error where it is missing",
    Cpu => "cpu": "The CPU backend (OpenCV, or the plain-Rust reference)",
});

values!(Draw {
    None => "none": "Nothing: the pictures as they are",
    Boxes => "boxes": "Each box's outline, coloured by its label",
    Labels => "labels": "The outline with its label and score above it",
});

values!(Provider {
    Auto => "auto": "CUDA where ONNX Runtime offers it, else the CPU",
    Cpu => "cpu": "ONNX Runtime's CPU provider",
    Cuda => "cuda": "onnxruntime-gpu's CUDA provider",
    Tensorrt => "tensorrt": "onnxruntime-gpu's TensorRT provider (engines built on the first run, then kept)",
});

values!(StreamLayout {
    PerStage => "per-stage": "One copy-in, one compute and one copy-out stream, bands ordered by events",
    PerBand => "per-band": "One stream per (frame in flight, band)",
});

values!(IssueOrder {
    Depth => "depth": "Band by band: upload, filter, download of band 0, then band 1, …",
    Breadth => "breadth": "Stage by stage: every band's upload, then every band's filter, then downloads",
});

values!(Codec {
    H264 => "h264": "H.264 (libx264 through FFmpeg): the default of .mp4 and .mov",
    Hevc => "hevc": "HEVC / H.265 (libx265 through FFmpeg)",
    Mpeg4 => "mpeg4": "MPEG-4 Part 2: where H.264 is missing, the fallback",
    Mjpeg => "mjpeg": "Motion JPEG: the default of .avi (keeps odd sizes)",
    Ffv1 => "ffv1": "FFV1, lossless: every pixel kept (it stores framepipe's BGR, not YUV)",
    Vp9 => "vp9": "VP9: the default and only codec of .webm",
});

/// `--codec`: an encoder, or `copy` (the input's packets as they came).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodecArg {
    /// Frames encoded with this codec.
    Encode(crate::output::Codec),
    /// The input's own packets, neither decoded nor encoded.
    Copy,
}

impl CodecArg {
    /// The encoder asked for; None for `copy`.
    pub fn encoder(self) -> Option<crate::output::Codec> {
        match self {
            CodecArg::Encode(c) => Some(c),
            CodecArg::Copy => None,
        }
    }
}

impl clap::ValueEnum for CodecArg {
    fn value_variants<'a>() -> &'a [Self] {
        use crate::output::Codec::*;
        &[
            CodecArg::Encode(H264),
            CodecArg::Encode(Hevc),
            CodecArg::Encode(Mpeg4),
            CodecArg::Encode(Mjpeg),
            CodecArg::Encode(Ffv1),
            CodecArg::Encode(Vp9),
            CodecArg::Copy,
        ]
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        match self {
            CodecArg::Encode(c) => c.to_possible_value(),
            CodecArg::Copy => Some(PossibleValue::new("copy").help(
                "The input's own packets, video and audio, neither decoded nor encoded (files and network streams read by FFmpeg; no filter)",
            )),
        }
    }
}

values!(OutPixel {
    Yuv420p => "yuv420p": "4:2:0, what players expect (the default)",
    Yuv422p => "yuv422p": "4:2:2 (H.264 High 4:2:2, HEVC, VP9 profile 1)",
    Yuv444p => "yuv444p": "4:4:4, every pixel's colour (H.264 High 4:4:4, HEVC, VP9 profile 1)",
});

/// A pixel format on the command line: its names and aliases are the domain's
/// (`PixelFormat::names`), its help the command line's.
impl clap::ValueEnum for PixelFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &PixelFormat::ALL
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        let names = self.names();
        let help = match self {
            PixelFormat::Bgr24 => "Packed B, G, R (the pipeline's own)",
            PixelFormat::I420 => "Planar Y, then U and V at half width and height (`yuv420p`)",
            PixelFormat::Nv12 => "Planar Y, then U and V interleaved at half width and height",
            PixelFormat::Yuyv => "Packed Y0 U Y1 V at half horizontal chroma (`yuyv422`, YUY2)",
            PixelFormat::Yuv422p => "Planar Y, U, V with half-width chroma (`yuv422p`)",
            PixelFormat::Yuv444p => "Planar Y, U, V at full size (`yuv444p`)",
            PixelFormat::Gray => "Luma only (`gray`; a Y4M `Cmono` stream)",
        };
        Some(
            PossibleValue::new(names[0])
                .aliases(names[1..].iter().copied())
                .help(help),
        )
    }
}

/// What standard input carries: a Y4M stream, or raw frames of a pixel format.
impl clap::ValueEnum for InputFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &InputFormat::ALL
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        match self {
            InputFormat::Y4m => Some(
                PossibleValue::new("y4m")
                    .alias("yuv4mpegpipe")
                    .help("A YUV4MPEG2 stream (size, rate and chroma from its header)"),
            ),
            InputFormat::Raw(f) => f.to_possible_value(),
        }
    }
}

/// The table of `docs/options.md`: every option of a run, as `--help` states it (its long
/// help where it has one), made from the command line's own definition so that the page
/// can't drift from it (`tests/readme.rs` compares them; `FRAMEPIPE_BLESS=1` rewrites it).
pub fn options_markdown() -> String {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let mut out = String::from("| option | meaning |\n| --- | --- |\n");
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let Some(long) = arg.get_long() else {
            continue;
        };
        let mut name = match arg.get_short() {
            Some(s) => format!("-{s}, --{long}"),
            None => format!("--{long}"),
        };
        for alias in arg.get_visible_aliases().into_iter().flatten() {
            name.push_str(&format!(", --{alias}"));
        }
        let values = arg.get_possible_values();
        let takes_value = arg.get_action().takes_values();
        if takes_value && !values.is_empty() && values.len() <= 12 {
            let names: Vec<&str> = values.iter().map(PossibleValue::get_name).collect();
            name.push_str(&format!(" {}", names.join("|")));
        } else if takes_value {
            let value = arg
                .get_value_names()
                .and_then(|v| v.first().map(ToString::to_string))
                .unwrap_or_else(|| long.to_ascii_uppercase());
            name.push_str(&format!(" {value}"));
        }
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(ToString::to_string)
            .unwrap_or_default();
        let mut meaning = one_cell(&help);
        let described: Vec<String> = values
            .iter()
            .filter_map(|v| {
                Some(format!(
                    "`{}`: {}",
                    v.get_name(),
                    one_cell(&v.get_help()?.to_string())
                ))
            })
            .collect();
        if !described.is_empty() {
            meaning.push_str(&format!(" ({})", described.join("; ")));
        }
        out.push_str(&format!("| `{}` | {meaning} |\n", name.replace('|', "\\|")));
    }
    out
}

/// Help text as one markdown table cell: its lines joined, `|` escaped, and the word joiner
/// that keeps clap from reading `{n}` as a line break taken out.
fn one_cell(text: &str) -> String {
    let joined: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    joined.join(" ").replace('\u{2060}', "").replace('|', "\\|")
}
