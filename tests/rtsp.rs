//! `--rtsp-serve`: an input's own packets and the mosaic served over RTSP to three kinds of
//! players at once — ffmpeg over TCP and OpenCV-Python's reader the input, each of which
//! must get an unbroken run of the source's very pictures (checked by their digests,
//! decoded) from its first keyframe to the end, and GStreamer's `rtspsrc` over UDP the
//! mosaic, encoded once (every picture decoded without an error); the token rules of
//! `--serve` off loopback.
#![cfg(feature = "ffmpeg")]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::run::{bin, ffmpeg_made, free_port, require, stderr, TempDir};

/// Each decoded picture's digest, as framemd5 writes it, of `path`'s video (`pix_fmt`).
fn digests(path: &Path, pix_fmt: &str) -> Vec<String> {
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .args(["-map", "0:v:0", "-pix_fmt", pix_fmt, "-f", "framemd5", "-"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| Some(l.rsplit(',').next()?.trim().to_string()))
        .collect()
}

/// Whether `got` is one unbroken run of `source`'s pictures, at least `least` long.
fn unbroken(got: &[String], source: &[String], least: usize) -> Result<(), String> {
    let first = got.first().ok_or("no picture")?;
    let at = source
        .iter()
        .position(|d| d == first)
        .ok_or("a picture that is not the source's")?;
    let run = got
        .iter()
        .zip(&source[at..])
        .take_while(|(a, b)| a == b)
        .count();
    match (run == got.len(), got.len() >= least) {
        (true, true) => Ok(()),
        (false, _) => Err(format!(
            "{run} of {} pictures in order from {at}",
            got.len()
        )),
        (true, false) => Err(format!("only {} pictures from {at}", got.len())),
    }
}

/// Waits until something listens on `port` (at most 10 s), and half a second more for the
/// input to open.
fn listening(port: u16) {
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < until,
            "nothing listens on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
}

fn spawn(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

const PLAYER: &str = r#"
import cv2, hashlib, sys
c = cv2.VideoCapture(sys.argv[1], cv2.CAP_FFMPEG)
while True:
    ok, f = c.read()
    if not ok:
        break
    print(hashlib.md5(f.tobytes()).hexdigest(), flush=True)
"#;

#[test]
fn three_kinds_of_players_get_every_picture_of_an_input_at_once() {
    require(&["ffmpeg", "gst-launch-1.0", "/usr/bin/python3"]);
    let dir = TempDir::new("rtsp");
    let clip = dir.join("door.mp4");
    ffmpeg_made(
        &clip,
        &["testsrc2=s=320x240:r=25:d=7", "sine=d=7"],
        &["-c:v", "libx264", "-g", "25", "-bf", "0", "-c:a", "aac"],
    );
    let port = free_port();
    let server = spawn(
        Command::new(bin())
            .arg("-i")
            .arg(&clip)
            .arg("-i")
            .arg(&clip)
            .args(["--headless", "--rtsp-serve", &port.to_string()])
            .env_remove("DISPLAY"),
    );
    listening(port);
    let url = format!("rtsp://127.0.0.1:{port}/door");
    let by_ffmpeg = dir.join("ffmpeg.mkv");
    let ffmpeg = spawn(
        Command::new("ffmpeg")
            .args([
                "-v",
                "error",
                "-rtsp_transport",
                "tcp",
                "-i",
                &url,
                "-c",
                "copy",
            ])
            .arg(&by_ffmpeg),
    );
    let by_gst = dir.join("gst.h264");
    let gst = spawn(Command::new("gst-launch-1.0").args([
        "-q",
        "-e",
        "rtspsrc",
        &format!("location=rtsp://127.0.0.1:{port}/mosaic"),
        "protocols=udp",
        "!",
        "rtph264depay",
        "!",
        "h264parse",
        "!",
        "video/x-h264,stream-format=byte-stream",
        "!",
        "filesink",
        &format!("location={}", by_gst.display()),
    ]));
    // OpenCV-Python by the number of the input.
    let cv = spawn(
        Command::new("/usr/bin/python3")
            .args(["-c", PLAYER, &format!("rtsp://127.0.0.1:{port}/1")])
            .env("OPENCV_FFMPEG_CAPTURE_OPTIONS", "rtsp_transport;tcp"),
    );
    let server = crate::common::run::wait_with_deadline(server, Duration::from_secs(30), "server");
    assert!(server.status.success(), "{}", stderr(&server));
    let ffmpeg = crate::common::run::wait_with_deadline(ffmpeg, Duration::from_secs(20), "ffmpeg");
    // gst-launch -e ends its file at an interrupt (its EOS).
    // SAFETY: a signal to a child of this process, which has not been waited for.
    unsafe { libc::kill(gst.id() as i32, libc::SIGINT) };
    let gst = crate::common::run::wait_with_deadline(gst, Duration::from_secs(20), "gst");
    let cv = crate::common::run::wait_with_deadline(cv, Duration::from_secs(20), "opencv");
    let _ = (ffmpeg, gst);
    let source = digests(&clip, "yuv420p");
    // Connected about 6 s of the 7: each got at least 3 s of pictures, unbroken.
    let least = 75;
    let mut failed = Vec::new();
    if let Err(e) = unbroken(&digests(&by_ffmpeg, "yuv420p"), &source, least) {
        failed.push(format!("ffmpeg over TCP: {e}"));
    }
    let decoded = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(&by_gst)
        .args(["-f", "framemd5", "-"])
        .output()
        .unwrap();
    let pictures = String::from_utf8_lossy(&decoded.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .count();
    if pictures < least || !decoded.stderr.is_empty() {
        failed.push(format!(
            "GStreamer over UDP, the mosaic: {pictures} pictures; {}",
            stderr(&decoded)
        ));
    }
    let bgr = digests(&clip, "bgr24");
    let by_cv: Vec<String> = String::from_utf8_lossy(&cv.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    if let Err(e) = unbroken(&by_cv, &bgr, least) {
        failed.push(format!("OpenCV-Python: {e} ({})", stderr(&cv)));
    }
    assert!(failed.is_empty(), "{failed:#?}\n{}", stderr(&server));
}

#[test]
fn off_loopback_it_asks_for_a_token_and_players_give_it() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("rtsp-token");
    let clip = dir.join("c.mp4");
    ffmpeg_made(
        &clip,
        &["testsrc2=s=160x120:r=25:d=8"],
        &["-c:v", "libx264", "-g", "25"],
    );
    let refused = Command::new(bin())
        .arg("-i")
        .arg(&clip)
        .args(["--headless", "--rtsp-serve", "0.0.0.0:0"])
        .env_remove("FRAMEPIPE_SERVE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("no token is set"),
        "{}",
        stderr(&refused)
    );
    let port = free_port();
    let server = spawn(
        Command::new(bin())
            .arg("-i")
            .arg(&clip)
            .args(["--headless", "--rtsp-serve", &port.to_string()])
            .env("FRAMEPIPE_SERVE_TOKEN", "s3cret"),
    );
    listening(port);
    let play = |url: &str| {
        Command::new("ffmpeg")
            .args(["-v", "error", "-rtsp_transport", "tcp", "-i", url])
            .args(["-frames:v", "5", "-f", "null", "-"])
            .output()
            .unwrap()
    };
    let without = play(&format!("rtsp://127.0.0.1:{port}/c"));
    assert!(!without.status.success());
    assert!(stderr(&without).contains("401"), "{}", stderr(&without));
    let wrong = play(&format!("rtsp://x:guess@127.0.0.1:{port}/c"));
    assert!(!wrong.status.success());
    let with = play(&format!("rtsp://x:s3cret@127.0.0.1:{port}/c"));
    assert!(with.status.success(), "{}", stderr(&with));
    let by_query = play(&format!("rtsp://127.0.0.1:{port}/c?token=s3cret"));
    assert!(by_query.status.success(), "{}", stderr(&by_query));
    let server = crate::common::run::wait_with_deadline(server, Duration::from_secs(20), "server");
    assert!(server.status.success(), "{}", stderr(&server));
}
