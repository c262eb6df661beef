//! The mosaic of a run of several inputs: every input's processed frames, each scaled into
//! its tile of one picture (a grid of columns × rows, row-major in input order), labelled
//! with the input's index, name, rate and drops, shown in one window.
//!
//! Keys, besides the window's: **Tab** (or **n**) or a click selects a tile (framed in
//! yellow), **Enter** (or **z**, or a double click) shows the selected input alone at full
//! size and back. The window's other keys
//! (filters, pause, bands, page-locking, reload) act on every input: the overlay says so.
//!
//! The mosaic can be recorded (an `--output` without `{n}` in a run of several inputs): a
//! picture a tick of `RECORD_FPS`, timed by the run's clock, with the labels.
//!
//! Invariants: a tile keeps its input's last frame until the next one comes (a slow input
//! never blanks); an input that ended or failed keeps its last frame, dimmed, with a line
//! saying why; a tile's picture keeps its input's aspect (letterboxed, centred); the picture
//! is composed on the CPU, tile by tile as frames come (nearest-neighbour scaling with
//! precomputed row and column maps), and handed to the window at most `SHOW_EVERY` apart,
//! so that many inputs' frames don't each cost a window update.

use std::time::{Duration, Instant};

use anyhow::Result;
use opencv::core::{Mat, Point, Rect, Scalar, Vec3b};
use opencv::prelude::*;

use super::{strip, Flow, Frame, Sink};
use crate::desc::FrameDesc;
use crate::frame::FrameSize;
use crate::pixel::PixelFormat;
use crate::stats::Live;

/// The mosaic's largest size: a 1080p screen.
pub const MAX_MOSAIC: FrameSize = FrameSize {
    width: 1920,
    height: 1080,
};

/// The shortest time between two pictures handed to the window.
const SHOW_EVERY: Duration = Duration::from_millis(33);

/// The rate a recording of the mosaic is made at.
pub const RECORD_FPS: f64 = 30.0;

/// The grid for `n` tiles where none is asked for: as square as possible, wider than tall.
pub fn auto_grid(n: usize) -> (usize, usize) {
    let cols = (1..=n.max(1)).find(|c| c * c >= n).unwrap_or(1);
    (cols, n.max(1).div_ceil(cols))
}

/// The tile and mosaic sizes of a mosaic of `cols` × `rows` tiles for inputs of `sizes`:
/// tiles of the widest and tallest input's size, or scaled down (keeping that shape) so that
/// the mosaic fits `within` (the screen's unscaled area, at most `MAX_MOSAIC`).
pub fn layout(
    cols: usize,
    rows: usize,
    sizes: &[FrameSize],
    within: FrameSize,
) -> (FrameSize, FrameSize) {
    let widest = sizes.iter().map(|s| s.width).max().unwrap_or(640);
    let tallest = sizes.iter().map(|s| s.height).max().unwrap_or(360);
    let within = FrameSize {
        width: within.width.min(MAX_MOSAIC.width),
        height: within.height.min(MAX_MOSAIC.height),
    };
    // The largest input's shape, scaled down (never up) until the grid fits.
    let scale = (within.width as f64 / (cols * widest) as f64)
        .min(within.height as f64 / (rows * tallest) as f64)
        .min(1.0);
    let tile = FrameSize {
        width: ((widest as f64 * scale) as usize).max(2) & !1,
        height: ((tallest as f64 * scale) as usize).max(2) & !1,
    };
    let canvas = FrameSize {
        width: tile.width * cols,
        height: tile.height * rows,
    };
    (tile, canvas)
}

/// Where a `from` picture goes in a `tile`: the largest rectangle of its aspect, centred.
pub fn fit_in(from: FrameSize, tile: FrameSize) -> Rect {
    let (fw, fh) = (from.width as f64, from.height as f64);
    let scale = (tile.width as f64 / fw).min(tile.height as f64 / fh);
    let w = ((fw * scale).round() as usize).clamp(1, tile.width);
    let h = ((fh * scale).round() as usize).clamp(1, tile.height);
    Rect::new(
        ((tile.width - w) / 2) as i32,
        ((tile.height - h) / 2) as i32,
        w as i32,
        h as i32,
    )
}

/// Where tile `t` of a grid of `cols` columns of `tile` tiles starts (row-major).
fn tile_origin(t: usize, cols: usize, tile: FrameSize) -> (usize, usize) {
    ((t % cols) * tile.width, (t / cols) * tile.height)
}

/// A scaler from one frame size into one rectangle: the source column and row of each
/// destination column and row (nearest neighbour, sampling pixel centres).
struct Scaler {
    from: FrameSize,
    /// Where in its tile the picture goes.
    to: Rect,
    cols: Vec<usize>,
    rows: Vec<usize>,
}

impl Scaler {
    fn new(from: FrameSize, to: Rect) -> Self {
        let map = |n: usize, m: i32| -> Vec<usize> {
            (0..m as usize)
                .map(|i| (((2 * i + 1) * n) / (2 * m as usize)).min(n - 1))
                .collect()
        };
        Self {
            from,
            to,
            cols: map(from.width, to.width),
            rows: map(from.height, to.height),
        }
    }

    /// Draws the BGR `frame` into `canvas` (BGR, `stride` bytes a row) at `at`.
    fn draw(&self, frame: &[u8], canvas: &mut [u8], stride: usize, at: (usize, usize)) {
        let src_stride = self.from.width * 3;
        for (y, &sy) in self.rows.iter().enumerate() {
            let src = &frame[sy * src_stride..(sy + 1) * src_stride];
            let start = (at.1 + y) * stride + at.0 * 3;
            let dst = &mut canvas[start..start + self.cols.len() * 3];
            for (d, &sx) in dst.chunks_exact_mut(3).zip(&self.cols) {
                d.copy_from_slice(&src[sx * 3..sx * 3 + 3]);
            }
        }
    }
}

/// One tile's input, as the mosaic knows it.
struct Tile {
    /// The input's name for the label.
    name: String,
    /// Its scaler, made for the size of its frames when the first came.
    scaler: Option<Scaler>,
    /// Its frames seen, and the rate they came at (smoothed).
    frames: u64,
    fps: f64,
    last_at: Option<Instant>,
    dropped: u64,
    /// Why it ended or failed, once it has.
    ended: Option<String>,
    /// "reconnecting …" while its stream is lost.
    state: Option<String>,
    /// Its last frame at full size, kept while it is shown alone.
    full: Option<(FrameSize, Vec<u8>)>,
}

/// The mosaic sink (module doc): composes, then hands the picture to `window` and to the
/// recording.
pub struct Mosaic {
    window: Option<Box<dyn Sink>>,
    /// The outputs that record the mosaic (a file, a stream, standard output), fed one
    /// picture per tick of `record_fps`, timed by the run's clock.
    record: Option<Box<dyn Sink>>,
    record_fps: f64,
    started: Instant,
    /// The next recording tick due.
    next_tick: u64,
    cols: usize,
    tile: FrameSize,
    canvas: FrameSize,
    /// The composed tiles (BGR, packed), without labels.
    picture: Vec<u8>,
    /// What is handed to the window: `picture` with the labels.
    shown: Mat,
    tiles: Vec<Tile>,
    /// Which tile each input of the run fills (inputs that failed to open have a tile and
    /// no `InputId`).
    tile_of: Vec<usize>,
    selected: usize,
    alone: bool,
    dirty: bool,
    last_show: Option<Instant>,
}

impl Mosaic {
    /// A mosaic of `names.len()` tiles in a `grid` (columns, rows) for inputs of `sizes`,
    /// fitting `within`, shown in `window` where there is one; `tile_of[k]` is the tile of
    /// the run's input `k`; `failed` holds the tiles of inputs that could not be opened,
    /// with why. `record` (where given) is opened with `with_recording`.
    pub fn new(
        window: Option<Box<dyn Sink>>,
        grid: (usize, usize),
        names: Vec<String>,
        sizes: &[FrameSize],
        within: FrameSize,
        tile_of: Vec<usize>,
        failed: Vec<(usize, String)>,
    ) -> Self {
        let (cols, rows) = grid;
        let (tile, canvas) = layout(cols, rows, sizes, within);
        let mut tiles: Vec<Tile> = names
            .into_iter()
            .map(|name| Tile {
                name,
                scaler: None,
                frames: 0,
                fps: 0.0,
                last_at: None,
                dropped: 0,
                ended: None,
                state: None,
                full: None,
            })
            .collect();
        for (t, why) in failed {
            tiles[t].ended = Some(why);
        }
        let bytes = PixelFormat::Bgr24.bytes(canvas);
        Self {
            window,
            record: None,
            record_fps: RECORD_FPS,
            started: Instant::now(),
            next_tick: 0,
            cols,
            tile,
            canvas,
            picture: vec![16; bytes],
            shown: Mat::default(),
            tiles,
            tile_of,
            selected: 0,
            alone: false,
            dirty: true,
            last_show: None,
        }
    }

    /// The mosaic's size.
    pub fn size(&self) -> FrameSize {
        self.canvas
    }

    /// Draws one input's frame into its tile.
    fn place(&mut self, t: usize, size: FrameSize, bgr: &[u8]) {
        let (x0, y0) = tile_origin(t, self.cols, self.tile);
        let stride = self.canvas.width * 3;
        let tile = &mut self.tiles[t];
        if tile.scaler.as_ref().is_none_or(|s| s.from != size) {
            // A new size: the tile is cleared around the new picture.
            for y in y0..y0 + self.tile.height {
                self.picture[y * stride + x0 * 3..y * stride + (x0 + self.tile.width) * 3].fill(0);
            }
            tile.scaler = Some(Scaler::new(size, fit_in(size, self.tile)));
        }
        let scaler = tile.scaler.as_ref().expect("made above");
        scaler.draw(
            bgr,
            &mut self.picture,
            stride,
            (x0 + scaler.to.x as usize, y0 + scaler.to.y as usize),
        );
    }

    /// The mosaic with its labels, into `shown`.
    fn compose(&mut self) -> Result<()> {
        let (h, w) = (self.canvas.height as i32, self.canvas.width as i32);
        Mat::new_rows_cols_with_bytes::<Vec3b>(h, w, &self.picture)?.copy_to(&mut self.shown)?;
        let mat = &mut self.shown;
        let ink = strip::Ink::new(1.0);
        let (tw, th) = (self.tile.width as i32, self.tile.height as i32);
        for (t, tile) in self.tiles.iter().enumerate() {
            let (x, y) = tile_origin(t, self.cols, self.tile);
            let (x, y) = (x as i32, y as i32);
            let area = Rect::new(x, y, tw, th);
            if tile.state.is_some() || tile.ended.as_deref().is_some_and(|e| e != "stopped") {
                strip::backdrop(mat, area)?;
            }
            let first = format!("{t}: {}", tile.name.chars().take(48).collect::<String>());
            let second = match (&tile.ended, &tile.state) {
                (Some(why), _) | (None, Some(why)) => why.chars().take(64).collect::<String>(),
                (None, None) if tile.frames == 0 => "waiting for the first frame".into(),
                (None, None) => format!("{:.1} fps  {} dropped", tile.fps, tile.dropped),
            };
            let widest = ink.text_width(&first)?.max(ink.text_width(&second)?);
            strip::backdrop(
                mat,
                Rect::new(x, y, widest + ink.px(12.0), ink.line() * 2 + ink.px(6.0)),
            )?;
            let white = Scalar::new(240.0, 240.0, 240.0, 0.0);
            let colour = match &tile.ended {
                Some(e) if e.starts_with("failed") => Scalar::new(80.0, 80.0, 255.0, 0.0),
                _ => white,
            };
            ink.text(
                mat,
                &first,
                Point::new(x + ink.px(6.0), y + ink.line()),
                white,
            )?;
            ink.text(
                mat,
                &second,
                Point::new(x + ink.px(6.0), y + 2 * ink.line()),
                colour,
            )?;
            if t == self.selected && self.tiles.len() > 1 {
                opencv::imgproc::rectangle(
                    mat,
                    Rect::new(x + 1, y + 1, tw - 2, th - 2),
                    Scalar::new(0.0, 220.0, 255.0, 0.0),
                    2,
                    opencv::imgproc::LINE_8,
                    0,
                )?;
            }
        }
        Ok(())
    }

    /// Records the mosaic as it is at the run's clock, where a tick of the recording is due
    /// (`force`: the last picture, at the end); one picture a call, ticks missed while the
    /// run was busy are skipped (the recording's times stay the run's).
    pub fn with_recording(mut self, record: Box<dyn Sink>, fps: f64) -> Self {
        self.record = Some(record);
        self.record_fps = fps;
        self.started = Instant::now();
        self
    }

    fn record_tick(&mut self, force: bool) -> Result<Flow> {
        if self.record.is_none() {
            return Ok(Flow::Continue);
        }
        let now = self.started.elapsed().as_secs_f64();
        let tick = (now * self.record_fps) as u64;
        if tick < self.next_tick && !force {
            return Ok(Flow::Continue);
        }
        let tick = tick.max(self.next_tick);
        self.next_tick = tick + 1;
        self.compose()?;
        let mut desc = FrameDesc::host(PixelFormat::Bgr24, self.canvas);
        desc.index = tick;
        desc.pts = crate::desc::Timestamp::from_seconds(tick as f64 / self.record_fps);
        let bytes = self.shown.data_bytes()?;
        let record = self.record.as_mut().expect("checked");
        record.consume(&Frame { desc: &desc, bytes })
    }

    /// Hands the picture to the window, where one is due (`force`: now), and to the
    /// recording where its tick is due.
    fn show(&mut self, force: bool) -> Result<Flow> {
        let recorded = self.record_tick(false)?;
        if self.window.is_none() {
            return Ok(recorded);
        }
        let due = self
            .last_show
            .is_none_or(|t| t.elapsed() >= SHOW_EVERY || force);
        if !(self.dirty && due) {
            return Ok(recorded);
        }
        self.last_show = Some(Instant::now());
        self.dirty = false;
        let flow = match &self.tiles[self.selected].full {
            Some((size, bytes)) if self.alone => {
                let desc = FrameDesc::host(PixelFormat::Bgr24, *size);
                let window = self.window.as_mut().expect("checked");
                window.consume(&Frame { desc: &desc, bytes })?
            }
            _ => {
                self.compose()?;
                let desc = FrameDesc::host(PixelFormat::Bgr24, self.canvas);
                let bytes = self.shown.data_bytes()?;
                let window = self.window.as_mut().expect("checked");
                window.consume(&Frame { desc: &desc, bytes })?
            }
        };
        Ok(self.keys(flow.merge(recorded)))
    }

    /// Takes the mosaic's own keys out of the window's answer.
    fn keys(&mut self, flow: Flow) -> Flow {
        match flow {
            Flow::NextTile => {
                self.selected = (self.selected + 1) % self.tiles.len();
                self.dirty = true;
                Flow::Continue
            }
            Flow::Alone => {
                self.alone = !self.alone;
                self.dirty = true;
                Flow::Continue
            }
            Flow::Pick { x, y, double } => {
                if self.alone {
                    // A double click on the input shown alone goes back to the mosaic.
                    self.alone = !double;
                } else if x >= 0 && y >= 0 {
                    let (col, row) = (x as usize / self.tile.width, y as usize / self.tile.height);
                    let t = row * self.cols + col;
                    if col < self.cols && t < self.tiles.len() {
                        self.selected = t;
                        self.alone = double;
                    }
                }
                self.dirty = true;
                Flow::Continue
            }
            other => other,
        }
    }
}

impl Sink for Mosaic {
    fn verb(&self) -> &'static str {
        "shown"
    }
    fn describe(&self) -> String {
        let mut to: Vec<String> = self.window.iter().map(|w| w.describe()).collect();
        if let Some(r) = &self.record {
            to.push(format!("recorded to {}", r.describe()));
        }
        format!(
            "a mosaic of {} inputs, {}x{} tiles of {} ({})",
            self.tiles.len(),
            self.cols,
            self.tiles.len().div_ceil(self.cols),
            self.tile,
            to.join("; ")
        )
    }
    fn consume(&mut self, frame: &Frame) -> Result<Flow> {
        let Some(&t) = self.tile_of.get(usize::from(frame.desc.input.0)) else {
            anyhow::bail!(
                "internal: the mosaic has no tile for {:?}",
                frame.desc.input
            );
        };
        let (size, bgr) = (frame.size(), super::bgr(frame, "the mosaic")?);
        self.place(t, size, bgr);
        let tile = &mut self.tiles[t];
        tile.frames += 1;
        let now = Instant::now();
        if let Some(prev) = tile.last_at.replace(now) {
            let rate = 1.0 / (now - prev).as_secs_f64().max(1e-6);
            tile.fps = if tile.fps == 0.0 {
                rate
            } else {
                tile.fps + 0.1 * (rate - tile.fps)
            };
        }
        if self.alone && t == self.selected {
            let full = tile.full.get_or_insert_with(|| (size, Vec::new()));
            full.0 = size;
            full.1.clear();
            full.1.extend_from_slice(bgr);
        }
        self.dirty = true;
        self.show(false)
    }
    fn status(&mut self, live: &Live) {
        for (k, l) in live.inputs.iter().enumerate() {
            if let Some(&t) = self.tile_of.get(k) {
                let tile = &mut self.tiles[t];
                tile.dropped = l.dropped;
                if tile.state != l.state {
                    tile.state.clone_from(&l.state);
                    self.dirty = true;
                }
                if tile.ended.is_none() && l.ended.is_some() {
                    tile.ended.clone_from(&l.ended);
                    self.dirty = true;
                }
            }
        }
        if let Some(w) = self.window.as_mut() {
            w.status(live);
        }
    }
    fn idle(&mut self) -> Result<Flow> {
        let flow = self.show(true)?;
        if flow != Flow::Continue {
            return Ok(flow);
        }
        let flow = match self.window.as_mut() {
            Some(w) => w.idle()?,
            None => Flow::Continue,
        };
        Ok(self.keys(flow))
    }
    fn finish(&mut self) -> Result<()> {
        // The recording ends with the mosaic as the run left it.
        let recorded = self.record_tick(true);
        let finished = self.record.as_mut().map_or(Ok(()), |r| r.finish());
        // The last state of every tile (ended, dimmed) is what stays up.
        for t in 0..self.tiles.len() {
            if self.tiles[t].ended.is_none() {
                self.tiles[t].ended = Some("ended".into());
            }
        }
        self.dirty = true;
        let _ = self.show(true);
        let window = self.window.as_mut().map_or(Ok(()), |w| w.finish());
        recorded.and(finished).and(window)
    }
    fn stored(&self) -> Option<u64> {
        self.record.as_ref().and_then(|r| r.stored())
    }
    fn streams(&self) -> Vec<crate::stats::StreamStats> {
        self.record.as_ref().map_or_else(Vec::new, |r| r.streams())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_are_square_or_wider() {
        assert_eq!(auto_grid(1), (1, 1));
        assert_eq!(auto_grid(2), (2, 1));
        assert_eq!(auto_grid(3), (2, 2));
        assert_eq!(auto_grid(4), (2, 2));
        assert_eq!(auto_grid(5), (3, 2));
        assert_eq!(auto_grid(16), (4, 4));
        assert_eq!(auto_grid(17), (5, 4));
        assert_eq!(auto_grid(64), (8, 8));
    }

    #[test]
    fn tiles_fit_the_largest_input_and_the_screen() {
        let hd = FrameSize::new(1920, 1080);
        let small = FrameSize::new(640, 360);
        let (tile, canvas) = layout(2, 2, &[hd, small, small], MAX_MOSAIC);
        assert_eq!((tile, canvas), (FrameSize::new(960, 540), hd));
        // On a 1280x1024 screen (90 %: 1152x921).
        let (tile, canvas) = layout(2, 2, &[hd, small], FrameSize::new(1152, 921));
        assert_eq!(
            (tile, canvas),
            (FrameSize::new(576, 324), FrameSize::new(1152, 648))
        );
        let (tile, canvas) = layout(2, 2, &[small; 4], MAX_MOSAIC);
        assert_eq!(
            (tile, canvas),
            (small, FrameSize::new(1280, 720)),
            "small inputs are not scaled up"
        );
        // A 4:3 picture in a 16:9 tile is pillarboxed, centred.
        assert_eq!(
            fit_in(FrameSize::new(640, 480), FrameSize::new(960, 540)),
            Rect::new(120, 0, 720, 540)
        );
    }

    #[test]
    fn nearest_neighbour_scaling_samples_pixel_centres() {
        // A 4x2 frame whose pixel (x, y) is (x, y, 7) into a 2x1 rectangle at (1, 0) of a
        // 3x1 canvas: columns 1 and 3 of row 1 (the centres of each half).
        let from = FrameSize::new(4, 2);
        let frame: Vec<u8> = (0..2)
            .flat_map(|y| (0..4).flat_map(move |x| [x as u8, y as u8, 7]))
            .collect();
        let s = Scaler::new(from, Rect::new(0, 0, 2, 1));
        let mut canvas = vec![0u8; 9];
        s.draw(&frame, &mut canvas, 9, (1, 0));
        assert_eq!(canvas, [0, 0, 0, 1, 1, 7, 3, 1, 7]);
    }
}
