//! Live at WebRTC latency (`/whep/…` on the browser view): headless Chromium plays a camera
//! over WHEP through the page (its frames counted, its pixels the source's within the
//! codec's tolerance) and the view's picture, encoded once, and a camera over MSE (`/mse/…`,
//! the fallback); PyPI's aiortc, an independent
//! client, receives a camera's own packets (every frame it decodes is bit for bit one of
//! the source's, as ffmpeg decodes it); bad offers and foreign pages are refused with a
//! reason.
#![cfg(feature = "opencv")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::run::{ffmpeg_made, free_port, http, http_body, require, stderr, TempDir};

/// PyPI's aiortc, in the virtual environment scripts/test.sh makes.
const AIORTC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/target/rtcvenv/bin/python");
const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/whep_client.py");

/// `name`: `seconds` of lavfi's `source` (320x240, 25 fps) as H.264 with a keyframe a second
/// and no B-frames (as a camera sends it), its colours said to be BT.601's (as ffmpeg reads
/// a picture that says nothing; a browser takes BT.709 for one).
fn clip(dir: &TempDir, name: &str, source: &str, seconds: u32) -> PathBuf {
    let path = dir.join(name);
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
        .arg(format!("{source}=s=320x240:r=25:d={seconds}"))
        .args([
            "-c:v", "libx264", "-g", "25", "-bf", "0", "-pix_fmt", "yuv420p",
        ])
        .args(["-colorspace", "smpte170m", "-color_primaries", "smpte170m"])
        .args(["-color_trc", "smpte170m", "-color_range", "tv"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    path
}

/// `name`: 30 s of the moving test picture encoded by `codec` (its name and options).
fn encoded(dir: &TempDir, name: &str, codec: &[&str]) -> PathBuf {
    let path = dir.join(name);
    let options: Vec<&str> = ["-c:v"].iter().chain(codec).copied().collect();
    ffmpeg_made(&path, &["testsrc2=s=320x240:r=25:d=30"], &options);
    path
}

/// The MD5 of each frame ffmpeg decodes of `file` (its framemd5).
fn frame_md5s(file: &Path) -> std::collections::HashSet<String> {
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(file)
        .args(["-f", "framemd5", "-"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit(", ").next().map(str::to_string))
        .collect()
}

/// aiortc's session with `/whep/{name}` for `seconds`, as its script says it.
fn aiortc(port: u16, name: &str, seconds: &str, codec: Option<&str>) -> serde_json::Value {
    let url = format!("http://127.0.0.1:{port}/whep/{name}");
    let out = Command::new("timeout")
        .args(["60", AIORTC, CLIENT, &url, seconds])
        .args(codec)
        .output()
        .unwrap();
    assert!(out.status.success(), "aiortc: {}", stderr(&out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("aiortc said {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn chromium_and_aiortc_play_cameras_and_the_picture_over_whep_and_mse() {
    require(&["ffmpeg", "chromium-headless-shell"]);
    let dir = TempDir::new("whep-whep");
    let bars = clip(&dir, "bars.mp4", "smptebars", 40);
    let moving = clip(&dir, "moving.mp4", "testsrc2", 40);
    let port = free_port();
    let args = [
        "-q",
        "-i",
        bars.to_str().unwrap(),
        "-i",
        moving.to_str().unwrap(),
    ];
    let child = crate::common::run::served(dir.path(), port, &args);
    // aiortc: the moving camera's own packets, every frame decoded equal to one of ffmpeg's.
    let got = aiortc(port, "moving", "3", None);
    assert_eq!(got["status"], 201, "{got}");
    assert_eq!(got["deleted"], 200, "{got}");
    let md5: Vec<&str> = got["md5"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert!(md5.len() >= 40, "{} frames in 3 s", md5.len());
    assert_eq!(got["sizes"], serde_json::json!(["320x240"]));
    let source = frame_md5s(&moving);
    let foreign = md5.iter().filter(|m| !source.contains(**m)).count();
    assert_eq!(foreign, 0, "frames that are not the source's");
    // Chromium: the page plays the picture (the mosaic, encoded once) over WebRTC, then a
    // click on a camera's name plays it alone; its pixels are the bars'.
    let (chromium, devtools) = crate::web::chromium_at(&dir, port);
    let bars_name = "document.querySelector('#inputs tbody tr td.name')";
    let alone = format!(
        "eval:new Promise(ok => {{ const t0 = Date.now(); const tick = () => {{ \
         const cell = {bars_name}; \
         if (cell && framepipe.via) {{ const before = framepipe.via; cell.click(); \
           setTimeout(() => {{ const v = document.getElementById('live'); \
             const c = document.createElement('canvas'); c.width = v.videoWidth; c.height = v.videoHeight; \
             const g = c.getContext('2d'); g.drawImage(v, 0, 0); \
             const px = [[20, 60], [70, 60], [120, 60], [160, 60], [210, 60], [260, 60], [300, 60]].map(([x, y]) => Array.from(g.getImageData(x, y, 1, 1).data.slice(0, 3))); \
             const f0 = framepipe.frames; \
             setTimeout(() => ok(JSON.stringify({{before, via: framepipe.via, watching: framepipe.watching, w: v.videoWidth, h: v.videoHeight, px, frames: framepipe.frames - f0, said: document.getElementById('via').textContent}})), 2000); }}, 3000); }} \
         else if (Date.now() - t0 > 15000) ok(JSON.stringify({{none: document.getElementById('via').textContent}})); else setTimeout(tick, 200); }}; tick(); }})"
    );
    // MSE over the WebSocket, WebRTC's fallback: the moving camera.
    let mse = "eval:framepipe.watch('moving', ['MSE']).then(via => new Promise(ok => { const f0 = framepipe.frames; \
        setTimeout(() => ok(JSON.stringify({via, frames: framepipe.frames - f0, w: document.getElementById('live').videoWidth})), 2000); }))";
    let out = Command::new("timeout")
        .args(["60", "/usr/bin/python3", crate::web::CDP])
        .args([&devtools.to_string(), "sleep:1", &alone, mse])
        .output()
        .unwrap();
    drop(chromium);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "cdp: {said}{}", stderr(&out));
    let mut lines = said.lines().map(|l| {
        let v: serde_json::Value = serde_json::from_str(l.trim()).unwrap();
        serde_json::from_str::<serde_json::Value>(v.as_str().unwrap_or("{}")).unwrap()
    });
    let (seen, mse) = (lines.next().unwrap(), lines.next().unwrap());
    assert_eq!(mse["via"], "MSE", "{mse}");
    assert_eq!(mse["w"], 320, "{mse}");
    // Frames presented in 2 s of a 25 fps camera: it plays (a loaded machine's headless
    // browser shows fewer than all).
    assert!(
        mse["frames"].as_u64().unwrap() >= 10,
        "frames in 2 s over MSE: {mse}"
    );
    assert_eq!(seen["before"], "WebRTC", "the picture over WebRTC: {seen}");
    assert_eq!(seen["via"], "WebRTC", "{seen}");
    assert_eq!(seen["watching"], "bars", "{seen}");
    assert_eq!(
        (seen["w"].as_u64(), seen["h"].as_u64()),
        (Some(320), Some(240)),
        "{seen}"
    );
    assert!(
        seen["frames"].as_u64().unwrap() >= 10,
        "frames in 2 s: {seen}"
    );
    // The bars' colours, as ffmpeg decodes the source's first frame, within the codec's and
    // the colour conversion's tolerance.
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(&bars)
        .args(["-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        .output()
        .unwrap();
    let xs = [20, 70, 120, 160, 210, 260, 300];
    for (k, x) in xs.iter().enumerate() {
        let at = (60 * 320 + x) * 3;
        for c in 0..3 {
            let want = i64::from(out.stdout[at + c]);
            let got = seen["px"][k][c].as_i64().unwrap();
            assert!(
                (want - got).abs() <= 24,
                "x {x}: {seen} against {want} in channel {c}"
            );
        }
    }
    crate::common::run::interrupt(&child);
    let out = crate::common::run::wait_with_deadline(child, Duration::from_secs(5), "the view");
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn bad_offers_and_foreign_pages_are_refused_with_a_reason() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("whep-refused");
    let h264 = clip(&dir, "cam.mp4", "testsrc2", 30);
    let hevc = encoded(
        &dir,
        "hevc.mp4",
        &["libx265", "-x265-params", "log-level=error"],
    );
    let bframes = encoded(&dir, "bframes.mp4", &["libx264", "-bf", "3"]);
    let port = free_port();
    let args = [
        "-q",
        "-i",
        h264.to_str().unwrap(),
        "-i",
        hevc.to_str().unwrap(),
        "-i",
        "pattern:320x240:25",
        "-i",
        bframes.to_str().unwrap(),
    ];
    let child = crate::common::run::served(dir.path(), port, &args);
    let sdp = "Content-Type: application/sdp\r\n";
    let said = |r: (u16, Vec<u8>)| (r.0, String::from_utf8_lossy(&r.1).to_string());
    let (code, why) = said(http_body(port, "POST", "/whep/cam", sdp, "hello"));
    assert_eq!(code, 400, "{why}");
    assert!(why.contains("not an SDP offer"), "{why}");
    assert!(!why.contains('\n'), "one line: {why}");
    let audio_only = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\na=ice-ufrag:abcd\r\na=ice-pwd:abcdefghijklmnopqrstuvwx\r\na=fingerprint:sha-256 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF\r\na=setup:actpass\r\na=recvonly\r\na=rtcp-mux\r\na=rtpmap:111 opus/48000/2\r\n";
    let (code, why) = said(http_body(port, "POST", "/whep/cam", sdp, audio_only));
    assert_eq!(code, 400, "{why}");
    assert!(why.contains("no video"), "{why}");
    let (code, why) = said(http_body(port, "POST", "/whep/nosuch", sdp, "v=0"));
    assert_eq!(
        (code, why.contains("no input 'nosuch'")),
        (404, true),
        "{why}"
    );
    // A stream that is not H.264, and an offer that takes no H.264: 415, with the reason.
    let hevc_said = aiortc(port, "hevc", "0.5", None);
    assert_eq!(hevc_said["status"], 415, "{hevc_said}");
    assert!(
        hevc_said["said"].as_str().unwrap().contains("H.264"),
        "{hevc_said}"
    );
    let vp8 = aiortc(port, "cam", "0.5", Some("VP8"));
    assert_eq!(vp8["status"], 415, "{vp8}");
    // The pattern has no packets of its own: the mosaic is what can be watched.
    let (code, why) = said(http_body(port, "POST", "/whep/2", sdp, "v=0"));
    assert_eq!((code, why.contains("no packets")), (404, true), "{why}");
    // Another site's page may not offer; the view's own page must mark its request.
    let foreign = "Content-Type: application/sdp\r\nOrigin: http://evil.example\r\nSec-Fetch-Site: cross-site\r\n";
    assert_eq!(http_body(port, "POST", "/whep/cam", foreign, "v=0").0, 403);
    let unmarked = format!("Content-Type: application/sdp\r\nOrigin: http://127.0.0.1:{port}\r\n");
    assert_eq!(
        http_body(port, "POST", "/whep/cam", &unmarked, "v=0").0,
        403
    );
    assert_eq!(http(port, "DELETE", "/whep/cam/0000", "").0, 404);
    // Pictures sent out of order (B-frames, as libx264 makes by default): not for WebRTC,
    // whose receivers show pictures in the order they come; MSE plays them.
    let b = aiortc(port, "bframes", "0.5", None);
    assert_eq!(b["status"], 415, "{b}");
    assert!(b["said"].as_str().unwrap().contains("B-frames"), "{b}");
    crate::common::run::interrupt(&child);
    let out = crate::common::run::wait_with_deadline(child, Duration::from_secs(5), "the view");
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_token_is_needed_off_loopback_for_whep_too() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("whep-token");
    let cam = clip(&dir, "cam.mp4", "testsrc2", 30);
    let port = free_port();
    let args = ["-q", "-i", cam.to_str().unwrap(), "--serve-token", "s3cret"];
    let child = crate::common::run::served(dir.path(), port, &args);
    let without = aiortc(port, "cam", "0.5", None);
    assert_eq!(without["status"], 401, "{without}");
    let with = aiortc(port, "cam?token=s3cret", "2", None);
    assert_eq!(with["status"], 201, "{with}");
    assert!(with["frames"].as_u64().unwrap() >= 20, "{with}");
    assert_eq!(with["deleted"], 200, "{with}");
    crate::common::run::interrupt(&child);
    let out = crate::common::run::wait_with_deadline(child, Duration::from_secs(5), "the view");
    assert!(out.status.success(), "{}", stderr(&out));
}

/// `name`: `seconds` of the moving test picture (H.264) with a tone encoded by `audio`
/// (`aac`, `libopus`).
fn clip_with_sound(dir: &TempDir, name: &str, audio: &str) -> PathBuf {
    let path = dir.join(name);
    ffmpeg_made(
        &path,
        &["testsrc2=s=320x240:r=25:d=30", "sine=f=440:d=30"],
        &[
            "-c:v", "libx264", "-g", "25", "-bf", "0", "-pix_fmt", "yuv420p", "-c:a", audio,
        ],
    );
    path
}

#[test]
fn a_cameras_sound_goes_to_webrtc_viewers_as_opus() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("whep-sound");
    let aac = clip_with_sound(&dir, "aac.mp4", "aac");
    let opus = clip_with_sound(&dir, "opus.mkv", "libopus");
    let port = free_port();
    let args = [
        "-q",
        "-i",
        aac.to_str().unwrap(),
        "-i",
        opus.to_str().unwrap(),
    ];
    let child = crate::common::run::served(dir.path(), port, &args);
    // AAC is encoded to Opus once; Opus goes as it came. Either way the viewer hears 48 kHz
    // sound for about as long as it listened (2 s: at least 1.2 s of it).
    for name in ["aac", "opus"] {
        let got = aiortc(port, name, "2", Some("audio"));
        assert_eq!(got["status"], 201, "{name}: {got}");
        assert!(
            got["frames"].as_u64().unwrap() >= 20,
            "{name}'s video: {got}"
        );
        let sound = &got["sound"];
        assert_eq!(sound["rate"], 48000, "{name}: {got}");
        assert!(
            sound["samples"].as_u64().unwrap() >= 48_000 * 12 / 10,
            "{name}: {got}"
        );
    }
    crate::common::run::interrupt(&child);
    let out = crate::common::run::wait_with_deadline(child, Duration::from_secs(5), "the view");
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn ice_servers_are_told_to_viewers_and_bad_ones_refused() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("whep-ice");
    let cam = clip(&dir, "cam.mp4", "testsrc2", 30);
    let port = free_port();
    let args = [
        "-q",
        "-i",
        cam.to_str().unwrap(),
        "--ice-server",
        "stun:stun.example.org:3478",
        "--ice-server",
        "turn:me:s3cret@turn.example.org:3478",
    ];
    let child = crate::common::run::served(dir.path(), port, &args);
    let (code, body) = http(port, "GET", "/whep/", "");
    assert_eq!(code, 200);
    let told: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        told["ice_servers"],
        serde_json::json!([
            {"urls": "stun:stun.example.org:3478"},
            {"urls": "turn:turn.example.org:3478", "username": "me", "credential": "s3cret"}
        ])
    );
    crate::common::run::interrupt(&child);
    let out = crate::common::run::wait_with_deadline(child, Duration::from_secs(5), "the view");
    assert!(out.status.success(), "{}", stderr(&out));
    for (bad, says) in [
        ("http://example.org", "not a stun: or turn: address"),
        ("turn:turn.example.org", "needs USER:PASSWORD@"),
        ("stun:", "no host"),
    ] {
        let out = Command::new(crate::common::run::bin())
            .args([
                "--headless",
                "-i",
                "pattern",
                "--serve",
                "0",
                "--ice-server",
                bad,
            ])
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{bad}: {err}");
        assert!(
            err.contains(says) && err.lines().count() == 1,
            "{bad}: {err}"
        );
    }
    let out = Command::new(crate::common::run::bin())
        .args(["--headless", "-i", "pattern", "--ice-server", "stun:x.org"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("apply to --serve"),
        "{}",
        stderr(&out)
    );
    // The password is not said where the address is refused.
    let out = Command::new(crate::common::run::bin())
        .args([
            "--headless",
            "-i",
            "pattern",
            "--serve",
            "0",
            "--ice-server",
            "turn:me:s3cret@",
        ])
        .output()
        .unwrap();
    assert!(!stderr(&out).contains("s3cret"), "{}", stderr(&out));
}
