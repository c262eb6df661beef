//! The mosaic of a run of several inputs: every input's processed frames, each scaled into
//! its tile of one picture (a grid of columns × rows, row-major in input order, laid out by
//! `tiles`), labelled with the input's index, name, rate and drops, shown in one window
//! (and in the browser view with `--serve`: both get the same labelled pictures).
//!
//! Keys, besides the window's: **Tab** (or **n**) or a click selects a tile (framed in
//! yellow), **Enter** (or **z**, or a double click) shows the selected input alone at full
//! size and back. The window's other keys
//! (filters, pause, bands, page-locking, reload) act on every input: the overlay says so.
//!
//! The mosaic can be recorded (an `--output` without `{n}` in a run of several inputs): a
//! picture a tick of `RECORD_FPS`, timed by the run's clock, with the labels.
//!
//! The backend composes the picture (`BackendConfig::compose`): the CUDA backend scales each
//! frame into its tile on the device and brings the picture (not every frame) down a few
//! times a second; the CPU backend draws the same picture on the host. Either hands it here
//! by `Sink::composed`; this sink adds the labels. Composed on the device, the frames reach
//! this sink without their bytes, except those of the input shown alone (this sink says
//! which through `FullFrames`).
//!
//! With `--detect`, each input's newest boxes are drawn into its tile and into the input
//! shown alone (`--draw`; `paint::boxes`), under the labels.
//!
//! Invariants: a tile keeps its input's last frame until the next one comes (a slow input
//! never blanks); an input that ended or failed keeps its last frame, dimmed, with a line
//! saying why; a tile's picture keeps its input's aspect (letterboxed, centred); the labels
//! are drawn on a copy of the picture, which is handed to the window at most `SHOW_EVERY`
//! apart, so that many inputs' frames don't each cost a window update.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::{Flow, Frame, Sink};
use crate::backend::Picture;
use crate::desc::FrameDesc;
use crate::frame::FrameSize;
use crate::paint::draw::{Canvas, Ink, Rect};
use crate::pixel::PixelFormat;
use crate::stats::Live;
use crate::tiles::{Compose, FullFrames, Layout, NO_TILE};

/// The shortest time between two pictures handed to the window.
const SHOW_EVERY: Duration = Duration::from_millis(33);

/// The rate a recording of the mosaic is made at.
pub const RECORD_FPS: f64 = 30.0;

/// The span of frame times a tile's rate is measured over.
const RATE_WINDOW: f64 = 1.0;

/// The rate of an input's frames: frames over the span of their own timestamps in the last
/// `RATE_WINDOW` of them (a live input's are its arrival times; a file's, its frames' times),
/// so a file of 30 fps reads 30 however its frames bunch up on their way here. (The mean of
/// inverse arrival intervals, as before, said 38648 fps for such a file: a burst's intervals
/// are microseconds.) A frame without a timestamp is timed by its arrival.
#[derive(Default)]
struct Rate {
    times: VecDeque<f64>,
    /// When the last frame came: an input that stopped reads 0 after `RATE_WINDOW`.
    last_at: Option<Instant>,
    /// The arrival clock's zero, for frames without a timestamp.
    zero: Option<Instant>,
}

impl Rate {
    /// A frame of timestamp `pts` (seconds) came at `at`.
    fn arrived(&mut self, pts: Option<f64>, at: Instant) {
        let t = pts.unwrap_or_else(|| {
            at.duration_since(*self.zero.get_or_insert(at))
                .as_secs_f64()
        });
        // Times that go back (a seek, a loop, a reconnect) start the count again.
        if self.times.back().is_some_and(|&last| t < last) {
            self.times.clear();
        }
        self.times.push_back(t);
        while self
            .times
            .front()
            .is_some_and(|&first| t - first > RATE_WINDOW)
        {
            self.times.pop_front();
        }
        self.last_at = Some(at);
    }

    /// Frames a second; 0 until two frames came a measurable time apart, and once none
    /// came for `RATE_WINDOW` (at `now`).
    fn fps(&self, now: Instant) -> f64 {
        let stale = self
            .last_at
            .is_none_or(|at| now.duration_since(at).as_secs_f64() > RATE_WINDOW);
        match (self.times.front(), self.times.back()) {
            (Some(&first), Some(&last)) if !stale && last - first >= 1e-3 => {
                (self.times.len() - 1) as f64 / (last - first)
            }
            _ => 0.0,
        }
    }
}

/// One tile's input, as the mosaic knows it.
struct Tile {
    /// The input's name for the label.
    name: String,
    /// Its frames seen, and the rate they came at.
    frames: u64,
    rate: Rate,
    dropped: u64,
    /// Why it ended or failed, once it has.
    ended: Option<String>,
    /// "reconnecting …" while its stream is lost.
    state: Option<String>,
    /// Its last frame at full size, kept while it is shown alone.
    full: Option<(FrameSize, Vec<u8>)>,
}

impl Tile {
    /// The tile of input `name`, before its first frame.
    fn named(name: String) -> Self {
        Self {
            name,
            frames: 0,
            rate: Rate::default(),
            dropped: 0,
            ended: None,
            state: None,
            full: None,
        }
    }

    /// The label's two lines (`t`: its tile): the input's index and name; its rate and drops, or why it
    /// is not playing.
    fn label(&self, t: usize) -> (String, String) {
        let first = format!("{t}: {}", self.name.chars().take(48).collect::<String>());
        let second = match (&self.ended, &self.state) {
            (Some(why), _) | (None, Some(why)) => why.chars().take(64).collect::<String>(),
            (None, None) if self.frames == 0 => "waiting for the first frame".into(),
            (None, None) => format!(
                "{:.1} fps  {} dropped",
                self.rate.fps(Instant::now()),
                self.dropped
            ),
        };
        (first, second)
    }

    /// Draws the label of tile `t` on a backdrop at `area`'s top left, each line cut to the
    /// area's width so that no label runs into the next tile.
    fn draw_label(&self, c: &mut Canvas, area: Rect, ink: Ink, t: usize) {
        let (first, second) = self.label(t);
        let fits = area.width.saturating_sub(ink.px(12)) / ink.width("x").max(1);
        let cut = |line: String| line.chars().take(fits).collect::<String>();
        let (first, second) = (cut(first), cut(second));
        let widest = ink.width(&first).max(ink.width(&second));
        c.backdrop(Rect {
            width: widest + ink.px(12),
            height: ink.line() * 2 + ink.px(6),
            ..area
        });
        let white = [240, 240, 240];
        let colour = match &self.ended {
            Some(e) if e.starts_with("failed") => [80, 80, 255],
            _ => white,
        };
        let (x, y) = (area.x + ink.px(6), area.y + ink.px(4));
        c.text(x, y, &first, ink, white);
        c.text(x, y + ink.line(), &second, ink, colour);
    }
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
    layout: Layout,
    /// The backend's last picture (BGR, packed), without labels; None until the first.
    picture: Option<Picture>,
    /// Where this sink tells the backend which input is shown alone (its full frames are
    /// brought down).
    full: FullFrames,
    /// What is handed to the window: `picture` with the labels (packed BGR).
    shown: Vec<u8>,
    /// The input shown alone, with its label.
    alone_shown: Vec<u8>,
    tiles: Vec<Tile>,
    /// Which tile each input of the run fills (inputs that failed to open have a tile and
    /// no `InputId`).
    tile_of: Vec<usize>,
    selected: usize,
    alone: bool,
    dirty: bool,
    last_show: Option<Instant>,
    /// The detector's newest boxes of each input, and what of them is drawn (`--draw`).
    boxes: Option<(crate::detect::seen::Seen, crate::detect::Draw)>,
    /// The grid as inputs join and leave the run (the backend's `Compose`, refreshed).
    regrid: Option<Compose>,
}

impl Mosaic {
    /// A mosaic of `names.len()` tiles laid out by `layout`, shown in `window` where there
    /// is one; `tile_of[k]` is the tile of the run's input `k`; `failed` holds the tiles of
    /// inputs that could not be opened, with why; `full` is shared with the backend, which
    /// composes the picture. `record` (where given) is opened with `with_recording`.
    pub fn new(
        window: Option<Box<dyn Sink>>,
        layout: Layout,
        full: FullFrames,
        names: Vec<String>,
        tile_of: Vec<usize>,
        failed: Vec<(usize, String)>,
    ) -> Self {
        let mut tiles: Vec<Tile> = names.into_iter().map(Tile::named).collect();
        for (t, why) in failed {
            tiles[t].ended = Some(why);
        }
        Self {
            window,
            record: None,
            record_fps: RECORD_FPS,
            started: Instant::now(),
            next_tick: 0,
            layout,
            picture: None,
            full,
            shown: Vec::new(),
            alone_shown: Vec::new(),
            tiles,
            tile_of,
            selected: 0,
            alone: false,
            dirty: true,
            last_show: None,
            boxes: None,
            regrid: None,
        }
    }

    /// The mosaic laid out again as `compose`'s grid changes (inputs join and leave).
    pub fn with_regrid(mut self, compose: Compose) -> Self {
        self.regrid = Some(compose);
        self
    }

    /// Takes a new grid where inputs joined or left: each input keeps its tile's state in
    /// its new tile (one that joined starts anew, named by the figures), those that left
    /// lose theirs, and the mosaic is shown whole.
    fn regrid(&mut self) {
        let Some(compose) = self.regrid.as_mut() else {
            return;
        };
        if !compose.refresh() {
            return;
        }
        let (layout, tile_of) = (compose.layout, compose.tile_of.clone());
        let shown = tile_of.iter().filter(|&&t| t != NO_TILE).count();
        let mut old: Vec<Option<Tile>> = std::mem::take(&mut self.tiles)
            .into_iter()
            .map(Some)
            .collect();
        let mut tiles: Vec<Option<Tile>> = (0..shown).map(|_| None).collect();
        for (k, &t) in tile_of.iter().enumerate().filter(|(_, &t)| t != NO_TILE) {
            let before = self.tile_of.get(k).copied().filter(|&o| o != NO_TILE);
            let tile = before.and_then(|o| old.get_mut(o)?.take());
            tiles[t] = Some(tile.unwrap_or_else(|| Tile::named(String::new())));
        }
        self.tiles = tiles
            .into_iter()
            .map(|t| t.unwrap_or_else(|| Tile::named(String::new())))
            .collect();
        if self.tiles.is_empty() {
            self.tiles.push(Tile::named("no input".into()));
        }
        self.layout = layout;
        self.tile_of = tile_of;
        self.selected = 0;
        self.alone = false;
        self.dirty = true;
        self.tell_backend();
    }

    /// The mosaic with each input's newest boxes drawn into its tile, as `draw` says.
    pub fn with_boxes(
        mut self,
        seen: crate::detect::seen::Seen,
        draw: crate::detect::Draw,
    ) -> Self {
        self.boxes = (draw != crate::detect::Draw::None).then_some((seen, draw));
        self
    }

    /// Draws input `k`'s newest boxes into `area` of `bytes` (a BGR picture of `size`).
    fn draw_boxes(&self, bytes: &mut [u8], size: FrameSize, k: usize, area: Option<Rect>) {
        use crate::paint::boxes::{draw_boxes, Paint};
        let Some((seen, draw)) = &self.boxes else {
            return;
        };
        let Some(found) = seen.last(k) else { return };
        let planes = crate::desc::Planes::packed(PixelFormat::Bgr24, size);
        let Some(mut paint) = Paint::new(bytes, PixelFormat::Bgr24, size, planes) else {
            return;
        };
        let area = match area {
            Some(area) => area,
            None => {
                let Some(&t) = self.tile_of.get(k).filter(|&&t| t != NO_TILE) else {
                    return;
                };
                let a = self.layout.picture_area(t, found.size);
                Rect {
                    x: a.x,
                    y: a.y,
                    width: a.width,
                    height: a.height,
                }
            }
        };
        draw_boxes(&mut paint, area, found.size, &found.boxes, *draw);
    }

    /// The mosaic's size.
    pub fn size(&self) -> FrameSize {
        self.layout.canvas
    }

    /// Tells the backend which input's full frames to bring down: the selected one's while
    /// it is shown alone.
    fn tell_backend(&self) {
        let input = self.tile_of.iter().position(|&t| t == self.selected);
        self.full.show_alone(input.filter(|_| self.alone));
    }

    /// The mosaic with its labels, into `shown`.
    fn compose(&mut self) -> Result<()> {
        let canvas = self.layout.canvas;
        let n = PixelFormat::Bgr24.bytes(canvas);
        self.shown.resize(n, 0);
        match &self.picture {
            Some(p) => {
                crate::ensure_kept!(
                    p.len() >= n,
                    "the backend's mosaic holds {} bytes, the mosaic {n}",
                    p.len()
                );
                self.shown.copy_from_slice(&p[..n]);
            }
            None => self.shown.fill(16),
        }
        let mut shown = std::mem::take(&mut self.shown);
        for k in 0..self.tile_of.len() {
            self.draw_boxes(&mut shown, canvas, k, None);
        }
        self.shown = shown;
        let mut c = Canvas::new(&mut self.shown, canvas).expect("sized above");
        let first_tile = self.layout.tile_area(0);
        let ink = Ink::for_tile(first_tile.width, first_tile.height);
        for (t, tile) in self.tiles.iter().enumerate() {
            let a = self.layout.tile_area(t);
            let area = Rect {
                x: a.x,
                y: a.y,
                width: a.width,
                height: a.height,
            };
            if tile.state.is_some() || tile.ended.as_deref().is_some_and(|e| e != "stopped") {
                c.backdrop(area);
            }
            tile.draw_label(&mut c, area, ink, t);
            if t == self.selected && self.tiles.len() > 1 {
                let inside = Rect {
                    x: area.x + 1,
                    y: area.y + 1,
                    width: area.width.saturating_sub(2),
                    height: area.height.saturating_sub(2),
                };
                c.outline(inside, 2, [0, 220, 255]);
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
        let mut desc = FrameDesc::host(PixelFormat::Bgr24, self.layout.canvas);
        desc.index = tick;
        desc.pts = crate::desc::Timestamp::from_seconds(tick as f64 / self.record_fps);
        let record = self.record.as_mut().expect("checked");
        record.consume(&Frame {
            desc: &desc,
            bytes: &self.shown,
        })
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
                // The input alone, at its own size, labelled as its tile is.
                let size = *size;
                let mut alone = std::mem::take(&mut self.alone_shown);
                alone.clear();
                alone.extend_from_slice(bytes);
                let all = Rect {
                    x: 0,
                    y: 0,
                    width: size.width,
                    height: size.height,
                };
                if let Some(k) = self.tile_of.iter().position(|&t| t == self.selected) {
                    self.draw_boxes(&mut alone, size, k, Some(all));
                }
                self.alone_shown = alone;
                let mut c = Canvas::new(&mut self.alone_shown, size).expect("its own size");
                let ink = Ink::for_tile(size.width, size.height);
                self.tiles[self.selected].draw_label(&mut c, all, ink, self.selected);
                let desc = FrameDesc::host(PixelFormat::Bgr24, size);
                let window = self.window.as_mut().expect("checked");
                window.consume(&Frame {
                    desc: &desc,
                    bytes: &self.alone_shown,
                })?
            }
            _ => {
                self.compose()?;
                let desc = FrameDesc::host(PixelFormat::Bgr24, self.layout.canvas);
                let window = self.window.as_mut().expect("checked");
                window.consume(&Frame {
                    desc: &desc,
                    bytes: &self.shown,
                })?
            }
        };
        Ok(self.keys(flow.merge(recorded)))
    }

    /// Takes the mosaic's own keys out of the window's answer.
    fn keys(&mut self, flow: Flow) -> Flow {
        match flow {
            Flow::NextTile => {
                self.selected = (self.selected + 1) % self.tiles.len();
            }
            Flow::Alone => {
                self.alone = !self.alone;
            }
            Flow::Pick { x, y, double } => {
                if self.alone {
                    // A double click on the input shown alone goes back to the mosaic.
                    self.alone = !double;
                } else if x >= 0 && y >= 0 {
                    if let Some(t) = self
                        .layout
                        .tile_at(x as usize, y as usize, self.tiles.len())
                    {
                        self.selected = t;
                        self.alone = double;
                    }
                }
            }
            other => return other,
        }
        if !self.alone {
            self.tiles.iter_mut().for_each(|t| t.full = None);
        }
        self.dirty = true;
        self.tell_backend();
        Flow::Continue
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
            self.layout.cols,
            self.layout.rows,
            self.layout.tile,
            to.join("; ")
        )
    }
    fn consume(&mut self, frame: &Frame) -> Result<Flow> {
        self.regrid();
        let tile = self.tile_of.get(usize::from(frame.desc.input.0)).copied();
        let t = match tile {
            Some(t) if t != NO_TILE => t,
            // An input that left (or joins later than this grid): nothing of it is shown.
            _ if self.regrid.is_some() => return self.show(false),
            _ => {
                return Err(crate::bug!(
                    "the mosaic has no tile for {:?}",
                    frame.desc.input
                ))
            }
        };
        let (size, bgr) = (frame.size(), super::bgr(frame, "the mosaic")?);
        // Composed on the device, a frame comes without its bytes unless its input is the
        // one shown alone.
        let tile = &mut self.tiles[t];
        tile.frames += 1;
        tile.rate
            .arrived(frame.desc.pts.map(|p| p.seconds()), Instant::now());
        if self.alone && t == self.selected && !bgr.is_empty() {
            let full = tile.full.get_or_insert_with(|| (size, Vec::new()));
            full.0 = size;
            full.1.clear();
            full.1.extend_from_slice(bgr);
        }
        self.dirty = true;
        self.show(false)
    }
    fn composed(&mut self, picture: &Picture) -> Result<()> {
        let n = PixelFormat::Bgr24.bytes(self.layout.canvas);
        crate::ensure_kept!(
            picture.len() >= n,
            "the backend's mosaic holds {} bytes, the mosaic {n}",
            picture.len()
        );
        self.picture = Some(picture.clone());
        self.dirty = true;
        Ok(())
    }
    fn status(&mut self, live: &Live) {
        self.regrid();
        for (k, l) in live.inputs.iter().enumerate() {
            if let Some(&t) = self.tile_of.get(k).filter(|&&t| t != NO_TILE) {
                let tile = &mut self.tiles[t];
                if tile.name.is_empty() {
                    tile.name.clone_from(&l.name);
                }
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
    fn leave(&mut self, input: usize) -> Result<()> {
        // Its tile goes with the next grid; an input that takes its place later gets a
        // tile of its own, started anew.
        if let Some(t) = self
            .tile_of
            .get_mut(input)
            .filter(|_| self.regrid.is_some())
        {
            *t = NO_TILE;
        }
        match self.window.as_mut() {
            Some(w) => w.leave(input),
            None => Ok(()),
        }
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
    /// What the mosaic's recording holds, as its own report and as the mosaic's.
    fn report(&self) -> crate::sink::SinkReport {
        let Some(record) = self.record.as_ref() else {
            return crate::sink::SinkReport::default();
        };
        let mut report = record.report();
        report.mosaic = report.stored.map(|pictures| crate::stats::MosaicRecorded {
            to: record.describe(),
            pictures,
        });
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tiles_rate_is_its_frames_over_their_times_not_inverse_intervals() {
        // A file of 30 fps whose frames come in bursts of ten, 10 µs apart.
        let t0 = Instant::now();
        let mut r = Rate::default();
        for n in 0..90u32 {
            let at = t0
                + Duration::from_millis(u64::from(n / 10) * 333)
                + Duration::from_micros(u64::from(n % 10) * 10);
            r.arrived(Some(f64::from(n) / 30.0), at);
        }
        let now = t0 + Duration::from_millis(2700);
        let fps = r.fps(now);
        assert!((fps - 30.0).abs() < 0.01, "{fps}");
        // Stopped: 0 a window later. Without timestamps: timed by arrival.
        assert_eq!(r.fps(now + Duration::from_secs(2)), 0.0);
        let mut live = Rate::default();
        for n in 0..50u32 {
            live.arrived(None, t0 + Duration::from_millis(u64::from(n) * 40));
        }
        let fps = live.fps(t0 + Duration::from_millis(2000));
        assert!((fps - 25.0).abs() < 0.01, "{fps}");
        // A loop back to the start counts again from there.
        r.arrived(Some(0.0), now);
        r.arrived(Some(1.0 / 30.0), now);
        assert!((r.fps(now) - 30.0).abs() < 0.01);
    }
}
