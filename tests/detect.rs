//! `--detect`: PaddleOCR's PP-OCRv4 text detector (the model inside PyPI's
//! rapidocr-onnxruntime, which scripts/setup.sh installs with ONNX Runtime under
//! target/ort) finds the words framepipe's own `text:` filter burns into a clip, at their
//! places and nowhere else; its boxes equal rapidocr's own detection of the same frames; a
//! model that can't be used, or a missing ONNX Runtime, is one line and exit 1.
#![cfg(feature = "ffmpeg")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::run::{bin, framepipe, require, stderr, TempDir};

/// The project's copy of the detector (scripts/setup.sh puts it there).
pub fn model() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ort/ch_PP-OCRv4_det_infer.onnx");
    assert!(
        p.is_file(),
        "{} is missing: run scripts/test.sh (it installs it)",
        p.display()
    );
    p
}

/// The words burned in: text, left, top, glyph size (8 glyph pixels of size/8 each).
const WORDS: &[(&str, usize, usize, usize)] = &[
    ("FRAMEPIPE", 80, 90, 56),
    ("CAMERA", 640, 330, 48),
    ("GATE", 240, 560, 64),
];

fn iou(a: [f64; 4], b: [f64; 4]) -> f64 {
    let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = w * h;
    let area = |r: [f64; 4]| (r[2] - r[0]) * (r[3] - r[1]);
    inter / (area(a) + area(b) - inter)
}

fn boxes_of(line: &serde_json::Value) -> Vec<[f64; 4]> {
    line["detections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let b = d["box"].as_array().unwrap();
            [0, 1, 2, 3].map(|i| b[i].as_f64().unwrap())
        })
        .collect()
}

#[test]
fn the_text_detector_finds_burned_words_where_they_are_as_rapidocr_does() {
    require(&["ffmpeg"]);
    let model = model();
    let dir = TempDir::new("detect");
    let clip = dir.join("words.mp4");
    let chain: Vec<String> = WORDS
        .iter()
        .map(|(t, x, y, s)| format!("text:{t},x={x},y={y},size={s}"))
        .collect();
    let made = framepipe(
        &[
            "-i",
            "pattern:1280x720:25",
            "--frames",
            "50",
            "-f",
            &chain.join(","),
            "-o",
            dir.join("words.mp4").to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert!(made.status.success(), "{}", stderr(&made));
    let jsonl = dir.join("det.jsonl");
    let run = framepipe(
        &[
            "-i",
            clip.to_str().unwrap(),
            "--detect",
            model.to_str().unwrap(),
            "--detect-fps",
            "5",
            "--detections",
            jsonl.to_str().unwrap(),
        ],
        Duration::from_secs(300),
    );
    assert!(run.status.success(), "{}", stderr(&run));
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // 2 s at 5 detections a second.
    assert_eq!(lines.len(), 10, "{lines:?}");
    let truth: Vec<[f64; 4]> = WORDS
        .iter()
        .map(|(t, x, y, s)| {
            let (x, y, s) = (*x as f64, *y as f64, *s as f64);
            [x, y, x + t.len() as f64 * s, y + s]
        })
        .collect();
    for line in &lines {
        let found = boxes_of(line);
        for (w, want) in WORDS.iter().zip(&truth) {
            let best = found.iter().map(|b| iou(*b, *want)).fold(0.0, f64::max);
            assert!(best >= 0.7, "{} found at IoU {best:.2}: {line}", w.0);
        }
        for b in &found {
            let best = truth.iter().map(|t| iou(*b, *t)).fold(0.0, f64::max);
            assert!(best >= 0.5, "a box where there is no text: {b:?} in {line}");
        }
    }
    // Two inputs: their due frames go through the model in batches, with the same boxes.
    let jsonl2 = dir.join("det2.jsonl");
    let both = framepipe(
        &[
            "-i",
            clip.to_str().unwrap(),
            "-i",
            clip.to_str().unwrap(),
            "--detect",
            model.to_str().unwrap(),
            "--detect-fps",
            "5",
            "--detections",
            jsonl2.to_str().unwrap(),
        ],
        Duration::from_secs(300),
    );
    let said = stderr(&both);
    assert!(both.status.success(), "{said}");
    let batched = said
        .split("detection: ran on 20 frames in ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no count of inferences: {said}"));
    assert!(batched < 20, "no batch of two: {said}");
    let text2 = std::fs::read_to_string(&jsonl2).unwrap();
    for input in [0, 1] {
        let theirs: Vec<serde_json::Value> = text2
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|l| l["input"] == input)
            .collect();
        assert_eq!(theirs.len(), lines.len(), "input {input}");
        for (one, batched) in lines.iter().zip(&theirs) {
            assert_eq!(one["frame"], batched["frame"]);
            let (a, b) = (boxes_of(one), boxes_of(batched));
            assert_eq!(a.len(), b.len(), "{one}\n{batched}");
            for r in &a {
                let best = b.iter().map(|x| iou(*x, *r)).fold(0.0, f64::max);
                assert!(best >= 0.99, "alone {r:?}, batched {b:?}");
            }
        }
    }
    // rapidocr's own detection of the same frames (decoded to BGR by ffmpeg).
    let frames: Vec<u64> = lines
        .iter()
        .map(|l| l["frame"].as_u64().unwrap())
        .take(3)
        .collect();
    let mut pngs = Vec::new();
    for n in &frames {
        let png = dir.join(&format!("f{n}.png"));
        let out = Command::new("ffmpeg")
            .args(["-v", "error", "-i"])
            .arg(&clip)
            .args(["-vf", &format!("select=eq(n\\,{n})"), "-frames:v", "1"])
            .arg(&png)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        pngs.push(png);
    }
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ortvenv/bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/rapidocr_det.py");
    let theirs = Command::new(&python)
        .arg(&script)
        .args(&pngs)
        .output()
        .unwrap();
    assert!(theirs.status.success(), "rapidocr: {}", stderr(&theirs));
    for (line, reference) in lines
        .iter()
        .zip(String::from_utf8_lossy(&theirs.stdout).lines())
    {
        let reference: Vec<[f64; 4]> = serde_json::from_str(reference).unwrap();
        let ours = boxes_of(line);
        assert_eq!(
            ours.len(),
            reference.len(),
            "ours {ours:?}, rapidocr's {reference:?}"
        );
        for r in &reference {
            let best = ours.iter().map(|b| iou(*b, *r)).fold(0.0, f64::max);
            assert!(
                best >= 0.95,
                "rapidocr's {r:?} matched at IoU {best:.3}: ours {ours:?}"
            );
        }
    }
}

#[test]
fn a_model_or_a_runtime_that_cannot_be_used_is_one_line() {
    let model = model();
    let dir = TempDir::new("detect-bad");
    let not_onnx = dir.join("model.onnx");
    std::fs::write(&not_onnx, b"this is not a model").unwrap();
    let cls = model
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("ortvenv/lib/python3.11/site-packages/rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx");
    let mut cases = vec![
        (not_onnx.clone(), None, "not an ONNX model"),
        (dir.join("absent.onnx"), None, "no such model file"),
        (
            model.clone(),
            Some("/nonexistent/libonnxruntime.so"),
            "not a loadable ONNX Runtime",
        ),
    ];
    if cls.is_file() {
        // A classifier: its (N, 2) output is no detector's.
        cases.push((cls, None, "not a layout framepipe reads"));
    }
    for (m, ort, says) in cases {
        let mut cmd = Command::new(bin());
        cmd.args([
            "-i",
            "pattern:320x240:25",
            "--frames",
            "5",
            "--headless",
            "--detect",
        ])
        .arg(&m);
        if let Some(ort) = ort {
            cmd.env("ORT_DYLIB_PATH", ort);
        }
        let out = cmd.output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{}: {err}", m.display());
        assert!(err.contains(says), "{}: {err}", m.display());
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    // A provider this ONNX Runtime (PyPI's CPU wheel) does not offer.
    for provider in ["cuda", "tensorrt"] {
        let out = Command::new(bin())
            .args(["-i", "pattern:320x240:25", "--frames", "5", "--headless"])
            .arg("--detect")
            .arg(&model)
            .args(["--detect-provider", provider])
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{provider}: {err}");
        assert!(err.contains("does not offer it (it offers CPU"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

/// A model in Ultralytics' `layout` (v8, v5 or nms) of known output, made by
/// tests/support/yolo_model.py with the onnx package, fed `side`×`side` pictures.
fn yolo_model(dir: &TempDir, layout: &str) -> PathBuf {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ortvenv/bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/yolo_model.py");
    let out = dir.join(&format!("yolo-{layout}.onnx"));
    let made = Command::new(python)
        .arg(script)
        .arg(&out)
        .args([layout, "64"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    out
}

#[test]
fn yolo_outputs_in_every_layout_are_decoded_as_ultralytics_does() {
    model();
    let dir = TempDir::new("detect-yolo");
    // The model's boxes (its own 64x64 input): a person, a second one NMS drops (IoU over
    // 0.7, lower score), a car, and one under the score; names from its metadata.
    let person = [12.0, 12.0, 28.0, 28.0];
    let car = [39.0, 30.0, 49.0, 50.0];
    // v8dyn: v8 exported with dynamic axes (issue 79), read at its `imgsz`.
    for layout in ["v8", "v8dyn", "v5", "nms"] {
        let m = yolo_model(&dir, layout);
        for (size, gain, pad) in [("128x128", 0.5, (0.0, 0.0)), ("256x128", 0.25, (0.0, 16.0))] {
            let jsonl = dir.join(&format!("{layout}-{size}.jsonl"));
            // A file: every frame of it is detected (a live input's may be skipped).
            let clip = dir.join(&format!("{size}.mp4"));
            if !clip.exists() {
                let source = format!("testsrc2=s={size}:r=25:d=0.08");
                crate::common::run::ffmpeg_made(&clip, &[&source], &["-c:v", "libx264"]);
            }
            let run = framepipe(
                &[
                    "-i",
                    clip.to_str().unwrap(),
                    "--detect",
                    m.to_str().unwrap(),
                    "--detections",
                    jsonl.to_str().unwrap(),
                ],
                Duration::from_secs(60),
            );
            assert!(run.status.success(), "{layout}: {}", stderr(&run));
            let text = std::fs::read_to_string(&jsonl).unwrap();
            let line: serde_json::Value =
                serde_json::from_str(text.lines().next().unwrap()).unwrap();
            let (w, h) = (
                line["width"].as_f64().unwrap(),
                line["height"].as_f64().unwrap(),
            );
            // Ultralytics' scale_boxes: the padding taken off, divided by the gain, clipped.
            let back = |r: [f64; 4]| {
                [
                    ((r[0] - pad.0) / gain).clamp(0.0, w),
                    ((r[1] - pad.1) / gain).clamp(0.0, h),
                    ((r[2] - pad.0) / gain).clamp(0.0, w),
                    ((r[3] - pad.1) / gain).clamp(0.0, h),
                ]
            };
            let found = &line["detections"];
            let labels: Vec<&str> = found
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["label"].as_str().unwrap())
                .collect();
            assert_eq!(labels, ["person", "car"], "{layout} {size}: {line}");
            assert_eq!(
                boxes_of(&line),
                [back(person), back(car)],
                "{layout} {size}: {line}"
            );
            assert_eq!(found[0]["score"], 0.9);
            assert_eq!(text.lines().count(), 2, "one line a frame");
        }
    }
}

/// Raw frames of `clip` with `model`'s boxes drawn as `draw` says, in `format`.
fn drawn(clip: &Path, model: &Path, draw: &str, format: &str) -> Vec<u8> {
    let out = Command::new(bin())
        .arg("-i")
        .arg(clip)
        .arg("--detect")
        .arg(model)
        .args(["--draw", draw, "--output-format", format, "-o", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    out.stdout
}

#[test]
fn boxes_are_drawn_where_they_were_found_in_every_frame_of_a_file() {
    model();
    let dir = TempDir::new("detect-draw");
    let m = yolo_model(&dir, "v8");
    let clip = dir.join("128.mp4");
    crate::common::run::ffmpeg_made(
        &clip,
        &["testsrc2=s=128x128:r=25:d=0.2"],
        &["-c:v", "libx264"],
    );
    // The person's box at the model's 64x64 is [12, 12, 28, 28]: [24, 24, 56, 56] here.
    let (w, frame) = (128usize, 128 * 128 * 3);
    let plain = drawn(&clip, &m, "none", "bgr24");
    let boxes = drawn(&clip, &m, "boxes", "bgr24");
    let labels = drawn(&clip, &m, "labels", "bgr24");
    assert_eq!(plain.len(), 5 * frame);
    assert_eq!(boxes.len(), plain.len());
    let px = |v: &[u8], f: usize, x: usize, y: usize| -> [u8; 3] {
        let at = f * frame + (y * w + x) * 3;
        [v[at], v[at + 1], v[at + 2]]
    };
    let edge = px(&boxes, 0, 24, 40);
    for f in 0..5 {
        for (x, y) in [(24, 40), (40, 24), (55, 40), (40, 55)] {
            assert_eq!(
                px(&boxes, f, x, y),
                edge,
                "frame {f}: the outline at ({x}, {y})"
            );
        }
        for (x, y) in [(40, 40), (100, 100), (10, 110)] {
            assert_eq!(
                px(&boxes, f, x, y),
                px(&plain, f, x, y),
                "frame {f}: ({x}, {y}) untouched"
            );
        }
        // The label's tab sits above the box.
        let tab = (10..24).any(|y| px(&labels, f, 30, y) != px(&plain, f, 30, y));
        assert!(tab, "frame {f}: no label above the box");
        assert_eq!(
            px(&boxes, f, 30, 15),
            px(&plain, f, 30, 15),
            "boxes: no label"
        );
    }
    assert_ne!(edge, px(&plain, 0, 24, 40));
    // Into a YUV output (Y4M on standard output), the planes themselves (no trip through
    // BGR): the luma changes on the outline only.
    let plain = drawn(&clip, &m, "none", "i420");
    let boxes = drawn(&clip, &m, "boxes", "i420");
    let first = |v: &[u8]| v.windows(6).position(|s| s == b"FRAME\n").unwrap() + 6;
    let y = |v: &[u8], x: usize, yy: usize| v[first(v) + yy * w + x];
    assert_ne!(y(&boxes, 24, 40), y(&plain, 24, 40));
    assert_eq!(y(&boxes, 40, 40), y(&plain, 40, 40));
    assert_eq!(y(&boxes, 100, 100), y(&plain, 100, 100));
}

#[test]
fn labels_from_a_file_and_the_nms_overlap_are_the_users() {
    model();
    let dir = TempDir::new("detect-labels");
    let m = yolo_model(&dir, "v8");
    let clip = dir.join("128.mp4");
    crate::common::run::ffmpeg_made(
        &clip,
        &["testsrc2=s=128x128:r=25:d=0.04"],
        &["-c:v", "libx264"],
    );
    let labels = dir.join("labels.txt");
    std::fs::write(&labels, "man\nauto\n").unwrap();
    let jsonl = dir.join("det.jsonl");
    // The two people overlap by IoU 0.88: kept both at 0.9.
    let run = framepipe(
        &[
            "-i",
            clip.to_str().unwrap(),
            "--detect",
            m.to_str().unwrap(),
            "--detect-labels",
            labels.to_str().unwrap(),
            "--detect-nms",
            "0.9",
            "--detections",
            jsonl.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert!(run.status.success(), "{}", stderr(&run));
    let line: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(&jsonl)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let found: Vec<&str> = line["detections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["label"].as_str().unwrap())
        .collect();
    assert_eq!(found, ["man", "man", "auto"], "{line}");
    // A labels file that is not there: one line, before the first frame.
    let bad = framepipe(
        &[
            "-i",
            clip.to_str().unwrap(),
            "--detect",
            m.to_str().unwrap(),
            "--detect-labels",
            "/nonexistent/labels.txt",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).contains("--detect-labels '/nonexistent/labels.txt': no such file"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn eight_live_cameras_with_detection_drop_no_frame_and_metrics_count_the_boxes() {
    use crate::common::run::{free_port, try_http, wait_until_it_catches, wait_with_deadline};
    model();
    let dir = TempDir::new("detect-live");
    let m = yolo_model(&dir, "v8");
    let port = free_port();
    let summary = dir.join("s.json");
    let mut args: Vec<String> = Vec::new();
    for _ in 0..8 {
        args.extend(["-i".into(), "pattern:320x240:25".into()]);
    }
    args.extend(
        [
            "--headless",
            "--detect",
            m.to_str().unwrap(),
            "--serve",
            &port.to_string(),
            "--summary-json",
            summary.to_str().unwrap(),
        ]
        .map(String::from),
    );
    let log = dir.join("run.log");
    let child = Command::new(bin())
        .args(&args)
        .env_remove("DISPLAY")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    wait_until_it_catches(child.id(), libc::SIGINT);
    // Every camera's boxes counted by label, and the detector's figures, in /metrics.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut metrics = String::new();
    let counted = |m: &str| {
        m.lines()
            .filter(|l| {
                l.starts_with("framepipe_detections_total{") && l.contains("label=\"person\"")
            })
            .filter(|l| !l.ends_with(" 0"))
            .count()
    };
    while std::time::Instant::now() < deadline {
        if let Some((200, body)) = try_http(port, "GET", "/metrics", "") {
            metrics = String::from_utf8_lossy(&body).into_owned();
            if counted(&metrics) == 8 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::sleep(Duration::from_secs(2));
    crate::common::run::interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(30), "eight cameras");
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(out.status.success(), "{said}");
    assert_eq!(counted(&metrics), 8, "{metrics}");
    for family in [
        "framepipe_detect_frames_total{",
        "framepipe_detect_skipped_total{",
        "framepipe_detect_inference_seconds{",
        "framepipe_detect_batch_size{",
    ] {
        assert_eq!(
            metrics.lines().filter(|l| l.starts_with(family)).count(),
            8,
            "{family}: {metrics}"
        );
    }
    // No video frame dropped: a busy detector skips detections, never frames.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    assert_eq!(json["frames"]["dropped"], 0, "{json}");
    assert!(
        json["frames"]["captured"].as_u64().unwrap() > 8 * 25,
        "{json}"
    );
}

#[test]
fn ssd_outputs_in_every_layout_are_decoded_as_their_references_do() {
    model();
    let dir = TempDir::new("detect-ssd");
    let clip = dir.join("128.mp4");
    crate::common::run::ffmpeg_made(
        &clip,
        &["testsrc2=s=128x128:r=25:d=0.04"],
        &["-c:v", "libx264"],
    );
    let labels = dir.join("coco.txt");
    std::fs::write(&labels, "???\nperson\nbicycle\ncar\n").unwrap();
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ortvenv/bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/ssd_model.py");
    let s = 128.0;
    let px = 128.0 / 300.0;
    // What each reference keeps (see ssd_model.py), in the 128x128 picture's pixels.
    type Found = (&'static str, f64, [f64; 4]);
    let cases: [(&str, Vec<Found>); 3] = [
        // TensorFlow: [top, left, bottom, right] normalized, classes from 1, the count's rows.
        (
            "tf",
            vec![
                ("person", 0.9, [0.2 * s, 0.1 * s, 0.4 * s, 0.5 * s]),
                ("car", 0.7, [0.5 * s, 0.5 * s, 0.8 * s, 0.9 * s]),
            ],
        ),
        // Final boxes in the input's pixels, int64 labels.
        (
            "final",
            vec![
                (
                    "person",
                    0.8,
                    [30.0 * px, 60.0 * px, 120.0 * px, 150.0 * px],
                ),
                (
                    "bicycle",
                    0.6,
                    [150.0 * px, 150.0 * px, 270.0 * px, 240.0 * px],
                ),
            ],
        ),
        // pytorch-ssd's predictor: per class but the background, NMS at 0.45, by score.
        (
            "raw",
            vec![
                ("person", 0.9, [0.1 * s, 0.1 * s, 0.3 * s, 0.5 * s]),
                ("bicycle", 0.7, [0.5 * s, 0.5 * s, 0.9 * s, 0.7 * s]),
                ("person", 0.6, [0.6 * s, 0.0, 0.8 * s, 0.2 * s]),
                ("bicycle", 0.55, [0.6 * s, 0.0, 0.8 * s, 0.2 * s]),
            ],
        ),
    ];
    for (layout, want) in cases {
        let m = dir.join(&format!("ssd-{layout}.onnx"));
        let made = Command::new(&python)
            .arg(&script)
            .arg(&m)
            .arg(layout)
            .output()
            .unwrap();
        assert!(made.status.success(), "{}", stderr(&made));
        let jsonl = dir.join(&format!("{layout}.jsonl"));
        let run = framepipe(
            &[
                "-i",
                clip.to_str().unwrap(),
                "--detect",
                m.to_str().unwrap(),
                "--detect-labels",
                labels.to_str().unwrap(),
                "--detections",
                jsonl.to_str().unwrap(),
            ],
            Duration::from_secs(60),
        );
        assert!(run.status.success(), "{layout}: {}", stderr(&run));
        let text = std::fs::read_to_string(&jsonl).unwrap();
        let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        let found = line["detections"].as_array().unwrap();
        assert_eq!(found.len(), want.len(), "{layout}: {line}");
        for (d, (label, score, rect)) in found.iter().zip(&want) {
            assert_eq!(d["label"], *label, "{layout}: {line}");
            assert!(
                (d["score"].as_f64().unwrap() - score).abs() < 1e-4,
                "{layout}: {line}"
            );
            let b = d["box"].as_array().unwrap();
            for (got, want) in b.iter().zip(rect) {
                assert!(
                    (got.as_f64().unwrap() - want).abs() < 1e-3,
                    "{layout}: {line}"
                );
            }
        }
    }
}

#[test]
fn each_recorded_segment_has_its_frames_detections_beside_it() {
    model();
    let dir = TempDir::new("detect-sidecar");
    let m = yolo_model(&dir, "v8");
    let clip = dir.join("cam.mp4");
    crate::common::run::ffmpeg_made(
        &clip,
        &["testsrc2=s=128x128:r=25:d=4"],
        &[
            "-c:v",
            "libx264",
            "-g",
            "25",
            "-keyint_min",
            "25",
            "-bf",
            "2",
        ],
    );
    let jsonl = dir.join("all.jsonl");
    let run = crate::common::run::framepipe_in(
        dir.path(),
        &[
            "-i",
            clip.to_str().unwrap(),
            "--detect",
            m.to_str().unwrap(),
            "--detections",
            jsonl.to_str().unwrap(),
            "--record",
            "seg-{seg}.mkv",
            "--segment",
            "1",
        ],
        Duration::from_secs(60),
    );
    assert!(run.status.success(), "{}", stderr(&run));
    let all = std::fs::read_to_string(&jsonl).unwrap();
    assert_eq!(all.lines().count(), 100);
    let mut segments = crate::common::run::files_starting(dir.path(), "seg-");
    segments.retain(|p| p.extension().is_some_and(|e| e == "mkv"));
    segments.sort();
    assert_eq!(segments.len(), 4, "{segments:?}");
    let mut beside = Vec::new();
    for (k, seg) in segments.iter().enumerate() {
        let sidecar = PathBuf::from(format!("{}.detections.jsonl", seg.display()));
        let text = std::fs::read_to_string(&sidecar)
            .unwrap_or_else(|e| panic!("{}: {e}", sidecar.display()));
        let frames: Vec<u64> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["frame"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        // Segment k holds the second k: its frames' detections, each once.
        let want: Vec<u64> = (25 * k as u64..25 * (k as u64 + 1)).collect();
        assert_eq!(frames, want, "{}", sidecar.display());
        beside.extend(text.lines().map(String::from));
    }
    assert_eq!(beside, all.lines().map(String::from).collect::<Vec<_>>());
    // Nothing hidden is left behind.
    let left = crate::common::run::files_starting(dir.path(), ".");
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn each_camera_of_an_inputs_file_can_have_its_own_detection() {
    model();
    let dir = TempDir::new("detect-own");
    let m = yolo_model(&dir, "v8");
    let clip = dir.join("cam.mp4");
    crate::common::run::ffmpeg_made(
        &clip,
        &["testsrc2=s=128x128:r=25:d=2"],
        &["-c:v", "libx264"],
    );
    let list = dir.join("cameras.txt");
    let c = clip.display();
    std::fs::write(
        &list,
        format!("gate [detect=off] = {c}\ndock [detect-fps=2] = {c}\n"),
    )
    .unwrap();
    let jsonl = dir.join("det.jsonl");
    let run = framepipe(
        &[
            "--headless",
            "--inputs",
            list.to_str().unwrap(),
            "--detect",
            m.to_str().unwrap(),
        ]
        .into_iter()
        .chain(["--detections", jsonl.to_str().unwrap()])
        .collect::<Vec<_>>(),
        Duration::from_secs(60),
    );
    assert!(run.status.success(), "{}", stderr(&run));
    let seen: Vec<(String, u64)> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|l| {
            (
                l["name"].as_str().unwrap().to_string(),
                l["frame"].as_u64().unwrap(),
            )
        })
        .collect();
    // gate: none; dock: 2 a second of its 2 s.
    let dock = |f: u64| ("dock".to_string(), f);
    assert_eq!(seen, [dock(0), dock(13), dock(26), dock(39)]);
    // A camera asking for detection without a model, a setting that is none: one line.
    std::fs::write(&list, format!("gate [detect=on] = {c}\n")).unwrap();
    let bad = framepipe(
        &["--headless", "--inputs", list.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("'gate' asks for detection, and no --detect MODEL is given"));
    std::fs::write(&list, format!("gate [detect=maybe] = {c}\n")).unwrap();
    let bad = framepipe(
        &[
            "--headless",
            "--inputs",
            list.to_str().unwrap(),
            "--detect",
            m.to_str().unwrap(),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).contains("line 1: 'detect=maybe' is not an input's setting"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn a_camera_that_joins_a_running_wall_is_detected_on_as_its_settings_say() {
    let dir = TempDir::new("detect-joined");
    let m = yolo_model(&dir, "v8");
    std::fs::write(dir.join("wall.txt"), "first = pattern:160x120:25\n").unwrap();
    let port = crate::common::run::free_port();
    let model = m.display().to_string();
    let args = [
        "--backend",
        "cpu",
        "--inputs",
        "wall.txt",
        "--detect",
        &model,
    ];
    let more = ["--detections", "boxes.jsonl", "--detect-fps", "10"];
    let child = crate::common::run::served(dir.path(), port, &[&args[..], &more[..]].concat());
    // Once the run runs (while it starts, a join is answered 503).
    let body = r#"{"name": "second", "source": "pattern:160x120:25", "detect_fps": 4}"#;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, said) = crate::common::run::http_post(port, "/api/inputs", body);
        if status == 201 {
            break;
        }
        assert_eq!(status, 503, "{}", String::from_utf8_lossy(&said));
        assert!(
            std::time::Instant::now() < deadline,
            "the run never took inputs"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let body = r#"{"name": "third", "source": "pattern:160x120:25", "detect": false}"#;
    assert_eq!(
        crate::common::run::http_post(port, "/api/inputs", body).0,
        201
    );
    std::thread::sleep(Duration::from_millis(3000));
    crate::common::run::interrupt(&child);
    let out = crate::common::run::wait_with_deadline(child, Duration::from_secs(10), "joined");
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = std::fs::read_to_string(dir.join("boxes.jsonl")).unwrap();
    let count = |name: &str| {
        lines
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|l| l["name"] == name && !l["detections"].as_array().unwrap().is_empty())
            .count()
    };
    // The second at its own 4 a second for about 3 s; the third not at all.
    let (first, second, third) = (count("first"), count("second"), count("third"));
    assert!(first >= 20, "first: {first}");
    assert!((6..=14).contains(&second), "second: {second}");
    assert_eq!(third, 0, "{lines}");
}

/// `--detect-size` (issue 79): a model whose sides are free is fed at it (its boxes, in the
/// pixels it was fed, come back at that gain: 1 for a 128x128 picture fed at 128x128, where
/// its `imgsz` of 64 gave 0.5); a model that fixes its sides at another size, and PP-OCR's
/// detector (it sizes each picture as it comes), refuse it in one line.
#[test]
fn a_model_with_free_sides_is_fed_at_detect_size_and_others_refuse_it() {
    model();
    let dir = TempDir::new("detect-size");
    let clip = dir.join("128.mp4");
    crate::common::run::ffmpeg_made(
        &clip,
        &["testsrc2=s=128x128:r=25:d=0.08"],
        &["-c:v", "libx264"],
    );
    let run = |m: &Path, size: &str| {
        let jsonl = dir.join("size.jsonl");
        let _ = std::fs::remove_file(&jsonl);
        let args = [
            "--headless",
            "-i",
            clip.to_str().unwrap(),
            "--detect",
            m.to_str().unwrap(),
            "--detect-size",
            size,
            "--detections",
            jsonl.to_str().unwrap(),
        ];
        let run = framepipe(&args, Duration::from_secs(60));
        (run, std::fs::read_to_string(&jsonl).unwrap_or_default())
    };
    let (ok, text) = run(&yolo_model(&dir, "v8dyn"), "128x128");
    assert!(ok.status.success(), "{}", stderr(&ok));
    let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        boxes_of(&line),
        [[12.0, 12.0, 28.0, 28.0], [39.0, 30.0, 49.0, 50.0]],
        "{line}"
    );
    for (m, why) in [
        (yolo_model(&dir, "v8"), "the model fixes its input at 64x64"),
        (model(), "DB text detection sizes each picture as it comes"),
    ] {
        let (refused, _) = run(&m, "128x128");
        let err = stderr(&refused);
        assert_eq!(refused.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!("--detect-size 128x128: {why}")),
            "{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}
