//! GStreamer pipelines whose appsink receives YUV (`… ! video/x-raw,format=NV12 ! appsink`):
//! OpenCV 4.6 hands those planes out unconverted; framepipe takes them by the caps' format,
//! at the picture's size, converted exactly as `cvtColor` does (NV12 and I420 of the same
//! frames give the same bytes), close to what GStreamer's own conversion to BGR gives.
#![cfg(feature = "opencv")]

use crate::common;

use std::time::Duration;

use common::run::{framepipe, stderr, TempDir};
use opencv::core::Mat;
use opencv::prelude::*;

fn frames(dir: &TempDir, format: &str) -> Vec<Mat> {
    let pipeline = format!(
        "videotestsrc num-buffers=4 pattern=smpte ! video/x-raw,format={format},width=320,height=240 ! appsink"
    );
    let out = dir
        .join(&format!("{format}/%02d.png"))
        .display()
        .to_string();
    let run = framepipe(
        &["--input", &pipeline, "--headless", "-o", &out],
        Duration::from_secs(60),
    );
    assert!(run.status.success(), "{format}: {}", stderr(&run));
    (0..4)
        .map(|i| {
            let p = dir
                .join(&format!("{format}/{i:02}.png"))
                .display()
                .to_string();
            opencv::imgcodecs::imread(&p, opencv::imgcodecs::IMREAD_COLOR).unwrap()
        })
        .collect()
}

#[test]
fn yuv_caps_are_taken_as_they_come() {
    let dir = TempDir::new("gst-yuv");
    let bgr = frames(&dir, "BGR");
    let nv12 = frames(&dir, "NV12");
    let i420 = frames(&dir, "I420");
    let yuy2 = frames(&dir, "YUY2");
    for (i, frame) in bgr.iter().enumerate() {
        for (name, f) in [("NV12", &nv12[i]), ("I420", &i420[i]), ("YUY2", &yuy2[i])] {
            assert_eq!((f.cols(), f.rows()), (320, 240), "{name} frame {i}");
            let mut diff = Mat::default();
            opencv::core::absdiff(frame, f, &mut diff).unwrap();
            let mean = opencv::core::mean(&diff, &opencv::core::no_array()).unwrap();
            assert!(
                mean[0] < 10.0 && mean[1] < 10.0 && mean[2] < 10.0,
                "{name} frame {i} is far from GStreamer's own BGR: {mean:?}"
            );
        }
        assert_eq!(
            nv12[i].data_bytes().unwrap(),
            i420[i].data_bytes().unwrap(),
            "NV12 and I420 of frame {i} differ"
        );
    }
}

#[test]
fn only_the_caps_right_before_appsink_count() {
    use framepipe::source::capture::raw_caps;
    let name = |p: &str| raw_caps(p).map(|r| r.0);
    assert_eq!(
        name("videotestsrc ! video/x-raw,format=NV12 ! appsink"),
        Some("NV12")
    );
    assert_eq!(
        name("src ! video/x-raw, width=64, format=(string)I420 ! appsink sync=false"),
        Some("I420")
    );
    assert_eq!(
        name("src ! video/x-raw,format=NV12 ! videoconvert ! appsink"),
        None
    );
    assert_eq!(name("src ! video/x-raw,format=BGR ! appsink"), None);
    assert_eq!(name("src ! appsink"), None);
}
