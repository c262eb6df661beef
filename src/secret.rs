//! Secrets taken out of text before anyone sees it: a URL's user and password
//! (`rtsp://admin:pw@cam/…`) and the values of query parameters that hold credentials
//! (`password`, `passphrase`, `token`, `key`, `auth`, `secret` and their kin), wherever a
//! URL appears in a line, plus the names that carry a login or a stream's key by habit
//! (`user`, `pw`, SRT's `streamid`). Every line framepipe prints (`msg`), the browser view's
//! page, `/api/inputs`, `/stats` and `/metrics`, and `--summary-json` show sources only
//! through `redact`; a name made from a URL (`plan::names`) never holds one (`is_secret`).
//!
//! Invariants: text without `://` comes back unchanged and unallocated; a URL keeps its
//! scheme, host, port, path and the names of its parameters, so that a user still tells
//! cameras apart; a secret's value is replaced by `REDACTED`, never shortened or hashed.

use std::borrow::Cow;

/// What a secret is replaced by.
pub const REDACTED: &str = "***";

/// Query parameters whose value is a secret: a name that contains one of these
/// (case-insensitive).
const SECRET_PARTS: &[&str] = &[
    "pass",
    "pwd",
    "token",
    "key",
    "auth",
    "secret",
    "sig",
    "credential",
    "session",
];

/// Query parameters whose value is a secret by their whole name (case-insensitive): too
/// short or too common to be looked for inside other names.
const SECRET_NAMES: &[&str] = &[
    "pw", "p", "u", "user", "username", "usr", "login", "streamid", "sid", "code",
];

/// `text` with every URL's secrets replaced (module doc).
pub fn redact(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, url) = rest.split_at(at);
        out.push_str(before);
        let end = url
            .find(|c: char| c.is_whitespace() || "\"'<>`".contains(c))
            .unwrap_or(url.len());
        out.push_str(&redact_url(&url[..end]));
        rest = &url[end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// `text` as a name may show it: every URL's user information and secret parameters left
/// out altogether (`http://admin:pw@h/a?token=t&ch=1` is `http://h/a?ch=1`). An input with
/// no name of its own is named by this (`plan::Entry::unnamed`).
pub fn without(text: &str) -> String {
    redact(text)
        .split_inclusive(['&', ';', '?'])
        .filter(|piece| !piece.contains(&format!("={REDACTED}")))
        .collect::<String>()
        .replace(&format!("{REDACTED}@"), "")
        .trim_end_matches(['&', ';', '?'])
        .to_string()
}

/// One URL from its `://` on: its user information dropped, its secret parameters hidden.
fn redact_url(url: &str) -> String {
    let body = &url[3..];
    let authority_end = body.find(['/', '?', '#']).unwrap_or(body.len());
    let (authority, tail) = body.split_at(authority_end);
    let host = match authority.rfind('@') {
        Some(at) => format!("{REDACTED}@{}", &authority[at + 1..]),
        None => authority.to_string(),
    };
    let (path, query) = match tail.find('?') {
        Some(q) => (&tail[..q], Some(&tail[q + 1..])),
        None => (tail, None),
    };
    let mut out = format!("://{host}{path}");
    if let Some(query) = query {
        out.push('?');
        out.push_str(&redact_query(query));
    }
    out
}

/// A query string with the values of its secret parameters hidden. A secret's value runs
/// to the next `&` or `;`, a `#` in it included: SRT's `streamid=#!::u=…,s=…` is one value.
fn redact_query(query: &str) -> String {
    let mut out = String::with_capacity(query.len());
    let mut from = 0;
    for (i, c) in query.char_indices().chain([(query.len(), '&')]) {
        if c != '&' && c != ';' {
            continue;
        }
        let pair = &query[from..i];
        match pair.split_once('=') {
            Some((name, _)) if is_secret(name) => {
                out.push_str(name);
                out.push('=');
                out.push_str(REDACTED);
            }
            _ => out.push_str(pair),
        }
        if i < query.len() {
            out.push(c);
        }
        from = i + 1;
    }
    out
}

/// Whether a parameter of this name holds a secret.
pub fn is_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_PARTS.iter().any(|p| name.contains(p)) || SECRET_NAMES.contains(&name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_secret_of_any_kind_is_left() {
        let cases = [
            (
                "http://admin:S3cretPw@10.0.0.5/a.ts",
                "http://***@10.0.0.5/a.ts",
            ),
            ("rtsp://user@cam:554/s", "rtsp://***@cam:554/s"),
            (
                "srt://h:9000?passphrase=abcdefghij&latency=200",
                "srt://h:9000?passphrase=***&latency=200",
            ),
            (
                "rtsp://c/s?password=pw&user=u",
                "rtsp://c/s?password=***&user=***",
            ),
            ("https://h/x.m3u8?token=t1#f", "https://h/x.m3u8?token=***"),
            ("rtmp://h/app?key=k;auth=a", "rtmp://h/app?key=***;auth=***"),
            (
                "http://h/p?api_key=1&Secret=2&sig=3&pwd=4&ok=5",
                "http://h/p?api_key=***&Secret=***&sig=***&pwd=***&ok=5",
            ),
            ("http://h/p?authToken=x", "http://h/p?authToken=***"),
        ];
        for (plain, shown) in cases {
            assert_eq!(redact(plain), shown, "{plain}");
            let line = format!("input 0 ('{plain}') could not be opened: refused");
            assert_eq!(
                redact(&line),
                format!("input 0 ('{shown}') could not be opened: refused")
            );
        }
        let more = [
            (
                "srt://h:9000?streamid=#!::r=live,u=cam,s=Str3amSecret&latency=20",
                "srt://h:9000?streamid=***&latency=20",
            ),
            (
                "rtsp://h/s?user=admin&pw=Pw1&passwd=Pw2&signature=S",
                "rtsp://h/s?user=***&pw=***&passwd=***&signature=***",
            ),
            ("http://h/a?u=admin&p=x&v=1", "http://h/a?u=***&p=***&v=1"),
        ];
        for (plain, shown) in more {
            assert_eq!(redact(plain), shown, "{plain}");
        }
        assert!(matches!(redact("clip.mp4, gray"), Cow::Borrowed(_)));
        for (plain, name) in [
            ("http://admin:pw@h/a?token=t&ch=1", "http://h/a?ch=1"),
            ("http://admin:pw@h/a?ch=1&token=t", "http://h/a?ch=1"),
            ("rtsp://u:p@10.0.0.5:554/s?pw=1", "rtsp://10.0.0.5:554/s"),
            ("srt://h:1?streamid=#!::u=a,s=b", "srt://h:1"),
            ("clip.mp4", "clip.mp4"),
        ] {
            assert_eq!(without(plain), name, "{plain}");
        }
        assert_eq!(redact("udp://127.0.0.1:5000"), "udp://127.0.0.1:5000");
        let two = "a=rtsp://u:p@x/1 b=http://h/?token=t";
        assert_eq!(redact(two), "a=rtsp://***@x/1 b=http://h/?token=***");
    }
}
