//! The connection phase on a socket: drives [`Handshake`] (which does the
//! protocol) and upgrades to TLS when the client asks.

use bytes::Bytes;
use tokio_rustls::TlsAcceptor;

use crate::mysql::auth::{Authenticated, Handshake, Progress};
use crate::mysql::packet::Packets;

use super::connection::Connection;
use super::io::Framed;

/// Greets the client and authenticates it locally: no upstream round trip.
/// `None` if the login failed (the ERR is already written) or the client
/// went away.
pub async fn login(
    io: &mut Framed,
    handshake: &mut Handshake,
    tls: Option<&TlsAcceptor>,
) -> Option<Authenticated> {
    let mut out = Packets::default();
    handshake.greeting(&mut out);
    send(io, &mut out).await?;
    exchange(io, handshake, tls).await
}

/// `COM_CHANGE_USER`: the same exchange, started by the command. Returns
/// the new user; on failure the connection must close.
pub async fn change_user(
    conn: &mut Connection,
    seq: u8,
    payload: Bytes,
    out: &mut Packets,
) -> Result<Authenticated, ()> {
    match conn.handshake.change_user(seq, &payload, out) {
        Ok(Progress::Done(auth)) => Ok(auth),
        Ok(Progress::Continue) => {
            send(&mut conn.io, out).await.ok_or(())?;
            exchange(&mut conn.io, &mut conn.handshake, None)
                .await
                .ok_or(())
        }
        Ok(Progress::StartTls) | Err(_) => Err(()),
    }
}

async fn exchange(
    io: &mut Framed,
    handshake: &mut Handshake,
    tls: Option<&TlsAcceptor>,
) -> Option<Authenticated> {
    loop {
        let packet = io.read().await.ok()?;
        let mut out = Packets::default();
        let progress = handshake.on_packet(&packet, &mut out);
        send(io, &mut out).await?;
        match progress {
            Ok(Progress::Continue) => {}
            Ok(Progress::Done(auth)) => return Some(auth),
            Ok(Progress::StartTls) => io.start_tls(tls?).await.ok()?,
            Err(e) => {
                tracing::info!(error = %e, "client login refused");
                return None;
            }
        }
    }
}

async fn send(io: &mut Framed, out: &mut Packets) -> Option<()> {
    io.write(out).await.ok()?;
    io.flush().await.ok()
}
