//! Shared parts of the s2n-quic interop server and client: the runner's environment, the
//! providers (I/O, limits, congestion control, TLS) and the QIR_NEGOTIATED report.
//!
//! Modelled on s2n-quic's own interop binary (quic/s2n-quic-qns): the default tokio I/O provider
//! (GSO, GRO, recvmmsg/sendmmsg batching), the default TLS provider on Linux (s2n-tls), a
//! current-thread tokio runtime and hq-interop (HTTP/0.9) on bidirectional streams. The contract
//! code all Rust harnesses share (environment, windows, the JSON of the QIR_NEGOTIATED line) is in
//! ../_shared/rust/qir-harness.

use qir_harness::{cipher, env_bytes, CONNECTION_WINDOW, STREAM_WINDOW};
use s2n_quic::provider::{
    event::{events, ConnectionInfo, ConnectionMeta, Subscriber},
    io, limits,
};
use std::{error::Error as StdError, net::SocketAddr};

pub use qir_harness::{env_opt as env, env_required as require};

pub type Error = Box<dyn StdError + Send + Sync>;
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// The only ALPN this harness speaks.
pub const ALPN: &str = qir_harness::ALPN_HQ_INTEROP;

/// Checks ALPN (the runner's choice for this pair): hq-interop only.
pub fn check_alpn() -> Result<()> {
    match env("ALPN").as_deref() {
        None | Some(ALPN) => Ok(()),
        Some(other) => Err(format!("unsupported ALPN {other:?} (only {ALPN})").into()),
    }
}

/// The congestion controllers s2n-quic offers (provider::congestion_controller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cc {
    Cubic,
    Bbr,
}

impl Cc {
    /// CONGESTION_CONTROL: cubic (default) or bbr; anything else (reno) falls back to cubic,
    /// the first entry of supports.congestion_control in meta.yml.
    pub fn from_env() -> Self {
        match env("CONGESTION_CONTROL").as_deref() {
            None | Some("cubic") => Cc::Cubic,
            Some("bbr") => Cc::Bbr,
            Some(other) => {
                eprintln!("s2n-quic: congestion control {other:?} not offered, using cubic");
                Cc::Cubic
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Cc::Cubic => "cubic",
            Cc::Bbr => "bbr",
        }
    }
}

/// CIPHER -> the s2n-tls security policy that restricts TLS 1.3 to that one suite.
///
/// s2n-tls only takes named security policies (no free cipher list). Among them, only
/// TLS_AES_256_GCM_SHA384 can be had alone: "20250414" is TLS 1.3 only with just that suite and
/// accepts P-256 certificates (unlike "20250211" and the RFC 9151 ELB policies, which want
/// P-384). No policy offers TLS_AES_128_GCM_SHA256 or TLS_CHACHA20_POLY1305_SHA256 alone, so
/// those fall back to s2n-quic's default policy (default_tls13: AES-128-GCM preferred).
pub fn security_policy() -> Result<Option<s2n_quic::provider::tls::s2n_tls::security::Policy>> {
    use s2n_quic::provider::tls::s2n_tls::security::Policy;
    match env("CIPHER").as_deref() {
        None => Ok(None),
        Some(cipher::AES_256_GCM_SHA384) => {
            eprintln!(
                "s2n-quic: TLS 1.3 restricted to TLS_AES_256_GCM_SHA384 (s2n-tls policy 20250414)"
            );
            Ok(Some(Policy::from_version("20250414")?))
        }
        Some(other) => {
            eprintln!(
                "s2n-quic: s2n-tls has no security policy restricted to {other:?}, using the default policy"
            );
            Ok(None)
        }
    }
}

/// The default (tokio) I/O provider bound to `addr`, with SOCKET_RCVBUF/SOCKET_SNDBUF, GSO,
/// GRO and the optional PARAM_MAX_MTU applied.
pub fn io_provider(addr: SocketAddr) -> Result<io::Default> {
    let mut b = io::Default::builder().with_receive_address(addr)?;
    if let Some(n) = env_bytes("SOCKET_RCVBUF")? {
        b = b.with_recv_buffer_size(n)?;
    }
    if let Some(n) = env_bytes("SOCKET_SNDBUF")? {
        b = b.with_send_buffer_size(n)?;
    }
    if env("GSO").as_deref() == Some("0") {
        b = b.with_gso(false)?;
    }
    if env("GRO").as_deref() == Some("0") {
        b = b.with_gro(false)?;
    }
    if let Some(mtu) = env("PARAM_MAX_MTU") {
        let mtu: u16 = mtu
            .parse()
            .map_err(|e| format!("PARAM_MAX_MTU={mtu}: {e}"))?;
        b = b.with_max_mtu(mtu)?;
    }
    Ok(b.build()?)
}

/// Generous flow-control windows (s2n-quic's perf tooling sets all windows and the stream send
/// buffer to one data window the same way), or the client's fixed one
/// ([`flow_control_window`]) for the connection and every stream.
pub fn limits() -> Result<limits::Limits> {
    let (connection, stream) = match flow_control_window()? {
        Some(window) => (window, window),
        None => (u64::from(CONNECTION_WINDOW), u64::from(STREAM_WINDOW)),
    };
    Ok(limits::Limits::new()
        .with_data_window(connection)?
        .with_bidirectional_local_data_window(stream)?
        .with_bidirectional_remote_data_window(stream)?
        .with_unidirectional_data_window(stream)?
        .with_max_send_buffer_size(STREAM_WINDOW)?)
}

/// The client's fixed flow-control window (`FLOW_CONTROL_WINDOW`, bytes); None for the server
/// and where it is unset. s2n-quic keeps its windows fixed: it grants the bytes released plus
/// the window (s2n-quic-transport 0.91.0 src/stream/receive_stream.rs and
/// incoming_connection_flow_controller.rs `desired_flow_control_window`), without auto-tuning.
/// Its `Limits` take at most u32::MAX bytes: a larger window cannot be honoured (exit 127).
fn flow_control_window() -> Result<Option<u64>> {
    let Some(value) = env("FLOW_CONTROL_WINDOW").filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    if env("ROLE").as_deref() == Some("server") {
        return Ok(None);
    }
    let bytes: u64 = value
        .trim()
        .parse()
        .map_err(|e| format!("FLOW_CONTROL_WINDOW={value}: {e}"))?;
    if bytes == 0 {
        return Err("FLOW_CONTROL_WINDOW must be above 0".into());
    }
    if bytes > u64::from(u32::MAX) {
        eprintln!(
            "s2n-quic: unsupported FLOW_CONTROL_WINDOW={bytes}: its limits take at most {} bytes",
            u32::MAX
        );
        std::process::exit(127);
    }
    eprintln!("s2n-quic: flow-control window fixed at {bytes} bytes (connection and streams)");
    Ok(Some(bytes))
}

/// Per-connection event context: the cipher suite s2n-quic installs for the 1-RTT keys, and
/// a few counters for the closing summary line.
#[derive(Debug, Default, Clone, Copy)]
pub struct Negotiated {
    pub cipher: Option<&'static str>,
    /// BBR state transitions seen (non-zero only when BBR is the congestion controller)
    pub bbr_state_changes: u64,
    /// the last maximum QUIC datagram size s2n-quic's MTU discovery settled on
    pub mtu: u16,
}

/// Event subscriber that records what the handshake negotiated, and logs the endpoint's
/// platform features (GSO, GRO, MTU) once at start-up and one summary line per connection at
/// its close. No per-packet work.
#[derive(Debug, Default)]
pub struct NegotiatedSubscriber;

impl Subscriber for NegotiatedSubscriber {
    type ConnectionContext = Negotiated;

    fn create_connection_context(
        &mut self,
        _meta: &ConnectionMeta,
        _info: &ConnectionInfo,
    ) -> Self::ConnectionContext {
        Negotiated::default()
    }

    fn on_key_update(
        &mut self,
        context: &mut Self::ConnectionContext,
        _meta: &ConnectionMeta,
        event: &events::KeyUpdate,
    ) {
        // Initial keys are always AES-128-GCM; the handshake and 1-RTT keys use the suite TLS
        // negotiated.
        if matches!(event.key_type, events::KeyType::Initial { .. }) {
            return;
        }
        context.cipher = match event.cipher_suite {
            events::CipherSuite::TLS_AES_128_GCM_SHA256 { .. } => Some(cipher::AES_128_GCM_SHA256),
            events::CipherSuite::TLS_AES_256_GCM_SHA384 { .. } => Some(cipher::AES_256_GCM_SHA384),
            events::CipherSuite::TLS_CHACHA20_POLY1305_SHA256 { .. } => {
                Some(cipher::CHACHA20_POLY1305_SHA256)
            }
            _ => None,
        };
    }

    fn on_bbr_state_changed(
        &mut self,
        context: &mut Self::ConnectionContext,
        _meta: &ConnectionMeta,
        _event: &events::BbrStateChanged,
    ) {
        context.bbr_state_changes += 1;
    }

    fn on_mtu_updated(
        &mut self,
        context: &mut Self::ConnectionContext,
        _meta: &ConnectionMeta,
        event: &events::MtuUpdated,
    ) {
        context.mtu = event.mtu;
    }

    fn on_connection_closed(
        &mut self,
        context: &mut Self::ConnectionContext,
        _meta: &ConnectionMeta,
        event: &events::ConnectionClosed,
    ) {
        eprintln!(
            "s2n-quic: connection closed ({}); max datagram size {}, BBR state changes {}",
            event.error, context.mtu, context.bbr_state_changes
        );
    }

    fn on_platform_feature_configured(
        &mut self,
        _meta: &events::EndpointMeta,
        event: &events::PlatformFeatureConfigured,
    ) {
        eprintln!("s2n-quic: platform feature {:?}", event.configuration);
    }
}

/// Prints the QIR_NEGOTIATED line: ALPN from connection.application_protocol() and the cipher
/// suite from the KeyUpdate event, as s2n-quic reports them.
pub fn report_negotiated(alpn: Option<&[u8]>, negotiated: Option<Negotiated>) {
    qir_harness::Negotiated::new()
        .alpn_bytes(alpn)
        .cipher(negotiated.and_then(|n| n.cipher))
        .print();
}
