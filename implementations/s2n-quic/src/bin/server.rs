//! hq-interop (HTTP/0.9) file server on s2n-quic for the Extended QUIC Interop Runner.
//!
//! Env: IP, PORT, WWW, CERTS (cert.pem, priv.key), ALPN, CONGESTION_CONTROL, CIPHER,
//! SOCKET_RCVBUF, SOCKET_SNDBUF, GSO, GRO, SSLKEYLOGFILE. Runs until SIGTERM/SIGINT and serves
//! one connection after another (each on its own task, as s2n-quic-qns does).

use bytes::{Bytes, BytesMut};
use qir_harness::www_file;
use qir_s2n_quic::{self as common, Cc, NegotiatedSubscriber, Result};
use s2n_quic::{
    provider::{congestion_controller, tls::s2n_tls},
    stream::{BidirectionalStream, ReceiveStream, SendStream},
    Connection, Server,
};
use std::{
    io::Read,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
};
use tokio::sync::mpsc;

/// Size of one read from disk, handed to s2n-quic as one `Bytes` chunk without copying.
const READ_CHUNK: usize = 1 << 20;
/// Chunks read ahead of the sender.
const READ_AHEAD: usize = 8;

fn main() {
    if let Err(err) = run() {
        eprintln!("s2n-quic server: {err}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    common::check_alpn()?;
    let addr = qir_harness::listen_addr()?;
    let www: Arc<Path> = Arc::from(PathBuf::from(common::require("WWW")?));
    let certs = PathBuf::from(common::require("CERTS")?);

    // current-thread runtime, as s2n-quic-qns runs by default
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let cc = Cc::from_env();
        let server = match cc {
            Cc::Cubic => build_server(congestion_controller::Cubic::default(), addr, &certs)?,
            Cc::Bbr => build_server(congestion_controller::Bbr::default(), addr, &certs)?,
        };
        eprintln!(
            "s2n-quic server: listening on {} (ALPN {}, congestion control {})",
            server.local_addr()?,
            common::ALPN,
            cc.name()
        );
        serve(server, www).await
    })
}

fn build_server<C>(cc: C, addr: SocketAddr, certs: &Path) -> Result<Server>
where
    C: 'static + congestion_controller::Endpoint,
{
    let mut tls = s2n_tls::Server::builder()
        .with_certificate(
            certs.join("cert.pem").as_path(),
            certs.join("priv.key").as_path(),
        )?
        .with_application_protocols([common::ALPN])?;
    if let Some(policy) = common::security_policy()? {
        tls.config_mut().set_security_policy(&policy)?;
    }
    if common::env("SSLKEYLOGFILE").is_some() {
        // s2n-quic opens $SSLKEYLOGFILE itself (NSS key log format)
        tls = tls.with_key_logging()?;
    }
    let tls = tls.build()?;

    Ok(Server::builder()
        .with_io(common::io_provider(addr)?)?
        .with_tls(tls)?
        .with_limits(common::limits()?)?
        .with_congestion_controller(cc)?
        .with_event(NegotiatedSubscriber)?
        .start()?)
}

async fn serve(mut server: Server, www: Arc<Path>) -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    loop {
        tokio::select! {
            conn = server.accept() => match conn {
                Some(conn) => { tokio::spawn(handle_connection(conn, www.clone())); }
                None => return Err("the server endpoint closed".into()),
            },
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    eprintln!("s2n-quic server: shutting down");
    Ok(())
}

async fn handle_connection(mut connection: Connection, www: Arc<Path>) {
    let peer = connection
        .remote_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    // accept() hands out connections after the handshake
    let alpn = connection.application_protocol().ok();
    let negotiated = connection
        .query_event_context(|ctx: &common::Negotiated| *ctx)
        .ok();
    common::report_negotiated(alpn.as_deref(), negotiated);
    eprintln!("s2n-quic server: connection from {peer}");
    loop {
        match connection.accept_bidirectional_stream().await {
            Ok(Some(stream)) => {
                let www = www.clone();
                tokio::spawn(async move {
                    if let Err(err) = handle_stream(stream, www).await {
                        eprintln!("s2n-quic server: stream error: {err}");
                    }
                });
            }
            Ok(None) => break,
            Err(err) => {
                // the normal end: the client closes the connection once it has everything
                let clean = match err {
                    s2n_quic::connection::Error::Closed { .. } => true,
                    s2n_quic::connection::Error::Application { error, .. } => *error == 0,
                    _ => false,
                };
                if !clean {
                    eprintln!("s2n-quic server: connection from {peer} ended: {err}");
                }
                break;
            }
        }
    }
}

async fn handle_stream(stream: BidirectionalStream, www: Arc<Path>) -> Result<()> {
    let (rx, mut tx) = stream.split();
    let path = read_request(rx).await?;
    let file_path = www_file(&www, &path).ok_or_else(|| format!("bad path {path:?}"))?;
    let file = match std::fs::File::open(&file_path) {
        Ok(f) => f,
        Err(err) => {
            let _ = tx.reset(1u32.into());
            return Err(format!("{}: {err}", file_path.display()).into());
        }
    };
    send_file(file, &mut tx).await?;
    tx.finish()?;
    Ok(())
}

/// Streams a file: a reader thread reads 1 MiB chunks (a few ahead), the stream task hands
/// each chunk to s2n-quic as `Bytes` (no copy), waiting for send-buffer capacity as needed.
async fn send_file(mut file: std::fs::File, tx: &mut SendStream) -> Result<()> {
    let (chunks_tx, mut chunks_rx) = mpsc::channel::<std::io::Result<Bytes>>(READ_AHEAD);
    let reader = std::thread::spawn(move || loop {
        let mut buf = BytesMut::zeroed(READ_CHUNK);
        let mut filled = 0;
        let res = loop {
            match file.read(&mut buf[filled..]) {
                Ok(0) => break Ok(()),
                Ok(n) => {
                    filled += n;
                    if filled == READ_CHUNK {
                        break Ok(());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        if let Err(e) = res {
            let _ = chunks_tx.blocking_send(Err(e));
            return;
        }
        if filled == 0 {
            return; // EOF: dropping the sender ends the stream
        }
        buf.truncate(filled);
        if chunks_tx.blocking_send(Ok(buf.freeze())).is_err() {
            return; // the stream went away
        }
        if filled < READ_CHUNK {
            return;
        }
    });
    let mut result = Ok(());
    while let Some(chunk) = chunks_rx.recv().await {
        match chunk {
            Ok(chunk) => {
                if let Err(err) = tx.send(chunk).await {
                    result = Err(err.into());
                    break;
                }
            }
            Err(err) => {
                let _ = tx.reset(1u32.into());
                result = Err(err.into());
                break;
            }
        }
    }
    drop(chunks_rx);
    let _ = tokio::task::spawn_blocking(move || reader.join()).await;
    result
}

/// Reads "GET /path\r\n" (the request ends at CR/LF, a space or the stream's FIN).
async fn read_request(mut rx: ReceiveStream) -> Result<String> {
    let mut req = Vec::new();
    loop {
        if let Some(end) = req.iter().position(|&b| b == b'\r' || b == b'\n') {
            req.truncate(end);
            break;
        }
        if req.len() > 8192 {
            return Err("request line too long".into());
        }
        match rx.receive().await? {
            Some(chunk) => req.extend_from_slice(&chunk),
            None => break,
        }
    }
    Ok(qir_harness::hq_request_path(&req)?.to_string())
}
