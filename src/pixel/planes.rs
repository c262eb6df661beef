//! Geometry and text on a YUV frame's own planes: a chain of `crop`, `pad`, the flips,
//! `transpose`, `scale` and `text:`/`timestamp` run on each plane of an I420, NV12 or gray
//! frame, as ffmpeg's filters run on `yuv420p`, `nv12` and `gray`, instead of through BGR
//! and back (which rounds every pixel twice, and costs two conversions a frame). The CPU
//! backend takes this path where the frame comes and goes in one of those formats and the
//! chain holds nothing else (`fits`).
//!
//! Invariants: crop, pad, the flips and transpose move samples untouched (a copy of
//! ffmpeg's output, byte for byte); on 4:2:0 a crop's or a pad's corner is rounded down to
//! even, as ffmpeg's filters round it to the chroma's grid, and every size the chain makes
//! must be even (else `fits` says no and the frame goes through BGR); a pad's colour is the
//! BGR colour's Y, U and V (`reference::yuv`, video range: black is 16, 128, 128); a scale
//! samples each plane at its own size (`geometry`'s pixel centres), the chroma planes at
//! half the luma's, and a crop right after it is made in its pass (only the kept part is
//! scaled: the same bytes as scaling whole and cropping); text is the BGR path's glyphs and box (`text::Placed`): a stroke takes
//! the colour's Y, and its U and V where a chroma sample's top-left pixel is a stroke (as a
//! 2×2 block's chroma comes from its top-left pixel, `pixel`); the box darkens Y towards 16
//! and U, V towards 128 by the BGR box's share.

use super::PixelFormat;
use crate::filter::geometry::{centred, Geometry, Window};
use crate::filter::reference::yuv;
use crate::filter::text::Placed;
use crate::filter::{Chain, Filter, Parts};
use crate::frame::FrameSize;

/// Whether `chain` runs on the planes of `format` frames of `size` (module doc).
pub fn fits(chain: &Chain, format: PixelFormat, size: FrameSize) -> bool {
    if !matches!(
        format,
        PixelFormat::I420 | PixelFormat::Nv12 | PixelFormat::Gray
    ) {
        return false;
    }
    let mut at = size;
    for f in chain.filters() {
        let g = match f {
            Filter::Geometry(g) => g,
            Filter::Text(_) => continue,
            _ => return false,
        };
        let g = on_grid(g, at, format);
        match g.output(at) {
            Ok(out) if format.check(out).is_ok() => at = out,
            _ => return false,
        }
    }
    !chain.filters().is_empty()
}

/// Runs `chain` (which `fits`) on a `size` frame `src` of `format`, into `dst` (the frame
/// the chain makes, in `format`); `parts` holds the frames between filters.
pub fn apply(
    chain: &Chain,
    format: PixelFormat,
    size: FrameSize,
    src: &[u8],
    dst: &mut [u8],
    parts: &mut Parts,
) {
    let filters = chain.filters();
    let (mut from, mut to) = parts.pair();
    let mut s = size;
    let mut i = 0;
    while i < filters.len() {
        // A text keeps the size (a flip stands for it in `output`); it is drawn below. A
        // scale followed by a crop is one step: only the part the crop keeps is scaled.
        let (step, crop) = match (&filters[i], filters.get(i + 1)) {
            (Filter::Geometry(g @ Geometry::Scale { .. }), Some(Filter::Geometry(c))) => {
                match g.output(s) {
                    Ok(scaled) => (*g, Some(on_grid(c, scaled, format))),
                    Err(_) => return,
                }
            }
            (Filter::Geometry(g), _) => (on_grid(g, s, format), None),
            (Filter::Text(_), _) => (Geometry::HFlip, None),
            _ => {
                i += 1;
                continue;
            }
        };
        let crop = crop.filter(|c| matches!(c, Geometry::Crop { .. }));
        let Ok(mut out) = step.output(s) else { return };
        if let Some(c) = &crop {
            let Ok(cropped) = c.output(out) else { return };
            out = cropped;
        }
        let last = i + 1 + usize::from(crop.is_some()) >= filters.len();
        let input: &[u8] = if i == 0 {
            src
        } else {
            &from[..format.bytes(s)]
        };
        let target: &mut [u8] = if last {
            &mut dst[..format.bytes(out)]
        } else {
            to.resize(format.bytes(out), 0);
            &mut to[..]
        };
        match (&filters[i], crop) {
            (Filter::Text(t), _) => {
                target.copy_from_slice(&input[..target.len()]);
                text_on_planes(&t.place(s), format, s, target);
            }
            (_, Some(c)) => scaled_crop_of(&step, &c, format, (s, input), (out, target)),
            _ => planes_of(&step, format, (s, input), (out, target)),
        }
        std::mem::swap(&mut from, &mut to);
        s = out;
        i += 1 + usize::from(crop.is_some());
    }
}

/// A scale `g` and the crop `c` after it (on the chroma's grid) on every plane of a frame
/// in one pass: `out` and `dst` are the crop's frame.
fn scaled_crop_of(
    g: &Geometry,
    c: &Geometry,
    format: PixelFormat,
    (size, src): (FrameSize, &[u8]),
    (out, dst): (FrameSize, &mut [u8]),
) {
    let (Ok(scaled), Geometry::Crop { at, .. }) = (g.output(size), *c) else {
        return;
    };
    let (x, y) = at.unwrap_or_else(|| centred(scaled, out.width, out.height));
    each_plane(format, (size, src), (out, dst), |plane, from, to| {
        let (whole, (x, y)) = match plane.chroma {
            false => (scaled, (x, y)),
            true => (halved(scaled), (x / 2, y / 2)),
        };
        let (w, h) = (to.0.width, to.0.height);
        g.scale_window(
            from.0,
            (from.1, plane.px),
            whole,
            Window { x, y, w, h },
            to.1,
        );
    });
}

/// `text` drawn on the planes of a `size` frame of `format` in place (module doc).
fn text_on_planes(text: &Placed, format: PixelFormat, size: FrameSize, frame: &mut [u8]) {
    let atlas = crate::filter::text::atlas();
    let [b, g, r] = text.color;
    let (y_ink, (u_ink, v_ink)) = (yuv::luma(b, g, r), yuv::chroma(b, g, r));
    let keep = (256 - crate::filter::text::BOX_DARKEN) as i32;
    let darken = |v: u8, zero: u8| {
        let d = (i32::from(v) - i32::from(zero)) * keep;
        (i32::from(zero) + ((d + 128) >> 8)).clamp(0, 255) as u8
    };
    let (left, top, w, h) = text.covers();
    let inside = |x: i32, y: i32| x >= left && y >= top && x < left + w && y < top + h;
    let rows = top.max(0)..(top + h).min(size.height as i32);
    let cols = left.max(0)..(left + w).min(size.width as i32);
    let (luma, chroma) = frame.split_at_mut(size.width * size.height);
    for y in rows.clone() {
        for x in cols.clone() {
            let at = y as usize * size.width + x as usize;
            luma[at] = match text.ink(atlas, x, y) {
                true => y_ink,
                false if text.boxed => darken(luma[at], 16),
                false => luma[at],
            };
        }
    }
    if format == PixelFormat::Gray {
        return;
    }
    let half = halved(size);
    let (step, v_at) = match format {
        PixelFormat::Nv12 => (2, 1),
        _ => (1, half.width * half.height),
    };
    for cy in (rows.start / 2)..(rows.end + 1) / 2 {
        for cx in (cols.start / 2)..(cols.end + 1) / 2 {
            let (x, y) = (cx * 2, cy * 2);
            if !inside(x, y) {
                continue;
            }
            let at = (cy as usize * half.width + cx as usize) * step;
            let (u, v) = match text.ink(atlas, x, y) {
                true => (u_ink, v_ink),
                false if text.boxed => (darken(chroma[at], 128), darken(chroma[at + v_at], 128)),
                false => continue,
            };
            chroma[at] = u;
            chroma[at + v_at] = v;
        }
    }
}

/// `g` as ffmpeg runs it on `format`: a crop's or pad's corner rounded down to the chroma's
/// grid (even on 4:2:0), a centred crop placed first.
fn on_grid(g: &Geometry, size: FrameSize, format: PixelFormat) -> Geometry {
    let even = |v: usize| match format {
        PixelFormat::Gray => v,
        _ => v & !1,
    };
    match *g {
        Geometry::Crop { w, h, at } => {
            let (x, y) = at.unwrap_or_else(|| centred(size, w, h));
            Geometry::Crop {
                w,
                h,
                at: Some((even(x), even(y))),
            }
        }
        Geometry::Pad { w, h, x, y, color } => Geometry::Pad {
            w,
            h,
            x: even(x),
            y: even(y),
            color,
        },
        other => other,
    }
}

/// One filter on every plane of a frame: (size, frame) in, (size, frame) out.
fn planes_of(
    g: &Geometry,
    format: PixelFormat,
    (size, src): (FrameSize, &[u8]),
    (out, dst): (FrameSize, &mut [u8]),
) {
    for job in plane_jobs(g, format, size, out) {
        let (from, to) = (job.from_bytes(), job.to_bytes());
        let (from, to) = (&src[from], &mut dst[to]);
        job.g.apply_px(
            job.from.1,
            (from, job.px),
            job.to.1,
            to,
            &job.fill[..job.px],
        );
    }
}

/// A geometry filter's work on one plane of a frame (`plane_jobs`), for either backend:
/// the filter as it acts on the plane, the plane's bytes a sample, where it lies in the
/// input and in the output frame (offset, size), and a pad's fill (one sample's bytes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlaneJob {
    /// The filter on this plane (a 4:2:0 chroma plane's: sizes and corners halved).
    pub g: Geometry,
    /// Bytes a sample: 1, or NV12's interleaved chroma's 2.
    pub px: usize,
    /// The plane in the input frame: its offset and size.
    pub from: (usize, FrameSize),
    /// The plane in the output frame: its offset and size.
    pub to: (usize, FrameSize),
    /// What a pad fills with.
    pub fill: [u8; 2],
}

impl PlaneJob {
    /// The plane's bytes in the input frame.
    pub fn from_bytes(&self) -> std::ops::Range<usize> {
        let (at, s) = self.from;
        at..at + s.width * s.height * self.px
    }

    /// The plane's bytes in the output frame.
    pub fn to_bytes(&self) -> std::ops::Range<usize> {
        let (at, s) = self.to;
        at..at + s.width * s.height * self.px
    }
}

/// `g` (on the chroma's grid: `on_grid`) on each plane of a `format` frame of `size`
/// making one of `out`.
pub fn plane_jobs(
    g: &Geometry,
    format: PixelFormat,
    size: FrameSize,
    out: FrameSize,
) -> Vec<PlaneJob> {
    let [b, gr, r] = match g {
        Geometry::Pad { color, .. } => *color,
        _ => [0; 3],
    };
    let (y, (u, v)) = (yuv::luma(b, gr, r), yuv::chroma(b, gr, r));
    let chroma = on_chroma(g);
    plane_places(format, size, out)
        .into_iter()
        .map(|(plane, from, to)| PlaneJob {
            g: if plane.chroma { chroma } else { *g },
            px: plane.px,
            from,
            to,
            fill: match (plane.chroma, plane.second) {
                (false, _) => [y, y],
                (true, false) => [u, v],
                (true, true) => [v, v],
            },
        })
        .collect()
}

/// One step of a chain that `fits`, as the CUDA backend runs it on whole frames: a
/// geometry filter as its planes' jobs (and the frame it makes), or the chain's text at
/// `index` drawn in place on a frame of `size`.
#[derive(Clone, Debug, PartialEq)]
pub enum PlaneStep {
    /// A geometry filter: each plane's job, and the size of the frame made.
    Geometry(Vec<PlaneJob>, FrameSize),
    /// The chain's filter `index` (a text) on a frame of the size given.
    Text(usize, FrameSize),
}

/// The steps of `chain` (which `fits`) over `format` frames of `size`, one a filter, each
/// geometry filter put on the chroma's grid as `apply` puts it (`on_grid`).
pub fn plane_steps(chain: &Chain, format: PixelFormat, size: FrameSize) -> Vec<PlaneStep> {
    let mut at = size;
    let mut steps = Vec::new();
    for (i, f) in chain.filters().iter().enumerate() {
        match f {
            Filter::Geometry(g) => {
                let g = on_grid(g, at, format);
                let Ok(out) = g.output(at) else { break };
                steps.push(PlaneStep::Geometry(plane_jobs(&g, format, at, out), out));
                at = out;
            }
            Filter::Text(_) => steps.push(PlaneStep::Text(i, at)),
            _ => {}
        }
    }
    steps
}

/// Which plane `each_plane` hands over: a chroma plane (at half the luma's size), NV12's
/// interleaved chroma as one of 2 bytes a sample (`px`), I420's V (`second`).
#[derive(Clone, Copy)]
struct PlaneOf {
    chroma: bool,
    second: bool,
    px: usize,
}

/// Where a plane lies in a frame: its offset and size.
type Place = (usize, FrameSize);

/// The planes of a `format` frame (I420, NV12 or gray) of `size` and of one of `out`:
/// which plane, and where it lies in each frame (offset, size).
fn plane_places(
    format: PixelFormat,
    size: FrameSize,
    out: FrameSize,
) -> Vec<(PlaneOf, Place, Place)> {
    let luma = PlaneOf {
        chroma: false,
        second: false,
        px: 1,
    };
    let mut places = vec![(luma, (0, size), (0, out))];
    let (half, out_half) = (halved(size), halved(out));
    let (area, out_area) = (size.width * size.height, out.width * out.height);
    let u = PlaneOf {
        chroma: true,
        ..luma
    };
    match format {
        PixelFormat::I420 => {
            places.push((u, (area, half), (out_area, out_half)));
            let v = PlaneOf { second: true, ..u };
            let (q, out_q) = (half.width * half.height, out_half.width * out_half.height);
            places.push((v, (area + q, half), (out_area + out_q, out_half)));
        }
        PixelFormat::Nv12 => {
            places.push((PlaneOf { px: 2, ..u }, (area, half), (out_area, out_half)))
        }
        _ => {}
    }
    places
}

/// `f` on each plane of a `format` frame (I420, NV12 or gray) of `size` into one of `out`:
/// the plane, its input (size, bytes) and its output (size, bytes).
fn each_plane(
    format: PixelFormat,
    (size, src): (FrameSize, &[u8]),
    (out, dst): (FrameSize, &mut [u8]),
    mut f: impl FnMut(PlaneOf, (FrameSize, &[u8]), (FrameSize, &mut [u8])),
) {
    for (plane, (a, s), (b, o)) in plane_places(format, size, out) {
        let (n, m) = (s.width * s.height * plane.px, o.width * o.height * plane.px);
        f(plane, (s, &src[a..a + n]), (o, &mut dst[b..b + m]));
    }
}

/// A 4:2:0 frame's chroma plane size.
fn halved(size: FrameSize) -> FrameSize {
    FrameSize::new(size.width / 2, size.height / 2)
}

/// `g` as it acts on a 4:2:0 chroma plane: every size and corner halved (`on_grid` made
/// the corners even, `fits` the sizes).
fn on_chroma(g: &Geometry) -> Geometry {
    match *g {
        Geometry::Crop { w, h, at } => Geometry::Crop {
            w: w / 2,
            h: h / 2,
            at: at.map(|(x, y)| (x / 2, y / 2)),
        },
        Geometry::Pad { w, h, x, y, color } => Geometry::Pad {
            w: w / 2,
            h: h / 2,
            x: x / 2,
            y: y / 2,
            color,
        },
        // A scale samples at the sizes it is given: the chroma planes' own.
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(s: &str) -> Chain {
        s.parse().unwrap()
    }

    #[test]
    fn only_geometry_on_even_sizes_fits() {
        let size = FrameSize::new(640, 360);
        assert!(fits(&chain("crop:320:200:101:61"), PixelFormat::I420, size));
        assert!(fits(&chain("transpose:1,hflip"), PixelFormat::Nv12, size));
        assert!(!fits(&chain("crop:321:200"), PixelFormat::I420, size));
        assert!(fits(&chain("crop:321:200"), PixelFormat::Gray, size));
        assert!(!fits(&chain("crop:320:200,gray"), PixelFormat::I420, size));
        assert!(!fits(&chain("hflip"), PixelFormat::Bgr24, size));
    }

    #[test]
    fn text_is_drawn_on_the_planes_with_its_box() {
        let size = FrameSize::new(64, 32);
        let src = vec![128u8; PixelFormat::I420.bytes(size)];
        let mut dst = vec![0u8; src.len()];
        let c = chain("text:II,x=8,y=8,size=8,color=ffffff");
        assert!(fits(&c, PixelFormat::I420, size));
        apply(
            &c,
            PixelFormat::I420,
            size,
            &src,
            &mut dst,
            &mut Default::default(),
        );
        let luma = &dst[..64 * 32];
        // Strokes take white's Y, the box darkens towards black, the rest is untouched.
        assert!(luma.contains(&yuv::luma(255, 255, 255)));
        assert!(luma.contains(&(16 + ((112 * 96 + 128) >> 8) as u8)));
        assert_eq!((luma[0], luma[64 * 31 + 63]), (128, 128));
        // Grey's chroma stays 128 under white ink and the box alike.
        assert!(dst[64 * 32..].iter().all(|&c| c == 128));
    }

    /// The steps the CUDA backend runs (`plane_steps`: each plane's job on its own, text in
    /// place), made here one by one, give `apply`'s bytes (which fuses a scale and a crop).
    #[test]
    fn plane_steps_one_by_one_make_what_apply_makes() {
        let size = FrameSize::new(66, 38);
        let mut ran = 0;
        for format in [PixelFormat::I420, PixelFormat::Nv12, PixelFormat::Gray] {
            for c in [
                "crop:30:20:5:3,pad:70:50:3:7:ff8000",
                "scale:40:-2,crop:20:12,transpose:clock",
                "text:Hi,x=2,y=3,size=8,box=1,hflip,scale:34:20:area,vflip",
                "transpose:cclock_flip,text:ok,x=-1,y=-1,size=8",
            ] {
                let c = chain(c);
                if !fits(&c, format, size) {
                    continue;
                }
                let src: Vec<u8> = (0..format.bytes(size))
                    .map(|i| (i * 7 % 251) as u8)
                    .collect();
                let out = c.output_size(size).unwrap();
                let mut want = vec![0; format.bytes(out)];
                apply(&c, format, size, &src, &mut want, &mut Default::default());
                let mut at = src.clone();
                for step in plane_steps(&c, format, size) {
                    match step {
                        PlaneStep::Geometry(jobs, made) => {
                            let mut next = vec![0; format.bytes(made)];
                            for job in jobs {
                                let (from, to) = (job.from_bytes(), job.to_bytes());
                                let fill = &job.fill[..job.px];
                                let src = (&at[from], job.px);
                                job.g
                                    .apply_px(job.from.1, src, job.to.1, &mut next[to], fill);
                            }
                            at = next;
                        }
                        PlaneStep::Text(i, s) => {
                            let Filter::Text(t) = &c.filters()[i] else {
                                panic!("step {i} is a text")
                            };
                            text_on_planes(&t.place(s), format, s, &mut at);
                        }
                    }
                }
                assert_eq!(at, want, "{c} on {format}");
                ran += 1;
            }
        }
        assert_eq!(ran, 12, "every chain fits every format");
    }

    #[test]
    fn a_crop_takes_the_samples_at_its_even_corner() {
        let size = FrameSize::new(4, 4);
        let src: Vec<u8> = (0..24).collect();
        let mut dst = vec![0; 6];
        let c = chain("crop:2:2:1:1");
        apply(
            &c,
            PixelFormat::I420,
            size,
            &src,
            &mut dst,
            &mut Default::default(),
        );
        // Y rows 0-1, columns 0-1 (the corner rounded to 0,0); U and V's first sample.
        assert_eq!(dst, [0, 1, 4, 5, 16, 20]);
    }
}
