//! The build for the GPU machine: FFmpeg's libraries without OpenCV (`--features ffmpeg`;
//! `ffmpeg-static` links them in, `scripts/gpu.sh bundle`). Files and streams are decoded by
//! libavcodec exactly as ffmpeg decodes them; what needs OpenCV is refused by name.
//! `scripts/test.sh` runs these with `--no-default-features --features ffmpeg`; in the other
//! builds this file holds no test.
#![cfg(all(feature = "ffmpeg", not(feature = "opencv")))]

use crate::common;
use crate::common::probe::codec_and_frames;

use std::process::Command;

use common::run::{bin, free_port, stderr, wait_with_deadline, TempDir};

/// ffmpeg's frame checksums of `args`'s decoded video.
fn framemd5(args: &[&str], stdin: Option<std::process::Stdio>) -> String {
    let mut cmd = Command::new("ffmpeg");
    cmd.args(["-v", "error"])
        .args(args)
        .args(["-f", "framemd5", "-"]);
    if let Some(s) = stdin {
        cmd.stdin(s);
    }
    let out = cmd.output().expect("ffmpeg runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The checksums alone: the header names the input, and the time bases differ
    // (a Y4M stream's is its rate).
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.rsplit(',').next().unwrap().trim().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Makes `path` with ffmpeg from the lavfi source `lavfi`, then `extra` output options.
fn make(path: &std::path::Path, lavfi: &str, extra: &[&str]) {
    let made = Command::new("ffmpeg")
        .args(["-v", "error", "-f", "lavfi", "-i", lavfi])
        .args(extra)
        .arg("-y")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
}

/// framepipe's error for `--input input` and `args`: it must exit 1.
fn refused(input: &std::path::Path, args: &[&str]) -> String {
    let run = Command::new(bin())
        .arg("--input")
        .arg(input)
        .arg("--headless")
        .args(args)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    String::from_utf8_lossy(&run.stderr).into_owned()
}

/// framepipe's frames of `clip` (`--output -`, with `args`), as ffmpeg checksums them, and
/// what it said; the run must succeed.
fn ours(clip: &std::path::Path, args: &[&str]) -> (String, String) {
    let mut run = Command::new(bin())
        .arg("--input")
        .arg(clip)
        .args(["--headless", "--output", "-"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let sums = framemd5(
        &["-f", "yuv4mpegpipe", "-i", "-"],
        Some(run.stdout.take().unwrap().into()),
    );
    let out = run.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{}: {said}", clip.display());
    (sums, said)
}

#[test]
fn files_are_decoded_as_ffmpeg_decodes_them() {
    let dir = TempDir::new("ffmpeg-only");
    for (name, codec) in [
        ("h264.mp4", "libx264"),
        ("hevc.mkv", "libx265"),
        ("vp9.webm", "libvpx-vp9"),
    ] {
        let clip = dir.join(name);
        make(
            &clip,
            "testsrc2=s=320x240:r=30000/1001:d=1",
            &["-c:v", codec, "-pix_fmt", "yuv420p"],
        );
        let (sums, _) = ours(&clip, &[]);
        assert_eq!(sums.lines().count(), 30, "{name}: {sums}");
        assert_eq!(
            sums,
            framemd5(&["-i", clip.to_str().unwrap()], None),
            "{name}"
        );
    }
}

/// `--decode gpu` (H.264) and `--decode auto` (HEVC): NVDEC where there is one (for auto,
/// with the CUDA backend and where it outpaces the cores); here, without CUDA, the CPU
/// decodes and the run says why. Either way the frames are ffmpeg's own (NVDEC's H.264 and
/// HEVC pictures are exact, as the standards define them).
#[test]
fn decode_gpu_and_auto_fall_back_to_the_cpu_and_say_why() {
    let dir = TempDir::new("ffmpeg-only-gpu");
    // What each says when the CPU decodes (auto on a machine with CUDA and many cores says
    // "--decode auto: the CPU decodes it (…)").
    for (flag, name, codec, cpu) in [
        ("gpu", "h264.mp4", "libx264", "; the CPU decodes it"),
        ("auto", "hevc.mkv", "libx265", "the CPU decodes it"),
    ] {
        let clip = dir.join(name);
        make(
            &clip,
            "testsrc2=s=320x240:r=25:d=1",
            &["-c:v", codec, "-pix_fmt", "yuv420p"],
        );
        let (sums, err) = ours(&clip, &["--decode", flag]);
        assert!(
            err.contains("decoded by NVDEC through libavcodec")
                || (err.contains(&format!("--decode {flag}: ")) && err.contains(cpu)),
            "{flag}: {err}"
        );
        assert_eq!(
            sums,
            framemd5(&["-i", clip.to_str().unwrap()], None),
            "{flag}"
        );
    }
}

#[test]
fn what_needs_opencv_is_refused_by_name() {
    let dir = TempDir::new("ffmpeg-only-refused");
    let image = dir.join("still.png");
    make(&image, "testsrc2=s=64x48", &["-frames", "1"]);
    let err = refused(&image, &[]);
    assert!(
        err.contains("this build has no OpenCV: cameras, still images"),
        "{err}"
    );
    let clip = dir.join("clip.mp4");
    make(&clip, "testsrc2=s=64x48:d=0.2", &[]);
    let err = refused(&clip, &["--decode", "opencv"]);
    assert!(
        err.contains("--decode opencv: this build has no OpenCV"),
        "{err}"
    );
}

/// The headless product writes what FFmpeg's libraries write, without OpenCV: video files,
/// HLS, and a stream beside them.
#[test]
fn video_files_hls_and_streams_are_written_without_opencv() {
    let dir = TempDir::new("ffmpeg-only-outputs");
    let clip = dir.join("clip.mp4");
    make(&clip, "testsrc2=s=160x120:r=30:d=2", &["-c:v", "libx264"]);
    for (name, codec) in [
        ("out.mp4", "h264"),
        ("out.mkv", "h264"),
        ("out.webm", "vp9"),
    ] {
        let out = dir.join(name);
        let run = Command::new(bin())
            .arg("--input")
            .arg(&clip)
            .args(["--headless", "--filter", "gray", "--output"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        assert_eq!(codec_and_frames(&out), (codec.to_string(), 60), "{name}");
    }
    let playlist = dir.join("live/index.m3u8");
    let run = Command::new(bin())
        .arg("--input")
        .arg(&clip)
        .args(["--headless", "--output"])
        .arg(&playlist)
        .args(["--output", "udp://127.0.0.1:9?pkt_size=1316"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    assert_eq!(
        codec_and_frames(&playlist),
        ("h264".to_string(), 60),
        "{err}"
    );
    assert!(
        err.contains("udp://127.0.0.1:9?pkt_size=1316: 60 of 60 frames sent"),
        "{err}"
    );
}

/// Image sequences and the browser view need no OpenCV: libavcodec's PNG, BMP and TIFF
/// hold the frames exactly (equal to the PPM sequence framepipe writes itself), and the view
/// serves JPEG pictures.
#[test]
fn image_sequences_and_the_browser_view_work_without_opencv() {
    let dir = TempDir::new("ffmpeg-only-images");
    let pixels = |pattern: &str| {
        let run = Command::new(bin())
            .current_dir(dir.path())
            .args(["-i", "pattern", "--size", "333x251", "--frames", "3"])
            .args(["--headless", "-q", "--filter", "gauss:1", "-o", pattern])
            .output()
            .unwrap();
        assert!(run.status.success(), "{pattern}: {}", stderr(&run));
        let first = dir.join(&pattern.replace("%02d", "01"));
        let out = Command::new("ffmpeg")
            .args(["-v", "error", "-i"])
            .arg(&first)
            .args(["-f", "rawvideo", "-pix_fmt", "bgr24", "-"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{pattern}: ffmpeg can't read it");
        out.stdout
    };
    let reference = pixels("ppm/%02d.ppm");
    assert_eq!(reference.len(), 333 * 251 * 3);
    for pattern in ["png/%02d.png", "bmp/%02d.bmp", "tif/%02d.tif"] {
        assert!(
            pixels(pattern) == reference,
            "{pattern} differs from the PPM"
        );
    }
    assert_eq!(pixels("jpg/%02d.jpg").len(), reference.len());

    let port = free_port();
    let child = Command::new(bin())
        .args(["-i", "pattern", "--size", "320x240", "--headless", "-q"])
        .args(["--serve", &port.to_string()])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A viewer of the stream: the view encodes pictures while someone watches.
    let jpeg = first_jpeg_of_the_stream(port);
    common::run::interrupt(&child);
    let out = wait_with_deadline(child, std::time::Duration::from_secs(5), "--serve");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(jpeg, "no JPEG picture in /stream.mjpg");
}

/// Whether `/stream.mjpg` on `port` brings a whole JPEG (its start and end markers) within
/// 10 s, connecting as the server comes up.
fn first_jpeg_of_the_stream(port: u16) -> bool {
    use std::io::{Read, Write};
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut conn = loop {
        if let Ok(c) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            break c;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    conn.set_read_timeout(Some(std::time::Duration::from_secs(2)))
        .unwrap();
    write!(conn, "GET /stream.mjpg HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let (mut got, mut buf) = (Vec::new(), [0u8; 65536]);
    while std::time::Instant::now() < deadline {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        if let Some(start) = got.windows(2).position(|w| w == [0xff, 0xd8]) {
            if got[start..].windows(2).any(|w| w == [0xff, 0xd9]) {
                return true;
            }
        }
    }
    false
}

/// The mosaic needs no OpenCV: several inputs' mosaic, labelled, is recorded by an output
/// without `{n}` in the server build (its labels are drawn by `display::draw`), beside each
/// input's own output.
#[test]
fn the_mosaic_is_recorded_without_opencv() {
    let dir = TempDir::new("ffmpeg-only-mosaic");
    let run = Command::new(bin())
        .current_dir(dir.path())
        .args(["--headless", "--backend", "cpu", "-q", "--frames", "25"])
        .args([
            "--input",
            "pattern:320x240:25",
            "--input",
            "pattern:160x120:nv12:25",
        ])
        .args([
            "--output",
            "wall.mkv",
            "--output",
            "own-{n}.mkv",
            "--codec",
            "ffv1",
        ])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", stderr(&run));
    for n in 0..2 {
        let own = dir.join(&format!("own-{n}.mkv"));
        assert_eq!(
            codec_and_frames(&own),
            ("ffv1".to_string(), 25),
            "input {n}"
        );
    }
    let wall = dir.join("wall.mkv");
    let (codec, pictures) = codec_and_frames(&wall);
    assert_eq!(codec, "ffv1");
    assert!(pictures >= 20, "{pictures} pictures of the mosaic");
    // The first picture, raw: two tiles of 320x240 side by side, the first labelled (a dark
    // backdrop with light text over the pattern's top left corner).
    let raw = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(&wall)
        .args(["-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "bgr24", "-"])
        .output()
        .unwrap();
    assert_eq!(raw.stdout.len(), 640 * 240 * 3, "{}", stderr(&raw));
    let label: Vec<u8> = (2..20)
        .flat_map(|y| (2..120).map(move |x| (y * 640 + x) * 3))
        .map(|i| raw.stdout[i + 1])
        .collect();
    let light = label.iter().filter(|&&g| g > 200).count();
    let dark = label.iter().filter(|&&g| g < 90).count();
    assert!(
        light > 100 && dark > 500,
        "no label: {light} light, {dark} dark pixels"
    );
}
