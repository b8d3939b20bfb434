//! quinn interop server: serves the files in $WWW on $IP:$PORT over HTTP/3 (h3 + h3-quinn) or
//! hq-interop (HTTP/0.9 on raw bidirectional streams), following quinn's examples/server.rs and
//! h3's examples/server.rs, until SIGTERM.

use std::{
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use h3::server::RequestResolver;
use quinn::{
    crypto::rustls::QuicServerConfig,
    rustls::{
        self,
        pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    },
    EndpointConfig, Incoming, ServerConfig, TokioRuntime,
};
use tokio::{
    signal::unix::{signal, SignalKind},
    task::JoinHandle,
};

use qir_harness::www_file;
use qir_quinn as common;

fn main() {
    common::init_logging();
    if let Err(e) = run() {
        eprintln!("quinn server: error: {e:#}");
        std::process::exit(1);
    }
}

#[tokio::main]
async fn run() -> Result<()> {
    let addr = qir_harness::listen_addr()?;
    let www = PathBuf::from(common::env_required("WWW")?);
    let certs = PathBuf::from(common::env_required("CERTS")?);
    let alpn = common::alpn()?;

    let cert_chain = CertificateDer::pem_file_iter(certs.join("cert.pem"))
        .context("reading cert.pem")?
        .collect::<Result<Vec<_>, _>>()
        .context("parsing cert.pem")?;
    let key = PrivateKeyDer::from_pem_file(certs.join("priv.key")).context("reading priv.key")?;

    let (provider, cipher_desc) = common::crypto_provider()?;
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(cert_chain, key)?;
    tls.alpn_protocols = vec![alpn.as_bytes().to_vec()];
    if let Some(kl) = common::key_log() {
        tls.key_log = kl;
    }
    let quic_tls = QuicServerConfig::with_initial(Arc::new(tls), common::initial_suite())?;
    let mut base = ServerConfig::with_crypto(Arc::new(quic_tls));
    base.transport = Arc::new(common::transport_config(None, "")?);

    let (socket, dup) = common::udp_socket(addr, "server")?;
    let endpoint = quinn::Endpoint::new(
        EndpointConfig::default(),
        Some(base.clone()),
        socket,
        Arc::new(TokioRuntime),
    )?;
    common::after_endpoint(dup, "server")?;
    eprintln!(
        "quinn server: serving {} on {addr} ({alpn}, {cipher_desc}, congestion control {})",
        www.display(),
        common::congestion_choice()
    );

    let www: Arc<Path> = Arc::from(www);
    let alpn: Arc<str> = Arc::from(alpn);
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    loop {
        tokio::select! {
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { break };
                match accept(incoming, &base) {
                    Ok(connecting) => {
                        let (www, alpn) = (www.clone(), alpn.clone());
                        tokio::spawn(async move {
                            if let Err(e) = handle_connection(connecting, www, alpn).await {
                                eprintln!("quinn server: connection failed: {e:#}");
                            }
                        });
                    }
                    Err(e) => eprintln!("quinn server: accepting connection failed: {e:#}"),
                }
            }
            _ = sigterm.recv() => { eprintln!("quinn server: SIGTERM, closing"); break; }
            _ = sigint.recv() => { eprintln!("quinn server: SIGINT, closing"); break; }
        }
    }
    // Close open connections and let them drain, so that qlog files are complete.
    endpoint.close(0u32.into(), b"server shutting down");
    let _ = tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await;
    eprintln!("quinn server: stopped");
    Ok(())
}

/// Accepts an incoming connection; with QLOGDIR set, with a transport configuration of its own
/// that writes the qlog trace to $QLOGDIR/<odcid>_server.sqlog.
fn accept(incoming: Incoming, base: &ServerConfig) -> Result<quinn::Connecting> {
    let odcid = common::hex(&incoming.orig_dst_cid());
    match common::qlog_path(&format!("{odcid}_server"))? {
        None => Ok(incoming.accept()?),
        Some(path) => {
            let mut cfg = base.clone();
            cfg.transport = Arc::new(common::transport_config(
                Some(&path),
                &format!("quinn server {odcid}"),
            )?);
            Ok(incoming.accept_with(Arc::new(cfg))?)
        }
    }
}

async fn handle_connection(
    connecting: quinn::Connecting,
    www: Arc<Path>,
    alpn: Arc<str>,
) -> Result<()> {
    let conn = connecting.await.context("handshake")?;
    common::print_negotiated(&conn);
    let remote = conn.remote_address();
    eprintln!("quinn server: connection from {remote} established");
    let negotiated = common::negotiated_alpn(&conn).unwrap_or_else(|| alpn.to_string());
    if negotiated == "hq-interop" {
        loop {
            match conn.accept_bi().await {
                Ok((send, recv)) => {
                    let www = www.clone();
                    tokio::spawn(async move {
                        if let Err(e) = serve_hq(www, send, recv).await {
                            eprintln!("quinn server: hq request failed: {e:#}");
                        }
                    });
                }
                Err(quinn::ConnectionError::ApplicationClosed(_))
                | Err(quinn::ConnectionError::LocallyClosed) => break,
                Err(e) => return Err(e.into()),
            }
        }
    } else {
        let mut h3_conn = h3::server::Connection::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .context("h3 connection setup")?;
        loop {
            match h3_conn.accept().await {
                Ok(Some(resolver)) => {
                    let www = www.clone();
                    tokio::spawn(async move {
                        if let Err(e) = serve_h3(resolver, www).await {
                            eprintln!("quinn server: h3 request failed: {e:#}");
                        }
                    });
                }
                Ok(None) => break,
                Err(e) => {
                    if !e.is_h3_no_error() {
                        eprintln!("quinn server: h3 connection from {remote}: {e}");
                    }
                    break;
                }
            }
        }
    }
    eprintln!("quinn server: connection from {remote} closed");
    Ok(())
}

/// Reads a file in IO_CHUNK pieces with pread on the blocking pool, one chunk ahead of the
/// consumer, so disk reads overlap with sending.
struct ChunkReader {
    file: Arc<std::fs::File>,
    offset: u64,
    len: u64,
    next: Option<JoinHandle<std::io::Result<Bytes>>>,
}

impl ChunkReader {
    fn open(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::File::open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(std::io::Error::other("not a regular file"));
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

    fn spawn(&mut self) -> Option<JoinHandle<std::io::Result<Bytes>>> {
        if self.offset >= self.len {
            return None;
        }
        let n = (self.len - self.offset).min(common::IO_CHUNK as u64) as usize;
        let (file, off) = (self.file.clone(), self.offset);
        self.offset += n as u64;
        Some(tokio::task::spawn_blocking(move || {
            let mut buf = vec![0u8; n];
            file.read_exact_at(&mut buf, off)?;
            Ok(Bytes::from(buf))
        }))
    }

    /// The next chunk, or None at the end of the file.
    async fn next(&mut self) -> Result<Option<Bytes>> {
        let Some(h) = self.next.take() else {
            return Ok(None);
        };
        let chunk = h.await.context("reader task")?.context("reading file")?;
        self.next = self.spawn();
        Ok(Some(chunk))
    }
}

/// hq-interop: "GET /path\r\n" + FIN in, raw file bytes + FIN out.
async fn serve_hq(
    www: Arc<Path>,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) -> Result<()> {
    let req = recv.read_to_end(8192).await.context("reading request")?;
    let path = qir_harness::hq_request_path(&req).map_err(|e| anyhow!(e))?;
    let start = Instant::now();
    let file = match www_file(&www, path) {
        Some(p) => ChunkReader::open(&p).with_context(|| format!("opening {}", p.display())),
        None => Err(anyhow!("bad path {path:?}")),
    };
    let mut file = match file {
        Ok(f) => f,
        Err(e) => {
            // HTTP/0.9 has no status: reset the stream so the client sees a failure.
            let _ = send.reset(1u32.into());
            return Err(e);
        }
    };
    let mut sent = 0u64;
    while let Some(chunk) = file.next().await? {
        sent += chunk.len() as u64;
        send.write_chunk(chunk).await.context("sending")?;
    }
    send.finish().context("finishing stream")?;
    // Keep the stream until the peer has it all (or the connection ends), for an honest log line.
    let _ = send.stopped().await;
    log_done("hq", path, sent, start);
    Ok(())
}

/// h3: GET request, 200 with content-length and the file, or 404.
async fn serve_h3<C>(resolver: RequestResolver<C, Bytes>, www: Arc<Path>) -> Result<()>
where
    C: h3::quic::Connection<Bytes>,
{
    let (req, mut stream) = resolver.resolve_request().await?;
    let path = req.uri().path().to_string();
    let start = Instant::now();
    let file = match www_file(&www, &path) {
        Some(p) if req.method() == http::Method::GET => ChunkReader::open(&p).ok(),
        _ => None,
    };
    let Some(mut file) = file else {
        let resp = http::Response::builder()
            .status(http::StatusCode::NOT_FOUND)
            .body(())?;
        stream.send_response(resp).await?;
        stream.finish().await?;
        bail!("{} {path}: not found", req.method());
    };
    let resp = http::Response::builder()
        .status(http::StatusCode::OK)
        .header(http::header::CONTENT_LENGTH, file.len)
        .body(())?;
    stream.send_response(resp).await?;
    let mut sent = 0u64;
    while let Some(chunk) = file.next().await? {
        sent += chunk.len() as u64;
        stream.send_data(chunk).await.context("sending")?;
    }
    stream.finish().await?;
    log_done("h3", &path, sent, start);
    Ok(())
}

fn log_done(proto: &str, path: &str, bytes: u64, start: Instant) {
    let d = start.elapsed();
    eprintln!(
        "quinn server: {proto} GET {path}: {bytes} bytes in {:.3} s ({:.1} Mbit/s)",
        d.as_secs_f64(),
        bytes as f64 * 8.0 / d.as_secs_f64().max(1e-9) / 1e6
    );
}
