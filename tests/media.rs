//! What a video output keeps of its input, checked with ffprobe on clips made by ffmpeg:
//! the audio streams (copied, in sync, cut with the video), the exact rate (30000/1001),
//! every frame's presentation time (a variable-rate clip), and the orientation (a display
//! matrix of 90, 180 or 270 degrees comes out upright, as ffmpeg shows it); a part cut with
//! `--ss`/`-t` is ffmpeg's frames.
#![cfg(feature = "opencv")]

use crate::common;
use crate::common::probe::json;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::run::{framepipe, require, stderr, TempDir};

/// An H.264 clip of the test pattern (`size`, `rate`) with AAC audio (a sine), `secs` long.
fn clip_with_audio(path: &Path, size: &str, rate: &str, secs: u32) {
    let video = format!("testsrc2=s={size}:r={rate}:d={secs}");
    let audio = format!("sine=f=440:d={secs}");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        &video,
        "-f",
        "lavfi",
        "-i",
        &audio,
        "-c:v",
        "libx264",
        "-c:a",
        "aac",
        "-shortest",
        path.to_str().unwrap(),
    ]);
}

fn ffmpeg(args: &[&str]) {
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-y"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "ffmpeg {args:?}: {}", stderr(&out));
}

/// (codec_type, codec_name, r_frame_rate) of every stream.
fn streams(path: &Path) -> Vec<(String, String, String)> {
    let v = json(
        path,
        &["-show_entries", "stream=codec_type,codec_name,r_frame_rate"],
    );
    v["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let f = |k: &str| s[k].as_str().unwrap_or_default().to_string();
            (f("codec_type"), f("codec_name"), f("r_frame_rate"))
        })
        .collect()
}

/// The presentation times of the video frames (or the audio packets), seconds.
fn times(path: &Path, stream: &str) -> Vec<f64> {
    let (kind, what) = if stream == "a" {
        ("-show_entries", "packet=pts_time")
    } else {
        ("-show_entries", "frame=pts_time")
    };
    let mut args = vec!["-select_streams", stream, kind, what];
    if stream == "a" {
        args.insert(0, "-show_packets");
    }
    let v = json(path, &args);
    let list = if stream == "a" {
        &v["packets"]
    } else {
        &v["frames"]
    };
    let mut t: Vec<f64> = list
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f["pts_time"].as_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    t.sort_by(f64::total_cmp);
    t
}

/// `input` written headless to `dir/name` with the defaults: the file and what was said.
fn written(dir: &TempDir, input: &Path, name: &str) -> (std::path::PathBuf, String) {
    let out = dir.join(name);
    let err = run_ok(&[
        "-i",
        input.to_str().unwrap(),
        "--headless",
        "-o",
        out.to_str().unwrap(),
    ]);
    (out, err)
}

fn run_ok(args: &[&str]) -> String {
    let out = framepipe(args, Duration::from_secs(120));
    let err = stderr(&out);
    assert!(out.status.success(), "framepipe {args:?}:\n{err}");
    err
}

/// Every time of `got` within `tolerance` of the same frame's in `want`.
fn same_times(want: &[f64], got: &[f64], tolerance: f64, what: &str) {
    assert_eq!(want.len(), got.len(), "{what}: frame counts differ");
    for (i, (a, b)) in want.iter().zip(got).enumerate() {
        assert!(
            (a - b).abs() <= tolerance,
            "{what}: frame {i} at {b} s, the input's at {a} s"
        );
    }
}

#[test]
fn audio_rate_and_frame_times_are_kept() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("media-av");
    let input = dir.join("in.mp4");
    clip_with_audio(&input, "640x360", "30000/1001", 4);
    let frame = 1001.0 / 30000.0;
    let video_in = times(&input, "v");
    let audio_in = times(&input, "a");
    for (name, codec) in [
        ("out.mp4", "h264"),
        ("out.mkv", "h264"),
        ("out.mov", "h264"),
    ] {
        let out = dir.join(name);
        run_ok(&[
            "-i",
            input.to_str().unwrap(),
            "--headless",
            "--filter",
            "invert",
            "-o",
            out.to_str().unwrap(),
        ]);
        let s = streams(&out);
        assert_eq!(
            s[0],
            ("video".into(), codec.into(), "30000/1001".into()),
            "{name}: {s:?}"
        );
        assert_eq!(
            (s[1].0.as_str(), s[1].1.as_str()),
            ("audio", "aac"),
            "{name}: {s:?}"
        );
        // A container that can't start below 0 (Matroska) shifts every stream by the AAC
        // priming delay, as ffmpeg's muxer does: times are compared after that shift.
        let video_out = times(&out, "v");
        let shift = video_out[0] - video_in[0];
        assert!(
            (0.0..=frame).contains(&shift),
            "{name}: shifted by {shift} s"
        );
        let unshift = |t: Vec<f64>| t.iter().map(|t| t - shift).collect::<Vec<_>>();
        same_times(&video_in, &unshift(video_out), frame / 2.0, name);
        // The audio packets are the input's, at the input's times: in sync within one frame.
        let audio_out = unshift(times(&out, "a"));
        same_times(&audio_in, &audio_out, frame, &format!("{name} audio"));
    }
    // --no-audio, and a stop after 30 frames: the audio ends with the video.
    let out = dir.join("silent.mp4");
    run_ok(&[
        "-i",
        input.to_str().unwrap(),
        "--headless",
        "--no-audio",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(streams(&out).len(), 1);
    let out = dir.join("short.mp4");
    run_ok(&[
        "-i",
        input.to_str().unwrap(),
        "--headless",
        "--frames",
        "30",
        "-o",
        out.to_str().unwrap(),
    ]);
    let audio = times(&out, "a");
    let end = 30.0 * frame;
    assert!(
        audio.last().is_some_and(|t| *t < end && *t > end - 0.1),
        "audio of a 30-frame output ends at {:?}, the video at {end}",
        audio.last()
    );
    let written = |name: &str| written(&dir, &input, name);
    // .avi can't hold AAC: said, and the video is written.
    let (out, err) = written("out.avi");
    assert!(err.contains("can't hold the input's aac audio"), "{err}");
    assert_eq!(streams(&out).len(), 1);
    // .webm can't hold AAC either, but Opus: encoded again, as ffmpeg does.
    let (out, err) = written("out.webm");
    assert!(err.contains("it is encoded to Opus"), "{err}");
    // Encoded, so not said to be copied as it is.
    assert!(!err.contains("copied as they are"), "{err}");
    assert!(
        streams(&out)
            .iter()
            .any(|s| s.0 == "audio" && s.1 == "opus"),
        "{:?}",
        streams(&out)
    );
    assert!(times(&out, "a").len() > 10);
    println!("audio and times kept in mp4, mkv, mov; --no-audio; cut at --frames; avi refused with a warning; webm encoded to Opus");
}

/// An encoder option the encoder lacks is said as such, once: not as audio the file could
/// not take (the retry without the audio fails the same way), and nothing is left behind.
#[test]
fn a_bad_encoder_option_beside_audio_is_said_as_itself() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("media-bad-opt");
    let input = dir.join("in.mp4");
    clip_with_audio(&input, "160x120", "25", 1);
    let out = dir.join("out.mp4");
    let run = framepipe(
        &[
            "-i",
            input.to_str().unwrap(),
            "--headless",
            "--codec-opt",
            "nosuch=1",
            "-o",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    let err = stderr(&run);
    assert!(!run.status.success(), "{err}");
    assert!(err.contains("has no option 'nosuch'"), "{err}");
    assert!(!err.contains("audio"), "{err}");
    assert!(!out.exists(), "{err}");
}

#[test]
fn a_variable_frame_rate_keeps_every_frame_time() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("media-vfr");
    let input = dir.join("vfr.mp4");
    // 150 frames at 30 fps, then 50 at 10 fps.
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=s=320x240:r=30:d=5",
        "-f",
        "lavfi",
        "-i",
        "testsrc2=s=320x240:r=10:d=5",
        "-filter_complex",
        "[0][1]concat=n=2:v=1:a=0[v]",
        "-map",
        "[v]",
        "-fps_mode",
        "vfr",
        "-c:v",
        "libx264",
        input.to_str().unwrap(),
    ]);
    let want = times(&input, "v");
    assert!(want.len() >= 199, "{}", want.len());
    for name in ["out.mp4", "out.mkv", "out.mov"] {
        let out = dir.join(name);
        run_ok(&[
            "-i",
            input.to_str().unwrap(),
            "--headless",
            "-o",
            out.to_str().unwrap(),
        ]);
        let got = times(&out, "v");
        // Half of the shorter frame duration (1/30 s).
        same_times(&want, &got, 1.0 / 60.0, name);
        assert!(
            (got[150] - 5.0).abs() < 0.02,
            "{name}: frame 150 at {} s",
            got[150]
        );
    }
}

#[test]
fn rotated_clips_come_out_the_right_way_up() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("media-rot");
    let plain = dir.join("plain.mp4");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=s=320x240:r=30:d=1",
        "-c:v",
        "libx264",
        "-pix_fmt",
        "yuv420p",
        plain.to_str().unwrap(),
    ]);
    for degrees in [90, 180, 270] {
        let clip = dir.join(&format!("r{degrees}.mp4"));
        // FFmpeg 6 and later set a display matrix themselves; FFmpeg 5 can't, so the track
        // header is patched the way phones write it.
        let made = Command::new("ffmpeg")
            .args([
                "-v",
                "error",
                "-y",
                "-display_rotation",
                &degrees.to_string(),
                "-i",
            ])
            .args([
                plain.to_str().unwrap(),
                "-c",
                "copy",
                clip.to_str().unwrap(),
            ])
            .stdin(Stdio::null())
            .output()
            .is_ok_and(|o| o.status.success());
        if !made {
            std::fs::copy(&plain, &clip).unwrap();
            common::run::set_rotation(&clip, degrees);
        }
        // What ffmpeg shows: its first frame, turned by ffmpeg.
        let want = dir.join(&format!("ffmpeg{degrees}.png"));
        ffmpeg(&[
            "-i",
            clip.to_str().unwrap(),
            "-frames:v",
            "1",
            want.to_str().unwrap(),
        ]);
        let seq = dir.join(&format!("fp{degrees}/%02d.png"));
        run_ok(&[
            "-i",
            clip.to_str().unwrap(),
            "--headless",
            "--frames",
            "1",
            "-o",
            seq.to_str().unwrap(),
        ]);
        let read = |p: &Path| {
            opencv::imgcodecs::imread(p.to_str().unwrap(), opencv::imgcodecs::IMREAD_COLOR).unwrap()
        };
        let (a, b) = (read(&want), read(&dir.join(&format!("fp{degrees}/00.png"))));
        use opencv::prelude::*;
        assert_eq!(
            (a.cols(), a.rows()),
            (b.cols(), b.rows()),
            "{degrees}: sizes"
        );
        let mut diff = opencv::core::Mat::default();
        opencv::core::absdiff(&a, &b, &mut diff).unwrap();
        let mut max = 0.0;
        opencv::core::min_max_loc(
            &diff.reshape(1, 0).unwrap(),
            None,
            Some(&mut max),
            None,
            None,
            &opencv::core::no_array(),
        )
        .unwrap();
        // ffmpeg turns YUV into RGB with libswscale, framepipe with OpenCV's cvtColor
        // arithmetic: the two round differently by a few levels. (The planes themselves are
        // turned exactly: tests/decode.rs compares them bit for bit.)
        assert!(
            max <= 4.0,
            "{degrees}: framepipe's frame differs from ffmpeg's by up to {max}"
        );
        // A video output is upright too, with no matrix left to turn it again.
        let out = dir.join(&format!("out{degrees}.mp4"));
        run_ok(&[
            "-i",
            clip.to_str().unwrap(),
            "--headless",
            "-o",
            out.to_str().unwrap(),
        ]);
        let v = json(
            &out,
            &["-show_entries", "stream=width,height:stream_side_data"],
        );
        let s = &v["streams"][0];
        let turned = degrees != 180;
        assert_eq!(
            (s["width"].as_u64(), s["height"].as_u64()),
            if turned {
                (Some(240), Some(320))
            } else {
                (Some(320), Some(240))
            },
            "{degrees}: {v}"
        );
        assert!(s.get("side_data_list").is_none(), "{degrees}: {v}");
    }
    println!("90, 180 and 270 degree display matrices: framepipe's frames equal ffmpeg's");
}

/// `.ts` and `.flv` are files too (what an NVR or an RTMP server records): every frame of
/// the input, H.264, its AAC audio copied packet for packet, and ffmpeg decodes them clean.
#[test]
fn ts_and_flv_files_keep_every_frame_and_the_audio() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("ts-flv-files");
    let input = dir.join("in.mp4");
    clip_with_audio(&input, "320x240", "30", 2);
    let audio_in = times(&input, "a").len();
    for name in ["out.ts", "out.flv"] {
        let (out, err) = written(&dir, &input, name);
        assert!(err.contains("audio stream(s) are copied"), "{name}: {err}");
        assert_eq!(
            crate::common::probe::codec_and_frames(&out),
            ("h264".to_string(), 60),
            "{name}"
        );
        assert_eq!(times(&out, "a").len(), audio_in, "{name}: audio packets");
        let decoded = Command::new("ffmpeg")
            .args(["-v", "error", "-i"])
            .arg(&out)
            .args(["-f", "null", "-"])
            .output()
            .unwrap();
        assert!(
            decoded.status.success() && decoded.stderr.is_empty(),
            "{name}: {}",
            String::from_utf8_lossy(&decoded.stderr)
        );
    }
}

/// The pictures' MD5s of `path` decoded by ffmpeg, with `before` as ffmpeg's input options
/// (or `-vf FILTER`).
fn picture_md5s(before: &[&str], path: &Path) -> Vec<String> {
    // `-vf` goes after the input, the rest before it.
    let (filters, before): (Vec<&str>, Vec<&str>) = match before {
        ["-vf", f] => (vec!["-vf", f], vec![]),
        other => (vec![], other.to_vec()),
    };
    let out = Command::new("ffmpeg")
        .args(["-v", "error"])
        .args(before)
        .arg("-i")
        .arg(path)
        .args(filters)
        .args(["-an", "-f", "framemd5", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit(',').next().map(|s| s.trim().to_string()))
        .collect()
}

/// `--ss 3.2 -t 1` (and `--to 4.2`, and 00:00:03.200) are ffmpeg's `-ss 3.2 -t 1`: the same
/// frames, from the keyframe at 3 s decoded and dropped up to 3.2; a file written of it
/// starts at 0, its audio too, and lasts a second.
#[test]
fn a_cut_gives_exactly_ffmpegs_frames() {
    let dir = TempDir::new("media-cut");
    let clip = dir.join("clip.mp4");
    let video = "testsrc2=s=320x240:r=30:d=8";
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        video,
        "-f",
        "lavfi",
        "-i",
        "sine=f=440:d=8",
        "-c:v",
        "libx264",
        "-g",
        "30",
        "-c:a",
        "aac",
        "-shortest",
        clip.to_str().unwrap(),
    ]);
    let want = picture_md5s(&["-ss", "3.2", "-t", "1"], &clip);
    assert_eq!(want.len(), 30);
    let c = clip.to_str().unwrap();
    for cut in [
        &["--ss", "3.2", "-t", "1"][..],
        &["--ss", "3.2", "--to", "4.2"],
        &["--ss", "00:00:03.200", "-t", "0:01"],
    ] {
        let y4m = dir.join("cut.y4m");
        let out = Command::new(common::run::bin())
            .args(["-i", c, "--headless", "-o", "-"])
            .args(cut)
            .stdout(std::fs::File::create(&y4m).unwrap())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(picture_md5s(&[], &y4m), want, "{cut:?}");
    }
    let cut = dir.join("cut.mp4");
    run_ok(&[
        "-i",
        c,
        "--headless",
        "--ss",
        "3.2",
        "-t",
        "1",
        "-o",
        cut.to_str().unwrap(),
    ]);
    let (video, audio) = (times(&cut, "v:0"), times(&cut, "a"));
    assert_eq!(video.len(), 30);
    assert!(
        video[0].abs() < 1e-6 && (video[29] - 29.0 / 30.0).abs() < 1e-3,
        "{video:?}"
    );
    assert!(
        audio[0].abs() < 0.025 && *audio.last().unwrap() < 1.0,
        "{audio:?}"
    );
    // What can't be cut is said.
    for (args, says) in [
        (
            &["-i", "pattern", "--ss", "1", "--headless"][..],
            "not to the test pattern",
        ),
        (
            &["-i", c, "--ss", "2", "--to", "1", "--headless"],
            "is not after --ss",
        ),
        (
            &["-i", c, "--ss", "99", "--headless"],
            "has no frame in the part",
        ),
        (&["-i", c, "--ss", "1:75", "--headless"], "is not a time"),
    ] {
        let out = framepipe(args, Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

/// `fps:N` drops and repeats frames by their times as ffmpeg's `fps` filter does: the same
/// pictures at 12, 25, 60 and 29.97 a second from a 30 fps file; a file written so has N as
/// its rate, N a second of frames, and the audio.
#[test]
fn a_rate_change_gives_ffmpegs_frames() {
    let dir = TempDir::new("media-fps");
    let clip = dir.join("clip.mp4");
    clip_with_audio(&clip, "320x240", "30", 4);
    let c = clip.to_str().unwrap();
    for rate in ["12", "25", "60", "29.97"] {
        let want = picture_md5s(&["-vf", &format!("fps={rate}")], &clip);
        let y4m = dir.join("rate.y4m");
        let out = Command::new(common::run::bin())
            .args([
                "-i",
                c,
                "--headless",
                "-o",
                "-",
                "--filter",
                &format!("fps:{rate}"),
            ])
            .stdout(std::fs::File::create(&y4m).unwrap())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(picture_md5s(&[], &y4m), want, "fps:{rate}");
    }
    let file = dir.join("rate.mp4");
    run_ok(&[
        "-i",
        c,
        "--headless",
        "--filter",
        "gray,fps:12",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert_eq!(times(&file, "v:0").len(), 48);
    assert!(streams(&file).contains(&("video".into(), "h264".into(), "12/1".into())));
    assert!(!times(&file, "a").is_empty());
}
