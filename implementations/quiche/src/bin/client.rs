//! quiche interop client: downloads every URL in $REQUESTS over one QUIC connection,
//! speaking $ALPN ("h3" via quiche::h3, or "hq-interop": "GET /path\r\n" on a raw
//! bidirectional stream), and writes each body to $DOWNLOADS/<last path segment>.
//!
//! The event loop follows quiche's examples/http3-client.rs and tools/apps (mio, one
//! UDP socket, GSO batching of outgoing packets, GRO on receive).

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use qir_quiche::ack::{max_ack_delay_ms, AckPolicy};
use qir_quiche::{log, *};
use quiche::h3::NameValue;

const TOKEN_SOCK: mio::Token = mio::Token(0);

struct Download {
    url: String,
    authority: String,
    path: String,
    target: PathBuf,
    file: Option<BufWriter<File>>,
    received: u64,
    expected: Option<u64>,
    start: Instant,
}

fn main() {
    let requests = qir_harness::parse_requests(&getenv("REQUESTS")).unwrap_or_else(|e| fatal(&e.0));
    let downloads = PathBuf::from(getenv("DOWNLOADS"));
    let certs = getenv("CERTS");
    let alpn = getenv_opt("ALPN").unwrap_or_else(|| "h3".to_string());
    let is_h3 = match alpn.as_str() {
        "h3" => true,
        "hq-interop" => false,
        other => fatal(&format!("unsupported ALPN {other}")),
    };

    let mut pending: VecDeque<Download> = VecDeque::new();
    let n_requests = requests.len();
    for url in requests {
        let Some(name) = url.file_name() else {
            fatal(&format!("URL {:?} has no file name", url.url))
        };
        let target = downloads.join(name);
        pending.push_back(Download {
            url: url.url,
            authority: url.authority,
            path: url.path,
            target,
            file: None,
            received: 0,
            expected: None,
            start: Instant::now(),
        });
    }
    let Some(first) = pending.front() else {
        fatal("REQUESTS is empty")
    };
    let peer: SocketAddr = first
        .authority
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .unwrap_or_else(|| fatal(&format!("cannot resolve {}", first.authority)));

    let (mut config, settings) = make_config(&[alpn.as_bytes()], Some(peer.ip()));
    // Verify the server certificate against $CERTS/ca.pem (and its IP SAN, see make_config).
    config
        .load_verify_locations_from_file(&format!("{certs}/ca.pem"))
        .unwrap_or_else(|e| fatal(&format!("loading {certs}/ca.pem: {e}")));
    config.verify_peer(true);
    // the ACK timer the client advertises is the one its ACK policy keeps (src/ack.rs)
    config.set_max_ack_delay(max_ack_delay_ms());
    apply_flow_control_window(&mut config);
    let mut ack = AckPolicy::from_env();

    let bind: SocketAddr = if peer.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()
    .unwrap();
    let mut poll = mio::Poll::new().unwrap_or_else(|e| fatal(&format!("poll: {e}")));
    let mut events = mio::Events::with_capacity(1024);
    let mut sock = Socket::bind(bind);
    poll.registry()
        .register(
            &mut sock.sock,
            TOKEN_SOCK,
            mio::Interest::READABLE | mio::Interest::WRITABLE,
        )
        .unwrap_or_else(|e| fatal(&format!("register: {e}")));

    let mut scid = [0u8; quiche::MAX_CONN_ID_LEN];
    rand_bytes(&mut scid);
    let scid = quiche::ConnectionId::from_ref(&scid);
    // No SNI: the server is addressed by IP literal.
    let mut conn = quiche::connect(None, &scid, sock.local, peer, &mut config)
        .unwrap_or_else(|e| fatal(&format!("connect: {e}")));
    let keylog = open_keylog();
    let odcid = hex(&conn.destination_id());
    attach_logs(&mut conn, &keylog, &odcid, "client");
    log!(
        "connecting to {peer} from {} ({alpn}, cc={}, ack policy {:?})",
        sock.local,
        settings.cc_runner_name,
        ack
    );

    let start = Instant::now();
    let mut send = SendState::default();
    let mut buf = vec![0u8; 65536];
    let mut out = vec![0u8; MAX_BUF_SIZE];
    let mut body = vec![0u8; 256 * 1024];
    let mut h3: Option<quiche::h3::Connection> = None;
    let h3_config = quiche::h3::Config::new().unwrap_or_else(|e| fatal(&format!("h3 config: {e}")));
    let mut active: HashMap<u64, Download> = HashMap::new();
    let mut next_hq_stream: u64 = 0;
    let mut cipher: Option<&'static str> = None;
    let mut established = false;
    let mut failed: Option<String> = None;
    let mut finished: u64 = 0;
    let mut bytes_total: u64 = 0;
    let mut first_request: Option<Instant> = None;
    let mut continue_write = false;

    let _ = flush(&mut conn, &mut send, &sock, &mut out);

    loop {
        let timeout = if continue_write {
            Some(Duration::ZERO)
        } else {
            // wake up for a held ACK, too
            let held = ack.as_ref().and_then(|a| a.timeout(Instant::now()));
            match (conn.timeout(), held) {
                (Some(t), Some(h)) => Some(t.min(h)),
                (t, h) => t.or(h),
            }
        };
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                fatal(&format!("poll: {e}"));
            }
        }

        loop {
            let (len, from, seg) = match sock.recv(&mut buf) {
                Ok(v) => v,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log!("recv failed: {e}");
                    break;
                }
            };
            let info = quiche::RecvInfo {
                from,
                to: sock.local,
            };
            for pkt in buf[..len].chunks_mut(seg.max(1)) {
                if let Err(e) = conn.recv(pkt, info) {
                    if e != quiche::Error::Done {
                        log!("recv failed: {e:?}");
                    }
                } else if let Some(a) = ack.as_mut().filter(|_| conn.is_established()) {
                    if a.on_packet(Instant::now()) {
                        // the n-th packet: its ACK goes out now, before the rest of the batch
                        let _ = flush(&mut conn, &mut send, &sock, &mut out);
                        a.sent();
                    }
                }
            }
            if let Some(c) = take_handshake_cipher() {
                cipher = Some(c);
            }
        }
        if conn.timeout_instant().is_some_and(|t| t <= Instant::now()) {
            conn.on_timeout();
        }

        if conn.is_established() && !established {
            established = true;
            log!(
                "handshake done after {:.1} ms",
                start.elapsed().as_secs_f64() * 1e3
            );
            print_negotiated(&conn, cipher, &settings);
            if is_h3 {
                match quiche::h3::Connection::with_transport(&mut conn, &h3_config) {
                    Ok(h) => h3 = Some(h),
                    Err(e) => {
                        failed = Some(format!("HTTP/3 setup failed: {e}"));
                        let _ = conn.close(true, 0x101, b"h3 setup failed");
                    }
                }
            }
        }

        let mut requested = false;
        if established && failed.is_none() && !conn.is_closed() {
            // Issue the requests, as many at once as the peer's stream limit allows.
            while let Some(mut d) = pending.pop_front() {
                if conn.peer_streams_left_bidi() == 0 {
                    pending.push_front(d);
                    break;
                }
                let sid = if let Some(h3c) = h3.as_mut() {
                    let req = [
                        quiche::h3::Header::new(b":method", b"GET"),
                        quiche::h3::Header::new(b":scheme", b"https"),
                        quiche::h3::Header::new(b":authority", d.authority.as_bytes()),
                        quiche::h3::Header::new(b":path", d.path.as_bytes()),
                        quiche::h3::Header::new(b"user-agent", b"quiche"),
                    ];
                    match h3c.send_request(&mut conn, &req, true) {
                        Ok(sid) => sid,
                        Err(quiche::h3::Error::StreamBlocked)
                        | Err(quiche::h3::Error::TransportError(quiche::Error::StreamLimit)) => {
                            pending.push_front(d);
                            break;
                        }
                        Err(e) => {
                            failed = Some(format!("GET {}: {e:?}", d.url));
                            break;
                        }
                    }
                } else {
                    let sid = next_hq_stream;
                    let req = format!("GET {}\r\n", d.path);
                    match conn.stream_send(sid, req.as_bytes(), true) {
                        Ok(n) if n == req.len() => {}
                        Ok(_) | Err(quiche::Error::Done) | Err(quiche::Error::StreamLimit) => {
                            // a partial write cannot happen for a new stream with credit
                            pending.push_front(d);
                            break;
                        }
                        Err(e) => {
                            failed = Some(format!("GET {}: {e:?}", d.url));
                            break;
                        }
                    }
                    next_hq_stream += 4;
                    sid
                };
                match File::create(&d.target) {
                    Ok(f) => d.file = Some(BufWriter::with_capacity(CHUNK, f)),
                    Err(e) => {
                        failed = Some(format!("creating {}: {e}", d.target.display()));
                        break;
                    }
                }
                d.start = Instant::now();
                requested = true;
                first_request.get_or_insert(d.start);
                active.insert(sid, d);
            }

            // Receive response bodies.
            let mut done_streams: Vec<(u64, Option<String>)> = Vec::new();
            if let Some(h3c) = h3.as_mut() {
                loop {
                    match h3c.poll(&mut conn) {
                        Ok((sid, quiche::h3::Event::Headers { list, .. })) => {
                            let Some(d) = active.get_mut(&sid) else {
                                continue;
                            };
                            let mut status = None;
                            for h in &list {
                                match h.name() {
                                    b":status" => {
                                        status =
                                            Some(String::from_utf8_lossy(h.value()).to_string())
                                    }
                                    b"content-length" => {
                                        d.expected = std::str::from_utf8(h.value())
                                            .ok()
                                            .and_then(|v| v.parse().ok())
                                    }
                                    _ => (),
                                }
                            }
                            if status.as_deref() != Some("200") {
                                done_streams.push((sid, Some(format!("status {status:?}"))));
                            }
                        }
                        Ok((sid, quiche::h3::Event::Data)) => {
                            let Some(d) = active.get_mut(&sid) else {
                                while let Ok(n) = h3c.recv_body(&mut conn, sid, &mut body) {
                                    if n == 0 {
                                        break;
                                    }
                                }
                                continue;
                            };
                            loop {
                                match h3c.recv_body(&mut conn, sid, &mut body) {
                                    Ok(0) | Err(quiche::h3::Error::Done) => break,
                                    Ok(n) => {
                                        d.received += n as u64;
                                        if let Err(e) =
                                            d.file.as_mut().unwrap().write_all(&body[..n])
                                        {
                                            done_streams.push((sid, Some(format!("write: {e}"))));
                                            break;
                                        }
                                    }
                                    Err(e) => {
                                        done_streams.push((sid, Some(format!("recv_body: {e:?}"))));
                                        break;
                                    }
                                }
                            }
                        }
                        Ok((sid, quiche::h3::Event::Finished)) => {
                            if active.contains_key(&sid) {
                                done_streams.push((sid, None));
                            }
                        }
                        Ok((sid, quiche::h3::Event::Reset(code))) => {
                            if active.contains_key(&sid) {
                                done_streams.push((
                                    sid,
                                    Some(format!("stream reset by peer (0x{code:x})")),
                                ));
                            }
                        }
                        Ok(_) => (),
                        Err(quiche::h3::Error::Done) => break,
                        Err(e) => {
                            failed = Some(format!("HTTP/3 error: {e:?}"));
                            break;
                        }
                    }
                }
            } else {
                let readable: Vec<u64> = conn.readable().collect();
                for sid in readable {
                    loop {
                        match conn.stream_recv(sid, &mut body) {
                            Ok((n, fin)) => {
                                if let Some(d) = active.get_mut(&sid) {
                                    d.received += n as u64;
                                    if let Err(e) = d.file.as_mut().unwrap().write_all(&body[..n]) {
                                        done_streams.push((sid, Some(format!("write: {e}"))));
                                        break;
                                    }
                                }
                                if fin {
                                    done_streams.push((sid, None));
                                    break;
                                }
                            }
                            Err(quiche::Error::Done) => break,
                            Err(quiche::Error::StreamReset(code)) => {
                                done_streams.push((
                                    sid,
                                    Some(format!("stream reset by peer (0x{code:x})")),
                                ));
                                break;
                            }
                            Err(e) => {
                                done_streams.push((sid, Some(format!("stream_recv: {e:?}"))));
                                break;
                            }
                        }
                    }
                }
            }

            for (sid, err) in done_streams {
                let Some(mut d) = active.remove(&sid) else {
                    continue;
                };
                let mut err = err;
                if err.is_none() {
                    if let Some(f) = d.file.take() {
                        if let Err(e) = f.into_inner().map(|_| ()).map_err(|e| e.into_error()) {
                            err = Some(format!("writing {}: {e}", d.target.display()));
                        }
                    }
                }
                if err.is_none() {
                    if let Some(exp) = d.expected {
                        if exp != d.received {
                            err = Some(format!("got {} bytes, expected {exp}", d.received));
                        }
                    }
                }
                match err {
                    Some(e) => {
                        // do not leave a partial download behind
                        drop(d.file.take());
                        let _ = std::fs::remove_file(&d.target);
                        failed.get_or_insert(format!("GET {}: {e}", d.url));
                    }
                    None => {
                        let t = d.start.elapsed().as_secs_f64();
                        log!(
                            "GET {}: {} bytes in {:.3}s ({:.1} Mbit/s)",
                            d.url,
                            d.received,
                            t,
                            d.received as f64 * 8.0 / t.max(1e-9) / 1e6
                        );
                        finished += 1;
                        bytes_total += d.received;
                    }
                }
            }
        }

        let all_done = failed.is_none() && pending.is_empty() && active.is_empty() && established;
        if (all_done || failed.is_some()) && !conn.is_closed() && !conn.is_draining() {
            let code = if h3.is_some() { 0x100 } else { 0 };
            let _ = conn.close(true, if failed.is_some() { code + 1 } else { code }, b"");
        }

        // A held ACK waits (ACK_RATIO); requests and the close always go out at once.
        let closing = all_done || failed.is_some() || conn.is_closed();
        let hold =
            !closing && !requested && ack.as_ref().is_some_and(|a| a.holding(Instant::now()));
        continue_write = !hold
            && match flush(&mut conn, &mut send, &sock, &mut out) {
                Ok(more) => more,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
                Err(e) => {
                    log!("send: {e}");
                    false
                }
            };
        if let Some(a) = ack.as_mut().filter(|_| !hold) {
            a.sent();
        }

        if all_done || failed.is_some() {
            break;
        }
        if conn.is_closed() {
            let why = match (conn.peer_error(), conn.local_error(), conn.is_timed_out()) {
                (Some(e), _, _) => format!("peer closed the connection: {e:?}"),
                (_, Some(e), _) => format!("connection closed: {e:?}"),
                (_, _, true) => "idle timeout".to_string(),
                _ => "connection closed".to_string(),
            };
            failed = Some(why);
            break;
        }
    }

    print_stats(&conn);
    // dropping the connection flushes the qlog writer
    drop(h3);
    drop(conn);
    if let Some(e) = failed {
        log!("error: {e} ({finished} of {n_requests} downloads complete)");
        std::process::exit(1);
    }
    let t = first_request
        .map(|s| s.elapsed().as_secs_f64())
        .unwrap_or(0.0);
    log!(
        "all {finished} downloads complete: {bytes_total} bytes in {t:.3}s ({:.1} Mbit/s)",
        bytes_total as f64 * 8.0 / t.max(1e-9) / 1e6
    );
}
