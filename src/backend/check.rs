//! Band invariance on the GPU: a chain run with one band and with many must give the same
//! frame. Built-in filters are proven so by the GPU tests; a user kernel is checked here,
//! by `framepipe check-kernel` over several sizes and band counts, and at the start of every
//! run (and every reload) on one frame of the run's size.
//!
//! A kernel that reads farther than its declared radius gives a different answer near band
//! edges, where the halo ends; the report names the first differing pixel, how far it is
//! from a band edge, and the smallest radius that makes the outputs agree, when one does.

use std::fmt::Write as _;
use std::sync::Arc;

use anyhow::{Context, Result};

use super::cuda::CudaBackend;
use super::{Backend, BackendConfig};
use crate::band::BandPlan;
use crate::filter::user::UserKernel;
use crate::filter::{Chain, Filter};
use crate::frame::FrameSize;
use crate::ring;

/// Sizes `check-kernel` tries: tiny, odd, VGA and 1080p.
pub const SIZES: [FrameSize; 4] = [
    FrameSize::new(33, 17),
    FrameSize::new(321, 241),
    FrameSize::new(640, 480),
    FrameSize::new(1920, 1080),
];
/// Band counts compared with one band.
pub const BANDS: [usize; 7] = [2, 3, 4, 5, 7, 8, 16];
/// The radii tried when looking for one that would do.
const LARGEST_SUGGESTION: usize = 32;

/// Where one band and many first disagree.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// Frame size.
    pub size: FrameSize,
    /// The band count that disagrees with one band.
    pub bands: usize,
    /// First differing pixel (frame coordinates) and channel (0 blue, 1 green, 2 red).
    pub x: usize,
    /// Its row.
    pub y: usize,
    /// Its channel.
    pub channel: usize,
    /// With one band.
    pub one: u8,
    /// With `bands` bands.
    pub many: u8,
    /// Rows from the pixel to the nearest band edge of the many-band cut.
    pub from_edge: usize,
    /// The smallest radius that made the outputs agree (one user kernel only).
    pub suggested_radius: Option<usize>,
}

/// A deterministic noise frame (every value appears; neighbours unrelated).
pub fn noise(size: FrameSize, seed: u64) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..size.bytes())
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 56) as u8
        })
        .collect()
}

/// Runs `chain` on `frame` cut into `bands` bands, through the real CUDA backend.
pub fn run_once(
    chain: &Chain,
    size: FrameSize,
    bands: usize,
    frame: &[u8],
    device: usize,
) -> Result<Vec<u8>> {
    let mut cfg = BackendConfig::new(size, chain.clone(), bands, 1)
        .map_err(|e| anyhow::anyhow!("{bands} bands: {e}"))?
        .with_busy_bands(bands)
        .map_err(|e| anyhow::anyhow!("{bands} bands: {e}"))?;
    cfg.cuda.device = device;
    cfg.cuda.graphs = false;
    cfg.sample_every = 0;
    let mut backend = CudaBackend::new(&cfg)?;
    let mut slot = ring::allocate(1, size, cfg.formats)
        .pop()
        .context("one slot")?;
    for buf in slot.buffers_mut() {
        backend.attach(buf)?;
    }
    slot.input.copy_from_slice(frame);
    backend.submit(slot)?;
    let slot = backend
        .complete(true)?
        .context("the frame did not come back")?;
    Ok(slot.output.to_vec())
}

/// The first place where `a` and `b` differ, as (x, y, channel).
fn first_difference(size: FrameSize, a: &[u8], b: &[u8]) -> Option<(usize, usize, usize)> {
    let i = a.iter().zip(b).position(|(p, q)| p != q)?;
    let stride = size.stride();
    Some(((i % stride) / 3, i / stride, i % 3))
}

/// Rows from `y` to the nearest edge between two bands of `plan`.
fn rows_from_edge(plan: &BandPlan, y: usize) -> usize {
    plan.bands()
        .iter()
        .skip(1)
        .map(|b| b.rows.start.abs_diff(y).min(b.rows.start.abs_diff(y + 1)))
        .min()
        .unwrap_or(usize::MAX)
}

/// `chain` with its one user kernel's radius set to `radius`; None with several kernels.
fn with_radius(chain: &Chain, radius: usize) -> Option<Chain> {
    if chain.user_kernels().count() != 1 {
        return None;
    }
    let text = chain
        .filters()
        .iter()
        .map(|f| match f {
            Filter::Kernel(k) => {
                let mut spec = k.spec.clone();
                spec.radius = radius;
                UserKernel::bind(spec, k.source.clone()).map(|k| Filter::Kernel(Arc::new(k)))
            }
            other => Ok(other.clone()),
        })
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    Some(Chain::from_filters(text))
}

/// Compares one band with each of `bands` on a noise frame of each of `sizes`; the first
/// disagreement, or None when every output is identical.
pub fn band_invariance(
    chain: &Chain,
    sizes: &[FrameSize],
    bands: &[usize],
    device: usize,
) -> Result<Option<Mismatch>> {
    for (i, &size) in sizes.iter().enumerate() {
        let frame = noise(size, i as u64 + 1);
        let one = run_once(chain, size, 1, &frame, device)?;
        let mut counts: Vec<usize> = bands
            .iter()
            .map(|&n| n.min(size.height))
            .filter(|&n| n > 1)
            .collect();
        counts.sort_unstable();
        counts.dedup();
        for n in counts {
            let many = run_once(chain, size, n, &frame, device)?;
            let Some((x, y, channel)) = first_difference(size, &one, &many) else {
                continue;
            };
            let plan = BandPlan::new(size.height, n, chain.radius())?;
            let at = (y * size.width + x) * 3 + channel;
            let suggested_radius = (chain.radius() + 1..=LARGEST_SUGGESTION).find(|&r| {
                with_radius(chain, r).is_some_and(|c| {
                    let a = run_once(&c, size, 1, &frame, device);
                    let b = run_once(&c, size, n, &frame, device);
                    matches!((a, b), (Ok(a), Ok(b)) if a == b)
                })
            });
            return Ok(Some(Mismatch {
                size,
                bands: n,
                x,
                y,
                channel,
                one: one[at],
                many: many[at],
                from_edge: rows_from_edge(&plan, y),
                suggested_radius,
            }));
        }
    }
    Ok(None)
}

/// The user's message for a mismatch of `chain`.
pub fn explain(chain: &Chain, m: &Mismatch) -> String {
    let kernels: Vec<String> = chain
        .user_kernels()
        .map(|k| format!("'{}' ({})", k.function, k.file()))
        .collect();
    let channel = ["blue", "green", "red"][m.channel];
    let mut out = format!(
        "kernel {} is not band-invariant: on a {} frame, 1 band and {} bands first differ at pixel (x {}, y {}), {channel}: {} with 1 band, {} with {}.",
        kernels.join(", "),
        m.size,
        m.bands,
        m.x,
        m.y,
        m.one,
        m.many,
        m.bands
    );
    if m.from_edge <= LARGEST_SUGGESTION {
        let _ = write!(
            out,
            " Row {} is {} row(s) from a band edge: the kernel likely reads farther than the radius it declares ({}).",
            m.y,
            m.from_edge,
            chain.radius()
        );
    }
    match m.suggested_radius {
        Some(r) => {
            let _ = write!(
                out,
                " With radius={r} the outputs agree: add ,radius={r} after the kernel's file."
            );
        }
        None => {
            let _ = write!(
                out,
                " No radius up to {LARGEST_SUGGESTION} makes them agree: the output depends on more than the pixel's neighbours (pixels left unwritten, the band's place, or reads past the frame)."
            );
        }
    }
    out
}

/// The check a run makes before its first frame and before each reload: one frame of the
/// run's size, with one band and with the run's band counts.
pub fn before_run(
    chain: &Chain,
    size: FrameSize,
    bands: &[usize],
    device: usize,
) -> Result<(), CheckError> {
    if chain.user_kernels().next().is_none() {
        return Ok(());
    }
    match band_invariance(chain, &[size], bands, device) {
        Ok(None) => Ok(()),
        Ok(Some(m)) => Err(CheckError::NotBandInvariant(explain(chain, &m))),
        Err(e) => Err(CheckError::Failed(e)),
    }
}

/// Why a chain is not run: its frames differ with the band count, or it could not be run.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// 1 band and the run's band counts gave different frames (explained).
    #[error("{0} (framepipe check-kernel FILE tells more)")]
    NotBandInvariant(String),
    /// Compiling or running it failed.
    #[error("{0:#}")]
    Failed(anyhow::Error),
}

/// `framepipe check-kernel`: checks `chain` (the kernel alone) at `sizes` (empty: the
/// default sizes) and prints the verdict; an error (exit 1) when it is not band-invariant.
pub fn command(chain: &Chain, sizes: &[FrameSize]) -> Result<()> {
    super::device::probe().map_err(|why| {
        anyhow::anyhow!("check-kernel runs the kernel on the GPU: no CUDA here ({why})")
    })?;
    let sizes: Vec<FrameSize> = if sizes.is_empty() {
        SIZES.to_vec()
    } else {
        sizes.to_vec()
    };
    let started = std::time::Instant::now();
    let verdict = band_invariance(chain, &sizes, &BANDS, super::device::DEFAULT_DEVICE)?;
    let sizes_text: Vec<String> = sizes.iter().map(|s| s.to_string()).collect();
    match verdict {
        None => {
            crate::out!(
                "{chain}: band-invariant. 1 band and {} bands gave identical frames at {} ({:.0} ms)",
                BANDS.map(|b| b.to_string()).join(", "),
                sizes_text.join(", "),
                started.elapsed().as_secs_f64() * 1e3
            );
            Ok(())
        }
        Some(m) => anyhow::bail!("{}", explain(chain, &m)),
    }
}
