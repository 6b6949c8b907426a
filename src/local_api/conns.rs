//! The node API's open connections and who may keep one (without caps, a few hundred
//! half-open connections of a client without a token take the API down for everyone).
//!
//! Owns: the table of open connections — each one's peer address, whether it has made an
//! authenticated request yet, and the token that closes it. Pure bookkeeping on the agent's
//! one thread: no I/O, no clock (the age of a connection is its id).
//!
//! The rules, checked when a connection is accepted ([`Conns::open`]) and when it first
//! authenticates ([`Conns::authenticate`]):
//! - A connection is *unauthenticated* from its accept (through the TLS handshake) until a
//!   request of it carries the token or a client certificate of `--client-ca-file`.
//! - At most [`Limits::per_address`] unauthenticated connections per peer address: a new one
//!   over it closes that address's oldest unauthenticated one.
//! - At most [`Limits::unauthenticated`] unauthenticated connections in all: a new one over
//!   it closes the oldest unauthenticated connection of the address that holds the most
//!   (so one noisy address pays, not the others).
//! - The newcomer is never the one turned away, and an unauthenticated connection never
//!   closes an authenticated one. Authenticated connections are capped apart
//!   ([`Limits::authenticated`]): over it, the request that would authenticate one more is
//!   answered 503 and its connection closed.
//!
//! kubelet: its server (Go's net/http) has no such limits; picolet runs the API on the
//! same thread as the pods on a board reachable from a LAN, so it bounds what a client
//! without a token can hold.

use std::collections::BTreeMap;
use std::net::IpAddr;

use tokio_util::sync::CancellationToken;

/// The caps (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub unauthenticated: usize,
    pub per_address: usize,
    pub authenticated: usize,
}

/// The node API's: a board's own kubectl, a few scripts and the apiserver are the clients.
pub(crate) const LIMITS: Limits = Limits {
    unauthenticated: 32,
    per_address: 8,
    authenticated: 64,
};

struct Conn {
    ip: IpAddr,
    authenticated: bool,
    close: CancellationToken,
}

/// The open connections, by id (ids grow: a smaller one is older).
#[derive(Default)]
pub(crate) struct Conns {
    next: u64,
    open: BTreeMap<u64, Conn>,
    /// Unauthenticated connections closed to make room, since the start (for `/metrics`
    /// and the tests).
    evicted: u64,
}

impl Conns {
    /// Registers a connection just accepted from `ip`, closing what the caps say must go
    /// first. Returns its id and the token that is cancelled if it must go later.
    pub(crate) fn open(&mut self, ip: IpAddr, limits: Limits) -> (u64, CancellationToken) {
        while self.unauthenticated_of(ip) >= limits.per_address.max(1) {
            self.evict_oldest_of(ip);
        }
        while self.unauthenticated() >= limits.unauthenticated.max(1) {
            let Some(ip) = self.noisiest() else { break };
            self.evict_oldest_of(ip);
        }
        let id = self.next;
        self.next += 1;
        let close = CancellationToken::new();
        self.open.insert(
            id,
            Conn {
                ip,
                authenticated: false,
                close: close.clone(),
            },
        );
        (id, close)
    }

    /// A request of connection `id` authenticated: it is kept from now on. False when the
    /// authenticated connections are at their cap (the caller answers 503 and closes it),
    /// or when the connection was closed meanwhile.
    pub(crate) fn authenticate(&mut self, id: u64, limits: Limits) -> bool {
        let authenticated = self.authenticated();
        match self.open.get_mut(&id) {
            Some(c) if c.authenticated => true,
            Some(c) if authenticated < limits.authenticated => {
                c.authenticated = true;
                true
            }
            _ => false,
        }
    }

    /// Connection `id` ended (or was evicted: then nothing is left to do).
    pub(crate) fn close(&mut self, id: u64) {
        self.open.remove(&id);
    }

    /// Connections open now.
    pub(crate) fn len(&self) -> usize {
        self.open.len()
    }

    pub(crate) fn authenticated(&self) -> usize {
        self.open.values().filter(|c| c.authenticated).count()
    }

    pub(crate) fn unauthenticated(&self) -> usize {
        self.open.len() - self.authenticated()
    }

    /// Unauthenticated connections closed to make room so far.
    pub(crate) fn evicted(&self) -> u64 {
        self.evicted
    }

    fn unauthenticated_of(&self, ip: IpAddr) -> usize {
        self.open
            .values()
            .filter(|c| !c.authenticated && c.ip == ip)
            .count()
    }

    /// The address with the most unauthenticated connections (ties: the one holding the
    /// oldest).
    fn noisiest(&self) -> Option<IpAddr> {
        let mut counts: BTreeMap<IpAddr, (usize, u64)> = BTreeMap::new();
        for (id, c) in self.open.iter().filter(|(_, c)| !c.authenticated) {
            let e = counts.entry(c.ip).or_insert((0, *id));
            e.0 += 1;
        }
        counts
            .into_iter()
            .max_by(|a, b| a.1.0.cmp(&b.1.0).then(b.1.1.cmp(&a.1.1)))
            .map(|(ip, _)| ip)
    }

    fn evict_oldest_of(&mut self, ip: IpAddr) {
        let oldest = self
            .open
            .iter()
            .find(|(_, c)| !c.authenticated && c.ip == ip)
            .map(|(id, _)| *id);
        if let Some(id) = oldest
            && let Some(c) = self.open.remove(&id)
        {
            c.close.cancel();
            self.evicted += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: Limits = Limits {
        unauthenticated: 4,
        per_address: 2,
        authenticated: 2,
    };

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, n])
    }

    #[test]
    fn a_third_from_one_address_closes_its_oldest() {
        let mut c = Conns::default();
        let (a, ta) = c.open(ip(2), L);
        let (_, tb) = c.open(ip(2), L);
        assert!(!ta.is_cancelled() && !tb.is_cancelled());
        let (_, tc) = c.open(ip(2), L);
        assert!(ta.is_cancelled(), "the oldest of that address goes");
        assert!(
            !tb.is_cancelled() && !tc.is_cancelled(),
            "never the newcomer"
        );
        assert_eq!((c.len(), c.evicted()), (2, 1));
        c.close(a); // the evicted task ends: nothing left to do
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn over_the_total_the_noisiest_address_pays() {
        let mut c = Conns::default();
        let (_, quiet) = c.open(ip(1), L);
        let (_, n1) = c.open(ip(2), L);
        let (_, n2) = c.open(ip(2), L);
        let (_, other) = c.open(ip(3), L);
        // Full (4): the next from a fourth address closes 127.0.0.2's oldest, not the
        // older connection of the quiet address.
        let (_, _) = c.open(ip(4), L);
        assert!(n1.is_cancelled());
        assert!(!quiet.is_cancelled() && !n2.is_cancelled() && !other.is_cancelled());
        assert_eq!(c.unauthenticated(), 4);
    }

    #[test]
    fn authenticated_connections_are_kept_and_capped_apart() {
        let mut c = Conns::default();
        let (a, ta) = c.open(ip(1), L);
        assert!(c.authenticate(a, L));
        assert!(c.authenticate(a, L), "again: still");
        // A storm from the same address never closes it.
        let tokens: Vec<_> = (0..20).map(|_| c.open(ip(1), L).1).collect();
        assert!(!ta.is_cancelled());
        assert_eq!(tokens.iter().filter(|t| !t.is_cancelled()).count(), 2);
        assert_eq!((c.authenticated(), c.unauthenticated()), (1, 2));
        // The authenticated cap: one more fits, the next is refused (the caller answers 503).
        let (b, _) = c.open(ip(3), L);
        let (d, _) = c.open(ip(3), L);
        assert!(c.authenticate(b, L));
        assert!(!c.authenticate(d, L));
        // A closed connection frees its place; an unknown id authenticates nothing.
        c.close(a);
        assert!(c.authenticate(d, L));
        assert!(!c.authenticate(999, L));
    }
}
