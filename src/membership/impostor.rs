//! A hostile SWIM participant (`swactor util swim-impostor`, hidden), so the tests can
//! attack a real pool from a real process: it claims someone else's (node id, endpoint id)
//! and sends foca datagrams to a target until it is killed.
#![allow(clippy::disallowed_methods)] // a driver: it owns the clock

use std::net::SocketAddr;
use std::time::Duration;

use foca::{AccumulatingRuntime, Foca, PostcardCodec};
use iroh::SecretKey;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::net::UdpSocket;

use super::auth;
use super::swim::{SwimIdentity, seal, tuned_config};
use crate::wire::NodeId;

/// How the impostor attacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImpostorMode {
    /// Plain foca datagrams, as every member sent before membership was authenticated.
    Plain,
    /// Datagrams sealed with a key of its own (not the claimed endpoint's).
    OwnKey,
    /// Envelopes that name the claimed endpoint's key as their signer, signed with its own.
    ForgedSigner,
    /// Waits for one datagram sent to it (e.g. a node's announce to its seeds, genuinely
    /// signed) and replays it to the target over and over.
    Replay,
}

/// Runs the impostor on `socket` until the task is dropped; `claim` is the identity it
/// pretends to be (its `addr` should be the socket's).
pub async fn run(mode: ImpostorMode, claim: SwimIdentity, socket: UdpSocket, target: SocketAddr) {
    let mut buf = vec![0u8; 2048];
    if mode == ImpostorMode::Replay {
        let Ok((n, _)) = socket.recv_from(&mut buf).await else { return };
        let captured = buf[..n].to_vec();
        loop {
            let _ = socket.send_to(&captured, target).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let own_key = SecretKey::from_bytes(&[0x1d; 32]);
    let claimed_key = auth::parse_key_hex(&claim.endpoint_id).unwrap_or([0; 32]);
    let mut foca = Foca::new(claim, tuned_config(4), StdRng::seed_from_u64(1), PostcardCodec);
    let mut rt = AccumulatingRuntime::new();
    let seed = SwimIdentity {
        node_id: NodeId(0),
        addr: target.into(),
        endpoint_id: String::new(),
        bump: 0,
    };
    let mut stamps = auth::StampClock::default();
    loop {
        let _ = foca.announce(seed.clone(), &mut rt);
        while let Some((dst, data)) = rt.to_send() {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
            let bytes = match mode {
                ImpostorMode::OwnKey => seal(&own_key, stamps.next(now), &data),
                ImpostorMode::ForgedSigner => {
                    let mut out = auth::unsigned_envelope(&claimed_key, stamps.next(now), &data);
                    let sig = own_key.sign(&out);
                    out.extend_from_slice(&sig.to_bytes());
                    out
                }
                ImpostorMode::Plain | ImpostorMode::Replay => data.to_vec(),
            };
            if let Some(addr) = dst.addr.udp() {
                let _ = socket.send_to(&bytes, addr).await;
            }
        }
        // Drop whatever foca schedules: the impostor only keeps announcing.
        while rt.to_schedule().is_some() {}
        while rt.to_notify().is_some() {}
        tokio::select! {
            recv = socket.recv_from(&mut buf) => {
                if let Ok((n, _)) = recv {
                    let _ = foca.handle_data(&buf[..n], &mut rt);
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
}
