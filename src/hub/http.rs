//! The one place that speaks HTTP (through ureq, with rustls): GET with an optional byte range,
//! bounded bodies, timeouts, and retries with backoff on 429 and 5xx (honouring `Retry-After`).
//! Everything above it sees [`Reply`] and [`HubError`].

use std::io::Read;
use std::ops::Range;
use std::time::Duration;

use super::error::HubError;

/// Requests made for one GET before giving up: the first and three retries.
const ATTEMPTS: u32 = 4;
/// The first retry's wait; each later one doubles it.
const BACKOFF: Duration = Duration::from_millis(250);
/// The longest `Retry-After` waited for; a server asking for more is reported instead.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// Bytes kept of an error reply's body (the Hub's JSON error message).
const ERROR_BODY: u64 = 64 << 10;

/// How the client talks to the Hub.
#[derive(Debug, Clone)]
pub(crate) struct ClientSettings {
    /// Sent as `Authorization: Bearer` to URLs under `endpoint` (never to where they redirect,
    /// nor to another registry).
    pub token: Option<String>,
    /// The Hub's address, the only one the token goes to.
    pub endpoint: String,
    /// Connecting, and each wait for a reply or for more of its body.
    pub timeout: Duration,
}

/// A reply to a GET, its body read (bounded).
#[derive(Debug)]
pub(crate) struct Reply {
    /// The final status, after redirects.
    pub status: u16,
    /// The body, or as much of it as was asked for.
    pub body: Vec<u8>,
    /// The whole file's size: `Content-Range`'s total for a 206, `Content-Length` for a 200.
    pub total: Option<u64>,
    /// The Hub's `X-Error-Code` (`GatedRepo`, `RepoNotFound`, `EntryNotFound`, …).
    pub error_code: Option<String>,
}

/// A blocking HTTP client with the Hub's credentials.
pub(crate) struct Client {
    agent: ureq::Agent,
    settings: ClientSettings,
    proxy: bool,
}

impl Client {
    /// A client that honours `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` and `NO_PROXY`.
    pub fn new(settings: ClientSettings) -> Client {
        let proxy = ureq::Proxy::try_from_env();
        let has_proxy = proxy.is_some();
        let t = settings.timeout;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(proxy)
            .max_redirects(10)
            .user_agent(concat!("gpumem/", env!("CARGO_PKG_VERSION")))
            .timeout_connect(Some(t))
            .timeout_recv_response(Some(t))
            .timeout_recv_body(Some(t * 6))
            .timeout_global(Some(t * 8))
            .build()
            .into();
        Client {
            agent,
            settings,
            proxy: has_proxy,
        }
    }

    /// GETs `url`, only `range` of it when given, keeping at most `limit` bytes of a 200
    /// body. Transport failures, 429 and 5xx are retried; any other status is returned.
    pub fn get(&self, url: &str, range: Option<Range<u64>>, limit: u64) -> Result<Reply, HubError> {
        self.get_as(url, range, limit, None)
    }

    /// [`Client::get`] asking for the media type `accept` (a registry's manifest).
    pub fn get_as(
        &self,
        url: &str,
        range: Option<Range<u64>>,
        limit: u64,
        accept: Option<&str>,
    ) -> Result<Reply, HubError> {
        let mut last = String::new();
        for attempt in 1..=ATTEMPTS {
            match self.once(url, range.clone(), limit, accept) {
                Ok(Outcome::Done(reply)) => return Ok(reply),
                Ok(Outcome::Retry { why, after }) => {
                    last = why;
                    if attempt < ATTEMPTS {
                        let wait = after.unwrap_or(BACKOFF * 2u32.pow(attempt - 1));
                        if wait > MAX_RETRY_AFTER {
                            last =
                                format!("{last}, and the server asks to wait {} s", wait.as_secs());
                            return Err(self.network(url, last, attempt));
                        }
                        std::thread::sleep(wait);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(self.network(url, last, ATTEMPTS))
    }

    fn network(&self, url: &str, why: String, attempts: u32) -> HubError {
        HubError::Network {
            url: url.to_string(),
            why,
            attempts,
            proxy: self.proxy,
        }
    }

    fn once(
        &self,
        url: &str,
        range: Option<Range<u64>>,
        limit: u64,
        accept: Option<&str>,
    ) -> Result<Outcome, HubError> {
        let mut req = self.agent.get(url);
        if let Some(token) = &self.settings.token {
            if url.starts_with(&format!("{}/", self.settings.endpoint)) {
                req = req.header("Authorization", &format!("Bearer {token}"));
            }
        }
        if let Some(accept) = accept {
            req = req.header("Accept", accept);
        }
        if let Some(r) = &range {
            req = req.header(
                "Range",
                &format!("bytes={}-{}", r.start, r.end.saturating_sub(1)),
            );
        }
        let mut resp = match req.call() {
            Ok(resp) => resp,
            // A name that does not resolve will not on a retry (no network, a mistyped
            // HF_ENDPOINT): said at once.
            Err(ureq::Error::HostNotFound) => {
                return Err(self.network(url, "the host name does not resolve".into(), 1))
            }
            Err(ureq::Error::BadUri(why)) => {
                return Err(HubError::BadReply {
                    url: url.to_string(),
                    why: format!("not a URL gpumem can ask ({why}); check HF_ENDPOINT"),
                })
            }
            Err(e) => {
                return Ok(Outcome::Retry {
                    why: e.to_string(),
                    after: None,
                })
            }
        };
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let error_code = header("x-error-code");
        if status == 429 || (500..600).contains(&status) {
            let after = header("retry-after")
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            return Ok(Outcome::Retry {
                why: format!("HTTP {status}"),
                after,
            });
        }
        let lengths = Lengths {
            content: header("content-length").and_then(|v| v.parse::<u64>().ok()),
            range_total: header("content-range").and_then(|v| range_total(&v)),
        };
        let (body, total) = match read_body(&mut resp, status, range.as_ref(), limit, lengths) {
            Ok(read) => read,
            Err(Failed::Retry(why)) => return Ok(Outcome::Retry { why, after: None }),
            Err(Failed::Refused(why)) => {
                return Err(HubError::BadReply {
                    url: url.to_string(),
                    why,
                })
            }
        };
        Ok(Outcome::Done(Reply {
            status,
            body,
            total,
            error_code,
        }))
    }
}

enum Outcome {
    Done(Reply),
    Retry {
        why: String,
        after: Option<Duration>,
    },
}

/// The lengths a reply's headers give.
#[derive(Clone, Copy)]
struct Lengths {
    /// `Content-Length`.
    content: Option<u64>,
    /// `Content-Range`'s total.
    range_total: Option<u64>,
}

/// A reply's body, bounded: the part of `range` asked for (a server that ignores Range sends
/// the whole file: the part is kept and the connection dropped), at most `limit` bytes of a
/// whole file, 64 KiB of an error. With the file's size. A body that breaks off is retried; a
/// whole file over `limit` is refused.
fn read_body(
    resp: &mut ureq::http::Response<ureq::Body>,
    status: u16,
    range: Option<&Range<u64>>,
    limit: u64,
    lengths: Lengths,
) -> Result<(Vec<u8>, Option<u64>), Failed> {
    let (keep, total) = match (status, range) {
        (206, _) => (
            range.map_or(limit, |r| r.end - r.start).min(limit),
            lengths.range_total,
        ),
        (200, Some(r)) => (r.end.min(limit), lengths.content),
        (200, None) => (limit, lengths.content),
        _ => (ERROR_BODY, None),
    };
    let broke = |why: String| Err(Failed::Retry(why));
    let mut body = Vec::new();
    let read = resp
        .body_mut()
        .as_reader()
        .take(keep.saturating_add(1))
        .read_to_end(&mut body);
    if let Err(e) = read {
        return broke(format!("the reply broke off: {e}"));
    }
    if body.len() as u64 > keep {
        if status == 200 && range.is_none() {
            return Err(Failed::Refused(format!(
                "the reply is larger than the {keep} bytes gpumem reads"
            )));
        }
        body.truncate(usize::try_from(keep).unwrap_or(usize::MAX));
    }
    if let (200, Some(r)) = (status, range) {
        let start = usize::try_from(r.start)
            .unwrap_or(usize::MAX)
            .min(body.len());
        body.drain(..start);
    }
    let expect = match (status, range) {
        (206 | 200, Some(r)) => total.map(|t| r.end.min(t).saturating_sub(r.start)),
        (200, None) => lengths.content,
        _ => None,
    };
    if let Some(want) = expect {
        if (body.len() as u64) < want.min(limit) {
            return broke(format!(
                "the reply broke off after {} of {want} bytes",
                body.len()
            ));
        }
    }
    Ok((body, total))
}

/// Why a body was not read: broken off (tried again) or refused.
enum Failed {
    Retry(String),
    Refused(String),
}

/// The total of a `Content-Range: bytes A-B/TOTAL` header.
fn range_total(v: &str) -> Option<u64> {
    v.trim()
        .strip_prefix("bytes ")?
        .rsplit_once('/')?
        .1
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::range_total;

    #[test]
    fn content_range_totals() {
        assert_eq!(range_total("bytes 0-7/1234"), Some(1234));
        assert_eq!(range_total("bytes 0-7/*"), None);
        assert_eq!(range_total("items 0-7/9"), None);
    }
}
