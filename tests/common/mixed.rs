//! Frames of several sizes and formats, interleaved, through one backend: each must come
//! back exactly as a backend made for its configuration alone gives it.

use framepipe::backend::{Backend, BackendKind};
use framepipe::filter::Chain;
use framepipe::frame::FrameSize;
use framepipe::pixel::{Formats, PixelFormat};
use framepipe::plan::{Counts, Plan};
use framepipe::ring::Slot;
use framepipe::source::pattern;

/// The configurations interleaved: two sizes (one odd), four formats, one of them a
/// 4:2:0 format whose bands keep row pairs whole.
pub fn configs() -> Vec<(FrameSize, Formats)> {
    let f = |input, output| Formats { input, output };
    vec![
        (
            FrameSize::new(640, 360),
            f(PixelFormat::I420, PixelFormat::Bgr24),
        ),
        (
            FrameSize::new(333, 251),
            f(PixelFormat::Bgr24, PixelFormat::Bgr24),
        ),
        (
            FrameSize::new(640, 360),
            f(PixelFormat::Nv12, PixelFormat::I420),
        ),
        (
            FrameSize::new(333, 251),
            f(PixelFormat::Gray, PixelFormat::Gray),
        ),
    ]
}

/// Frames per configuration.
pub const FRAMES: u64 = 6;

/// The outputs of `frames` frames, in submission order, each (configuration index, its
/// pattern frame number, bytes), through one backend of `kind` made for `configs[0]`
/// with `bands` bands and 3 frames in flight. `order` lists the configuration of each
/// frame submitted.
pub fn run(
    kind: BackendKind,
    chain: &str,
    bands: usize,
    order: &[usize],
) -> Vec<(usize, u64, Vec<u8>)> {
    let all = configs();
    let chain: Chain = chain.parse().unwrap();
    let (size, formats) = all[order[0]];
    let counts = Counts {
        busy_bands: 2,
        ..Counts::spare(bands, 3)
    };
    let plan = Plan::new(kind, size, formats, chain, counts).unwrap();
    let mut backend = plan.make_backend().unwrap();
    // A few slots of each configuration, attached once, as the ring's are.
    let mut free: Vec<Vec<Slot>> = all
        .iter()
        .map(|&(size, formats)| (0..4).map(|_| Slot::new(size, formats)).collect())
        .collect();
    for slot in free.iter_mut().flatten() {
        for buf in slot.buffers_mut() {
            backend.attach(buf).unwrap();
        }
    }
    let mut next = vec![0u64; all.len()];
    let mut out = Vec::new();
    let take = |b: &mut Box<dyn Backend>, free: &mut Vec<Vec<Slot>>, out: &mut Vec<_>| {
        let slot = b.complete(true).unwrap().expect("a frame in flight");
        let c = all
            .iter()
            .position(|&(s, f)| s == slot.size() && f == slot.formats())
            .unwrap();
        out.push((c, slot.desc.pts.unwrap().ticks as u64, slot.output.to_vec()));
        free[c].push(slot);
    };
    for (i, &c) in order.iter().enumerate() {
        if backend.in_flight() >= backend.capacity() {
            take(&mut backend, &mut free, &mut out);
        }
        let mut slot = free[c].pop().unwrap();
        let (size, formats) = all[c];
        pattern::draw_in(formats.input, size, next[c], &mut slot.input);
        slot.desc.index = i as u64;
        // The pattern frame's number rides in the time, to check what came back.
        slot.desc.pts = Some(framepipe::desc::Timestamp {
            ticks: next[c] as i64,
            base: (1, 1),
        });
        next[c] += 1;
        backend.submit(slot).unwrap();
    }
    while backend.in_flight() > 0 {
        take(&mut backend, &mut free, &mut out);
    }
    out
}

/// Checks that interleaved frames equal separate runs' and the reference (within
/// `tolerance`); returns how many frames were compared.
pub fn check(kind: BackendKind, chain: &str, bands: usize, tolerance: u8) -> usize {
    let n = configs().len();
    let order: Vec<usize> = (0..FRAMES as usize * n)
        .map(|i| (i * 3 + i / n) % n)
        .collect();
    let mixed = run(kind, chain, bands, &order);
    assert_eq!(mixed.len(), order.len());
    let mut compared = 0;
    for c in 0..n {
        let alone = run(kind, chain, bands, &vec![c; FRAMES as usize]);
        let mine: Vec<_> = mixed.iter().filter(|m| m.0 == c).collect();
        assert_eq!(mine.len(), alone.len(), "config {c}");
        let (size, formats) = configs()[c];
        for (m, a) in mine.iter().zip(&alone) {
            assert_eq!(m.1, a.1, "config {c}: frames come back in order");
            assert!(
                m.2 == a.2,
                "{kind:?} {chain} bands {bands}: config {c} ({size}, {formats}) frame {} differs from a run of that configuration alone",
                m.1
            );
            let mut input = vec![0; formats.input.bytes(size)];
            pattern::draw_in(formats.input, size, m.1, &mut input);
            let mut want = vec![0; formats.output.bytes(size)];
            framepipe::pixel::apply_reference(
                &chain.parse().unwrap(),
                size,
                formats,
                &input,
                &mut want,
            );
            let diff =
                m.2.iter()
                    .zip(&want)
                    .map(|(a, b)| a.abs_diff(*b))
                    .max()
                    .unwrap_or(0);
            assert!(
                diff <= tolerance,
                "{kind:?} {chain}: config {c} ({size}, {formats}) frame {} is {diff} from the reference",
                m.1
            );
            compared += 1;
        }
    }
    compared
}
