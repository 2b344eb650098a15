//! The client's address, as the front door finds it (`server::api_guard`) and every
//! limit keys on it (rate limits, guessing limits, sign-up challenges, live feeds).

/// The client's address as the server trusts it (the socket's peer, or what the
/// trusted proxy says), set on every request before any handler runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientIp(pub std::net::IpAddr);

impl ClientIp {
    /// What limits key this caller on: an IPv4 address as it is, an IPv6 one by its
    /// /64 (the block one subscriber gets, which they may rotate through at will).
    pub fn block(self) -> std::net::IpAddr {
        match self.0 {
            std::net::IpAddr::V4(_) => self.0,
            std::net::IpAddr::V6(v6) => std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1)).into(),
        }
    }

    /// An IPv6 caller's /48 (what one site, or one customer of a provider, commonly
    /// holds: 65,536 /64s), for limits a caller could otherwise spread over its /64s;
    /// none for IPv4 (a carrier's NAT puts many shoppers behind one address, and
    /// neighbouring addresses belong to others).
    pub fn network(self) -> Option<std::net::IpAddr> {
        match self.0 {
            std::net::IpAddr::V4(_) => None,
            std::net::IpAddr::V6(v6) => Some(std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 80) - 1)).into()),
        }
    }
}
