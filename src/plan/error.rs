//! What the flags can get wrong, as a type (rav1e's `InvalidConfig`): every refusal
//! `RunPlan::from_args` and `RunPlan::fit` make is one variant, whose message names the flag
//! and says what would work. Refusals that another room words (an output's name, an input,
//! a report's file, the browser view's address) carry that room's line.

use crate::pixel::PixelFormat;

/// A refusal of the flags (module doc).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A chain that changes the size, with several inputs.
    #[error("--filter {0}: a filter that changes the frame's size (scale, crop, pad, transpose) takes one input in this version (the mosaic's tiles take frames of their input's size)")]
    GeometryOfSeveral(String),
    /// `--to` at or before `--ss`.
    #[error("--to {to} is not after --ss {ss}: nothing would be read")]
    ToNotAfterSs {
        /// `--to`.
        to: f64,
        /// `--ss` (0 where not given).
        ss: f64,
    },
    /// `-t 0`.
    #[error("-t 0 reads nothing")]
    NoDuration,
    /// `--record` with several inputs and one name.
    #[error("--record '{name}': with {inputs} inputs, put {{n}} (the input's number) or {{name}} in the name")]
    RecordsShareName {
        /// The name as given.
        name: String,
        /// How many inputs.
        inputs: usize,
    },
    /// `--record` with `--decode opencv`.
    #[error("--record '{0}': --decode opencv reads no packets; the recording needs FFmpeg's demuxer (--decode cpu, gpu or auto)")]
    RecordWithoutDemuxer(String),
    /// `--record` of an input with no packets (the pattern, a camera, a pipe).
    #[error("--record '{name}': input {n} ({what}) has no packets to record: only files and network streams do")]
    RecordNoPackets {
        /// The name as given.
        name: String,
        /// The input's number.
        n: usize,
        /// The input as given.
        what: String,
    },
    /// `--record` in a build without FFmpeg's libraries.
    #[error("--record '{0}': this build has no FFmpeg libraries to write it")]
    RecordWithoutFfmpeg(String),
    /// `--record` that can't be written as asked.
    #[cfg(feature = "ffmpeg")]
    #[error(transparent)]
    Record(#[from] crate::record::RecordError),
    /// `--codec copy` that can't be done.
    #[error(transparent)]
    Copy(#[from] super::copy::CopyError),
    /// `--detect-score`, `--detect-fps`, `--detections`, `--detect-labels` or `--detect-nms`
    /// without `--detect`.
    #[error("--detect-score, --detect-fps, --detections, --detect-labels and --detect-nms apply to --detect, and it is not given")]
    DetectFlagsAlone,
    /// A `--detect` model that is not a file.
    #[error("--detect '{}': no such model file", .0.display())]
    NoModel(std::path::PathBuf),
    /// A zone or a line that can't be used.
    #[error(transparent)]
    Zone(#[from] crate::events::zones::ZoneError),
    /// Events asked for wrongly (no detector, a file in the way).
    #[error("{0}")]
    Events(String),
    /// An events destination that is not one.
    #[error(transparent)]
    Destination(#[from] crate::events::out::DestinationError),
    /// A `--detect-labels` file that is not there.
    #[error("--detect-labels '{}': no such file", .0.display())]
    NoLabels(std::path::PathBuf),
    /// `--detections` naming a file that exists, without `-y`.
    #[error("--detections '{}' exists (-y replaces it)", .0.display())]
    DetectionsExist(std::path::PathBuf),
    /// `--rtsp-serve` beyond loopback without a token.
    #[error("--rtsp-serve {0} answers every machine that reaches it, and no token is set: give one (--serve-token-file FILE, or FRAMEPIPE_SERVE_TOKEN), or --serve-insecure to serve without")]
    RtspOpenWithoutToken(std::net::SocketAddr),
    /// `--rtsp-serve` in a build without FFmpeg's libraries.
    #[error("--rtsp-serve: this build has no FFmpeg libraries to read packets with")]
    RtspNotBuilt,
    /// `--ring` below 2.
    #[error("--ring {0} is too small: the ring needs at least 2 slots")]
    RingTooSmall(usize),
    /// `--in-flight 0`.
    #[error("--in-flight must be at least 1")]
    NoneInFlight,
    /// `--fps` negative or not a number.
    #[error("--fps {0} must be 0 or a positive number")]
    FpsNotARate(f64),
    /// `--fps` outside the rates a run takes.
    #[error("--fps {fps} is out of range: 0 (as fast as the pipeline goes) or {min} to {max} frames per second")]
    FpsOutOfRange {
        /// As given.
        fps: f64,
        /// The least rate.
        min: f64,
        /// The greatest rate.
        max: f64,
    },
    /// `--frames 0`.
    #[error(
        "--frames 0 would process nothing; give at least 1 (or leave it out to run to the end)"
    )]
    NoFrames,
    /// `--busy-bands 0`.
    #[error("--busy-bands must be at least 1")]
    NoBusyBands,
    /// A user kernel with `--backend cpu` (the kernel's own line, `cpu::needs_cuda`).
    #[error("{0} (--backend cpu was asked for)")]
    KernelOnCpu(String),
    /// A user kernel where CUDA is not.
    #[error("{kernel}: no CUDA here ({why})")]
    KernelWithoutCuda {
        /// The kernel's line (`cpu::needs_cuda`).
        kernel: String,
        /// Why CUDA is not here.
        why: String,
    },
    /// `--trace-frames` over what a trace holds.
    #[error("--trace-frames {asked} is more than the {max} a trace may hold")]
    TooManyTraceFrames {
        /// As given.
        asked: String,
        /// The most a trace holds.
        max: u64,
    },
    /// A report's file (`--trace`, `--timeline`, `--summary-json`), as `paths` words it.
    #[error(transparent)]
    ReportFile(crate::paths::PathError),
    /// An `--input`, as `source` words it (`input`: its place, with several).
    #[error("{}{why}", input.map(|n| format!("input {n}: ")).unwrap_or_default())]
    Input {
        /// Its place among several `--input`s.
        input: Option<usize>,
        /// Why it can't be read.
        why: crate::source::InputError,
    },
    /// More inputs than a run takes.
    #[error("{n} inputs are more than the {max} one run takes")]
    TooManyInputs {
        /// Given.
        n: usize,
        /// The most.
        max: usize,
    },
    /// `--input -` twice.
    #[error("--input - is given more than once: there is one standard input (a named pipe, made with mkfifo, is another stream)")]
    StdinTwice,
    /// `--serve` of several inputs with `--no-mosaic`.
    #[error("--serve with {0} inputs serves the mosaic, and --no-mosaic turns the mosaic off")]
    ServeWithoutMosaic(usize),
    /// `--grid` with fewer tiles than inputs.
    #[error("--grid {cols}x{rows} has {} tiles for {n} inputs", cols * rows)]
    GridTooSmall {
        /// Columns.
        cols: usize,
        /// Rows.
        rows: usize,
        /// Inputs.
        n: usize,
    },
    /// An output without `{n}` (the mosaic's) with `--no-mosaic`.
    #[error("--output '{output}' with {n} inputs records the mosaic, and --no-mosaic turns the mosaic off; name one output per input with {{n}}, the input's index (--output 'cam-{{n}}.mp4', udp://host:500{{n}})")]
    RecordingWithoutMosaic {
        /// The output.
        output: String,
        /// Inputs.
        n: usize,
    },
    /// An `--output`, as `output::spec` words it.
    #[error(transparent)]
    Output(crate::output::spec::OutputError),
    /// One `--output` given twice.
    #[error("--output '{0}' is given twice")]
    OutputTwice(String),
    /// A second file, image sequence or standard output.
    #[error("--output '{output}': a run writes one file, image sequence or standard output ('{first}' is one); more --outputs are streams (udp://, srt://, rtmp://, rtsp://, .m3u8)")]
    SecondFile {
        /// The second.
        output: String,
        /// The first.
        first: String,
    },
    /// `--serve-*` without `--serve`.
    #[error("--serve-token, --serve-token-file, --serve-host, --serve-insecure and --ice-server apply to --serve, and it is not given")]
    ServeFlagsAlone,
    /// `--serve`'s address, token or hosts, as the browser view words it.
    #[cfg(feature = "ffmpeg")]
    #[error(transparent)]
    Serve(crate::display::web::access::ServeError),
    /// `--serve` in a build without FFmpeg's libraries.
    #[error(
        "--serve: this build has no FFmpeg libraries (whose JPEG encoder the browser view uses)"
    )]
    ServeNotBuilt,
    /// `--codec` or `--quality` with no video output.
    #[error("--codec and --quality apply to a video --output, and there is none")]
    CodecWithoutVideo,
    /// An encoder flag with no video output.
    #[error("--crf, --bitrate, --maxrate, --bufsize, --preset, --tune, --gop, --pix-fmt and --codec-opt apply to a video --output, and there is none")]
    EncodingWithoutVideo,
    /// `--output-format` without `--output -`.
    #[error(
        "--output-format {0} applies to --output - (standard output), and that is not the output"
    )]
    OutputFormatWithoutStdout(PixelFormat),
    /// `--output-format` of a format framepipe reads only.
    #[error("--output-format {0}: framepipe writes i420, gray, nv12 or bgr24 frames")]
    OutputFormatNotWritten(PixelFormat),
}
