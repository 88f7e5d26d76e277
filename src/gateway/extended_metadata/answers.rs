//! Follows a relayed connection's conversation packet by packet, to find
//! the column definitions in the server's answers: each loses its
//! extended type info (the gateway's driver cannot read it) and the info
//! is kept, per result set, for the gateway to pair with the columns its
//! driver reads.
//!
//! The packet that ends each result (the EOF or OK after a set's rows, an
//! OK result) is noted too, its status flags and warning count: the
//! driver shows no result's status flags.
//!
//! Commands are told by the client's packets with sequence id 0 (a new
//! command; split packets and the auth exchange have later ids), and the
//! answer to each is read as the protocol frames it. A packet the rules
//! do not fit ends the connection: relayed out of step, a row would be
//! taken for a definition.

use std::collections::VecDeque;

use mysql_common::io::ParseBuf;
use mysql_common::packets::Column;

use super::wire::{self, Framing};

/// Largest payload of one physical packet; one this long continues.
pub const MAX_PAYLOAD: usize = 0xff_ffff;
/// `SERVER_MORE_RESULTS_EXISTS`.
const MORE_RESULTS: u16 = 0x0008;
/// `SERVER_SESSION_STATE_CHANGED`: an OK carries session-state information.
const STATE_CHANGED: u16 = 0x4000;

/// A result set's (or prepared statement's) columns as the driver reads
/// them, and each one's extended type info.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub columns: Vec<Column>,
    pub infos: Vec<Vec<u8>>,
}

/// The status flags and warning count of the packet that ended a result,
/// and the session-state information the server put in it (on a
/// connection where the relay asked for `CLIENT_SESSION_TRACK`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    pub status: u16,
    pub warnings: u16,
    /// The OK's session-state information, as the server wrote it (the
    /// content of its length-encoded string; empty where its status does
    /// not say `SERVER_SESSION_STATE_CHANGED`), on a connection where the
    /// relay asked for it (`None` elsewhere).
    pub state: Option<Vec<u8>>,
}

/// What a command's answer looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Result sets or OKs (COM_QUERY, COM_STMT_EXECUTE), maybe several.
    Results { binary: bool },
    /// COM_STMT_PREPARE: an OK with counts, then definitions.
    Prepare,
    /// COM_STMT_FETCH: binary rows of a cursor.
    Rows,
    /// COM_CHANGE_USER: authentication again.
    Auth,
    /// One packet (OK, ERR, or COM_STATISTICS's text).
    Single,
}

/// The answer a command gets (`None`: it gets none).
fn expectation(command: u8) -> Option<Expect> {
    Some(match command {
        // COM_QUIT, COM_STMT_SEND_LONG_DATA, COM_STMT_CLOSE
        0x01 | 0x18 | 0x19 => return None,
        0x03 => Expect::Results { binary: false },
        0x16 => Expect::Prepare,
        // COM_STMT_EXECUTE, COM_STMT_BULK_EXECUTE
        0x17 | 0xfa => Expect::Results { binary: true },
        0x1c => Expect::Rows,
        0x11 => Expect::Auth,
        0x09 => Expect::Single,
        // COM_PING, COM_INIT_DB, COM_RESET_CONNECTION, COM_STMT_RESET,
        // COM_SET_OPTION, …: an OK or an ERR, which `Results` reads.
        _ => Expect::Results { binary: false },
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    Rows {
        binary: bool,
    },
    /// A prepared statement's columns, after its parameters.
    PrepareColumns(u64),
    Idle,
}

#[derive(Debug)]
enum State {
    Idle,
    Auth,
    Single,
    First {
        binary: bool,
    },
    Definitions {
        left: u64,
        keep: bool,
        record: Record,
        then: Then,
    },
    Eof(Then),
    Rows {
        binary: bool,
    },
}

/// The relay lost track of the conversation.
#[derive(Debug, PartialEq, Eq)]
pub struct Lost(pub &'static str);

pub struct Answers {
    framing: Framing,
    state: State,
    pending: VecDeque<Expect>,
    server_continues: bool,
    client_continues: bool,
    /// The results that ended, in order, since the relay last took them.
    pub endings: Vec<Ending>,
    /// The client began a command since the relay last looked.
    pub new_command: bool,
    /// The relay asked for `CLIENT_SESSION_TRACK` on the client's behalf:
    /// OKs lose their session-state information (kept in their
    /// [`Ending`]) and their `SERVER_SESSION_STATE_CHANGED`, so the
    /// driver reads what it negotiated.
    pub session_track: bool,
}

impl Answers {
    /// After the handshake response: authentication comes first.
    pub fn new(framing: Framing) -> Self {
        Self {
            framing,
            state: State::Auth,
            pending: VecDeque::new(),
            server_continues: false,
            client_continues: false,
            endings: Vec::new(),
            new_command: false,
            session_track: false,
        }
    }

    /// A physical packet from the client (`payload` without its header).
    #[cfg(test)]
    pub fn client_packet(&mut self, seq: u8, payload: &[u8]) {
        self.client_head(seq, payload.len(), payload.first().copied());
    }

    /// A physical packet from the client, by its header and first byte
    /// (`None` when empty): all a command's answer depends on, so the
    /// relay passes client packets on without holding them.
    pub fn client_head(&mut self, seq: u8, len: usize, first: Option<u8>) {
        let continuation = std::mem::replace(&mut self.client_continues, len == MAX_PAYLOAD);
        if seq != 0 || continuation {
            return;
        }
        self.new_command = true;
        if let Some(expect) = first.and_then(expectation) {
            self.pending.push_back(expect);
        }
    }

    /// Whether a server packet of `len` bytes (≥ 1) starting with `first`
    /// is a row, or the rest of one: relayed unchanged, and nothing after
    /// its first byte matters, so it may pass before it has all arrived
    /// ([`Self::server_row`]). Any other packet is read whole.
    /// `first` is `None` for an empty packet, or one whose first byte has
    /// not arrived (then only the rest of a long row is known for one).
    pub fn is_row(&self, len: usize, first: Option<u8>) -> bool {
        let starts_row = first
            .is_some_and(|first| len > 0 && first != 0xff && !(first == 0xfe && len < MAX_PAYLOAD));
        match self.state {
            State::Rows { .. } => self.server_continues || starts_row,
            // COM_STMT_FETCH's answer starts with a row.
            State::Idle => {
                !self.server_continues && self.pending.front() == Some(&Expect::Rows) && starts_row
            }
            _ => false,
        }
    }

    /// Whether the answer being read is in a text result set's rows:
    /// the packets that may be diverted to the gateway (`tap`).
    pub fn in_text_rows(&self) -> bool {
        matches!(self.state, State::Rows { binary: false })
    }

    /// Whether no answer is being read: the next server packet starts
    /// one (or is an unasked ERR).
    pub fn between_answers(&self) -> bool {
        matches!(self.state, State::Idle) && !self.server_continues
    }

    /// A packet [`Self::is_row`] took for a row, followed without its
    /// content: as [`Self::server_packet`] would have.
    pub fn server_row(&mut self, len: usize) {
        if matches!(self.state, State::Idle) {
            self.pending.pop_front();
            self.state = State::Rows { binary: true };
        }
        self.server_continues = len == MAX_PAYLOAD;
    }

    /// A physical packet from the server: `Some` replaces its payload.
    /// A result set's (or prepared statement's) columns, once all read,
    /// go to `done`.
    pub fn server_packet(
        &mut self,
        payload: &[u8],
        done: &mut Vec<Record>,
    ) -> Result<Option<Vec<u8>>, Lost> {
        if std::mem::replace(&mut self.server_continues, payload.len() == MAX_PAYLOAD) {
            // The rest of a long row (definitions and OKs are short).
            return match self.state {
                State::Rows { .. } => Ok(None),
                _ => Err(Lost("a long packet outside rows")),
            };
        }
        let first = *payload.first().ok_or(Lost("an empty packet"))?;
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Idle => match self.pending.pop_front() {
                // Unasked: an ERR before the server closes the connection.
                None => Ok(None),
                Some(expect) => {
                    self.state = match expect {
                        Expect::Results { binary } => State::First { binary },
                        Expect::Prepare => return self.prepare_ok(payload),
                        Expect::Rows => State::Rows { binary: true },
                        Expect::Auth => State::Auth,
                        Expect::Single => State::Single,
                    };
                    self.server_packet_again(payload, done)
                }
            },
            State::Auth => {
                if first != 0x00 && first != 0xff {
                    self.state = State::Auth;
                }
                if first == 0x00 && self.session_track {
                    return Ok(ok_of(payload, true)?.1);
                }
                Ok(None)
            }
            State::Single => Ok(None),
            State::First { binary } => match first {
                0x00 => {
                    let (ending, untracked) = ok_of(payload, self.session_track)?;
                    if ending.status & MORE_RESULTS != 0 {
                        self.state = State::First { binary };
                    }
                    self.endings.push(ending);
                    Ok(untracked)
                }
                // ERR; or an EOF (COM_SET_OPTION's answer): a column
                // count never needs 0xfe's eight bytes.
                0xff | 0xfe => Ok(None),
                // LOCAL INFILE: the server answers once the file is sent.
                0xfb if !binary => {
                    self.state = State::First { binary };
                    Ok(None)
                }
                _ => {
                    let (count, size) = wire::lenenc(payload).ok_or(Lost("a column count"))?;
                    let follows =
                        !(binary && self.framing.cache_metadata) || payload.get(size) == Some(&1);
                    if count == 0 {
                        return Err(Lost("a result set without columns"));
                    }
                    self.state = if follows {
                        definitions(count, true, Then::Rows { binary })
                    } else {
                        self.after_definitions(Then::Rows { binary })
                    };
                    Ok(None)
                }
            },
            State::Definitions {
                left,
                keep,
                mut record,
                then,
            } => {
                let (plain, info) =
                    wire::split_definition(payload).ok_or(Lost("a column definition"))?;
                if keep {
                    let column = ParseBuf(&plain)
                        .parse::<Column>(())
                        .map_err(|_| Lost("a column definition the driver cannot read"))?;
                    record.columns.push(column);
                    record.infos.push(info.to_vec());
                }
                if left > 1 {
                    self.state = State::Definitions {
                        left: left - 1,
                        keep,
                        record,
                        then,
                    };
                } else {
                    if keep {
                        done.push(record);
                    }
                    self.state = self.after_definitions(then);
                }
                Ok(Some(plain))
            }
            State::Eof(then) => {
                if first != 0xfe {
                    return Err(Lost("an EOF after column definitions"));
                }
                self.state = self.enter(then);
                Ok(None)
            }
            State::Rows { binary } => {
                if first == 0xfe && payload.len() < MAX_PAYLOAD {
                    let mut untracked = None;
                    let ending = if self.framing.deprecate_eof {
                        let ok;
                        (ok, untracked) = ok_of(payload, self.session_track)?;
                        ok
                    } else {
                        let two = |at: usize| {
                            payload
                                .get(at..at + 2)
                                .map(|b| u16::from_le_bytes(b.try_into().expect("2")))
                                .ok_or(Lost("an EOF"))
                        };
                        Ending {
                            warnings: two(1)?,
                            status: two(3)?,
                            // No room for it: the next OK reports it.
                            state: self.session_track.then(Vec::new),
                        }
                    };
                    if ending.status & MORE_RESULTS != 0 {
                        self.state = State::First { binary };
                    }
                    self.endings.push(ending);
                    return Ok(untracked);
                } else if first != 0xff {
                    self.state = State::Rows { binary };
                }
                Ok(None)
            }
        }
    }

    /// The same packet, read in the state its command's answer starts in.
    fn server_packet_again(
        &mut self,
        payload: &[u8],
        done: &mut Vec<Record>,
    ) -> Result<Option<Vec<u8>>, Lost> {
        self.server_continues = false;
        self.server_packet(payload, done)
    }

    /// COM_STMT_PREPARE's OK: [0x00] id(4) columns(2) params(2) 0 warnings(2).
    fn prepare_ok(&mut self, payload: &[u8]) -> Result<Option<Vec<u8>>, Lost> {
        if payload.first() == Some(&0x00) {
            let count = |at: usize| {
                payload
                    .get(at..at + 2)
                    .map(|b| u64::from(u16::from_le_bytes(b.try_into().expect("2"))))
                    .ok_or(Lost("a prepare OK"))
            };
            let (columns, params) = (count(5)?, count(7)?);
            self.state = if params > 0 {
                // Not kept: a parameter's extended type info is empty
                // (MariaDB describes it unbound, as type NULL), so the
                // gateway has none to pair (`backend::prepare`).
                definitions(params, false, Then::PrepareColumns(columns))
            } else {
                self.enter(Then::PrepareColumns(columns))
            };
        }
        Ok(None)
    }

    /// After a run of definitions: an EOF unless the client deprecated it.
    fn after_definitions(&self, then: Then) -> State {
        if self.framing.deprecate_eof {
            self.enter(then)
        } else {
            State::Eof(then)
        }
    }

    fn enter(&self, then: Then) -> State {
        match then {
            Then::Rows { binary } => State::Rows { binary },
            Then::PrepareColumns(0) | Then::Idle => State::Idle,
            Then::PrepareColumns(n) => definitions(n, true, Then::Idle),
        }
    }
}

fn definitions(left: u64, keep: bool, then: Then) -> State {
    State::Definitions {
        left,
        keep,
        record: Record {
            columns: Vec::new(),
            infos: Vec::new(),
        },
        then,
    }
}

/// The status flags, warning count and session-state information of an
/// OK packet (header 0x00 or 0xfe): after the affected rows and insert id
/// come the flags, the warnings, then, with `CLIENT_SESSION_TRACK`, the
/// info and, if the flags say `SERVER_SESSION_STATE_CHANGED`, the state.
/// With `tracked` (the relay asked for it, the driver did not), a packet
/// that has the state is given back (`Some`) as the server writes it to a
/// client without tracking: the flag cleared, the info only if not empty
/// (length-encoded, as MariaDB writes it), no state; always shorter.
fn ok_of(payload: &[u8], tracked: bool) -> Result<(Ending, Option<Vec<u8>>), Lost> {
    let lost = || Lost("an OK packet");
    let mut at = 1;
    for _ in 0..2 {
        at += wire::lenenc(payload.get(at..).ok_or_else(lost)?)
            .ok_or_else(lost)?
            .1;
    }
    let two = |at: usize| {
        payload
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes(b.try_into().expect("2")))
            .ok_or_else(lost)
    };
    let status = two(at)?;
    let mut ending = Ending {
        status,
        // A server that answers PROTOCOL_41 always writes them.
        warnings: two(at + 2).unwrap_or(0),
        // Tracked, and nothing changed.
        state: tracked.then(Vec::new),
    };
    if !tracked || status & STATE_CHANGED == 0 {
        return Ok((ending, None));
    }
    let lenenc_str = |from: usize| -> Result<(&[u8], usize), Lost> {
        let (len, size) = wire::lenenc(payload.get(from..).ok_or_else(lost)?).ok_or_else(lost)?;
        let start = from + size;
        let end = start
            .checked_add(usize::try_from(len).map_err(|_| lost())?)
            .ok_or_else(lost)?;
        Ok((payload.get(start..end).ok_or_else(lost)?, end))
    };
    let rest = at + 4;
    let (info, info_end) = lenenc_str(rest)?;
    let (state, _) = lenenc_str(info_end)?;
    ending.state = Some(state.to_vec());
    let mut plain = Vec::with_capacity(payload.len());
    plain.extend_from_slice(&payload[..at]);
    plain.extend_from_slice(&(status & !STATE_CHANGED).to_le_bytes());
    plain.extend_from_slice(&payload[at + 2..rest]);
    if !info.is_empty() {
        plain.extend_from_slice(&payload[rest..info_end]);
    }
    Ok((ending, Some(plain)))
}
