//! A client's socket as MySQL packets: reads are buffered and framed with
//! [`crate::mysql::packet::decode`], writes go out in whole batches.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use crate::mysql::packet::{self, Packet, PacketError, Packets};
use crate::translate::connection_status::NegotiatedTls;

use super::budget::{Charge, ConnectionBudget, Exceeded};

/// Any stream a client connects over: TCP, a unix socket, or TLS on
/// either.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("client closed the connection")]
    Closed,
    #[error(transparent)]
    Packet(#[from] PacketError),
    /// A packet being read did not fit in the process's memory budget.
    #[error("the packet being read does not fit in the sidecar's memory budget")]
    OverBudget(Exceeded),
    #[error("socket: {0}")]
    Socket(#[from] std::io::Error),
}

pub struct Framed {
    /// What is buffered, charged to the process's memory budget once the
    /// client has logged in (before, packets are small). First: given back
    /// before the socket closes, so a client that sees the close may count
    /// on it.
    charge: Option<Charge>,
    stream: Box<dyn Stream>,
    buf: BytesMut,
    max_packet: usize,
    /// The client's TLS session, once it started one.
    tls: Option<NegotiatedTls>,
}

/// Bytes read ahead while a command runs are kept (clients may pipeline
/// their next command), up to this much.
const READ_AHEAD_LIMIT: usize = 1 << 20;

impl Framed {
    pub fn new(stream: Box<dyn Stream>, max_packet: usize) -> Self {
        Self {
            stream,
            buf: BytesMut::with_capacity(16 * 1024),
            max_packet,
            charge: None,
            tls: None,
        }
    }

    /// The client's TLS session (`None`: plaintext).
    pub fn tls(&self) -> Option<&NegotiatedTls> {
        self.tls.as_ref()
    }

    /// Charges what is buffered from now on to `budget`'s process.
    pub fn charge_to(&mut self, budget: &ConnectionBudget) {
        self.charge = Some(budget.process_charge());
    }

    /// The next packet; `Closed` at a clean end of stream.
    pub async fn read(&mut self) -> Result<Packet, IoError> {
        loop {
            if let Some(p) = packet::decode(&mut self.buf, self.max_packet)? {
                if let Some(charge) = &mut self.charge {
                    // Smaller: never refused.
                    let _ = charge.set(self.buf.len());
                }
                return Ok(p);
            }
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                return Err(IoError::Closed);
            }
            if let Some(charge) = &mut self.charge {
                charge.set(self.buf.len()).map_err(IoError::OverBudget)?;
            }
        }
    }

    pub async fn write(&mut self, packets: &mut Packets) -> Result<(), IoError> {
        if !packets.is_empty() {
            let bytes = packets.take();
            self.stream.write_all(&bytes).await?;
        }
        Ok(())
    }

    pub async fn flush(&mut self) -> Result<(), IoError> {
        self.stream.flush().await?;
        Ok(())
    }

    /// Resolves when the client hangs up while a command runs; bytes it
    /// sends meanwhile are kept for later. Never resolves once the
    /// read-ahead limit is reached (the client waits for us anyway).
    pub async fn hangup(&mut self) -> IoError {
        loop {
            if self.buf.len() >= READ_AHEAD_LIMIT {
                return std::future::pending().await;
            }
            match self.stream.read_buf(&mut self.buf).await {
                Ok(0) => return IoError::Closed,
                Ok(_) => continue,
                Err(e) => return IoError::Socket(e),
            }
        }
    }

    /// Upgrades the socket to TLS (after the client's SSLRequest).
    ///
    /// Clients send their TLS ClientHello right behind the SSLRequest,
    /// without waiting for an answer (go-sql-driver and the mariadb CLI
    /// do), so both often arrive in one read: whatever is buffered is
    /// the start of the TLS handshake and goes to the acceptor first.
    /// Nothing buffered is ever read as plaintext MySQL.
    pub async fn start_tls(&mut self, acceptor: &tokio_rustls::TlsAcceptor) -> Result<(), IoError> {
        let plain = std::mem::replace(&mut self.stream, Box::new(tokio::io::duplex(1).0));
        let prefixed = Prefixed {
            prefix: self.buf.split(),
            inner: plain,
        };
        let tls = acceptor.accept(prefixed).await?;
        self.tls = Some(super::front_tls::negotiated(tls.get_ref().1));
        self.stream = Box::new(tls);
        Ok(())
    }

    pub fn max_packet(&self) -> usize {
        self.max_packet
    }

    /// Raises (or lowers) the largest packet accepted: small until the
    /// client has logged in.
    pub fn set_max_packet(&mut self, max_packet: usize) {
        self.max_packet = max_packet;
    }
}

/// A stream that first yields bytes already read from it.
struct Prefixed<S> {
    prefix: BytesMut,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.prefix.is_empty() {
            return Pin::new(&mut self.inner).poll_read(cx, buf);
        }
        let n = self.prefix.len().min(buf.remaining());
        buf.put_slice(&self.prefix[..n]);
        self.prefix.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn prefixed_yields_the_buffered_bytes_then_the_stream() {
        let (mut client, server) = tokio::io::duplex(64);
        client.write_all(b" world").await.unwrap();
        drop(client);
        let mut s = Prefixed {
            prefix: BytesMut::from(&b"hello"[..]),
            inner: server,
        };
        let mut all = Vec::new();
        s.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"hello world");
    }

    /// The SSLRequest and the ClientHello in one read, as go-sql-driver
    /// and the mariadb CLI send them: the handshake still completes.
    #[tokio::test]
    async fn tls_starts_when_the_client_hello_is_already_buffered() {
        use crate::transport::tls::{Identity, client_config, roots_from_pem};
        let dir = tempfile::tempdir().unwrap();
        let pem = dir.path().join("cert.pem");
        let identity = Identity::self_signed(&[], &pem).unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(identity.server_config(&[]).unwrap());
        let connector = tokio_rustls::TlsConnector::from(
            client_config(roots_from_pem(&pem).unwrap(), &[]).unwrap(),
        );
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let mut framed = Framed::new(Box::new(server), 1 << 20);
        // join! polls the client first: its SSLRequest and ClientHello are
        // both in the pipe before the server reads at all.
        let (client_side, server_side) = tokio::join!(
            async {
                client.write_all(&[1, 0, 0, 1, 0]).await.unwrap();
                let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
                let mut tls = connector.connect(name, client).await.unwrap();
                tls.write_all(b"secret").await.unwrap();
                tls.flush().await.unwrap();
                tls
            },
            async {
                let request = framed.read().await.unwrap();
                assert!(!framed.buf.is_empty(), "the ClientHello arrived with it");
                framed.start_tls(&acceptor).await.unwrap();
                let mut got = [0u8; 6];
                framed.stream.read_exact(&mut got).await.unwrap();
                (request, got)
            }
        );
        drop(client_side);
        assert_eq!(&server_side.0.payload[..], &[0]);
        assert_eq!(&server_side.1, b"secret");
    }
}
