//! MsQuic hq-interop server of the interop runner: serves the files under $WWW on $IP:$PORT.
//! A request is one bidirectional stream carrying "GET /path\r\n" + FIN; the answer is the raw
//! file bytes + FIN. Files are read from disk in chunks by one thread per response, which keeps
//! at most SENDS_IN_FLIGHT StreamSend calls outstanding (MsQuic buffers and paces them).

use msquic::ffi::{HQUIC, QUIC_BUFFER};
use msquic::{
    Addr, Api, BufferRef, Configuration, ConnectionEvent, ConnectionRef, Credential,
    CredentialConfig, Listener, ListenerEvent, Registration, SendFlags, Status, StreamEvent,
    StreamRef, StreamShutdownFlags,
};
use qir_harness::www_file;
use qir_msquic::{
    block_signals, cipher_suites, defer_close_connection, defer_close_stream, exit_now, getenv,
    register_secrets, registration_config, report_negotiated, settings, wait_for_signal,
    write_keylog, ALPN,
};
use std::ffi::c_void;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

const CHUNK_SIZE: usize = 1 << 20;
const SENDS_IN_FLIGHT: usize = 8;
const MAX_REQUEST: usize = 8192;

fn log(msg: &str) {
    qir_msquic::log("server", msg);
}

/// One send buffer; boxed, its address is the StreamSend client context and comes back in
/// SEND_COMPLETE.
struct Chunk {
    buf: QUIC_BUFFER,
    data: Vec<u8>,
}
unsafe impl Send for Chunk {}

/// State shared between a stream's callback and its sender thread.
struct SendShared {
    stream: usize,
    /// Set (under the lock) once the stream's SHUTDOWN_COMPLETE arrived: the handle is about to
    /// be closed and must not be used by the sender thread any more.
    closed: Mutex<bool>,
    aborted: AtomicBool,
}

fn resolve(www: &Path, req: &[u8]) -> Result<PathBuf, String> {
    let path = qir_harness::hq_request_path(req)?;
    www_file(www, path).ok_or_else(|| format!("bad path {path:?}"))
}

/// Reads `file` in chunks and sends them on the stream, keeping at most SENDS_IN_FLIGHT sends
/// outstanding; the chunks come back through `pool` when MsQuic completes them.
fn send_file(mut file: File, size: u64, shared: Arc<SendShared>, pool: Receiver<Box<Chunk>>) {
    let api = Api::get_ffi();
    let mut allocated = 0;
    let mut offset = 0u64;
    loop {
        let mut chunk = if allocated < SENDS_IN_FLIGHT {
            allocated += 1;
            Box::new(Chunk {
                buf: QUIC_BUFFER {
                    Length: 0,
                    Buffer: std::ptr::null_mut(),
                },
                data: vec![0u8; CHUNK_SIZE],
            })
        } else {
            match pool.recv() {
                Ok(c) => c,
                Err(_) => return,
            }
        };
        if shared.aborted.load(Ordering::Relaxed) {
            return;
        }
        let want = (size - offset).min(CHUNK_SIZE as u64) as usize;
        let mut n = 0;
        while n < want {
            match file.read(&mut chunk.data[n..want]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    log(&format!("read error: {e}"));
                    break;
                }
            }
        }
        offset += n as u64;
        let fin = n < want || offset >= size;
        if n < want {
            log(&format!("file ended early at {offset} of {size} bytes"));
        }
        chunk.buf = QUIC_BUFFER {
            Length: n as u32,
            Buffer: chunk.data.as_mut_ptr(),
        };
        let flags = if fin { SendFlags::FIN } else { SendFlags::NONE };
        let guard = shared.closed.lock().unwrap();
        if *guard {
            return;
        }
        let raw = Box::into_raw(chunk);
        let status = unsafe {
            api.StreamSend.unwrap()(
                shared.stream as HQUIC,
                &(*raw).buf,
                1,
                flags.bits(),
                raw as *mut c_void,
            )
        };
        drop(guard);
        if let Err(e) = Status::ok_from_raw(status) {
            // no SEND_COMPLETE for a failed StreamSend
            drop(unsafe { Box::from_raw(raw) });
            log(&format!("StreamSend failed: {e}"));
            return;
        }
        if fin {
            return;
        }
    }
}

fn stream_handler(
    www: Arc<PathBuf>,
) -> impl FnMut(StreamRef, StreamEvent) -> Result<(), Status> + 'static {
    let mut req: Vec<u8> = Vec::new();
    let mut shared: Option<Arc<SendShared>> = None;
    let mut pool: Option<Sender<Box<Chunk>>> = None;
    move |stream: StreamRef, ev: StreamEvent| {
        match ev {
            StreamEvent::Receive { buffers, .. } => {
                for b in buffers {
                    let bytes = b.as_bytes();
                    let room = MAX_REQUEST.saturating_sub(req.len());
                    req.extend_from_slice(&bytes[..bytes.len().min(room)]);
                }
            }
            StreamEvent::PeerSendShutdown => {
                if shared.is_some() {
                    return Ok(());
                }
                let opened = resolve(&www, &req).and_then(|p| {
                    let f = File::open(&p).map_err(|e| format!("{}: {e}", p.display()))?;
                    let size = f.metadata().map_err(|e| e.to_string())?.len();
                    Ok((f, size))
                });
                match opened {
                    Ok((file, size)) => {
                        let sh = Arc::new(SendShared {
                            stream: unsafe { stream.as_raw() } as usize,
                            closed: Mutex::new(false),
                            aborted: AtomicBool::new(false),
                        });
                        let (tx, rx) = channel();
                        pool = Some(tx);
                        shared = Some(sh.clone());
                        std::thread::Builder::new()
                            .name("sender".into())
                            .spawn(move || send_file(file, size, sh, rx))
                            .expect("spawn sender");
                    }
                    Err(e) => {
                        log(&e);
                        let _ = stream.shutdown(StreamShutdownFlags::ABORT, 0x10);
                    }
                }
            }
            StreamEvent::SendComplete { client_context, .. } => {
                let chunk = unsafe { Box::from_raw(client_context as *mut Chunk) };
                if let Some(p) = &pool {
                    let _ = p.send(chunk); // the sender thread may be gone: then it is dropped
                }
            }
            StreamEvent::PeerReceiveAborted { .. } | StreamEvent::PeerSendAborted { .. } => {
                if let Some(sh) = &shared {
                    sh.aborted.store(true, Ordering::Relaxed);
                }
                let _ = stream.shutdown(StreamShutdownFlags::ABORT, 0);
            }
            StreamEvent::ShutdownComplete { .. } => {
                if let Some(sh) = &shared {
                    sh.aborted.store(true, Ordering::Relaxed);
                    *sh.closed.lock().unwrap() = true;
                }
                pool = None; // wakes a sender thread blocked on the pool
                defer_close_stream(unsafe { stream.as_raw() });
            }
            _ => {}
        }
        Ok(())
    }
}

fn main() {
    block_signals();
    let www = Arc::new(PathBuf::from(getenv("WWW")));
    let certs = PathBuf::from(getenv("CERTS"));
    let addr = qir_harness::listen_addr().unwrap_or_else(|e| {
        log(&e.to_string());
        exit_now(1)
    });

    let reg = Registration::new(&registration_config("server")).unwrap_or_else(|e| {
        log(&format!("RegistrationOpen failed: {e}"));
        exit_now(1)
    });
    let alpn = [BufferRef::from(ALPN)];
    let config =
        Configuration::open(&reg, &alpn, Some(&settings("server", true))).unwrap_or_else(|e| {
            log(&format!("ConfigurationOpen failed: {e}"));
            exit_now(1)
        });
    let mut cred = CredentialConfig::new().set_credential(Credential::CertificateFile(
        msquic::CertificateFile::new(
            certs.join("priv.key").display().to_string(),
            certs.join("cert.pem").display().to_string(),
        ),
    ));
    match cipher_suites() {
        Ok(Some(c)) => cred = cred.set_allowed_cipher_suites(c),
        Ok(None) => {}
        Err(e) => {
            log(&e);
            exit_now(1)
        }
    }
    if let Err(e) = config.load_credential(&cred) {
        log(&format!(
            "loading certificate from {} failed: {e}",
            certs.display()
        ));
        exit_now(1)
    }
    let config = Arc::new(config);

    let listener = Listener::open(&reg, move |_, ev| {
        if let ListenerEvent::NewConnection { connection, .. } = ev {
            let raw = unsafe { connection.as_raw() };
            let secrets = register_secrets(raw);
            let www = www.clone();
            let mut logged = false;
            connection.set_callback_handler(move |conn: ConnectionRef, ev: ConnectionEvent| {
                match ev {
                    ConnectionEvent::Connected {
                        negotiated_alpn, ..
                    } => {
                        report_negotiated(unsafe { conn.as_raw() }, negotiated_alpn);
                        if let (Some(s), false) = (&secrets, logged) {
                            write_keylog(s);
                            logged = true;
                        }
                    }
                    ConnectionEvent::PeerStreamStarted { stream, .. } => {
                        stream.set_callback_handler(stream_handler(www.clone()));
                    }
                    ConnectionEvent::ShutdownInitiatedByTransport { status, error_code } => {
                        if error_code != 0 {
                            log(&format!(
                                "connection closed by transport: {status} ({error_code:#x})"
                            ));
                        }
                    }
                    ConnectionEvent::ShutdownComplete { .. } => {
                        defer_close_connection(unsafe { conn.as_raw() });
                    }
                    _ => {}
                }
                Ok(())
            });
            connection.set_configuration(&config)?;
        }
        Ok(())
    })
    .unwrap_or_else(|e| {
        log(&format!("ListenerOpen failed: {e}"));
        exit_now(1)
    });
    let local = Addr::from(addr);
    if let Err(e) = listener.start(&alpn, Some(&local)) {
        log(&format!("listening on {addr} failed: {e}"));
        exit_now(1)
    }
    log(&format!("listening on {addr} ({ALPN})"));

    let sig = wait_for_signal();
    log(&format!("signal {sig}, exiting"));
    listener.stop();
    exit_now(0)
}
