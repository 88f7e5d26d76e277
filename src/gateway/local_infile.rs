//! `LOAD DATA LOCAL INFILE` through the gateway.
//!
//! The client is asked for its file only when, and with the name that,
//! the backend asks: the statement runs as any other, and when the
//! backend's 0xFB packet comes, mysql_async calls [`handler`], which
//! finds the request's [`Asker`] (a task-local of the request running the
//! statement), tells the client (a `LocalInfileRequest` message in the
//! statement's `StreamExecute`) and hands the driver a stream fed by the
//! client's `local_infile_data` requests ([`Loads::feed`]). The statement
//! keeps its session and backend connection meanwhile; its result ends
//! the `StreamExecute` as usual.
//!
//! Bounded: a part is taken from its request only when the driver wants
//! the next (a channel of one), and each request is answered only then,
//! so a load holds at most two parts (≤ 1 MiB each from the sidecar)
//! whatever the file's size.
//!
//! Never a partial file: the driver ends the file at the backend with an
//! empty packet whenever the stream ends, even with an error. So a load
//! the client abandons (it went away, broke the protocol, or sent nothing
//! for [`PART_TIMEOUT`]) first has its backend connection killed (`KILL
//! CONNECTION`, as when a direct client vanishes: the server aborts the
//! statement, InnoDB rolls it back), and only then does the stream end;
//! if the kill fails the stream never ends (the connection is given up
//! with the request, never told the file ended).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use mysql_async::prelude::Queryable;
use rand::RngCore;
use tokio::sync::{mpsc, oneshot};
use tracing::{error, warn};

use crate::api::connect::put_message_with;
use crate::api::effort::Effort;
use crate::api::pb;
use crate::api::{Codec, Encoding};
use crate::mysql::MysqlError;
pub use crate::translate::errors::local_infile_disabled as disabled;

/// How long a load waits for the client's next part, as MariaDB's default
/// `net_read_timeout` waits for a direct client's next packet.
pub const PART_TIMEOUT: Duration = Duration::from_secs(30);

/// What runs at the backend in place of a `LOAD DATA LOCAL` whose client
/// may not send a file: the error the server answers such a client (4166,
/// [`disabled`]), raised there so that `SHOW WARNINGS` and
/// `@@error_count` show it as directly (tried on 10.11: the same row).
pub const REFUSAL: &[u8] = b"SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO = 4166, MESSAGE_TEXT = 'The used command is not allowed because the MariaDB server or client has disabled the local infile capability'";

/// The size of a part as our sidecar sends them (its `PART_BYTES`): what
/// a load's packets may grow the backend connection's network buffer to.
pub const PART_HINT: usize = 1 << 20;

/// How long the kill of an abandoned load's connection may take.
const KILL_TIMEOUT: Duration = Duration::from_secs(10);

/// One part of a client's file, and who to tell once it is taken.
struct Part {
    data: Bytes,
    end: bool,
    taken: oneshot::Sender<()>,
}

type Key = (String, Bytes);

/// Loads waiting for their client's parts, by credential and load id.
#[derive(Default)]
pub struct Loads {
    waiting: Mutex<HashMap<Key, mpsc::Sender<Part>>>,
}

impl Loads {
    fn insert(&self, key: Key, tx: mpsc::Sender<Part>) {
        self.waiting.lock().expect("not poisoned").insert(key, tx);
    }

    fn remove(&self, key: &Key) -> Option<mpsc::Sender<Part>> {
        self.waiting.lock().expect("not poisoned").remove(key)
    }

    fn sender(&self, key: &Key) -> Option<mpsc::Sender<Part>> {
        self.waiting.lock().expect("not poisoned").get(key).cloned()
    }

    /// A `local_infile_data` request of `owner`: hands its part to the
    /// load and answers once the driver has taken it (or aborts the load).
    pub async fn feed(&self, owner: &str, data: pb::LocalInfileData) -> Result<(), MysqlError> {
        let key = (owner.to_string(), data.load.clone());
        if data.abort {
            // Its stream sees the channel closed: the load is killed.
            self.remove(&key);
            return Ok(());
        }
        let Some(tx) = self.sender(&key) else {
            return Err(no_load());
        };
        let (taken, was_taken) = oneshot::channel();
        let part = Part {
            data: data.data,
            end: data.end,
            taken,
        };
        let handed = async {
            tx.send(part).await.map_err(|_| ())?;
            was_taken.await.map_err(|_| ())
        };
        match tokio::time::timeout(PART_TIMEOUT, handed).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(no_load()),
        }
    }
}

/// A part for a load that is gone (ended, killed, timed out).
fn no_load() -> MysqlError {
    MysqlError {
        code: 2013,
        state: "HY000".into(),
        message: "Lost connection to backend MySQL server during query: the LOAD DATA LOCAL INFILE this file was for is no longer running".into(),
    }
}

/// Where a request's messages go, for the one that asks for a file: the
/// `StreamExecute`'s channel (a side way: the sink is the driver's).
pub struct Side {
    pub codec: Codec,
    pub encoding: Encoding,
    pub tx: mpsc::Sender<Bytes>,
}

impl Side {
    /// Sends `message` as an envelope of its own; false if the client is
    /// gone.
    async fn send(&self, message: &pb::ExecuteResponse) -> bool {
        let mut out = BytesMut::new();
        // Small: never compressed.
        put_message_with(
            &mut out,
            self.codec,
            self.encoding,
            usize::MAX,
            || Effort::None,
            message,
        );
        self.tx.send(out.freeze()).await.is_ok()
    }
}

/// What a statement whose client can send a file brings to the driver's
/// [`handler`].
pub struct Asker {
    pub owner: String,
    pub loads: Arc<Loads>,
    pub side: Side,
    /// Resolves when the client of the statement's request went away.
    pub gone: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
    /// The backend connection the statement runs on, and a pool to kill
    /// it from.
    pub pool: mysql_async::Pool,
    pub conn_id: u32,
}

tokio::task_local! {
    /// Set while a request whose client can send a file runs its
    /// statement ([`Asker::scope`]).
    static ASKER: std::cell::RefCell<Option<Asker>>;
}

impl Asker {
    /// Runs `statement` with this asker where the driver's handler finds
    /// it (it is called within the statement's poll).
    pub async fn scope<F: Future>(asker: Option<Asker>, statement: F) -> F::Output {
        ASKER.scope(std::cell::RefCell::new(asker), statement).await
    }
}

/// mysql_async's global LOCAL INFILE handler (every backend pool's): the
/// file the backend asks for, from the client of the statement's request.
pub fn handler(
    name: &[u8],
) -> futures_util::future::BoxFuture<
    'static,
    Result<mysql_async::InfileData, mysql_async::LocalInfileError>,
> {
    let asker = ASKER.try_with(|a| a.borrow_mut().take()).ok().flatten();
    let name = Bytes::copy_from_slice(name);
    Box::pin(async move {
        Ok(match asker {
            Some(asker) => feed(asker, name),
            // No client to ask (a request that did not say it can send
            // a file, yet whose statement asked for one: LOAD DATA LOCAL
            // behind another statement of a multi-statement): an empty
            // file, which loads nothing. Failing here instead would
            // leave the backend waiting for a file the pool's next reset
            // would be read as.
            None => {
                warn!(
                    "the backend asked for a local file no client can send: an empty file was sent"
                );
                futures_util::stream::empty().boxed()
            }
        })
    })
}

/// What the load's stream does next.
enum State {
    /// Tell the client what the backend asks, then wait for parts.
    Ask(Asker, Bytes),
    Parts(Feeding),
    Done,
}

struct Feeding {
    asker: Asker,
    key: Key,
    rx: mpsc::Receiver<Part>,
}

impl Drop for Feeding {
    fn drop(&mut self) {
        self.asker.loads.remove(&self.key);
    }
}

fn feed(asker: Asker, name: Bytes) -> mysql_async::InfileData {
    futures_util::stream::unfold(State::Ask(asker, name), |state| async move {
        let mut feeding = match state {
            State::Done => return None,
            State::Parts(feeding) => feeding,
            State::Ask(asker, name) => {
                let mut load = [0u8; 16];
                rand::rng().fill_bytes(&mut load);
                let load = Bytes::copy_from_slice(&load);
                let key = (asker.owner.clone(), load.clone());
                let (tx, rx) = mpsc::channel(1);
                asker.loads.insert(key.clone(), tx);
                let feeding = Feeding { asker, key, rx };
                let ask = pb::ExecuteResponse {
                    local_infile_request: Some(pb::LocalInfileRequest { name, load }),
                    ..Default::default()
                };
                if !feeding.asker.side.send(&ask).await {
                    return abandon(feeding).await;
                }
                feeding
            }
        };
        loop {
            let next = tokio::select! {
                part = tokio::time::timeout(PART_TIMEOUT, feeding.rx.recv()) => part.ok().flatten(),
                () = feeding.asker.gone.as_mut() => None,
            };
            let Some(part) = next else {
                return abandon(feeding).await;
            };
            let _ = part.taken.send(());
            if part.end {
                drop(feeding);
                return Some((Ok(part.data), State::Done));
            }
            if !part.data.is_empty() {
                return Some((Ok(part.data), State::Parts(feeding)));
            }
        }
    })
    .boxed()
}

/// The client abandoned the load: its backend connection is killed before
/// the stream ends (the driver then ends the file, which the killed
/// connection no longer reads).
async fn abandon(feeding: Feeding) -> Option<(std::io::Result<Bytes>, State)> {
    let (pool, id) = (feeding.asker.pool.clone(), feeding.asker.conn_id);
    let kill = async {
        let mut conn = pool.get_conn().await?;
        conn.query_drop(format!("KILL CONNECTION {id}")).await
    };
    match tokio::time::timeout(KILL_TIMEOUT, kill).await {
        Ok(Ok(())) => {
            drop(feeding);
            Some((
                Err(std::io::Error::other(
                    "the client abandoned its LOAD DATA LOCAL INFILE file",
                )),
                State::Done,
            ))
        }
        outcome => {
            error!(
                ?outcome,
                conn_id = id,
                "could not kill an abandoned LOAD DATA LOCAL INFILE: its file is never ended"
            );
            drop(feeding);
            std::future::pending().await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(load: &[u8], bytes: &'static [u8], end: bool) -> pb::LocalInfileData {
        pb::LocalInfileData {
            data: Bytes::from_static(bytes),
            end,
            abort: false,
            load: Bytes::copy_from_slice(load),
        }
    }

    /// A part is answered once taken; only the load's own credential can
    /// feed it, and an aborted or unknown load refuses parts (2013).
    #[tokio::test]
    async fn parts_go_to_their_own_load_only() {
        let loads = Arc::new(Loads::default());
        let (tx, mut rx) = mpsc::channel(1);
        let key = ("alice".to_string(), Bytes::from_static(b"id"));
        loads.insert(key.clone(), tx);
        let taker = tokio::spawn(async move {
            let part = rx.recv().await.unwrap();
            let _ = part.taken.send(());
            (part.data, part.end)
        });
        loads
            .feed("alice", data(b"id", b"1\n", true))
            .await
            .unwrap();
        assert_eq!(taker.await.unwrap(), (Bytes::from_static(b"1\n"), true));
        for (owner, load) in [("mallory", &b"id"[..]), ("alice", b"other")] {
            let e = loads
                .feed(owner, data(load, b"x", false))
                .await
                .unwrap_err();
            assert_eq!(e.code, 2013, "{owner}");
        }
        let mut abort = data(b"id", b"", false);
        abort.abort = true;
        loads.feed("alice", abort).await.unwrap();
        assert!(loads.sender(&key).is_none(), "an abort forgets the load");
        let e = loads
            .feed("alice", data(b"id", b"x", false))
            .await
            .unwrap_err();
        assert_eq!(e.code, 2013);
    }
}
