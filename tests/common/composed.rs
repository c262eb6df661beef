//! The mosaic a backend composes (`tiles::Compose`), against the CPU's: frames of inputs of
//! several sizes and formats, interleaved through one backend, each scaled into its tile.

use framepipe::backend::{Backend, BackendKind, Fetch, StreamLayout};
use framepipe::desc::InputId;
use framepipe::filter::Chain;
use framepipe::frame::FrameSize;
use framepipe::pixel::{Formats, PixelFormat};
use framepipe::plan::{Counts, Plan};
use framepipe::ring::Slot;
use framepipe::source::pattern;
use framepipe::tiles::{Compose, FullFrames, Layout, Scaler, MAX_MOSAIC};

/// The inputs: sizes (an odd one, a 4:3 one letterboxed in 16:9 tiles) and formats whose
/// output is BGR, as the mosaic negotiates.
pub fn inputs() -> Vec<(FrameSize, Formats)> {
    let bgr = |input| Formats {
        input,
        output: PixelFormat::Bgr24,
    };
    vec![
        (FrameSize::new(1920, 1080), bgr(PixelFormat::I420)),
        (FrameSize::new(333, 251), bgr(PixelFormat::Bgr24)),
        (FrameSize::new(640, 480), bgr(PixelFormat::Nv12)),
        (FrameSize::new(1280, 720), bgr(PixelFormat::Bgr24)),
    ]
}

/// What one run gave: the last picture, and each completed frame (input, pattern frame,
/// whether its output was skipped, its bytes).
pub struct Composed {
    pub picture: Vec<u8>,
    pub pictures: usize,
    pub frames: Vec<(usize, u64, bool, Vec<u8>)>,
}

/// Runs `per_input` frames of each input, interleaved, through a backend of `kind` that
/// composes the mosaic (`layout`); `in_flight` 1 makes every frame find the GPU idle (the
/// idle plan, replayed as a graph), more keep several on the GPU; `all` downloads every
/// frame too.
pub fn run(
    kind: BackendKind,
    chain: &str,
    (bands, in_flight, streams): (usize, usize, StreamLayout),
    layout: Layout,
    per_input: u64,
    all: bool,
) -> Composed {
    let cfgs = inputs();
    let chain: Chain = chain.parse().unwrap();
    let (size, formats) = cfgs[0];
    let counts = Counts {
        busy_bands: bands.div_ceil(2),
        ..Counts::spare(bands, in_flight)
    };
    let plan = Plan::new(kind, size, formats, chain, counts).unwrap();
    let cuda = framepipe::backend::CudaSettings {
        streams,
        ..plan.cuda()
    };
    let full = match all {
        true => FullFrames::all(),
        false => FullFrames::shown(),
    };
    let plan = plan.with_cuda(cuda).composing(Some(Compose::new(
        layout,
        (0..cfgs.len()).collect(),
        full,
        None,
    )));
    let mut backend = plan.make_backend().unwrap();
    let mut free: Vec<Vec<Slot>> = cfgs
        .iter()
        .enumerate()
        .map(|(k, &(size, formats))| {
            (0..in_flight + 1)
                .map(|_| {
                    let mut s = Slot::new(size, formats);
                    s.desc.input = InputId(k as u16);
                    s
                })
                .collect()
        })
        .collect();
    for slot in free.iter_mut().flatten() {
        for buf in slot.buffers_mut() {
            backend.attach(buf).unwrap();
        }
    }
    let mut out = Composed {
        picture: Vec::new(),
        pictures: 0,
        frames: Vec::new(),
    };
    let take = |b: &mut Box<dyn Backend>, free: &mut Vec<Vec<Slot>>, out: &mut Composed| {
        let slot = b.complete(true).unwrap().expect("a frame in flight");
        let k = usize::from(slot.desc.input.0);
        let n = slot.desc.pts.unwrap().ticks as u64;
        out.frames
            .push((k, n, slot.output_skipped, slot.output.to_vec()));
        assert!(
            kind == BackendKind::Cuda || !slot.output_skipped,
            "the CPU always fills its frames"
        );
        free[k].push(slot);
        while let Some(p) = b.picture(Fetch::Ready).unwrap() {
            out.pictures += 1;
            out.picture = p.to_vec();
        }
    };
    let mut next = vec![0u64; cfgs.len()];
    let total = per_input as usize * cfgs.len();
    for i in 0..total {
        // Inputs in a shuffled order, each its frames in order.
        let k = (i * 3 + i / cfgs.len()) % cfgs.len();
        if backend.in_flight() >= backend.capacity() {
            take(&mut backend, &mut free, &mut out);
        }
        let mut slot = free[k].pop().unwrap();
        let (size, formats) = cfgs[k];
        let n = next[k];
        next[k] += 1;
        pattern::draw_in(formats.input, size, n, &mut slot.input);
        slot.desc.index = i as u64;
        slot.desc.pts = Some(framepipe::desc::Timestamp {
            ticks: n as i64,
            base: (1, 1),
        });
        backend.submit(slot).unwrap();
    }
    while backend.in_flight() > 0 {
        take(&mut backend, &mut free, &mut out);
    }
    // The tiles written since the last picture came down (none where it came after them).
    if let Some(last) = backend.picture(Fetch::Last).unwrap() {
        out.pictures += 1;
        out.picture = last.to_vec();
    }
    assert!(out.pictures > 0, "a picture came down");
    out
}

/// Input `k`'s frame `n` through `chain`, as the reference makes it.
fn reference(chain: &Chain, k: usize, n: u64) -> Vec<u8> {
    let (size, formats) = inputs()[k];
    let mut input = vec![0; formats.input.bytes(size)];
    pattern::draw_in(formats.input, size, n, &mut input);
    let mut frame = vec![0; formats.output.bytes(size)];
    framepipe::pixel::apply_reference(chain, size, formats, &input, &mut frame);
    frame
}

/// The mosaic the CPU composes of each input's `last` frame (`frames[k]`), as the mosaic
/// sink shows it: dark grey, each tile black around its picture.
pub fn expected(layout: Layout, last: &[Vec<u8>]) -> Vec<u8> {
    let stride = layout.canvas.width * 3;
    let mut picture = vec![16u8; PixelFormat::Bgr24.bytes(layout.canvas)];
    for (k, &(size, _)) in inputs().iter().enumerate() {
        framepipe::tiles::clear(&mut picture, stride, layout.tile_area(k));
        Scaler::new(size, layout.picture_area(k, size)).draw(&last[k], &mut picture, stride);
    }
    picture
}

/// The layouts tried: 2x2 in a 1080p picture (the 1080p input scaled down, the others
/// letterboxed), and 4x1 of small tiles (everything scaled down).
pub fn layouts() -> Vec<Layout> {
    let sizes: Vec<FrameSize> = inputs().iter().map(|c| c.0).collect();
    vec![
        Layout::new(2, 2, &sizes, MAX_MOSAIC),
        Layout::new(4, 1, &sizes, FrameSize::new(1000, 700)),
    ]
}

/// Frames of each input a run composes.
pub const FRAMES: u64 = 5;

/// Checks `kind`'s composed mosaic against the CPU's for `chain` over every layout and each
/// of `settings` (bands, frames in flight, stream layout); each frame brought down must equal
/// the reference, and on CUDA the others must not be brought down. Returns the pictures
/// compared.
pub fn check(kind: BackendKind, chain: &str, settings: &[(usize, usize, StreamLayout)]) -> usize {
    let c: Chain = chain.parse().unwrap();
    let refs: Vec<Vec<Vec<u8>>> = (0..inputs().len())
        .map(|k| (0..FRAMES).map(|n| reference(&c, k, n)).collect())
        .collect();
    let last: Vec<Vec<u8>> = refs
        .iter()
        .map(|r| r[FRAMES as usize - 1].clone())
        .collect();
    let mut compared = 0;
    for layout in layouts() {
        let want = expected(layout, &last);
        for &setting in settings {
            for all in [false, true] {
                let got = run(kind, chain, setting, layout, FRAMES, all);
                assert_eq!(
                    got.frames.len(),
                    (FRAMES as usize) * inputs().len(),
                    "every frame came back"
                );
                let diff = got
                    .picture
                    .iter()
                    .zip(&want)
                    .filter(|(a, b)| a != b)
                    .count();
                assert!(
                    diff == 0,
                    "{kind:?} {chain}, {layout:?}, {setting:?}: {diff} bytes of the mosaic differ from the CPU's"
                );
                for (k, n, skipped, bytes) in &got.frames {
                    let skips = kind == BackendKind::Cuda && !all;
                    assert_eq!(
                        *skipped, skips,
                        "input {k} frame {n}: brought down only when asked"
                    );
                    if !skipped {
                        assert!(
                            bytes[..refs[*k][*n as usize].len()] == refs[*k][*n as usize][..],
                            "{kind:?} {chain}: input {k} frame {n} differs from the reference"
                        );
                    }
                }
                compared += 1;
            }
        }
    }
    compared
}

/// Frames a second of `inputs` unpaced inputs of `size` frames (BGR in and out, `copy`,
/// each slot drawn once) through one backend of `kind`, `frames` each, with the mosaic
/// composed (and no frame brought down whole) or without one (every frame brought down):
/// what composing costs, or saves, against bringing every frame down.
pub fn throughput(
    kind: BackendKind,
    inputs: usize,
    size: FrameSize,
    frames: u64,
    mosaic: bool,
) -> f64 {
    let formats = Formats {
        input: PixelFormat::Bgr24,
        output: PixelFormat::Bgr24,
    };
    let plan = Plan::new(
        kind,
        size,
        formats,
        "copy".parse().unwrap(),
        Counts::spare(4, 4),
    )
    .unwrap();
    let sizes = vec![size; inputs];
    let (cols, rows) = framepipe::tiles::auto_grid(inputs);
    let plan = plan.composing(mosaic.then(|| {
        Compose::new(
            Layout::new(cols, rows, &sizes, MAX_MOSAIC),
            (0..inputs).collect(),
            FullFrames::shown(),
            None,
        )
    }));
    let mut backend = plan.make_backend().unwrap();
    let mut free: Vec<Vec<Slot>> = (0..inputs)
        .map(|k| {
            (0..6)
                .map(|_| {
                    let mut s = Slot::new(size, formats);
                    s.desc.input = InputId(k as u16);
                    pattern::draw_in(formats.input, size, k as u64, &mut s.input);
                    s
                })
                .collect()
        })
        .collect();
    for slot in free.iter_mut().flatten() {
        for buf in slot.buffers_mut() {
            backend.attach(buf).unwrap();
        }
    }
    let mut pictures = 0;
    let mut done = 0u64;
    let total = frames * inputs as u64;
    let t = std::time::Instant::now();
    let mut submitted = 0u64;
    while done < total {
        while submitted < total && backend.in_flight() < backend.capacity() {
            let k = (submitted % inputs as u64) as usize;
            let mut slot = free[k].pop().unwrap();
            slot.desc.index = submitted / inputs as u64;
            backend.submit(slot).unwrap();
            submitted += 1;
        }
        if let Some(slot) = backend.complete(true).unwrap() {
            free[usize::from(slot.desc.input.0)].push(slot);
            done += 1;
        }
        while backend.picture(Fetch::Ready).unwrap().is_some() {
            pictures += 1;
        }
    }
    let fps = total as f64 / t.elapsed().as_secs_f64();
    assert!(!mosaic || pictures > 0, "pictures came down");
    fps
}
