//! Zones and lines (`--zone NAME:X1,Y1,X2,Y2,X3,Y3… [@INPUT]`, `--line NAME:X1,Y1,X2,Y2
//! [@INPUT]`, or a camera's own in the camera file), in the input's pixels or relative to
//! its picture (every coordinate from 0 to 1: fractions of its width and height, Frigate's
//! habit; placed on the picture's size as it comes), and what a track does with them. A track is where
//! the bottom middle of its box is (where an object stands, as NVRs place it). A zone is a
//! polygon: a track entered it when that point comes inside, left it when it goes out (or
//! the track ends inside), stayed in it once it has been inside `stay` seconds. A line has
//! a direction, the way it is drawn: a track crossed it, from left to right or from right
//! to left (as one walking from its first point to its second sees its sides), when the
//! point's step between two detections cuts it.
//!
//! Invariants: a definition is checked whole before the run (three points at least, two
//! for a line, numbers only, names of letters, digits, `-` and `_`); every enter has its
//! leave; a crossing is counted once a step; nothing here knows where events go.

use std::collections::{BTreeMap, HashMap};

/// Why a zone or a line can't be used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ZoneError {
    /// The text is not `NAME:X,Y,…[@INPUT]`.
    #[error("{flag} '{text}': {why} (NAME:X1,Y1,X2,Y2,… with an optional @INPUT at the end)")]
    Form {
        /// `--zone` or `--line`.
        flag: &'static str,
        /// As given.
        text: String,
        /// What is wrong.
        why: String,
    },
    /// A point outside the input's picture.
    #[error(
        "{flag} {name}: the point ({x}, {y}) is outside input {input}'s {width}x{height} picture"
    )]
    Outside {
        /// `--zone` or `--line`.
        flag: &'static str,
        /// Its name.
        name: String,
        /// The point.
        x: f32,
        /// The point.
        y: f32,
        /// The input.
        input: String,
        /// Its picture's width.
        width: usize,
        /// Its picture's height.
        height: usize,
    },
    /// `@INPUT` names no input of the run.
    #[error("{flag} {name}: no input '{input}' (an input's number or name)")]
    UnknownInput {
        /// `--zone` or `--line`.
        flag: &'static str,
        /// Its name.
        name: String,
        /// As given.
        input: String,
    },
}

/// A zone or a line, as given.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    /// Its name.
    pub name: String,
    /// Its points, in the input's pixels.
    pub points: Vec<(f32, f32)>,
    /// The input it is on (`@INPUT`: a number or a name); every input where not given.
    pub input: Option<String>,
    /// A line (two points, a direction) rather than a zone.
    pub line: bool,
    /// Its points are fractions of the picture's width and height (each from 0 to 1).
    pub relative: bool,
}

impl Shape {
    /// `text` as `--zone` (`line` false) or `--line` takes it.
    pub fn parse(text: &str, line: bool) -> Result<Self, ZoneError> {
        let flag = if line { "--line" } else { "--zone" };
        let bad = |why: &str| ZoneError::Form {
            flag,
            text: text.to_string(),
            why: why.to_string(),
        };
        let (body, input) = match text.rsplit_once('@') {
            Some((b, i)) if !i.is_empty() => (b, Some(i.to_string())),
            Some(_) => return Err(bad("@ names no input")),
            None => (text, None),
        };
        let (name, coords) = body
            .split_once(':')
            .ok_or_else(|| bad("no ':' after the name"))?;
        let named = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !named {
            return Err(bad("a name is letters, digits, '-' and '_'"));
        }
        let numbers: Vec<f32> = coords
            .split(',')
            .map(|v| v.trim().parse::<f32>().ok().filter(|v| v.is_finite()))
            .collect::<Option<_>>()
            .ok_or_else(|| bad("the coordinates are numbers, separated by commas"))?;
        if !numbers.len().is_multiple_of(2) {
            return Err(bad("the coordinates come in pairs"));
        }
        let points: Vec<(f32, f32)> = numbers.chunks(2).map(|p| (p[0], p[1])).collect();
        let relative = numbers.iter().all(|v| (0.0..=1.0).contains(v));
        match (line, points.len()) {
            (true, 2) | (false, 3..) => Ok(Self {
                name: name.to_string(),
                points,
                input,
                line,
                relative,
            }),
            (true, _) => Err(bad("a line has two points")),
            (false, _) => Err(bad("a zone has three points at least")),
        }
    }

    /// Whether it applies to input `k` called `name`.
    pub fn on(&self, k: usize, name: &str) -> bool {
        self.input
            .as_deref()
            .is_none_or(|i| i == name || i.parse::<usize>() == Ok(k))
    }

    /// Checks `@INPUT` against the inputs' `names`.
    pub fn check_input(&self, names: &[String]) -> Result<(), ZoneError> {
        let Some(i) = &self.input else { return Ok(()) };
        let known = names.iter().enumerate().any(|(k, n)| self.on(k, n));
        match known {
            true => Ok(()),
            false => Err(ZoneError::UnknownInput {
                flag: if self.line { "--line" } else { "--zone" },
                name: self.name.clone(),
                input: i.clone(),
            }),
        }
    }

    /// Its points in the pixels of a `size` picture.
    pub fn placed(&self, size: crate::frame::FrameSize) -> Vec<(f32, f32)> {
        match self.relative {
            true => self
                .points
                .iter()
                .map(|&(x, y)| (x * size.width as f32, y * size.height as f32))
                .collect(),
            false => self.points.clone(),
        }
    }

    /// Checks every point is inside input `input`'s `width` × `height` picture (a relative
    /// shape always is).
    pub fn check_inside(&self, input: &str, width: usize, height: usize) -> Result<(), ZoneError> {
        let size = crate::frame::FrameSize::new(width, height);
        for (x, y) in self.placed(size) {
            if x < 0.0 || y < 0.0 || x > width as f32 || y > height as f32 {
                return Err(ZoneError::Outside {
                    flag: if self.line { "--line" } else { "--zone" },
                    name: self.name.clone(),
                    x,
                    y,
                    input: input.to_string(),
                    width,
                    height,
                });
            }
        }
        Ok(())
    }
}

/// Whether `p` is inside the polygon `poly` (even-odd rule).
pub fn inside(poly: &[(f32, f32)], p: (f32, f32)) -> bool {
    let mut odd = false;
    let mut j = poly.len() - 1;
    for i in 0..poly.len() {
        let (a, b) = (poly[i], poly[j]);
        if (a.1 > p.1) != (b.1 > p.1) && p.0 < (b.0 - a.0) * (p.1 - a.1) / (b.1 - a.1) + a.0 {
            odd = !odd;
        }
        j = i;
    }
    odd
}

/// Which side of the line `a`→`b` `p` is on, in picture coordinates (y down): -1 left (as
/// one walking from `a` to `b` sees it), 1 right, 0 on it.
fn side(a: (f32, f32), b: (f32, f32), p: (f32, f32)) -> i8 {
    let cross = (b.0 - a.0) * (p.1 - a.1) - (b.1 - a.1) * (p.0 - a.0);
    match cross {
        c if c > 0.0 => 1,
        c if c < 0.0 => -1,
        _ => 0,
    }
}

/// Whether the step `from`→`to` cuts the segment `a`→`b`, and which way: Some(true) left
/// to right.
pub fn crossing(a: (f32, f32), b: (f32, f32), from: (f32, f32), to: (f32, f32)) -> Option<bool> {
    let (s0, s1) = (side(a, b, from), side(a, b, to));
    if s0 == 0 || s1 == 0 || s0 == s1 {
        return None;
    }
    // The step's ends on either side of the line; the line's ends on either side of the step.
    let (t0, t1) = (side(from, to, a), side(from, to, b));
    (t0 != t1 || t0 == 0).then_some(s0 < 0)
}

/// What a track did.
#[derive(Clone, Debug, PartialEq)]
pub enum Did {
    /// Came into a zone.
    Entered(String),
    /// Went out of a zone (or ended in it).
    Left(String),
    /// Has been in a zone this many seconds (once a stay).
    Stayed(String, f64),
    /// Crossed a line: left to right where true.
    Crossed(String, bool),
}

/// One track's state against the shapes.
#[derive(Debug, Default)]
struct Where {
    at: Option<(f32, f32)>,
    /// The zones it is in, and since when (seconds), and whether its stay was said.
    zones: BTreeMap<String, (f64, bool)>,
}

/// Points in a picture's pixels.
type Points = Vec<(f32, f32)>;

/// One input's zones and lines, and where its tracks are (module doc).
#[derive(Debug, Default)]
pub struct Rules {
    shapes: Vec<Shape>,
    stay: Option<f64>,
    tracks: HashMap<u64, Where>,
    /// Each shape's points in the pixels of the picture size they were placed on last.
    placed: Option<(crate::frame::FrameSize, Vec<Points>)>,
}

impl Rules {
    /// The rules of `shapes` (those on this input), a stay said after `stay` seconds.
    pub fn new(shapes: Vec<Shape>, stay: Option<f64>) -> Self {
        Self {
            shapes,
            stay,
            tracks: HashMap::new(),
            placed: None,
        }
    }

    /// The shapes' points on a `size` picture (placed again when the size changes).
    fn place(&mut self, size: crate::frame::FrameSize) {
        if self.placed.as_ref().is_none_or(|(at, _)| *at != size) {
            let points = self.shapes.iter().map(|s| s.placed(size)).collect();
            self.placed = Some((size, points));
        }
    }

    /// Whether there is any shape.
    pub fn is_empty(&self) -> bool {
        self.shapes.is_empty()
    }

    /// Track `id` is at `p` (in the pixels of a `size` picture) at `seconds`: what it did
    /// since its last place.
    pub fn saw(
        &mut self,
        id: u64,
        (p, size): ((f32, f32), crate::frame::FrameSize),
        seconds: f64,
    ) -> Vec<Did> {
        self.place(size);
        let placed = &self.placed.as_ref().expect("placed above").1;
        let w = self.tracks.entry(id).or_default();
        let mut did = Vec::new();
        for (s, points) in self.shapes.iter().zip(placed) {
            if s.line {
                if let Some(from) = w.at {
                    if let Some(way) = crossing(points[0], points[1], from, p) {
                        did.push(Did::Crossed(s.name.clone(), way));
                    }
                }
                continue;
            }
            let now = inside(points, p);
            match (w.zones.get_mut(&s.name), now) {
                (None, true) => {
                    w.zones.insert(s.name.clone(), (seconds, false));
                    did.push(Did::Entered(s.name.clone()));
                }
                (Some(_), false) => {
                    w.zones.remove(&s.name);
                    did.push(Did::Left(s.name.clone()));
                }
                (Some((since, said)), true) => {
                    if let Some(stay) = self.stay {
                        if !*said && seconds - *since >= stay {
                            *said = true;
                            did.push(Did::Stayed(s.name.clone(), seconds - *since));
                        }
                    }
                }
                (None, false) => {}
            }
        }
        w.at = Some(p);
        did
    }

    /// Track `id` ended: it leaves every zone it was in.
    pub fn ended(&mut self, id: u64) -> Vec<Did> {
        let Some(w) = self.tracks.remove(&id) else {
            return Vec::new();
        };
        w.zones.into_keys().map(Did::Left).collect()
    }

    /// How many tracks are in each zone now.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        let mut counts: BTreeMap<String, u64> = self
            .shapes
            .iter()
            .filter(|s| !s.line)
            .map(|s| (s.name.clone(), 0))
            .collect();
        for w in self.tracks.values() {
            for z in w.zones.keys() {
                *counts.entry(z.clone()).or_default() += 1;
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_are_read_and_bad_ones_refused() {
        let z = Shape::parse("bay:0,0,100,0,100,50@cam-2", false).unwrap();
        assert_eq!(z.points.len(), 3);
        assert_eq!(z.input.as_deref(), Some("cam-2"));
        let l = Shape::parse("door:10,0,10,100", true).unwrap();
        assert!(l.line && l.input.is_none());
        for (text, line) in [
            ("bay:0,0,1,1", false),
            ("door:1,2,3", true),
            ("door:1,2,3,4,5,6", true),
            ("bad name:1,2,3,4", true),
            ("x:1,a,3,4", true),
            ("x1,2,3,4", true),
            ("x:1,2,3,4@", true),
        ] {
            assert!(Shape::parse(text, line).is_err(), "{text}");
        }
        let names = ["a".to_string(), "cam-2".to_string()];
        assert!(z.check_input(&names).is_ok());
        assert!(Shape::parse("b:0,0,1,0,1,1@7", false)
            .unwrap()
            .check_input(&names)
            .is_err());
        assert!(z.check_inside("cam-2", 100, 50).is_ok());
        assert!(z.check_inside("cam-2", 99, 50).is_err());
    }

    #[test]
    fn a_crossing_has_the_way_it_was_crossed() {
        // A line drawn downwards: walking along it, its left is the picture's right.
        let (a, b) = ((50.0, 0.0), (50.0, 100.0));
        assert_eq!(crossing(a, b, (60.0, 50.0), (40.0, 50.0)), Some(true));
        assert_eq!(crossing(a, b, (40.0, 50.0), (60.0, 50.0)), Some(false));
        assert_eq!(
            crossing(a, b, (40.0, 150.0), (60.0, 150.0)),
            None,
            "past its end"
        );
        assert_eq!(crossing(a, b, (40.0, 50.0), (45.0, 50.0)), None);
    }

    const SIZE: crate::frame::FrameSize = crate::frame::FrameSize {
        width: 200,
        height: 100,
    };

    #[test]
    fn a_track_enters_stays_and_leaves_a_zone_once_each() {
        // The same zone in pixels and relative to a 200x100 picture.
        for zone in ["bay:0,0,100,0,100,100,0,100", "bay:0,0,0.5,0,0.5,1,0,1"] {
            enters_stays_and_leaves(Shape::parse(zone, false).unwrap());
        }
    }

    fn enters_stays_and_leaves(zone: Shape) {
        let mut r = Rules::new(vec![zone], Some(2.0));
        let mut all = Vec::new();
        for (k, x) in [-20.0, 10.0, 30.0, 50.0, 70.0, 120.0].iter().enumerate() {
            all.extend(r.saw(1, ((*x, 50.0), SIZE), k as f64));
        }
        assert_eq!(
            all,
            [
                Did::Entered("bay".into()),
                Did::Stayed("bay".into(), 2.0),
                Did::Left("bay".into())
            ]
        );
        r.saw(2, ((50.0, 50.0), SIZE), 6.0);
        assert_eq!(r.counts()["bay"], 1);
        assert_eq!(r.ended(2), [Did::Left("bay".into())]);
        assert_eq!(r.counts()["bay"], 0);
    }
}
