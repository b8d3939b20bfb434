//! Shared parts of the MsQuic interop server and client (hq-interop over the official `msquic`
//! crate): settings from the runner's environment, the key log, the QIR_NEGOTIATED line,
//! signal handling and deferred handle closing. The contract code all Rust harnesses share
//! (environment, windows, the JSON of the QIR_NEGOTIATED line) is in ../_shared/rust/qir-harness.

use msquic::ffi::{HQUIC, QUIC_SETTINGS};
use msquic::{AllowedCipherSuiteFlags, Api, HandshakeInfo, QuicTlsSecrets, Settings, Stream};
use qir_harness::{cipher, hex, Negotiated, CONNECTION_WINDOW, STREAM_WINDOW};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};

pub use qir_harness::env_or_empty as getenv;

/// The only protocol spoken: HTTP/0.9 over QUIC.
pub const ALPN: &str = qir_harness::ALPN_HQ_INTEROP;

/// QUIC_CONGESTION_CONTROL_ALGORITHM values (BBR is a "preview" enum value in msquic.h,
/// but the library core always supports it).
const CC_CUBIC: u16 = 0;
const CC_BBR: u16 = 1;

/// Registration config: app name and the execution profile from PARAM_EXECUTION_PROFILE
/// (meta.yml parameter `execution_profile`; MsQuic's default is low latency).
pub fn registration_config(prog: &str) -> msquic::RegistrationConfig {
    use msquic::ExecutionProfile;
    let profile = match getenv("PARAM_EXECUTION_PROFILE").as_str() {
        "" | "low_latency" => ExecutionProfile::LowLatency,
        "max_throughput" => ExecutionProfile::MaxThroughput,
        "scavenger" => ExecutionProfile::Scavenger,
        "real_time" => ExecutionProfile::RealTime,
        other => {
            log(
                prog,
                &format!("unknown execution_profile '{other}', using low_latency"),
            );
            ExecutionProfile::LowLatency
        }
    };
    msquic::RegistrationConfig::new()
        .set_app_name(format!("qir-msquic-{prog}"))
        .set_execution_profile(profile)
}

pub fn log(prog: &str, msg: &str) {
    eprintln!("msquic {prog}: {msg}");
}

/// QUIC_SETTINGS for both roles, with CONGESTION_CONTROL applied.
pub fn settings(prog: &str, server: bool) -> Settings {
    let cc = match getenv("CONGESTION_CONTROL").as_str() {
        "" | "cubic" => CC_CUBIC,
        "bbr" => CC_BBR,
        other => {
            log(
                prog,
                &format!("congestion control '{other}' not supported, using cubic"),
            );
            CC_CUBIC
        }
    };
    let (stream_window, connection_window) = if server {
        (STREAM_WINDOW, CONNECTION_WINDOW)
    } else {
        flow_control_window(prog).map_or((STREAM_WINDOW, CONNECTION_WINDOW), |w| (w, w))
    };
    let mut s = Settings::new()
        .set_CongestionControlAlgorithm(cc)
        // the stream receive window must be a power of two for MsQuic (16 MiB is)
        .set_StreamRecvWindowDefault(stream_window)
        .set_ConnFlowControlWindow(connection_window)
        // MsQuic copies app sends into its own buffer (sized to the BDP) and completes
        // them at once: the simple "keep a few sends pending" model of docs/Streams.md.
        .set_SendBufferingEnabled()
        .set_IdleTimeoutMs(30_000);
    if server {
        s = s
            .set_PeerBidiStreamCount(100)
            .set_ServerResumptionLevel(msquic::ServerResumptionLevel::NoResume);
    }
    s
}

/// The client's fixed flow-control window (`FLOW_CONTROL_WINDOW`, bytes; None where unset),
/// for its streams and the connection. MsQuic doubles a stream's window only while it is below
/// the connection window (msquic 2.5.1-beta src/core/stream_recv.c:772-774), so with both at n
/// it stays n; the connection's credit is the bytes delivered + its window. MsQuic takes a
/// stream window that is a power of two and fits 32 bits only: any other cannot be honoured
/// (exit 127).
fn flow_control_window(prog: &str) -> Option<u32> {
    let value = getenv("FLOW_CONTROL_WINDOW");
    if value.trim().is_empty() {
        return None;
    }
    let Ok(bytes) = value.trim().parse::<u64>() else {
        log(
            prog,
            &format!("FLOW_CONTROL_WINDOW must be bytes, not '{value}'"),
        );
        std::process::exit(1);
    };
    match u32::try_from(bytes) {
        Ok(window) if window.is_power_of_two() => {
            log(
                prog,
                &format!("flow-control window fixed at {window} bytes (connection and streams)"),
            );
            Some(window)
        }
        _ => {
            log(prog, &format!("unsupported FLOW_CONTROL_WINDOW={bytes}: MsQuic takes a power of two below 2^32"));
            std::process::exit(127);
        }
    }
}

/// AllowedCipherSuites for $CIPHER (None = library default).
pub fn cipher_suites() -> Result<Option<AllowedCipherSuiteFlags>, String> {
    Ok(match getenv("CIPHER").as_str() {
        "" => None,
        cipher::AES_128_GCM_SHA256 => Some(AllowedCipherSuiteFlags::AES_128_GCM_SHA256),
        cipher::AES_256_GCM_SHA384 => Some(AllowedCipherSuiteFlags::AES_256_GCM_SHA384),
        cipher::CHACHA20_POLY1305_SHA256 => Some(AllowedCipherSuiteFlags::CHACHA20_POLY1305_SHA256),
        other => return Err(format!("unknown CIPHER '{other}'")),
    })
}

/// Prints `QIR_NEGOTIATED {json}` with what MsQuic reports for the connection: the ALPN from
/// the CONNECTED event, the cipher suite from QUIC_PARAM_TLS_HANDSHAKE_INFO and the congestion
/// control algorithm from the connection's QUIC_PARAM_CONN_SETTINGS.
/// (MsQuic's QUIC_CIPHER_SUITE values are the IANA ids.)
pub fn report_negotiated(conn: HQUIC, alpn: &[u8]) {
    let cipher =
        unsafe { Api::get_param_auto::<HandshakeInfo>(conn, msquic::PARAM_TLS_HANDSHAKE_INFO) }
            .ok()
            .and_then(|info| cipher::from_iana_id(info.cipher_suite));
    let cc = unsafe { Api::get_param_auto::<QUIC_SETTINGS>(conn, msquic::PARAM_CONN_SETTINGS) }
        .ok()
        .and_then(|s| match s.CongestionControlAlgorithm {
            CC_CUBIC => Some("cubic"),
            CC_BBR => Some("bbr"),
            _ => None,
        });
    Negotiated::new()
        .alpn_bytes(alpn)
        .cipher(cipher)
        .congestion_control(cc)
        .print();
}

// ---------------------------------------------------------------------------------------------
// Key log: MsQuic fills a QUIC_TLS_SECRETS struct the app registers per connection
// (QUIC_PARAM_CONN_TLS_SECRETS, before the handshake); after CONNECTED we write it out in
// NSS key log format.

static KEYLOG: OnceLock<Option<Mutex<File>>> = OnceLock::new();

fn keylog_file() -> &'static Option<Mutex<File>> {
    KEYLOG.get_or_init(|| {
        let path = getenv("SSLKEYLOGFILE");
        if path.is_empty() {
            return None;
        }
        match OpenOptions::new().create(true).append(true).open(&path) {
            Ok(f) => Some(Mutex::new(f)),
            Err(e) => {
                eprintln!("msquic: cannot open SSLKEYLOGFILE {path}: {e}");
                None
            }
        }
    })
}

pub fn keylog_enabled() -> bool {
    keylog_file().is_some()
}

/// Registers a zeroed secrets buffer with the connection (only when SSLKEYLOGFILE is set).
/// The box must live until `write_keylog` was called (it is kept in the connection handler).
pub fn register_secrets(conn: HQUIC) -> Option<Box<QuicTlsSecrets>> {
    if !keylog_enabled() {
        return None;
    }
    let secrets: Box<QuicTlsSecrets> = Box::new(unsafe { std::mem::zeroed() });
    let ptr = &*secrets as *const QuicTlsSecrets as *const std::ffi::c_void;
    let res = unsafe {
        Api::set_param(
            conn,
            msquic::PARAM_CONN_TLS_SECRETS,
            std::mem::size_of::<QuicTlsSecrets>() as u32,
            ptr,
        )
    };
    match res {
        Ok(()) => Some(secrets),
        Err(e) => {
            eprintln!("msquic: QUIC_PARAM_CONN_TLS_SECRETS failed: {e}");
            None
        }
    }
}

pub fn write_keylog(s: &QuicTlsSecrets) {
    let Some(file) = keylog_file() else { return };
    // IsSet bits: ClientRandom, ClientEarlyTrafficSecret, ClientHandshakeTrafficSecret,
    // ServerHandshakeTrafficSecret, ClientTrafficSecret0, ServerTrafficSecret0.
    if s.flags & 1 == 0 {
        eprintln!("msquic: TLS secrets have no client random, key log skipped");
        return;
    }
    let len = (s.secret_length as usize).min(msquic::QUIC_TLS_SECRETS_MAX_SECRET_LEN);
    let random = hex(&s.client_random);
    let entries: [(u8, &str, &[u8]); 5] = [
        (
            1 << 1,
            "CLIENT_EARLY_TRAFFIC_SECRET",
            &s.client_early_traffic_secret,
        ),
        (
            1 << 2,
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
            &s.client_handshake_traffic_secret,
        ),
        (
            1 << 3,
            "SERVER_HANDSHAKE_TRAFFIC_SECRET",
            &s.server_handshake_traffic_secret,
        ),
        (1 << 4, "CLIENT_TRAFFIC_SECRET_0", &s.client_traffic_secret0),
        (1 << 5, "SERVER_TRAFFIC_SECRET_0", &s.server_traffic_secret0),
    ];
    let mut out = String::new();
    for (bit, label, secret) in entries {
        if s.flags & bit != 0 {
            out.push_str(&format!("{label} {random} {}\n", hex(&secret[..len])));
        }
    }
    let mut f = file.lock().unwrap();
    let _ = f.write_all(out.as_bytes());
    let _ = f.flush();
}

// ---------------------------------------------------------------------------------------------
// Handles are closed outside their own callback (closing a handle from within its callback
// would free the running closure), on one reaper thread.

enum Closable {
    Stream(usize),
    Connection(usize),
}

static REAPER: OnceLock<Mutex<Sender<Closable>>> = OnceLock::new();

fn reaper() -> &'static Mutex<Sender<Closable>> {
    REAPER.get_or_init(|| {
        let (tx, rx) = channel::<Closable>();
        std::thread::Builder::new()
            .name("msquic-reaper".into())
            .spawn(move || {
                for c in rx {
                    match c {
                        Closable::Stream(h) => drop(unsafe { Stream::from_raw(h as HQUIC) }),
                        Closable::Connection(h) => {
                            drop(unsafe { msquic::Connection::from_raw(h as HQUIC) })
                        }
                    }
                }
            })
            .expect("spawn reaper");
        Mutex::new(tx)
    })
}

pub fn defer_close_stream(h: HQUIC) {
    let _ = reaper().lock().unwrap().send(Closable::Stream(h as usize));
}

pub fn defer_close_connection(h: HQUIC) {
    let _ = reaper()
        .lock()
        .unwrap()
        .send(Closable::Connection(h as usize));
}

// ---------------------------------------------------------------------------------------------

/// Blocks SIGTERM and SIGINT in this thread (and every thread started later, i.e. all MsQuic
/// workers), so that `wait_for_signal` can take them synchronously.
pub fn block_signals() {
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

pub fn wait_for_signal() -> i32 {
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        let mut sig: libc::c_int = 0;
        libc::sigwait(&set, &mut sig);
        sig
    }
}

/// Leaves the process without running MsQuic's library destructor (MsQuicClose would wait for
/// handles still open in other threads).
pub fn exit_now(code: i32) -> ! {
    let _ = std::io::stderr().flush();
    let _ = std::io::stdout().flush();
    unsafe { libc::_exit(code) }
}
