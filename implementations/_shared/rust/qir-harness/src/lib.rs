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
