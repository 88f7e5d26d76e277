//! The relay between the gateway's driver and the backend: a unix socket
//! in a directory only this process's user can enter, which the driver's
//! plaintext pools connect to instead of the backend. Each connection is
//! passed through byte for byte, except that a MariaDB server is asked
//! for extended metadata and the column definitions of its answers are
//! given back without it (see `answers`).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tracing::{debug, warn};

use super::answers::{Answers, Ending, Lost, MAX_PAYLOAD, Record};
use super::attrs::{self, COM_CHANGE_USER, Identify};
use super::retype::{COM_STMT_EXECUTE, COM_STMT_SEND_LONG_DATA, Retype, statement_id};
use super::tap::Tapped;
use super::wire;

/// Result sets kept per connection for the gateway to pair: more than a
/// statement and the gateway's own reads after it ever leave unpaired.
const KEPT: usize = 32;
/// Endings kept per connection, of one command's answer: the gateway
/// takes them as its driver reads each result, but the relay may be ahead
/// of the driver by all that the sockets between them hold (results of a
/// few bytes each). Past this many the rest of the answer's are given up
/// (see [`Kept::endings_lost`]).
const KEPT_ENDINGS: usize = 4096;
/// Bytes a relayed connection reads at a time, each way: all a side holds,
/// but for a packet it must read whole (a column definition, an OK) that
/// is longer, held only until it is passed on. Rows, the only long
/// packets, pass as they arrive, so a result of any size takes no more.
const READ: usize = 16 * 1024;
/// The most a side reads at a time while rows stream: a read that takes
/// all the room it had finds more waiting, so the next may take twice as
/// much, up to this; one that comes back short goes back to [`READ`] and
/// the room is given back. A large result then crosses in a few dozen
/// reads and writes a MiB rather than 64 of each, and an idle connection
/// still holds [`READ`].
const READ_MAX: usize = 128 * 1024;
/// The longest packet the relay reads whole: column definitions, OKs,
/// ERRs and EOFs are far shorter.
const WHOLE_MAX: usize = 1 << 20;

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
            Self::Unix(path) => Box::new(connect_unix(path).await?),
            Self::Tcp(host, port) => {
                let stream = TcpStream::connect((host.as_str(), *port)).await?;
                stream.set_nodelay(true)?;
                Box::new(stream)
            }
        })
    }
}

/// How long a connect to the backend's unix socket waits for room in its
/// listen queue: MySQL's `connect_timeout`.
const BACKLOG_WAIT: Duration = Duration::from_secs(10);

/// Connects to a unix socket as a blocking client's connect does. A
/// listener whose queue is full — a burst of new backend connections
/// with MariaDB (`back_log`, 80 by default) behind on accepting them —
/// fails a non-blocking connect at once with EAGAIN, where libmariadb's
/// waits until the server accepts; the relay then dropped the driver's
/// connection, and a statement waiting for it got 2013 without having
/// been sent. On EAGAIN it connects again, blocking, on a blocking
/// thread: the kernel wakes it when the server accepts, or at
/// [`BACKLOG_WAIT`].
async fn connect_unix(path: &Path) -> io::Result<UnixStream> {
    match UnixStream::connect(path).await {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        done => return done,
    }
    let path = path.to_path_buf();
    let waited = tokio::task::spawn_blocking(move || {
        use socket2::{Domain, SockAddr, Socket, Type};
        let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
        // A unix socket's connect waits up to its send timeout.
        socket.set_write_timeout(Some(BACKLOG_WAIT))?;
        socket.connect(&SockAddr::unix(&path)?)?;
        socket.set_write_timeout(None)?;
        socket.set_nonblocking(true)?;
        Ok::<_, io::Error>(std::os::unix::net::UnixStream::from(socket))
    })
    .await
    .map_err(io::Error::other)??;
    UnixStream::from_std(waited)
}

/// What the relay noted on one connection for the gateway.
#[derive(Default)]
pub struct Kept {
    /// Column definitions of result sets, paired by their columns.
    pub records: VecDeque<Record>,
    /// How each result of the command being answered ended, in order.
    pub endings: VecDeque<Ending>,
    /// More endings came than are kept: the statement's cannot be paired.
    pub endings_lost: bool,
    /// Where the rows of the connection's text result sets go while the
    /// gateway claims them ([`super::RowTap`]).
    pub tap: Option<mpsc::Sender<Tapped>>,
    /// The client's parameter types for the driver's next execute of a
    /// statement ([`Retype`]), taken by the relay when it comes.
    pub retype: Option<Retype>,
    /// The relay asked the server for `CLIENT_SESSION_TRACK`: each
    /// ending carries the server's session-state information.
    pub session_track: bool,
    /// The relay asked for `CLIENT_CONNECT_ATTRS`: a `COM_CHANGE_USER`
    /// can give the connection other attributes ([`Identify`]).
    pub connect_attrs: bool,
    /// The attributes the driver's next `COM_CHANGE_USER` carries, in
    /// place of its own (none), taken by the relay when it comes.
    pub identify: Option<Identify>,
}

impl Kept {
    /// The driver sent a command: it has read the whole answer to the
    /// last (it sends none before), and the gateway has taken the endings
    /// it wanted as the driver read each result.
    fn command(&mut self) {
        self.endings.clear();
        self.endings_lost = false;
    }

    fn note(&mut self, records: &mut Vec<Record>, endings: &mut Vec<Ending>) {
        for record in records.drain(..) {
            if self.records.len() == KEPT {
                self.records.pop_front();
            }
            self.records.push_back(record);
        }
        for ending in endings.drain(..) {
            if self.endings.len() == KEPT_ENDINGS {
                self.endings_lost = true;
            }
            if !self.endings_lost {
                self.endings.push_back(ending);
            }
        }
    }
}

/// The records of each relayed connection, by the server's thread id.
pub type Slot = Arc<Mutex<Kept>>;
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

/// One direction of a relayed connection: what has been read of it and
/// not yet passed on, in a buffer of [`READ`] bytes that grows only while
/// a packet the relay reads whole is longer, or while reads keep finding
/// more waiting (up to [`READ_MAX`]), and shrinks back after.
struct Side<R> {
    inner: R,
    buf: BytesMut,
    /// Bytes of a packet being passed on as they arrive, still to come.
    passing: usize,
    /// The length of the packet at the front, when it must be read whole
    /// and has not all arrived.
    wanted: usize,
    /// How much the next read may take: [`READ`], doubled after each
    /// read that took all its room, up to [`READ_MAX`].
    stretch: usize,
    /// Whether `buf` has more room than [`READ`]: its capacity counts
    /// from what was consumed last, and a buffer emptied by `advance`
    /// would take its whole allocation back at the next `reserve`.
    grown: bool,
    /// The most `buf` ever held room for (what the tests bound).
    peak: usize,
}

impl<R: AsyncRead + Unpin> Side<R> {
    fn new(inner: R) -> Self {
        Self {
            inner,
            buf: BytesMut::with_capacity(READ),
            passing: 0,
            wanted: 0,
            stretch: READ,
            grown: false,
            peak: READ,
        }
    }

    /// Reads what comes next; `false` at the end of the stream.
    /// Cancel-safe: a read either completes into `buf` or does not start.
    async fn fill(&mut self) -> io::Result<bool> {
        let room = self.wanted.max(self.buf.len() + 1).max(self.stretch);
        if self.buf.capacity() < room {
            self.buf.reserve(room - self.buf.len());
            self.grown |= self.buf.capacity() > READ;
        }
        self.peak = self.peak.max(self.buf.capacity());
        let spare = self.buf.capacity() - self.buf.len();
        let read = self.inner.read_buf(&mut self.buf).await?;
        self.stretch = if read == spare {
            (self.stretch * 2).min(READ_MAX)
        } else {
            READ
        };
        if read == 0 {
            // Nothing more will be passed on.
            self.shrink();
        }
        Ok(read > 0)
    }

    /// Gives back the room a long packet or a run of full reads took once
    /// it has been passed on.
    fn shrink(&mut self) {
        if self.grown && self.stretch == READ && self.buf.len() <= READ {
            let mut small = BytesMut::with_capacity(READ);
            small.extend_from_slice(&self.buf);
            self.buf = small;
            self.grown = false;
        }
    }

    /// The next whole packet, header included (the handshake's, which
    /// are short); `None` at the end of the stream.
    async fn packet(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(header) = self.buf.get(..4) {
                let total = 4 + payload_len(header);
                if self.buf.len() >= total {
                    let packet = self.buf[..total].to_vec();
                    self.buf.advance(total);
                    self.wanted = 0;
                    return Ok(Some(packet));
                }
                self.wanted = too_long(total)?;
            }
            if !self.fill().await? {
                return Ok(None);
            }
        }
    }
}

/// The payload length a packet header gives.
fn payload_len(header: &[u8]) -> usize {
    usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16
}

/// `total`, unless it is longer than any packet the relay reads whole.
fn too_long(total: usize) -> io::Result<usize> {
    if total > WHOLE_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a packet too long to be anything but a row",
        ));
    }
    Ok(total)
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "closed during the handshake")
}

async fn relay(client: UnixStream, backend: &Backend, connections: &Connections) -> io::Result<()> {
    let server = backend.connect().await?;
    let (client_read, mut client_write) = client.into_split();
    let (server_read, mut server_write) = tokio::io::split(server);
    let mut from_client = Side::new(client_read);
    let mut from_server = Side::new(server_read);

    let greeting = from_server.packet().await?.ok_or_else(closed)?;
    client_write.write_all(&greeting).await?;
    let hello = wire::greeting(&greeting[4..]);
    let mut response = from_client.packet().await?.ok_or_else(closed)?;
    let framing = match hello {
        Some(hello) if hello.offers_extended && response.len() - 4 < MAX_PAYLOAD => {
            wire::ask_extended(&mut response[4..])
        }
        _ => None,
    };
    // Only where the relay follows the answers, which it must then untrack.
    let session_track = match (&hello, framing) {
        (Some(hello), Some(_)) => wire::ask_session_track(&mut response[4..], hello),
        _ => false,
    };
    let connect_attrs = framing.is_some() && attrs::ask_connect_attrs(&mut response);
    server_write.write_all(&response).await?;
    let (Some(hello), Some(framing)) = (hello, framing) else {
        // Not a MariaDB that sends extended metadata, or a connection the
        // relay cannot read (TLS): passed through as it is.
        client_write.write_all(&from_server.buf).await?;
        server_write.write_all(&from_client.buf).await?;
        drop((from_server.buf, from_client.buf));
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
    {
        let mut kept = slot.lock().expect("not poisoned");
        kept.session_track = session_track;
        kept.connect_attrs = connect_attrs;
    }
    let ended = follow(
        framing,
        session_track,
        &slot,
        &mut from_client,
        &mut from_server,
        &mut client_write,
        &mut server_write,
    )
    .await;
    // A gateway waiting for rows finds the channel closed.
    slot.lock().expect("not poisoned").tap = None;
    let mut map = connections.0.lock().expect("not poisoned");
    if map.get(&id).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
        map.remove(&id);
    }
    ended
}

/// Relays the rest of the connection, rewriting column definitions. Each
/// read is passed on before the next: a side holds at most [`READ`]
/// bytes, or one packet it must read whole.
async fn follow(
    framing: wire::Framing,
    session_track: bool,
    slot: &Slot,
    from_client: &mut Side<impl AsyncRead + Unpin>,
    from_server: &mut Side<impl AsyncRead + Unpin>,
    client_write: &mut (impl AsyncWrite + Unpin),
    server_write: &mut (impl AsyncWrite + Unpin),
) -> io::Result<()> {
    let mut answers = Answers::new(framing);
    answers.session_track = session_track;
    let mut done = Vec::new();
    let mut diversion = Diversion::default();
    // The gateway's end of the current claimed result's rows.
    let mut tap: Option<mpsc::Sender<Tapped>> = None;
    loop {
        tokio::select! {
            more = from_client.fill() => {
                if !more? {
                    return Ok(());
                }
                // Set before the driver writes the execute (or change of
                // user) it is for.
                let (pending, identifying) = {
                    let kept = slot.lock().expect("not poisoned");
                    (kept.retype.is_some(), kept.identify.is_some())
                };
                loop {
                    let mut retype = |payload: &[u8]| retyped(slot, payload);
                    let retype = pending.then_some(&mut retype as &mut ApplyRetype<'_>);
                    let mut identify = |payload: &[u8]| identified(slot, payload);
                    let identify = identifying.then_some(&mut identify as &mut ApplyRetype<'_>);
                    let mut replaced = None;
                    let run = client_bytes(
                        from_client,
                        &mut answers,
                        retype,
                        identify,
                        &mut replaced,
                        &mut diversion.shift,
                    );
                    if std::mem::take(&mut answers.new_command) {
                        slot.lock().expect("not poisoned").command();
                    }
                    server_write.write_all(&from_client.buf[..run.out]).await?;
                    if let Some(packet) = replaced {
                        server_write.write_all(&packet).await?;
                    }
                    from_client.buf.advance(run.used);
                    if run.used == 0 || from_client.buf.is_empty() {
                        break;
                    }
                }
                from_client.shrink();
            }
            more = from_server.fill() => {
                if !more? {
                    return Ok(());
                }
                loop {
                    let mut claimed = || {
                        tap = slot.lock().expect("not poisoned").tap.clone();
                        tap.is_some()
                    };
                    let run = server_bytes(from_server, &mut answers, &mut done, &mut diversion, &mut claimed)
                        .map_err(|lost| {
                            warn!(at = lost.0, "backend relay lost track of the protocol; closing the connection");
                            io::Error::new(io::ErrorKind::InvalidData, lost.0)
                        })?;
                    // Noted before the packets go on: the gateway looks
                    // once its driver has read them.
                    if !done.is_empty() || !answers.endings.is_empty() {
                        slot.lock()
                            .expect("not poisoned")
                            .note(&mut done, &mut answers.endings);
                    }
                    match run.to {
                        To::Driver => client_write.write_all(&from_server.buf[..run.out]).await?,
                        To::Gateway => {
                            // Rows are never rewritten (`out` = `used`):
                            // the buffer's front is handed over, not copied.
                            let rows = from_server.buf.split_to(run.out).freeze();
                            // A gateway that gave up its claim (its
                            // statement was dropped) leaves the rest of
                            // the rows to be dropped here.
                            if let Some(sender) = &tap
                                && !rows.is_empty()
                                && sender.send(Tapped::Rows(rows)).await.is_err()
                            {
                                tap = None;
                            }
                        }
                        To::RowsEnded => {
                            if let Some(sender) = tap.take() {
                                let _ = sender.send(Tapped::End).await;
                            }
                        }
                    }
                    let handed_over = if run.to == To::Gateway { run.out } else { 0 };
                    from_server.buf.advance(run.used - handed_over);
                    if run.used == 0 && run.to != To::RowsEnded {
                        break;
                    }
                }
                from_server.shrink();
            }
        }
    }
}

/// Rewrites an execute's payload as the gateway asked (`None`: as it is).
type ApplyRetype<'a> = dyn FnMut(&[u8]) -> Option<Vec<u8>> + 'a;

/// The gateway's retype for the execute `payload`, taken if it is for
/// that statement, applied (`None`: the packet goes as it is).
fn retyped(slot: &Slot, payload: &[u8]) -> Option<Vec<u8>> {
    let mut kept = slot.lock().expect("not poisoned");
    if payload.first() == Some(&COM_STMT_SEND_LONG_DATA) {
        // The execute will lack that parameter's value: not rewritten.
        kept.retype = None;
        return None;
    }
    let retype = kept
        .retype
        .take_if(|r| Some(r.statement) == statement_id(payload))?;
    retype.execute(payload)
}

/// The driver's `COM_CHANGE_USER` `payload` with the attributes the
/// gateway asked for (taken: one change of user each), if any.
fn identified(slot: &Slot, payload: &[u8]) -> Option<Vec<u8>> {
    let identify = slot.lock().expect("not poisoned").identify.take()?;
    attrs::change_user(payload, &identify)
}

/// Follows what the client sent, all of which is passed on as it is (a
/// command's answer depends on its packet's header and first byte only),
/// but for a COM_STMT_EXECUTE that the gateway asked to retype while one
/// is pending (`retype`, which then gets its payload): read whole and written
/// retyped, never longer, where it was. Returns the run at the front that
/// may go: `out` bytes of the `used` consumed (a rewritten packet ends
/// it). A packet of the largest payload, which continues in the next, is
/// never rewritten, nor an execute after COM_STMT_SEND_LONG_DATA (whose
/// first byte `retype` gets), which lacks that parameter's value. And a
/// COM_CHANGE_USER while the gateway asks it to carry a session's
/// attributes (`identify`): read whole, and its rewrite, longer, goes in
/// `replaced`, to be written after the run (whose `used` covers it).
///
/// A packet within a command (sequence id not 0: a LOCAL INFILE file's,
/// after the server's 0xFB) is numbered up by `shift`, the packets of the
/// answer that went to the gateway: the driver numbered it after the
/// packets it saw, the server counts them all.
fn client_bytes<R>(
    side: &mut Side<R>,
    answers: &mut Answers,
    mut retype: Option<&mut ApplyRetype<'_>>,
    mut identify: Option<&mut ApplyRetype<'_>>,
    replaced: &mut Option<Vec<u8>>,
    shift: &mut u8,
) -> Run {
    let buf = &mut side.buf[..];
    let mut at = 0;
    let pass = |at| Run {
        to: To::Driver,
        out: at,
        used: at,
    };
    side.wanted = 0;
    loop {
        if side.passing > 0 {
            let n = side.passing.min(buf.len() - at);
            at += n;
            side.passing -= n;
            if side.passing > 0 {
                return pass(at);
            }
        }
        let Some(header) = buf.get(at..at + 4) else {
            return pass(at);
        };
        let (len, seq) = (payload_len(header), header[3]);
        let first = match buf.get(at + 4) {
            Some(&first) => Some(first),
            None if len == 0 => None,
            None => return pass(at),
        };
        let total = 4 + len;
        if let Some(identify) = identify
            .as_mut()
            .filter(|_| first == Some(COM_CHANGE_USER) && seq == 0 && len < MAX_PAYLOAD)
        {
            if buf.len() - at < total {
                side.wanted = total;
                return pass(at);
            }
            answers.client_head(seq, len, first);
            if let Some(payload) = identify(&buf[at + 4..at + total])
                && let Ok(new_len) = u32::try_from(payload.len())
                && (new_len as usize) < MAX_PAYLOAD
            {
                let mut packet = Vec::with_capacity(4 + payload.len());
                packet.extend_from_slice(&new_len.to_le_bytes()[..3]);
                packet.push(seq);
                packet.extend_from_slice(&payload);
                *replaced = Some(packet);
                return Run {
                    to: To::Driver,
                    out: at,
                    used: at + total,
                };
            }
            at += total;
            continue;
        }
        if first == Some(COM_STMT_SEND_LONG_DATA)
            && seq == 0
            && let Some(retype) = retype.as_mut()
        {
            // Only its first byte: long data is not read whole.
            retype(&buf[at + 4..at + 5]);
        }
        if let Some(retype) = retype
            .as_mut()
            .filter(|_| first == Some(COM_STMT_EXECUTE) && seq == 0 && len < MAX_PAYLOAD)
        {
            if buf.len() - at < total {
                side.wanted = total;
                return pass(at);
            }
            answers.client_head(seq, len, first);
            if let Some(payload) = retype(&buf[at + 4..at + total])
                && payload.len() <= len
            {
                let new_len = u32::try_from(payload.len()).unwrap_or(0);
                buf[at..at + 3].copy_from_slice(&new_len.to_le_bytes()[..3]);
                buf[at + 4..at + 4 + payload.len()].copy_from_slice(&payload);
                return Run {
                    to: To::Driver,
                    out: at + 4 + payload.len(),
                    used: at + total,
                };
            }
            at += total;
            continue;
        }
        answers.client_head(seq, len, first);
        if seq == 0 {
            // A new command, numbered from 0 by the driver and the server
            // alike: rows diverted in an earlier answer shift nothing of
            // it (a statement of 16 MiB or more goes on in packets 1, 2…).
            *shift = 0;
        } else if *shift != 0 {
            buf[at + 3] = seq.wrapping_add(*shift);
        }
        side.passing = total;
    }
}

/// Where a run of the server's bytes goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum To {
    Driver,
    /// Rows of a result set the gateway claimed ([`RowTap`](super::RowTap)).
    Gateway,
    /// The claimed result's rows ended: its ending goes to the driver next.
    RowsEnded,
}

/// A run of bytes from the front of a side's buffer: `out` bytes (from
/// the front) go `to` their destination, `used` (≥ `out`) were consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    to: To,
    out: usize,
    used: usize,
}

/// The rows being diverted to the gateway, if any, and what that changes
/// in the packets the driver gets.
#[derive(Debug, Default)]
struct Diversion {
    /// The current result set's rows go to the gateway.
    on: bool,
    /// The row passing in pieces (`Side::passing`) goes to the gateway.
    passing_to_gateway: bool,
    /// Packets of this answer that went to the gateway: the driver's
    /// later packets are numbered without them, as the protocol's
    /// sequence ids must follow one another.
    shift: u8,
}

/// Follows what the server sent: rows pass as they arrive (a long one in
/// pieces), other packets are read whole, and column definitions lose
/// their extended type info in place (each gets shorter). Returns the
/// run of bytes at the front that go to one destination; a run that
/// consumed nothing (and is not [`To::RowsEnded`]) needs more bytes.
/// When a text result's rows begin, `claimed` says whether the gateway
/// takes them.
fn server_bytes<R>(
    side: &mut Side<R>,
    answers: &mut Answers,
    done: &mut Vec<Record>,
    diversion: &mut Diversion,
    claimed: &mut dyn FnMut() -> bool,
) -> Result<Run, Lost> {
    let buf = &mut side.buf[..];
    let (mut out, mut at) = (0, 0);
    let mut run_to = None;
    side.wanted = 0;
    let run = |to: Option<To>, out, used| Run {
        to: to.unwrap_or(To::Driver),
        out,
        used,
    };
    loop {
        if side.passing > 0 {
            run_to = Some(if diversion.passing_to_gateway {
                To::Gateway
            } else {
                To::Driver
            });
            let n = side.passing.min(buf.len() - at);
            if out != at {
                buf.copy_within(at..at + n, out);
            }
            (out, at) = (out + n, at + n);
            side.passing -= n;
            if side.passing > 0 {
                return Ok(run(run_to, out, at));
            }
        }
        let Some(header) = buf.get(at..at + 4) else {
            return Ok(run(run_to, out, at));
        };
        let (len, seq) = (payload_len(header), header[3]);
        let total = 4 + len;
        let first = match buf.get(at + 4) {
            Some(&first) if len > 0 => Some(first),
            // Which packet this is shows in its first byte.
            None if len > 0 => return Ok(run(run_to, out, at)),
            _ => None,
        };
        if answers.between_answers() {
            diversion.shift = 0;
        }
        let is_row = answers.is_row(len, first);
        let to = if !diversion.on {
            To::Driver
        } else if is_row {
            To::Gateway
        } else {
            To::RowsEnded
        };
        if run_to.is_some_and(|run_to| run_to != to) {
            return Ok(run(run_to, out, at));
        }
        if to == To::RowsEnded {
            diversion.on = false;
            return Ok(Run {
                to,
                out: 0,
                used: 0,
            });
        }
        run_to = Some(to);
        // Renumbered once taken (below), never twice.
        let mut take = |buf: &mut [u8]| {
            if to == To::Gateway {
                diversion.shift = diversion.shift.wrapping_add(1);
                seq
            } else {
                buf[at + 3] = seq.wrapping_sub(diversion.shift);
                buf[at + 3]
            }
        };
        if buf.len() - at >= total {
            let seq = take(buf);
            let rows_before = answers.in_text_rows();
            match answers.server_packet(&buf[at + 4..at + total], done)? {
                None => {
                    if out != at {
                        buf.copy_within(at..at + total, out);
                    }
                    out += total;
                }
                // Shorter than the packet, so written where it was.
                Some(plain) if plain.len() < len => {
                    let plain_len = u32::try_from(plain.len()).unwrap_or(0);
                    buf[out..out + 3].copy_from_slice(&plain_len.to_le_bytes()[..3]);
                    buf[out + 3] = seq;
                    buf[out + 4..out + 4 + plain.len()].copy_from_slice(&plain);
                    out += 4 + plain.len();
                }
                Some(_) => return Err(Lost("a column definition that did not get shorter")),
            }
            at += total;
            if !rows_before && answers.in_text_rows() {
                // Decided before any row: the whole result's rows go
                // one way.
                diversion.on = claimed();
            }
        } else if is_row {
            take(buf);
            answers.server_row(len);
            diversion.passing_to_gateway = to == To::Gateway;
            side.passing = total;
        } else {
            if total > WHOLE_MAX {
                return Err(Lost("a packet too long to be anything but a row"));
            }
            side.wanted = total;
            return Ok(run(run_to, out, at));
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

    use super::*;

    fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = u32::try_from(payload.len()).unwrap().to_le_bytes()[..3].to_vec();
        p.push(seq);
        p.extend_from_slice(payload);
        p
    }

    /// A column definition of `j`, with `info` as its extended type info
    /// (`None`: without the field, as the driver gets it).
    fn definition(info: Option<&[u8]>) -> Vec<u8> {
        let mut d = Vec::new();
        for name in [&b"def"[..], b"test", b"t", b"t", b"j", b"j"] {
            d.push(name.len() as u8);
            d.extend_from_slice(name);
        }
        if let Some(info) = info {
            d.push(info.len() as u8);
            d.extend_from_slice(info);
        }
        d.extend_from_slice(&[
            0x0c, 0xe0, 0, 0xff, 0xff, 0xff, 0xff, 0xfc, 0x90, 0, 0, 0, 0,
        ]);
        d
    }

    /// A statement and a row of several MiB each cross the relay, which
    /// never holds more than a stretched read of them: the row passes as
    /// it arrives, and the definition before it loses its info.
    #[tokio::test]
    async fn long_packets_pass_through_a_small_buffer() {
        const LONG: usize = 5 << 20;
        let (driver, relay_client) = duplex(64 * 1024);
        let (server, relay_server) = duplex(64 * 1024);
        let (client_read, mut client_write) = tokio::io::split(relay_client);
        let (server_read, mut server_write) = tokio::io::split(relay_server);
        let (mut from_client, mut from_server) = (Side::new(client_read), Side::new(server_read));
        let slot = Slot::default();
        let framing = wire::Framing {
            deprecate_eof: true,
            cache_metadata: false,
        };

        let mut statement = b"\x03SELECT '".to_vec();
        statement.resize(LONG, b'x');
        let mut row = vec![0xfd];
        row.extend_from_slice(&u32::try_from(LONG).unwrap().to_le_bytes()[..3]);
        row.resize(4 + LONG, b'y');
        let ok = [0xfe, 0, 0, 2, 0, 0, 0];
        let answer = |def: Vec<u8>| {
            [
                packet(1, &[1]),
                packet(2, &def),
                packet(3, &row),
                packet(4, &ok),
            ]
            .concat()
        };
        let (sent, expected) = (
            answer(definition(Some(b"\x01\x04json"))),
            answer(definition(None)),
        );

        let script = async move {
            let (mut driver_read, mut driver_write) = tokio::io::split(driver);
            let (mut server_read, mut server_write) = tokio::io::split(server);
            let login_ok = packet(2, &[0, 0, 0, 2, 0, 0, 0]);
            server_write.write_all(&login_ok).await.unwrap();
            let mut got = vec![0; login_ok.len()];
            driver_read.read_exact(&mut got).await.unwrap();
            assert_eq!(got, login_ok);

            let command = packet(0, &statement);
            let (_, arrived) = tokio::join!(driver_write.write_all(&command), async {
                let mut arrived = vec![0; command.len()];
                server_read.read_exact(&mut arrived).await.unwrap();
                arrived
            });
            assert!(arrived == command, "the statement changed on the way");

            let (_, received) = tokio::join!(server_write.write_all(&sent), async {
                let mut received = vec![0; expected.len()];
                driver_read.read_exact(&mut received).await.unwrap();
                received
            });
            assert!(received == expected, "the answer is not the one expected");
            // The driver hangs up: the relay ends.
        };
        let (ended, ()) = tokio::join!(
            follow(
                framing,
                false,
                &slot,
                &mut from_client,
                &mut from_server,
                &mut client_write,
                &mut server_write,
            ),
            script
        );
        ended.unwrap();
        let kept = slot.lock().unwrap();
        assert_eq!(kept.records.len(), 1);
        assert_eq!(kept.records[0].infos, vec![b"\x01\x04json".to_vec()]);
        let ok = Ending {
            status: 2,
            warnings: 0,
            state: None,
        };
        // The result set's (the login's OK is not a result).
        assert_eq!(Vec::from(kept.endings.clone()), vec![ok]);
        for side in [from_client.peak, from_server.peak] {
            assert!(side <= 2 * READ_MAX, "a side held {side} bytes");
            assert!(side > READ, "reads of a long packet stretch: {side}");
        }
        assert_eq!(from_client.buf.capacity(), READ);
        assert!(from_server.buf.capacity() <= READ);
    }

    /// A definition longer than the buffer is read whole, and the room
    /// it took is given back once it has been passed on.
    #[tokio::test]
    async fn a_long_packet_read_whole_gives_its_room_back() {
        let (mut server, relay_server) = duplex(64 * 1024);
        let (server_read, _) = tokio::io::split(relay_server);
        let mut side = Side::new(server_read);
        let mut answers = Answers::new(wire::Framing {
            deprecate_eof: true,
            cache_metadata: false,
        });
        let mut done = Vec::new();
        answers.client_head(0, 9, Some(0x03));
        let mut long_name = definition(Some(b""));
        // A 40 KiB org_name: still one definition.
        long_name.splice(
            15..17,
            [&[0xfc, 0x00, 0xa0][..], &vec![b'n'; 40 * 1024]].concat(),
        );
        let bytes = [
            packet(2, &[0, 0, 0, 2, 0, 0, 0]),
            packet(1, &[1]),
            packet(2, &long_name),
        ]
        .concat();
        server.write_all(&bytes).await.unwrap();
        drop(server);
        let mut took = Took::default();
        while side.fill().await.unwrap() {
            took.runs(
                &mut side,
                &mut answers,
                &mut done,
                &mut Diversion::default(),
                false,
            )
            .unwrap();
        }
        assert_eq!(done.len(), 1, "the definition was read");
        assert_eq!(
            took.driver.len(),
            bytes.len() - 1,
            "only the empty info went"
        );
        assert!(side.peak > 40 * 1024);
        assert_eq!(side.buf.capacity(), READ);
    }

    /// What the relay made of the server's bytes.
    #[derive(Default)]
    struct Took {
        driver: Vec<u8>,
        gateway: Vec<u8>,
        /// Where in `driver` each claimed result's rows ended.
        ends: Vec<usize>,
    }

    impl Took {
        /// Every run `server_bytes` gives of what `side` holds, with
        /// text results' rows `claimed` or not.
        fn runs<R: AsyncRead + Unpin>(
            &mut self,
            side: &mut Side<R>,
            answers: &mut Answers,
            done: &mut Vec<Record>,
            diversion: &mut Diversion,
            claimed: bool,
        ) -> Result<(), Lost> {
            loop {
                let run = server_bytes(side, answers, done, diversion, &mut || claimed)?;
                let bytes = &side.buf[..run.out];
                match run.to {
                    To::Driver => self.driver.extend_from_slice(bytes),
                    To::Gateway => self.gateway.extend_from_slice(bytes),
                    To::RowsEnded => self.ends.push(self.driver.len()),
                }
                side.buf.advance(run.used);
                if run.used == 0 && run.to != To::RowsEnded {
                    side.shrink();
                    return Ok(());
                }
            }
        }
    }

    /// `bytes` from the server through `server_bytes` in pieces of the
    /// given sizes, text results' rows `claimed` or not (`Err`: the relay
    /// lost track).
    fn in_pieces(
        bytes: &[u8],
        sizes: impl Iterator<Item = usize>,
        answers: &mut Answers,
        claimed: bool,
    ) -> Result<Took, Lost> {
        let mut side = Side::new(tokio::io::empty());
        let (mut took, mut done, mut rest) = (Took::default(), Vec::new(), bytes);
        let mut diversion = Diversion::default();
        for size in sizes {
            if rest.is_empty() {
                break;
            }
            let (piece, after) = rest.split_at(size.clamp(1, rest.len()));
            rest = after;
            side.buf.extend_from_slice(piece);
            took.runs(&mut side, answers, &mut done, &mut diversion, claimed)?;
        }
        Ok(took)
    }

    /// However the server's bytes arrive, what goes on is what whole
    /// packets give (`Answers::server_packet`, which its own tests check):
    /// rows passed in pieces, definitions rewritten in place.
    #[test]
    fn pieces_of_any_size_pass_as_whole_packets_do() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(12);
        let framing = wire::Framing {
            deprecate_eof: true,
            cache_metadata: false,
        };
        let mut packets = vec![packet(2, &[0, 0, 0, 2, 0, 0, 0]), packet(1, &[2])];
        packets.push(packet(2, &definition(Some(b"\x01\x04json"))));
        packets.push(packet(3, &definition(Some(b""))));
        for (seq, len) in [(4u8, 3usize), (5, 40_000), (6, 0xfe), (7, 17_000), (8, 5)] {
            let mut row = vec![0xfc];
            row.extend_from_slice(&u16::try_from(len.min(0xffff)).unwrap().to_le_bytes());
            row.resize(3 + len, b'r');
            packets.push(packet(seq, &row));
        }
        packets.push(packet(9, &[0xfe, 0, 0, 2, 0, 0, 0]));
        let bytes = packets.concat();
        let start = |answers: &mut Answers| answers.client_head(0, 9, Some(0x03));
        let mut whole = Answers::new(framing);
        start(&mut whole);
        let expected = in_pieces(&bytes, std::iter::once(bytes.len()), &mut whole, false)
            .unwrap()
            .driver;
        assert!(expected.len() < bytes.len(), "the info was cut out");
        for _ in 0..200 {
            let mut answers = Answers::new(framing);
            start(&mut answers);
            let most = [7, 300, 20_000][rng.random_range(0..3)];
            let sizes = std::iter::repeat_with(|| rng.random_range(1..=most));
            let got = in_pieces(&bytes, sizes, &mut answers, false).unwrap();
            assert!(got.driver == expected, "pieces of at most {most}");
        }
        // Garbage in any pieces: an error or bytes, never a panic.
        for _ in 0..200 {
            let noise: Vec<u8> = (0..rng.random_range(0..3000))
                .map(|_| rng.random())
                .collect();
            let mut answers = Answers::new(framing);
            start(&mut answers);
            let claimed = rng.random();
            let sizes = std::iter::repeat_with(|| rng.random_range(1..=64));
            let _ = in_pieces(&noise, sizes, &mut answers, claimed);
        }
    }

    /// A command's answer as the server sends it, and as the driver and
    /// the gateway should get it when its text results' rows are claimed.
    #[derive(Default)]
    struct Script {
        server: Vec<u8>,
        driver: Vec<u8>,
        gateway: Vec<u8>,
        ends: Vec<usize>,
        seq: u8,
        driver_seq: u8,
    }

    impl Script {
        fn command(&mut self) {
            (self.seq, self.driver_seq) = (0, 0);
        }
        fn for_driver(&mut self, payload: &[u8]) {
            self.seq += 1;
            self.driver_seq += 1;
            self.server.extend(packet(self.seq, payload));
            self.driver.extend(packet(self.driver_seq, payload));
        }
        fn definition(&mut self) {
            self.seq += 1;
            self.driver_seq += 1;
            let info = definition(Some(b"\x01\x04json"));
            self.server.extend(packet(self.seq, &info));
            self.driver
                .extend(packet(self.driver_seq, &definition(None)));
        }
        /// A row's payload, in as many packets as it takes.
        fn row(&mut self, payload: &[u8]) {
            let mut rest = payload;
            loop {
                let n = rest.len().min(MAX_PAYLOAD);
                self.seq = self.seq.wrapping_add(1);
                let p = packet(self.seq, &rest[..n]);
                self.server.extend_from_slice(&p);
                self.gateway.extend(p);
                rest = &rest[n..];
                if n < MAX_PAYLOAD {
                    return;
                }
            }
        }
        fn ending(&mut self, payload: &[u8]) {
            self.ends.push(self.driver.len());
            self.for_driver(payload);
        }
    }

    /// Three result sets of one statement (two rows, none, and rows that
    /// an ERR ends), then the next command's OK, in either framing.
    fn claimed_answer(deprecate_eof: bool, long: usize) -> Script {
        let mut s = Script::default();
        let ending = |status: u16| {
            let [lo, hi] = status.to_le_bytes();
            if deprecate_eof {
                vec![0xfe, 0, 0, lo, hi, 1, 0]
            } else {
                vec![0xfe, 1, 0, lo, hi]
            }
        };
        let eof = |s: &mut Script| {
            if !deprecate_eof {
                s.for_driver(&[0xfe, 0, 0, 2, 0]);
            }
        };
        s.command();
        s.for_driver(&[1]);
        s.definition();
        eof(&mut s);
        s.row(b"\x03abc");
        s.row(b"\x00");
        s.ending(&ending(0x0a));
        s.for_driver(&[1]);
        s.definition();
        eof(&mut s);
        s.ending(&ending(0x0a));
        s.for_driver(&[1]);
        s.definition();
        eof(&mut s);
        // A cell of `long` bytes, its length as the server writes it.
        let mut row = match long {
            ..0x1_0000 => [&[0xfc][..], &(long as u64).to_le_bytes()[..2]].concat(),
            0x1_0000..0x100_0000 => [&[0xfd][..], &(long as u64).to_le_bytes()[..3]].concat(),
            _ => [&[0xfe][..], &(long as u64).to_le_bytes()].concat(),
        };
        row.resize(row.len() + long, b'v');
        s.row(&row);
        s.row(b"\xfb");
        s.ending(b"\xff\x25\x05#70100Query execution was interrupted");
        s.command();
        s.for_driver(&[0, 0, 0, 2, 0, 0, 0]);
        s
    }

    /// Claimed rows go to the gateway as the server sent them, and the
    /// driver gets everything else, numbered without them, however the
    /// bytes arrive; the next command's answer is numbered as sent.
    #[test]
    fn claimed_rows_go_to_the_gateway_and_the_rest_to_the_driver() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(15);
        let start = |deprecate_eof: bool| {
            let mut answers = Answers::new(wire::Framing {
                deprecate_eof,
                cache_metadata: false,
            });
            answers.client_head(0, 9, Some(0x03));
            answers.client_head(0, 1, Some(0x0e));
            answers
        };
        // The login's OK first, as in every connection.
        let login = packet(2, &[0, 0, 0, 2, 0, 0, 0]);
        for round in 0..100 {
            let deprecate_eof = round % 2 == 0;
            let script = claimed_answer(deprecate_eof, rng.random_range(0..60_000));
            let bytes = [&login[..], &script.server].concat();
            let most = [5, 300, 20_000, 1 << 20][round % 4];
            let sizes = std::iter::repeat_with(|| rng.random_range(1..=most));
            let took = in_pieces(&bytes, sizes, &mut start(deprecate_eof), true).unwrap();
            assert!(took.driver[..login.len()] == login[..]);
            assert!(
                took.driver[login.len()..] == script.driver[..],
                "round {round}"
            );
            assert!(took.gateway == script.gateway, "round {round}");
            let ends: Vec<usize> = script.ends.iter().map(|e| e + login.len()).collect();
            assert_eq!(took.ends, ends, "round {round}");
        }
        // A row over 16 MiB: its packets all go to the gateway.
        let script = claimed_answer(true, 2 * MAX_PAYLOAD);
        let bytes = [&login[..], &script.server].concat();
        let took = in_pieces(&bytes, std::iter::repeat(100_000), &mut start(true), true).unwrap();
        assert!(took.driver[login.len()..] == script.driver[..]);
        assert!(took.gateway == script.gateway);
        // Unclaimed: the driver gets it all, as before.
        let took = in_pieces(&bytes, std::iter::repeat(70_000), &mut start(true), false).unwrap();
        assert!(took.gateway.is_empty() && took.ends.is_empty());
        assert_eq!(took.driver.len(), bytes.len() - 3 * 7);
    }

    /// Through the relay's sockets: with the gateway's claim, the driver
    /// reads the answer without its rows and the gateway's tap gets them,
    /// each result's then an end, while the relay holds back the backend
    /// until each side has taken its part.
    #[tokio::test]
    async fn a_claimed_answer_crosses_in_two_parts() {
        use super::super::tap::RowTap;
        let (driver, relay_client) = duplex(64 * 1024);
        let (server, relay_server) = duplex(64 * 1024);
        let (client_read, mut client_write) = tokio::io::split(relay_client);
        let (server_read, mut server_write) = tokio::io::split(relay_server);
        let (mut from_client, mut from_server) = (Side::new(client_read), Side::new(server_read));
        let slot = Slot::default();
        let mut tap = RowTap::claim(&slot);
        let framing = wire::Framing {
            deprecate_eof: true,
            cache_metadata: false,
        };
        let script = claimed_answer(true, 300_000);
        let script_run = async {
            let (mut driver_read, mut driver_write) = tokio::io::split(driver);
            let (mut server_read, mut server_write) = tokio::io::split(server);
            let login_ok = packet(2, &[0, 0, 0, 2, 0, 0, 0]);
            server_write.write_all(&login_ok).await.unwrap();
            let mut got = vec![0; login_ok.len()];
            driver_read.read_exact(&mut got).await.unwrap();
            // The statement, and the next command (COM_PING).
            for command in [packet(0, b"\x03SELECT"), packet(0, b"\x0e")] {
                driver_write.write_all(&command).await.unwrap();
                let mut arrived = vec![0; command.len()];
                server_read.read_exact(&mut arrived).await.unwrap();
            }
            let driver_reads = async {
                let mut received = vec![0; script.driver.len()];
                driver_read.read_exact(&mut received).await.unwrap();
                received
            };
            let gateway_reads = async {
                let (mut rows, mut ends) = (Vec::new(), 0);
                while ends < script.ends.len() {
                    match tap.recv().await.expect("the relay is there") {
                        Tapped::Rows(chunk) => rows.extend_from_slice(&chunk),
                        Tapped::End => ends += 1,
                    }
                }
                rows
            };
            let (_, received, rows) = tokio::join!(
                server_write.write_all(&script.server),
                driver_reads,
                gateway_reads
            );
            let first = received
                .iter()
                .zip(&script.driver)
                .position(|(a, b)| a != b);
            assert!(
                received == script.driver,
                "the driver's part differs at {first:?}: {:?} vs {:?}",
                &received[first.unwrap_or(0).saturating_sub(8)..][..40.min(received.len())],
                &script.driver[first.unwrap_or(0).saturating_sub(8)..][..40.min(received.len())]
            );
            assert!(rows == script.gateway, "the gateway's part");
            drop((driver_read, driver_write));
            // The connection ends: so does the tap.
            assert!(tap.recv().await.is_none());
        };
        let (ended, ()) = tokio::join!(
            async {
                let ended = follow(
                    framing,
                    false,
                    &slot,
                    &mut from_client,
                    &mut from_server,
                    &mut client_write,
                    &mut server_write,
                )
                .await;
                // As `relay` does once `follow` returns.
                slot.lock().unwrap().tap = None;
                ended
            },
            script_run
        );
        ended.unwrap();
    }

    /// The client's bytes go as they came, but for the execute the
    /// gateway asked to retype: read whole, however it arrives, and
    /// written shorter where it was; a command split over packets, or
    /// nothing pending, is never touched.
    #[test]
    fn an_execute_pending_a_retype_is_rewritten_whole() {
        use super::super::retype::ParamType;
        let retype = Retype {
            statement: 7,
            types: vec![Some(ParamType {
                code: 1,
                unsigned: false,
            })],
        };
        let mut execute = vec![0x17, 7, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 8, 0];
        execute.extend_from_slice(&(-2i64).to_le_bytes());
        let want = retype.execute(&execute).unwrap();
        assert_eq!(want.len(), execute.len() - 7);
        let (query, ping) = (packet(0, b"\x03SELECT 1"), packet(0, b"\x0e"));
        let stream = [query.clone(), packet(0, &execute), ping.clone()].concat();
        let expected = [query.clone(), packet(0, &want), ping.clone()].concat();
        for step in 1..stream.len() {
            let mut side = Side::new(tokio::io::empty());
            let mut answers = Answers::new(wire::Framing {
                deprecate_eof: true,
                cache_metadata: false,
            });
            let mut pending = Some(retype.clone());
            let mut sent = Vec::new();
            for piece in stream.chunks(step) {
                side.buf.extend_from_slice(piece);
                loop {
                    let mut apply = |p: &[u8]| pending.take()?.execute(p);
                    let run = client_bytes(
                        &mut side,
                        &mut answers,
                        Some(&mut apply),
                        None,
                        &mut None,
                        &mut 0,
                    );
                    sent.extend_from_slice(&side.buf[..run.out]);
                    side.buf.advance(run.used);
                    if run.used == 0 || side.buf.is_empty() {
                        break;
                    }
                }
                assert!(side.wanted <= 4 + execute.len(), "step {step}");
            }
            assert_eq!(sent, expected, "step {step}");
        }
        // Long data first: the execute lacks a value, and goes as it is.
        let long_data = packet(0, b"\x18\x07\x00\x00\x00\x00\x00data");
        let stream = [long_data, packet(0, &execute)].concat();
        let mut side = Side::new(tokio::io::empty());
        let mut answers = Answers::new(wire::Framing {
            deprecate_eof: true,
            cache_metadata: false,
        });
        let mut pending = Some(retype.clone());
        let mut apply = |p: &[u8]| match p.first() {
            Some(0x18) => pending.take().and(None),
            _ => pending.take()?.execute(p),
        };
        side.buf.extend_from_slice(&stream);
        let run = client_bytes(
            &mut side,
            &mut answers,
            Some(&mut apply),
            None,
            &mut None,
            &mut 0,
        );
        assert_eq!((run.out, run.used), (stream.len(), stream.len()));
        // Nothing pending: as it came.
        let mut side = Side::new(tokio::io::empty());
        let mut answers = Answers::new(wire::Framing {
            deprecate_eof: true,
            cache_metadata: false,
        });
        side.buf.extend_from_slice(&stream);
        let run = client_bytes(&mut side, &mut answers, None, None, &mut None, &mut 0);
        assert_eq!((run.out, run.used), (stream.len(), stream.len()));
        // An execute's bytes in a continuation (sequence 1): passed on.
        let mut apply = |_: &[u8]| -> Option<Vec<u8>> { panic!("not an execute") };
        side.buf.clear();
        side.buf.extend_from_slice(&packet(1, &execute));
        let run = client_bytes(
            &mut side,
            &mut answers,
            Some(&mut apply),
            None,
            &mut None,
            &mut 0,
        );
        assert_eq!(run.used, 4 + execute.len());
    }

    /// A new command after an answer whose rows went to the gateway: its
    /// continuation packets (a statement of 16 MiB or more) keep the
    /// driver's numbers, and the shift is gone; only a packet within the
    /// command that answered (a LOCAL INFILE file's) is renumbered.
    #[test]
    fn a_new_command_is_not_renumbered_by_an_earlier_answers_rows() {
        let mut side = Side::new(tokio::io::empty());
        let mut answers = Answers::new(wire::Framing {
            deprecate_eof: true,
            cache_metadata: false,
        });
        let stream = [packet(0, b"\x03SELECT "), packet(1, b"1")].concat();
        side.buf.extend_from_slice(&stream);
        let mut shift = 3;
        let run = client_bytes(&mut side, &mut answers, None, None, &mut None, &mut shift);
        assert_eq!(run.out, stream.len());
        assert_eq!(shift, 0);
        assert_eq!(
            &side.buf[..stream.len()],
            &stream[..],
            "as the driver numbered it"
        );
        // A file packet while rows of this answer went elsewhere: shifted.
        let mut side = Side::new(tokio::io::empty());
        side.buf.extend_from_slice(&packet(2, b"file bytes"));
        let mut shift = 3;
        client_bytes(&mut side, &mut answers, None, None, &mut None, &mut shift);
        assert_eq!(side.buf[3], 5);
        assert_eq!(shift, 3);
    }
}
