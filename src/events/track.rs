//! One input's tracker: each box the detector finds gets the id of the object it follows
//! from frame to frame, as ByteTrack does it (Zhang et al., 2022, and Ultralytics'
//! `bytetrack.yaml`): every track's box is moved by its velocity first; boxes scored at
//! least `HIGH` are matched to tracks by overlap (IoU at least `MATCH`, same label, the
//! best pairs first); then the tracks left are matched to the lower boxes (IoU at least
//! `LOW_MATCH`), so that an object whose score dips keeps its id; a high box left over
//! starts a track; a track not matched for `KEEP` detections in a row is ended.
//!
//! Invariants: ids are given once per input, counting from 1, never reused; a box gets at
//! most one id and a track at most one box a frame; what a track carries is the box it was
//! matched to, never its prediction.

use crate::detect::{yolo::iou, Detection};

/// Boxes scored at least this are matched first and may start a track.
pub const HIGH: f32 = 0.25;
/// The least overlap of a high box and a track's predicted box to match.
const MATCH: f32 = 0.2;
/// The least overlap of a lower box and a track left over.
const LOW_MATCH: f32 = 0.5;
/// Detections in a row a track may go unmatched before it ends.
pub const KEEP: u32 = 30;

/// An object followed.
#[derive(Clone, Debug)]
struct Track {
    id: u64,
    label: String,
    rect: [f32; 4],
    /// How far each side moved a detection, smoothed.
    velocity: [f32; 4],
    missed: u32,
}

impl Track {
    /// Where it should be now.
    fn predicted(&self) -> [f32; 4] {
        let steps = (self.missed + 1) as f32;
        std::array::from_fn(|k| self.rect[k] + self.velocity[k] * steps)
    }
}

/// One input's tracks (module doc).
#[derive(Debug, Default)]
pub struct Tracker {
    tracks: Vec<Track>,
    next: u64,
}

impl Tracker {
    /// Gives each of `found` (one detected frame's boxes) its track's id, where it has one;
    /// the ids of the tracks that ended (unmatched for `KEEP` detections).
    pub fn update(&mut self, found: &mut [Detection]) -> Vec<u64> {
        let predicted: Vec<[f32; 4]> = self.tracks.iter().map(Track::predicted).collect();
        let mut taken = vec![false; self.tracks.len()];
        let high: Vec<usize> = (0..found.len())
            .filter(|&i| found[i].score >= HIGH)
            .collect();
        let low: Vec<usize> = (0..found.len())
            .filter(|&i| found[i].score < HIGH)
            .collect();
        let mut matched = self.pair(found, &high, &predicted, &mut taken, MATCH);
        matched.extend(self.pair(found, &low, &predicted, &mut taken, LOW_MATCH));
        for &(t, i) in &matched {
            let track = &mut self.tracks[t];
            let step = (track.missed + 1) as f32;
            for k in 0..4 {
                let moved = (found[i].rect[k] - track.rect[k]) / step;
                track.velocity[k] = 0.5 * track.velocity[k] + 0.5 * moved;
            }
            track.rect = found[i].rect;
            track.missed = 0;
            found[i].track = Some(track.id);
        }
        for (t, track) in self.tracks.iter_mut().enumerate() {
            if !taken[t] {
                track.missed += 1;
            }
        }
        for &i in &high {
            if found[i].track.is_none() {
                self.next += 1;
                found[i].track = Some(self.next);
                self.tracks.push(Track {
                    id: self.next,
                    label: found[i].label.clone(),
                    rect: found[i].rect,
                    velocity: [0.0; 4],
                    missed: 0,
                });
            }
        }
        let ended: Vec<u64> = self
            .tracks
            .iter()
            .filter(|t| t.missed > KEEP)
            .map(|t| t.id)
            .collect();
        self.tracks.retain(|t| t.missed <= KEEP);
        ended
    }

    /// Matches the boxes `which` of `found` to the tracks not `taken`, best overlap first,
    /// each pair overlapping by at least `least`: (track, box) pairs.
    fn pair(
        &self,
        found: &[Detection],
        which: &[usize],
        predicted: &[[f32; 4]],
        taken: &mut [bool],
        least: f32,
    ) -> Vec<(usize, usize)> {
        let mut pairs: Vec<(f32, usize, usize)> = Vec::new();
        for (t, track) in self.tracks.iter().enumerate() {
            for &i in which {
                let o = iou(&predicted[t], &found[i].rect);
                if !taken[t] && track.label == found[i].label && o >= least {
                    pairs.push((o, t, i));
                }
            }
        }
        pairs.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut used = vec![false; found.len()];
        let mut out = Vec::new();
        for (_, t, i) in pairs {
            if !taken[t] && !used[i] {
                taken[t] = true;
                used[i] = true;
                out.push((t, i));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(x: f32, score: f32) -> Detection {
        Detection {
            label: "person".into(),
            score,
            rect: [x, 10.0, x + 40.0, 90.0],
            track: None,
        }
    }

    #[test]
    fn an_object_moving_keeps_its_id_and_a_second_gets_its_own() {
        let mut t = Tracker::default();
        let mut ids = Vec::new();
        for step in 0..20 {
            let x = step as f32 * 15.0;
            let mut found = vec![at(x, 0.9), at(600.0 - x, 0.8)];
            t.update(&mut found);
            ids.push((found[0].track, found[1].track));
        }
        assert!(
            ids.iter().all(|&(a, b)| a == Some(1) && b == Some(2)),
            "{ids:?}"
        );
    }

    #[test]
    fn a_dip_in_score_or_a_missed_detection_keeps_the_id() {
        let mut t = Tracker::default();
        let mut seen = Vec::new();
        for step in 0..12 {
            let x = step as f32 * 10.0;
            let mut found = match step {
                5 => vec![at(x, 0.15)], // low: matched second
                7 | 8 => vec![],        // missed twice
                _ => vec![at(x, 0.9)],
            };
            t.update(&mut found);
            seen.extend(found.iter().map(|d| d.track));
        }
        assert!(seen.iter().all(|&id| id == Some(1)), "{seen:?}");
    }

    #[test]
    fn a_track_unmatched_too_long_ends_and_ids_are_never_reused() {
        let mut t = Tracker::default();
        t.update(&mut [at(0.0, 0.9)]);
        let mut ended = Vec::new();
        for _ in 0..=KEEP {
            ended.extend(t.update(&mut []));
        }
        assert_eq!(ended, [1]);
        let mut again = [at(0.0, 0.9)];
        t.update(&mut again);
        assert_eq!(again[0].track, Some(2));
    }
}
