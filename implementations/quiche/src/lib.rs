//! Shared parts of the quiche interop server and client: the runner's environment,
//! the quiche/BoringSSL configuration, the UDP socket I/O (GSO with SO_TXTIME
//! pacing hints as in quiche's tools/apps `sendto.rs`, plus UDP GRO on receive) and a file sent
//! as a stream body ([`FileBody`]). The contract code all Rust harnesses share (environment,
//! windows, the JSON of the QIR_NEGOTIATED line, the workload) is in ../_shared/rust/qir-harness.

use std::cell::Cell;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, IoSliceMut, Read};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Instant;

use nix::sys::socket::{
    recvmsg, sendmsg, setsockopt, sockopt, ControlMessage, ControlMessageOwned, MsgFlags,
    SockaddrStorage,
};
use qir_harness::{Negotiated, CONNECTION_WINDOW, STREAM_WINDOW};

pub use qir_harness::{env_opt as getenv_opt, hex};

pub mod ack;

/// Largest UDP payload quiche sends (1500 byte MTU minus IPv6 and UDP headers).
pub const MAX_DATAGRAM_SIZE: usize = 1452;
/// Largest buffer handed to one sendmsg/recvmsg (a UDP datagram incl. GSO/GRO batches).
pub const MAX_BUF_SIZE: usize = 65507;
/// Size of the file read / disk write chunks.
pub const CHUNK: usize = 1 << 20;

/// Returns an environment variable that must be set and non-empty (else exits).
pub fn getenv(name: &str) -> String {
    qir_harness::env_required(name).unwrap_or_else(|e| fatal(&e.to_string()))
}

pub fn fatal(msg: &str) -> ! {
    eprintln!("{} error: {msg}", prog());
    std::process::exit(1)
}

pub fn prog() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        let p = std::env::args().next().unwrap_or_default();
        let base = p.rsplit('/').next().unwrap_or("").to_string();
        format!("quiche {base}:")
    })
}

#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => {
        eprintln!("{} {}", $crate::prog(), format_args!($($arg)*))
    };
}

// ---------------------------------------------------------------------------
// TLS / QUIC configuration
// ---------------------------------------------------------------------------

thread_local! {
    /// The TLS 1.3 cipher suite BoringSSL reports at SSL_CB_HANDSHAKE_DONE. The event
    /// loop is single threaded and the callback runs inside `Connection::recv()`, so the
    /// caller takes this right after `recv()` and attributes it to that connection.
    static HANDSHAKE_CIPHER: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Takes the cipher suite name recorded by the last completed handshake, if any.
pub fn take_handshake_cipher() -> Option<&'static str> {
    HANDSHAKE_CIPHER.with(|c| c.take())
}

/// The congestion control names of the runner mapped to quiche's names. Unknown names
/// fall back to cubic (the first entry of meta.yml's supports.congestion_control).
pub fn cc_algorithm(env: Option<&str>) -> (&'static str, &'static str) {
    // (runner name, quiche name)
    match env.map(|s| s.to_ascii_lowercase()).as_deref() {
        None | Some("cubic") => ("cubic", "cubic"),
        Some("reno") => ("reno", "reno"),
        // quiche's only BBR is BBRv2 from the gcongestion port ("bbr" is an alias for it)
        Some("bbr") | Some("bbr2") => ("bbr", "bbr2_gcongestion"),
        Some(other) => {
            log!("congestion control '{other}' not supported, using cubic");
            ("cubic", "cubic")
        }
    }
}

pub struct Settings {
    pub cc_runner_name: &'static str,
}

/// Builds the quiche configuration shared by client and server.
///
/// The TLS context is built with the `boring` crate so that the TLS 1.3 cipher suites
/// can be restricted (SSL_CTX_set1_tls13_ciphers) and the negotiated suite observed.
pub fn make_config(
    alpns: &[&[u8]],
    verify_ip: Option<std::net::IpAddr>,
) -> (quiche::Config, Settings) {
    let mut ctx = boring::ssl::SslContextBuilder::new(boring::ssl::SslMethod::tls())
        .unwrap_or_else(|e| fatal(&format!("SSL_CTX_new: {e}")));

    if let Some(cipher) = getenv_opt("CIPHER") {
        let id = qir_harness::cipher::iana_id(&cipher)
            .unwrap_or_else(|| fatal(&format!("unknown TLS 1.3 cipher suite '{cipher}'")));
        let rc = unsafe {
            boring_sys::SSL_CTX_set1_tls13_ciphers(ctx.as_ptr(), &id, std::ptr::null(), 1)
        };
        if rc != 1 {
            fatal(&format!("SSL_CTX_set1_tls13_ciphers({cipher}) failed"));
        }
    }

    ctx.set_info_callback(|ssl, mode, _| {
        if mode == boring::ssl::SslInfoCallbackMode::HANDSHAKE_DONE {
            let name = ssl.current_cipher().and_then(|c| c.standard_name());
            HANDSHAKE_CIPHER.with(|c| c.set(name));
        }
    });

    if let Some(ip) = verify_ip {
        // The server certificate has only an IP SAN: check it against the server's IP
        // (no SNI is sent for an IP literal, so quiche does not set a host name).
        let raw: Vec<u8> = match ip {
            std::net::IpAddr::V4(v4) => v4.octets().to_vec(),
            std::net::IpAddr::V6(v6) => v6.octets().to_vec(),
        };
        let rc = unsafe {
            let param = boring_sys::SSL_CTX_get0_param(ctx.as_ptr());
            boring_sys::X509_VERIFY_PARAM_set1_ip(param, raw.as_ptr(), raw.len())
        };
        if rc != 1 {
            fatal("X509_VERIFY_PARAM_set1_ip failed");
        }
    }

    let mut config = quiche::Config::with_boring_ssl_ctx_builder(quiche::PROTOCOL_VERSION, ctx)
        .unwrap_or_else(|e| fatal(&format!("quiche config: {e}")));

    config
        .set_application_protos(alpns)
        .unwrap_or_else(|e| fatal(&format!("ALPN: {e}")));

    let (cc_runner_name, cc_quiche) = cc_algorithm(getenv_opt("CONGESTION_CONTROL").as_deref());
    config
        .set_cc_algorithm_name(cc_quiche)
        .unwrap_or_else(|e| fatal(&format!("set_cc_algorithm_name({cc_quiche}): {e}")));

    // quiche-apps defaults (10 MB connection / 1 MB stream, autotuned up to 24 / 16 MiB)
    // scaled up so that a 10G link is not window limited: the shared windows (32 / 16 MiB),
    // autotuned up to twice that (64 / 32 MiB), quiche's own setting.
    let (conn_window, stream_window) = (u64::from(CONNECTION_WINDOW), u64::from(STREAM_WINDOW));
    config.set_max_idle_timeout(30_000);
    config.set_max_recv_udp_payload_size(MAX_BUF_SIZE);
    config.set_max_send_udp_payload_size(MAX_DATAGRAM_SIZE);
    config.set_initial_max_data(conn_window);
    config.set_initial_max_stream_data_bidi_local(stream_window);
    config.set_initial_max_stream_data_bidi_remote(stream_window);
    config.set_initial_max_stream_data_uni(stream_window);
    config.set_max_connection_window(2 * conn_window);
    config.set_max_stream_window(2 * stream_window);
    config.set_initial_max_streams_bidi(1000);
    config.set_initial_max_streams_uni(100);
    config.set_disable_active_migration(true);

    if getenv_opt("SSLKEYLOGFILE").is_some() {
        config.log_keys();
    }

    (config, Settings { cc_runner_name })
}

/// The client's fixed flow-control window (FLOW_CONTROL_WINDOW, bytes; unset: the windows of
/// [`make_config`]): the initial connection and stream credit, and the largest the auto-tuning
/// may reach (quiche 0.30.0 src/flowcontrol.rs `set_window` caps it at `max_window`), so the
/// window stays fixed. quiche grants it again once half of it was consumed
/// (`should_update_max_data`).
pub fn apply_flow_control_window(config: &mut quiche::Config) {
    let Some(value) = getenv_opt("FLOW_CONTROL_WINDOW") else {
        return;
    };
    let window = match value.parse::<u64>() {
        Ok(window) if window > 0 => window,
        _ => fatal(&format!(
            "FLOW_CONTROL_WINDOW must be bytes above 0, not '{value}'"
        )),
    };
    config.set_initial_max_data(window);
    config.set_initial_max_stream_data_bidi_local(window);
    config.set_initial_max_stream_data_bidi_remote(window);
    config.set_initial_max_stream_data_uni(window);
    config.set_max_connection_window(window);
    config.set_max_stream_window(window);
    log!("flow-control window fixed at {window} bytes (connection and streams)");
}

/// A file sent as a stream body (a GET response, a PUT request), read in CHUNK pieces once
/// the stream has send capacity.
pub struct FileBody {
    file: File,
    /// The file's size.
    pub size: u64,
    /// bytes not yet read from the file
    remaining: u64,
    buf: Vec<u8>,
    off: usize,
    len: usize,
}

impl FileBody {
    /// Opens `path`, which must be a regular file.
    pub fn open(path: &Path) -> io::Result<FileBody> {
        let file = File::open(path)?;
        let md = file.metadata()?;
        if !md.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        let size = md.len();
        Ok(FileBody {
            file,
            size,
            remaining: size,
            buf: vec![0u8; CHUNK.min(size.max(1) as usize)],
            off: 0,
            len: 0,
        })
    }

    /// The bytes handed to the stream so far.
    pub fn sent(&self) -> u64 {
        self.size - self.remaining - (self.len - self.off) as u64
    }

    /// Pushes as much of the body as stream `sid` accepts (DATA frames with `h3`, raw stream
    /// data without), with FIN on the last byte. Ok(true): all sent; Ok(false): blocked, call
    /// again once the stream is writable; Err: the stream failed (why).
    pub fn send(
        &mut self,
        conn: &mut quiche::Connection,
        mut h3: Option<&mut quiche::h3::Connection>,
        sid: u64,
    ) -> Result<bool, String> {
        loop {
            if self.off == self.len {
                if self.remaining == 0 {
                    return Ok(true);
                }
                let cap = match conn.stream_capacity(sid) {
                    Ok(c) => c,
                    Err(quiche::Error::Done) => 0,
                    Err(e) => return Err(format!("{e:?}")),
                };
                if cap == 0 {
                    return Ok(false);
                }
                self.refill(conn, sid)?;
            }
            let fin = self.remaining == 0;
            let data = &self.buf[self.off..self.len];
            let sent = match h3.as_mut() {
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
            self.off += sent.map_err(|e| format!("send failed: {e}"))?;
            if self.off < self.len {
                return Ok(false);
            }
        }
    }

    /// Reads the next chunk: a whole one (not just what the stream takes now), so the file is
    /// read in large pieces; what the stream does not take stays in the buffer.
    fn refill(&mut self, conn: &mut quiche::Connection, sid: u64) -> Result<(), String> {
        let n = (self.buf.len() as u64).min(self.remaining) as usize;
        if let Err(e) = self.file.read_exact(&mut self.buf[..n]) {
            let _ = conn.stream_shutdown(sid, quiche::Shutdown::Write, 0x102);
            return Err(format!("reading: {e}"));
        }
        self.off = 0;
        self.len = n;
        self.remaining -= n as u64;
        Ok(())
    }
}

/// Per-connection side outputs: key log and qlog.
/// `id` names the qlog file `<id>_<role>.sqlog` (the original destination connection
/// ID, so that the client's and the server's files match).
/// Why a closed connection ended: the peer's error, our own, an idle timeout, or a clean
/// close.
pub fn close_reason(conn: &quiche::Connection) -> String {
    match (conn.peer_error(), conn.local_error(), conn.is_timed_out()) {
        (Some(e), _, _) => format!("peer closed the connection: {e:?}"),
        (_, Some(e), _) => format!("connection closed: {e:?}"),
        (_, _, true) => "idle timeout".to_string(),
        _ => "connection closed".to_string(),
    }
}

pub fn attach_logs(conn: &mut quiche::Connection, keylog: &Option<File>, id: &str, role: &str) {
    if let Some(f) = keylog {
        match f.try_clone() {
            Ok(f) => conn.set_keylog(Box::new(f)),
            Err(e) => log!("key log: {e}"),
        }
    }
    if let Some(dir) = getenv_opt("QLOGDIR") {
        // the directory may not exist yet (quic-go's qlog writer creates it, too)
        if let Err(e) = std::fs::create_dir_all(&dir) {
            log!("qlog dir {dir}: {e}");
        }
        let path = format!("{dir}/{id}_{role}.sqlog");
        match File::create(&path) {
            Ok(f) => conn.set_qlog(
                Box::new(io::BufWriter::with_capacity(1 << 20, f)),
                format!("quiche {role}"),
                format!("quiche {role} qlog id={id}"),
            ),
            Err(e) => log!("qlog {path}: {e}"),
        }
    }
}

/// Opens $SSLKEYLOGFILE for appending, if set.
pub fn open_keylog() -> Option<File> {
    let path = getenv_opt("SSLKEYLOGFILE")?;
    match OpenOptions::new().create(true).append(true).open(&path) {
        Ok(f) => Some(f),
        Err(e) => fatal(&format!("opening key log {path}: {e}")),
    }
}

/// Prints the QIR_NEGOTIATED line with what quiche / BoringSSL report.
///
/// quiche has no getter for the congestion controller in use: it only reports whether
/// the gcongestion (BBRv2) path is active. If it is, "bbr" is reported; otherwise the
/// controller is the cubic/reno one quiche accepted in `set_cc_algorithm_name`.
pub fn print_negotiated(conn: &quiche::Connection, cipher: Option<&str>, settings: &Settings) {
    let cc = match conn.gcongestion_enabled() {
        Some(true) => Some("bbr"),
        Some(false) if settings.cc_runner_name != "bbr" => Some(settings.cc_runner_name),
        _ => None,
    };
    Negotiated::new()
        .alpn_bytes(conn.application_proto())
        .cipher(cipher)
        .congestion_control(cc)
        .print();
}

pub fn print_stats(conn: &quiche::Connection) {
    let s = conn.stats();
    let p = conn.path_stats().next();
    let (rtt, cwnd, mtu) = p.map(|p| (p.rtt, p.cwnd, p.pmtu)).unwrap_or_default();
    log!(
        "{} stats: sent {} pkts / {} B, recv {} pkts / {} B, lost {} pkts, retrans {} pkts, rtt {:?}, cwnd {}, pmtu {}",
        conn.trace_id(),
        s.sent,
        s.sent_bytes,
        s.recv,
        s.recv_bytes,
        s.lost,
        s.retrans,
        rtt,
        cwnd,
        mtu
    );
}

/// Random bytes from BoringSSL.
pub fn rand_bytes(buf: &mut [u8]) {
    boring::rand::rand_bytes(buf).unwrap_or_else(|e| fatal(&format!("rand: {e}")));
}

// ---------------------------------------------------------------------------
// UDP socket
// ---------------------------------------------------------------------------

/// The poll token of the one UDP socket of a client or server loop.
pub const TOKEN_SOCK: mio::Token = mio::Token(0);

/// Registers the loop's socket with ``poll`` for reading and writing, or ends the program.
pub fn register_socket(poll: &mio::Poll, sock: &mut Socket) {
    poll.registry()
        .register(
            &mut sock.sock,
            TOKEN_SOCK,
            mio::Interest::READABLE | mio::Interest::WRITABLE,
        )
        .unwrap_or_else(|e| fatal(&format!("register: {e}")));
}

pub struct Socket {
    pub sock: mio::net::UdpSocket,
    pub local: SocketAddr,
    pub gso: bool,
    pub gro: bool,
    pub txtime: bool,
    mono_base: (Instant, u64),
    cmsg_buf: Vec<u8>,
}

fn parse_bool_env(name: &str, default: bool) -> bool {
    match getenv_opt(name).as_deref() {
        None => default,
        Some("1") | Some("true") | Some("yes") | Some("on") => true,
        Some("0") | Some("false") | Some("no") | Some("off") => false,
        Some(v) => fatal(&format!("{name}: cannot parse '{v}' as a boolean")),
    }
}

fn parse_size_env(name: &str) -> Option<usize> {
    qir_harness::env_bytes(name).unwrap_or_else(|e| fatal(&e.to_string()))
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Socket {
    /// Creates a non-blocking UDP socket bound to `bind`, applying SOCKET_RCVBUF /
    /// SOCKET_SNDBUF, GSO and GRO from the environment.
    pub fn bind(bind: SocketAddr) -> Socket {
        use socket2::{Domain, Protocol, Socket as S2, Type};
        let domain = if bind.is_ipv4() {
            Domain::IPV4
        } else {
            Domain::IPV6
        };
        let s = S2::new(domain, Type::DGRAM, Some(Protocol::UDP))
            .unwrap_or_else(|e| fatal(&format!("socket: {e}")));
        if let Some(n) = parse_size_env("SOCKET_RCVBUF") {
            s.set_recv_buffer_size(n)
                .unwrap_or_else(|e| fatal(&format!("SO_RCVBUF: {e}")));
        }
        if let Some(n) = parse_size_env("SOCKET_SNDBUF") {
            s.set_send_buffer_size(n)
                .unwrap_or_else(|e| fatal(&format!("SO_SNDBUF: {e}")));
        }
        s.bind(&bind.into())
            .unwrap_or_else(|e| fatal(&format!("bind {bind}: {e}")));
        s.set_nonblocking(true)
            .unwrap_or_else(|e| fatal(&format!("O_NONBLOCK: {e}")));
        let std_sock: std::net::UdpSocket = s.into();
        let local = std_sock.local_addr().unwrap_or(bind);

        // GSO: as quiche-apps' detect_gso(), probe UDP_SEGMENT support.
        let want_gso = parse_bool_env("GSO", true);
        let gso = want_gso
            && setsockopt(
                &std_sock,
                sockopt::UdpGsoSegment,
                &(MAX_DATAGRAM_SIZE as i32),
            )
            .is_ok();
        if gso {
            // reset the socket-wide default: the size is passed per sendmsg
            let _ = setsockopt(&std_sock, sockopt::UdpGsoSegment, &0);
        }
        let want_gro = parse_bool_env("GRO", true);
        let gro = want_gro && setsockopt(&std_sock, sockopt::UdpGroSegment, &true).is_ok();
        // SO_TXTIME, as quiche-apps' set_txtime_sockopt(): each GSO batch carries the
        // release time quiche's pacer computed (honoured by an fq/etf qdisc, if any).
        let want_txtime = parse_bool_env("PARAM_TXTIME", true);
        let txtime = gso
            && want_txtime
            && setsockopt(
                &std_sock,
                sockopt::TxTime,
                &libc::sock_txtime {
                    clockid: libc::CLOCK_MONOTONIC,
                    flags: 0,
                },
            )
            .is_ok();

        let sock = mio::net::UdpSocket::from_std(std_sock);
        let rb = socket2::SockRef::from(&sock)
            .recv_buffer_size()
            .unwrap_or(0);
        let sb = socket2::SockRef::from(&sock)
            .send_buffer_size()
            .unwrap_or(0);
        log!(
            "UDP socket {local}: gso={gso} (wanted {want_gso}) gro={gro} (wanted {want_gro}) txtime={txtime} rcvbuf={rb} sndbuf={sb}"
        );
        Socket {
            sock,
            local,
            gso,
            gro,
            txtime,
            mono_base: (Instant::now(), monotonic_ns()),
            cmsg_buf: nix::cmsg_space!(i32),
        }
    }

    /// Receives one datagram (with GRO: a batch of equal-sized segments). Returns the
    /// length, the peer, and the segment size (== length without GRO).
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, usize)> {
        if !self.gro {
            let (len, from) = self.sock.recv_from(buf)?;
            return Ok((len, from, len));
        }
        let fd = self.sock.as_raw_fd();
        let mut iov = [IoSliceMut::new(buf)];
        let msg = match recvmsg::<SockaddrStorage>(
            fd,
            &mut iov,
            Some(&mut self.cmsg_buf),
            MsgFlags::empty(),
        ) {
            Ok(m) => m,
            Err(e) => return Err(io::Error::from_raw_os_error(e as i32)),
        };
        let len = msg.bytes;
        let mut seg = len;
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                if let ControlMessageOwned::UdpGroSegments(s) = c {
                    if s > 0 {
                        seg = s as usize;
                    }
                }
            }
        }
        let from = msg
            .address
            .and_then(|a| {
                if let Some(v4) = a.as_sockaddr_in() {
                    Some(SocketAddr::V4((*v4).into()))
                } else {
                    a.as_sockaddr_in6().map(|v6| SocketAddr::V6((*v6).into()))
                }
            })
            .ok_or_else(|| io::Error::other("recvmsg: no peer address"))?;
        Ok((len, from, seg))
    }

    /// Sends `buf` (one or more packets of `seg` bytes, the last may be shorter) to
    /// `info.to`: with GSO in one sendmsg, else packet by packet (quiche-apps send_to()).
    pub fn send(&self, buf: &[u8], info: &quiche::SendInfo, seg: usize) -> io::Result<usize> {
        if self.gso && buf.len() > seg {
            return self.send_gso(buf, info, seg);
        }
        let mut off = 0;
        while off < buf.len() {
            let end = (off + seg).min(buf.len());
            match self.sock.send_to(&buf[off..end], info.to) {
                Ok(_) => off = end,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && off > 0 => return Ok(off),
                Err(e) => return Err(e),
            }
        }
        Ok(off)
    }

    fn send_gso(&self, buf: &[u8], info: &quiche::SendInfo, seg: usize) -> io::Result<usize> {
        let iov = [IoSlice::new(buf)];
        let seg16 = seg as u16;
        let dst = SockaddrStorage::from(info.to);
        let t = self.txtime_ns(info.at);
        let mut cmsgs = vec![ControlMessage::UdpGsoSegments(&seg16)];
        if self.txtime {
            cmsgs.push(ControlMessage::TxTime(&t));
        }
        sendmsg(
            self.sock.as_raw_fd(),
            &iov,
            &cmsgs,
            MsgFlags::empty(),
            Some(&dst),
        )
        .map_err(|e| io::Error::from_raw_os_error(e as i32))
    }

    fn txtime_ns(&self, at: Instant) -> u64 {
        let (base_i, base_ns) = self.mono_base;
        if at >= base_i {
            base_ns + (at - base_i).as_nanos() as u64
        } else {
            base_ns.saturating_sub((base_i - at).as_nanos() as u64)
        }
    }
}

/// Per-connection send state (quiche-apps' burst control).
pub struct SendState {
    pub max_send_burst: usize,
    pub loss_rate: f64,
}

impl Default for SendState {
    fn default() -> Self {
        SendState {
            max_send_burst: MAX_BUF_SIZE,
            loss_rate: 0.0,
        }
    }
}

/// Drains `conn` into the socket, batching packets into GSO super-datagrams as
/// quiche-apps does. Returns Ok(true) if more may be pending (poll again at once),
/// Err(WouldBlock) if the socket is full.
pub fn flush(
    conn: &mut quiche::Connection,
    st: &mut SendState,
    sock: &Socket,
    out: &mut [u8],
) -> io::Result<bool> {
    let mut more = false;
    let mut rounds = 0;
    loop {
        let max_dgram = conn.max_send_udp_payload_size();
        // Reduce max_send_burst by 25% if loss is increasing more than 0.1%.
        let stats = conn.stats();
        if stats.sent > 0 {
            let loss_rate = stats.lost as f64 / stats.sent as f64;
            if loss_rate > st.loss_rate + 0.001 {
                st.max_send_burst = (st.max_send_burst / 4 * 3).max(max_dgram * 10);
                st.loss_rate = loss_rate;
            }
        }
        let seg = max_dgram;
        let burst_limit = if sock.gso { st.max_send_burst } else { seg };
        let max_send_burst = (conn.send_quantum().min(burst_limit) / seg * seg).max(seg);
        let max_send_burst = max_send_burst.min(out.len() / seg * seg).min(64 * seg);

        let mut total = 0;
        let mut dst: Option<quiche::SendInfo> = None;
        let mut short = false;
        while total < max_send_burst {
            match conn.send(&mut out[total..max_send_burst]) {
                Ok((n, info)) => {
                    if let Some(d) = &dst {
                        if d.to != info.to {
                            // never happens without migration; be safe
                            short = true;
                            break;
                        }
                    }
                    total += n;
                    dst.get_or_insert(info);
                    if n < seg {
                        short = true;
                        break;
                    }
                }
                Err(quiche::Error::Done) => break,
                Err(e) => {
                    log!("{} send failed: {e:?}", conn.trace_id());
                    let _ = conn.close(false, 0x1, b"fail");
                    break;
                }
            }
        }
        let Some(info) = dst else {
            return Ok(more);
        };
        if total == 0 {
            return Ok(more);
        }
        sock.send(&out[..total], &info, seg)?;
        rounds += 1;
        if total >= max_send_burst || short {
            // there may be more to send
            if rounds >= 16 {
                // let the event loop read ACKs in between
                more = true;
                return Ok(more);
            }
            continue;
        }
        return Ok(more);
    }
}
