//! quiche interop server: serves the files in $WWW on $IP:$PORT over HTTP/3 ("h3") or
//! HTTP/0.9 ("hq-interop"), one connection after another, until SIGTERM. An HTTP/3 PUT
//! writes its body to $UPLOADS/<name>.
//!
//! The event loop follows quiche's examples/http3-server.rs and tools/apps (mio, one
//! UDP socket, quiche-apps' GSO burst sending); files are streamed from disk in chunks
//! sized to the stream's send capacity.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use qir_harness::{upload_file, www_file, Workload, EXIT_UNSUPPORTED};
use qir_quiche::{log, *};
use quiche::h3::NameValue;

const TOKEN_SIG: mio::Token = mio::Token(1);
const SCID_LEN: usize = 16;
/// How long a PUT body may pause before its buffered part (up to CHUNK) goes to the file. A
/// client stopped at a duration may vanish without a CONNECTION_CLOSE or RESET_STREAM (killed by
/// SIGINT, or the close lost), and the runner hashes the file soon after the client ended: it
/// then holds all that arrived.
const IDLE_FLUSH: Duration = Duration::from_millis(10);

struct Response {
    /// the file (None: a response without body)
    body: Option<FileBody>,
    path: String,
    size: u64,
    /// HTTP/3 response headers not sent yet (stream blocked)
    headers: Option<Vec<quiche::h3::Header>>,
    start: Instant,
}

/// A PUT whose body is being written to $UPLOADS.
struct Upload {
    file: BufWriter<File>,
    path: String,
    received: u64,
    expected: Option<u64>,
    start: Instant,
    /// when the last body data arrived (what is buffered is written out IDLE_FLUSH after)
    last_data: Instant,
}

/// Where requests read and write: GET from WWW, PUT to UPLOADS (None: not set, PUT refused).
struct Dirs {
    www: PathBuf,
    uploads: Option<PathBuf>,
}

struct Client {
    conn: quiche::Connection,
    odcid: quiche::ConnectionId<'static>,
    h3: Option<quiche::h3::Connection>,
    hq_reqs: HashMap<u64, Vec<u8>>,
    responses: HashMap<u64, Response>,
    uploads: HashMap<u64, Upload>,
    send: SendState,
    cipher: Option<&'static str>,
    established: bool,
    start: Instant,
}

struct Server {
    dirs: Dirs,
    config: quiche::Config,
    h3_config: quiche::h3::Config,
    settings: Settings,
    keylog: Option<File>,
    clients: HashMap<quiche::ConnectionId<'static>, Client>,
    /// original destination connection ID -> our source connection ID
    aliases: HashMap<quiche::ConnectionId<'static>, quiche::ConnectionId<'static>>,
    scratch: Vec<u8>,
}

fn main() {
    let alpn_env = getenv_opt("ALPN");
    let workload = Workload::from_env().unwrap_or_else(|e| fatal(&e.to_string()));
    if let Some(why) = alpn_env
        .as_deref()
        .and_then(|a| workload.unsupported_over(a))
    {
        log!("{why}");
        std::process::exit(EXIT_UNSUPPORTED);
    }
    let addr = qir_harness::listen_addr().unwrap_or_else(|e| fatal(&e.to_string()));
    let www = PathBuf::from(getenv("WWW"));
    let certs = getenv("CERTS");
    let uploads = getenv_opt("UPLOADS").map(PathBuf::from);

    // Offer exactly the runner's ALPN if set, else both.
    let alpns: Vec<&[u8]> = match alpn_env.as_deref() {
        Some("h3") => vec![b"h3"],
        Some("hq-interop") => vec![b"hq-interop"],
        Some(other) => fatal(&format!("unsupported ALPN {other}")),
        None => vec![b"h3", b"hq-interop"],
    };

    let (mut config, settings) = make_config(&alpns, None);
    config
        .load_cert_chain_from_pem_file(&format!("{certs}/cert.pem"))
        .unwrap_or_else(|e| fatal(&format!("loading {certs}/cert.pem: {e}")));
    config
        .load_priv_key_from_pem_file(&format!("{certs}/priv.key"))
        .unwrap_or_else(|e| fatal(&format!("loading {certs}/priv.key: {e}")));

    let h3_config = quiche::h3::Config::new().unwrap_or_else(|e| fatal(&format!("h3 config: {e}")));

    let mut poll = mio::Poll::new().unwrap_or_else(|e| fatal(&format!("poll: {e}")));
    let mut events = mio::Events::with_capacity(1024);
    let mut sock = Socket::bind(addr);
    register_socket(&poll, &mut sock);
    let mut signals = signal_hook_mio::v1_0::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])
    .unwrap_or_else(|e| fatal(&format!("signals: {e}")));
    poll.registry()
        .register(&mut signals, TOKEN_SIG, mio::Interest::READABLE)
        .unwrap_or_else(|e| fatal(&format!("register: {e}")));

    let mut srv = Server {
        dirs: Dirs { www, uploads },
        config,
        h3_config,
        settings,
        keylog: open_keylog(),
        clients: HashMap::new(),
        aliases: HashMap::new(),
        scratch: vec![0; 65536],
    };

    let put_to = srv
        .dirs
        .uploads
        .as_ref()
        .map_or("nowhere (UPLOADS not set)".into(), |p| {
            p.display().to_string()
        });
    log!(
        "serving {} on {} ({}), cc={}, PUT to {put_to}",
        srv.dirs.www.display(),
        sock.local,
        alpns
            .iter()
            .map(|a| String::from_utf8_lossy(a))
            .collect::<Vec<_>>()
            .join(","),
        srv.settings.cc_runner_name,
    );

    let mut buf = vec![0u8; 65536];
    let mut out = vec![0u8; MAX_BUF_SIZE];
    let mut continue_write = false;
    let mut terminate = false;

    while !terminate {
        let timeout = if continue_write {
            Some(Duration::ZERO)
        } else {
            let now = Instant::now();
            srv.clients
                .values()
                .flat_map(|c| [c.conn.timeout(), c.flush_timeout(now)])
                .flatten()
                .min()
        };
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                fatal(&format!("poll: {e}"));
            }
        }
        for ev in events.iter() {
            if ev.token() == TOKEN_SIG {
                for sig in signals.pending() {
                    log!("received signal {sig}, closing");
                    terminate = true;
                }
            }
        }

        // Read all pending datagrams (GRO batches are split into their segments).
        loop {
            let (len, from, seg) = match sock.recv(&mut buf) {
                Ok(v) => v,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log!("recv failed: {e}");
                    break;
                }
            };
            for pkt in buf[..len].chunks_mut(seg.max(1)) {
                srv.handle_packet(pkt, from, &sock, &mut out);
            }
        }

        let now = Instant::now();
        for c in srv.clients.values_mut() {
            if c.conn.timeout_instant().is_some_and(|t| t <= now) {
                c.conn.on_timeout();
            }
        }

        let Server {
            clients,
            h3_config,
            settings,
            dirs,
            scratch,
            ..
        } = &mut srv;
        for c in clients.values_mut() {
            c.process(h3_config, settings, dirs, scratch);
            c.flush_idle_uploads(Instant::now());
        }

        continue_write = false;
        for c in clients.values_mut() {
            match flush(&mut c.conn, &mut c.send, &sock, &mut out) {
                Ok(more) => continue_write |= more,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => (), // wait for WRITABLE
                Err(e) => log!("{} send: {e}", c.conn.trace_id()),
            }
        }

        srv.gc();
    }

    // Shutting down: close every connection and flush the CONNECTION_CLOSE frames.
    for c in srv.clients.values_mut() {
        c.close_uploads("cut short (server shutting down)");
        let err = if c.h3.is_some() { 0x100 } else { 0 };
        let _ = c.conn.close(true, err, b"server shutting down");
        let _ = flush(&mut c.conn, &mut c.send, &sock, &mut out);
        print_stats(&c.conn);
    }
    // dropping the connections flushes their qlog writers
    srv.clients.clear();
    log!("stopped");
}

impl Server {
    fn handle_packet(&mut self, pkt: &mut [u8], from: SocketAddr, sock: &Socket, out: &mut [u8]) {
        let hdr = match quiche::Header::from_slice(pkt, SCID_LEN) {
            Ok(v) => v,
            Err(_) => return,
        };

        let key = if self.clients.contains_key(&hdr.dcid) {
            Some(hdr.dcid.clone().into_owned())
        } else {
            self.aliases.get(&hdr.dcid).cloned()
        };

        let key = match key {
            Some(k) => k,
            None => {
                if hdr.ty != quiche::Type::Initial {
                    return;
                }
                if !quiche::version_is_supported(hdr.version) {
                    if let Ok(len) = quiche::negotiate_version(&hdr.scid, &hdr.dcid, out) {
                        let _ = sock.sock.send_to(&out[..len], from);
                    }
                    return;
                }
                let mut scid = [0u8; SCID_LEN];
                rand_bytes(&mut scid);
                let scid = quiche::ConnectionId::from_vec(scid.to_vec());
                let mut conn = match quiche::accept(&scid, None, sock.local, from, &mut self.config)
                {
                    Ok(c) => c,
                    Err(e) => {
                        log!("accept failed: {e}");
                        return;
                    }
                };
                let odcid = hdr.dcid.clone().into_owned();
                attach_logs(&mut conn, &self.keylog, &hex(&odcid), "server");
                log!(
                    "{} new connection from {from} (odcid {})",
                    conn.trace_id(),
                    hex(&odcid)
                );
                self.aliases.insert(odcid.clone(), scid.clone());
                self.clients.insert(
                    scid.clone(),
                    Client {
                        conn,
                        odcid,
                        h3: None,
                        hq_reqs: HashMap::new(),
                        responses: HashMap::new(),
                        uploads: HashMap::new(),
                        send: SendState::default(),
                        cipher: None,
                        established: false,
                        start: Instant::now(),
                    },
                );
                scid
            }
        };

        let Some(c) = self.clients.get_mut(&key) else {
            return;
        };
        let info = quiche::RecvInfo {
            from,
            to: sock.local,
        };
        if let Err(e) = c.conn.recv(pkt, info) {
            if e != quiche::Error::Done {
                log!("{} recv failed: {e:?}", c.conn.trace_id());
            }
        }
        if let Some(cipher) = take_handshake_cipher() {
            c.cipher = Some(cipher);
        }
    }

    fn gc(&mut self) {
        let aliases = &mut self.aliases;
        self.clients.retain(|_, c| {
            if !c.conn.is_closed() {
                return true;
            }
            let why = close_reason(&c.conn);
            log!(
                "{} connection done after {:.3}s: {why}",
                c.conn.trace_id(),
                c.start.elapsed().as_secs_f64()
            );
            print_stats(&c.conn);
            aliases.remove(&c.odcid);
            false
        });
    }
}

impl Client {
    fn process(
        &mut self,
        h3_config: &quiche::h3::Config,
        settings: &Settings,
        dirs: &Dirs,
        scratch: &mut [u8],
    ) {
        if !self.uploads.is_empty() && (self.conn.is_closed() || self.conn.is_draining()) {
            // the client is gone: the bodies cut short keep what arrived
            self.close_uploads("cut short (connection closed)");
        }
        if !self.conn.is_established() || self.conn.is_closed() {
            return;
        }
        if !self.established {
            self.established = true;
            log!(
                "{} handshake done after {:.1} ms",
                self.conn.trace_id(),
                self.start.elapsed().as_secs_f64() * 1e3
            );
            print_negotiated(&self.conn, self.cipher, settings);
            if self.conn.application_proto() == b"h3" {
                match quiche::h3::Connection::with_transport(&mut self.conn, h3_config) {
                    Ok(h) => self.h3 = Some(h),
                    Err(e) => {
                        log!("{} HTTP/3 setup failed: {e}", self.conn.trace_id());
                        let _ = self.conn.close(true, 0x101, b"h3 setup failed");
                        return;
                    }
                }
            }
        }

        // Responses that can make progress.
        self.handle_writable();

        if self.h3.is_some() {
            self.poll_h3(dirs, scratch);
        } else {
            self.poll_hq(&dirs.www, scratch);
        }
    }

    fn handle_writable(&mut self) {
        if self.responses.is_empty() {
            return;
        }
        let writable: Vec<u64> = self.conn.writable().collect();
        for sid in writable {
            let Some(r) = self.responses.get_mut(&sid) else {
                continue;
            };
            if send_response(&mut self.conn, self.h3.as_mut(), sid, r) {
                self.finish_response(sid);
            }
        }
    }

    fn finish_response(&mut self, sid: u64) {
        if let Some(r) = self.responses.remove(&sid).filter(|r| r.body.is_some()) {
            let d = r.start.elapsed().as_secs_f64();
            log!(
                "{} stream {sid}: {} ({} bytes) queued completely after {:.3}s ({:.1} Mbit/s)",
                self.conn.trace_id(),
                r.path,
                r.size,
                d,
                r.size as f64 * 8.0 / d.max(1e-9) / 1e6
            );
        }
    }

    fn poll_h3(&mut self, dirs: &Dirs, scratch: &mut [u8]) {
        loop {
            let Some(h3) = self.h3.as_mut() else { return };
            match h3.poll(&mut self.conn) {
                Ok((sid, quiche::h3::Event::Headers { list, .. })) => {
                    self.start_request(sid, &list, dirs);
                }
                Ok((sid, quiche::h3::Event::Data)) => {
                    if self.uploads.contains_key(&sid) {
                        self.receive_upload(sid, scratch);
                        continue;
                    }
                    // other request bodies are ignored
                    while let Ok(n) = h3.recv_body(&mut self.conn, sid, scratch) {
                        if n == 0 {
                            break;
                        }
                    }
                }
                Ok((sid, quiche::h3::Event::Finished)) => {
                    if self.uploads.contains_key(&sid) {
                        self.finish_upload(sid);
                    }
                }
                Ok((sid, quiche::h3::Event::Reset(code))) => {
                    self.responses.remove(&sid);
                    self.end_upload(sid, &format!("cut short (stream reset, 0x{code:x})"));
                }
                Ok(_) => (),
                Err(quiche::h3::Error::Done) => return,
                Err(e) => {
                    log!("{} HTTP/3 error: {e:?}", self.conn.trace_id());
                    return;
                }
            }
        }
    }

    /// A request's headers: GET from WWW, PUT to UPLOADS, anything else 405.
    fn start_request(&mut self, sid: u64, list: &[quiche::h3::Header], dirs: &Dirs) {
        let mut method = None;
        let mut path = None;
        let mut length = None;
        for h in list {
            let value = || String::from_utf8_lossy(h.value()).to_string();
            match h.name() {
                b":method" => method = Some(value()),
                b":path" => path = Some(value()),
                b"content-length" => length = value().parse::<u64>().ok(),
                _ => (),
            }
        }
        let path = path.unwrap_or_default();
        match method.as_deref() {
            Some("GET") => self.start_response(sid, &path, &dirs.www),
            Some("PUT") => self.start_upload(sid, &path, length, dirs.uploads.as_deref()),
            _ => self.respond(sid, b"405"),
        }
    }

    fn poll_hq(&mut self, www: &Path, scratch: &mut [u8]) {
        let readable: Vec<u64> = self.conn.readable().collect();
        for sid in readable {
            let mut complete = false;
            loop {
                match self.conn.stream_recv(sid, scratch) {
                    Ok((n, fin)) => {
                        let req = self.hq_reqs.entry(sid).or_default();
                        if req.len() < 8192 {
                            req.extend_from_slice(&scratch[..n]);
                        }
                        if fin || req.windows(2).any(|w| w == b"\r\n") || req.contains(&b'\n') {
                            complete = true;
                        }
                        if fin {
                            break;
                        }
                    }
                    Err(quiche::Error::Done) => break,
                    Err(_) => {
                        self.hq_reqs.remove(&sid);
                        self.responses.remove(&sid);
                        break;
                    }
                }
            }
            if complete && !self.responses.contains_key(&sid) {
                if let Some(req) = self.hq_reqs.remove(&sid) {
                    let path = qir_harness::hq_request_path(&req).unwrap_or_default();
                    self.start_response(sid, path, www);
                }
            }
        }
    }

    fn start_response(&mut self, sid: u64, path: &str, www: &Path) {
        let body = www_file(www, path).and_then(|p| FileBody::open(&p).ok());
        let Some(body) = body else {
            log!("{} stream {sid}: {path:?} not found", self.conn.trace_id());
            match self.h3.as_mut() {
                Some(h3) => {
                    let hdrs = [quiche::h3::Header::new(b":status", b"404")];
                    let _ = h3.send_response(&mut self.conn, sid, &hdrs, true);
                }
                None => {
                    let _ = self
                        .conn
                        .stream_shutdown(sid, quiche::Shutdown::Write, 0x10);
                }
            }
            return;
        };
        let size = body.size;
        log!(
            "{} stream {sid}: GET {path} ({size} bytes)",
            self.conn.trace_id()
        );
        let headers = self.h3.as_ref().map(|_| {
            vec![
                quiche::h3::Header::new(b":status", b"200"),
                quiche::h3::Header::new(b"content-length", size.to_string().as_bytes()),
                quiche::h3::Header::new(b"content-type", b"application/octet-stream"),
                quiche::h3::Header::new(b"server", b"quiche"),
            ]
        });
        let r = Response {
            body: Some(body),
            path: path.to_string(),
            size,
            headers,
            start: Instant::now(),
        };
        self.queue_response(sid, r);
    }

    /// Sends what `r` can send now and keeps the rest for when the stream is writable.
    fn queue_response(&mut self, sid: u64, mut r: Response) {
        let done = send_response(&mut self.conn, self.h3.as_mut(), sid, &mut r);
        self.responses.insert(sid, r);
        if done {
            self.finish_response(sid);
        }
    }

    /// An HTTP/3 response without body (its headers may wait for the stream, too).
    fn respond(&mut self, sid: u64, status: &[u8]) {
        let r = Response {
            body: None,
            path: format!("status {}", String::from_utf8_lossy(status)),
            size: 0,
            headers: Some(vec![
                quiche::h3::Header::new(b":status", status),
                quiche::h3::Header::new(b"content-length", b"0"),
                quiche::h3::Header::new(b"server", b"quiche"),
            ]),
            start: Instant::now(),
        };
        self.queue_response(sid, r);
    }

    // -- uploads (PUT) ----------------------------------------------------------------------

    /// A PUT: its body goes to $UPLOADS/<name> (created or truncated); 403 for a name that is
    /// not a plain file name, or without UPLOADS.
    fn start_upload(&mut self, sid: u64, path: &str, expected: Option<u64>, dir: Option<&Path>) {
        let file = match create_upload(dir, path) {
            Ok(file) => file,
            Err(why) => {
                log!(
                    "{} stream {sid}: PUT {path:?} refused: {why}",
                    self.conn.trace_id()
                );
                // no body wanted: STOP_SENDING, and the 403 says why
                let _ = self
                    .conn
                    .stream_shutdown(sid, quiche::Shutdown::Read, 0x10c);
                self.respond(sid, b"403");
                return;
            }
        };
        log!(
            "{} stream {sid}: PUT {path} ({} bytes)",
            self.conn.trace_id(),
            expected.map_or("no content-length".into(), |n| n.to_string())
        );
        let now = Instant::now();
        self.uploads.insert(
            sid,
            Upload {
                file: BufWriter::with_capacity(CHUNK, file),
                path: path.to_string(),
                received: 0,
                expected,
                start: now,
                last_data: now,
            },
        );
    }

    /// Writes the body data that arrived to the file (through its buffer).
    fn receive_upload(&mut self, sid: u64, scratch: &mut [u8]) {
        let (Some(h3), Some(u)) = (self.h3.as_mut(), self.uploads.get_mut(&sid)) else {
            return;
        };
        let failed = loop {
            match h3.recv_body(&mut self.conn, sid, scratch) {
                Ok(0) | Err(quiche::h3::Error::Done) => break None,
                Ok(n) => {
                    u.received += n as u64;
                    if let Err(e) = u.file.write_all(&scratch[..n]) {
                        break Some((format!("writing: {e}"), true));
                    }
                }
                Err(e) => break Some((format!("recv_body: {e:?}"), false)),
            }
        };
        u.last_data = Instant::now();
        let Some((why, answer)) = failed else {
            return;
        };
        self.end_upload(sid, &format!("failed ({why})"));
        if answer {
            // the stream is fine, the disk is not: stop the body and say so
            let _ = self
                .conn
                .stream_shutdown(sid, quiche::Shutdown::Read, 0x10c);
            self.respond(sid, b"500");
        }
    }

    /// The body is complete: close the file, then answer 200 (400 when it is shorter or
    /// longer than its content-length).
    fn finish_upload(&mut self, sid: u64) {
        let Some(u) = self.uploads.remove(&sid) else {
            return;
        };
        let (received, expected) = (u.received, u.expected);
        if let Err(e) = close_upload(u, &self.conn, sid, "complete") {
            log!("{} stream {sid}: {e}", self.conn.trace_id());
            self.respond(sid, b"500");
        } else if let Some(n) = expected.filter(|n| *n != received) {
            log!(
                "{} stream {sid}: got {received} bytes, content-length {n}",
                self.conn.trace_id()
            );
            self.respond(sid, b"400");
        } else {
            self.respond(sid, b"200");
        }
    }

    /// A body cut short (reset, connection gone, write error): close the file, keeping what
    /// arrived.
    fn end_upload(&mut self, sid: u64, why: &str) {
        if let Some(u) = self.uploads.remove(&sid) {
            if let Err(e) = close_upload(u, &self.conn, sid, why) {
                log!("{} stream {sid}: {e}", self.conn.trace_id());
            }
        }
    }

    fn close_uploads(&mut self, why: &str) {
        let sids: Vec<u64> = self.uploads.keys().copied().collect();
        for sid in sids {
            self.end_upload(sid, why);
        }
    }

    /// Writes out the buffered part of the bodies that paused for IDLE_FLUSH.
    fn flush_idle_uploads(&mut self, now: Instant) {
        for (sid, u) in &mut self.uploads {
            if !u.file.buffer().is_empty() && now >= u.last_data + IDLE_FLUSH {
                if let Err(e) = u.file.flush() {
                    log!(
                        "{} stream {sid}: writing {}: {e}",
                        self.conn.trace_id(),
                        u.path
                    );
                }
            }
        }
    }

    /// How long the event loop may sleep before a buffered body is due to be written out.
    fn flush_timeout(&self, now: Instant) -> Option<Duration> {
        self.uploads
            .values()
            .filter(|u| !u.file.buffer().is_empty())
            .map(|u| (u.last_data + IDLE_FLUSH).saturating_duration_since(now))
            .min()
    }
}

/// The file a PUT of `path` writes: $UPLOADS/<name>, created or truncated.
fn create_upload(dir: Option<&Path>, path: &str) -> Result<File, String> {
    let dir = dir.ok_or("UPLOADS is not set")?;
    let target = upload_file(dir, path).ok_or("not a plain file name")?;
    File::create(&target).map_err(|e| format!("creating {}: {e}", target.display()))
}

/// Flushes and closes an upload's file; logs how much arrived and why it ended.
fn close_upload(u: Upload, conn: &quiche::Connection, sid: u64, why: &str) -> Result<(), String> {
    let closed = u
        .file
        .into_inner()
        .map(drop)
        .map_err(|e| format!("writing {}: {}", u.path, e.error()));
    let d = u.start.elapsed().as_secs_f64();
    log!(
        "{} stream {sid}: PUT {} {why}: {} bytes in {d:.3}s ({:.1} Mbit/s)",
        conn.trace_id(),
        u.path,
        u.received,
        u.received as f64 * 8.0 / d.max(1e-9) / 1e6
    );
    closed
}

/// Pushes as much of the response as the stream accepts, reading the file in chunks
/// once the stream has send capacity. Returns true when the response is complete
/// (or failed and should be dropped).
fn send_response(
    conn: &mut quiche::Connection,
    mut h3: Option<&mut quiche::h3::Connection>,
    sid: u64,
    r: &mut Response,
) -> bool {
    if let Some(hdrs) = r.headers.take() {
        let h3c = h3.as_mut().expect("h3 response without h3 connection");
        match h3c.send_response(conn, sid, &hdrs, r.size == 0) {
            Ok(()) => {
                if r.size == 0 {
                    return true;
                }
            }
            Err(quiche::h3::Error::StreamBlocked) | Err(quiche::h3::Error::Done) => {
                r.headers = Some(hdrs);
                return false;
            }
            Err(e) => {
                log!(
                    "{} stream {sid}: send_response failed: {e:?}",
                    conn.trace_id()
                );
                return true;
            }
        }
    } else if h3.is_none() && r.size == 0 {
        return conn.stream_send(sid, b"", true).is_ok();
    }
    let Some(body) = r.body.as_mut() else {
        return true;
    };
    body.send(conn, h3, sid).unwrap_or_else(|e| {
        log!("{} stream {sid}: {}: {e}", conn.trace_id(), r.path);
        true
    })
}
