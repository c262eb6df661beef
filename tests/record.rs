//! `--record` and `--segment`: each input's own packets written untouched beside the run,
//! checked packet for packet (framemd5 of the stream copy) against what the senders sent:
//! cameras as they arrive (ffmpeg `-re` senders of MPEG-TS over loopback UDP), a file with
//! its audio, and the names refused before anything is opened.
#![cfg(feature = "ffmpeg")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common;
use common::run::{bin, framepipe, require, stderr, wait_with_deadline, TempDir};

/// Each packet of `path`'s first stream of `kind` ("v" or "a"), as (size, md5), in order:
/// framemd5 of a stream copy.
pub(crate) fn packets(path: &Path, kind: &str) -> Vec<(u64, String)> {
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .args([
            "-map",
            &format!("0:{kind}:0"),
            "-c",
            "copy",
            "-f",
            "framemd5",
            "-",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').map(str::trim).collect();
            Some((f.get(4)?.parse().ok()?, f.get(5)?.to_string()))
        })
        .collect()
}

/// The first audio stream of `path` as ADTS (AAC's own frames, however packed).
pub(crate) fn adts(path: &Path) -> Vec<u8> {
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .args(["-map", "0:a:0", "-c", "copy", "-f", "adts", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", path.display());
    out.stdout
}

/// A clip as cameras send it: H.264 with a 1 s GOP and AAC audio (in MPEG-TS where `path`
/// ends in .ts).
pub(crate) fn camera_clip(path: &Path, seconds: u32) {
    clip_with_audio_codec(path, seconds, "aac")
}

/// `camera_clip` with its sound (a 440 Hz sine at 48 kHz) in `codec`.
pub(crate) fn clip_with_audio_codec(path: &Path, seconds: u32, codec: &str) {
    let made = Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=320x240:rate=30",
        ])
        .args(["-f", "lavfi", "-i", "sine=f=440:r=48000"])
        .args(["-t", &seconds.to_string(), "-c:v", "libx264", "-g", "30"])
        .args(["-pix_fmt", "yuv420p", "-c:a", codec])
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
}

/// One camera: ffmpeg sending `clip` in real time to `port` on loopback.
fn send(clip: &Path, port: u16) -> Child {
    send_to(clip, &format!("udp://127.0.0.1:{port}?pkt_size=1316"))
}

/// ffmpeg sending `clip` in real time, as MPEG-TS, to `url`.
pub(crate) fn send_to(clip: &Path, url: &str) -> Child {
    Command::new("ffmpeg")
        .args(["-v", "error", "-re", "-i"])
        .arg(clip)
        .args(["-c", "copy", "-f", "mpegts", url])
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

/// framepipe's input for a camera sending to `port` over UDP.
pub(crate) fn udp_input(port: u16) -> String {
    format!("udp://127.0.0.1:{port}?fifo_size=1000000&overrun_nonfatal=1")
}

/// framepipe, headless, with `args`, once its stop handler is in place and its inputs have
/// had time to bind their sockets.
pub(crate) fn start(args: &[String]) -> Child {
    let child = Command::new(bin())
        .arg("--headless")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::run::wait_until_it_catches(child.id(), libc::SIGINT);
    std::thread::sleep(Duration::from_millis(600));
    child
}

/// Ctrl-C to framepipe once what was sent has arrived: its stderr, after a clean exit.
fn stop(child: Child) -> String {
    std::thread::sleep(Duration::from_millis(600));
    common::run::interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(10), "recording");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    err
}

/// Input `n`'s recordings in `dir`, in segment order.
fn recordings(dir: &Path, n: usize) -> Vec<PathBuf> {
    common::run::files_starting(dir, &format!("cam-{n}-"))
}

/// Three cameras over UDP, each recorded in 2 s segments while the run processes their
/// frames: every segment closed under its own name and starting on a keyframe, and the
/// segments of each camera together equal, packet for packet, video and audio, to what its
/// sender sent.
#[test]
fn cameras_over_udp_are_recorded_packet_for_packet_in_segments() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("record-udp");
    let clip = dir.join("clip.ts");
    camera_clip(&clip, 6);
    let ports: Vec<u16> = (0..3).map(|_| common::run::free_port()).collect();
    let mut args = vec!["--record".to_string()];
    args.push(dir.join("cam-{n}-{seg}.ts").display().to_string());
    args.extend(["--segment".into(), "2".into()]);
    for &p in &ports {
        args.extend(["-i".into(), udp_input(p)]);
    }
    let child = start(&args);
    let senders: Vec<Child> = ports.iter().map(|&p| send(&clip, p)).collect();
    for mut s in senders {
        assert!(s.wait().unwrap().success());
    }
    let err = stop(child);
    let sent_video = packets(&clip, "v");
    assert_eq!(sent_video.len(), 180);
    for n in 0..3 {
        let files = recordings(dir.path(), n);
        assert!(files.len() >= 3, "camera {n}: {files:?}\n{err}");
        let mut video = Vec::new();
        for f in &files {
            let (_, frames) = common::probe::codec_and_frames(f);
            assert!(frames > 0, "{}", f.display());
            video.extend(packets(f, "v"));
        }
        // The last packet sent stays in FFmpeg's MPEG-TS demuxer until a next one begins
        // (a live stream has no end to flush it), as it does in ffmpeg receiving the same.
        let counts: Vec<usize> = files.iter().map(|f| packets(f, "v").len()).collect();
        assert!(
            video.len() + 1 >= sent_video.len(),
            "camera {n}: video packets in {counts:?}\n{err}"
        );
        assert_eq!(
            video,
            sent_video[..video.len()],
            "camera {n}: the video as sent"
        );
        // The audio of the first keyframe on, as its ADTS frames (MPEG-TS groups them into
        // packets as its muxer likes: the frames are what was sent).
        let sent = adts(&clip);
        let got: Vec<u8> = files.iter().flat_map(|f| adts(f)).collect();
        let at = sent
            .windows(64)
            .position(|w| got.len() >= 64 && w == &got[..64])
            .unwrap_or_else(|| panic!("camera {n}: the audio recorded was not sent\n{err}"));
        assert!(
            at < 4096,
            "camera {n}: {at} bytes of audio left out at the start"
        );
        assert_eq!(
            &sent[at..at + got.len()],
            &got[..],
            "camera {n}: the audio as sent"
        );
        assert!(
            got.len() + 4096 >= sent.len() - at,
            "camera {n}: audio cut short"
        );
        let said = format!("recorded input {n}: {} video packets", video.len());
        assert!(err.contains(&said), "{err}");
    }
    let parts: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".part"))
        .collect();
    assert!(parts.is_empty(), "unfinished files left: {parts:?}");
}

/// Beside a camera that runs, one that is down at the start (nothing listens at its address)
/// is said to be down, the run goes on, and when it comes up it joins: its recording holds
/// what it sent.
#[test]
fn a_camera_down_at_the_start_joins_when_it_comes_up() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("record-down");
    let clip = dir.join("clip.ts");
    camera_clip(&clip, 4);
    let (up, down) = (common::run::free_port(), common::run::free_port());
    let record = dir.join("cam-{n}.ts").display().to_string();
    let tcp = format!("tcp://127.0.0.1:{down}");
    let child = start(&[
        "--record".into(),
        record,
        "-i".into(),
        udp_input(up),
        "-i".into(),
        tcp,
    ]);
    let mut first = send(&clip, up);
    std::thread::sleep(Duration::from_secs(2));
    // The second camera comes up: it listens, and framepipe's next attempt connects.
    let mut second = send_to(&clip, &format!("tcp://127.0.0.1:{down}?listen=1"));
    assert!(first.wait().unwrap().success());
    assert!(second.wait().unwrap().success());
    let err = stop(child);
    assert!(
        err.contains("input 1 (tcp://") && err.contains("is down"),
        "{err}"
    );
    let sent = packets(&clip, "v");
    for n in 0..2 {
        let video = packets(&dir.join(&format!("cam-{n}.ts")), "v");
        assert!(
            video.len() + 1 >= sent.len(),
            "camera {n}: {} of {}\n{err}",
            video.len(),
            sent.len()
        );
        assert_eq!(video, sent[..video.len()], "camera {n}");
    }
}

/// A camera's MPEG-TS recorded as .mp4: its AAC made MP4's own (FFmpeg's muxer refuses
/// ADTS), every video packet and the audio frames kept.
#[test]
fn a_camera_is_recorded_into_mp4_with_its_audio() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("record-mp4");
    let clip = dir.join("clip.ts");
    camera_clip(&clip, 3);
    let port = common::run::free_port();
    let rec = dir.join("cam.mp4");
    let child = start(&[
        "--record".into(),
        rec.display().to_string(),
        "-i".into(),
        udp_input(port),
    ]);
    assert!(send(&clip, port).wait().unwrap().success());
    let err = stop(child);
    let sent = packets(&clip, "v");
    let video = packets(&rec, "v");
    assert!(
        video.len() + 1 >= sent.len(),
        "{} of {}\n{err}",
        video.len(),
        sent.len()
    );
    // MP4 holds H.264 with lengths, not start codes: the packets match in number; the
    // audio's frames, as ADTS again, are the ones sent.
    let (got, all) = (adts(&rec), adts(&clip));
    assert!(
        got.len() > all.len() / 2,
        "{} of {} bytes of audio\n{err}",
        got.len(),
        all.len()
    );
    let at = all
        .windows(64)
        .position(|w| w == &got[..64])
        .expect("the audio sent");
    assert_eq!(&all[at..at + got.len()], &got[..]);
}

/// A file's recording (.mp4, fragmented) holds every packet of its video and audio, and a
/// name already taken is never written over: the recording goes beside it.
#[test]
fn a_file_is_recorded_whole_and_nothing_is_replaced() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("record-file");
    let clip = dir.join("clip.mp4");
    camera_clip(&clip, 3);
    let taken = dir.join("rec.mp4");
    std::fs::write(&taken, b"somebody's file").unwrap();
    let summary = dir.join("summary.json");
    let o = framepipe(
        &[
            "-i",
            clip.to_str().unwrap(),
            "--headless",
            "--record",
            taken.to_str().unwrap(),
            "--summary-json",
            summary.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(std::fs::read(&taken).unwrap(), b"somebody's file");
    let written = dir.join("rec-1.mp4");
    assert_eq!(packets(&written, "v"), packets(&clip, "v"), "{err}");
    let (audio, sent) = (packets(&written, "a"), packets(&clip, "a"));
    assert!(
        !audio.is_empty() && sent.ends_with(&audio),
        "{} of {}",
        audio.len(),
        sent.len()
    );
    assert!(err.contains("rec-1.mp4"), "{err}");
    // The summary says what the recording wrote.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let recorded = &json["inputs"][0]["recorded"];
    assert_eq!(recorded["video_packets"], 90, "{json}");
    assert_eq!(
        recorded["files"][0],
        written.display().to_string(),
        "{json}"
    );
    assert_eq!(recorded["lost"], 0, "{json}");
}

/// What can't be recorded is refused in one line before anything opens.
#[test]
fn a_recording_that_cannot_be_kept_apart_or_written_is_refused() {
    let dir = TempDir::new("record-refused");
    let inputs = TempDir::new("record-refused-in");
    camera_clip(&inputs.join("a.mp4"), 1);
    std::fs::copy(inputs.join("a.mp4"), inputs.join("b.mp4")).unwrap();
    let d = |s: &str| dir.join(s).display().to_string();
    let (a, b) = (
        inputs.join("a.mp4").display().to_string(),
        inputs.join("b.mp4").display().to_string(),
    );
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["-i".into(), "pattern".into(), "--record".into(), d("a.mp4")],
            "has no packets to record",
        ),
        (
            vec!["-i".into(), a.clone(), "--record".into(), d("a.avi")],
            ".mp4, .mov, .mkv or .ts",
        ),
        (
            vec![
                "-i".into(),
                a.clone(),
                "-i".into(),
                b.clone(),
                "--record".into(),
                d("a.mp4"),
            ],
            "put {n}",
        ),
        (
            vec![
                "-i".into(),
                a.clone(),
                "--record".into(),
                d("a.mp4"),
                "--segment".into(),
                "10".into(),
            ],
            "put {seg}",
        ),
        (
            vec![
                "-i".into(),
                a.clone(),
                "--record".into(),
                d("no/such/a.mp4"),
            ],
            "does not exist",
        ),
        (
            vec![
                "-i".into(),
                a.clone(),
                "--record".into(),
                d("a-{seg}.mp4"),
                "--segment".into(),
                "0".into(),
            ],
            "not a length of time",
        ),
    ];
    for (args, says) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = framepipe(&args, Duration::from_secs(20));
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// An RTSP server on loopback (GStreamer's, as cameras serve): `mounts` streams of `clip`
/// (MPEG-TS with H.264) at `/cam0`, `/cam1`, …, each played from its start in real time
/// when a client asks for it. It prints "ready" once it listens.
const RTSP_SERVER: &str = r#"
import sys, gi
gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import Gst, GstRtspServer, GLib
Gst.init(None)
port, clip, mounts = sys.argv[1], sys.argv[2], int(sys.argv[3])
server = GstRtspServer.RTSPServer()
server.set_address("127.0.0.1")
server.set_service(port)
for m in range(mounts):
    f = GstRtspServer.RTSPMediaFactory()
    f.set_launch(f"( filesrc location={clip} ! tsdemux ! h264parse ! rtph264pay name=pay0 pt=96 config-interval=-1 )")
    server.get_mount_points().add_factory(f"/cam{m}", f)
server.attach(None)
print("ready", flush=True)
GLib.MainLoop().run()
"#;

/// The most B-frames in a row of `camera_clip`'s H.264 (libx264's default).
const B_FRAMES: usize = 3;

/// Each decoded picture of `path`'s video, as its md5 (framemd5), in order.
fn pictures(path: &Path) -> Vec<String> {
    let out = Command::new("ffmpeg")
        .args(["-v", "quiet", "-i"])
        .arg(path)
        .args(["-map", "0:v:0", "-f", "framemd5", "-"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit(',').next().map(|m| m.trim().to_string()))
        .collect()
}

/// The small camera wall of issue 37 on the CPU backend: 6 cameras over loopback UDP and 2
/// served by an RTSP server, 20 s, every one recorded in 5 s segments while the run
/// processes its frames. Nothing is dropped; every segment is closed and playable; the UDP
/// cameras' recordings are what was sent, packet for packet; the RTSP cameras', decoded,
/// are the served clip's pictures in order from a keyframe of its first GOP (FFmpeg's RTSP
/// reader gives a stream's first picture no time, so no file can hold it) to the end of
/// what was served.
#[test]
fn a_small_wall_of_udp_and_rtsp_cameras_is_recorded_whole() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("record-wall");
    let (clip, served) = (dir.join("clip.ts"), dir.join("served.ts"));
    camera_clip(&clip, 20);
    camera_clip(&served, 30); // served longer than the run: no end, no reconnect
    let rtsp_port = common::run::free_port();
    let mut server = Command::new("/usr/bin/python3")
        .args(["-c", RTSP_SERVER, &rtsp_port.to_string()])
        .arg(&served)
        .arg("2")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready", "the RTSP server did not start");
    let ports: Vec<u16> = (0..6).map(|_| common::run::free_port()).collect();
    let summary = dir.join("summary.json");
    let mut args = vec!["--record".to_string()];
    args.push(dir.join("cam-{n}-{seg}.ts").display().to_string());
    args.extend([
        "--segment".into(),
        "5".into(),
        "--backend".into(),
        "cpu".into(),
    ]);
    args.extend(["--summary-json".into(), summary.display().to_string()]);
    for &p in &ports {
        args.extend(["-i".into(), udp_input(p)]);
    }
    for m in 0..2 {
        // Over TCP (FFmpeg's `?tcp`), as a camera behind a lossy link is read: RTP over
        // UDP may lose packets, and the test is of framepipe, not of the link.
        args.extend([
            "-i".into(),
            format!("rtsp://127.0.0.1:{rtsp_port}/cam{m}?tcp"),
        ]);
    }
    let child = start(&args);
    let senders: Vec<Child> = ports.iter().map(|&p| send(&clip, p)).collect();
    for mut s in senders {
        assert!(s.wait().unwrap().success());
    }
    let err = stop(child);
    let _ = server.kill();
    let _ = server.wait();
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    for (n, input) in s["inputs"].as_array().unwrap().iter().enumerate() {
        assert_eq!(
            input["dropped"], 0,
            "camera {n} dropped frames: {input}\n{err}"
        );
        assert!(
            input["captured"].as_u64().unwrap() >= 590,
            "camera {n}: {input}"
        );
    }
    let sent_video = packets(&clip, "v");
    assert_eq!(sent_video.len(), 600);
    for n in 0..6 {
        let files = recordings(dir.path(), n);
        assert!(files.len() >= 4, "camera {n}: {files:?}\n{err}");
        let video: Vec<_> = files.iter().flat_map(|f| packets(f, "v")).collect();
        assert!(
            video.len() + 1 >= 600,
            "camera {n}: {} packets\n{err}",
            video.len()
        );
        assert_eq!(
            video,
            sent_video[..video.len()],
            "camera {n}: the video as sent"
        );
    }
    let served_pictures = pictures(&served);
    for n in 6..8 {
        let files = recordings(dir.path(), n);
        assert!(files.len() >= 4, "camera {n}: {files:?}\n{err}");
        let got: Vec<String> = files.iter().flat_map(|f| pictures(f)).collect();
        let at = served_pictures
            .iter()
            .position(|p| got.first() == Some(p))
            .unwrap_or_else(|| panic!("camera {n}: its first picture was not served\n{err}"));
        assert!(at <= 30, "camera {n}: its recording starts at picture {at}");
        // The run stopped mid-stream: the last few pictures recorded may be B-frames whose
        // later reference came after the stop, which no decoder can make whole. Every one
        // before them is what was served.
        let whole = got.len().saturating_sub(B_FRAMES);
        let want = &served_pictures[at..(at + got.len()).min(served_pictures.len())];
        let first_off = got[..whole].iter().zip(want).position(|(a, b)| a != b);
        assert!(
            first_off.is_none() && want.len() == got.len(),
            "camera {n}: {} pictures from {at}; the first that differs from what was served: {first_off:?}",
            got.len()
        );
        assert!(
            at + got.len() >= 590,
            "camera {n}: {} pictures from {at}",
            got.len()
        );
    }
    for f in std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
    {
        let name = f.file_name().to_string_lossy().to_string();
        assert!(!name.ends_with(".part"), "unfinished: {name}");
        if name.starts_with("cam-") {
            assert!(common::probe::codec_and_frames(&f.path()).1 > 0, "{name}");
        }
    }
}
