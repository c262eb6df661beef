//! What an input is called where it is shown (the mosaic's labels, the window's title, the
//! browser view's table and `/metrics`, a text filter's `{name}`): the name an inputs file
//! gives it, or one derived from its source as an NVR would call it: a URL's host and path,
//! a file's stem, a camera's number.
//!
//! Invariants: a derived name never holds a URL's user or password or its query (where
//! tokens go); the names of a run's inputs differ (a repeated one gets ` #2`, ` #3`…);
//! deriving opens nothing.

use crate::source::InputSpec;

/// The names of inputs whose sources are `inputs` (each its spec and `--input`'s text),
/// where `given` holds an inputs file's names (None: derived from the source).
pub fn shown(inputs: &[(&InputSpec, &str)], given: &[Option<String>]) -> Vec<String> {
    let mut names: Vec<String> = inputs
        .iter()
        .enumerate()
        .map(|(i, (spec, text))| match given.get(i).cloned().flatten() {
            Some(name) => name,
            None => derived(spec, text),
        })
        .collect();
    let bases = names.clone();
    for (i, name) in names.iter_mut().enumerate().skip(1) {
        let same = bases[..i].iter().filter(|b| **b == bases[i]).count();
        if same > 0 {
            *name = format!("{} #{}", bases[i], same + 1);
        }
    }
    names
}

/// The name of one source (module doc).
pub fn derived(spec: &InputSpec, text: &str) -> String {
    match spec {
        InputSpec::Default => "default".into(),
        InputSpec::Pattern(_) => "pattern".into(),
        InputSpec::Camera(n) => format!("camera {n}"),
        InputSpec::Stdin => "stdin".into(),
        InputSpec::Image(path) | InputSpec::Video(path) | InputSpec::Pipe(path) => stem(path),
        InputSpec::Stream(s) if s.contains('!') => "gstreamer".into(),
        InputSpec::Stream(s) => match s.find("://") {
            Some(at) => of_url(&s[at + 3..]),
            None => Some(stem(std::path::Path::new(s))),
        }
        .unwrap_or_else(|| text.to_string()),
    }
}

/// A file's stem ("front door" of `/videos/front door.mp4`), or its whole name.
fn stem(path: &std::path::Path) -> String {
    path.file_stem().or(path.file_name()).map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// `host/path` of a URL after its `://`: no user, no password, no query or fragment; the
/// port kept only where the URL has no path (`udp://127.0.0.1:5000`).
fn of_url(body: &str) -> Option<String> {
    let body = body.split(['?', '#']).next()?;
    let (authority, path) = match body.find('/') {
        Some(at) => body.split_at(at),
        None => (body, ""),
    };
    let hostport = authority.rsplit('@').next()?;
    let path = path.trim_matches('/');
    let name = match path.is_empty() {
        true => hostport.to_string(),
        false => {
            let host = match hostport.strip_prefix('[') {
                Some(v6) => v6.split(']').next().unwrap_or(v6),
                None => hostport.rsplit_once(':').map_or(hostport, |(h, _)| h),
            };
            format!("{host}/{path}")
        }
    };
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn stream(s: &str) -> String {
        derived(&InputSpec::Stream(s.into()), s)
    }

    #[test]
    fn a_url_is_its_host_and_path_without_secrets() {
        assert_eq!(
            stream("rtsp://admin:pw@10.0.0.5:554/Streaming/Channels/101?token=x"),
            "10.0.0.5/Streaming/Channels/101"
        );
        assert_eq!(stream("udp://127.0.0.1:5000"), "127.0.0.1:5000");
        assert_eq!(stream("rtmp://[::1]:1935/live/cam"), "::1/live/cam");
        assert_eq!(
            stream("http://cam.local/video.mjpg"),
            "cam.local/video.mjpg"
        );
        assert_eq!(stream("/dev/video2"), "video2");
        assert_eq!(stream("videotestsrc ! appsink"), "gstreamer");
    }

    #[test]
    fn a_file_is_its_stem_and_repeats_are_numbered() {
        let a = InputSpec::Video(PathBuf::from("/v/front door.mp4"));
        let b = InputSpec::Video(PathBuf::from("/w/front door.mkv"));
        let c = InputSpec::Camera(0);
        let names = shown(
            &[(&a, "a"), (&b, "b"), (&c, "0"), (&a, "a")],
            &[None, None, Some("porch".into())],
        );
        assert_eq!(
            names,
            ["front door", "front door #2", "porch", "front door #3"]
        );
    }
}
