//! Streams out, with real peers on loopback: ffmpeg listening for MPEG-TS over UDP and SRT,
//! for RTMP (`-listen 1`) and for an RTSP publisher (`-rtsp_flags listen`), each counted
//! with ffprobe; a peer killed mid-run while a file is written beside the stream; a peer that
//! never reads and Ctrl-C; an HLS playlist played end to end; a file with sound paced to
//! UDP, SRT, RTMP (nginx with libnginx-mod-rtmp, recording what it is sent) and HLS.
#![cfg(feature = "opencv")]

use crate::common;
use crate::common::probe::codec_and_frames;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::run::{
    bin, framepipe_in, free_port, have, require, stderr, wait_with_deadline, TempDir,
};

/// ffmpeg receiving `url` (listening) into `file`, stream copied.
fn listener(input: &[&str], file: &std::path::Path) -> Child {
    Command::new("ffmpeg")
        .args(["-v", "error", "-y"])
        .args(input)
        .args(["-c", "copy"])
        .arg(file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_for(mut child: Child, limit: Duration) {
    let start = Instant::now();
    while start.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn every_kind_of_stream_delivers_every_frame() {
    assert!(
        have("ffmpeg") && have("ffprobe"),
        "scripts/test.sh installs ffmpeg"
    );
    let dir = TempDir::new("streams-kinds");
    for kind in ["udp", "srt", "rtmp", "rtsp"] {
        let port = free_port();
        let got = dir.join(&format!("{kind}.mkv"));
        let (listen, url): (Vec<String>, String) = match kind {
            // UDP has no end: the listener stops after 2 s without a packet.
            "udp" => (
                vec![
                    "-i".into(),
                    format!("udp://127.0.0.1:{port}?timeout=2000000"),
                ],
                format!("udp://127.0.0.1:{port}"),
            ),
            "srt" => (
                vec!["-i".into(), format!("srt://127.0.0.1:{port}?mode=listener")],
                format!("srt://127.0.0.1:{port}"),
            ),
            "rtmp" => (
                vec![
                    "-listen".into(),
                    "1".into(),
                    "-i".into(),
                    format!("rtmp://127.0.0.1:{port}/live/x"),
                ],
                format!("rtmp://127.0.0.1:{port}/live/x"),
            ),
            _ => (
                vec![
                    "-rtsp_flags".into(),
                    "listen".into(),
                    "-i".into(),
                    format!("rtsp://127.0.0.1:{port}/live"),
                ],
                format!("rtsp://127.0.0.1:{port}/live"),
            ),
        };
        let args: Vec<&str> = listen.iter().map(String::as_str).collect();
        let peer = listener(&args, &got);
        common::run::wait_bound(port, kind);
        let run = framepipe_in(
            dir.path(),
            &[
                "--headless",
                "--backend",
                "cpu",
                "--input",
                "pattern:320x240:25",
                "--frames",
                "50",
                "--output",
                &url,
            ],
            Duration::from_secs(60),
        );
        assert!(run.status.success(), "{kind}: {}", stderr(&run));
        wait_for(peer, Duration::from_secs(10));
        let (codec, frames) = codec_and_frames(&got);
        assert_eq!(codec, "h264", "{kind}");
        assert_eq!(
            frames,
            50,
            "{kind}: the peer got {frames} of 50 frames\n{}",
            stderr(&run)
        );
    }
}

/// The peer goes away mid-run and comes back: the stream connects again while a file
/// written beside it keeps every frame.
#[test]
fn a_lost_peer_is_connected_to_again_while_the_file_stays_whole() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("streams-reconnect");
    let port = free_port();
    let url = format!("rtmp://127.0.0.1:{port}/live/x");
    let first = listener(&["-listen", "1", "-i", &url], &dir.join("first.flv"));
    common::run::wait_bound(port, "the first peer");
    let child = pattern_run(&dir, 25)
        .args(["--frames", "150", "--codec", "h264"])
        .args(["--output", &url, "--output", "beside.mp4"])
        .args(["--summary-json", "s.json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let mut first = first;
    first.kill().unwrap();
    first.wait().unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let second = listener(&["-listen", "1", "-i", &url], &dir.join("second.flv"));
    let out = wait_with_deadline(child, Duration::from_secs(30), "reconnect");
    wait_for(second, Duration::from_secs(10));
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("connected again"), "{err}");
    let (_, whole) = codec_and_frames(&dir.join("beside.mp4"));
    assert_eq!(whole, 150, "the file beside the stream lost frames\n{err}");
    let (_, after) = codec_and_frames(&dir.join("second.flv"));
    assert!(after > 20, "the second peer got {after} frames\n{err}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("s.json")).unwrap()).unwrap();
    let stream = &summary["streams"][0];
    assert_eq!(stream["taken"], 150, "{summary}");
    assert!(stream["reconnects"].as_u64().unwrap() >= 1, "{summary}");
    assert!(stream["dropped"].as_u64().unwrap() > 0, "{summary}");
}

/// A peer that takes the connection and never reads: frames are dropped, not waited for,
/// and Ctrl-C ends the run within about a second with the file beside it finalized.
#[test]
fn a_peer_that_never_reads_does_not_hold_the_run() {
    let dir = TempDir::new("streams-stalled");
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let holder = std::thread::spawn(move || {
        // Accept, then never read or answer (the RTMP handshake never completes).
        let conns: Vec<_> = server.incoming().take(1).collect();
        std::thread::sleep(Duration::from_secs(8));
        drop(conns);
    });
    let child = pattern_run(&dir, 25)
        .args(["--output", &format!("rtmp://127.0.0.1:{port}/live/x")])
        .args(["--output", "beside.mkv", "--summary-json", "s.json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2000));
    let asked = Instant::now();
    common::run::interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(5), "stalled peer");
    let took = asked.elapsed();
    let err = stderr(&out);
    // A peer that never completed its handshake was never connected: the run fails for
    // it (as ffmpeg's does), but ends on time with the file beside it whole.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("never connected"), "{err}");
    assert!(took < Duration::from_millis(1500), "took {took:?}\n{err}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("s.json")).unwrap()).unwrap();
    assert_eq!(summary["ok"], false, "{summary}");
    let written = summary["frames"]["written"].as_u64().unwrap();
    // The run kept the pattern's 25 fps over its own time (about 50 frames in 2 s; a start
    // slowed by other tests shortens the run, not its rate).
    let elapsed = summary["elapsed_s"].as_f64().unwrap();
    assert!(written >= 20, "{summary}");
    assert!(written as f64 >= 0.9 * 25.0 * elapsed - 1.0, "{summary}");
    let (_, frames) = codec_and_frames(&dir.join("beside.mkv"));
    assert_eq!(frames, written, "{err}");
    // Nothing reached the peer, and every frame is counted as dropped (but those still
    // queued when the stop came: at most the queue's 8).
    let stream = &summary["streams"][0];
    assert_eq!(stream["sent"], 0, "{summary}");
    let (dropped, taken) = (
        stream["dropped"].as_u64().unwrap(),
        stream["taken"].as_u64().unwrap(),
    );
    // The stream was handed every frame the file got, as the run went.
    assert!(dropped + 8 >= taken && taken >= written, "{summary}");
    holder.join().unwrap();
}

#[test]
fn an_hls_playlist_plays_end_to_end() {
    require(&["ffprobe"]);
    let dir = TempDir::new("streams-hls");
    let run = framepipe_in(
        dir.path(),
        &[
            "--headless",
            "--backend",
            "cpu",
            "--input",
            "pattern:320x240:25",
            "--frames",
            "125",
            "--output",
            "live/index.m3u8",
        ],
        Duration::from_secs(60),
    );
    assert!(run.status.success(), "{}", stderr(&run));
    let playlist = std::fs::read_to_string(dir.join("live/index.m3u8")).unwrap();
    assert!(playlist.contains("#EXT-X-ENDLIST"), "{playlist}");
    let segments: Vec<_> = playlist.lines().filter(|l| l.ends_with(".ts")).collect();
    assert!(segments.len() >= 3, "{playlist}");
    let leftovers: Vec<_> = std::fs::read_dir(dir.join("live"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let (codec, frames) = codec_and_frames(&dir.join("live/index.m3u8"));
    assert_eq!((codec.as_str(), frames), ("h264", 125));
    // Again without -y: the playlist is there, and is not replaced.
    let again = framepipe_in(
        dir.path(),
        &[
            "--headless",
            "--backend",
            "cpu",
            "--input",
            "pattern:320x240:25",
            "--frames",
            "5",
            "--output",
            "live/index.m3u8",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("replaced only with -y"),
        "{}",
        stderr(&again)
    );
}

/// An SRT peer killed and started again: what the summary says was sent is what the two
/// peers got (within a second of frames), not what was handed to the connection while the
/// dead peer went unnoticed.
#[test]
fn a_killed_srt_peer_counts_its_lost_frames_as_dropped() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("streams-srt-killed");
    let port = free_port();
    let receive = |file: &str| {
        let url = format!("srt://127.0.0.1:{port}?mode=listener");
        listener(
            &[
                "-probesize",
                "32",
                "-analyzeduration",
                "0",
                "-i",
                &url,
                "-f",
                "mpegts",
            ],
            &dir.join(file),
        )
    };
    let mut first = receive("first.ts");
    common::run::wait_bound(port, "the first srt peer");
    let child = pattern_run(&dir, 30)
        .args(["--output", &format!("srt://127.0.0.1:{port}")])
        .args(["--summary-json", "s.json"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    first.kill().unwrap();
    first.wait().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let second = receive("second.ts");
    std::thread::sleep(Duration::from_secs(8));
    common::run::interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(10), "srt killed");
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill with a child's pid and SIGINT has no memory preconditions.
    unsafe { libc::kill(second.id() as i32, libc::SIGINT) };
    wait_for(second, Duration::from_secs(10));
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let got =
        codec_and_frames(&dir.join("first.ts")).1 + codec_and_frames(&dir.join("second.ts")).1;
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("s.json")).unwrap()).unwrap();
    let sent = summary["streams"][0]["sent"].as_u64().unwrap();
    println!("the peers got {got} frames; the summary says {sent} sent");
    assert!(got > 100, "the peers got {got}:\n{err}");
    assert!(
        sent <= got + 30 && sent + 30 >= got,
        "{sent} sent, {got} received:\n{err}"
    );
}

/// framepipe in `dir`, headless on the CPU backend, over the 320x240 pattern at `fps`.
fn pattern_run(dir: &TempDir, fps: u32) -> Command {
    let mut run = Command::new(bin());
    run.current_dir(dir.path()).args([
        "--headless",
        "--backend",
        "cpu",
        "--input",
        &format!("pattern:320x240:{fps}"),
    ]);
    run
}

const NGINX: &str = "/usr/sbin/nginx";

/// nginx with libnginx-mod-rtmp on loopback, recording what is published to `live/NAME`
/// into `dir/NAME.flv`; the server and its port.
fn nginx_rtmp(dir: &std::path::Path) -> (Child, u16) {
    let port = free_port();
    let conf = dir.join("nginx.conf");
    let d = dir.display();
    std::fs::write(
        &conf,
        format!(
            "daemon off;\nmaster_process off;\nerror_log {d}/nginx-error.log;\npid {d}/nginx.pid;\n\
             load_module /usr/lib/nginx/modules/ngx_rtmp_module.so;\nevents {{}}\n\
             rtmp {{ server {{ listen 127.0.0.1:{port}; application live {{ live on; \
             record all; record_path {d}; record_unique off; }} }} }}\n"
        ),
    )
    .unwrap();
    // Debian's nginx is in /usr/sbin, which a user's PATH may lack.
    assert!(
        std::path::Path::new(NGINX).exists(),
        "scripts/test.sh installs nginx-light and libnginx-mod-rtmp"
    );
    let child = Command::new(NGINX)
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "nginx did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, port)
}

/// Each stream's packets' timestamps, seconds: (video, audio).
fn packet_times(path: &std::path::Path) -> (Vec<f64>, Vec<f64>) {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-show_entries", "packet=codec_type,pts_time"])
        .args(["-of", "csv=p=0"])
        .arg(path)
        .output()
        .unwrap();
    let (mut video, mut audio) = (Vec::new(), Vec::new());
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut it = line.split(',');
        let (Some(kind), Some(Ok(t))) = (it.next(), it.next().map(str::parse::<f64>)) else {
            continue;
        };
        match kind {
            "video" => video.push(t),
            "audio" => audio.push(t),
            _ => {}
        }
    }
    (video, audio)
}

/// A file with sound sent to UDP, SRT, RTMP (nginx) and HLS at once: paced by default (its
/// only outputs are live), each peer gets every frame and every audio packet of the time the
/// video covers, and sound and picture start together as they do in the file.
#[test]
fn a_paced_file_reaches_every_kind_of_stream_whole_with_its_audio() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("streams-audio");
    let clip = dir.join("clip.mp4");
    crate::record::camera_clip(&clip, 10);
    let (video_in, audio_in) = packet_times(&clip);
    let last = video_in.iter().cloned().fold(f64::MIN, f64::max) + 1.0 / 30.0;
    let audio_want = audio_in.iter().filter(|t| **t < last).count();
    let offset_in = audio_in[0] - video_in.iter().cloned().fold(f64::MAX, f64::min);
    let (udp, srt) = (free_port(), free_port());
    let peers = [
        listener(
            &["-i", &format!("udp://127.0.0.1:{udp}?timeout=3000000")],
            &dir.join("udp.ts"),
        ),
        listener(
            &["-i", &format!("srt://127.0.0.1:{srt}?mode=listener")],
            &dir.join("srt.ts"),
        ),
    ];
    let (mut nginx, rtmp) = nginx_rtmp(dir.path());
    for (port, what) in [(udp, "udp"), (srt, "srt"), (rtmp, "nginx")] {
        common::run::wait_bound(port, what);
    }
    let urls = [
        format!("udp://127.0.0.1:{udp}"),
        format!("srt://127.0.0.1:{srt}"),
        format!("rtmp://127.0.0.1:{rtmp}/live/cam"),
        "hls/index.m3u8".to_string(),
    ];
    let mut args = vec!["--headless", "--backend", "cpu", "-i", "clip.mp4"];
    for u in &urls {
        args.extend(["--output", u.as_str()]);
    }
    let run = framepipe_in(dir.path(), &args, Duration::from_secs(60));
    let err = stderr(&run);
    assert!(run.status.success(), "{err}");
    assert!(err.contains("is read at its own rate"), "{err}");
    for p in peers {
        wait_for(p, Duration::from_secs(10));
    }
    let _ = nginx.kill();
    let _ = nginx.wait();
    for got in ["udp.ts", "srt.ts", "cam.flv", "hls/index.m3u8"] {
        let (video, audio) = packet_times(&dir.join(got));
        assert_eq!(
            video.len(),
            300,
            "{got}: {} of 300 frames\n{err}",
            video.len()
        );
        assert_eq!(
            audio.len(),
            audio_want,
            "{got}: {} of {audio_want} audio packets\n{err}",
            audio.len()
        );
        let first_video = video.iter().cloned().fold(f64::MAX, f64::min);
        let offset = audio[0] - first_video;
        assert!(
            (offset - offset_in).abs() < 0.050,
            "{got}: audio starts {offset:.3} s after the video, {offset_in:.3} s in the file"
        );
    }
}

/// Audio a stream's container can't hold (Opus to FLV and to MPEG-TS over UDP… MPEG-TS
/// holds Opus, so PCM there) is encoded to AAC: each peer gets AAC covering the video's
/// time, starting with it.
#[test]
fn audio_a_stream_cant_hold_is_encoded_to_aac() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("streams-aac");
    for (name, codec) in [("opus.mkv", "libopus"), ("pcm.mov", "pcm_s16le")] {
        crate::record::clip_with_audio_codec(&dir.join(name), 4, codec);
    }
    let udp = free_port();
    let (mut nginx, rtmp) = nginx_rtmp(dir.path());
    let runs = [
        (
            "opus.mkv",
            format!("rtmp://127.0.0.1:{rtmp}/live/cam"),
            "cam.flv",
        ),
        ("pcm.mov", format!("udp://127.0.0.1:{udp}"), "udp.ts"),
    ];
    for (input, url, got) in &runs {
        // UDP's listener stops 3 s after its last packet: it is started just before.
        let peer = (*got == "udp.ts").then(|| {
            let url = format!("udp://127.0.0.1:{udp}?timeout=3000000");
            let p = listener(&["-i", &url], &dir.join("udp.ts"));
            common::run::wait_bound(udp, "udp");
            p
        });
        let args = [
            "--headless",
            "--backend",
            "cpu",
            "-i",
            input,
            "--output",
            url,
        ];
        let run = framepipe_in(dir.path(), &args, Duration::from_secs(60));
        let err = stderr(&run);
        assert!(run.status.success(), "{err}");
        assert!(err.contains("it is encoded to AAC"), "{err}");
        if let Some(p) = peer {
            wait_for(p, Duration::from_secs(10));
        }
    }
    let _ = nginx.kill();
    let _ = nginx.wait();
    for (_, _, got) in &runs {
        let probe = Command::new("ffprobe")
            .args([
                "-v",
                "error",
                "-select_streams",
                "a",
                "-show_entries",
                "stream=codec_name",
            ])
            .args(["-of", "csv=p=0"])
            .arg(dir.join(got))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&probe.stdout);
        let len = std::fs::metadata(dir.join(got)).map(|m| m.len());
        // MPEG-TS lists its streams twice (its program's, then its own).
        let codec = said.lines().find(|l| !l.is_empty());
        assert_eq!(codec, Some("aac"), "{got}: {said:?}, {len:?}");
        let (video, audio) = packet_times(&dir.join(got));
        assert_eq!(video.len(), 120, "{got}");
        // 4 s of 1024-sample frames at 48 kHz: 187.5, and the encoder's own frame at each end.
        assert!(
            (186..=190).contains(&audio.len()),
            "{got}: {} audio packets",
            audio.len()
        );
        let first_video = video.iter().cloned().fold(f64::MAX, f64::min);
        assert!(
            (audio[0] - first_video).abs() < 0.050,
            "{got}: {} against {first_video}",
            audio[0]
        );
    }
}
