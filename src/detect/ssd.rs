//! SSD-style detectors: boxes, scores and classes as separate outputs. Two layouts:
//!
//! - **final** (TensorFlow's Object Detection API, torchvision-style exports, NMS done in the
//!   graph): boxes (N, K, 4), scores (N, K), classes (N, K), and where there is one, a count
//!   (N) of the rows that hold a box. The boxes are [left, top, right, bottom], or [top,
//!   left, bottom, right] where the output is named as TensorFlow names it
//!   (`detection_boxes`). Rows scored at least the score are kept, as they come.
//! - **raw** (SSD's own head, as `pytorch-ssd` and the ONNX zoo's MobileNet-SSD export it):
//!   boxes (N, A, 4) [left, top, right, bottom] and scores (N, A, C), class 0 the background;
//!   for each other class, the anchors scored at least the score, NMS at `IOU`, then the
//!   highest `MAX_DET` over all classes (`pytorch-ssd`'s `Predictor`).
//!
//! Coordinates are in the model's input, normalized (0 to 1: every value at most
//! `NORMALIZED`) or in its pixels; the picture is stretched to the input (an SSD does not
//! letterbox), RGB, `v / 255` for a float input, as it is for a `uint8` one (TensorFlow's,
//! NHWC).
//!
//! Invariant: boxes are clipped to the picture; a class without a name is called by its
//! number (TensorFlow's COCO classes count from 1: give `--detect-labels` its list).

use super::Detection;
use crate::frame::FrameSize;
use crate::pixel::lookup::Lookup;

/// The least score a box is kept with, where `--detect-score` does not say.
pub const SCORE: f32 = 0.5;
/// Boxes of one class overlapping a kept one by more than this are dropped (raw layout).
pub const IOU: f32 = 0.45;
/// At most this many boxes a picture.
pub const MAX_DET: usize = 200;
/// Coordinates all at most this are taken as normalized.
const NORMALIZED: f32 = 1.5;

/// Which outputs hold what (their places among the model's outputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// NMS done in the graph.
    Final {
        /// Boxes (N, K, 4).
        boxes: usize,
        /// Scores (N, K).
        scores: usize,
        /// Classes (N, K).
        classes: usize,
        /// The count of rows that hold a box (N).
        count: Option<usize>,
        /// The boxes are [top, left, bottom, right].
        yx: bool,
    },
    /// SSD's head: boxes (N, A, 4), scores (N, A, C), class 0 the background.
    Raw {
        /// Boxes.
        boxes: usize,
        /// Scores.
        scores: usize,
    },
}

impl Layout {
    /// The layout of outputs named and shaped as `outputs` are, where it is one.
    pub fn of(outputs: &[(String, Vec<i64>)]) -> Option<Self> {
        let boxes = single(outputs, |_, d| d.len() == 3 && d[2] == 4)?;
        let rows = outputs[boxes].1[1];
        let same = |d: &[i64]| d.len() == 2 && d[1] == rows;
        let pairs: Vec<usize> = (0..outputs.len())
            .filter(|&k| same(&outputs[k].1))
            .collect();
        if let [a, b] = pairs[..] {
            let named = |k: usize, words: &[&str]| {
                let n = outputs[k].0.to_ascii_lowercase();
                words.iter().any(|w| n.contains(w))
            };
            let (scores, classes) = match (named(a, &["class", "label"]), named(b, &["score"])) {
                (true, _) | (_, true) => (b, a),
                _ => (a, b),
            };
            let count = single(outputs, |_, d| d.len() == 1);
            let yx = outputs[boxes].0 == "detection_boxes";
            return Some(Layout::Final {
                boxes,
                scores,
                classes,
                count,
                yx,
            });
        }
        let scores = single(outputs, |k, d| {
            k != boxes && d.len() == 3 && d[1] == rows && d[2] >= 2
        })?;
        (outputs.len() == 2).then_some(Layout::Raw { boxes, scores })
    }
}

/// The one output that `is` says is the one; None where none or several are.
fn single(outputs: &[(String, Vec<i64>)], is: impl Fn(usize, &[i64]) -> bool) -> Option<usize> {
    let mut found = (0..outputs.len()).filter(|&k| is(k, &outputs[k].1));
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// How the model is fed its pictures, stretched to its input (`linear::Placed::whole`): RGB,
/// in planes (NCHW) or pixels (`nhwc`), `v / 255` where `unit` (a float input) else `v`.
pub fn lookup(nhwc: bool, unit: bool) -> Lookup {
    let scale = if unit { 1.0 / 255.0 } else { 1.0 };
    let planes = Lookup::planes(move |_, v| (f32::from(v) * scale).to_ne_bytes());
    match nhwc {
        true => planes.interleaved(),
        false => planes,
    }
}

/// Which boxes are kept, and what they are called.
pub struct Keep<'a> {
    /// The least score.
    pub score: f32,
    /// The NMS overlap (raw layout).
    pub nms: f32,
    /// Class names, by number.
    pub names: &'a [String],
}

/// The boxes in one picture's share of the outputs (`outputs[k]`: values, and
/// dimensions with a batch of one), mapped to a picture of `picture` fed at `fed`.
pub fn boxes(
    outputs: &[(&[f32], &[usize])],
    layout: Layout,
    (fed, picture): (FrameSize, FrameSize),
    keep: &Keep,
) -> Vec<Detection> {
    let (found, yx) = match layout {
        Layout::Final {
            boxes,
            scores,
            classes,
            count,
            yx,
        } => {
            let rows = outputs[scores].0.len();
            let n = count
                .and_then(|c| outputs[c].0.first())
                .map_or(rows, |&c| (c.max(0.0) as usize).min(rows));
            let found = (0..n)
                .filter(|&k| outputs[scores].0[k] >= keep.score)
                .map(|k| {
                    let b = &outputs[boxes].0[k * 4..k * 4 + 4];
                    let class = outputs[classes].0[k].max(0.0) as usize;
                    (class, outputs[scores].0[k], [b[0], b[1], b[2], b[3]])
                })
                .collect();
            (found, yx)
        }
        Layout::Raw { boxes, scores } => (raw(outputs[boxes].0, outputs[scores], keep), false),
    };
    let all = if found.iter().all(|f| f.2.iter().all(|&v| v <= NORMALIZED)) {
        FrameSize::new(1, 1)
    } else {
        fed
    };
    let (sx, sy) = (
        picture.width as f32 / all.width as f32,
        picture.height as f32 / all.height as f32,
    );
    found
        .into_iter()
        .take(MAX_DET)
        .map(|(class, score, b)| {
            let [l, t, r, bo] = if yx { [b[1], b[0], b[3], b[2]] } else { b };
            Detection {
                label: keep
                    .names
                    .get(class)
                    .filter(|n| !n.is_empty())
                    .cloned()
                    .unwrap_or_else(|| class.to_string()),
                score,
                rect: [
                    (l * sx).clamp(0.0, picture.width as f32),
                    (t * sy).clamp(0.0, picture.height as f32),
                    (r * sx).clamp(0.0, picture.width as f32),
                    (bo * sy).clamp(0.0, picture.height as f32),
                ],
                track: None,
            }
        })
        .collect()
}

/// The raw layout's boxes: per class but the background, scored at least the score, NMS;
/// then all classes' by score.
fn raw(
    boxes: &[f32],
    (scores, dims): (&[f32], &[usize]),
    keep: &Keep,
) -> Vec<(usize, f32, [f32; 4])> {
    let (anchors, classes) = (dims[1], dims[2]);
    let mut kept = Vec::new();
    for class in 1..classes {
        let candidates: Vec<(usize, f32, [f32; 4])> = (0..anchors)
            .filter(|&a| scores[a * classes + class] >= keep.score)
            .map(|a| {
                let b = &boxes[a * 4..a * 4 + 4];
                (class, scores[a * classes + class], [b[0], b[1], b[2], b[3]])
            })
            .collect();
        kept.extend(super::yolo::nms(candidates, keep.nms));
    }
    kept.sort_by(|a, b| b.1.total_cmp(&a.1));
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(list: &[(&str, &[i64])]) -> Vec<(String, Vec<i64>)> {
        list.iter()
            .map(|(n, d)| (n.to_string(), d.to_vec()))
            .collect()
    }

    #[test]
    fn layouts_are_read_from_the_outputs() {
        let tf = named(&[
            ("detection_boxes", &[1, 100, 4]),
            ("detection_classes", &[1, 100]),
            ("detection_scores", &[1, 100]),
            ("num_detections", &[1]),
        ]);
        assert_eq!(
            Layout::of(&tf),
            Some(Layout::Final {
                boxes: 0,
                scores: 2,
                classes: 1,
                count: Some(3),
                yx: true
            })
        );
        let raw = named(&[("scores", &[1, 3000, 21]), ("boxes", &[1, 3000, 4])]);
        assert_eq!(
            Layout::of(&raw),
            Some(Layout::Raw {
                boxes: 1,
                scores: 0
            })
        );
        assert_eq!(Layout::of(&named(&[("output0", &[1, 84, 8400])])), None);
    }
}
