//! The part of the runner's script contract that every Rust harness (quiche, quinn, s2n-quic,
//! msquic) implements the same way (docs/implementations.md, "Environment"):
//!
//! - the `QIR_NEGOTIATED {json}` line on stderr ([`Negotiated`], with a JSON string escaper,
//!   [`json_string`]) that the runner parses with `interop_runner.params.parse_negotiated`;
//! - the flow-control windows all four advertise ([`STREAM_WINDOW`], [`CONNECTION_WINDOW`]);
//! - reading the contract's environment ([`env_opt`], [`env_or_empty`], [`env_required`],
//!   [`env_bytes`], [`listen_addr`]) and the URLs in `REQUESTS` ([`RequestUrl`]);
//! - serving `WWW`: which file a request names ([`www_file`]) and the path of an hq-interop
//!   request ([`hq_request_path`]);
//! - the workload (`WORKLOAD`, `STREAMS`, `CONNECTIONS`: [`Workload`]), the client's requests
//!   per connection ([`client_plan`], [`plan_connections`]) and where an upload lands
//!   ([`upload_file`], [`upload_name_ok`]);
//! - the names of the protocols and TLS 1.3 cipher suites the runner passes ([`ALPN_H3`],
//!   [`ALPN_HQ_INTEROP`], [`cipher`]) and the hex form of connection IDs ([`hex`]).
//!
//! No dependencies: the nodes build offline from the crates each harness's Cargo.lock pins.

#![forbid(unsafe_code)]

use std::fmt::{self, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::path::{Component, Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// Protocols, cipher suites, flow control

/// ALPN of HTTP/3.
pub const ALPN_H3: &str = "h3";
/// ALPN of HTTP/0.9 over QUIC (`GET /path\r\n` on a bidirectional stream).
pub const ALPN_HQ_INTEROP: &str = "hq-interop";

/// Per-stream flow-control (receive) window every harness advertises, 16 MiB, so that a
/// 10 Gbit/s path is not window limited.
pub const STREAM_WINDOW: u32 = 16 << 20;
/// Connection flow-control (receive) window every harness advertises, 32 MiB.
pub const CONNECTION_WINDOW: u32 = 32 << 20;

/// The TLS 1.3 cipher suites the runner can ask for in `CIPHER` (and reports back).
pub mod cipher {
    pub const AES_128_GCM_SHA256: &str = "TLS_AES_128_GCM_SHA256";
    pub const AES_256_GCM_SHA384: &str = "TLS_AES_256_GCM_SHA384";
    pub const CHACHA20_POLY1305_SHA256: &str = "TLS_CHACHA20_POLY1305_SHA256";
    /// All of them, in the runner's order (interop_runner/params.py CIPHERS).
    pub const ALL: [&str; 3] = [
        AES_128_GCM_SHA256,
        AES_256_GCM_SHA384,
        CHACHA20_POLY1305_SHA256,
    ];

    /// The IANA id of a suite name (RFC 8446 B.4).
    pub fn iana_id(name: &str) -> Option<u16> {
        match name {
            AES_128_GCM_SHA256 => Some(0x1301),
            AES_256_GCM_SHA384 => Some(0x1302),
            CHACHA20_POLY1305_SHA256 => Some(0x1303),
            _ => None,
        }
    }

    /// The suite name of an IANA id (None for anything else).
    pub fn from_iana_id(id: u32) -> Option<&'static str> {
        match id {
            0x1301 => Some(AES_128_GCM_SHA256),
            0x1302 => Some(AES_256_GCM_SHA384),
            0x1303 => Some(CHACHA20_POLY1305_SHA256),
            _ => None,
        }
    }
}

/// Lower-case hex of `bytes` (connection IDs in qlog file names, key log secrets).
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

// ---------------------------------------------------------------------------------------------
// QIR_NEGOTIATED

/// What precedes the JSON object on the line (interop_runner/params.py NEGOTIATED_MARKER).
pub const NEGOTIATED_MARKER: &str = "QIR_NEGOTIATED ";

/// Appends `s` as a JSON string literal (with the quotes) to `out`.
///
/// The result is plain printable ASCII: `"` and `\` are escaped, control characters and
/// everything outside ASCII become `\uXXXX` (UTF-16, surrogate pairs above U+FFFF). So the line
/// stays one line for any reader, also for Python's `str.splitlines()`, which the runner uses
/// and which also splits at U+0085, U+2028 and U+2029.
pub fn push_json_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// `s` as a JSON string literal (see [`push_json_string`]).
pub fn json_string(s: &str) -> String {
    let mut out = String::new();
    push_json_string(&mut out, s);
    out
}

/// The `QIR_NEGOTIATED {json}` line: what the library itself reports after the handshake
/// (never an echo of the request). Keys in the order they were first set; a missing or empty
/// value leaves its key out (the runner ignores empty values anyway).
///
/// ```
/// let line = qir_harness::Negotiated::new()
///     .alpn("h3")
///     .cipher(Some("TLS_AES_128_GCM_SHA256"))
///     .congestion_control(None)
///     .line();
/// assert_eq!(line, r#"QIR_NEGOTIATED {"alpn": "h3", "cipher": "TLS_AES_128_GCM_SHA256"}"#);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Negotiated {
    fields: Vec<(String, String)>,
}

impl Negotiated {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value` (replacing an earlier value); None or "" changes nothing.
    pub fn field<'a>(mut self, key: &str, value: impl Into<Option<&'a str>>) -> Self {
        let Some(value) = value.into().filter(|v| !v.is_empty()) else {
            return self;
        };
        match self.fields.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value.to_string(),
            None => self.fields.push((key.to_string(), value.to_string())),
        }
        self
    }

    /// The negotiated application protocol.
    pub fn alpn<'a>(self, alpn: impl Into<Option<&'a str>>) -> Self {
        self.field("alpn", alpn)
    }

    /// The negotiated application protocol as the library hands it out (bytes; invalid UTF-8
    /// becomes U+FFFD).
    pub fn alpn_bytes<'a>(self, alpn: impl Into<Option<&'a [u8]>>) -> Self {
        match alpn.into() {
            Some(bytes) => self.field("alpn", String::from_utf8_lossy(bytes).as_ref()),
            None => self,
        }
    }

    /// The TLS 1.3 cipher suite of the 1-RTT keys (IANA name, e.g. TLS_AES_128_GCM_SHA256).
    pub fn cipher<'a>(self, cipher: impl Into<Option<&'a str>>) -> Self {
        self.field("cipher", cipher)
    }

    /// The congestion controller the connection runs.
    pub fn congestion_control<'a>(self, cc: impl Into<Option<&'a str>>) -> Self {
        self.field("congestion_control", cc)
    }

    /// The JSON object, e.g. `{"alpn": "h3", "congestion_control": "cubic"}`.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{");
        for (i, (key, value)) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            push_json_string(&mut out, key);
            out.push_str(": ");
            push_json_string(&mut out, value);
        }
        out.push('}');
        out
    }

    /// The whole line: `QIR_NEGOTIATED {json}`.
    pub fn line(&self) -> String {
        format!("{NEGOTIATED_MARKER}{}", self.to_json())
    }

    /// Prints the line to stderr (one write, so it is not interleaved with other output).
    pub fn print(&self) {
        eprintln!("{}", self.line());
    }
}

// ---------------------------------------------------------------------------------------------
// Environment

/// A contract variable that is missing or cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvError {
    Missing(String),
    Invalid {
        name: String,
        value: String,
        reason: String,
    },
}

impl fmt::Display for EnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnvError::Missing(name) => write!(f, "environment variable {name} is not set"),
            EnvError::Invalid {
                name,
                value,
                reason,
            } => write!(f, "{name}={value:?}: {reason}"),
        }
    }
}

impl std::error::Error for EnvError {}

/// The value of environment variable `name`; None when unset or empty (the runner passes ""
/// for "not asked", e.g. CIPHER, SSLKEYLOGFILE, QLOGDIR).
pub fn env_opt(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The value of environment variable `name`, or "" when unset.
pub fn env_or_empty(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

/// The value of environment variable `name`, which must be set and non-empty.
pub fn env_required(name: &str) -> Result<String, EnvError> {
    env_opt(name).ok_or_else(|| EnvError::Missing(name.to_string()))
}

/// A byte count (SOCKET_RCVBUF, SOCKET_SNDBUF): None when unset or empty.
pub fn env_bytes(name: &str) -> Result<Option<usize>, EnvError> {
    parse_bytes(name, &env_or_empty(name))
}

fn parse_bytes(name: &str, value: &str) -> Result<Option<usize>, EnvError> {
    let v = value.trim();
    if v.is_empty() {
        return Ok(None);
    }
    v.parse::<usize>().map(Some).map_err(|e| EnvError::Invalid {
        name: name.to_string(),
        value: value.to_string(),
        reason: format!("not a byte count ({e})"),
    })
}

/// The server's listening address: `IP` (an address literal, IPv6 with or without brackets)
/// and `PORT`, both required.
pub fn listen_addr() -> Result<SocketAddr, EnvError> {
    parse_listen_addr(&env_required("IP")?, &env_required("PORT")?)
}

fn parse_listen_addr(ip: &str, port: &str) -> Result<SocketAddr, EnvError> {
    let invalid = |name: &str, value: &str, e: &dyn fmt::Display| EnvError::Invalid {
        name: name.to_string(),
        value: value.to_string(),
        reason: e.to_string(),
    };
    let bare = ip
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or(ip);
    let addr: IpAddr = bare.parse().map_err(|e| invalid("IP", ip, &e))?;
    let port: u16 = port.parse().map_err(|e| invalid("PORT", port, &e))?;
    Ok(SocketAddr::new(addr, port))
}

// ---------------------------------------------------------------------------------------------
// REQUESTS

/// A URL the runner can not use as a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlError(pub String);

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UrlError {}

/// One URL of `REQUESTS`, e.g. `https://198.19.0.1:4433/file-52428800.bin`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestUrl {
    /// The URL as given.
    pub url: String,
    /// `host:port` as written in the URL (`[v6]:port` for IPv6), for `:authority` and resolvers.
    pub authority: String,
    /// The host without IPv6 brackets.
    pub host: String,
    /// The port (443 when the URL has none).
    pub port: u16,
    /// Path and query as sent in the request (`/` when the URL has none).
    pub path: String,
}

impl RequestUrl {
    /// Splits an `https://` URL.
    pub fn parse(raw: &str) -> Result<Self, UrlError> {
        let rest = raw
            .strip_prefix("https://")
            .ok_or_else(|| UrlError(format!("URL {raw:?} is not https://")))?;
        let rest = rest.split('#').next().unwrap_or("");
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest[i..].starts_with('/') => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        let bad_host = || UrlError(format!("bad host in URL {raw:?}"));
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let end = v6.find(']').ok_or_else(bad_host)?;
            match &v6[end + 1..] {
                "" => (&v6[..end], None),
                p => (&v6[..end], Some(p.strip_prefix(':').ok_or_else(bad_host)?)),
            }
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(bad_host());
        }
        let port = match port {
            None => 443,
            Some(p) => p
                .parse()
                .map_err(|_| UrlError(format!("bad port in URL {raw:?}")))?,
        };
        Ok(RequestUrl {
            url: raw.to_string(),
            authority: authority.to_string(),
            host: host.to_string(),
            port,
            path,
        })
    }

    /// The file name the download is stored under in DOWNLOADS: the last segment of the path,
    /// without query. None when there is none (also for "." and "..").
    pub fn file_name(&self) -> Option<&str> {
        let path = self.path.split('?').next().unwrap_or("");
        let name = path.rsplit('/').next().unwrap_or("");
        match name {
            "" | "." | ".." => None,
            _ => Some(name),
        }
    }

    /// The server address when the host is an IP literal (the runner always uses one).
    pub fn ip_addr(&self) -> Option<SocketAddr> {
        self.host
            .parse::<IpAddr>()
            .ok()
            .map(|ip| SocketAddr::new(ip, self.port))
    }
}

/// Every URL of a `REQUESTS` value (space separated).
pub fn parse_requests(requests: &str) -> Result<Vec<RequestUrl>, UrlError> {
    requests.split_whitespace().map(RequestUrl::parse).collect()
}

// ---------------------------------------------------------------------------------------------
// WWW

/// The file below `www` that the request path `path` (e.g. `/file-52428800.bin`) names; query and
/// fragment are ignored. None when it names no file below `www`: empty, or a component that would
/// leave it (`..`, a root).
pub fn www_file(www: &Path, path: &str) -> Option<PathBuf> {
    let path = path.split(['?', '#']).next().unwrap_or("");
    let mut file = www.to_path_buf();
    let mut named = false;
    for c in Path::new(path.trim_start_matches('/')).components() {
        match c {
            Component::Normal(part) => {
                file.push(part);
                named = true;
            }
            Component::CurDir => {}
            _ => return None,
        }
    }
    named.then_some(file)
}

/// The path of an hq-interop (HTTP/0.9) request, `GET /path\r\n`: `/path` (up to the first
/// space or line end). An error for anything else.
pub fn hq_request_path(request: &[u8]) -> Result<&str, String> {
    let text = std::str::from_utf8(request).map_err(|_| "request is not UTF-8".to_string())?;
    let line = text.lines().next().unwrap_or("");
    let path = line
        .strip_prefix("GET ")
        .map(|rest| rest.trim().split(' ').next().unwrap_or(""))
        .unwrap_or("");
    if path.is_empty() {
        return Err(format!("not an hq-interop GET request: {line:?}"));
    }
    Ok(path)
}

// ---------------------------------------------------------------------------------------------
// Workloads (WORKLOAD, STREAMS, CONNECTIONS, UPLOAD_REQUESTS, UPLOADS)

/// The exit status that tells the runner "unsupported" (recorded as such, not as failed).
pub const EXIT_UNSUPPORTED: i32 = 127;

/// The one-line reason a workload with uploads cannot run over hq-interop.
pub const HQ_NO_BODY: &str = "hq-interop requests carry no body";

/// Which way a workload's data go (`WORKLOAD`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    /// GET: the server sends (the default, also for an empty `WORKLOAD`).
    Download,
    /// PUT: the client sends.
    Upload,
    /// Both at once, each on streams of its own.
    Bidirectional,
}

impl WorkloadKind {
    /// `WORKLOAD` as the runner passes it; "" (a QIR image's run) is a download.
    pub fn parse(value: &str) -> Result<Self, EnvError> {
        match value.trim() {
            "" | "download" => Ok(Self::Download),
            "upload" => Ok(Self::Upload),
            "bidirectional" => Ok(Self::Bidirectional),
            other => Err(EnvError::Invalid {
                name: "WORKLOAD".into(),
                value: other.into(),
                reason: "not download, upload or bidirectional".into(),
            }),
        }
    }

    /// The runner's name of the kind.
    pub fn name(self) -> &'static str {
        match self {
            Self::Download => "download",
            Self::Upload => "upload",
            Self::Bidirectional => "bidirectional",
        }
    }

    /// Whether the client GETs (`REQUESTS`).
    pub fn downloads(self) -> bool {
        self != Self::Upload
    }

    /// Whether the client PUTs (`UPLOAD_REQUESTS`).
    pub fn uploads(self) -> bool {
        self != Self::Download
    }
}

/// A run's workload: its kind, the concurrent streams per connection and direction, and the
/// client's parallel connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    pub kind: WorkloadKind,
    pub streams: usize,
    pub connections: usize,
}

impl Default for Workload {
    /// The QUIC Interop Runner's only workload: one download on one stream of one connection.
    fn default() -> Self {
        Workload {
            kind: WorkloadKind::Download,
            streams: 1,
            connections: 1,
        }
    }
}

impl Workload {
    /// `WORKLOAD`, `STREAMS` and `CONNECTIONS` (unset or empty: download, 1, 1).
    pub fn from_env() -> Result<Self, EnvError> {
        Self::parse(
            &env_or_empty("WORKLOAD"),
            &env_or_empty("STREAMS"),
            &env_or_empty("CONNECTIONS"),
        )
    }

    /// The workload of these three values (see [`Workload::from_env`]).
    pub fn parse(kind: &str, streams: &str, connections: &str) -> Result<Self, EnvError> {
        Ok(Workload {
            kind: WorkloadKind::parse(kind)?,
            streams: parse_count("STREAMS", streams)?,
            connections: parse_count("CONNECTIONS", connections)?,
        })
    }

    /// How many transfers each direction the workload moves has (URLs in each list).
    pub fn transfers(&self) -> usize {
        self.streams * self.connections
    }

    /// Why the workload cannot run over `alpn` (None: it can): hq-interop (HTTP/0.9) has no
    /// request body, so there is no upload over it.
    pub fn unsupported_over(&self, alpn: &str) -> Option<String> {
        (alpn == ALPN_HQ_INTEROP && self.kind.uploads()).then(|| {
            format!(
                "unsupported workload '{}' over {alpn}: {HQ_NO_BODY}",
                self.kind.name()
            )
        })
    }
}

/// STREAMS, CONNECTIONS: a whole number of at least 1 ("" is 1).
fn parse_count(name: &str, value: &str) -> Result<usize, EnvError> {
    let v = value.trim();
    if v.is_empty() {
        return Ok(1);
    }
    match v.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(EnvError::Invalid {
            name: name.into(),
            value: value.into(),
            reason: "not a whole number >= 1".into(),
        }),
    }
}

/// Why the client's requests do not fit the workload (or a URL is unusable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError(pub String);

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlanError {}

impl From<EnvError> for PlanError {
    fn from(e: EnvError) -> Self {
        PlanError(e.to_string())
    }
}

impl From<UrlError> for PlanError {
    fn from(e: UrlError) -> Self {
        PlanError(e.0)
    }
}

/// What one client connection runs, all at once, each request on a stream of its own: its
/// share of `REQUESTS` (GET) and of `UPLOAD_REQUESTS` (PUT).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionRequests {
    /// The connection's number (from 0).
    pub index: usize,
    pub downloads: Vec<RequestUrl>,
    pub uploads: Vec<RequestUrl>,
}

impl ConnectionRequests {
    /// The request whose server (host, port, authority) the connection goes to: its first;
    /// [`plan_connections`] checks that the others name the same server.
    pub fn first(&self) -> &RequestUrl {
        self.downloads
            .first()
            .or(self.uploads.first())
            .expect("a planned connection has a request")
    }

    /// All its requests.
    pub fn len(&self) -> usize {
        self.downloads.len() + self.uploads.len()
    }

    /// Never true for a planned connection.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The client's workload and its connections, from the environment (`WORKLOAD`, `STREAMS`,
/// `CONNECTIONS`, `REQUESTS`, `UPLOAD_REQUESTS`); see [`plan_connections`].
pub fn client_plan() -> Result<(Workload, Vec<ConnectionRequests>), PlanError> {
    let workload = Workload::from_env()?;
    let downloads = parse_requests(&env_or_empty("REQUESTS"))?;
    let uploads = parse_requests(&env_or_empty("UPLOAD_REQUESTS"))?;
    let plan = plan_connections(&workload, downloads, uploads)?;
    Ok((workload, plan))
}

/// Splits the URLs per connection: connection `c` gets the `STREAMS` requests from position
/// `c * STREAMS` of each list the workload moves. Each list must hold `STREAMS x CONNECTIONS`
/// URLs (the one a workload does not move none), each with a file name (an upload's a valid
/// [`upload_name_ok`]), and the URLs of one connection must name one server. One exception
/// keeps QIR's meaning of `REQUESTS`: with one stream on one connection, any number of
/// downloads run on that connection.
pub fn plan_connections(
    w: &Workload,
    downloads: Vec<RequestUrl>,
    uploads: Vec<RequestUrl>,
) -> Result<Vec<ConnectionRequests>, PlanError> {
    let legacy = w.kind == WorkloadKind::Download && w.transfers() == 1 && !downloads.is_empty();
    if !legacy {
        check_count(w, "REQUESTS", downloads.len(), w.kind.downloads())?;
    }
    check_count(w, "UPLOAD_REQUESTS", uploads.len(), w.kind.uploads())?;
    check_names(&downloads, &uploads)?;
    let per_connection = if legacy { downloads.len() } else { w.streams };
    let mut downloads = downloads.into_iter();
    let mut uploads = uploads.into_iter();
    let plan: Vec<ConnectionRequests> = (0..w.connections)
        .map(|index| ConnectionRequests {
            index,
            downloads: downloads.by_ref().take(per_connection).collect(),
            uploads: uploads.by_ref().take(w.streams).collect(),
        })
        .collect();
    plan.iter().try_for_each(check_one_server)?;
    Ok(plan)
}

/// A list holds STREAMS x CONNECTIONS URLs when its direction is moved, else none.
fn check_count(w: &Workload, list: &str, len: usize, moved: bool) -> Result<(), PlanError> {
    let want = if moved { w.transfers() } else { 0 };
    if len == want {
        return Ok(());
    }
    Err(PlanError(format!(
        "{list} has {len} URL(s), workload {} with STREAMS={} x CONNECTIONS={} needs {want}",
        w.kind.name(),
        w.streams,
        w.connections
    )))
}

/// Every URL names a file (the download's name in DOWNLOADS, the upload's in UPLOADS).
fn check_names(downloads: &[RequestUrl], uploads: &[RequestUrl]) -> Result<(), PlanError> {
    let no_name = |u: &RequestUrl| PlanError(format!("URL {:?} has no file name", u.url));
    if let Some(u) = downloads.iter().find(|u| u.file_name().is_none()) {
        return Err(no_name(u));
    }
    match uploads
        .iter()
        .find(|u| !u.file_name().is_some_and(upload_name_ok))
    {
        Some(u) => Err(no_name(u)),
        None => Ok(()),
    }
}

/// The requests of one connection go to one server (that of its first request).
fn check_one_server(c: &ConnectionRequests) -> Result<(), PlanError> {
    let first = c.first();
    let other = c
        .downloads
        .iter()
        .chain(&c.uploads)
        .find(|u| (&u.host, u.port) != (&first.host, first.port));
    match other {
        Some(u) => Err(PlanError(format!(
            "connection {}: {:?} and {:?} name different servers",
            c.index, first.url, u.url
        ))),
        None => Ok(()),
    }
}

/// Whether `name` may name an uploaded file in `UPLOADS`: one plain path segment (not empty,
/// no `/`, no `..`, not `.`, no NUL), so an upload never lands outside that directory.
pub fn upload_name_ok(name: &str) -> bool {
    !(name.is_empty() || name == "." || name.contains(['/', '\0']) || name.contains(".."))
}

/// The file below `uploads` that the path of a PUT request (`/name`, query and fragment
/// ignored) names; None unless the name passes [`upload_name_ok`].
pub fn upload_file(uploads: &Path, path: &str) -> Option<PathBuf> {
    let path = path.split(['?', '#']).next().unwrap_or("");
    let name = path.strip_prefix('/').unwrap_or(path);
    upload_name_ok(name).then(|| uploads.join(name))
}

// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    /// A strict parser for the JSON this crate writes: one object whose keys and values are
    /// strings, nothing after it. Returns the pairs in order or what is wrong.
    fn parse_object(text: &str) -> Result<Vec<(String, String)>, String> {
        struct P<'a> {
            s: &'a [u8],
            i: usize,
        }
        impl P<'_> {
            fn ws(&mut self) {
                while self.i < self.s.len() && b" \t\r\n".contains(&self.s[self.i]) {
                    self.i += 1;
                }
            }
            fn eat(&mut self, c: u8) -> Result<(), String> {
                self.ws();
                if self.s.get(self.i) == Some(&c) {
                    self.i += 1;
                    Ok(())
                } else {
                    Err(format!("expected {:?} at {}", c as char, self.i))
                }
            }
            fn hex4(&mut self) -> Result<u32, String> {
                let h = self.s.get(self.i..self.i + 4).ok_or("short \\u escape")?;
                let h = std::str::from_utf8(h).map_err(|e| e.to_string())?;
                self.i += 4;
                u32::from_str_radix(h, 16).map_err(|e| format!("\\u{h}: {e}"))
            }
            fn string(&mut self) -> Result<String, String> {
                self.eat(b'"')?;
                let mut out = String::new();
                loop {
                    let rest = std::str::from_utf8(&self.s[self.i..]).map_err(|e| e.to_string())?;
                    let c = rest.chars().next().ok_or("unterminated string")?;
                    self.i += c.len_utf8();
                    match c {
                        '"' => return Ok(out),
                        '\u{0}'..='\u{1f}' => return Err(format!("raw control char {c:?}")),
                        '\\' => {
                            let e = *self.s.get(self.i).ok_or("dangling backslash")?;
                            self.i += 1;
                            match e {
                                b'"' => out.push('"'),
                                b'\\' => out.push('\\'),
                                b'/' => out.push('/'),
                                b'b' => out.push('\u{8}'),
                                b'f' => out.push('\u{c}'),
                                b'n' => out.push('\n'),
                                b'r' => out.push('\r'),
                                b't' => out.push('\t'),
                                b'u' => {
                                    let hi = self.hex4()?;
                                    let code = if (0xd800..0xdc00).contains(&hi) {
                                        if self.s.get(self.i..self.i + 2) != Some(b"\\u") {
                                            return Err("lone high surrogate".into());
                                        }
                                        self.i += 2;
                                        let lo = self.hex4()?;
                                        if !(0xdc00..0xe000).contains(&lo) {
                                            return Err("bad low surrogate".into());
                                        }
                                        0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)
                                    } else {
                                        hi
                                    };
                                    out.push(char::from_u32(code).ok_or("lone surrogate")?);
                                }
                                other => return Err(format!("bad escape \\{}", other as char)),
                            }
                        }
                        c => out.push(c),
                    }
                }
            }
        }
        let mut p = P {
            s: text.as_bytes(),
            i: 0,
        };
        let mut pairs = Vec::new();
        p.eat(b'{')?;
        p.ws();
        if p.s.get(p.i) == Some(&b'}') {
            p.i += 1;
        } else {
            loop {
                let k = p.string()?;
                p.eat(b':')?;
                let v = p.string()?;
                pairs.push((k, v));
                p.ws();
                match p.s.get(p.i) {
                    Some(b',') => p.i += 1,
                    Some(b'}') => {
                        p.i += 1;
                        break;
                    }
                    _ => return Err(format!("expected , or }} at {}", p.i)),
                }
            }
        }
        p.ws();
        if p.i != p.s.len() {
            return Err(format!("trailing data at {}", p.i));
        }
        Ok(pairs)
    }

    /// The JSON part of a QIR_NEGOTIATED line, checked the way the runner finds it.
    fn json_of(line: &str) -> Vec<(String, String)> {
        assert!(!line.contains(['\n', '\r', '\u{b}', '\u{c}', '\u{1c}', '\u{1d}', '\u{1e}']));
        assert!(line.is_ascii(), "{line}");
        let json = line.strip_prefix(NEGOTIATED_MARKER).expect("marker");
        parse_object(json).unwrap_or_else(|e| panic!("{json}: {e}"))
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const NASTY: &[&str] = &[
        "TLS_\"AES\"_128\\GCM\u{1}",
        "1.2.3 \"beta\\\" \n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f}",
        "é ü 😀 \u{85} \u{2028} \u{2029} \u{fffd}",
        "\\u0041 /slash/",
        "",
    ];

    #[test]
    fn json_string_round_trips() {
        for s in NASTY {
            let lit = json_string(s);
            assert!(
                lit.is_ascii() && !lit.chars().any(|c| c.is_ascii_control()),
                "{lit}"
            );
            let parsed = parse_object(&format!("{{{lit}: {lit}}}")).unwrap();
            assert_eq!(parsed, pairs(&[(s, s)]));
        }
    }

    #[test]
    fn json_string_escapes() {
        assert_eq!(json_string("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(json_string("\u{1}\n\u{7f}"), r#""\u0001\n\u007f""#);
        assert_eq!(json_string("é😀"), r#""\u00e9\ud83d\ude00""#);
    }

    #[test]
    fn negotiated_line_is_json_with_a_quote_backslash_and_control_char() {
        let cipher = "TLS_AES_\"256\"_GCM\\SHA384\u{7}";
        let version = "v1.0\"\\\u{1b}[0m\t";
        let neg = Negotiated::new()
            .alpn_bytes(&b"h3\"\\\x01\xff"[..])
            .cipher(cipher)
            .congestion_control(Some("cubic"))
            .field("version", version);
        assert_eq!(
            json_of(&neg.line()),
            pairs(&[
                ("alpn", "h3\"\\\u{1}\u{fffd}"),
                ("cipher", cipher),
                ("congestion_control", "cubic"),
                ("version", version),
            ])
        );
    }

    #[test]
    fn negotiated_line_as_the_harnesses_printed_it() {
        let neg = Negotiated::new()
            .alpn("hq-interop")
            .cipher(cipher::from_iana_id(0x1302))
            .congestion_control("bbr");
        assert_eq!(
            neg.line(),
            "QIR_NEGOTIATED {\"alpn\": \"hq-interop\", \"cipher\": \"TLS_AES_256_GCM_SHA384\", \
             \"congestion_control\": \"bbr\"}"
        );
    }

    #[test]
    fn negotiated_skips_missing_and_replaces() {
        assert_eq!(Negotiated::new().line(), "QIR_NEGOTIATED {}");
        assert_eq!(json_of(&Negotiated::new().line()), vec![]);
        let neg = Negotiated::new()
            .alpn(None)
            .cipher("")
            .alpn_bytes(None)
            .congestion_control("reno")
            .alpn("h3")
            .congestion_control("cubic");
        assert_eq!(
            json_of(&neg.line()),
            pairs(&[("congestion_control", "cubic"), ("alpn", "h3")])
        );
    }

    #[test]
    fn strict_parser_rejects_what_python_rejects() {
        for bad in [
            "{\"a\": \"x\ny\"}",
            "{\"a\": \"x\\q\"}",
            "{\"a\": \"x\"",
            "{\"a\": \"x\"} x",
            "{\"a\" \"x\"}",
            "{\"a\": \"\\ud800\"}",
        ] {
            assert!(parse_object(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn windows_and_names() {
        assert_eq!(STREAM_WINDOW, 16 * 1024 * 1024);
        assert_eq!(CONNECTION_WINDOW, 32 * 1024 * 1024);
        for (i, name) in cipher::ALL.iter().enumerate() {
            let id = cipher::iana_id(name).unwrap();
            assert_eq!(id, 0x1301 + i as u16);
            assert_eq!(cipher::from_iana_id(u32::from(id)), Some(*name));
        }
        assert_eq!(cipher::iana_id("TLS_AES_128_CCM_SHA256"), None);
        assert_eq!(cipher::from_iana_id(0x1304), None);
        assert_eq!(hex(&[0x00, 0x0f, 0xab, 0xff]), "000fabff");
    }

    #[test]
    fn env_values() {
        assert_eq!(parse_bytes("SOCKET_RCVBUF", ""), Ok(None));
        assert_eq!(parse_bytes("SOCKET_RCVBUF", "4194304"), Ok(Some(4 << 20)));
        let err = parse_bytes("SOCKET_RCVBUF", "4MiB").unwrap_err();
        assert!(err
            .to_string()
            .starts_with("SOCKET_RCVBUF=\"4MiB\": not a byte count"));
        assert_eq!(
            EnvError::Missing("WWW".into()).to_string(),
            "environment variable WWW is not set"
        );
        assert_eq!(
            parse_listen_addr("198.19.0.1", "4433"),
            Ok("198.19.0.1:4433".parse().unwrap())
        );
        assert_eq!(
            parse_listen_addr("::1", "443"),
            Ok("[::1]:443".parse().unwrap())
        );
        assert_eq!(
            parse_listen_addr("[::1]", "443"),
            Ok("[::1]:443".parse().unwrap())
        );
        assert!(parse_listen_addr("example.org", "443").is_err());
        assert!(parse_listen_addr("::1", "65536").is_err());
        // the process environment: unset and empty are the same
        std::env::set_var("QIR_HARNESS_TEST_EMPTY", "");
        assert_eq!(env_opt("QIR_HARNESS_TEST_EMPTY"), None);
        assert_eq!(env_opt("QIR_HARNESS_TEST_UNSET"), None);
        assert_eq!(env_or_empty("QIR_HARNESS_TEST_UNSET"), "");
        assert!(env_required("QIR_HARNESS_TEST_EMPTY").is_err());
    }

    #[test]
    fn request_urls() {
        let u = RequestUrl::parse("https://198.19.0.1:4433/file-52428800.bin").unwrap();
        assert_eq!(
            (
                u.authority.as_str(),
                u.host.as_str(),
                u.port,
                u.path.as_str()
            ),
            ("198.19.0.1:4433", "198.19.0.1", 4433, "/file-52428800.bin")
        );
        assert_eq!(u.file_name(), Some("file-52428800.bin"));
        assert_eq!(u.ip_addr(), Some("198.19.0.1:4433".parse().unwrap()));

        let u = RequestUrl::parse("https://[fd00::1]:443/d/x.bin?a=1#frag").unwrap();
        assert_eq!(
            (
                u.authority.as_str(),
                u.host.as_str(),
                u.port,
                u.path.as_str()
            ),
            ("[fd00::1]:443", "fd00::1", 443, "/d/x.bin?a=1")
        );
        assert_eq!(u.file_name(), Some("x.bin"));

        let u = RequestUrl::parse("https://[fd00::1]").unwrap();
        assert_eq!((u.port, u.path.as_str(), u.file_name()), (443, "/", None));
        let u = RequestUrl::parse("https://example.org?q").unwrap();
        assert_eq!((u.host.as_str(), u.path.as_str()), ("example.org", "/?q"));
        assert_eq!(u.ip_addr(), None);
        for name in [
            "https://h:1/",
            "https://h:1/a/",
            "https://h:1/.",
            "https://h:1/..",
        ] {
            assert_eq!(RequestUrl::parse(name).unwrap().file_name(), None, "{name}");
        }
        for bad in [
            "http://h/x",
            "https://:1/x",
            "https://h:x/x",
            "https://[::1/x",
            "https://[::1]x/y",
        ] {
            assert!(RequestUrl::parse(bad).is_err(), "{bad}");
        }
        let all = parse_requests(" https://a:1/x  https://a:1/y\n").unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].file_name(), Some("y"));
        assert_eq!(parse_requests("").unwrap(), vec![]);
    }

    #[test]
    fn www_files() {
        let www = Path::new("/srv/www");
        let file = |p: &str| www_file(www, p);
        assert_eq!(file("/f.bin"), Some(PathBuf::from("/srv/www/f.bin")));
        assert_eq!(
            file("/d/./f.bin?x=1#y"),
            Some(PathBuf::from("/srv/www/d/f.bin"))
        );
        assert_eq!(file("//f.bin"), Some(PathBuf::from("/srv/www/f.bin")));
        for bad in ["", "/", "/.", "?x", "/../etc/passwd", "/d/../../f", "/d/.."] {
            assert_eq!(file(bad), None, "{bad}");
        }
    }

    #[test]
    fn hq_requests() {
        assert_eq!(hq_request_path(b"GET /f.bin\r\n"), Ok("/f.bin"));
        assert_eq!(hq_request_path(b"GET /f.bin"), Ok("/f.bin"));
        assert_eq!(hq_request_path(b"GET  /f.bin HTTP/1.0\n"), Ok("/f.bin"));
        for bad in [&b"POST /f\r\n"[..], b"GET \r\n", b"", b"GET /\xff\r\n"] {
            assert!(hq_request_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn workload_values() {
        assert_eq!(Workload::parse("", "", ""), Ok(Workload::default()));
        let w = Workload::parse(" bidirectional ", "64", "16").unwrap();
        assert_eq!(
            (w.kind, w.streams, w.connections, w.transfers()),
            (WorkloadKind::Bidirectional, 64, 16, 1024)
        );
        assert_eq!(
            Workload::parse("upload", "1", "").unwrap().kind,
            WorkloadKind::Upload
        );
        for (kind, down, up) in [
            (WorkloadKind::Download, true, false),
            (WorkloadKind::Upload, false, true),
            (WorkloadKind::Bidirectional, true, true),
        ] {
            assert_eq!((kind.downloads(), kind.uploads()), (down, up));
            assert_eq!(WorkloadKind::parse(kind.name()), Ok(kind));
        }
        for (kind, streams, conns) in [
            ("push", "1", "1"),
            ("", "0", "1"),
            ("", "1", "-1"),
            ("", "two", "1"),
            ("", "1", "1.5"),
        ] {
            assert!(
                Workload::parse(kind, streams, conns).is_err(),
                "{kind} {streams} {conns}"
            );
        }
        let err = Workload::parse("", "0", "").unwrap_err().to_string();
        assert_eq!(err, "STREAMS=\"0\": not a whole number >= 1");
    }

    #[test]
    fn workload_over_hq_interop() {
        let w = |kind| Workload {
            kind,
            ..Workload::default()
        };
        assert_eq!(
            w(WorkloadKind::Download).unsupported_over("hq-interop"),
            None
        );
        assert_eq!(w(WorkloadKind::Upload).unsupported_over("h3"), None);
        assert_eq!(
            w(WorkloadKind::Upload)
                .unsupported_over("hq-interop")
                .unwrap(),
            "unsupported workload 'upload' over hq-interop: hq-interop requests carry no body"
        );
        assert!(w(WorkloadKind::Bidirectional)
            .unsupported_over("hq-interop")
            .is_some());
    }

    fn urls(names: &[&str]) -> Vec<RequestUrl> {
        names
            .iter()
            .map(|n| RequestUrl::parse(&format!("https://10.0.0.1:4433/{n}")).unwrap())
            .collect()
    }

    fn names(list: &[RequestUrl]) -> Vec<&str> {
        list.iter().map(|u| u.file_name().unwrap()).collect()
    }

    #[test]
    fn plan_splits_per_connection() {
        let w = Workload::parse("bidirectional", "2", "3").unwrap();
        let down = urls(&["d1", "d2", "d3", "d4", "d5", "d6"]);
        let up = urls(&["u1", "u2", "u3", "u4", "u5", "u6"]);
        let plan = plan_connections(&w, down, up).unwrap();
        assert_eq!(plan.len(), 3);
        for (c, conn) in plan.iter().enumerate() {
            assert_eq!(conn.index, c);
            let (a, b) = (2 * c + 1, 2 * c + 2);
            assert_eq!(names(&conn.downloads), [format!("d{a}"), format!("d{b}")]);
            assert_eq!(names(&conn.uploads), [format!("u{a}"), format!("u{b}")]);
            assert_eq!((conn.len(), conn.first().port), (4, 4433));
        }

        let w = Workload::parse("upload", "4", "2").unwrap();
        let up = urls(&["a", "b", "c", "d", "e", "f", "g", "h"]);
        let plan = plan_connections(&w, vec![], up).unwrap();
        assert_eq!(names(&plan[1].uploads), ["e", "f", "g", "h"]);
        assert!(plan[1].downloads.is_empty());
        assert_eq!(plan[1].first().file_name(), Some("e"));
    }

    #[test]
    fn plan_default_and_legacy_requests() {
        let w = Workload::default();
        let plan = plan_connections(&w, urls(&["f.bin"]), vec![]).unwrap();
        assert_eq!(plan.len(), 1);
        assert_eq!(names(&plan[0].downloads), ["f.bin"]);
        // QIR's REQUESTS: several URLs on the one connection
        let plan = plan_connections(&w, urls(&["a", "b", "c"]), vec![]).unwrap();
        assert_eq!(names(&plan[0].downloads), ["a", "b", "c"]);
    }

    #[test]
    fn plan_refuses_what_does_not_fit() {
        let w = |k, s, c| Workload::parse(k, s, c).unwrap();
        let err = |w: Workload, d: &[&str], u: &[&str]| {
            plan_connections(&w, urls(d), urls(u)).unwrap_err().0
        };
        assert_eq!(
            err(w("download", "2", "2"), &["a", "b", "c"], &[]),
            "REQUESTS has 3 URL(s), workload download with STREAMS=2 x CONNECTIONS=2 needs 4"
        );
        assert_eq!(
            err(w("", "", ""), &[], &[]),
            "REQUESTS has 0 URL(s), workload download with STREAMS=1 x CONNECTIONS=1 needs 1"
        );
        assert!(err(w("download", "", ""), &["a"], &["b"]).starts_with("UPLOAD_REQUESTS has 1"));
        assert!(err(w("upload", "", ""), &["a"], &["b"]).starts_with("REQUESTS has 1"));
        assert!(err(w("bidirectional", "2", ""), &["a", "b"], &["c"]).starts_with("UPLOAD_"));
        assert!(err(w("upload", "", ""), &[], &[""]).contains("has no file name"));
        assert!(err(w("upload", "", ""), &[], &["a..b"]).contains("has no file name"));
        assert!(err(w("download", "", ""), &["d/"], &[]).contains("has no file name"));

        let two_servers = vec![
            RequestUrl::parse("https://10.0.0.1:4433/a").unwrap(),
            RequestUrl::parse("https://10.0.0.2:4433/b").unwrap(),
        ];
        let e = plan_connections(&w("download", "2", ""), two_servers.clone(), vec![]);
        assert!(e.unwrap_err().0.contains("name different servers"));
        // one server per connection, not per run
        assert!(plan_connections(&w("download", "1", "2"), two_servers, vec![]).is_ok());
    }

    #[test]
    fn upload_names() {
        for ok in ["file-52428800.bin", "f-1of8.bin", ".hidden", "a.b"] {
            assert!(upload_name_ok(ok), "{ok}");
        }
        for bad in ["", ".", "..", "../x", "a/b", "/x", "a..b", "x\0"] {
            assert!(!upload_name_ok(bad), "{bad:?}");
        }
        let dir = Path::new("/srv/uploads");
        assert_eq!(
            upload_file(dir, "/f-1of8.bin?x=1#y"),
            Some(PathBuf::from("/srv/uploads/f-1of8.bin"))
        );
        assert_eq!(
            upload_file(dir, "f.bin"),
            Some(PathBuf::from("/srv/uploads/f.bin"))
        );
        for bad in ["/", "//f", "/d/f", "/..", "/../f", "/.", ""] {
            assert_eq!(upload_file(dir, bad), None, "{bad}");
        }
    }

    /// `cargo test -- --ignored --nocapture sample_line` prints a line with every awkward
    /// character, to feed to interop_runner.params.parse_negotiated.
    #[test]
    #[ignore]
    fn sample_line() {
        Negotiated::new()
            .alpn("h3")
            .cipher(NASTY[0])
            .field("version", NASTY[1])
            .field("other", NASTY[2])
            .print();
    }
}
