//! quinn interop client: downloads every URL in $REQUESTS into $DOWNLOADS, one after the other
//! over one QUIC connection per server, with HTTP/3 (h3 + h3-quinn) or hq-interop, following
//! quinn's examples/client.rs and h3's examples/client.rs. Exits non-zero on any failure.

use std::{
    future::poll_fn,
    io::Write,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Buf;
use qir_harness::RequestUrl;
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
use tokio::task::JoinHandle;

use qir_quinn as common;

/// Size of the buffers handed to the disk writer.
const WRITE_CHUNK: usize = 4 << 20;

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

/// One requested URL.
struct Request {
    uri: http::Uri,
    host: String,
    port: u16,
    target: PathBuf,
}

fn parse_request(url: RequestUrl, downloads: &Path) -> Result<Request> {
    let raw = &url.url;
    let uri: http::Uri = raw
        .parse()
        .with_context(|| format!("parsing URL {raw:?}"))?;
    let name = url
        .file_name()
        .ok_or_else(|| anyhow!("URL {raw:?} has no file name"))?;
    let target = downloads.join(name);
    Ok(Request {
        uri,
        host: url.host,
        port: url.port,
        target,
    })
}

#[tokio::main]
async fn run() -> Result<()> {
    let downloads = PathBuf::from(common::env_required("DOWNLOADS")?);
    let certs = PathBuf::from(common::env_required("CERTS")?);
    let alpn = common::alpn()?;
    let requests = qir_harness::parse_requests(&common::env("REQUESTS"))?
        .into_iter()
        .map(|r| parse_request(r, &downloads))
        .collect::<Result<Vec<_>>>()?;
    if requests.is_empty() {
        bail!("REQUESTS is empty");
    }

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
    let quic_tls = Arc::new(QuicClientConfig::with_initial(
        Arc::new(tls),
        common::initial_suite(),
    )?);
    eprintln!(
        "quinn client: {} request(s), {alpn}, {cipher_desc}, congestion control {}",
        requests.len(),
        common::congestion_choice()
    );

    // One connection per server (host:port), the requests to it one after the other.
    let mut i = 0;
    while i < requests.len() {
        let (host, port) = (requests[i].host.clone(), requests[i].port);
        let mut j = i;
        while j < requests.len() && requests[j].host == host && requests[j].port == port {
            j += 1;
        }
        download_from(&host, port, &requests[i..j], &alpn, quic_tls.clone()).await?;
        i = j;
    }
    Ok(())
}

async fn download_from(
    host: &str,
    port: u16,
    reqs: &[Request],
    alpn: &str,
    quic_tls: Arc<QuicClientConfig>,
) -> Result<()> {
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

    let mut config = ClientConfig::new(quic_tls);
    let qlog = common::qlog_path(&format!("client_{host}_{port}_{}", std::process::id()))?;
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
        "quinn client: connected to {remote} after {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    common::print_negotiated(&conn);

    let result = if common::negotiated_alpn(&conn).as_deref().unwrap_or(alpn) == "hq-interop" {
        download_hq(&conn, reqs).await
    } else {
        download_h3(&conn, reqs).await
    };
    // HTTP/3 closes with H3_NO_ERROR (0x100), hq-interop with 0.
    let code = if common::negotiated_alpn(&conn).as_deref() == Some("h3") {
        0x100u32
    } else {
        0
    };
    conn.close(code.into(), b"done");
    // Give the server a chance to receive the close and let qlog files be completed.
    let _ = tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await;
    result
}

async fn download_hq(conn: &quinn::Connection, reqs: &[Request]) -> Result<()> {
    for req in reqs {
        let start = Instant::now();
        let (mut send, mut recv) = conn.open_bi().await.context("opening stream")?;
        send.write_all(format!("GET {}\r\n", req.uri.path()).as_bytes())
            .await?;
        send.finish()?;
        let mut out = ChunkWriter::create(&req.target)?;
        let mut buf = Vec::with_capacity(WRITE_CHUNK);
        while let Some(chunk) = recv.read_chunk(usize::MAX, true).await.with_context(|| {
            format!(
                "GET {}: after {} bytes",
                req.uri,
                out.total + buf.len() as u64
            )
        })? {
            buf.extend_from_slice(&chunk.bytes);
            if buf.len() >= WRITE_CHUNK {
                out.write(std::mem::replace(&mut buf, Vec::with_capacity(WRITE_CHUNK)))
                    .await?;
            }
        }
        out.write(buf).await?;
        let n = out.finish().await?;
        log_done(&req.uri, n, start);
    }
    Ok(())
}

async fn download_h3(conn: &quinn::Connection, reqs: &[Request]) -> Result<()> {
    let (mut driver, mut send_request) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
        .await
        .context("h3 connection setup")?;
    let drive = tokio::spawn(async move { poll_fn(|cx| driver.poll_close(cx)).await });

    let result = async {
        for req in reqs {
            let start = Instant::now();
            let mut stream = send_request
                .send_request(http::Request::get(req.uri.clone()).body(())?)
                .await
                .with_context(|| format!("GET {}", req.uri))?;
            stream.finish().await?;
            let resp = stream
                .recv_response()
                .await
                .with_context(|| format!("GET {}", req.uri))?;
            if resp.status() != http::StatusCode::OK {
                bail!("GET {}: status {}", req.uri, resp.status());
            }
            let expected: Option<u64> = resp
                .headers()
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()?.parse().ok());
            let mut out = ChunkWriter::create(&req.target)?;
            let mut buf = Vec::with_capacity(WRITE_CHUNK);
            while let Some(mut data) = stream.recv_data().await.with_context(|| {
                format!(
                    "GET {}: after {} bytes",
                    req.uri,
                    out.total + buf.len() as u64
                )
            })? {
                while data.has_remaining() {
                    let c = data.chunk();
                    let n = c.len();
                    buf.extend_from_slice(c);
                    data.advance(n);
                }
                if buf.len() >= WRITE_CHUNK {
                    out.write(std::mem::replace(&mut buf, Vec::with_capacity(WRITE_CHUNK)))
                        .await?;
                }
            }
            out.write(buf).await?;
            let n = out.finish().await?;
            if let Some(e) = expected {
                if n != e {
                    bail!("GET {}: got {n} bytes, content-length {e}", req.uri);
                }
            }
            log_done(&req.uri, n, start);
        }
        Ok(())
    }
    .await;
    drop(send_request);
    drive.abort();
    result
}

fn log_done(uri: &http::Uri, bytes: u64, start: Instant) {
    let d = start.elapsed().as_secs_f64();
    eprintln!(
        "quinn client: GET {uri}: {bytes} bytes in {d:.3} s ({:.1} Mbit/s)",
        bytes as f64 * 8.0 / d.max(1e-9) / 1e6
    );
}

/// Writes a download to disk on the blocking pool, one buffer in flight while the next fills.
struct ChunkWriter {
    file: Option<std::fs::File>,
    pending: Option<JoinHandle<std::io::Result<std::fs::File>>>,
    total: u64,
    path: PathBuf,
}

impl ChunkWriter {
    fn create(path: &Path) -> Result<Self> {
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        Ok(ChunkWriter {
            file: Some(file),
            pending: None,
            total: 0,
            path: path.to_path_buf(),
        })
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
        self.total += buf.len() as u64;
        self.pending = Some(tokio::task::spawn_blocking(move || {
            f.write_all(&buf)?;
            Ok(f)
        }));
        Ok(())
    }

    async fn finish(mut self) -> Result<u64> {
        self.wait().await?;
        Ok(self.total)
    }
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
