//! quinn interop server: serves the files in $WWW on $IP:$PORT over HTTP/3 (h3 + h3-quinn) or
//! hq-interop (HTTP/0.9 on raw bidirectional streams), following quinn's examples/server.rs and
//! h3's examples/server.rs, until SIGTERM. An HTTP/3 PUT writes its body to $UPLOADS/<name>.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use h3::server::RequestResolver;
use http::StatusCode;
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
    time::MissedTickBehavior,
};

use qir_harness::{upload_file, www_file, Workload, EXIT_UNSUPPORTED};
use qir_quinn::{self as common, ChunkReader, ChunkWriter};

type H3Resolver = RequestResolver<h3_quinn::Connection, Bytes>;
type H3Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// How long a PUT body may pause before its buffered part (up to IO_CHUNK) goes to the file. A
/// client stopped at a duration may vanish without a CONNECTION_CLOSE or RESET_STREAM (killed by
/// SIGINT, or a close lost), and the runner hashes the file soon after the client ended: it
/// then holds all that arrived.
const IDLE_FLUSH: Duration = Duration::from_millis(10);

/// Where requests read and write: GET from WWW, PUT to UPLOADS (None: not set, PUT refused).
struct Dirs {
    www: PathBuf,
    uploads: Option<PathBuf>,
}

fn main() {
    common::init_logging();
    if let Err(e) = run() {
        eprintln!("quinn server: error: {e:#}");
        std::process::exit(1);
    }
}

#[tokio::main]
async fn run() -> Result<()> {
    let alpn = common::alpn()?;
    if let Some(why) = Workload::from_env()?.unsupported_over(&alpn) {
        eprintln!("quinn server: {why}");
        std::process::exit(EXIT_UNSUPPORTED);
    }
    let addr = qir_harness::listen_addr()?;
    let www = PathBuf::from(common::env_required("WWW")?);
    let certs = PathBuf::from(common::env_required("CERTS")?);
    let uploads = qir_harness::env_opt("UPLOADS").map(PathBuf::from);

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
    let put_to = uploads
        .as_ref()
        .map_or("nowhere (UPLOADS not set)".into(), |p| {
            p.display().to_string()
        });
    eprintln!(
        "quinn server: serving {} on {addr} ({alpn}, {cipher_desc}, congestion control {}), \
         PUT to {put_to}",
        www.display(),
        common::congestion_choice(),
    );
    let dirs = Arc::new(Dirs { www, uploads });

    let alpn: Arc<str> = Arc::from(alpn);
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    loop {
        tokio::select! {
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { break };
                match accept(incoming, &base) {
                    Ok(connecting) => {
                        let (dirs, alpn) = (dirs.clone(), alpn.clone());
                        tokio::spawn(async move {
                            if let Err(e) = handle_connection(connecting, dirs, alpn).await {
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
    dirs: Arc<Dirs>,
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
                    let dirs = dirs.clone();
                    tokio::spawn(async move {
                        if let Err(e) = serve_hq(&dirs.www, send, recv).await {
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
                    let dirs = dirs.clone();
                    tokio::spawn(async move {
                        if let Err(e) = serve_h3(resolver, &dirs).await {
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

/// hq-interop: "GET /path\r\n" + FIN in, raw file bytes + FIN out.
async fn serve_hq(
    www: &Path,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) -> Result<()> {
    let req = recv.read_to_end(8192).await.context("reading request")?;
    let path = qir_harness::hq_request_path(&req).map_err(|e| anyhow!(e))?;
    let start = Instant::now();
    let file = match www_file(www, path) {
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
    log_done("hq GET", path, sent, start);
    Ok(())
}

/// h3: GET from WWW, PUT to UPLOADS, anything else 405.
async fn serve_h3(resolver: H3Resolver, dirs: &Dirs) -> Result<()> {
    let (req, mut stream) = resolver.resolve_request().await?;
    match *req.method() {
        http::Method::GET => serve_get(&req, stream, &dirs.www).await,
        http::Method::PUT => receive_put(&req, stream, dirs.uploads.as_deref()).await,
        _ => {
            respond(&mut stream, StatusCode::METHOD_NOT_ALLOWED).await?;
            bail!("{} {}: method not allowed", req.method(), req.uri().path());
        }
    }
}

/// GET: 200 with content-length and the file, or 404.
async fn serve_get(req: &http::Request<()>, mut stream: H3Stream, www: &Path) -> Result<()> {
    let path = req.uri().path();
    let start = Instant::now();
    let Some(mut file) = www_file(www, path).and_then(|p| ChunkReader::open(&p).ok()) else {
        respond(&mut stream, StatusCode::NOT_FOUND).await?;
        bail!("GET {path}: not found");
    };
    let resp = http::Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_LENGTH, file.len)
        .body(())?;
    stream.send_response(resp).await?;
    let mut sent = 0u64;
    while let Some(chunk) = file.next().await? {
        sent += chunk.len() as u64;
        stream.send_data(chunk).await.context("sending")?;
    }
    stream.finish().await?;
    log_done("h3 GET", path, sent, start);
    Ok(())
}

/// PUT: the body goes to $UPLOADS/<name> as it arrives (in IO_CHUNK pieces, and what is
/// buffered when it pauses); once the file is closed, 200 with an empty body. A body cut short
/// leaves what arrived. 403 for a name that is not a plain file name, or without UPLOADS.
async fn receive_put(
    req: &http::Request<()>,
    mut stream: H3Stream,
    uploads: Option<&Path>,
) -> Result<()> {
    let path = req.uri().path();
    let Some(target) = uploads.and_then(|dir| upload_file(dir, path)) else {
        respond(&mut stream, StatusCode::FORBIDDEN).await?;
        bail!(
            "PUT {path}: not a file name below UPLOADS (UPLOADS set: {})",
            uploads.is_some()
        );
    };
    let expected: Option<u64> = req
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let start = Instant::now();
    let mut out = ChunkWriter::create(&target, common::IO_CHUNK)?;
    let body = receive_body(&mut stream, &mut out).await;
    // closes the file, also when the body was cut short: what arrived stays
    let n = out.finish().await?;
    body.with_context(|| format!("PUT {path}: cut short after {n} bytes"))?;
    if let Some(e) = expected.filter(|e| *e != n) {
        respond(&mut stream, StatusCode::BAD_REQUEST).await?;
        bail!("PUT {path}: got {n} bytes, content-length {e}");
    }
    respond(&mut stream, StatusCode::OK).await?;
    log_done("h3 PUT", path, n, start);
    Ok(())
}

/// Receives the body into `out`; a body that pauses for IDLE_FLUSH has its buffered part
/// written out (see there).
async fn receive_body(stream: &mut H3Stream, out: &mut ChunkWriter) -> Result<()> {
    let mut tick = tokio::time::interval(IDLE_FLUSH);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut arrived = false; // since the last tick
    loop {
        tokio::select! {
            biased;
            data = stream.recv_data() => match data? {
                Some(data) => {
                    out.push(data).await?;
                    arrived = true;
                }
                None => return Ok(()),
            },
            _ = tick.tick() => {
                if !arrived {
                    out.flush().await?;
                }
                arrived = false;
            }
        }
    }
}

/// A response without body.
async fn respond(stream: &mut H3Stream, status: StatusCode) -> Result<()> {
    let resp = http::Response::builder()
        .status(status)
        .header(http::header::CONTENT_LENGTH, 0)
        .body(())?;
    stream.send_response(resp).await?;
    stream.finish().await?;
    Ok(())
}

fn log_done(what: &str, path: &str, bytes: u64, start: Instant) {
    let d = start.elapsed();
    eprintln!(
        "quinn server: {what} {path}: {bytes} bytes in {:.3} s ({:.1} Mbit/s)",
        d.as_secs_f64(),
        bytes as f64 * 8.0 / d.as_secs_f64().max(1e-9) / 1e6
    );
}
