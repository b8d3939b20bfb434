//! MsQuic hq-interop client of the interop runner: downloads every URL in $REQUESTS, one after
//! the other over one QUIC connection, into $DOWNLOADS/<last path segment>. Each request is a
//! bidirectional stream carrying "GET /path\r\n" + FIN; the received bytes are written to the
//! file from MsQuic's receive callback through a large buffered writer.

use msquic::ffi::QUIC_BUFFER;
use msquic::{
    BufferRef, Configuration, Connection, ConnectionEvent, ConnectionRef, ConnectionShutdownFlags,
    CredentialConfig, Registration, SendFlags, Status, Stream, StreamEvent, StreamOpenFlags,
    StreamRef, StreamShutdownFlags, StreamStartFlags,
};
use qir_harness::RequestUrl;
use qir_msquic::{
    cipher_suites, exit_now, getenv, register_secrets, registration_config, report_negotiated,
    settings, write_keylog, ALPN,
};
use std::ffi::c_void;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant};

const WRITE_BUFFER: usize = 4 << 20;

fn log(msg: &str) {
    qir_msquic::log("client", msg);
}

fn fail(msg: &str) -> ! {
    log(&format!("error: {msg}"));
    exit_now(1)
}

enum Event {
    Connected,
    /// A stream finished: Ok(bytes) when the whole response (up to FIN) was written to disk.
    StreamDone(Result<u64, String>),
    Closed(String),
}

/// The request buffer of a stream; boxed, its address is the StreamSend client context.
struct Request {
    buf: QUIC_BUFFER,
    _data: Vec<u8>,
}

fn stream_handler(
    out: BufWriter<File>,
    tx: Sender<Event>,
) -> impl FnMut(StreamRef, StreamEvent) -> Result<(), Status> + 'static {
    let mut out = Some(out);
    let mut bytes = 0u64;
    let mut result: Option<Result<u64, String>> = None;
    move |stream: StreamRef, ev: StreamEvent| {
        match ev {
            StreamEvent::Receive { buffers, .. } => {
                if let Some(w) = out.as_mut() {
                    for b in buffers {
                        let data = b.as_bytes();
                        if let Err(e) = w.write_all(data) {
                            result.get_or_insert(Err(format!("writing: {e}")));
                            out = None;
                            let _ = stream.shutdown(StreamShutdownFlags::ABORT, 1);
                            break;
                        }
                        bytes += data.len() as u64;
                    }
                }
            }
            StreamEvent::PeerSendShutdown => {
                if let Some(mut w) = out.take() {
                    let r = w.flush();
                    result.get_or_insert(match r {
                        Ok(()) => Ok(bytes),
                        Err(e) => Err(format!("writing: {e}")),
                    });
                }
            }
            StreamEvent::PeerSendAborted { error_code } => {
                result.get_or_insert(Err(format!("server aborted the stream ({error_code:#x})")));
                out = None;
            }
            StreamEvent::SendComplete { client_context, .. } => {
                drop(unsafe { Box::from_raw(client_context as *mut Request) });
            }
            StreamEvent::ShutdownComplete {
                connection_shutdown,
                connection_error_code,
                connection_close_status,
                ..
            } => {
                let r = result.take().unwrap_or_else(|| {
                    Err(if connection_shutdown {
                        format!(
                            "connection closed after {bytes} bytes: {connection_close_status} ({connection_error_code:#x})"
                        )
                    } else {
                        format!("stream closed after {bytes} bytes without FIN")
                    })
                });
                let _ = tx.send(Event::StreamDone(r));
            }
            _ => {}
        }
        Ok(())
    }
}

fn download(
    conn: &Connection,
    url: &RequestUrl,
    dir: &Path,
    rx: &Receiver<Event>,
    tx: &Sender<Event>,
) -> Result<u64, String> {
    let target = dir.join(url.file_name().unwrap_or_default());
    let file = File::create(&target).map_err(|e| format!("{}: {e}", target.display()))?;
    let out = BufWriter::with_capacity(WRITE_BUFFER, file);
    let stream = Stream::open(conn, StreamOpenFlags::NONE, stream_handler(out, tx.clone()))
        .map_err(|e| format!("StreamOpen: {e}"))?;
    stream
        .start(StreamStartFlags::NONE)
        .map_err(|e| format!("StreamStart: {e}"))?;
    let mut data = format!("GET {}\r\n", url.path).into_bytes();
    let req = Box::new(Request {
        buf: QUIC_BUFFER {
            Length: data.len() as u32,
            Buffer: data.as_mut_ptr(),
        },
        _data: data,
    });
    let raw = Box::into_raw(req);
    let sent = unsafe {
        stream.send(
            std::slice::from_ref(&*(&(*raw).buf as *const QUIC_BUFFER as *const BufferRef)),
            SendFlags::FIN,
            raw as *const c_void,
        )
    };
    if let Err(e) = sent {
        drop(unsafe { Box::from_raw(raw) });
        return Err(format!("StreamSend: {e}"));
    }
    let result = loop {
        match rx.recv() {
            Ok(Event::StreamDone(r)) => break r,
            Ok(Event::Closed(why)) => break Err(format!("connection closed: {why}")),
            Ok(Event::Connected) => {}
            Err(_) => break Err("event channel closed".into()),
        }
    };
    drop(stream); // StreamClose, after its SHUTDOWN_COMPLETE
    result
}

fn main() {
    let urls = qir_harness::parse_requests(&getenv("REQUESTS")).unwrap_or_else(|e| fail(&e.0));
    let downloads = PathBuf::from(getenv("DOWNLOADS"));
    let certs = PathBuf::from(getenv("CERTS"));
    if urls.is_empty() {
        exit_now(0);
    }
    if let Some(url) = urls.iter().find(|u| u.file_name().is_none()) {
        fail(&format!("URL {:?} has no file name", url.url));
    }

    let reg = Registration::new(&registration_config("client"))
        .unwrap_or_else(|e| fail(&format!("RegistrationOpen: {e}")));
    let alpn = [BufferRef::from(ALPN)];
    let config = Configuration::open(&reg, &alpn, Some(&settings("client", false)))
        .unwrap_or_else(|e| fail(&format!("ConfigurationOpen: {e}")));
    // Verify the server against $CERTS/ca.pem. With quictls MsQuic checks the chain with
    // OpenSSL's X509_verify_cert but not the host name/IP against the certificate's SAN.
    let mut cred = CredentialConfig::new_client()
        .set_ca_certificate_file(certs.join("ca.pem").display().to_string());
    match cipher_suites() {
        Ok(Some(c)) => cred = cred.set_allowed_cipher_suites(c),
        Ok(None) => {}
        Err(e) => fail(&e),
    }
    config
        .load_credential(&cred)
        .unwrap_or_else(|e| fail(&format!("loading credentials: {e}")));

    let (tx, rx) = channel::<Event>();
    let conn_tx = tx.clone();
    let conn = Connection::open(&reg, move |conn: ConnectionRef, ev: ConnectionEvent| {
        match ev {
            ConnectionEvent::Connected {
                negotiated_alpn, ..
            } => {
                report_negotiated(unsafe { conn.as_raw() }, negotiated_alpn);
                let _ = conn_tx.send(Event::Connected);
            }
            ConnectionEvent::ShutdownInitiatedByTransport { status, error_code } => {
                let _ = conn_tx.send(Event::Closed(format!(
                    "by transport: {status} ({error_code:#x})"
                )));
            }
            ConnectionEvent::ShutdownInitiatedByPeer { error_code } => {
                let _ = conn_tx.send(Event::Closed(format!("by peer ({error_code:#x})")));
            }
            ConnectionEvent::ShutdownComplete { .. } => {
                let _ = conn_tx.send(Event::Closed("shutdown complete".into()));
            }
            _ => {}
        }
        Ok(())
    })
    .unwrap_or_else(|e| fail(&format!("ConnectionOpen: {e}")));
    let secrets = register_secrets(unsafe { conn.as_raw() });

    let first = &urls[0];
    conn.start(&config, &first.host, first.port)
        .unwrap_or_else(|e| {
            fail(&format!(
                "ConnectionStart to {}:{}: {e}",
                first.host, first.port
            ))
        });
    match rx.recv() {
        Ok(Event::Connected) => {}
        Ok(Event::Closed(why)) => fail(&format!(
            "handshake with {}:{} failed: {why}",
            first.host, first.port
        )),
        _ => fail("handshake failed"),
    }
    if let Some(s) = &secrets {
        write_keylog(s);
    }

    let mut code = 0;
    for url in &urls {
        let raw = &url.url;
        let start = Instant::now();
        match download(&conn, url, &downloads, &rx, &tx) {
            Ok(n) => {
                let d = start.elapsed();
                log(&format!(
                    "GET {raw}: {n} bytes in {:.3}s ({:.1} Mbit/s)",
                    d.as_secs_f64(),
                    n as f64 * 8.0 / d.as_secs_f64() / 1e6
                ));
            }
            Err(e) => {
                log(&format!("error: GET {raw}: {e}"));
                code = 1;
                break;
            }
        }
    }

    // Close the connection gracefully and give the CONNECTION_CLOSE a moment to go out.
    conn.shutdown(ConnectionShutdownFlags::NONE, 0);
    let deadline = Instant::now() + Duration::from_secs(2);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(Event::Closed(why)) if why == "shutdown complete" => break,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    exit_now(code)
}
