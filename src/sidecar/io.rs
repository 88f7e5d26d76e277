//! A client's socket as MySQL packets: reads are buffered and framed with
//! [`crate::mysql::packet::decode`], writes go out in whole batches.

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

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
        if !self.buf.is_empty() {
            // Bytes sent before the TLS handshake would be injected
            // plaintext; a client does not do that.
            return Err(IoError::Socket(std::io::Error::other(
                "data after SSLRequest before the TLS handshake",
            )));
        }
        let plain = std::mem::replace(&mut self.stream, Box::new(tokio::io::duplex(1).0));
        let tls = acceptor.accept(plain).await?;
        self.stream = Box::new(tls);
        Ok(())
    }

    pub fn max_packet(&self) -> usize {
        self.max_packet
    }
}
