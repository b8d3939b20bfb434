//! The client's ACK frequency (the runner's ACK_RATIO and MAX_ACK_DELAY_MS).
//!
//! quiche has no ACK threshold or delayed-ACK timer of its own: every `send()` after an
//! ack-eliciting packet arrived carries an ACK frame, so the event loop decides when ACKs go
//! out. With ACK_RATIO=n the client holds its sends until n 1-RTT packets arrived since the last
//! send, or until MAX_ACK_DELAY_MS (default: quiche's advertised max_ack_delay, 25 ms) passed
//! since the first of them; whatever else is pending (flow-control updates) leaves with that ACK.

use std::time::{Duration, Instant};

use crate::{fatal, getenv_opt};

/// quiche's default `max_ack_delay` transport parameter, in ms.
pub const DEFAULT_MAX_ACK_DELAY_MS: u64 = 25;

/// When the client acknowledges: every `ratio`-th packet, at the latest `delay` after the first
/// unacknowledged one.
#[derive(Debug)]
pub struct AckPolicy {
    ratio: u32,
    delay: Duration,
    unacked: u32,
    first_unacked: Option<Instant>,
}

impl AckPolicy {
    /// A policy acknowledging every `ratio`-th packet (>= 1), holding an ACK at most `delay`.
    pub fn new(ratio: u32, delay: Duration) -> AckPolicy {
        AckPolicy {
            ratio: ratio.max(1),
            delay,
            unacked: 0,
            first_unacked: None,
        }
    }

    /// The policy ACK_RATIO asks for (None: unset, the harness sends after every receive batch,
    /// as before); its delay is [`max_ack_delay_ms`].
    pub fn from_env() -> Option<AckPolicy> {
        let ratio = env_number("ACK_RATIO")?;
        let ratio = u32::try_from(ratio)
            .ok()
            .filter(|n| *n >= 1)
            .unwrap_or_else(|| fatal(&format!("ACK_RATIO={ratio}: not between 1 and 2^32-1")));
        Some(AckPolicy::new(
            ratio,
            Duration::from_millis(max_ack_delay_ms()),
        ))
    }

    /// A 1-RTT packet arrived at `now`; true when an ACK is due at once (the n-th packet).
    pub fn on_packet(&mut self, now: Instant) -> bool {
        self.unacked += 1;
        self.first_unacked.get_or_insert(now);
        self.unacked >= self.ratio
    }

    /// Whether the client should hold its sends at `now`: packets wait for their ACK, fewer
    /// than the ratio, and the delay since the first of them has not passed.
    pub fn holding(&self, now: Instant) -> bool {
        self.first_unacked
            .is_some_and(|first| self.unacked < self.ratio && now < first + self.delay)
    }

    /// The client sent (every send carries the pending ACK): start counting anew.
    pub fn sent(&mut self) {
        self.unacked = 0;
        self.first_unacked = None;
    }

    /// How long the event loop may sleep before a held ACK is due (None: nothing held).
    pub fn timeout(&self, now: Instant) -> Option<Duration> {
        self.first_unacked
            .map(|first| (first + self.delay).saturating_duration_since(now))
    }
}

/// MAX_ACK_DELAY_MS in ms, else quiche's default (25 ms): the transport parameter the client
/// advertises and the longest the harness holds an ACK.
pub fn max_ack_delay_ms() -> u64 {
    env_number("MAX_ACK_DELAY_MS").unwrap_or(DEFAULT_MAX_ACK_DELAY_MS)
}

/// A whole number from the environment; None when unset or empty, exit 1 when malformed.
fn env_number(name: &str) -> Option<u64> {
    let value = getenv_opt(name)?;
    Some(
        value
            .trim()
            .parse()
            .unwrap_or_else(|_| fatal(&format!("{name}={value:?}: not a whole number"))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_nth_packet_is_due_at_once() {
        let t = Instant::now();
        let mut p = AckPolicy::new(3, Duration::from_millis(25));
        assert!(!p.on_packet(t) && p.holding(t));
        assert!(!p.on_packet(t) && p.holding(t));
        assert!(p.on_packet(t) && !p.holding(t));
        p.sent();
        assert!(!p.holding(t) && p.timeout(t).is_none());
    }

    #[test]
    fn a_held_ack_is_due_after_the_delay() {
        let t = Instant::now();
        let mut p = AckPolicy::new(10, Duration::from_millis(25));
        p.on_packet(t);
        p.on_packet(t + Duration::from_millis(20));
        assert_eq!(
            p.timeout(t + Duration::from_millis(5)),
            Some(Duration::from_millis(20))
        );
        assert!(p.holding(t + Duration::from_millis(24)));
        assert!(!p.holding(t + Duration::from_millis(25)));
    }

    #[test]
    fn ratio_one_never_holds() {
        let t = Instant::now();
        let mut p = AckPolicy::new(1, Duration::from_millis(25));
        assert!(p.on_packet(t) && !p.holding(t));
    }
}
