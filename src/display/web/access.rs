//! Who the browser view answers: the settings of `--serve` (where it listens, the token and
//! where it comes from, the host names it answers to) and the checks every request passes
//! before anything is served. Pure functions, tested without a server.
//!
//! Invariants:
//! - a request is answered only when its `Host` names this server: an IP address, `localhost`
//!   (or a name under `.localhost`), or a name given with `--serve-host`; any other name is
//!   a DNS-rebinding page and gets 421, whatever it asks for;
//! - a control (`POST /control`) is obeyed only with the page's own header
//!   (`X-Framepipe-Control`, which no cross-origin page can send without a preflight that
//!   is never granted) and, where the browser says where it comes from (`Origin`), only
//!   from this server's own origin;
//! - the stream, the frame and the figures are not served to another site's page
//!   (`Sec-Fetch-Site` other than `same-origin` or `none`, or a foreign `Origin`);
//! - with a token every request carries it (`?token=`, percent-decoded, or
//!   `Authorization: Bearer`, the scheme in any case), compared in constant time;
//! - listening beyond the loopback interface without a token is refused unless
//!   `--serve-insecure` says so.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use subtle::ConstantTimeEq;

/// The environment variable a token may come from (`ps` shows no environment).
pub const TOKEN_VARIABLE: &str = "FRAMEPIPE_SERVE_TOKEN";
/// How long an input may be down before `/healthz` says so, where nothing else says.
pub const DEFAULT_HEALTH_BUDGET: std::time::Duration = std::time::Duration::from_secs(30);
/// The header the page sends with every control.
pub const CONTROL_HEADER: &str = "x-framepipe-control";

/// What `--serve` was asked for, checked once before the run.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where the server listens.
    pub addr: SocketAddr,
    token: Option<String>,
    /// Host names answered besides IP addresses and `localhost`, lower-cased.
    hosts: Vec<String>,
    /// How long an input may be down before `/healthz` says so (`--health-budget`).
    pub health_budget: std::time::Duration,
    /// The STUN and TURN servers WebRTC viewers are told of (`--ice-server`).
    pub ice_servers: Vec<IceServer>,
    /// Whether a camera added through the API may listen for a stream pushed to this host
    /// (`--serve-listening-sources`; `source::remote`).
    pub listening_sources: bool,
}

/// A STUN or TURN server, as `--ice-server` gives it and a browser's `RTCIceServer` takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IceServer {
    /// `stun:HOST[:PORT]`, `turn:HOST[:PORT]`, … without the credentials.
    pub url: String,
    /// A TURN server's user name and password.
    pub credentials: Option<(String, String)>,
}

impl IceServer {
    /// `text` as `--ice-server` takes it: `stun:`/`stuns:HOST[:PORT]`, or
    /// `turn:`/`turns:USER:PASSWORD@HOST[:PORT][?transport=udp|tcp]`.
    pub fn parse(text: &str) -> Result<Self, ServeError> {
        // Said without its password.
        let shown = match text.rsplit_once('@') {
            Some((who, host)) => format!("{}:…@{host}", who.split(':').next().unwrap_or("")),
            None => text.to_string(),
        };
        let bad = |why: &str| ServeError::IceServer(shown.clone(), why.to_string());
        let (scheme, rest) = text
            .split_once(':')
            .ok_or_else(|| bad("not a stun: or turn: address"))?;
        let turn = match scheme {
            "stun" | "stuns" => false,
            "turn" | "turns" => true,
            _ => return Err(bad("not a stun: or turn: address")),
        };
        let (credentials, host) = match rest.rsplit_once('@') {
            Some((who, host)) => {
                let (user, password) = who
                    .split_once(':')
                    .ok_or_else(|| bad("credentials are USER:PASSWORD@"))?;
                (Some((user.to_string(), password.to_string())), host)
            }
            None => (None, rest),
        };
        if host.is_empty() || host.contains(['/', ' ', '"', '<', '>']) {
            return Err(bad("no host"));
        }
        if turn && credentials.is_none() {
            return Err(bad("a TURN server needs USER:PASSWORD@"));
        }
        Ok(Self {
            url: format!("{scheme}:{host}"),
            credentials,
        })
    }

    /// As a browser's `RTCIceServer` takes it.
    pub fn json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({ "urls": self.url });
        if let Some((user, password)) = &self.credentials {
            v["username"] = user.clone().into();
            v["credential"] = password.clone().into();
        }
        v
    }

    /// As WHEP's `Link` header names it (RFC 9725, section 4.6).
    pub fn link(&self) -> String {
        match &self.credentials {
            Some((user, password)) => format!(
                "<{}>; rel=\"ice-server\"; username=\"{user}\"; credential=\"{password}\"; credential-type=\"password\"",
                self.url
            ),
            None => format!("<{}>; rel=\"ice-server\"", self.url),
        }
    }
}

/// Why `--serve` can't be set up as asked.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The token file can't be read.
    #[error("--serve-token-file '{path}' can't be read: {source}")]
    TokenFile {
        /// The file.
        path: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// An empty token.
    #[error("--serve: the token given is empty")]
    EmptyToken,
    /// A token with a control character.
    #[error("--serve: the token holds a control character")]
    ControlInToken,
    /// Not a port or `ADDRESS:PORT`.
    #[error("--serve '{serve}': not a port or ADDRESS:PORT ({source})")]
    NotAnAddress {
        /// As given.
        serve: String,
        /// The resolver's reason.
        source: std::io::Error,
    },
    /// An address that resolves to nothing.
    #[error("--serve '{0}': the address names no host")]
    NoHost(String),
    /// An `--ice-server` that can't be used.
    #[error("--ice-server '{0}': {1}")]
    IceServer(String, String),
    /// Every machine could reach it, and no token is set.
    #[error("--serve {0} answers every machine that reaches it, and no token is set: give one (--serve-token-file FILE, or {TOKEN_VARIABLE}), or --serve-insecure to serve without")]
    OpenWithoutToken(SocketAddr),
}

/// Where the token comes from, as the flags say.
#[derive(Clone, Debug, Default)]
pub struct TokenFrom {
    /// `--serve-token TOKEN` (seen by `ps`).
    pub flag: Option<String>,
    /// `--serve-token-file PATH`: its first line.
    pub file: Option<String>,
    /// `FRAMEPIPE_SERVE_TOKEN`.
    pub env: Option<String>,
}

impl TokenFrom {
    /// The token, from the flag, the file or the environment (in that order); None for none.
    pub fn read(&self) -> Result<Option<String>, ServeError> {
        let token = match (&self.flag, &self.file) {
            (Some(t), _) => Some(t.clone()),
            (None, Some(path)) => {
                let text =
                    std::fs::read_to_string(path).map_err(|source| ServeError::TokenFile {
                        path: path.clone(),
                        source,
                    })?;
                Some(text.lines().next().unwrap_or_default().to_string())
            }
            (None, None) => self.env.clone(),
        };
        match token {
            Some(t) if t.is_empty() => Err(ServeError::EmptyToken),
            Some(t) if t.chars().any(char::is_control) => Err(ServeError::ControlInToken),
            t => Ok(t),
        }
    }
}

/// Where `--serve` binds: `PORT` is 127.0.0.1:PORT, else the address as given.
pub fn bind_address(serve: &str) -> Result<SocketAddr, ServeError> {
    let text = match serve.parse::<u16>() {
        Ok(port) => format!("127.0.0.1:{port}"),
        Err(_) => serve.to_string(),
    };
    text.to_socket_addrs()
        .map_err(|source| ServeError::NotAnAddress {
            serve: serve.into(),
            source,
        })?
        .next()
        .ok_or_else(|| ServeError::NoHost(serve.into()))
}

impl Settings {
    /// Checks `--serve` and its companions: the address, the token, the host names, and that
    /// a server reachable beyond this machine has a token unless `insecure`.
    pub fn new(
        serve: &str,
        token: &TokenFrom,
        hosts: &[String],
        insecure: bool,
    ) -> Result<Self, ServeError> {
        let addr = bind_address(serve)?;
        let token = token.read()?;
        if token.is_none() && !addr.ip().is_loopback() && !insecure {
            return Err(ServeError::OpenWithoutToken(addr));
        }
        let hosts = hosts.iter().map(|h| h.to_ascii_lowercase()).collect();
        Ok(Self {
            addr,
            token,
            hosts,
            health_budget: DEFAULT_HEALTH_BUDGET,
            listening_sources: false,
            ice_servers: Vec::new(),
        })
    }

    /// Whether a token is required.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// The page's query: `?token=…` (percent-encoded) where a token is required, so that
    /// the start line is the address to open, as a notebook server prints its own.
    pub fn page_query(&self) -> String {
        self.token.as_ref().map_or_else(String::new, |t| {
            let pair = form_urlencoded::Serializer::new(String::new())
                .append_pair("token", t)
                .finish();
            format!("?{pair}")
        })
    }

    /// Whether `host` (a `Host` header: name or address, with or without a port) names this
    /// server.
    pub fn host_allowed(&self, host: Option<&str>) -> bool {
        let Some(name) = host.map(host_name) else {
            return false;
        };
        let name = name.to_ascii_lowercase();
        name.parse::<IpAddr>().is_ok()
            || name == "localhost"
            || name.ends_with(".localhost")
            || self.hosts.contains(&name)
    }

    /// Whether a request for data (stream, frame, figures) may be answered: not asked for by
    /// another site's page. `host` is the request's (already allowed) `Host`.
    pub fn same_origin(&self, host: &str, origin: Option<&str>, fetch_site: Option<&str>) -> bool {
        let site_ok = matches!(fetch_site, None | Some("same-origin") | Some("none"));
        let origin_ok = origin.is_none_or(|o| o.eq_ignore_ascii_case(&format!("http://{host}")));
        site_ok && origin_ok
    }

    /// Whether a control may be obeyed: the page's header is there and the origin is ours.
    pub fn control_allowed(&self, host: &str, origin: Option<&str>, marked: bool) -> bool {
        marked && origin.is_none_or(|o| o.eq_ignore_ascii_case(&format!("http://{host}")))
    }

    /// Whether the request carries the token (where one is required): `query`'s `token`,
    /// percent-decoded, or an `Authorization: Bearer` header.
    pub fn token_ok(&self, query: &str, authorization: Option<&str>) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        let from_query = form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == "token")
            .map(|(_, v)| v.into_owned());
        let from_header = authorization.and_then(|a| {
            let (scheme, value) = a.trim().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| value.trim().to_string())
        });
        [from_query, from_header]
            .iter()
            .flatten()
            .any(|given| bool::from(given.as_bytes().ct_eq(token.as_bytes())))
    }
}

/// The name part of a `Host` header: `[::1]:8080` is `::1`, `example:80` is `example`.
fn host_name(host: &str) -> &str {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// One query parameter, percent-decoded.
pub fn query_param(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(token: Option<&str>) -> Settings {
        let from = TokenFrom {
            flag: token.map(str::to_string),
            ..TokenFrom::default()
        };
        Settings::new("8080", &from, &["cams.example".into()], false).unwrap()
    }

    #[test]
    fn binds_to_loopback_unless_told() {
        assert_eq!(bind_address("8080").unwrap().to_string(), "127.0.0.1:8080");
        assert_eq!(
            bind_address("0.0.0.0:9000").unwrap().to_string(),
            "0.0.0.0:9000"
        );
        assert!(bind_address("nonsense").is_err());
    }

    #[test]
    fn every_interface_without_a_token_is_refused_unless_insecure() {
        let none = TokenFrom::default();
        let e = Settings::new("0.0.0.0:9000", &none, &[], false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--serve-insecure"), "{e}");
        assert!(Settings::new("0.0.0.0:9000", &none, &[], true).is_ok());
        let env = TokenFrom {
            env: Some("t".into()),
            ..TokenFrom::default()
        };
        assert!(Settings::new("0.0.0.0:9000", &env, &[], false).is_ok());
        assert!(Settings::new("9000", &none, &[], false).is_ok());
    }

    #[test]
    fn only_our_own_host_names_are_answered() {
        let s = settings(None);
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST",
            "[::1]:8080",
            "192.168.1.20:8080",
            "cams.example:8080",
            "app.localhost",
        ] {
            assert!(s.host_allowed(Some(ok)), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "127.0.0.1.evil.example",
            "",
        ] {
            assert!(!s.host_allowed(Some(bad)), "{bad}");
        }
        assert!(!s.host_allowed(None));
    }

    #[test]
    fn controls_need_the_pages_header_and_origin() {
        let s = settings(None);
        let host = "127.0.0.1:8080";
        assert!(s.control_allowed(host, Some("http://127.0.0.1:8080"), true));
        assert!(s.control_allowed(host, None, true), "curl sends no Origin");
        assert!(!s.control_allowed(host, Some("http://evil.example"), true));
        assert!(!s.control_allowed(host, Some("http://127.0.0.1:8080"), false));
        assert!(!s.same_origin(host, None, Some("cross-site")));
        assert!(!s.same_origin(host, None, Some("same-site")));
        assert!(s.same_origin(host, None, Some("same-origin")));
        assert!(!s.same_origin(host, Some("http://localhost:3000"), None));
    }

    #[test]
    fn the_page_query_carries_the_token_encoded() {
        assert_eq!(settings(None).page_query(), "");
        let s = settings(Some("a b&c=d"));
        assert_eq!(s.page_query(), "?token=a+b%26c%3Dd");
        assert!(s.token_ok(&s.page_query()[1..], None));
    }

    #[test]
    fn the_token_is_percent_decoded_and_bearer_is_any_case() {
        let s = settings(Some("p@ss word/1"));
        assert!(s.token_ok("token=p%40ss%20word%2F1", None));
        assert!(s.token_ok("key=3&token=p%40ss+word%2F1", None));
        assert!(!s.token_ok("token=p%40ss", None));
        assert!(!s.token_ok("", None));
        assert!(s.token_ok("", Some("bearer p@ss word/1")));
        assert!(s.token_ok("", Some("Bearer p@ss word/1")));
        assert!(!s.token_ok("", Some("Basic p@ss word/1")));
        assert!(settings(None).token_ok("", None));
    }

    #[test]
    fn a_token_comes_from_a_file_or_the_environment() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("token");
        std::fs::write(&dir, "from file\nsecond line\n").unwrap();
        let from = TokenFrom {
            file: Some(dir.to_string_lossy().into_owned()),
            env: Some("from env".into()),
            ..TokenFrom::default()
        };
        assert_eq!(from.read().unwrap().as_deref(), Some("from file"));
        let env = TokenFrom {
            env: Some("from env".into()),
            ..TokenFrom::default()
        };
        assert_eq!(env.read().unwrap().as_deref(), Some("from env"));
        let empty = TokenFrom {
            env: Some(String::new()),
            ..TokenFrom::default()
        };
        assert!(empty.read().is_err());
    }
}
