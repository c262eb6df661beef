//! YOLO as Ultralytics exports it: the picture letterboxed into the model's input (scaled
//! whole, centred on grey 114, RGB, `v / 255`), and one output read in either layout:
//! v8/v11's (N, 4 + C, A) (centre x, centre y, width, height, then each class's score) or
//! v5's (N, A, 5 + C) (the same with an objectness first, a class's score being objectness
//! × its own); or, exported with NMS in the graph, (N, K, 6) (left, top, right, bottom,
//! score, class). Boxes above the score are kept, then NMS per class (IoU `IOU` unless
//! `--detect-nms` says, at most
//! `MAX_DET`), as Ultralytics' `non_max_suppression` does, and mapped back to the picture.
//!
//! Invariant: boxes are clipped to the picture; a class without a name is called by its
//! number.

use super::Detection;
use crate::frame::FrameSize;
use crate::pixel::linear::Placed;
use crate::pixel::lookup::Lookup;

/// The least score a box is kept with, where `--detect-score` does not say.
pub const SCORE: f32 = 0.25;
/// Boxes of one class overlapping a kept one by more than this are dropped.
pub const IOU: f32 = 0.7;
/// At most this many boxes a picture.
pub const MAX_DET: usize = 300;
/// The letterbox's grey.
const PAD: u8 = 114;

/// Which boxes are kept: those scored at least `score`, then NMS at overlap `nms`.
#[derive(Clone, Copy, Debug)]
pub struct Keep {
    /// The least score.
    pub score: f32,
    /// The overlap above which the lower-scored box of a class is dropped.
    pub nms: f32,
}

/// Which layout the output has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// (N, 4 + C, A).
    V8,
    /// (N, A, 5 + C).
    V5,
    /// (N, K, 6), NMS done in the graph.
    Nms,
}

impl Layout {
    /// The layout of an output of `dims`, where it is one.
    pub fn of(dims: &[i64]) -> Option<Self> {
        let [_, a, b] = dims else { return None };
        match (*a, *b) {
            (k, 6) if k == -1 || (1..=1000).contains(&k) => Some(Layout::Nms),
            (a, b) if a > 4 && b > a => Some(Layout::V8),
            (a, b) if b > 5 && a > b => Some(Layout::V5),
            // Dynamic axes (an export with dynamic=True): the anchors' side is free, the
            // other says 4+C (v8) or 5+C (v5).
            (a, -1) if a > 4 => Some(Layout::V8),
            (-1, b) if b > 5 => Some(Layout::V5),
            _ => None,
        }
    }
}

/// Where the picture lies in the model's input: its scale and the padding before it.
#[derive(Clone, Copy, Debug)]
pub struct Letterbox {
    scale: f32,
    left: f32,
    top: f32,
}

/// Where a packed BGR picture of `size` lies letterboxed into the model's `fed` input
/// (module doc): scaled whole to the nearest pixel, centred as Ultralytics' `LetterBox`
/// centres it, on grey.
pub fn letterbox(size: FrameSize, fed: FrameSize) -> (Placed, Letterbox) {
    let scale = (fed.width as f32 / size.width as f32).min(fed.height as f32 / size.height as f32);
    let (w, h) = (
        ((size.width as f32 * scale).round() as usize).clamp(1, fed.width),
        ((size.height as f32 * scale).round() as usize).clamp(1, fed.height),
    );
    let (dw, dh) = ((fed.width - w) as f32 / 2.0, (fed.height - h) as f32 / 2.0);
    let (left, top) = ((dw - 0.1).round() as usize, (dh - 0.1).round() as usize);
    let placed = Placed {
        canvas: fed,
        scaled: FrameSize::new(w, h),
        at: (left, top),
        pad: PAD,
    };
    let lb = Letterbox {
        scale,
        left: left as f32,
        top: top as f32,
    };
    (placed, lb)
}

/// How the letterboxed picture is fed: RGB planes of `v / 255`.
pub fn lookup() -> Lookup {
    Lookup::planes(|_, v| (f32::from(v) / 255.0).to_ne_bytes())
}

/// The boxes of one picture's output `data` (of `dims`, in `layout`), above `score`, NMS'd
/// and mapped to a `picture` letterboxed as `lb`; classes named by `names`.
pub fn boxes(
    (data, dims, layout): (&[f32], &[usize], Layout),
    lb: Letterbox,
    picture: FrameSize,
    keep: Keep,
    names: &[String],
) -> Vec<Detection> {
    let score = keep.score;
    let (a, b) = (dims[1], dims[2]);
    let mut found: Vec<(usize, f32, [f32; 4])> = Vec::new();
    let corners =
        |cx: f32, cy: f32, w: f32, h: f32| [cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0];
    match layout {
        Layout::V8 => {
            // (4 + C, A): attribute k of anchor i at k * A + i.
            let at = |k: usize, i: usize| data[k * b + i];
            for i in 0..b {
                let best = (4..a).max_by(|&p, &q| at(p, i).total_cmp(&at(q, i)));
                let Some(k) = best else { continue };
                if at(k, i) >= score {
                    let r = corners(at(0, i), at(1, i), at(2, i), at(3, i));
                    found.push((k - 4, at(k, i), r));
                }
            }
        }
        Layout::V5 => {
            for row in data.chunks_exact(b).take(a) {
                let obj = row[4];
                let best = (5..b).max_by(|&p, &q| row[p].total_cmp(&row[q]));
                let Some(k) = best else { continue };
                let s = obj * row[k];
                if s >= score {
                    found.push((k - 5, s, corners(row[0], row[1], row[2], row[3])));
                }
            }
        }
        Layout::Nms => {
            for row in data.chunks_exact(b).take(a) {
                if row[4] >= score {
                    found.push((
                        row[5].max(0.0) as usize,
                        row[4],
                        [row[0], row[1], row[2], row[3]],
                    ));
                }
            }
        }
    }
    let kept = match layout {
        Layout::Nms => found,
        _ => nms(found, keep.nms),
    };
    kept.into_iter()
        .take(MAX_DET)
        .map(|(class, s, r)| {
            let map =
                |v: f32, pad: f32, side: usize| ((v - pad) / lb.scale).clamp(0.0, side as f32);
            Detection {
                label: names
                    .get(class)
                    .filter(|n| !n.is_empty())
                    .cloned()
                    .unwrap_or_else(|| class.to_string()),
                score: s,
                rect: [
                    map(r[0], lb.left, picture.width),
                    map(r[1], lb.top, picture.height),
                    map(r[2], lb.left, picture.width),
                    map(r[3], lb.top, picture.height),
                ],
                track: None,
            }
        })
        .collect()
}

/// Greedy NMS per class at overlap `over`, highest score first (module doc).
pub fn nms(mut boxes: Vec<(usize, f32, [f32; 4])>, over: f32) -> Vec<(usize, f32, [f32; 4])> {
    boxes.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut kept: Vec<(usize, f32, [f32; 4])> = Vec::new();
    for b in boxes {
        if kept.len() >= MAX_DET {
            break;
        }
        if !kept.iter().any(|k| k.0 == b.0 && iou(&k.2, &b.2) > over) {
            kept.push(b);
        }
    }
    kept
}

/// Intersection over union of two [left, top, right, bottom] boxes.
pub fn iou(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = w * h;
    let area = |r: &[f32; 4]| (r[2] - r[0]).max(0.0) * (r[3] - r[1]).max(0.0);
    let union = area(a) + area(b) - inter;
    if union <= 0.0 {
        0.0
    } else {
        inter / union
    }
}

/// Class names from Ultralytics' `names` metadata (`{0: 'person', 1: 'bicycle', …}`), or a
/// labels file's lines.
pub fn names_of(meta: &str) -> Vec<String> {
    let body = meta.trim().trim_start_matches('{').trim_end_matches('}');
    let mut out: Vec<(usize, String)> = Vec::new();
    for part in split_top(body) {
        let Some((k, v)) = part.split_once(':') else {
            continue;
        };
        let Ok(k) = k.trim().parse::<usize>() else {
            continue;
        };
        let v = v.trim().trim_matches(|c| c == '\'' || c == '"').to_string();
        out.push((k, v));
    }
    out.sort();
    let n = out.last().map_or(0, |(k, _)| k + 1);
    let mut names: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    for (k, v) in out {
        names[k] = v;
    }
    names
}

/// `s` split at commas outside quotes.
fn split_top(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut quote) = (Vec::new(), String::new(), None);
    for c in s.chars() {
        match (c, quote) {
            ('\'' | '"', None) => {
                quote = Some(c);
                cur.push(c);
            }
            (c, Some(q)) if c == q => {
                quote = None;
                cur.push(c);
            }
            (',', None) => out.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    out.push(cur);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_told_apart_by_their_shapes() {
        assert_eq!(Layout::of(&[1, 84, 8400]), Some(Layout::V8));
        assert_eq!(Layout::of(&[1, 25200, 85]), Some(Layout::V5));
        assert_eq!(Layout::of(&[1, 300, 6]), Some(Layout::Nms));
        // Dynamic axes: nudenet's 320n.onnx declares (batch, 22, anchors).
        assert_eq!(Layout::of(&[-1, 22, -1]), Some(Layout::V8));
        assert_eq!(Layout::of(&[-1, -1, 85]), Some(Layout::V5));
        assert_eq!(Layout::of(&[-1, -1, -1]), None);
        assert_eq!(Layout::of(&[1, 1, 640, 640]), None);
    }

    #[test]
    fn names_come_from_ultralytics_metadata() {
        let names = names_of("{0: 'person', 1: 'bi, cycle', 3: \"car\"}");
        assert_eq!(names, ["person", "bi, cycle", "2", "car"]);
    }

    #[test]
    fn v8_boxes_are_kept_nmsed_and_mapped_back() {
        // Two anchors of class 1 overlapping, one of class 0; 2 classes: (6, 3).
        let (a, b) = (6, 3);
        let mut data = vec![0f32; a * b];
        let mut put = |k: usize, i: usize, v: f32| data[k * b + i] = v;
        for (i, (cx, cy, w, h, c0, c1)) in [
            (100.0, 300.0, 40.0, 40.0, 0.0, 0.9),
            (102.0, 300.0, 40.0, 40.0, 0.0, 0.8),
            (300.0, 200.0, 20.0, 60.0, 0.6, 0.1),
        ]
        .into_iter()
        .enumerate()
        {
            for (k, v) in [cx, cy, w, h, c0, c1].into_iter().enumerate() {
                put(k, i, v);
            }
        }
        // A 1280x720 picture letterboxed into 640x640: scale 0.5, 140 rows above.
        let lb = Letterbox {
            scale: 0.5,
            left: 0.0,
            top: 140.0,
        };
        let names = vec!["person".to_string(), "car".to_string()];
        let found = boxes(
            (&data, &[1, a, b], Layout::V8),
            lb,
            FrameSize::new(1280, 720),
            Keep {
                score: 0.25,
                nms: IOU,
            },
            &names,
        );
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!((found[0].label.as_str(), found[0].score), ("car", 0.9));
        assert_eq!(found[0].rect, [160.0, 280.0, 240.0, 360.0]);
        assert_eq!(found[1].label, "person");
        assert_eq!(found[1].rect, [580.0, 60.0, 620.0, 180.0]);
    }
}
