//! What is sent and where: the parsed URL, the request template with its `{seq}` and `{id}`
//! slots, and one keep-alive HTTP/1.1 connection.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::RequestArgs;

/// Builds every request of a run from one template; cheap to clone.
#[derive(Clone)]
pub struct RequestTemplate {
    inner: Arc<Inner>,
}

struct Inner {
    host: String,
    port: u16,
    method: Method,
    path: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The body split at its slots; `None` for a request without a body.
    body: Option<Vec<Piece>>,
    ids: Vec<String>,
    next: AtomicU64,
}

enum Piece {
    Text(String),
    Seq,
    Id,
}

impl RequestTemplate {
    pub fn from_args(args: &RequestArgs) -> anyhow::Result<Self> {
        let uri: Uri = args.url.parse().with_context(|| format!("--url {}", args.url))?;
        if uri.scheme_str() != Some("http") {
            bail!("--url {}: only http:// is supported", args.url);
        }
        let host = uri.host().with_context(|| format!("--url {}: no host", args.url))?.to_owned();
        let port = uri.port_u16().unwrap_or(80);
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        let method = match &args.method {
            Some(name) => {
                Method::from_bytes(name.as_bytes()).with_context(|| format!("--method {name}"))?
            }
            None if args.body.is_some() => Method::POST,
            None => Method::GET,
        };
        let mut headers = Vec::new();
        for raw in &args.headers {
            let (name, value) = raw
                .split_once(':')
                .with_context(|| format!("--header {raw:?}: expected `Name: value`"))?;
            headers.push((
                HeaderName::from_bytes(name.trim().as_bytes())
                    .with_context(|| format!("--header {raw:?}"))?,
                HeaderValue::from_str(value.trim()).with_context(|| format!("--header {raw:?}"))?,
            ));
        }
        let body = args.body.as_deref().map(split_slots);
        let ids = match &args.ids_file {
            Some(path) => read_ids(path)?,
            None => Vec::new(),
        };
        if body.as_ref().is_some_and(|pieces| pieces.iter().any(|p| matches!(p, Piece::Id)))
            && ids.is_empty()
        {
            bail!("the body has an {{id}} slot but no ids were given (--ids-file)");
        }
        Ok(Self {
            inner: Arc::new(Inner {
                host,
                port,
                method,
                path,
                headers,
                body,
                ids,
                next: AtomicU64::new(0),
            }),
        })
    }

    /// The next request: a fresh `{seq}` and the next id.
    pub fn next_request(&self) -> anyhow::Result<Request<Full<Bytes>>> {
        let inner = &*self.inner;
        let seq = inner.next.fetch_add(1, Ordering::Relaxed);
        let body = match &inner.body {
            None => Bytes::new(),
            Some(pieces) => {
                let mut text = String::with_capacity(256);
                for piece in pieces {
                    match piece {
                        Piece::Text(part) => text.push_str(part),
                        Piece::Seq => text.push_str(&seq.to_string()),
                        Piece::Id => {
                            let index = usize::try_from(seq).unwrap_or(0) % inner.ids.len().max(1);
                            if let Some(id) = inner.ids.get(index) {
                                text.push_str(id);
                            }
                        }
                    }
                }
                Bytes::from(text)
            }
        };
        let mut builder = Request::builder()
            .method(inner.method.clone())
            .uri(inner.path.as_str())
            .header(hyper::header::HOST, format!("{}:{}", inner.host, inner.port));
        if inner.body.is_some() {
            builder = builder.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        for (name, value) in &inner.headers {
            builder = builder.header(name, value);
        }
        Ok(builder.body(Full::new(body))?)
    }

    /// Opens one keep-alive connection (TCP_NODELAY, like every HTTP client that cares about
    /// latency).
    pub async fn connect(&self) -> anyhow::Result<Connection> {
        let stream = TcpStream::connect((self.inner.host.as_str(), self.inner.port))
            .await
            .with_context(|| format!("connect to {}:{}", self.inner.host, self.inner.port))?;
        stream.set_nodelay(true)?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        let driver = tokio::spawn(async move {
            // The connection ends with an error when the server closes it; the next request on
            // it then fails and is counted there.
            let _ = connection.await;
        });
        Ok(Connection { sender, driver })
    }
}

/// One HTTP/1.1 connection; dropping it closes the socket.
pub struct Connection {
    pub sender: SendRequest<Full<Bytes>>,
    driver: JoinHandle<()>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

fn split_slots(body: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut rest = body;
    loop {
        let seq = rest.find("{seq}");
        let id = rest.find("{id}");
        let (at, piece, len) = match (seq, id) {
            (Some(s), Some(i)) if s < i => (s, Piece::Seq, 5),
            (_, Some(i)) => (i, Piece::Id, 4),
            (Some(s), None) => (s, Piece::Seq, 5),
            (None, None) => {
                if !rest.is_empty() {
                    pieces.push(Piece::Text(rest.to_owned()));
                }
                return pieces;
            }
        };
        if at > 0 {
            pieces.push(Piece::Text(rest[..at].to_owned()));
        }
        pieces.push(piece);
        rest = &rest[at + len..];
    }
}

fn read_ids(path: &Path) -> anyhow::Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--ids-file {}", path.display()))?;
    Ok(text.lines().map(str::trim).filter(|line| !line.is_empty()).map(str::to_owned).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(pieces: &[Piece]) -> String {
        pieces
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.clone(),
                Piece::Seq => "<seq>".into(),
                Piece::Id => "<id>".into(),
            })
            .collect()
    }

    #[test]
    fn split_slots_finds_seq_and_id_in_order() {
        assert_eq!(
            render(&split_slots(r#"{"a":"m-{seq}","id":"{id}","b":{seq}}"#)),
            r#"{"a":"m-<seq>","id":"<id>","b":<seq>}"#
        );
        assert_eq!(render(&split_slots("plain")), "plain");
        assert_eq!(render(&split_slots("{id}{seq}")), "<id><seq>");
    }
}
