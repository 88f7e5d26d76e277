//! Open server-side cursors (`COM_STMT_EXECUTE` with a cursor flag, then
//! `COM_STMT_FETCH`): their rows, and their statement's stream while rows
//! remain upstream.

use std::collections::HashMap;

use crate::client::{CallError, Reply, Streamed};
use crate::mysql::MysqlError;
use crate::mysql::packet::Packets;
use crate::mysql::response;
use crate::sidecar::budget::Charge;
use crate::translate::cursor::Cursor;
use crate::translate::errors::from_rpc_message;

use super::{CommandPhase, Next, errors};
use crate::sidecar::session::Session;

/// Most bytes of row values an open cursor buffers when the session must
/// run another statement before the cursor is read to its end (the
/// gateway's session is busy while a result streams, so the rest of the
/// result is read ahead). A larger remainder fails the cursor's next fetch
/// with a clear error rather than growing without bound.
pub const CURSOR_BUFFER_LIMIT: usize = 64 << 20;

/// What the next message of a cursor's stream brought.
pub type Pulled = Result<Option<Reply<Streamed>>, CallError>;

pub struct OpenCursor<S> {
    pub(super) cursor: Cursor,
    /// `None` once the stream has ended or failed (dropping it cancels
    /// the statement upstream).
    pub(super) stream: Option<S>,
    /// Set when the rest of the result could not be kept (see
    /// [`CURSOR_BUFFER_LIMIT`]) or its stream failed: the next fetch gets
    /// it.
    pub(super) failed: Option<MysqlError>,
    /// The failure also ended the upstream session: the connection closes
    /// after that fetch, as after any statement whose session is gone.
    pub(super) session_lost: bool,
    /// Its rows held, charged to the connection's memory budget.
    pub(super) charge: Charge,
}

impl<S> OpenCursor<S> {
    /// Takes in the next message of the stream (which must be set).
    fn pulled(&mut self, next: Pulled, session: &mut Session) {
        match next {
            Ok(Some(mut reply)) => {
                if let Some(cookie) = reply.session.take() {
                    session.update(cookie);
                }
                if let Some(e) = reply.message.error {
                    self.fail(from_rpc_message(&e.message));
                } else if let Some(result) = &reply.message.result
                    && let Err(e) = self.cursor.push(result)
                {
                    self.fail(e);
                }
            }
            Ok(None) => {
                self.cursor.upstream_done();
                self.stream = None;
            }
            Err(e) => {
                self.session_lost = errors::call_ends_session(&e);
                self.fail(errors::from_call(&e, session.in_transaction));
            }
        }
    }

    /// Charges the rows held now. Growth is checked before each read
    /// ahead ([`CommandPhase::read_ahead_stream`]); rows a fetch pulls are
    /// written at once, so a refusal here only leaves the charge behind.
    fn settle(&mut self) {
        let _ = self.charge.set(self.cursor.buffered());
    }

    fn fail(&mut self, error: MysqlError) {
        self.failed = Some(error);
        self.stream = None;
    }
}

pub(super) struct Cursors<S> {
    by_id: HashMap<u32, OpenCursor<S>>,
}

impl<S> Default for Cursors<S> {
    fn default() -> Self {
        Self {
            by_id: HashMap::new(),
        }
    }
}

impl<S> Cursors<S> {
    pub fn insert(&mut self, id: u32, cursor: OpenCursor<S>) {
        self.by_id.insert(id, cursor);
    }

    /// Closes the statement's cursor, if open: dropping its stream
    /// cancels the rest upstream.
    pub fn close(&mut self, id: u32) {
        self.by_id.remove(&id);
    }

    pub fn clear(&mut self) {
        self.by_id.clear();
    }
}

/// A `COM_STMT_FETCH` in progress: the cursor is out of the table until
/// [`CommandPhase::end_fetch`] (or an error) decides whether it stays.
pub struct Fetch<S> {
    id: u32,
    open: OpenCursor<S>,
    /// Rows the client asked for and has not got yet.
    remaining: u32,
}

impl<S> Fetch<S> {
    /// The stream to read the next message from (set whenever
    /// [`CommandPhase::fetch_rows`] says [`FetchStep::Pull`]).
    pub fn stream(&mut self) -> Option<&mut S> {
        self.open.stream.as_mut()
    }
}

/// What a fetch needs next.
#[derive(Debug, PartialEq, Eq)]
pub enum FetchStep {
    /// More rows from upstream: read the stream, then
    /// [`CommandPhase::fetch_pulled`].
    Pull,
    /// Enough rows (or none left): [`CommandPhase::end_fetch`].
    End,
    /// The fetch ended in an ERR (written).
    Answered(Next),
}

impl<S> CommandPhase<S> {
    /// Keeps a cursor just opened (its columns are answered).
    pub fn keep_cursor(&mut self, id: u32, cursor: OpenCursor<S>) {
        self.cursors.insert(id, cursor);
    }

    /// The open cursors whose streams must be read to their end before a
    /// step that needs the session ([`super::Step::uses_session`]).
    pub fn cursors_reading(&self) -> Vec<u32> {
        (self.cursors.by_id.iter())
            .filter(|(_, c)| c.stream.is_some())
            .map(|(id, _)| *id)
            .collect()
    }

    /// The stream of cursor `id` to read ahead from, lent until
    /// [`read_ahead_pulled`](Self::read_ahead_pulled); `None` when it is
    /// read to its end, failed, or would hold more than
    /// [`CURSOR_BUFFER_LIMIT`] or than the connection's memory budget
    /// allows (its next fetch then fails: 1105 or 1153, or 1041 when the
    /// process is out of budget).
    pub fn read_ahead_stream(&mut self, id: u32) -> Option<S> {
        let open = self.cursors.by_id.get_mut(&id)?;
        if open.failed.is_some() {
            return None;
        }
        if open.cursor.buffered() > CURSOR_BUFFER_LIMIT {
            open.fail(errors::cursor_too_large(CURSOR_BUFFER_LIMIT));
            return None;
        }
        if let Err(e) = open.charge.set(open.cursor.buffered()) {
            open.fail(e.value_refused("the rest of the cursor's rows, read ahead"));
            return None;
        }
        open.stream.take()
    }

    /// Gives back the stream of [`read_ahead_stream`](Self::read_ahead_stream)
    /// with the message read from it.
    pub fn read_ahead_pulled(&mut self, id: u32, stream: S, next: Pulled) {
        if let Some(open) = self.cursors.by_id.get_mut(&id) {
            open.stream = Some(stream);
            open.pulled(next, &mut self.session);
            open.settle();
        }
    }

    /// Starts a `COM_STMT_FETCH` of `rows` rows; without an open cursor,
    /// the ERR is written and the fetch is over.
    pub fn begin_fetch(&mut self, id: u32, rows: u32, out: &mut Packets) -> Result<Fetch<S>, Next> {
        match self.cursors.by_id.remove(&id) {
            Some(open) => Ok(Fetch {
                id,
                open,
                remaining: rows,
            }),
            None => {
                response::err(out, &errors::no_cursor());
                Err(Next::Continue)
            }
        }
    }

    /// Writes the rows held, and says whether more must be read.
    pub fn fetch_rows(&mut self, fetch: &mut Fetch<S>, out: &mut Packets) -> FetchStep {
        if let Err(e) = fetch.open.cursor.write_rows(&mut fetch.remaining, out) {
            response::err(out, &e);
            return FetchStep::Answered(Next::Continue);
        }
        if let Some(e) = fetch.open.failed.take() {
            // Rows already written are followed by the ERR, which ends
            // the cursor (MySQL's shape for a fetch that fails).
            response::err(out, &e);
            return FetchStep::Answered(if fetch.open.session_lost {
                Next::Close
            } else {
                Next::Continue
            });
        }
        // Keep reading after a satisfied fetch only to see the end of a
        // set that is complete (the end of its stream follows).
        if fetch.open.stream.is_none() || (fetch.remaining == 0 && !fetch.open.cursor.is_complete())
        {
            FetchStep::End
        } else {
            FetchStep::Pull
        }
    }

    /// Takes in the message read for a fetch.
    pub fn fetch_pulled(&mut self, fetch: &mut Fetch<S>, next: Pulled) {
        fetch.open.pulled(next, &mut self.session);
    }

    /// The fetch's terminator; the cursor stays open unless exhausted.
    pub fn end_fetch(&mut self, fetch: Fetch<S>, out: &mut Packets) -> Next {
        let exhausted = fetch.open.cursor.end_fetch(
            self.caps,
            fetch.remaining,
            self.session.status(),
            self.session.warnings,
            out,
        );
        if !exhausted {
            let mut open = fetch.open;
            open.settle();
            self.cursors.insert(fetch.id, open);
        }
        Next::Continue
    }
}
