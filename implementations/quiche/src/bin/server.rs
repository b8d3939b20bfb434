//! quiche interop server: serves the files in $WWW on $IP:$PORT over HTTP/3 ("h3") or
//! HTTP/0.9 ("hq-interop"), one connection after another, until SIGTERM.
//!
//! The event loop follows quiche's examples/http3-server.rs and tools/apps (mio, one
//! UDP socket, quiche-apps' GSO burst sending); files are streamed from disk in chunks
//! sized to the stream's send capacity.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use qir_harness::www_file;
use qir_quiche::{log, *};
use quiche::h3::NameValue;

const TOKEN_SOCK: mio::Token = mio::Token(0);
const TOKEN_SIG: mio::Token = mio::Token(1);
const SCID_LEN: usize = 16;

struct Response {
    file: File,
    path: String,
    size: u64,
    /// bytes not yet read from the file
    remaining: u64,
    buf: Vec<u8>,
    off: usize,
    len: usize,
    /// HTTP/3 response headers not sent yet (stream blocked)
    headers: Option<Vec<quiche::h3::Header>>,
    start: Instant,
}

struct Client {
    conn: quiche::Connection,
    odcid: quiche::ConnectionId<'static>,
    h3: Option<quiche::h3::Connection>,
    hq_reqs: HashMap<u64, Vec<u8>>,
    responses: HashMap<u64, Response>,
    send: SendState,
    cipher: Option<&'static str>,
    established: bool,
    start: Instant,
}

struct Server {
    www: PathBuf,
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
    let addr = qir_harness::listen_addr().unwrap_or_else(|e| fatal(&e.to_string()));
    let www = PathBuf::from(getenv("WWW"));
    let certs = getenv("CERTS");
    let alpn_env = getenv_opt("ALPN");

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
    poll.registry()
        .register(
            &mut sock.sock,
            TOKEN_SOCK,
            mio::Interest::READABLE | mio::Interest::WRITABLE,
        )
        .unwrap_or_else(|e| fatal(&format!("register: {e}")));
    let mut signals = signal_hook_mio::v1_0::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])
    .unwrap_or_else(|e| fatal(&format!("signals: {e}")));
    poll.registry()
        .register(&mut signals, TOKEN_SIG, mio::Interest::READABLE)
        .unwrap_or_else(|e| fatal(&format!("register: {e}")));

    let mut srv = Server {
        www,
        config,
        h3_config,
        settings,
        keylog: open_keylog(),
        clients: HashMap::new(),
        aliases: HashMap::new(),
        scratch: vec![0; 65536],
    };

    log!(
        "serving {} on {} ({}), cc={}",
        srv.www.display(),
        sock.local,
        alpns
            .iter()
            .map(|a| String::from_utf8_lossy(a))
            .collect::<Vec<_>>()
            .join(","),
        srv.settings.cc_runner_name
    );

    let mut buf = vec![0u8; 65536];
    let mut out = vec![0u8; MAX_BUF_SIZE];
    let mut continue_write = false;
    let mut terminate = false;

    while !terminate {
        let timeout = if continue_write {
            Some(Duration::ZERO)
        } else {
            srv.clients.values().filter_map(|c| c.conn.timeout()).min()
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
            www,
            scratch,
            ..
        } = &mut srv;
        for c in clients.values_mut() {
            c.process(h3_config, settings, www, scratch);
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
            let why = match (
                c.conn.peer_error(),
                c.conn.local_error(),
                c.conn.is_timed_out(),
            ) {
                (Some(e), _, _) => format!("peer closed: {e:?}"),
                (_, Some(e), _) => format!("closed locally: {e:?}"),
                (_, _, true) => "idle timeout".to_string(),
                _ => "closed".to_string(),
            };
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
        www: &Path,
        scratch: &mut [u8],
    ) {
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
            self.poll_h3(www, scratch);
        } else {
            self.poll_hq(www, scratch);
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
        if let Some(r) = self.responses.remove(&sid) {
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

    fn poll_h3(&mut self, www: &Path, scratch: &mut [u8]) {
        loop {
            let Some(h3) = self.h3.as_mut() else { return };
            match h3.poll(&mut self.conn) {
                Ok((sid, quiche::h3::Event::Headers { list, .. })) => {
                    let mut method = None;
                    let mut path = None;
                    for h in &list {
                        match h.name() {
                            b":method" => {
                                method = Some(String::from_utf8_lossy(h.value()).to_string())
                            }
                            b":path" => path = Some(String::from_utf8_lossy(h.value()).to_string()),
                            _ => (),
                        }
                    }
                    let path = path.unwrap_or_default();
                    if method.as_deref() != Some("GET") {
                        let hdrs = [quiche::h3::Header::new(b":status", b"405")];
                        let _ = h3.send_response(&mut self.conn, sid, &hdrs, true);
                        continue;
                    }
                    self.start_response(sid, &path, www);
                }
                Ok((sid, quiche::h3::Event::Data)) => {
                    // request bodies are ignored
                    while let Ok(n) = h3.recv_body(&mut self.conn, sid, scratch) {
                        if n == 0 {
                            break;
                        }
                    }
                }
                Ok((sid, quiche::h3::Event::Reset(_))) => {
                    self.responses.remove(&sid);
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
        let file = www_file(www, path).and_then(|p| {
            let f = File::open(&p).ok()?;
            let md = f.metadata().ok()?;
            md.is_file().then_some((f, md.len()))
        });
        let Some((file, size)) = file else {
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
        let mut r = Response {
            file,
            path: path.to_string(),
            size,
            remaining: size,
            buf: vec![0u8; CHUNK.min(size.max(1) as usize)],
            off: 0,
            len: 0,
            headers,
            start: Instant::now(),
        };
        if send_response(&mut self.conn, self.h3.as_mut(), sid, &mut r) {
            self.responses.insert(sid, r);
            self.finish_response(sid);
        } else {
            self.responses.insert(sid, r);
        }
    }
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
    } else if h3.is_none() && r.size == 0 && r.remaining == 0 && r.len == 0 {
        return conn.stream_send(sid, b"", true).is_ok();
    }

    loop {
        if r.off == r.len {
            if r.remaining == 0 {
                return true;
            }
            let cap = match conn.stream_capacity(sid) {
                Ok(c) => c,
                Err(quiche::Error::Done) => 0,
                Err(e) => {
                    log!("{} stream {sid}: {e:?}", conn.trace_id());
                    return true;
                }
            };
            if cap == 0 {
                return false;
            }
            // Read a whole chunk (not just `cap` bytes): what the stream does not take now
            // stays in the buffer, so the file is read in large pieces.
            let n = (r.buf.len() as u64).min(r.remaining) as usize;
            if let Err(e) = r.file.read_exact(&mut r.buf[..n]) {
                log!("{} stream {sid}: reading {}: {e}", conn.trace_id(), r.path);
                let _ = conn.stream_shutdown(sid, quiche::Shutdown::Write, 0x102);
                return true;
            }
            r.off = 0;
            r.len = n;
            r.remaining -= n as u64;
        }
        let fin = r.remaining == 0;
        let data = &r.buf[r.off..r.len];
        let res = match h3.as_mut() {
            Some(h3c) => match h3c.send_body(conn, sid, data, fin) {
                Ok(n) => Ok(n),
                Err(quiche::h3::Error::Done) => Ok(0),
                Err(e) => Err(format!("{e:?}")),
            },
            None => match conn.stream_send(sid, data, fin) {
                Ok(n) => Ok(n),
                Err(quiche::Error::Done) => Ok(0),
                Err(e) => Err(format!("{e:?}")),
            },
        };
        match res {
            Ok(n) => {
                r.off += n;
                if r.off < r.len {
                    return false;
                }
            }
            Err(e) => {
                log!("{} stream {sid}: send failed: {e}", conn.trace_id());
                return true;
            }
        }
    }
}
