//! What a source named from outside the machine may be (a camera added through the API):
//! a network stream of a known protocol that framepipe dials out to, or the test pattern;
//! never a file, a device or a pipeline of the server's, and never a socket that listens
//! for a stranger's stream unless the operator allowed it (`--serve-listening-sources`).
//! Every network input is opened with FFmpeg's `protocol_whitelist` of network protocols
//! (`media::PROTOCOLS`), so that a playlist or a nested protocol can't reach a local file.
//!
//! Invariants: a source is judged by what FFmpeg would open, not by how its text starts: a
//! scheme is one word of `ALLOWED` with nothing before it (`async:file://`, `cache:`,
//! `concat:`, `subfile,,…:` are FFmpeg's prefixes and refused); a listening source binds
//! on loopback only unless allowed.

/// The schemes a camera added from outside may have (FFmpeg's protocol names).
const ALLOWED: &[&str] = &[
    "rtsp", "rtsps", "rtmp", "rtmps", "rtmpt", "rtmpts", "srt", "udp", "rtp", "tcp", "tls", "http",
    "https",
];

/// Whether `source` may be opened for a camera named from outside: Err with the reason.
/// `listening` allows sources that wait for a stream pushed to this host.
pub fn check(source: &str, listening: bool) -> Result<(), String> {
    let lower = source.to_ascii_lowercase();
    if lower == "pattern" || lower.starts_with("pattern:") {
        return Ok(());
    }
    let refused = || {
        format!(
            "a network stream ({}://…) or pattern; files and devices of the server are named on its command line only",
            ALLOWED.join(", ")
        )
    };
    let Some((scheme, rest)) = lower.split_once("://") else {
        return Err(refused());
    };
    if !ALLOWED.contains(&scheme) || source.contains(['!', '|', '\n', '\r', '\0']) {
        return Err(refused());
    }
    if !listening {
        if let Some(why) = listens(scheme, rest) {
            return Err(format!(
                "{why}: a source that listens for a stream pushed to this host is taken through the API only with --serve-listening-sources"
            ));
        }
    }
    Ok(())
}

/// Why a source after its `scheme://` waits for a stream pushed to it on an address beyond
/// loopback, or None where it dials out (or listens on loopback only).
fn listens(scheme: &str, rest: &str) -> Option<String> {
    let (authority, query) = match rest.split_once('?') {
        Some((a, q)) => (a, q),
        None => (rest, ""),
    };
    let host_port = authority.split('/').next().unwrap_or("");
    let host_port = host_port.rsplit('@').next().unwrap_or(host_port);
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host_port.rsplit_once(':').map_or(host_port, |(h, _)| h),
    };
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    let asks = query.split(['&', ';']).find_map(|pair| {
        let (name, value) = pair.split_once('=').unwrap_or((pair, "1"));
        match name {
            "listen" | "rtmp_listen" if value != "0" => Some(format!("{name}={value}")),
            "mode" if value == "listener" || value == "rendezvous" => Some(format!("mode={value}")),
            _ => None,
        }
    });
    match (asks, scheme) {
        (Some(what), _) if !loopback => Some(format!("'{what}' on '{host}'")),
        // UDP and RTP receive: whatever the host, they bind a port here, on every
        // interface unless the host is loopback.
        (_, "udp" | "rtp") if !loopback => Some(format!(
            "{scheme}:// on '{}' binds a port on every interface",
            if host.is_empty() { "@" } else { host }
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_streams_dialled_out_are_taken() {
        for ok in [
            "rtsp://cam/s",
            "RTSP://admin:pw@10.0.0.5:554/s?x=1",
            "srt://h:9000?streamid=a",
            "http://h/live.m3u8",
            "udp://127.0.0.1:5000",
            "tcp://127.0.0.1:18999?listen=1",
            "pattern",
            "pattern:320x240",
        ] {
            assert_eq!(check(ok, false), Ok(()), "{ok}");
        }
        for files in [
            "file:///etc/passwd",
            "async:file:///x.ts",
            "cache:file:///x.ts",
            "concat:/x.ts|file:///x.ts",
            "subfile,,start,0,end,0,,:file:///x.ts",
            "crypto+file:///x.ts",
            "/videos/a.mp4",
            "/dev/video0",
            "videotestsrc ! appsink",
            "pipe:0",
            "unix:///run/x.sock",
            "hls+file:///x.m3u8",
        ] {
            let why = check(files, true).unwrap_err();
            assert!(why.contains("network stream"), "{files}: {why}");
        }
        for listening in [
            "tcp://0.0.0.0:18999?listen=1",
            "tcp://:18999?listen",
            "srt://0.0.0.0:9000?mode=listener",
            "srt://:9000?mode=listener",
            "udp://0.0.0.0:5000",
            "udp://@:5000",
            "udp://:5000",
            "udp://239.1.1.1:5000",
            "rtp://0.0.0.0:5004",
            "tcp://[::]:18999?listen=2",
        ] {
            let why = check(listening, false).unwrap_err();
            assert!(
                why.contains("--serve-listening-sources"),
                "{listening}: {why}"
            );
            assert_eq!(check(listening, true), Ok(()), "{listening}");
        }
    }
}
