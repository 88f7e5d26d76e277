//! The connection phase on a socket: drives [`Handshake`] (which does the
//! protocol) and upgrades to TLS when the client asks.

use bytes::Bytes;
use tokio_rustls::TlsAcceptor;

use crate::mysql::auth::{Authenticated, Handshake, Progress};
use crate::mysql::packet::{PacketError, Packets};
use crate::mysql::response;

use super::errors;
use super::io::{Framed, IoError};

/// Greets the client and authenticates it locally: no upstream round trip.
/// `None` if the login failed (the ERR is already written) or the client
/// went away. The caller bounds its time (`login_timeout`) and the size
/// of the packets it reads (`LOGIN_MAX_PACKET`). The last packets (the OK
/// that ends the login) are returned unsent: the caller may still have to
/// refuse the login's default database in its place.
pub async fn login(
    io: &mut Framed,
    handshake: &mut Handshake,
    tls: Option<&TlsAcceptor>,
) -> Option<(Authenticated, Packets)> {
    let mut out = Packets::default();
    handshake.greeting(&mut out);
    send(io, &mut out).await?;
    exchange(io, handshake, tls).await
}

/// `COM_CHANGE_USER`: the same exchange, started by the command. Returns
/// the new user; on failure the connection must close.
pub async fn change_user(
    io: &mut Framed,
    handshake: &mut Handshake,
    seq: u8,
    payload: Bytes,
    out: &mut Packets,
) -> Result<Authenticated, ()> {
    match handshake.change_user(seq, &payload, out) {
        Ok(Progress::Done(auth)) => Ok(auth),
        Ok(Progress::Continue) => {
            send(io, out).await.ok_or(())?;
            let (auth, mut ok) = exchange(io, handshake, None).await.ok_or(())?;
            send(io, &mut ok).await.ok_or(())?;
            Ok(auth)
        }
        Ok(Progress::StartTls) | Err(_) => Err(()),
    }
}

async fn exchange(
    io: &mut Framed,
    handshake: &mut Handshake,
    tls: Option<&TlsAcceptor>,
) -> Option<(Authenticated, Packets)> {
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
        if let Ok(Progress::Done(auth)) = progress {
            return Some((auth, out));
        }
        send(io, &mut out).await?;
        match progress {
            Ok(Progress::Continue) | Ok(Progress::Done(_)) => {}
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

/// Ends a login: its final OK, or, if the default database it named
/// cannot be used, the backend's error in the OK's place (what a server
/// answers), after which the connection closes.
pub async fn finish(
    io: &mut Framed,
    mut ok: Packets,
    database: Result<(), crate::mysql::MysqlError>,
) -> Option<()> {
    if let Err(e) = &database {
        if !ok.drop_last() {
            return None;
        }
        response::err(&mut ok, e);
    }
    send(io, &mut ok).await?;
    database.ok()
}
