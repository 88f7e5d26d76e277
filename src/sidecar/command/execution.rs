//! One statement's answer while its `StreamExecute` streams in: result
//! sets written as they arrive, or the opening of a cursor.

use crate::api::row_view::ResultView;
use crate::client::{CallError, Reply, Streamed};
use crate::mysql::MysqlError;
use crate::mysql::packet::Packets;
use crate::translate::cursor::Cursor;
use crate::translate::results::{ResultWriter, RowFormat};

use super::cursors::OpenCursor;
use super::{CommandPhase, Next, errors};

/// A statement's answer in progress ([`CommandPhase::begin_execution`]).
pub struct Execution {
    writer: ResultWriter,
    /// The statement failed: the ERR ends the answer.
    error: Option<MysqlError>,
    /// Open a cursor for this statement id on the first result set.
    cursor: Option<u32>,
    /// A statement that fails in a transaction may have run: its error
    /// says so and nothing is sent again.
    was_in_transaction: bool,
}

impl Execution {
    /// A single `CALL` of `routine`: see [`ResultWriter::in_call_of`].
    pub fn in_call_of(mut self, routine: Option<Vec<u8>>) -> Self {
        self.writer = self.writer.in_call_of(routine);
        self
    }

    /// A multi-statement's statements: see [`ResultWriter::in_statements`].
    pub fn in_statements(mut self, statements: Vec<crate::translate::statement::Answers>) -> Self {
        self.writer = self.writer.in_statements(statements);
        self
    }

    /// Whether the connection would still be told about a transaction it
    /// was in when the statement started.
    pub fn was_in_transaction(&self) -> bool {
        self.was_in_transaction
    }
}

/// What the statement's stream should do after a message.
#[derive(Debug)]
pub enum Flow {
    /// Read on.
    More,
    /// A row could not be written: stop reading and
    /// [`finish`](CommandPhase::finish_execution) with its error.
    Stop,
    /// The cursor's columns are answered: keep the stream with it
    /// ([`CommandPhase::open_cursor`]); the statement's answer is done.
    Cursor(NewCursor),
    /// The backend asks for the client's file: ask the client
    /// ([`CommandPhase::ask_for_file`]), send it, then read on.
    Infile(crate::api::pb::LocalInfileRequest),
}

/// A cursor whose columns are answered, waiting for its stream.
#[derive(Debug)]
pub struct NewCursor {
    id: u32,
    cursor: Cursor,
    failed: Option<MysqlError>,
}

impl<S> CommandPhase<S> {
    pub fn begin_execution(&self, format: RowFormat, cursor: Option<u32>) -> Execution {
        Execution {
            writer: ResultWriter::new(self.caps, format, self.session.status())
                .with_style(self.style)
                .with_marked_ends(self.marked_ends)
                .with_connection_status(Some(self.connection_status.clone())),
            error: None,
            cursor,
            was_in_transaction: self.session.in_transaction,
        }
    }

    /// Writes one streamed message of the statement.
    pub fn on_reply(
        &mut self,
        exec: &mut Execution,
        mut reply: Reply<Streamed>,
        out: &mut Packets,
    ) -> Flow {
        self.update_session(&mut reply);
        let message = reply.message;
        if let Some(request) = message.local_infile_request {
            return Flow::Infile(request);
        }
        if let Some(e) = message.error {
            exec.error = Some(self.upstream_error(&e.message));
        }
        let Some(result) = message.result else {
            return Flow::More;
        };
        if exec.error.is_some() {
            return Flow::More;
        }
        if let Some(id) = exec.cursor
            && exec.writer.is_empty()
            && !result.head.fields.is_empty()
        {
            let mut cursor = Cursor::open(
                self.caps,
                self.style,
                result.head.fields,
                self.session.status(),
                out,
            )
            .with_connection_status(self.connection_status.clone());
            let mut failed = None;
            if !result.rows.is_empty() {
                let rows = ResultView {
                    rows: result.rows,
                    ..Default::default()
                };
                failed = cursor.push(&rows).err();
            }
            return Flow::Cursor(NewCursor { id, cursor, failed });
        }
        // The rows' packets in one allocation, rather than in a buffer
        // doubled from 1 KiB (seven moves of a 50 KB answer); a hint: a
        // text cell's length takes one byte below 251.
        out.buf.reserve(
            result
                .rows
                .iter()
                .map(|row| 4 + row.values().len() + row.len())
                .sum(),
        );
        match exec.writer.message(&result, out) {
            Ok(()) => Flow::More,
            Err(e) => {
                exec.error = Some(e);
                Flow::Stop
            }
        }
    }

    /// Keeps a cursor's stream: the statement's answer is complete.
    pub fn open_cursor(&mut self, new: NewCursor, stream: S) -> Next {
        self.keep_cursor(
            new.id,
            OpenCursor {
                cursor: new.cursor,
                stream: Some(stream),
                failed: new.failed,
                session_lost: false,
                charge: self.budget.charge(),
            },
        );
        Next::Continue
    }

    /// The stream ended: the last terminator (with the session-state
    /// changes the statement made), or the ERR that ended it.
    pub fn finish_execution(&mut self, exec: Execution, out: &mut Packets) -> Next {
        let Execution {
            mut writer, error, ..
        } = exec;
        let lost = error.as_ref().is_some_and(errors::is_session_lost);
        writer.session_state(self.session.take_state_changes());
        writer.finish(
            error.as_ref(),
            self.session.status(),
            self.session.warnings,
            out,
        );
        if lost {
            // The gateway rolled the transaction back: this connection's
            // state is gone, as if the server had restarted.
            self.session.reset();
            return Next::Close;
        }
        Next::Continue
    }

    /// The stream failed as a whole. Rows may already be out: the ERR
    /// ends them, and the connection closes if the statement may have run
    /// or the session is gone (a session the gateway refuses arrives
    /// here, in the stream's end: streaming calls answer 200 first).
    pub fn execution_failed(&mut self, exec: Execution, e: &CallError, out: &mut Packets) -> Next {
        let error = errors::from_call(e, exec.was_in_transaction);
        self.account_refused |= error.code == errors::ACCESS_DENIED;
        exec.writer
            .finish(Some(&error), self.session.status(), 0, out);
        if errors::call_ends_session(e) {
            Next::Close
        } else {
            Next::Continue
        }
    }

    /// The statement was stopped here (`KILL QUERY`, a shutdown): `error`
    /// ends its answer. The caller drops the stream, which kills it.
    pub fn execution_stopped(&mut self, exec: Execution, error: &MysqlError, out: &mut Packets) {
        exec.writer
            .finish(Some(error), self.session.status(), 0, out);
    }
}
