//! The connection phase on a socket: drives [`Handshake`] (which does the
//! protocol) and upgrades to TLS when the client asks.

use bytes::Bytes;
use tokio_rustls::TlsAcceptor;

use crate::mysql::auth::{Authenticated, Handshake, Progress};
use crate::mysql::packet::{PacketError, Packets};
use crate::mysql::response;

use super::connection::Connection;
use super::errors;
use super::io::{Framed, IoError};

/// Greets the client and authenticates it locally: no upstream round trip.
/// `None` if the login failed (the ERR is already written) or the client
/// went away. The caller bounds its time (`login_timeout`) and the size
/// of the packets it reads (`LOGIN_MAX_PACKET`).
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
    let auth = match conn.handshake.change_user(seq, &payload, out) {
        Ok(Progress::Done(auth)) => auth,
        Ok(Progress::Continue) => {
            send(&mut conn.io, out).await.ok_or(())?;
            exchange(&mut conn.io, &mut conn.handshake, None)
                .await
                .ok_or(())?
        }
        Ok(Progress::StartTls) | Err(_) => return Err(()),
    };
    // KILL ownership follows the connection's new user.
    conn.registration.logged_in(&auth.user);
    Ok(auth)
}

async fn exchange(
    io: &mut Framed,
    handshake: &mut Handshake,
    tls: Option<&TlsAcceptor>,
) -> Option<Authenticated> {
    loop {
        let packet = match io.read().await {
            Ok(packet) => packet,
            Err(IoError::Packet(e)) => {
                refuse_oversized(io, &e).await;
                return None;
            }
            Err(_) => return None,
        };
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

/// ERR 1153 for a packet larger than login allows (refused from its
/// header, never buffered); the connection then closes.
async fn refuse_oversized(io: &mut Framed, e: &PacketError) {
    tracing::info!(error = %e, "client login refused");
    let PacketError::TooLarge { seq, .. } = e;
    let mut out = Packets::reply_to(*seq);
    response::err(&mut out, &errors::login_packet_too_large(e));
    let _ = send(io, &mut out).await;
}

async fn send(io: &mut Framed, out: &mut Packets) -> Option<()> {
    io.write(out).await.ok()?;
    io.flush().await.ok()
}
