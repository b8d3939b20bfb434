//! Shared parts of the quinn interop server and client: reading the runner's environment,
//! the rustls crypto provider (ring, optionally restricted to one cipher suite), the quinn
//! transport configuration (congestion control, flow-control windows, GSO, qlog), the UDP socket
//! (SO_RCVBUF/SO_SNDBUF, GRO), the `QIR_NEGOTIATED` line and the file I/O of the bodies
//! ([`ChunkReader`], [`ChunkWriter`]). The contract code all Rust harnesses share (environment,
//! windows, the JSON of that line, the workload) is in ../_shared/rust/qir-harness.

use std::{
    fs,
    io::{self, BufWriter, Write},
    net::SocketAddr,
    os::{fd::AsRawFd, unix::fs::FileExt},
    path::{Path, PathBuf},
    sync::Arc,
    time::Instant,
};

use anyhow::{bail, Context, Result};
use bytes::{Buf, Bytes};
use qir_harness::{cipher, Negotiated, ALPN_H3, ALPN_HQ_INTEROP, CONNECTION_WINDOW, STREAM_WINDOW};
use quinn::{
    congestion::{self, Bbr, Cubic, NewReno},
    crypto::rustls::HandshakeData,
    rustls::{
        self,
        crypto::{ring, CryptoProvider},
    },
    TransportConfig, VarInt,
};
use socket2::{Domain, Protocol, Socket, Type};

pub use qir_harness::{env_or_empty as env, env_required, hex};

/// Unacknowledged data the sender may have in flight (quinn's own send window), 32 MiB.
const SEND_WINDOW: u64 = 32 << 20;

/// Size of the chunks files are read from or written to disk in.
pub const IO_CHUNK: usize = 1 << 20;

/// Concurrent bidirectional streams a peer may open: a bidirectional workload of
/// meta.yml's 64 streams per direction needs 128 (quinn's default is 100).
const MAX_BIDI_STREAMS: u32 = 256;

/// Sets up `tracing` output of quinn/h3 warnings and errors on stderr (RUST_LOG is not read, to
/// keep the build small: no per-packet logging).
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_writer(io::stderr)
        .with_max_level(tracing::Level::WARN)
        .init();
}

/// The application protocol the runner chose (ALPN; default h3).
pub fn alpn() -> Result<String> {
    let a = env("ALPN");
    match a.as_str() {
        "" => Ok(ALPN_H3.into()),
        ALPN_H3 | ALPN_HQ_INTEROP => Ok(a),
        _ => bail!("unsupported ALPN {a:?}"),
    }
}

/// `GSO`/`GRO`: "0" switches the offload off, anything else (default "1") leaves it on.
fn flag_on(name: &str) -> bool {
    !matches!(env(name).trim(), "0" | "false" | "off" | "no")
}

/// The ring crypto provider; restricted to the single TLS 1.3 suite named in `CIPHER` if set.
/// Returns the provider and a description for the log.
pub fn crypto_provider() -> Result<(Arc<CryptoProvider>, String)> {
    let mut provider = ring::default_provider();
    let asked = env("CIPHER");
    let asked = asked.trim();
    if asked.is_empty() {
        return Ok((Arc::new(provider), "ring default cipher suites".into()));
    }
    use ring::cipher_suite as cs;
    let suite = match asked {
        cipher::AES_128_GCM_SHA256 => cs::TLS13_AES_128_GCM_SHA256,
        cipher::AES_256_GCM_SHA384 => cs::TLS13_AES_256_GCM_SHA384,
        cipher::CHACHA20_POLY1305_SHA256 => cs::TLS13_CHACHA20_POLY1305_SHA256,
        other => bail!("unsupported CIPHER {other:?}"),
    };
    provider.cipher_suites = vec![suite];
    Ok((Arc::new(provider), format!("only {asked}")))
}

/// QUIC Initial packets always use TLS_AES_128_GCM_SHA256 (RFC 9001 5.2), also when the
/// provider's suite list does not contain it (CIPHER restricts only the negotiated suite).
pub fn initial_suite() -> rustls::quic::Suite {
    ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|s| s.quic_suite())
        .expect("ring has a QUIC-capable TLS_AES_128_GCM_SHA256")
}

/// Installs rustls' `KeyLogFile` (which writes to $SSLKEYLOGFILE) if SSLKEYLOGFILE is set.
pub fn key_log() -> Option<Arc<dyn rustls::KeyLog>> {
    if env("SSLKEYLOGFILE").is_empty() {
        None
    } else {
        Some(Arc::new(rustls::KeyLogFile::new()))
    }
}

/// Which congestion controller to use: `CONGESTION_CONTROL` (cubic, reno or bbr; default and
/// fallback for anything else: cubic, the first of meta.yml's supports.congestion_control).
pub fn congestion_choice() -> &'static str {
    static CHOICE: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    CHOICE.get_or_init(|| match env("CONGESTION_CONTROL").trim() {
        "reno" | "newreno" => "reno",
        "bbr" => "bbr",
        "" | "cubic" => "cubic",
        other => {
            eprintln!("quinn: CONGESTION_CONTROL {other:?} not supported, using cubic");
            "cubic"
        }
    })
}

/// The transport configuration for one connection. `qlog` is the file to write a qlog trace to.
pub fn transport_config(qlog: Option<&Path>, title: &str) -> Result<TransportConfig> {
    let mut t = TransportConfig::default();
    let (stream_window, connection_window) = match flow_control_window()? {
        Some(window) => (window, window),
        None => (STREAM_WINDOW.into(), CONNECTION_WINDOW.into()),
    };
    t.stream_receive_window(stream_window)
        .receive_window(connection_window)
        .send_window(SEND_WINDOW)
        .max_concurrent_bidi_streams(MAX_BIDI_STREAMS.into());
    match congestion_choice() {
        "reno" => t.congestion_controller_factory(Arc::new(congestion::NewRenoConfig::default())),
        "bbr" => t.congestion_controller_factory(Arc::new(congestion::BbrConfig::default())),
        _ => t.congestion_controller_factory(Arc::new(congestion::CubicConfig::default())),
    };
    // GSO: quinn-udp uses UDP_SEGMENT when the kernel supports it; this switches it off per
    // connection (quinn then hands one datagram per transmit to sendmmsg).
    t.enable_segmentation_offload(flag_on("GSO"));
    if env("ROLE") == "server" {
        t.ack_frequency_config(ack_frequency_request()?);
    }
    if let Some(path) = qlog {
        let file = fs::File::create(path)
            .with_context(|| format!("creating qlog file {}", path.display()))?;
        let mut q = quinn::QlogConfig::default();
        q.writer(Box::new(BufWriter::with_capacity(1 << 20, file)))
            .title(Some(title.to_string()))
            .start_time(Instant::now());
        t.qlog_stream(q.into_stream());
    }
    Ok(t)
}

/// The server's ACK_FREQUENCY request (draft-ietf-quic-ack-frequency) of ACK_RATIO=n: the
/// client ACKs every n-th ack-eliciting packet. quinn's threshold counts the packets a client
/// may leave unacknowledged, so 1:n is threshold n-1; the max_ack_delay it asks for is the
/// client's own (25 ms by default) capped at the RTT (quinn's rule). Only a client that
/// advertises min_ack_delay (quinn does) receives the request; others keep their own policy
/// (the runner marks such pairs unsupported unless the client sets the ratio itself).
fn ack_frequency_request() -> Result<Option<quinn::AckFrequencyConfig>> {
    let Some(n) = env_positive("ACK_RATIO")? else {
        return Ok(None);
    };
    let mut request = quinn::AckFrequencyConfig::default();
    request.ack_eliciting_threshold(VarInt::from_u64(n - 1)?);
    Ok(Some(request))
}

/// The whole number above 0 in the environment variable `name`; None where it is unset.
fn env_positive(name: &str) -> Result<Option<u64>> {
    let value = env(name);
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    let n: u64 = value.parse().with_context(|| format!("{name}={value:?}"))?;
    if n == 0 {
        bail!("{name} must be >= 1");
    }
    Ok(Some(n))
}

/// The client's fixed flow-control window (`FLOW_CONTROL_WINDOW`, bytes) for its streams and
/// the connection; None for the server and where it is unset. quinn keeps its windows fixed:
/// the credit is the bytes read plus the window (quinn-proto 0.11.19
/// src/connection/streams/recv.rs `max_stream_data`, state.rs `add_read_credits`), with no
/// auto-tuning.
fn flow_control_window() -> Result<Option<VarInt>> {
    if env("ROLE") == "server" {
        return Ok(None);
    }
    let Some(bytes) = env_positive("FLOW_CONTROL_WINDOW")? else {
        return Ok(None);
    };
    eprintln!("quinn: flow-control window fixed at {bytes} bytes (connection and streams)");
    Ok(Some(VarInt::from_u64(bytes)?))
}

/// The qlog file for a connection named `name` (e.g. "<odcid>_server"), if QLOGDIR is set.
pub fn qlog_path(name: &str) -> Result<Option<PathBuf>> {
    let dir = env("QLOGDIR");
    if dir.is_empty() {
        return Ok(None);
    }
    fs::create_dir_all(&dir).with_context(|| format!("creating QLOGDIR {dir}"))?;
    Ok(Some(Path::new(&dir).join(format!("{name}.sqlog"))))
}

/// Creates the UDP socket bound to `addr` with socket2, applying SOCKET_RCVBUF / SOCKET_SNDBUF,
/// and returns it together with a duplicate of its descriptor (for `after_endpoint`).
pub fn udp_socket(addr: SocketAddr, who: &str) -> Result<(std::net::UdpSocket, Socket)> {
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))
        .context("creating UDP socket")?;
    if addr.is_ipv6() {
        // accept IPv4-mapped peers too when bound to [::]
        let _ = sock.set_only_v6(false);
    }
    for (var, rcv) in [("SOCKET_RCVBUF", true), ("SOCKET_SNDBUF", false)] {
        let Some(bytes) = qir_harness::env_bytes(var)? else {
            continue;
        };
        if rcv {
            sock.set_recv_buffer_size(bytes)
        } else {
            sock.set_send_buffer_size(bytes)
        }
        .with_context(|| format!("setting {var}={bytes}"))?;
    }
    sock.bind(&addr.into())
        .with_context(|| format!("binding UDP {addr}"))?;
    eprintln!(
        "quinn {who}: UDP socket {addr}: SO_RCVBUF={} SO_SNDBUF={} (kernel values)",
        sock.recv_buffer_size().unwrap_or(0),
        sock.send_buffer_size().unwrap_or(0)
    );
    let dup = sock.try_clone().context("duplicating UDP socket")?;
    Ok((sock.into(), dup))
}

/// Called once the quinn endpoint owns the socket. quinn-udp switches UDP_GRO on while wrapping
/// the socket (UdpSocketState::new); with GRO=0 switch it off again on the same socket (through
/// the duplicated descriptor) so the kernel delivers one datagram per receive. quinn-udp copes
/// with both (it reads the segment size from the UDP_GRO control message when present).
pub fn after_endpoint(dup: Socket, who: &str) -> Result<()> {
    let fd = dup.as_raw_fd();
    if !flag_on("GRO") {
        let off: libc::c_int = 0;
        // SAFETY: valid fd, option value points to a c_int of the given length.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_UDP,
                libc::UDP_GRO,
                &off as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            bail!("switching UDP_GRO off: {}", io::Error::last_os_error());
        }
    }
    let mut val: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: valid fd, val/len describe a c_int buffer.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_UDP,
            libc::UDP_GRO,
            &mut val as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    let gro = if rc == 0 {
        val.to_string()
    } else {
        "unknown".into()
    };
    let gso = if flag_on("GSO") {
        "on (if the kernel supports UDP_SEGMENT)"
    } else {
        "off"
    };
    eprintln!("quinn {who}: UDP_GRO={gro} GSO {gso}");
    Ok(())
}

/// The ALPN of an established connection, as rustls reports it to quinn.
pub fn negotiated_alpn(conn: &quinn::Connection) -> Option<String> {
    let hd = conn.handshake_data()?.downcast::<HandshakeData>().ok()?;
    hd.protocol
        .map(|p| String::from_utf8_lossy(&p).into_owned())
}

/// The congestion controller the connection actually runs, from quinn's own state.
pub fn negotiated_cc(conn: &quinn::Connection) -> Option<&'static str> {
    let any = conn.congestion_state().into_any();
    if any.is::<Cubic>() {
        Some("cubic")
    } else if any.is::<NewReno>() {
        Some("reno")
    } else if any.is::<Bbr>() {
        Some("bbr")
    } else {
        None
    }
}

/// Prints the `QIR_NEGOTIATED {json}` line. The cipher suite is left out: quinn's rustls session
/// keeps the rustls connection private and its `HandshakeData` holds only ALPN and server name.
pub fn print_negotiated(conn: &quinn::Connection) {
    Negotiated::new()
        .alpn(negotiated_alpn(conn).as_deref())
        .congestion_control(negotiated_cc(conn))
        .print();
}

/// Reads a file in IO_CHUNK pieces with pread on the blocking pool, one chunk ahead of the
/// consumer, so disk reads overlap with sending (a served file, an uploaded one).
pub struct ChunkReader {
    file: Arc<fs::File>,
    offset: u64,
    /// The file's size.
    pub len: u64,
    next: Option<tokio::task::JoinHandle<io::Result<Bytes>>>,
}

impl ChunkReader {
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = fs::File::open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        let mut r = ChunkReader {
            file: Arc::new(file),
            offset: 0,
            len: meta.len(),
            next: None,
        };
        r.next = r.spawn();
        Ok(r)
    }

    fn spawn(&mut self) -> Option<tokio::task::JoinHandle<io::Result<Bytes>>> {
        if self.offset >= self.len {
            return None;
        }
        let n = (self.len - self.offset).min(IO_CHUNK as u64) as usize;
        let (file, off) = (self.file.clone(), self.offset);
        self.offset += n as u64;
        Some(tokio::task::spawn_blocking(move || {
            let mut buf = vec![0u8; n];
            file.read_exact_at(&mut buf, off)?;
            Ok(Bytes::from(buf))
        }))
    }

    /// The next chunk, or None at the end of the file.
    pub async fn next(&mut self) -> Result<Option<Bytes>> {
        let Some(h) = self.next.take() else {
            return Ok(None);
        };
        let chunk = h.await.context("reader task")?.context("reading file")?;
        self.next = self.spawn();
        Ok(Some(chunk))
    }
}

/// Writes a received body (a download, an upload) to disk on the blocking pool: the data are
/// gathered into buffers of `chunk` bytes, one buffer is written while the next fills.
pub struct ChunkWriter {
    file: Option<fs::File>,
    pending: Option<tokio::task::JoinHandle<io::Result<fs::File>>>,
    buf: Vec<u8>,
    chunk: usize,
    /// bytes handed to the writer task
    written: u64,
    path: PathBuf,
}

impl ChunkWriter {
    /// Creates (or truncates) `path`.
    pub fn create(path: &Path, chunk: usize) -> Result<Self> {
        let file =
            fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        Ok(ChunkWriter {
            file: Some(file),
            pending: None,
            buf: Vec::with_capacity(chunk),
            chunk,
            written: 0,
            path: path.to_path_buf(),
        })
    }

    /// The bytes received so far (written or buffered).
    pub fn received(&self) -> u64 {
        self.written + self.buf.len() as u64
    }

    /// Appends `data`; a full buffer goes to the disk.
    pub async fn push(&mut self, mut data: impl Buf) -> Result<()> {
        while data.has_remaining() {
            let c = data.chunk();
            let n = c.len();
            self.buf.extend_from_slice(c);
            data.advance(n);
        }
        if self.buf.len() >= self.chunk {
            let full = std::mem::replace(&mut self.buf, Vec::with_capacity(self.chunk));
            self.write(full).await?;
        }
        Ok(())
    }

    /// Hands what is buffered to the disk now (it stays in order behind the write before).
    pub async fn flush(&mut self) -> Result<()> {
        let buffered = std::mem::replace(&mut self.buf, Vec::with_capacity(self.chunk));
        self.write(buffered).await
    }

    async fn wait(&mut self) -> Result<()> {
        if let Some(h) = self.pending.take() {
            let f = h
                .await
                .context("writer task")?
                .with_context(|| format!("writing {}", self.path.display()))?;
            self.file = Some(f);
        }
        Ok(())
    }

    async fn write(&mut self, buf: Vec<u8>) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        self.wait().await?;
        let mut f = self.file.take().expect("file present after wait");
        self.written += buf.len() as u64;
        self.pending = Some(tokio::task::spawn_blocking(move || {
            f.write_all(&buf)?;
            Ok(f)
        }));
        Ok(())
    }

    /// Writes what is buffered and closes the file; returns the bytes written.
    pub async fn finish(mut self) -> Result<u64> {
        let rest = std::mem::take(&mut self.buf);
        self.write(rest).await?;
        self.wait().await?;
        Ok(self.written)
    }
}
