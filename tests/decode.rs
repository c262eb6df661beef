//! Files and streams decoded by FFmpeg's libraries (`--decode cpu`, the default): every
//! frame exactly as ffmpeg decodes it (framemd5 of the decoder's own planes, passed through
//! `--filter copy` to a Y4M pipe), for the codecs and containers people use; pictures
//! framepipe can't carry as they are converted with a warning; a damaged file decoded as
//! far as ffmpeg decodes it; a network input that refuses or stalls ends clearly and at once.
#![cfg(feature = "opencv")]

use crate::common;

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::run::{bin, framepipe, have, require, stderr, wait_with_deadline, TempDir};

/// ffmpeg with `args`, quietly; panics when it fails.
fn ffmpeg(args: &[&str]) {
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-y"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "ffmpeg {args:?}: {}", stderr(&out));
}

/// Writes `frames` frames of the lavfi source `src` (`testsrc2=…`) to `path` with the
/// encoder options `encode` (`-c:v`, `-pix_fmt`, …).
fn make(path: &str, src: &str, frames: &str, encode: &[&str]) {
    let mut args = vec!["-f", "lavfi", "-i", src, "-frames:v", frames];
    args.extend_from_slice(encode);
    args.push(path);
    ffmpeg(&args);
}

/// Whether this ffmpeg has the encoder `name`.
fn has_encoder(name: &str) -> bool {
    Command::new("ffmpeg")
        .args(["-v", "error", "-h", &format!("encoder={name}")])
        .output()
        .is_ok_and(|o| !String::from_utf8_lossy(&o.stdout).contains("not recognized"))
}

/// The MD5 of each frame ffmpeg decodes from `path`, in its decoder's own pixel format.
fn ffmpeg_frames(path: &str) -> Vec<String> {
    let out = Command::new("ffmpeg")
        .args([
            "-v", "error", "-i", path, "-map", "0:v:0", "-f", "framemd5", "-",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    md5s(&out.stdout)
}

/// The MD5s of a framemd5 listing.
fn md5s(listing: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(listing)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit(',').next().map(|h| h.trim().to_string()))
        .collect()
}

/// The MD5 of each frame framepipe passes through `--filter copy` to standard output in
/// `format` (its Y4M frames hashed by ffmpeg, which only unwraps them), and its stderr.
fn framepipe_frames(path: &str, format: &str, extra: &[&str]) -> (Vec<String>, String) {
    let mut fp = Command::new(bin())
        .args([
            "-i",
            path,
            "--headless",
            "--filter",
            "copy",
            "--output",
            "-",
        ])
        .args(["--output-format", format])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let hash = Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-f",
            "yuv4mpegpipe",
            "-i",
            "-",
            "-f",
            "framemd5",
            "-",
        ])
        .stdin(fp.stdout.take().unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut err = String::new();
    fp.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let status = fp.wait().unwrap();
    let out = wait_with_deadline(hash, Duration::from_secs(60), "ffmpeg framemd5");
    assert!(status.success(), "framepipe on {path}: {err}");
    (md5s(&out.stdout), err)
}

/// (encoder, container, pixel format, rate) of the clips compared with ffmpeg's decode.
const CLIPS: &[(&str, &str, &str, &str)] = &[
    ("libx264", "mp4", "yuv420p", "30000/1001"),
    ("libx265", "mkv", "yuv420p", "30000/1001"),
    ("mpeg4", "avi", "yuv420p", "25"),
    ("libvpx-vp9", "webm", "yuv420p", "30"),
    ("mjpeg", "avi", "yuvj420p", "25"),
    ("ffv1", "mkv", "yuv420p", "24000/1001"),
    ("libx264", "mkv", "yuv420p", "60"),
    ("mpeg4", "mp4", "yuv420p", "30000/1001"),
];

#[test]
fn decoded_frames_equal_ffmpeg_s_for_every_codec_and_container() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("decode-exact");
    let mut compared = 0;
    for (i, &(codec, container, pix, rate)) in CLIPS.iter().enumerate() {
        if !has_encoder(codec) {
            println!("{codec}: no such encoder in this ffmpeg; skipped");
            continue;
        }
        let clip = dir.join(&format!("c{i}.{container}")).display().to_string();
        let src = format!("testsrc2=size=320x240:rate={rate}");
        let mut args = vec!["-f", "lavfi", "-i", &src, "-frames:v", "45", "-c:v", codec];
        args.extend(["-pix_fmt", pix]);
        if codec == "libvpx-vp9" {
            args.extend(["-deadline", "realtime"]);
        }
        if codec == "libx265" {
            args.extend(["-x265-params", "log-level=none"]);
        }
        args.push(&clip);
        ffmpeg(&args);
        let want = ffmpeg_frames(&clip);
        let (got, err) = framepipe_frames(&clip, "i420", &[]);
        assert!(err.contains("decoded by libavcodec"), "{err}");
        assert_eq!(want.len(), 45, "{codec} in {container}");
        assert_eq!(
            got, want,
            "{codec} in {container}: frames differ from ffmpeg's\n{err}"
        );
        compared += 1;
    }
    assert!(compared >= 4, "too few encoders here to judge");
    println!("{compared} codec/container pairs: every frame equal to ffmpeg's decode");
}

#[test]
fn gray_is_carried_as_decoded_and_other_pictures_are_converted_with_a_warning() {
    if !have("ffmpeg") {
        return;
    }
    let dir = TempDir::new("decode-kinds");
    // Gray frames cross as gray and come out as ffmpeg decodes them.
    let gray = dir.join("gray.mkv").display().to_string();
    make(
        &gray,
        "testsrc2=size=160x120:rate=25",
        "20",
        &["-c:v", "ffv1", "-pix_fmt", "gray"],
    );
    let (got, err) = framepipe_frames(&gray, "gray", &[]);
    assert_eq!(got, ffmpeg_frames(&gray), "{err}");
    assert!(err.contains("gray as decoded"), "{err}");

    // 10-bit pictures and RGB pictures are converted to BGR,
    // and the run says so; every frame still comes through.
    for (name, pix, size, says) in [
        ("ten.mkv", "yuv420p10le", "160x120", "10-bit"),
        ("rgb.mkv", "bgr0", "160x120", "converted to BGR"),
    ] {
        let clip = dir.join(name).display().to_string();
        let src = format!("testsrc2=size={size}:rate=25");
        make(&clip, &src, "12", &["-c:v", "ffv1", "-pix_fmt", pix]);
        let out = framepipe(
            &["-i", &clip, "--headless", "--frames", "100"],
            Duration::from_secs(60),
        );
        let err = stderr(&out);
        assert!(out.status.success(), "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
        assert_eq!(out.counts().map(|c| c[0]), Some(12), "{name}: {err}");
    }
}

#[test]
fn a_damaged_file_decodes_as_far_as_ffmpeg_does() {
    if !have("ffmpeg") {
        return;
    }
    let dir = TempDir::new("decode-damaged");
    let clip = dir.join("clip.ts").display().to_string();
    make(
        &clip,
        "testsrc2=size=320x240:rate=25",
        "100",
        &["-c:v", "libx264", "-g", "25", "-pix_fmt", "yuv420p"],
    );
    // Bytes overwritten in the middle, and the end cut off.
    let mut data = std::fs::read(&clip).unwrap();
    let n = data.len();
    for b in &mut data[n / 3..n / 3 + 3000] {
        *b = 0x5a;
    }
    data.truncate(n * 4 / 5);
    let damaged = dir.join("damaged.ts").display().to_string();
    std::fs::write(&damaged, &data).unwrap();
    let want = ffmpeg_frames(&damaged);
    let (got, err) = framepipe_frames(&damaged, "i420", &[]);
    assert!(want.len() > 40 && want.len() < 100, "{}", want.len());
    assert_eq!(got, want, "{err}");
    println!("damaged file: {} frames, as ffmpeg decodes them", got.len());
}

#[test]
fn the_opencv_path_remains_for_comparison() {
    if !have("ffmpeg") {
        return;
    }
    let dir = TempDir::new("decode-opencv");
    let clip = dir.join("clip.mp4").display().to_string();
    make(
        &clip,
        "testsrc2=size=320x240:rate=25",
        "30",
        &["-c:v", "libx264", "-pix_fmt", "yuv420p"],
    );
    for (decode, says) in [("cpu", "decoded by libavcodec"), ("opencv", "file '")] {
        let out = framepipe(
            &["-i", &clip, "--headless", "--decode", decode],
            Duration::from_secs(60),
        );
        let err = stderr(&out);
        assert!(out.status.success(), "{decode}: {err}");
        assert!(err.contains(says), "{decode}: {err}");
        assert_eq!(out.counts().map(|c| c[0]), Some(30), "{decode}: {err}");
    }
}

/// Whether the log `err` says NVDEC was asked for `clip`: it decoded it, or it could not
/// (no GPU here) and said so.
fn nvdec_asked_for(err: &str, clip: &str) -> bool {
    err.lines().any(|l| {
        l.contains(clip) && (l.contains("--decode gpu: ") || l.contains("decoded by NVDEC"))
    })
}

#[test]
fn an_input_of_a_list_is_decoded_as_its_own_line_says() {
    if !have("ffmpeg") {
        return;
    }
    let dir = TempDir::new("decode-own");
    let clip = |name: &str| {
        let path = dir.join(name).display().to_string();
        let h264 = ["-c:v", "libx264", "-pix_fmt", "yuv420p"];
        make(&path, "testsrc2=size=160x120:rate=25", "10", &h264);
        path
    };
    let (a, b) = (clip("a.mp4"), clip("b.mp4"));
    let list = dir.join("cams.txt");
    // The run's --decode, and each camera's own over it.
    for (run, line_a, line_b) in [
        ("cpu", "a [decode=gpu]", "b"),
        ("gpu", "a", "b [decode=cpu]"),
    ] {
        std::fs::write(&list, format!("{line_a} = {a}\n{line_b} = {b}\n")).unwrap();
        let list = list.display().to_string();
        let out = framepipe(
            &["--inputs", &list, "--headless", "--decode", run],
            Duration::from_secs(60),
        );
        let err = stderr(&out);
        assert!(out.status.success(), "--decode {run}: {err}");
        assert!(nvdec_asked_for(&err, &a), "--decode {run}: {err}");
        assert!(!nvdec_asked_for(&err, &b), "--decode {run}: {err}");
        assert_eq!(out.counts().map(|c| c[0]), Some(20), "{err}");
    }
    // OpenCV's capture is the whole run's choice, not a camera's: one line, exit 1.
    std::fs::write(&list, format!("a [decode=opencv] = {a}\n")).unwrap();
    let list = list.display().to_string();
    let out = framepipe(&["--inputs", &list, "--headless"], Duration::from_secs(30));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--decode opencv") && err.trim().lines().count() == 1,
        "{err}"
    );
}

#[test]
fn a_url_that_refuses_or_stalls_ends_clearly_and_at_once() {
    // Refused: nothing listens on the port.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/clip.mp4");
    let t = Instant::now();
    let out = framepipe(&["-i", &url, "--headless"], Duration::from_secs(20));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&url) && err.to_lowercase().contains("refused"),
        "{err}"
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    // Stalled: a server that takes the connection and never answers; a stop ends the run
    // within a second.
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://127.0.0.1:{}/clip.mp4",
        server.local_addr().unwrap().port()
    );
    let hold = std::thread::spawn(move || {
        let conn = server.accept();
        std::thread::sleep(Duration::from_secs(15));
        drop(conn);
    });
    let child = Command::new(bin())
        .args(["-i", &url, "--headless"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    common::run::interrupt(&child);
    let stopped = Instant::now();
    let out = wait_with_deadline(child, Duration::from_secs(10), "stalled URL");
    let took = stopped.elapsed();
    assert!(
        took < Duration::from_millis(1500),
        "took {took:?}: {}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    drop(hold);
}

/// framepipe's Y4M stream of `clip` with `extra` (headless, written to a file, so that a
/// full pipe never stalls it); panics where the run fails or hangs.
fn y4m_of(clip: &str, extra: &[&str]) -> Vec<u8> {
    let out = std::path::PathBuf::from(format!("{clip}.y4m"));
    let child = Command::new(bin())
        .args(["--input", clip, "--headless", "-q", "--output", "-"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let run = wait_with_deadline(child, Duration::from_secs(60), clip);
    assert_eq!(run.status.code(), Some(0), "{clip}: {}", stderr(&run));
    std::fs::read(&out).unwrap()
}

/// `--filter copy` to a Y4M pipe writes the very stream ffmpeg's `yuv4mpegpipe` writes,
/// header included: the pictures' chroma siting (H.264 and HEVC left, JPEG centred), range
/// where the file says it, aspect ratio and field order; a filter's output, converted from
/// BGR, is written as centred with no range said.
#[test]
fn a_y4m_pipe_is_ffmpeg_s_stream_byte_for_byte() {
    if !have("ffmpeg") {
        return;
    }
    let dir = TempDir::new("decode-y4m");
    let clips: &[(&str, &str, &[&str])] = &[
        ("h264.mp4", "", &["-c:v", "libx264", "-pix_fmt", "yuv420p"]),
        ("hevc.mkv", "", &["-c:v", "libx265", "-pix_fmt", "yuv420p"]),
        ("mjpeg.avi", "", &["-c:v", "mjpeg", "-pix_fmt", "yuvj420p"]),
        (
            "sar.mp4",
            ",setsar=10/11",
            &["-c:v", "libx264", "-pix_fmt", "yuv420p"],
        ),
        (
            "tff.mp4",
            ",setfield=tff",
            &[
                "-flags",
                "+ildct+ilme",
                "-c:v",
                "libx264",
                "-pix_fmt",
                "yuv420p",
            ],
        ),
    ];
    for (name, filter, encode) in clips {
        if encode[encode.len() - 3] == "libx265" && !has_encoder("libx265") {
            continue;
        }
        let clip = dir.join(name).display().to_string();
        make(
            &clip,
            &format!("testsrc2=size=320x240:rate=25{filter}"),
            "10",
            encode,
        );
        let theirs = Command::new("ffmpeg")
            .args(["-v", "error", "-i", &clip, "-f", "yuv4mpegpipe", "-"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let ours = y4m_of(&clip, &[]);
        let header = |b: &[u8]| {
            let end = b.iter().position(|&c| c == b'\n').unwrap_or(b.len());
            String::from_utf8_lossy(&b[..end]).to_string()
        };
        assert_eq!(header(&ours), header(&theirs.stdout), "{name}");
        assert!(ours == theirs.stdout, "{name}: the frames differ");
    }
    // Filtered: the chroma comes from BGR, so the header says centred, and no range.
    let clip = dir.join("hevc.mkv").display().to_string();
    if std::path::Path::new(&clip).exists() {
        let ours = y4m_of(&clip, &["--filter", "invert"]);
        let text = String::from_utf8_lossy(&ours[..80]).to_string();
        assert!(
            text.contains("C420jpeg") && !text.contains("XCOLORRANGE"),
            "{text}"
        );
    }
}

#[test]
fn turned_clips_equal_ffmpeg_s_turned_frames() {
    if !have("ffmpeg") {
        return;
    }
    let dir = TempDir::new("decode-turn");
    let plain = dir.join("plain.mp4").display().to_string();
    make(
        &plain,
        "testsrc2=size=320x240:rate=25",
        "20",
        &["-c:v", "libx264", "-pix_fmt", "yuv420p"],
    );
    for degrees in [90, 180, 270] {
        let clip = dir.join(&format!("r{degrees}.mp4")).display().to_string();
        std::fs::copy(&plain, &clip).unwrap();
        common::run::set_rotation(std::path::Path::new(&clip), degrees);
        // ffmpeg turns the decoded planes by the display matrix (transpose / flips).
        let want = ffmpeg_frames(&clip);
        let (got, err) = framepipe_frames(&clip, "i420", &[]);
        assert_eq!(got.len(), 20, "{degrees}: {err}");
        assert_eq!(
            got, want,
            "{degrees}: turned frames differ from ffmpeg's\n{err}"
        );
    }
}

#[test]
fn filters_run_on_the_decoded_planes_exactly() {
    if !have("ffmpeg") {
        return;
    }
    use framepipe::filter::Chain;
    use framepipe::frame::FrameSize;
    use framepipe::pixel::{Formats, PixelFormat};
    let dir = TempDir::new("decode-filter");
    let clip = dir.join("clip.mkv").display().to_string();
    make(
        &clip,
        "testsrc2=size=320x240:rate=25",
        "10",
        &["-c:v", "libx264", "-pix_fmt", "yuv420p"],
    );
    // The decoder's planes, as ffmpeg gives them.
    let raw = Command::new("ffmpeg")
        .args(["-v", "error", "-i", &clip, "-f", "rawvideo", "-"])
        .output()
        .unwrap()
        .stdout;
    let size = FrameSize::new(320, 240);
    let frame = PixelFormat::I420.bytes(size);
    assert_eq!(raw.len(), 10 * frame);
    let chain = "gray,gauss:2,sobel";
    let out = Command::new(bin())
        .args([
            "-i",
            &clip,
            "--headless",
            "--filter",
            chain,
            "--output",
            "-",
        ])
        .args(["--output-format", "i420", "--backend", "cpu"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // The Y4M stream's frames, after its header line and each FRAME line.
    let body = &out.stdout[out.stdout.iter().position(|&b| b == b'\n').unwrap() + 1..];
    let frames: Vec<&[u8]> = body.chunks(6 + frame).map(|c| &c[6..]).collect();
    assert_eq!(frames.len(), 10);
    let chain: Chain = chain.parse().unwrap();
    let formats = Formats {
        input: PixelFormat::I420,
        output: PixelFormat::I420,
    };
    for (i, got) in frames.iter().enumerate() {
        let mut want = vec![0; frame];
        framepipe::pixel::apply_reference(
            &chain,
            size,
            formats,
            &raw[i * frame..(i + 1) * frame],
            &mut want,
        );
        let diff = got
            .iter()
            .zip(&want)
            .map(|(a, b)| a.abs_diff(*b))
            .max()
            .unwrap();
        // OpenCV's Gaussian rounds its weights its own way (common::opencv_tolerance: a ±1
        // that the Sobel after it amplifies).
        assert!(diff <= 8, "frame {i} is {diff} from the reference");
    }
}

#[test]
fn raw_bottom_up_video_comes_out_the_right_way_up() {
    if !have("ffmpeg") {
        return;
    }
    // AVI's raw BGR is stored bottom-up: the decoder hands its rows with a negative pitch.
    let dir = TempDir::new("decode-raw");
    let clip = dir.join("raw.avi").display().to_string();
    make(
        &clip,
        "testsrc2=size=160x120:rate=25",
        "10",
        &["-c:v", "rawvideo", "-pix_fmt", "bgr24"],
    );
    let want = Command::new("ffmpeg")
        .args([
            "-v", "error", "-i", &clip, "-f", "rawvideo", "-pix_fmt", "bgr24", "-",
        ])
        .output()
        .unwrap()
        .stdout;
    let got = Command::new(bin())
        .args([
            "-i",
            &clip,
            "--headless",
            "--filter",
            "copy",
            "--output",
            "-",
        ])
        .args(["--output-format", "bgr24", "-q"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(got.status.success(), "{}", stderr(&got));
    assert_eq!(want.len(), 10 * 160 * 120 * 3);
    assert!(got.stdout == want, "frames differ from ffmpeg's");
}
