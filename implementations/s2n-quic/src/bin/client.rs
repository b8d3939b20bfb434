//! hq-interop (HTTP/0.9) download client on s2n-quic for the Extended QUIC Interop Runner.
//!
//! Env: REQUESTS (space-separated https URLs of one server), DOWNLOADS, CERTS (ca.pem), ALPN,
//! CONGESTION_CONTROL, CIPHER, SOCKET_RCVBUF, SOCKET_SNDBUF, GSO, GRO, SSLKEYLOGFILE.
//! All requests go over one connection, one bidirectional stream each, in parallel (as
//! s2n-quic-qns does). Exits 0 only when every download completed.

use bytes::Bytes;
use qir_s2n_quic::{self as common, Cc, NegotiatedSubscriber, Result};
use s2n_quic::{
    client::Connect,
    connection::Handle,
    provider::{congestion_controller, tls::s2n_tls},
    Client,
};
use std::{
    io::Write,
    net::{IpAddr, SocketAddr, ToSocketAddrs},
    path::{Path, PathBuf},
    time::Instant,
};
use tokio::sync::mpsc;

/// Chunk batches buffered between the stream and the writer thread.
const WRITE_QUEUE: usize = 64;
/// How long the client lets the endpoint run after closing the connection.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_millis(10);
/// Size of the writes to the download file.
const WRITE_BUFFER: usize = 1 << 20;
/// Chunks taken from s2n-quic per receive call.
const RECV_BATCH: usize = 64;

struct Request {
    path: String,
    out: PathBuf,
}

fn main() {
    if let Err(err) = run() {
        eprintln!("s2n-quic client: {err}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    common::check_alpn()?;
    let requests = common::require("REQUESTS")?;
    let downloads = PathBuf::from(common::require("DOWNLOADS")?);
    let certs = PathBuf::from(common::require("CERTS")?);

    let mut host_port = None;
    let mut reqs = Vec::new();
    for url in qir_harness::parse_requests(&requests)? {
        let name = url.file_name().unwrap_or("index.html");
        let out = downloads.join(name);
        match &host_port {
            None => host_port = Some((url.host.clone(), url.port)),
            Some((h, p)) if *h == url.host && *p == url.port => {}
            Some(_) => return Err("all REQUESTS must go to one server".into()),
        }
        reqs.push(Request {
            out,
            path: url.path,
        });
    }
    let (host, port) = host_port.ok_or("REQUESTS is empty")?;
    let addr: SocketAddr = match host.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, port),
        Err(_) => (host.as_str(), port)
            .to_socket_addrs()?
            .next()
            .ok_or("cannot resolve host")?,
    };

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let cc = Cc::from_env();
        let local: SocketAddr = if addr.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let client = match cc {
            Cc::Cubic => build_client(congestion_controller::Cubic::default(), local, &certs)?,
            Cc::Bbr => build_client(congestion_controller::Bbr::default(), local, &certs)?,
        };
        download(client, addr, &host, reqs).await
    })
}

fn build_client<C>(cc: C, local: SocketAddr, certs: &Path) -> Result<Client>
where
    C: 'static + congestion_controller::Endpoint,
{
    // Verifies the server against CERTS/ca.pem (the self-signed server certificate) only:
    // s2n-tls checks the chain and the server name (an IP SAN for the runner's certificates).
    let mut tls = s2n_tls::Client::builder()
        .with_empty_trust_store()?
        .with_certificate(certs.join("ca.pem").as_path())?
        .with_application_protocols([common::ALPN])?;
    if let Some(policy) = common::security_policy()? {
        tls.config_mut().set_security_policy(&policy)?;
    }
    if common::env("SSLKEYLOGFILE").is_some() {
        tls = tls.with_key_logging()?;
    }
    let tls = tls.build()?;

    Ok(Client::builder()
        .with_io(common::io_provider(local)?)?
        .with_tls(tls)?
        .with_limits(common::limits()?)?
        .with_congestion_controller(cc)?
        .with_event(NegotiatedSubscriber)?
        .start()?)
}

async fn download(client: Client, addr: SocketAddr, host: &str, reqs: Vec<Request>) -> Result<()> {
    let start = Instant::now();
    let connect = Connect::new(addr).with_server_name(host);
    let connection = client.connect(connect).await?;
    let alpn = connection.application_protocol().ok();
    let negotiated = connection
        .query_event_context(|ctx: &common::Negotiated| *ctx)
        .ok();
    common::report_negotiated(alpn.as_deref(), negotiated);
    eprintln!(
        "s2n-quic client: connected to {addr} in {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );

    let mut tasks = Vec::new();
    for req in reqs {
        let handle = connection.handle();
        tasks.push(tokio::spawn(async move {
            let res = fetch(handle, &req).await;
            (req, res)
        }));
    }
    let mut failed = 0;
    let mut total = 0u64;
    for task in tasks {
        let (req, res) = task.await?;
        match res {
            Ok(n) => total += n,
            Err(err) => {
                failed += 1;
                eprintln!("s2n-quic client: GET {} failed: {err}", req.path);
                // leave no partial download behind
                let _ = std::fs::remove_file(&req.out);
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "s2n-quic client: {total} bytes in {secs:.3} s ({:.1} Mbit/s)",
        total as f64 * 8.0 / secs / 1e6
    );
    // Close with application error 0 (no error) and give the endpoint task a moment to send
    // the CONNECTION_CLOSE. Waiting for the whole closing period (3 PTO, wait_idle) would add
    // ~80 ms to the measured download time for nothing.
    connection.close(0u32.into());
    let mut client = client;
    let _ = tokio::time::timeout(CLOSE_GRACE, client.wait_idle()).await;
    if failed > 0 {
        return Err(format!("{failed} download(s) failed").into());
    }
    Ok(())
}

/// One hq-interop request: "GET /path\r\n" + FIN, then the response is written to disk by a
/// writer thread while the stream keeps receiving.
async fn fetch(mut handle: Handle, req: &Request) -> Result<u64> {
    let stream = handle.open_bidirectional_stream().await?;
    let (mut rx, mut tx) = stream.split();
    tx.send(Bytes::from(format!("GET {}\r\n", req.path)))
        .await?;
    tx.finish()?;

    let file =
        std::fs::File::create(&req.out).map_err(|e| format!("{}: {e}", req.out.display()))?;
    let (chunks_tx, mut chunks_rx) = mpsc::channel::<Vec<Bytes>>(WRITE_QUEUE);
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        // received chunks are packet-sized: coalesce them into large write(2)s
        let mut file = std::io::BufWriter::with_capacity(WRITE_BUFFER, file);
        while let Some(batch) = chunks_rx.blocking_recv() {
            for chunk in batch {
                file.write_all(&chunk)?;
            }
        }
        file.flush()
    });

    let mut received = 0u64;
    let mut result: Result<()> = Ok(());
    let mut chunks: Vec<Bytes> = vec![Bytes::new(); RECV_BATCH];
    loop {
        match rx.receive_vectored(&mut chunks).await {
            Ok((n, open)) => {
                if n > 0 {
                    let batch: Vec<Bytes> = chunks[..n].iter_mut().map(std::mem::take).collect();
                    received += batch.iter().map(|c| c.len() as u64).sum::<u64>();
                    if chunks_tx.send(batch).await.is_err() {
                        result = Err("the writer thread stopped".into());
                        break;
                    }
                }
                if !open {
                    break;
                }
            }
            Err(err) => {
                result = Err(err.into());
                break;
            }
        }
    }
    drop(chunks_tx);
    let written = tokio::task::spawn_blocking(move || writer.join())
        .await?
        .map_err(|_| "the writer thread panicked")?;
    result?;
    written.map_err(|e| format!("{}: {e}", req.out.display()))?;
    Ok(received)
}
