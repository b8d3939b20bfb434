//! quiche interop client: runs the workload (docs/implementations.md "Workloads") speaking
//! $ALPN ("h3" via quiche::h3, or "hq-interop": "GET /path\r\n" on a raw bidirectional
//! stream): CONNECTIONS connections in parallel, and on each its share of $REQUESTS (GET, the
//! body to $DOWNLOADS/<last path segment>) and $UPLOAD_REQUESTS (h3 PUT of
//! $UPLOADS/<last path segment>), all at once, one stream per request. Exits non-zero on any
//! failure, 127 for a workload it cannot run (uploads over hq-interop).
//!
//! The event loop follows quiche's examples/http3-client.rs and tools/apps (mio, one
//! UDP socket, GSO batching of outgoing packets, GRO on receive); each connection has a thread
//! (the first the main one) and a socket of its own.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use qir_harness::{ConnectionRequests, RequestUrl, Workload, EXIT_UNSUPPORTED};
use qir_quiche::ack::{max_ack_delay_ms, AckPolicy};
use qir_quiche::{log, *};
use quiche::h3::NameValue;

/// One request: a GET into DOWNLOADS or a PUT of a file in UPLOADS.
struct Transfer {
    url: String,
    authority: String,
    path: String,
    kind: Kind,
    /// bytes received (GET) or sent (PUT)
    bytes: u64,
    start: Instant,
}

enum Kind {
    Get {
        target: PathBuf,
        file: Option<BufWriter<File>>,
        expected: Option<u64>,
    },
    Put {
        source: PathBuf,
        /// the file while its bytes are being sent
        body: Option<FileBody>,
        /// the whole body went out (with FIN)
        sent: bool,
    },
}

impl Transfer {
    fn new(url: RequestUrl, dir: &Path, upload: bool) -> Transfer {
        // the plan checked that every URL has a file name
        let file = dir.join(url.file_name().unwrap_or_default());
        let kind = if upload {
            Kind::Put {
                source: file,
                body: None,
                sent: false,
            }
        } else {
            Kind::Get {
                target: file,
                file: None,
                expected: None,
            }
        };
        Transfer {
            url: url.url,
            authority: url.authority,
            path: url.path,
            kind,
            bytes: 0,
            start: Instant::now(),
        }
    }

    fn method(&self) -> &'static str {
        match self.kind {
            Kind::Get { .. } => "GET",
            Kind::Put { .. } => "PUT",
        }
    }

    /// A PUT whose body is still being sent.
    fn uploading(&self) -> bool {
        matches!(self.kind, Kind::Put { sent: false, .. })
    }
}

/// What every connection is set up with.
struct Setup {
    alpn: String,
    certs: String,
    downloads: PathBuf,
    uploads: PathBuf,
}

/// How a connection ended.
#[derive(Default)]
struct Outcome {
    finished: usize,
    bytes: u64,
    first_request: Option<Instant>,
    failed: Option<String>,
}

fn main() {
    let workload = Workload::from_env().unwrap_or_else(|e| fatal(&e.to_string()));
    let alpn = getenv_opt("ALPN").unwrap_or_else(|| "h3".to_string());
    if !matches!(alpn.as_str(), "h3" | "hq-interop") {
        fatal(&format!("unsupported ALPN {alpn}"));
    }
    if let Some(why) = workload.unsupported_over(&alpn) {
        log!("{why}");
        std::process::exit(EXIT_UNSUPPORTED);
    }
    let (_, plan) = qir_harness::client_plan().unwrap_or_else(|e| fatal(&e.0));
    let dir = |needed: bool, var: &str| {
        if needed {
            PathBuf::from(getenv(var))
        } else {
            PathBuf::new()
        }
    };
    let setup = Setup {
        certs: getenv("CERTS"),
        downloads: dir(workload.kind.downloads(), "DOWNLOADS"),
        uploads: dir(workload.kind.uploads(), "UPLOADS"),
        alpn,
    };
    log!(
        "workload {} ({} stream(s) x {} connection(s))",
        workload.kind.name(),
        workload.streams,
        workload.connections
    );
    let n_requests: usize = plan.iter().map(ConnectionRequests::len).sum();
    let outcomes = run_all(plan, &setup);
    report(&outcomes, n_requests);
}

/// Runs every connection: the first on this thread (so the default workload runs as it always
/// did), each other one on a thread of its own.
fn run_all(plan: Vec<ConnectionRequests>, setup: &Setup) -> Vec<Outcome> {
    let mut plan = plan.into_iter();
    let first = plan.next().expect("the plan has a connection");
    std::thread::scope(|s| {
        let others: Vec<_> = plan
            .map(|c| s.spawn(move || run_connection(c, setup)))
            .collect();
        let mut outcomes = vec![run_connection(first, setup)];
        for h in others {
            outcomes.push(h.join().unwrap_or_else(|_| Outcome {
                failed: Some("connection thread panicked".into()),
                ..Outcome::default()
            }));
        }
        outcomes
    })
}

/// Exits 1 when a connection failed, else logs the total.
fn report(outcomes: &[Outcome], n_requests: usize) {
    let finished: usize = outcomes.iter().map(|o| o.finished).sum();
    if let Some(e) = outcomes.iter().find_map(|o| o.failed.as_ref()) {
        log!("error: {e} ({finished} of {n_requests} transfers complete)");
        std::process::exit(1);
    }
    let bytes: u64 = outcomes.iter().map(|o| o.bytes).sum();
    let t = outcomes
        .iter()
        .filter_map(|o| o.first_request)
        .min()
        .map(|s| s.elapsed().as_secs_f64())
        .unwrap_or(0.0);
    log!(
        "all {finished} transfers complete: {bytes} bytes in {t:.3}s ({:.1} Mbit/s)",
        bytes as f64 * 8.0 / t.max(1e-9) / 1e6
    );
}

fn run_connection(plan: ConnectionRequests, setup: &Setup) -> Outcome {
    let mut client = Client::connect(plan, setup);
    client.run();
    client.outcome()
}

/// One connection and its requests, with its own socket and mio event loop.
struct Client {
    index: usize,
    conn: quiche::Connection,
    h3: Option<quiche::h3::Connection>,
    h3_config: quiche::h3::Config,
    is_h3: bool,
    settings: Settings,
    ack: Option<AckPolicy>,
    sock: Socket,
    poll: mio::Poll,
    events: mio::Events,
    send: SendState,
    /// requests not sent yet
    pending: VecDeque<Transfer>,
    /// requests by stream
    active: HashMap<u64, Transfer>,
    next_hq_stream: u64,
    cipher: Option<&'static str>,
    established: bool,
    failed: Option<String>,
    finished: usize,
    bytes_total: u64,
    first_request: Option<Instant>,
    start: Instant,
    buf: Vec<u8>,
    out: Vec<u8>,
    body: Vec<u8>,
}

impl Client {
    /// Sets up the connection to the server of `plan`'s first request (its handshake starts).
    fn connect(plan: ConnectionRequests, setup: &Setup) -> Client {
        let first = plan.first();
        let peer: SocketAddr = first
            .authority
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .unwrap_or_else(|| fatal(&format!("cannot resolve {}", first.authority)));
        let (mut config, settings) = client_config(setup, peer);
        let (poll, sock) = bind_socket(peer);
        let mut scid = [0u8; quiche::MAX_CONN_ID_LEN];
        rand_bytes(&mut scid);
        let scid = quiche::ConnectionId::from_ref(&scid);
        // No SNI: the server is addressed by IP literal.
        let mut conn = quiche::connect(None, &scid, sock.local, peer, &mut config)
            .unwrap_or_else(|e| fatal(&format!("connect: {e}")));
        let odcid = hex(&conn.destination_id());
        attach_logs(&mut conn, &open_keylog(), &odcid, "client");
        let ack = AckPolicy::from_env();
        log!(
            "connection {}: connecting to {peer} from {} ({}, cc={}, ack policy {ack:?})",
            plan.index,
            sock.local,
            setup.alpn,
            settings.cc_runner_name,
        );
        let downloads = plan.downloads.into_iter();
        let uploads = plan.uploads.into_iter();
        let pending = downloads
            .map(|u| Transfer::new(u, &setup.downloads, false))
            .chain(uploads.map(|u| Transfer::new(u, &setup.uploads, true)))
            .collect();
        Client {
            index: plan.index,
            conn,
            h3: None,
            h3_config: quiche::h3::Config::new()
                .unwrap_or_else(|e| fatal(&format!("h3 config: {e}"))),
            is_h3: setup.alpn == "h3",
            settings,
            ack,
            sock,
            poll,
            events: mio::Events::with_capacity(1024),
            send: SendState::default(),
            pending,
            active: HashMap::new(),
            next_hq_stream: 0,
            cipher: None,
            established: false,
            failed: None,
            finished: 0,
            bytes_total: 0,
            first_request: None,
            start: Instant::now(),
            buf: vec![0u8; 65536],
            out: vec![0u8; MAX_BUF_SIZE],
            body: vec![0u8; 256 * 1024],
        }
    }

    /// The event loop: until every request is done, one failed, or the connection closed.
    fn run(&mut self) {
        let _ = flush(&mut self.conn, &mut self.send, &self.sock, &mut self.out);
        let mut continue_write = false;
        loop {
            self.wait(continue_write);
            self.receive_packets();
            if self
                .conn
                .timeout_instant()
                .is_some_and(|t| t <= Instant::now())
            {
                self.conn.on_timeout();
            }
            if self.conn.is_established() && !self.established {
                self.on_established();
            }

            let mut requested = false;
            if self.established && self.failed.is_none() && !self.conn.is_closed() {
                requested = self.issue_requests();
                let mut done = Vec::new();
                if self.h3.is_some() {
                    self.receive_h3(&mut done);
                    self.send_bodies(&mut done);
                } else {
                    self.receive_hq(&mut done);
                }
                for (sid, err) in done {
                    self.complete(sid, err);
                }
            }

            let all_done = self.failed.is_none()
                && self.pending.is_empty()
                && self.active.is_empty()
                && self.established;
            let closing = all_done || self.failed.is_some();
            if closing && !self.conn.is_closed() && !self.conn.is_draining() {
                let code = if self.h3.is_some() { 0x100 } else { 0 };
                let code = if self.failed.is_some() {
                    code + 1
                } else {
                    code
                };
                let _ = self.conn.close(true, code, b"");
            }
            continue_write = self.send_packets(closing || self.conn.is_closed(), requested);
            if closing {
                break;
            }
            if self.conn.is_closed() {
                self.failed = Some(close_reason(&self.conn));
                break;
            }
        }
    }

    /// Sleeps in poll until the socket is ready or the next timer (quiche's, a held ACK).
    fn wait(&mut self, continue_write: bool) {
        let timeout = if continue_write {
            Some(Duration::ZERO)
        } else {
            // wake up for a held ACK, too
            let held = self.ack.as_ref().and_then(|a| a.timeout(Instant::now()));
            match (self.conn.timeout(), held) {
                (Some(t), Some(h)) => Some(t.min(h)),
                (t, h) => t.or(h),
            }
        };
        if let Err(e) = self.poll.poll(&mut self.events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                fatal(&format!("poll: {e}"));
            }
        }
    }

    /// Feeds every datagram that arrived to quiche (GRO batches segment by segment).
    fn receive_packets(&mut self) {
        loop {
            let (len, from, seg) = match self.sock.recv(&mut self.buf) {
                Ok(v) => v,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log!("recv failed: {e}");
                    break;
                }
            };
            let info = quiche::RecvInfo {
                from,
                to: self.sock.local,
            };
            for pkt in self.buf[..len].chunks_mut(seg.max(1)) {
                if let Err(e) = self.conn.recv(pkt, info) {
                    if e != quiche::Error::Done {
                        log!("recv failed: {e:?}");
                    }
                } else if let Some(a) = self.ack.as_mut().filter(|_| self.conn.is_established()) {
                    if a.on_packet(Instant::now()) {
                        // the n-th packet: its ACK goes out now, before the rest of the batch
                        let _ = flush(&mut self.conn, &mut self.send, &self.sock, &mut self.out);
                        a.sent();
                    }
                }
            }
            if let Some(c) = take_handshake_cipher() {
                self.cipher = Some(c);
            }
        }
    }

    fn on_established(&mut self) {
        self.established = true;
        log!(
            "connection {}: handshake done after {:.1} ms",
            self.index,
            self.start.elapsed().as_secs_f64() * 1e3
        );
        print_negotiated(&self.conn, self.cipher, &self.settings);
        if !self.is_h3 {
            return;
        }
        match quiche::h3::Connection::with_transport(&mut self.conn, &self.h3_config) {
            Ok(h) => self.h3 = Some(h),
            Err(e) => {
                self.failed = Some(format!("HTTP/3 setup failed: {e}"));
                let _ = self.conn.close(true, 0x101, b"h3 setup failed");
            }
        }
    }

    /// Sends the requests, as many at once as the peer's stream limit allows; true when one
    /// went out.
    fn issue_requests(&mut self) -> bool {
        let mut requested = false;
        while let Some(mut t) = self.pending.pop_front() {
            if self.conn.peer_streams_left_bidi() == 0 {
                self.pending.push_front(t);
                break;
            }
            let sid = match self.open_request(&mut t) {
                Ok(Some(sid)) => sid,
                Ok(None) => {
                    // blocked: the stream limit or credit; again on the next round
                    self.pending.push_front(t);
                    break;
                }
                Err(e) => {
                    self.failed = Some(format!("{} {}: {e}", t.method(), t.url));
                    break;
                }
            };
            t.start = Instant::now();
            requested = true;
            self.first_request.get_or_insert(t.start);
            self.active.insert(sid, t);
        }
        requested
    }

    /// Opens `t`'s stream and sends its request (headers, or the hq-interop line); for a GET
    /// creates the file it is written to, for a PUT opens the file to send. Ok(None): blocked.
    fn open_request(&mut self, t: &mut Transfer) -> Result<Option<u64>, String> {
        if let Kind::Put { source, body, .. } = &mut t.kind {
            let file =
                FileBody::open(source).map_err(|e| format!("opening {}: {e}", source.display()))?;
            *body = Some(file);
        }
        let sid = match self.h3.as_mut() {
            Some(h3c) => send_h3_request(h3c, &mut self.conn, t)?,
            None => self.send_hq_request(t)?,
        };
        let Some(sid) = sid else {
            return Ok(None);
        };
        match &mut t.kind {
            Kind::Get { target, file, .. } => {
                let f = File::create(&*target)
                    .map_err(|e| format!("creating {}: {e}", target.display()))?;
                *file = Some(BufWriter::with_capacity(CHUNK, f));
            }
            Kind::Put { body, sent, .. } => *sent = body.as_ref().is_some_and(|b| b.size == 0),
        }
        Ok(Some(sid))
    }

    /// hq-interop: "GET /path\r\n" and FIN on the next client bidirectional stream.
    fn send_hq_request(&mut self, t: &Transfer) -> Result<Option<u64>, String> {
        let sid = self.next_hq_stream;
        let req = format!("GET {}\r\n", t.path);
        match self.conn.stream_send(sid, req.as_bytes(), true) {
            Ok(n) if n == req.len() => {}
            // a partial write cannot happen for a new stream with credit
            Ok(_) | Err(quiche::Error::Done) | Err(quiche::Error::StreamLimit) => return Ok(None),
            Err(e) => return Err(format!("{e:?}")),
        }
        self.next_hq_stream += 4;
        Ok(Some(sid))
    }

    /// HTTP/3 events: response headers, bodies (written to the downloads), ends and resets.
    fn receive_h3(&mut self, done: &mut Vec<(u64, Option<String>)>) {
        let Some(h3c) = self.h3.as_mut() else { return };
        loop {
            match h3c.poll(&mut self.conn) {
                Ok((sid, quiche::h3::Event::Headers { list, .. })) => {
                    if let Some(t) = self.active.get_mut(&sid) {
                        if let Err(e) = on_response_headers(t, &list) {
                            done.push((sid, Some(e)));
                        }
                    }
                }
                Ok((sid, quiche::h3::Event::Data)) => {
                    let t = self.active.get_mut(&sid);
                    let conn = &mut self.conn;
                    let body = &mut self.body;
                    let result = match t {
                        Some(t) => receive_body(t, |b| h3c.recv_body(conn, sid, b), body),
                        None => receive_body_discard(|b| h3c.recv_body(conn, sid, b), body),
                    };
                    if let Err(e) = result {
                        done.push((sid, Some(e)));
                    }
                }
                Ok((sid, quiche::h3::Event::Finished)) => {
                    if self.active.contains_key(&sid) {
                        done.push((sid, None));
                    }
                }
                Ok((sid, quiche::h3::Event::Reset(code))) => {
                    if self.active.contains_key(&sid) {
                        done.push((sid, Some(format!("stream reset by peer (0x{code:x})"))));
                    }
                }
                Ok(_) => (),
                Err(quiche::h3::Error::Done) => break,
                Err(e) => {
                    self.failed = Some(format!("HTTP/3 error: {e:?}"));
                    break;
                }
            }
        }
    }

    /// hq-interop: the raw response bytes of every readable stream.
    fn receive_hq(&mut self, done: &mut Vec<(u64, Option<String>)>) {
        let readable: Vec<u64> = self.conn.readable().collect();
        for sid in readable {
            loop {
                match self.conn.stream_recv(sid, &mut self.body) {
                    Ok((n, fin)) => {
                        if let Some(t) = self.active.get_mut(&sid) {
                            if let Err(e) = write_body(t, &self.body[..n]) {
                                done.push((sid, Some(e)));
                                break;
                            }
                        }
                        if fin {
                            done.push((sid, None));
                            break;
                        }
                    }
                    Err(quiche::Error::Done) => break,
                    Err(quiche::Error::StreamReset(code)) => {
                        done.push((sid, Some(format!("stream reset by peer (0x{code:x})"))));
                        break;
                    }
                    Err(e) => {
                        done.push((sid, Some(format!("stream_recv: {e:?}"))));
                        break;
                    }
                }
            }
        }
    }

    /// Pushes the PUT bodies as far as flow and congestion control let them, in the order
    /// quiche hands out writable streams (as the server sends its GET responses).
    fn send_bodies(&mut self, done: &mut Vec<(u64, Option<String>)>) {
        let Some(h3c) = self.h3.as_mut() else { return };
        if !self.active.values().any(Transfer::uploading) {
            return;
        }
        let writable: Vec<u64> = self.conn.writable().collect();
        for sid in writable {
            let Some(t) = self.active.get_mut(&sid) else {
                continue;
            };
            let Kind::Put {
                body: Some(body),
                sent: sent @ false,
                ..
            } = &mut t.kind
            else {
                continue;
            };
            match body.send(&mut self.conn, Some(&mut *h3c), sid) {
                Ok(all) => *sent = all,
                Err(e) => done.push((sid, Some(e))),
            }
            t.bytes = body.sent();
        }
    }

    /// A request ended (`err`: why it failed); a failed download's partial file is removed.
    fn complete(&mut self, sid: u64, err: Option<String>) {
        let Some(mut t) = self.active.remove(&sid) else {
            return;
        };
        match err.or_else(|| finish_transfer(&mut t).err()) {
            Some(e) => {
                if let Kind::Get { target, file, .. } = &mut t.kind {
                    // do not leave a partial download behind
                    drop(file.take());
                    let _ = std::fs::remove_file(&*target);
                }
                self.failed
                    .get_or_insert(format!("{} {}: {e}", t.method(), t.url));
            }
            None => {
                let d = t.start.elapsed().as_secs_f64();
                log!(
                    "{} {}: {} bytes in {d:.3}s ({:.1} Mbit/s)",
                    t.method(),
                    t.url,
                    t.bytes,
                    t.bytes as f64 * 8.0 / d.max(1e-9) / 1e6
                );
                self.finished += 1;
                self.bytes_total += t.bytes;
            }
        }
    }

    /// Sends what quiche has (a held ACK waits, ACK_RATIO); true when more may be pending.
    fn send_packets(&mut self, closing: bool, requested: bool) -> bool {
        // requests, bodies and the close always go out at once
        let uploading = self.active.values().any(Transfer::uploading);
        let hold = !closing
            && !requested
            && !uploading
            && self.ack.as_ref().is_some_and(|a| a.holding(Instant::now()));
        let more = !hold
            && match flush(&mut self.conn, &mut self.send, &self.sock, &mut self.out) {
                Ok(more) => more,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
                Err(e) => {
                    log!("send: {e}");
                    false
                }
            };
        if let Some(a) = self.ack.as_mut().filter(|_| !hold) {
            a.sent();
        }
        more
    }

    /// Prints the connection's statistics and ends it (dropping it flushes the qlog writer).
    fn outcome(self) -> Outcome {
        print_stats(&self.conn);
        Outcome {
            finished: self.finished,
            bytes: self.bytes_total,
            first_request: self.first_request,
            failed: self
                .failed
                .map(|e| format!("connection {}: {e}", self.index)),
        }
    }
}

/// The quiche configuration of a connection to `peer`.
fn client_config(setup: &Setup, peer: SocketAddr) -> (quiche::Config, Settings) {
    let (mut config, settings) = make_config(&[setup.alpn.as_bytes()], Some(peer.ip()));
    // Verify the server certificate against $CERTS/ca.pem (and its IP SAN, see make_config).
    let certs = &setup.certs;
    config
        .load_verify_locations_from_file(&format!("{certs}/ca.pem"))
        .unwrap_or_else(|e| fatal(&format!("loading {certs}/ca.pem: {e}")));
    config.verify_peer(true);
    // the ACK timer the client advertises is the one its ACK policy keeps (src/ack.rs)
    config.set_max_ack_delay(max_ack_delay_ms());
    apply_flow_control_window(&mut config);
    (config, settings)
}

/// A UDP socket of its own for a connection to `peer`, registered with a new mio Poll.
fn bind_socket(peer: SocketAddr) -> (mio::Poll, Socket) {
    let bind: SocketAddr = if peer.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()
    .unwrap();
    let poll = mio::Poll::new().unwrap_or_else(|e| fatal(&format!("poll: {e}")));
    let mut sock = Socket::bind(bind);
    register_socket(&poll, &mut sock);
    (poll, sock)
}

/// Sends `t`'s HTTP/3 request headers (a PUT's with its content-length; FIN unless a body
/// follows). Ok(None): blocked by the stream limit.
fn send_h3_request(
    h3c: &mut quiche::h3::Connection,
    conn: &mut quiche::Connection,
    t: &Transfer,
) -> Result<Option<u64>, String> {
    let size = match &t.kind {
        Kind::Put { body, .. } => body.as_ref().map(|b| b.size),
        Kind::Get { .. } => None,
    };
    let length = size.map(|n| n.to_string());
    let mut req = vec![
        quiche::h3::Header::new(b":method", t.method().as_bytes()),
        quiche::h3::Header::new(b":scheme", b"https"),
        quiche::h3::Header::new(b":authority", t.authority.as_bytes()),
        quiche::h3::Header::new(b":path", t.path.as_bytes()),
        quiche::h3::Header::new(b"user-agent", b"quiche"),
    ];
    if let Some(n) = &length {
        req.push(quiche::h3::Header::new(b"content-length", n.as_bytes()));
    }
    let fin = size.is_none_or(|n| n == 0);
    match h3c.send_request(conn, &req, fin) {
        Ok(sid) => Ok(Some(sid)),
        Err(quiche::h3::Error::StreamBlocked)
        | Err(quiche::h3::Error::TransportError(quiche::Error::StreamLimit)) => Ok(None),
        Err(e) => Err(format!("{e:?}")),
    }
}

/// A response's headers: anything but 200 fails the request; a GET notes its content-length.
fn on_response_headers(t: &mut Transfer, list: &[quiche::h3::Header]) -> Result<(), String> {
    let mut status = None;
    for h in list {
        match h.name() {
            b":status" => status = Some(String::from_utf8_lossy(h.value()).to_string()),
            b"content-length" => {
                if let Kind::Get { expected, .. } = &mut t.kind {
                    *expected = std::str::from_utf8(h.value())
                        .ok()
                        .and_then(|v| v.parse().ok());
                }
            }
            _ => (),
        }
    }
    match status.as_deref() {
        Some("200") => Ok(()),
        _ => Err(format!("status {status:?}")),
    }
}

/// Reads a response body with `recv` (quiche's recv_body) into `t`'s download (a PUT's body,
/// empty, is read and dropped).
fn receive_body(
    t: &mut Transfer,
    mut recv: impl FnMut(&mut [u8]) -> quiche::h3::Result<usize>,
    buf: &mut [u8],
) -> Result<(), String> {
    loop {
        match recv(buf) {
            Ok(0) | Err(quiche::h3::Error::Done) => return Ok(()),
            Ok(n) => write_body(t, &buf[..n])?,
            Err(e) => return Err(format!("recv_body: {e:?}")),
        }
    }
}

/// Reads and drops the body of a stream no request is waiting for.
fn receive_body_discard(
    mut recv: impl FnMut(&mut [u8]) -> quiche::h3::Result<usize>,
    buf: &mut [u8],
) -> Result<(), String> {
    while let Ok(n) = recv(buf) {
        if n == 0 {
            break;
        }
    }
    Ok(())
}

/// Appends response body bytes to a GET's file.
fn write_body(t: &mut Transfer, data: &[u8]) -> Result<(), String> {
    let Kind::Get {
        file: Some(file), ..
    } = &mut t.kind
    else {
        return Ok(());
    };
    t.bytes += data.len() as u64;
    file.write_all(data).map_err(|e| format!("write: {e}"))
}

/// After a request's stream ended: a GET writes out its file and checks its length, a PUT
/// must have sent its whole body (its 200 came with the headers).
fn finish_transfer(t: &mut Transfer) -> Result<(), String> {
    match &mut t.kind {
        Kind::Get {
            target,
            file,
            expected,
        } => {
            if let Some(f) = file.take() {
                f.into_inner()
                    .map_err(|e| format!("writing {}: {}", target.display(), e.error()))?;
            }
            match expected {
                Some(exp) if *exp != t.bytes => {
                    Err(format!("got {} bytes, expected {exp}", t.bytes))
                }
                _ => Ok(()),
            }
        }
        Kind::Put { sent: true, .. } => Ok(()),
        Kind::Put { .. } => Err(format!("answered after {} bytes of the body", t.bytes)),
    }
}
