//! The relay between the gateway's driver and the backend: a unix socket
//! in a directory only this process's user can enter, which the driver's
//! plaintext pools connect to instead of the backend. Each connection is
//! passed through byte for byte, except that a MariaDB server is asked
//! for extended metadata and the column definitions of its answers are
//! given back without it (see `answers`).

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::task::AbortHandle;
use tracing::{debug, warn};

use super::answers::{Answers, MAX_PAYLOAD, Record};
use super::wire;

/// Result sets kept per connection for the gateway to pair: more than a
/// statement and the gateway's own reads after it ever leave unpaired.
const KEPT: usize = 32;
/// Bytes gathered before they are written on, when more are waiting.
const BATCH: usize = 256 * 1024;

/// Where the backend is.
#[derive(Clone, Debug)]
pub enum Backend {
    Unix(PathBuf),
    Tcp(String, u16),
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

impl Backend {
    async fn connect(&self) -> io::Result<Box<dyn Stream>> {
        Ok(match self {
            Self::Unix(path) => Box::new(UnixStream::connect(path).await?),
            Self::Tcp(host, port) => {
                let stream = TcpStream::connect((host.as_str(), *port)).await?;
                stream.set_nodelay(true)?;
                Box::new(stream)
            }
        })
    }
}

/// The records of each relayed connection, by the server's thread id.
pub type Slot = Arc<Mutex<std::collections::VecDeque<Record>>>;
#[derive(Default)]
pub struct Connections(Mutex<HashMap<u32, Slot>>);

impl Connections {
    /// A new connection's records, under its thread id.
    pub fn register(&self, id: u32) -> Slot {
        let slot = Slot::default();
        self.0
            .lock()
            .expect("not poisoned")
            .insert(id, slot.clone());
        slot
    }

    pub fn slot(&self, id: u32) -> Option<Slot> {
        self.0.lock().expect("not poisoned").get(&id).cloned()
    }
}

/// A running relay; stops and removes its socket when dropped.
pub struct Relay {
    dir: PathBuf,
    socket: PathBuf,
    accept: AbortHandle,
}

impl Relay {
    pub fn start(backend: Backend, connections: Arc<Connections>) -> io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = std::env::temp_dir().join(format!(
            "myquic-gateway-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let socket = dir.join("backend.sock");
        let listener = match UnixListener::bind(&socket) {
            Ok(listener) => listener,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(e);
            }
        };
        let accept = tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((client, _)) => {
                        let backend = backend.clone();
                        let connections = connections.clone();
                        tokio::spawn(async move {
                            if let Err(e) = relay(client, &backend, &connections).await {
                                debug!(error = %e, "backend relay connection ended");
                            }
                        });
                    }
                    Err(e) => warn!(error = %e, "backend relay: accept failed"),
                }
            }
        })
        .abort_handle();
        Ok(Self {
            dir,
            socket,
            accept,
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accept.abort();
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Physical packets off a stream, header included.
struct Packets<R> {
    inner: R,
    buf: BytesMut,
}

impl<R: AsyncRead + Unpin> Packets<R> {
    fn new(inner: R) -> Self {
        Self {
            inner,
            buf: BytesMut::with_capacity(64 * 1024),
        }
    }

    fn take(&mut self) -> Option<BytesMut> {
        let header = self.buf.get(..4)?;
        let len =
            usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
        (self.buf.len() >= 4 + len).then(|| self.buf.split_to(4 + len))
    }

    fn has_packet(&self) -> bool {
        self.buf.get(..4).is_some_and(|h| {
            let len = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
            self.buf.len() >= 4 + len
        })
    }

    /// The next packet; `None` at the end of the stream. Cancel-safe:
    /// what was read stays in the buffer.
    async fn next(&mut self) -> io::Result<Option<BytesMut>> {
        loop {
            if let Some(packet) = self.take() {
                return Ok(Some(packet));
            }
            self.buf.reserve(64 * 1024);
            if self.inner.read_buf(&mut self.buf).await? == 0 {
                return Ok(None);
            }
        }
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "closed during the handshake")
}

async fn relay(client: UnixStream, backend: &Backend, connections: &Connections) -> io::Result<()> {
    let server = backend.connect().await?;
    let (client_read, mut client_write) = client.into_split();
    let (server_read, mut server_write) = tokio::io::split(server);
    let mut from_client = Packets::new(client_read);
    let mut from_server = Packets::new(server_read);

    let greeting = from_server.next().await?.ok_or_else(closed)?;
    client_write.write_all(&greeting).await?;
    let hello = wire::greeting(&greeting[4..]);
    let mut response = from_client.next().await?.ok_or_else(closed)?;
    let framing = match hello {
        Some(hello) if hello.offers_extended && response.len() - 4 < MAX_PAYLOAD => {
            wire::ask_extended(&mut response[4..])
        }
        _ => None,
    };
    server_write.write_all(&response).await?;
    let (Some(hello), Some(framing)) = (hello, framing) else {
        // Not a MariaDB that sends extended metadata, or a connection the
        // relay cannot read (TLS): passed through as it is.
        client_write.write_all(&from_server.buf).await?;
        server_write.write_all(&from_client.buf).await?;
        let up = tokio::io::copy(&mut from_client.inner, &mut server_write);
        let down = tokio::io::copy(&mut from_server.inner, &mut client_write);
        tokio::select! {
            r = up => r?,
            r = down => r?,
        };
        return Ok(());
    };

    let id = hello.connection_id;
    let slot = connections.register(id);
    let ended = follow(
        framing,
        &slot,
        &mut from_client,
        &mut from_server,
        &mut client_write,
        &mut server_write,
    )
    .await;
    let mut map = connections.0.lock().expect("not poisoned");
    if map.get(&id).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
        map.remove(&id);
    }
    ended
}

/// Relays the rest of the connection, rewriting column definitions.
async fn follow(
    framing: wire::Framing,
    slot: &Slot,
    from_client: &mut Packets<impl AsyncRead + Unpin>,
    from_server: &mut Packets<impl AsyncRead + Unpin>,
    client_write: &mut (impl AsyncWrite + Unpin),
    server_write: &mut (impl AsyncWrite + Unpin),
) -> io::Result<()> {
    let mut answers = Answers::new(framing);
    let mut to_client = Vec::with_capacity(BATCH);
    let mut to_server = Vec::new();
    let mut done = Vec::new();
    loop {
        tokio::select! {
            packet = from_client.next() => {
                let Some(packet) = packet? else { return Ok(()) };
                answers.client_packet(packet[3], &packet[4..]);
                to_server.extend_from_slice(&packet);
                if !from_client.has_packet() || to_server.len() >= BATCH {
                    server_write.write_all(&to_server).await?;
                    to_server.clear();
                }
            }
            packet = from_server.next() => {
                let Some(packet) = packet? else {
                    client_write.write_all(&to_client).await?;
                    return Ok(());
                };
                match answers.server_packet(&packet[4..], &mut done) {
                    Ok(None) => to_client.extend_from_slice(&packet),
                    Ok(Some(payload)) => {
                        let len = u32::try_from(payload.len()).expect("shorter than the packet");
                        to_client.extend_from_slice(&len.to_le_bytes()[..3]);
                        to_client.push(packet[3]);
                        to_client.extend_from_slice(&payload);
                    }
                    Err(lost) => {
                        warn!(at = lost.0, "backend relay lost track of the protocol; closing the connection");
                        return Err(io::Error::new(io::ErrorKind::InvalidData, lost.0));
                    }
                }
                if !done.is_empty() {
                    let mut kept = slot.lock().expect("not poisoned");
                    for record in done.drain(..) {
                        if kept.len() == KEPT {
                            kept.pop_front();
                        }
                        kept.push_back(record);
                    }
                }
                if !from_server.has_packet() || to_client.len() >= BATCH {
                    client_write.write_all(&to_client).await?;
                    to_client.clear();
                }
            }
        }
    }
}
