//! A loopback server that stands in for the Hugging Face Hub, as huggingface_hub and llama.cpp
//! use it: model info (`/api/models/ORG/NAME/revision/REV`), `resolve` (small files 200, large
//! ones 302 to a CDN path that honours Range with 206), 401 `GatedRepo` without the token, 404
//! `RepoNotFound`/`RevisionNotFound`/`EntryNotFound`, and faults on demand (429 with
//! `Retry-After`, 503, a stall, a reply cut short). It counts requests and body bytes, and a
//! large file's data is never held: past its header it is zeros, made as they are sent.
//!
//! Shared by the integration tests and the `hub_remote` benchmark.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A file's contents: small files whole; large ones their leading bytes and a size.
#[derive(Clone)]
pub enum Body {
    /// Served whole (config.json, an index): 200 from `resolve`.
    Small(Vec<u8>),
    /// An LFS file: `resolve` redirects to the CDN; the bytes past `head` are zeros.
    Large { head: Vec<u8>, size: u64 },
}

/// A repository the stand-in serves.
#[derive(Clone)]
pub struct StandinRepo {
    pub id: String,
    pub commit: String,
    pub files: Vec<(String, Body)>,
    /// Answer 401 `GatedRepo` to file requests without this token.
    pub gated_token: Option<String>,
    /// As an Ollama registry model (`/v2/ID/manifests/TAG`): the tag and each layer's media
    /// type and digest, the digest a file of `files`.
    pub ollama: Option<(String, Vec<(String, String)>)>,
}

/// A fault for requests whose path contains `pattern`, for the first `times` of them.
#[derive(Clone)]
pub struct Fault {
    pub pattern: String,
    pub times: u64,
    pub kind: FaultKind,
}

#[derive(Clone, Copy)]
pub enum FaultKind {
    /// 429 with `Retry-After: N`.
    TooMany(u64),
    /// 503.
    Unavailable,
    /// Wait this long before answering.
    Stall(Duration),
    /// Promise the full length, send half, close.
    Truncate,
}

#[derive(Default)]
struct State {
    repos: Vec<StandinRepo>,
    faults: Vec<(Fault, u64)>,
    log: Vec<String>,
}

/// The running stand-in.
pub struct HubStandin {
    pub endpoint: String,
    state: Arc<Mutex<State>>,
    requests: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
    server: Arc<tiny_http::Server>,
}

impl Drop for HubStandin {
    fn drop(&mut self) {
        for _ in 0..64 {
            self.server.unblock();
        }
    }
}

impl HubStandin {
    /// Serves `repos` on 127.0.0.1, adding `latency` to every request.
    pub fn start(repos: Vec<StandinRepo>, latency: Duration) -> HubStandin {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind loopback"));
        let port = server.server_addr().to_ip().expect("an IP address").port();
        let state = Arc::new(Mutex::new(State {
            repos,
            ..State::default()
        }));
        let requests = Arc::new(AtomicU64::new(0));
        let bytes = Arc::new(AtomicU64::new(0));
        for _ in 0..48 {
            let (server, state, requests, bytes) = (
                server.clone(),
                state.clone(),
                requests.clone(),
                bytes.clone(),
            );
            std::thread::spawn(move || {
                while let Ok(req) = server.recv() {
                    requests.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(latency);
                    answer(req, &state, &bytes);
                }
            });
        }
        HubStandin {
            endpoint: format!("http://127.0.0.1:{port}"),
            state,
            requests,
            bytes,
            server,
        }
    }

    /// Adds a fault.
    pub fn fault(&self, fault: Fault) {
        self.state.lock().unwrap().faults.push((fault, 0));
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// Body bytes sent so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::SeqCst)
    }

    /// Every request as `METHOD PATH [Range]`.
    pub fn log(&self) -> Vec<String> {
        self.state.lock().unwrap().log.clone()
    }
}

fn header(name: &str, value: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).unwrap()
}

fn json_error(status: u16, code: &str, message: &str) -> tiny_http::ResponseBox {
    tiny_http::Response::from_string(serde_json::json!({ "error": message }).to_string())
        .with_status_code(status)
        .with_header(header("X-Error-Code", code))
        .with_header(header("Content-Type", "application/json"))
        .boxed()
}

/// Zeros past `head`, made as they are read.
struct Sparse {
    head: Vec<u8>,
    pos: u64,
    end: u64,
}

impl Read for Sparse {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.end - self.pos).min(buf.len() as u64) as usize;
        for (i, b) in buf[..n].iter_mut().enumerate() {
            *b = self
                .head
                .get((self.pos + i as u64) as usize)
                .copied()
                .unwrap_or(0);
        }
        self.pos += n as u64;
        Ok(n)
    }
}

/// A reader that fails half-way: the connection closes before the promised length.
struct Broken(Sparse);

impl Read for Broken {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let half = self.0.end / 2;
        if self.0.pos >= half {
            return Err(std::io::Error::other("cut short"));
        }
        let take = buf.len().min((half - self.0.pos) as usize);
        self.0.read(&mut buf[..take])
    }
}

fn parse_range(v: &str, size: u64) -> Option<(u64, u64)> {
    let (a, b) = v.strip_prefix("bytes=")?.split_once('-')?;
    let a: u64 = a.parse().ok()?;
    let b: u64 = if b.is_empty() {
        size.saturating_sub(1)
    } else {
        b.parse().ok()?
    };
    (a < size).then_some((a, b.min(size - 1)))
}

fn answer(req: tiny_http::Request, state: &Mutex<State>, bytes: &AtomicU64) {
    let path = req.url().to_string();
    let get = |name: &'static str| {
        req.headers()
            .iter()
            .find(|h| h.field.equiv(name))
            .map(|h| h.value.as_str().to_string())
    };
    let range = get("Range");
    let auth = get("Authorization");
    let (fault, response) = {
        let mut st = state.lock().unwrap();
        st.log.push(format!(
            "GET {path}{}",
            range
                .as_deref()
                .map(|r| format!(" {r}"))
                .unwrap_or_default()
        ));
        let fault = st
            .faults
            .iter_mut()
            .find(|(f, used)| path.contains(&f.pattern) && *used < f.times)
            .map(|(f, used)| {
                *used += 1;
                f.kind
            });
        (
            fault,
            route(&st.repos, &path, range.as_deref(), auth.as_deref()),
        )
    };
    let response = match fault {
        Some(FaultKind::TooMany(after)) => (
            json_error(429, "", "slow down").with_header(header("Retry-After", &after.to_string())),
            None,
        ),
        Some(FaultKind::Unavailable) => (json_error(503, "", "unavailable"), None),
        Some(FaultKind::Stall(d)) => {
            std::thread::sleep(d);
            response
        }
        Some(FaultKind::Truncate) => match response.1 {
            Some(sparse) => {
                let len = (sparse.end - sparse.pos) as usize;
                let mut r = tiny_http::Response::new(
                    response.0.status_code(),
                    response.0.headers().to_vec(),
                    Box::new(Broken(sparse)) as Box<dyn Read + Send>,
                    Some(len),
                    None,
                );
                r.add_header(header("X-Cut", "1"));
                let _ = req.respond(r);
                return;
            }
            None => response,
        },
        None => response,
    };
    let (resp, sparse) = response;
    match sparse {
        Some(s) => {
            bytes.fetch_add(s.end - s.pos, Ordering::SeqCst);
            let len = (s.end - s.pos) as usize;
            let r = tiny_http::Response::new(
                resp.status_code(),
                resp.headers().to_vec(),
                Box::new(s) as Box<dyn Read + Send>,
                Some(len),
                None,
            );
            let _ = req.respond(r);
        }
        None => {
            bytes.fetch_add(resp.data_length().unwrap_or(0) as u64, Ordering::SeqCst);
            let _ = req.respond(resp);
        }
    }
}

type Routed = (tiny_http::ResponseBox, Option<Sparse>);

fn route(repos: &[StandinRepo], path: &str, range: Option<&str>, auth: Option<&str>) -> Routed {
    let plain = |r: tiny_http::ResponseBox| (r, None);
    let find = |id: &str| repos.iter().find(|r| r.id == id);
    if let Some(rest) = path.strip_prefix("/api/models/") {
        // ORG/NAME/revision/REV
        let parts: Vec<&str> = rest.splitn(4, '/').collect();
        let (org, name, api, rev) = match parts.as_slice() {
            [org, name, api @ ("revision" | "tree"), rev] => (*org, *name, *api, *rev),
            _ => return plain(json_error(404, "", "no such API")),
        };
        let rev = rev.split('?').next().unwrap_or(rev);
        let Some(repo) = find(&format!("{org}/{name}")) else {
            return plain(json_error(401, "RepoNotFound", "Repository not found"));
        };
        if rev != "main" && rev != repo.commit {
            return plain(json_error(404, "RevisionNotFound", "Invalid rev id"));
        }
        // The tree listing (huggingface_hub's list_repo_tree, llama.cpp's -hf, hf-mem).
        if api == "tree" {
            let entries: Vec<_> = repo
                .files
                .iter()
                .map(|(p, b)| {
                    let size = match b {
                        Body::Small(b) => b.len() as u64,
                        Body::Large { size, .. } => *size,
                    };
                    serde_json::json!({ "type": "file", "path": p, "size": size, "oid": repo.commit })
                })
                .collect();
            return plain(
                tiny_http::Response::from_string(serde_json::Value::from(entries).to_string())
                    .boxed(),
            );
        }
        let siblings: Vec<_> = repo
            .files
            .iter()
            .map(|(p, _)| serde_json::json!({ "rfilename": p }))
            .collect();
        let body = serde_json::json!({
            "id": repo.id, "sha": repo.commit, "siblings": siblings,
            "gated": if repo.gated_token.is_some() { "manual" } else { "false" },
        });
        return plain(tiny_http::Response::from_string(body.to_string()).boxed());
    }
    if let Some(rest) = path.strip_prefix("/v2/") {
        return registry(repos, rest, range);
    }
    let cdn = path.strip_prefix("/cdn/");
    let rest = cdn.unwrap_or(path.trim_start_matches('/'));
    // ORG/NAME/resolve/REV/PATH, or on the CDN ORG/NAME/REV/PATH
    let parts: Vec<&str> = rest
        .splitn(if cdn.is_some() { 4 } else { 5 }, '/')
        .collect();
    let (id, rev, file) = match (cdn.is_some(), parts.as_slice()) {
        (true, [org, name, rev, file]) => (format!("{org}/{name}"), *rev, *file),
        (false, [org, name, "resolve", rev, file]) => (format!("{org}/{name}"), *rev, *file),
        _ => return plain(json_error(404, "", "not found")),
    };
    let Some(repo) = find(&id) else {
        return plain(json_error(401, "RepoNotFound", "Repository not found"));
    };
    if cdn.is_none() {
        if let Some(token) = &repo.gated_token {
            if auth != Some(&format!("Bearer {token}")) {
                return plain(json_error(
                    401,
                    "GatedRepo",
                    "Access to this model is restricted",
                ));
            }
        }
    }
    if rev != "main" && rev != repo.commit {
        return plain(json_error(404, "RevisionNotFound", "Invalid rev id"));
    }
    let file = file.replace("%20", " ");
    let Some((_, body)) = repo.files.iter().find(|(p, _)| *p == file) else {
        return plain(json_error(404, "EntryNotFound", "Entry not found"));
    };
    let (head, size, large) = match body {
        Body::Small(b) => (b.clone(), b.len() as u64, false),
        Body::Large { head, size } => (head.clone(), *size, true),
    };
    if large && cdn.is_none() {
        let to = format!("/cdn/{id}/{}/{file}", repo.commit);
        return plain(
            tiny_http::Response::empty(302)
                .with_header(header("Location", &to))
                .with_header(header("X-Repo-Commit", &repo.commit))
                .with_header(header("X-Linked-Size", &size.to_string()))
                .boxed(),
        );
    }
    ranged(
        head,
        size,
        range,
        vec![header("X-Repo-Commit", &repo.commit)],
    )
}

/// A file's bytes, only `range` of them when asked (206 with `Content-Range`).
fn ranged(
    head: Vec<u8>,
    size: u64,
    range: Option<&str>,
    mut headers: Vec<tiny_http::Header>,
) -> Routed {
    headers.push(header("Accept-Ranges", "bytes"));
    let (status, start, end) = match range.and_then(|r| parse_range(r, size)) {
        Some((a, b)) => {
            headers.push(header("Content-Range", &format!("bytes {a}-{b}/{size}")));
            (206, a, b + 1)
        }
        None => (200, 0, size),
    };
    let resp = tiny_http::Response::new(
        tiny_http::StatusCode(status),
        headers,
        Box::new(std::io::empty()) as Box<dyn Read + Send>,
        Some(0),
        None,
    );
    (
        resp,
        Some(Sparse {
            head,
            pos: start,
            end,
        }),
    )
}

/// An Ollama registry: `NS/NAME/manifests/TAG` and `NS/NAME/blobs/DIGEST` (with Range).
fn registry(repos: &[StandinRepo], rest: &str, range: Option<&str>) -> Routed {
    let plain = |r: tiny_http::ResponseBox| (r, None);
    let parts: Vec<&str> = rest.splitn(4, '/').collect();
    let [ns, name, kind, last] = parts.as_slice() else {
        return plain(json_error(404, "", "not found"));
    };
    let id = format!("{ns}/{name}");
    let Some((repo, (tag, layers))) = repos
        .iter()
        .find_map(|r| Some((r, r.ollama.as_ref()?)))
        .filter(|(r, _)| r.id == id)
    else {
        return plain(json_error(404, "", "model not found"));
    };
    match *kind {
        "manifests" if last == tag => {
            let layers: Vec<_> = layers
                .iter()
                .map(|(media, digest)| serde_json::json!({ "mediaType": media, "digest": digest, "size": 1 }))
                .collect();
            let body = serde_json::json!({ "schemaVersion": 2, "layers": layers });
            plain(tiny_http::Response::from_string(body.to_string()).boxed())
        }
        "blobs" => {
            let Some((_, body)) = repo.files.iter().find(|(p, _)| p == last) else {
                return plain(json_error(404, "", "blob unknown"));
            };
            let (head, size) = match body {
                Body::Small(b) => (b.clone(), b.len() as u64),
                Body::Large { head, size } => (head.clone(), *size),
            };
            ranged(head, size, range, Vec::new())
        }
        _ => plain(json_error(404, "", "manifest unknown")),
    }
}

/// The files of a safetensors checkpoint, sharded `shards` ways, from tensors `(name, dtype,
/// shape)`: an index when sharded, each shard's real header and its data as zeros. Returns the
/// files and the tensors' bytes.
pub fn safetensors_repo(
    config: &serde_json::Value,
    tensors: &[(String, &str, Vec<u64>)],
    shards: usize,
) -> (Vec<(String, Body)>, u64) {
    let mut files = vec![(
        "config.json".to_string(),
        Body::Small(config.to_string().into_bytes()),
    )];
    let mut weight_map = serde_json::Map::new();
    let mut total = 0u64;
    // Exactly `shards` files, the tensors spread evenly over them.
    let bounds: Vec<usize> = (0..=shards).map(|k| k * tensors.len() / shards).collect();
    for (k, chunk) in bounds.windows(2).map(|w| &tensors[w[0]..w[1]]).enumerate() {
        let name = if shards == 1 {
            "model.safetensors".to_string()
        } else {
            format!("model-{:05}-of-{shards:05}.safetensors", k + 1)
        };
        let mut header = serde_json::Map::new();
        header.insert("__metadata__".into(), serde_json::json!({ "format": "pt" }));
        let mut offset = 0u64;
        for (t, dtype, shape) in chunk {
            let bits = match *dtype {
                "F32" | "I32" => 32,
                "BF16" | "F16" => 16,
                "F8_E4M3" | "U8" | "I8" => 8,
                other => panic!("dtype {other}"),
            };
            let n = shape.iter().product::<u64>() * bits / 8;
            header.insert(
                t.clone(),
                serde_json::json!({ "dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n] }),
            );
            offset += n;
            weight_map.insert(t.clone(), serde_json::Value::from(name.clone()));
        }
        total += offset;
        let mut json = serde_json::Value::Object(header).to_string().into_bytes();
        while json.len() % 8 != 0 {
            json.push(b' ');
        }
        let mut head = (json.len() as u64).to_le_bytes().to_vec();
        head.extend(json);
        let size = head.len() as u64 + offset;
        files.push((name, Body::Large { head, size }));
    }
    if shards > 1 {
        let index =
            serde_json::json!({ "metadata": { "total_size": total }, "weight_map": weight_map });
        files.insert(
            1,
            (
                "model.safetensors.index.json".into(),
                Body::Small(index.to_string().into_bytes()),
            ),
        );
    }
    (files, total)
}

/// A Llama-shaped checkpoint's tensors as Hugging Face names them, in `dtype`; with `fp8`,
/// each linear layer in F8_E4M3 with a 128×128-block F32 `weight_scale_inv` (DeepSeek-V3's
/// layout).
pub fn llama_tensors(
    c: &serde_json::Value,
    dtype: &'static str,
    fp8: bool,
) -> Vec<(String, &'static str, Vec<u64>)> {
    let g = |k: &str| c[k].as_u64().unwrap();
    let (h, layers, inter, vocab) = (
        g("hidden_size"),
        g("num_hidden_layers"),
        g("intermediate_size"),
        g("vocab_size"),
    );
    let heads = g("num_attention_heads");
    let kv = g("num_key_value_heads");
    let hd = c["head_dim"].as_u64().unwrap_or(h / heads);
    // Qwen3 normalises each head's query and key.
    let qk_norm = c["model_type"] == "qwen3";
    let mut out = vec![(
        "model.embed_tokens.weight".to_string(),
        dtype,
        vec![vocab, h],
    )];
    for l in 0..layers {
        let p = format!("model.layers.{l}");
        let linears = [
            ("self_attn.q_proj", heads * hd, h),
            ("self_attn.k_proj", kv * hd, h),
            ("self_attn.v_proj", kv * hd, h),
            ("self_attn.o_proj", h, heads * hd),
            ("mlp.gate_proj", inter, h),
            ("mlp.up_proj", inter, h),
            ("mlp.down_proj", h, inter),
        ];
        for (name, rows, cols) in linears {
            if fp8 {
                out.push((format!("{p}.{name}.weight"), "F8_E4M3", vec![rows, cols]));
                out.push((
                    format!("{p}.{name}.weight_scale_inv"),
                    "F32",
                    vec![rows.div_ceil(128), cols.div_ceil(128)],
                ));
            } else {
                out.push((format!("{p}.{name}.weight"), dtype, vec![rows, cols]));
            }
        }
        if qk_norm {
            out.push((format!("{p}.self_attn.q_norm.weight"), dtype, vec![hd]));
            out.push((format!("{p}.self_attn.k_norm.weight"), dtype, vec![hd]));
        }
        out.push((format!("{p}.input_layernorm.weight"), dtype, vec![h]));
        out.push((
            format!("{p}.post_attention_layernorm.weight"),
            dtype,
            vec![h],
        ));
    }
    out.push(("model.norm.weight".into(), dtype, vec![h]));
    if !c["tie_word_embeddings"].as_bool().unwrap_or(false) {
        out.push(("lm_head.weight".into(), dtype, vec![vocab, h]));
    }
    out
}

/// A repository of `files` under a made-up commit derived from the id.
pub fn repo(id: &str, files: Vec<(String, Body)>) -> StandinRepo {
    let mut commit = String::new();
    for b in id.bytes().cycle().take(20) {
        commit.push_str(&format!("{:02x}", b));
    }
    StandinRepo {
        id: id.into(),
        commit,
        files,
        gated_token: None,
        ollama: None,
    }
}

/// Request counts by kind, for assertions: (info, small files, redirects + ranges).
pub fn kinds(log: &[String]) -> HashMap<&'static str, usize> {
    let mut m = HashMap::new();
    for l in log {
        let k = if l.contains("/api/models/") {
            "info"
        } else if l.contains("/cdn/") {
            "range"
        } else {
            "resolve"
        };
        *m.entry(k).or_default() += 1;
    }
    m
}
