//! quinn interop client: runs the workload (docs/implementations.md "Workloads") with HTTP/3
//! (h3 + h3-quinn) or hq-interop, following quinn's examples/client.rs and h3's
//! examples/client.rs: CONNECTIONS connections in parallel, each with an endpoint (UDP socket) of
//! its own, and on each its share of $REQUESTS (GET into $DOWNLOADS) and $UPLOAD_REQUESTS (PUT
//! of the files in $UPLOADS), all at once, one stream per request. Exits non-zero on any
//! failure, 127 for a workload it cannot run (uploads over hq-interop).

use std::{
    future::poll_fn,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use qir_harness::{ConnectionRequests, RequestUrl, Workload, EXIT_UNSUPPORTED};
use quinn::{
    crypto::rustls::QuicClientConfig,
    rustls::{
        self,
        client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
        client::WebPkiServerVerifier,
        crypto::CryptoProvider,
        pki_types::{pem::PemObject, CertificateDer, ServerName, UnixTime},
        DigitallySignedStruct, SignatureScheme,
    },
    ClientConfig, Endpoint, EndpointConfig, TokioRuntime,
};
use tokio::task::JoinSet;

use qir_quinn::{self as common, ChunkReader, ChunkWriter};

/// Size of the buffers handed to the disk writer.
const WRITE_CHUNK: usize = 4 << 20;
/// HTTP/3 closes with H3_NO_ERROR, hq-interop with 0.
const H3_NO_ERROR: u32 = 0x100;

type H3Sender = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

fn main() {
    common::init_logging();
    match run() {
        Ok(()) => {}
        Err(e) => {
            eprintln!("quinn client: error: {e:#}");
            std::process::exit(1);
        }
    }
}

/// One request: its URL and the file it writes (GET) or sends (PUT).
struct Transfer {
    uri: http::Uri,
    file: PathBuf,
}

impl Transfer {
    /// The transfer of `url` with the file of that name in `dir`.
    fn new(url: &RequestUrl, dir: &Path) -> Result<Self> {
        let raw = &url.url;
        let uri: http::Uri = raw
            .parse()
            .with_context(|| format!("parsing URL {raw:?}"))?;
        let name = url
            .file_name()
            .ok_or_else(|| anyhow!("URL {raw:?} has no file name"))?;
        Ok(Transfer {
            uri,
            file: dir.join(name),
        })
    }
}

/// What every connection shares: the TLS configuration, the protocol, the directories.
struct Shared {
    quic_tls: Arc<QuicClientConfig>,
    alpn: String,
    downloads: PathBuf,
    uploads: PathBuf,
}

#[tokio::main]
async fn run() -> Result<()> {
    let workload = Workload::from_env()?;
    let alpn = common::alpn()?;
    if let Some(why) = workload.unsupported_over(&alpn) {
        eprintln!("quinn client: {why}");
        std::process::exit(EXIT_UNSUPPORTED);
    }
    let (_, plan) = qir_harness::client_plan()?;
    let shared = Arc::new(Shared {
        quic_tls: client_tls(&alpn)?,
        alpn,
        downloads: dir_of(workload.kind.downloads(), "DOWNLOADS")?,
        uploads: dir_of(workload.kind.uploads(), "UPLOADS")?,
    });
    eprintln!(
        "quinn client: workload {} ({} stream(s) x {} connection(s)), {}, congestion control {}",
        workload.kind.name(),
        workload.streams,
        workload.connections,
        shared.alpn,
        common::congestion_choice()
    );
    // SIGINT (stopped at a duration) keeps its default action: the client ends at once, a
    // download keeps what was written, an upload stops sending. Closing the connections first
    // would not tell the server reliably: quinn-proto 0.11.19 sends no CONNECTION_CLOSE while
    // stream data wait for a full congestion window (quinn issue #2785), so the server writes
    // out a body that pauses instead (src/bin/server.rs IDLE_FLUSH).
    let mut connections = JoinSet::new();
    for conn in plan {
        let shared = shared.clone();
        connections.spawn(async move { run_connection(&shared, &conn).await });
    }
    join_all(&mut connections).await
}

/// The directory in `var` (required when the workload moves that direction).
fn dir_of(needed: bool, var: &str) -> Result<PathBuf> {
    Ok(if needed {
        PathBuf::from(common::env_required(var)?)
    } else {
        PathBuf::from(common::env(var))
    })
}

/// The TLS configuration of every connection: rustls with the chosen provider, the server
/// certificate checked against $CERTS/ca.pem, the one ALPN.
fn client_tls(alpn: &str) -> Result<Arc<QuicClientConfig>> {
    let certs = PathBuf::from(common::env_required("CERTS")?);
    let (provider, cipher_desc) = common::crypto_provider()?;
    let verifier = PinnedVerifier::new(&certs.join("ca.pem"), provider.clone())?;
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    tls.alpn_protocols = vec![alpn.as_bytes().to_vec()];
    if let Some(kl) = common::key_log() {
        tls.key_log = kl;
    }
    eprintln!("quinn client: {cipher_desc}");
    Ok(Arc::new(QuicClientConfig::with_initial(
        Arc::new(tls),
        common::initial_suite(),
    )?))
}

/// The first error of the tasks (the others are then aborted), or Ok when all succeeded.
async fn join_all(tasks: &mut JoinSet<Result<()>>) -> Result<()> {
    while let Some(joined) = tasks.join_next().await {
        if let Err(e) = joined.context("task").and_then(|r| r) {
            tasks.abort_all();
            return Err(e);
        }
    }
    Ok(())
}

/// One connection: connect, run its requests, close.
async fn run_connection(shared: &Shared, plan: &ConnectionRequests) -> Result<()> {
    let (endpoint, conn) = connect(shared, plan).await?;
    let hq = common::negotiated_alpn(&conn)
        .as_deref()
        .unwrap_or(&shared.alpn)
        == "hq-interop";
    let (result, code) = if hq {
        (transfer_hq(&conn, plan, shared).await, 0)
    } else {
        (transfer_h3(&conn, plan, shared).await, H3_NO_ERROR)
    };
    conn.close(code.into(), b"done");
    // Give the server a chance to receive the close and let qlog files be completed.
    let _ = tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await;
    result.with_context(|| format!("connection {}", plan.index))
}

/// A new endpoint (UDP socket) and the connection to the server of `plan`'s first request.
async fn connect(
    shared: &Shared,
    plan: &ConnectionRequests,
) -> Result<(Endpoint, quinn::Connection)> {
    let (host, port) = (plan.first().host.as_str(), plan.first().port);
    let remote: SocketAddr = tokio::net::lookup_host((host, port))
        .await?
        .next()
        .ok_or_else(|| anyhow!("{host} has no address"))?;
    let bind: SocketAddr = if remote.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()?;
    let (socket, dup) = common::udp_socket(bind, "client")?;
    let endpoint = Endpoint::new(
        EndpointConfig::default(),
        None,
        socket,
        Arc::new(TokioRuntime),
    )?;
    common::after_endpoint(dup, "client")?;

    let mut config = ClientConfig::new(shared.quic_tls.clone());
    // one qlog file per connection: the first keeps the name it always had
    let mut name = format!("client_{host}_{port}_{}", std::process::id());
    if plan.index > 0 {
        name = format!("{name}_{}", plan.index);
    }
    let qlog = common::qlog_path(&name)?;
    config.transport_config(Arc::new(common::transport_config(
        qlog.as_deref(),
        "quinn client",
    )?));

    let start = Instant::now();
    let conn = endpoint
        .connect_with(config, remote, host)?
        .await
        .with_context(|| format!("connecting to {remote}"))?;
    eprintln!(
        "quinn client: connection {} to {remote} after {:.1} ms",
        plan.index,
        start.elapsed().as_secs_f64() * 1e3
    );
    common::print_negotiated(&conn);
    Ok((endpoint, conn))
}

/// hq-interop: every GET of the connection on a stream of its own, all at once.
async fn transfer_hq(
    conn: &quinn::Connection,
    plan: &ConnectionRequests,
    shared: &Shared,
) -> Result<()> {
    let mut tasks = JoinSet::new();
    for url in &plan.downloads {
        let t = Transfer::new(url, &shared.downloads)?;
        tasks.spawn(get_hq(conn.clone(), t));
    }
    join_all(&mut tasks).await
}

async fn get_hq(conn: quinn::Connection, t: Transfer) -> Result<()> {
    let start = Instant::now();
    let (mut send, mut recv) = conn.open_bi().await.context("opening stream")?;
    send.write_all(format!("GET {}\r\n", t.uri.path()).as_bytes())
        .await?;
    send.finish()?;
    let mut out = ChunkWriter::create(&t.file, WRITE_CHUNK)?;
    while let Some(chunk) = recv
        .read_chunk(usize::MAX, true)
        .await
        .with_context(|| format!("GET {}: after {} bytes", t.uri, out.received()))?
    {
        out.push(chunk.bytes).await?;
    }
    let n = out.finish().await?;
    log_done("GET", &t.uri, n, start);
    Ok(())
}

/// HTTP/3: every GET and PUT of the connection on a stream of its own, all at once.
async fn transfer_h3(
    conn: &quinn::Connection,
    plan: &ConnectionRequests,
    shared: &Shared,
) -> Result<()> {
    let (mut driver, send_request) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
        .await
        .context("h3 connection setup")?;
    let drive = tokio::spawn(async move { poll_fn(|cx| driver.poll_close(cx)).await });
    let mut tasks = JoinSet::new();
    let result = async {
        for url in &plan.downloads {
            let t = Transfer::new(url, &shared.downloads)?;
            tasks.spawn(get_h3(send_request.clone(), t));
        }
        for url in &plan.uploads {
            let t = Transfer::new(url, &shared.uploads)?;
            tasks.spawn(put_h3(send_request.clone(), t));
        }
        join_all(&mut tasks).await
    }
    .await;
    tasks.abort_all();
    drop(send_request);
    drive.abort();
    result
}

async fn get_h3(mut send_request: H3Sender, t: Transfer) -> Result<()> {
    let start = Instant::now();
    let mut stream = send_request
        .send_request(http::Request::get(t.uri.clone()).body(())?)
        .await
        .with_context(|| format!("GET {}", t.uri))?;
    stream.finish().await?;
    let resp = stream
        .recv_response()
        .await
        .with_context(|| format!("GET {}", t.uri))?;
    if resp.status() != http::StatusCode::OK {
        bail!("GET {}: status {}", t.uri, resp.status());
    }
    let expected: Option<u64> = resp
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let mut out = ChunkWriter::create(&t.file, WRITE_CHUNK)?;
    while let Some(data) = stream
        .recv_data()
        .await
        .with_context(|| format!("GET {}: after {} bytes", t.uri, out.received()))?
    {
        out.push(data).await?;
    }
    let n = out.finish().await?;
    if let Some(e) = expected.filter(|e| *e != n) {
        bail!("GET {}: got {n} bytes, content-length {e}", t.uri);
    }
    log_done("GET", &t.uri, n, start);
    Ok(())
}

/// PUT of the file with its content-length, in IO_CHUNK pieces read one ahead; done when
/// the server's 200 came (it answers after it closed the file).
async fn put_h3(mut send_request: H3Sender, t: Transfer) -> Result<()> {
    let start = Instant::now();
    let mut file =
        ChunkReader::open(&t.file).with_context(|| format!("opening {}", t.file.display()))?;
    let req = http::Request::put(t.uri.clone())
        .header(http::header::CONTENT_LENGTH, file.len)
        .body(())?;
    let mut stream = send_request
        .send_request(req)
        .await
        .with_context(|| format!("PUT {}", t.uri))?;
    let mut sent = 0u64;
    while let Some(chunk) = file.next().await? {
        let n = chunk.len() as u64;
        stream
            .send_data(chunk)
            .await
            .with_context(|| format!("PUT {}: after {sent} bytes", t.uri))?;
        sent += n;
    }
    stream.finish().await?;
    let resp = stream
        .recv_response()
        .await
        .with_context(|| format!("PUT {}: response", t.uri))?;
    if resp.status() != http::StatusCode::OK {
        bail!("PUT {}: status {}", t.uri, resp.status());
    }
    while stream.recv_data().await?.is_some() {}
    log_done("PUT", &t.uri, sent, start);
    Ok(())
}

fn log_done(method: &str, uri: &http::Uri, bytes: u64, start: Instant) {
    let d = start.elapsed().as_secs_f64();
    eprintln!(
        "quinn client: {method} {uri}: {bytes} bytes in {d:.3} s ({:.1} Mbit/s)",
        bytes as f64 * 8.0 / d.max(1e-9) / 1e6
    );
}

/// Verifies the server certificate against $CERTS/ca.pem. The runner's certificate is
/// self-signed with basicConstraints CA:TRUE (openssl req -x509), which webpki refuses as an end
/// entity certificate (CaUsedAsEndEntity); so a server certificate that is byte-identical to a
/// certificate in ca.pem is accepted (pinned), any other goes through rustls' normal webpki
/// verification with ca.pem as the trust anchors. Handshake signatures are always verified.
#[derive(Debug)]
struct PinnedVerifier {
    pinned: Vec<CertificateDer<'static>>,
    webpki: Arc<WebPkiServerVerifier>,
    provider: Arc<CryptoProvider>,
}

impl PinnedVerifier {
    fn new(ca: &Path, provider: Arc<CryptoProvider>) -> Result<Self> {
        let pinned = CertificateDer::pem_file_iter(ca)
            .with_context(|| format!("reading {}", ca.display()))?
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("parsing {}", ca.display()))?;
        if pinned.is_empty() {
            bail!("no certificate in {}", ca.display());
        }
        let mut roots = rustls::RootCertStore::empty();
        for c in &pinned {
            roots
                .add(c.clone())
                .with_context(|| format!("adding {} as trust anchor", ca.display()))?;
        }
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()?;
        Ok(PinnedVerifier {
            pinned,
            webpki,
            provider,
        })
    }
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self
            .pinned
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            return Ok(ServerCertVerified::assertion());
        }
        self.webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
