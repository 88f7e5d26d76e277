//! A client's socket as MySQL packets: reads are buffered and framed with
//! [`crate::mysql::packet::decode`], writes go out in whole batches.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use crate::mysql::packet::{self, Packet, PacketError, Packets};

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
    #[error("socket: {0}")]
    Socket(#[from] std::io::Error),
}

pub struct Framed {
    stream: Box<dyn Stream>,
    buf: BytesMut,
    max_packet: usize,
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
        }
    }

    /// The next packet; `Closed` at a clean end of stream.
    pub async fn read(&mut self) -> Result<Packet, IoError> {
        loop {
            if let Some(p) = packet::decode(&mut self.buf, self.max_packet)? {
                return Ok(p);
            }
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                return Err(IoError::Closed);
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
    pub async fn start_tls(&mut self, acceptor: &tokio_rustls::TlsAcceptor) -> Result<(), IoError> {
        let plain = std::mem::replace(&mut self.stream, Box::new(tokio::io::duplex(1).0));
        // Clients send their TLS ClientHello right behind the SSLRequest
        // (PyMySQL does), so it may already sit in the read buffer: it is
        // the start of the TLS stream and goes to the acceptor first.
        // Nothing read before the handshake can reach the command phase
        // as plaintext: rustls takes these bytes as TLS records or fails.
        let early = self.buf.split().freeze();
        let tls = acceptor.accept(Prefixed { early, inner: plain }).await?;
        self.stream = Box::new(tls);
        Ok(())
    }

    pub fn max_packet(&self) -> usize {
        self.max_packet
    }
}

/// A stream whose first bytes were already read: reads return `early`
/// before reading on.
struct Prefixed {
    early: Bytes,
    inner: Box<dyn Stream>,
}

impl AsyncRead for Prefixed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.early.has_remaining() {
            let n = self.early.len().min(buf.remaining());
            buf.put_slice(&self.early[..n]);
            self.early.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
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
    use crate::transport::tls;

    /// The SSLRequest and the ClientHello arrive in one read: the
    /// handshake must still succeed (it failed, at random, for PyMySQL).
    #[tokio::test]
    async fn a_client_hello_read_along_with_the_ssl_request_is_kept() {
        tls::install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("cert.pem");
        let identity = tls::Identity::self_signed(&["localhost".into()], &cert).unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(identity.server_config(&[]).unwrap());
        let roots = tls::roots_from_pem(&cert).unwrap();
        let connector = tokio_rustls::TlsConnector::from(tls::client_config(roots, &[]).unwrap());

        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let ssl_request = [32u8, 0, 0, 1];
        client.write_all(&ssl_request).await.unwrap();
        client.write_all(&[0u8; 32]).await.unwrap();
        let talk = tokio::spawn(async move {
            let name = "localhost".try_into().unwrap();
            let mut tls = connector.connect(name, client).await.unwrap();
            tls.write_all(b"over tls").await.unwrap();
            tls.flush().await.unwrap();
            tls
        });
        // Let the ClientHello land behind the SSLRequest before reading.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let mut framed = Framed::new(Box::new(server), 1 << 20);
        let request = framed.read().await.unwrap();
        assert_eq!(request.payload.len(), 32);
        assert!(!framed.buf.is_empty(), "the ClientHello was read too");
        framed.start_tls(&acceptor).await.expect("handshake");
        let mut got = [0u8; 8];
        framed.stream.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"over tls");
        drop(talk.await.unwrap());
    }
}
