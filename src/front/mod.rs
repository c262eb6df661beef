//! The front of a wall over many hosts (`framepipe front --shards URL,… --serve ADDR`): one
//! API over every shard of one `--inputs` list (`--shard K/N` each), so that an operator
//! asks one address, whichever host holds a camera.
//!
//! - `GET /api/inputs`, `/api/events`, `/api/recordings`, `/healthz`, `/metrics`: every
//!   shard asked at once (`shards`), the answers made one (`merge`), each row with its
//!   shard; a shard that does not answer is named down and the rest still answer.
//! - `GET /api/events/stream`: every shard's events as one server-sent stream (`feed`).
//! - `GET /api/recordings/segment/K-ID`: shard K's segment, handed on as it comes (the
//!   merged listing names each so; a camera that moved between shards is listed whole).
//! - `POST /api/inputs`, `DELETE /api/inputs/NAME`: sent to the one shard that owns the
//!   camera by the shards' own rendezvous hashing (`plan::shard::owner` over the number of
//!   shards given), so no shard is asked to guess.
//!
//! Invariants: the front admits as a shard's door does (`display::web::access`: its own
//! token, the host names it answers to, another site's page refused, a change only with the
//! control header from its own origin); the shards' token (`--shard-token-file`) is sent to
//! the shards alone and never shown; a slow or hostile shard holds the front's request
//! `shards::ASK_WITHIN` at most and no thread; a stop signal ends the front within a
//! second.

mod feed;
pub mod merge;
mod server;
pub mod shards;

use crate::display::web::access;

/// What is wrong with the front's command line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrontError {
    /// A shard's address is not one.
    #[error("--shards '{0}': {1}")]
    Shard(String, String),
    /// The list of shards is not one.
    #[error("--shards: {0}")]
    Shards(String),
    /// `--serve` or its token.
    #[error(transparent)]
    Serve(#[from] access::ServeError),
    /// The shards' token file.
    #[error("--shard-token-file '{0}' can't be read: {1}")]
    ShardToken(String, std::io::Error),
    /// The address can't be listened on.
    #[error("--serve {0}: {1}")]
    Listen(std::net::SocketAddr, std::io::Error),
}

/// The front's settings, checked once before it listens.
#[derive(Clone, Debug)]
pub struct Front {
    /// The shards, in the order of their `--shard K`.
    pub shards: Vec<shards::Shard>,
    /// Where it listens and whom it admits.
    pub serve: access::Settings,
    /// The token the shards ask for.
    shard_token: Option<String>,
}

impl Front {
    /// The front as the command line asks.
    pub fn new(args: &crate::cli::FrontArgs) -> Result<Self, FrontError> {
        let shards = shards::parse_all(&args.shards.join(","))?;
        let token = access::TokenFrom {
            flag: None,
            file: args.serve_token_file.clone(),
            env: std::env::var(access::TOKEN_VARIABLE).ok(),
        };
        let serve =
            access::Settings::new(&args.serve, &token, &args.serve_host, args.serve_insecure)?;
        let shard_token = match &args.shard_token_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| FrontError::ShardToken(path.clone(), e))?;
                Some(text.lines().next().unwrap_or_default().trim().to_string())
            }
            None => None,
        };
        Ok(Self {
            shards,
            serve,
            shard_token,
        })
    }

    /// Every shard asked `GET path` at once: their answers, in the shards' order.
    pub async fn ask_all(&self, path: &str) -> Vec<merge::Reached> {
        let token = self.shard_token.as_deref();
        let asks = self
            .shards
            .iter()
            .map(|s| s.ask(hyper::Method::GET, path, None, token));
        futures_util::future::join_all(asks).await
    }

    /// The shards' addresses, in order.
    pub fn urls(&self) -> Vec<String> {
        self.shards.iter().map(|s| s.url.clone()).collect()
    }
}

/// `framepipe front`: serves until a stop signal.
pub fn run(args: &crate::cli::FrontArgs) -> anyhow::Result<()> {
    let front = Front::new(args)?;
    let addr = front.serve.addr;
    let listener = std::net::TcpListener::bind(addr).map_err(|e| FrontError::Listen(addr, e))?;
    listener.set_nonblocking(true)?;
    let bound = listener.local_addr()?;
    crate::info!(
        "front of {} shards: http://{bound}/api/inputs{}",
        front.shards.len(),
        front.serve.page_query()
    );
    server::serve(listener, std::sync::Arc::new(front))
}
