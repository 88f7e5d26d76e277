//! `StreamExecute` output: results cut into bounded messages, framed as
//! Connect envelopes and handed to the transport through a small channel,
//! so memory stays constant whatever the size of the result.
//!
//! Envelopes are gathered into chunks of about `target` bytes: a small
//! result (fields, rows, its summary, the session and the end of the
//! stream) leaves as one chunk, one DATA frame, one write, rather than
//! five, which is most of the cost of a point query on both ends.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::time::Instant;

use crate::api::connect::{end_stream, put_message_with};
use crate::api::effort::{NEAR_RTT, effort_within};
use crate::api::pb;
use crate::api::row_batch::{Cells, RowBatch};
use crate::api::strict_text::StrictText;
use crate::api::{ApiError, Codec, Encoding};
use crate::translate::rows::{cells_size, pack};
use crate::transport::link::Link;

use super::backend::{Flow, ResultSink, Summary};

pub struct StreamSink {
    codec: Codec,
    encoding: Encoding,
    compress_min: usize,
    /// Rows are batched until a message reaches about this size.
    target: usize,
    tx: mpsc::Sender<Bytes>,
    /// Where the response goes: how hard to compress is chosen from it,
    /// and what the transport's pace shows is recorded in it.
    link: Link,
    /// Links of a round trip under this are near (`limits.near_rtt`).
    near_rtt: Duration,
    /// Sizes of the chunks in the channel, oldest first: when the channel
    /// is full, the transport's next take is the oldest.
    queued: VecDeque<usize>,
    /// Envelopes not yet handed to the transport.
    out: BytesMut,
    /// The statement has one result: its end need not go out before the
    /// end of the stream (see [`StreamSink::single_result`]).
    single_result: bool,
    /// The protobuf message of the rows read since the last one, being
    /// written at the end of `out`.
    batch: Option<RowBatch>,
    /// The same, for the JSON codec: rows to serialise as a message.
    json_rows: Vec<pb::Row>,
    /// The batch's rows' size, as `row_size` counts it.
    pending_bytes: usize,
    /// The client went away: the rest of the result is discarded.
    closed: bool,
    /// The client takes names and messages that are not UTF-8
    /// ([`StrictText`]).
    raw_text: bool,
}

impl StreamSink {
    pub fn new(
        codec: Codec,
        encoding: Encoding,
        compress_min: usize,
        target: usize,
        tx: mpsc::Sender<Bytes>,
    ) -> Self {
        Self {
            codec,
            encoding,
            compress_min,
            target,
            tx,
            link: Link::default(),
            near_rtt: NEAR_RTT,
            queued: VecDeque::new(),
            out: BytesMut::new(),
            single_result: false,
            batch: None,
            json_rows: Vec::new(),
            pending_bytes: 0,
            closed: false,
            raw_text: false,
        }
    }

    /// The connection the response leaves on (see [`Link`]).
    pub fn link(mut self, link: Link) -> Self {
        self.link = link;
        self
    }

    /// Where near links end (`gateway.limits.near_rtt`).
    pub fn near_rtt(mut self, near_rtt: Duration) -> Self {
        self.near_rtt = near_rtt;
        self
    }

    /// Whether the client takes text fields that are not UTF-8
    /// (`RAW_TEXT_HEADER`); without, they are made valid.
    pub fn raw_text(mut self, raw: bool) -> Self {
        self.raw_text = raw;
        self
    }

    /// The statement produces one result, so nothing follows its end but
    /// the end of the stream: they leave together. Otherwise (multiple
    /// statements, procedures) each result goes out as it ends, since the
    /// next may be long in coming.
    pub fn single_result(mut self, single: bool) -> Self {
        self.single_result = single;
        self
    }

    /// [`single_result`](Self::single_result), once the session (and so
    /// how its SQL is read) is known.
    pub fn set_single_result(&mut self, single: bool) {
        self.single_result = single;
    }

    /// Sends the rows batched so far as one message.
    pub async fn flush(&mut self) {
        self.pending_bytes = 0;
        if let Some(batch) = self.batch.take() {
            let (link, near_rtt) = (&self.link, self.near_rtt);
            let sent = batch.close(&mut self.out, self.encoding, self.compress_min, || {
                effort_within(link.estimate(), near_rtt)
            });
            super::series::bytes_sent().add(sent as u64);
            if self.out.len() >= self.target {
                self.push().await;
            }
            return;
        }
        if self.json_rows.is_empty() {
            return;
        }
        let rows = std::mem::take(&mut self.json_rows);
        let message = pb::ExecuteResponse {
            result: Some(pb::QueryResult {
                rows,
                ..Default::default()
            }),
            ..Default::default()
        };
        self.send(&message).await;
    }

    /// Sends `last` (if any) and the end-of-stream envelope, with `error`
    /// if the call failed as a whole.
    pub async fn finish(mut self, last: Option<pb::ExecuteResponse>, error: Option<ApiError>) {
        if let Some(last) = last {
            self.send(&last).await;
        }
        self.out.extend_from_slice(&end_stream(error.as_ref()));
        self.push().await;
    }

    /// Hands the gathered envelopes to the transport. When the channel is
    /// full, how long the transport takes to make room is how fast it
    /// drains (the statement and the writes run one after the other on
    /// the response's task: the wait is the write of the oldest chunk).
    async fn push(&mut self) {
        if self.closed || self.out.is_empty() {
            return;
        }
        let chunk = self.out.split().freeze();
        let len = chunk.len();
        match self.tx.try_send(chunk) {
            Ok(()) => {}
            Err(TrySendError::Full(chunk)) => {
                let waiting = Instant::now();
                if self.tx.send(chunk).await.is_err() {
                    self.closed = true;
                    return;
                }
                let drained = self.queued.pop_front().unwrap_or(len);
                self.link.record_drain(drained, waiting.elapsed());
            }
            Err(TrySendError::Closed(_)) => {
                self.closed = true;
                return;
            }
        }
        self.queued.push_back(len);
        // Only the chunks that can still be in the channel.
        while self.queued.len() > self.tx.max_capacity() {
            self.queued.pop_front();
        }
    }

    async fn send(&mut self, message: &pb::ExecuteResponse) {
        if self.closed {
            return;
        }
        let strict = if self.raw_text {
            None
        } else {
            message.strict_text()
        };
        let message = strict.as_ref().unwrap_or(message);
        let (link, near_rtt) = (&self.link, self.near_rtt);
        let sent = put_message_with(
            &mut self.out,
            self.codec,
            self.encoding,
            self.compress_min,
            || effort_within(link.estimate(), near_rtt),
            message,
        );
        super::series::bytes_sent().add(sent as u64);
        if self.out.len() >= self.target {
            self.push().await;
        }
    }
}

impl ResultSink for StreamSink {
    async fn fields(&mut self, fields: Vec<pb::Field>) -> Flow {
        // Each result set starts with a message carrying its fields.
        self.flush().await;
        let message = pb::ExecuteResponse {
            result: Some(pb::QueryResult {
                fields,
                ..Default::default()
            }),
            ..Default::default()
        };
        self.send(&message).await;
        if self.closed {
            Flow::Discard
        } else {
            Flow::Continue
        }
    }

    /// A message with neither fields nor rows: it closes the open result
    /// set, or is an OK result of its own (the psdb shape of a DML
    /// statement). Multi-statement queries and procedures need it to tell
    /// where one result ends and the next begins.
    async fn end(&mut self, summary: Summary) {
        self.flush().await;
        let message = pb::ExecuteResponse {
            result: Some(pb::QueryResult {
                rows_affected: summary.rows_affected,
                insert_id: summary.insert_id,
                info: summary.info,
                insert_id_changed: summary.insert_id != 0,
                server_status: summary.status.map(u32::from),
                warning_count: summary.warnings.map(u32::from),
                session_state_info: summary.session_state.map(Bytes::from),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.send(&message).await;
        if !self.single_result {
            self.push().await;
        }
    }

    fn gone(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let tx = self.tx.clone();
        async move { tx.closed().await }
    }

    fn side(&self) -> Option<super::local_infile::Side> {
        Some(super::local_infile::Side {
            codec: self.codec,
            encoding: self.encoding,
            tx: self.tx.clone(),
        })
    }

    async fn row(&mut self, row: &dyn Cells) -> Flow {
        if self.closed {
            return Flow::Discard;
        }
        self.pending_bytes += cells_size(row);
        if self.codec == Codec::Proto {
            // Straight into the message the rows leave in.
            let out = &mut self.out;
            self.batch
                .get_or_insert_with(|| RowBatch::open(out))
                .push(out, row);
        } else {
            self.json_rows.push(pack(row));
        }
        if self.pending_bytes >= self.target {
            self.flush().await;
            // A full batch goes out now, however well it compressed: the
            // target counts the rows' bytes, and a result of repetitive
            // values would otherwise be held to its end (no first byte,
            // and no sign of a client that went away, until then).
            self.push().await;
        }
        if self.closed {
            Flow::Discard
        } else {
            Flow::Continue
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::connect::take_envelope;

    /// Runs a one-row result through a sink; returns each chunk the
    /// transport would write, as its number of envelopes.
    async fn chunks(single_result: bool, target: usize) -> Vec<usize> {
        let (tx, mut rx) = mpsc::channel(64);
        let mut sink = StreamSink::new(Codec::Proto, Encoding::Identity, 1024, target, tx)
            .single_result(single_result);
        let field = pb::Field {
            name: "1".into(),
            ..Default::default()
        };
        sink.fields(vec![field]).await;
        sink.row(&vec![Some(b"1".to_vec())]).await;
        sink.end(Summary::default()).await;
        sink.flush().await;
        sink.finish(Some(pb::ExecuteResponse::default()), None)
            .await;
        let mut out = Vec::new();
        while let Ok(chunk) = rx.try_recv() {
            let mut buf = BytesMut::from(&chunk[..]);
            let mut n = 0;
            while take_envelope(&mut buf, 1 << 20).unwrap().is_some() {
                n += 1;
            }
            assert!(buf.is_empty(), "whole envelopes only");
            out.push(n);
        }
        out
    }

    #[tokio::test]
    async fn a_small_result_is_one_write() {
        // Fields, rows, summary, the last message and the end of stream.
        assert_eq!(chunks(true, 256 << 10).await, vec![5]);
        // Several results: each goes out as it ends.
        assert_eq!(chunks(false, 256 << 10).await, vec![3, 2]);
        // A chunk never grows much past the target.
        assert_eq!(chunks(true, 1).await, vec![1, 1, 1, 1, 1]);
    }

    /// Streams 8 batches of compressible rows through a sink on `link` to a
    /// reader that takes every chunk; returns each row message's compressed
    /// flag, in order.
    async fn row_flags(link: Link) -> Vec<bool> {
        let (tx, mut rx) = mpsc::channel::<Bytes>(2);
        let target = 64 << 10;
        let reader = tokio::spawn(async move {
            let mut flags = Vec::new();
            while let Some(chunk) = rx.recv().await {
                let mut buf = BytesMut::from(&chunk[..]);
                while let Some(envelope) = take_envelope(&mut buf, 1 << 20).unwrap() {
                    // Row messages: compressed, or larger than the rest.
                    if envelope.payload.len() > 1024 || envelope.is_compressed() {
                        flags.push(envelope.is_compressed());
                    }
                }
            }
            flags
        });
        let mut sink = StreamSink::new(Codec::Proto, Encoding::Zstd, 1024, target, tx).link(link);
        sink.fields(vec![pb::Field::default()]).await;
        let value: Vec<u8> = (0..1000u32).map(|i| (i % 7) as u8 + b'a').collect();
        for _ in 0..8 * (target / 1000 + 1) {
            sink.row(&vec![Some(value.clone())]).await;
        }
        sink.finish(None, None).await;
        reader.await.unwrap()
    }

    /// The link decides each message: a fast one gets them as they are, a
    /// slow one compressed, whatever encoding was negotiated.
    #[tokio::test]
    async fn the_link_decides_whether_rows_are_compressed() {
        let near = || Link::with_rtt(std::time::Duration::from_micros(80));
        let fast = near();
        fast.record_drain(1 << 30, std::time::Duration::from_millis(1));
        let flags = row_flags(fast).await;
        assert_eq!(flags, vec![false; 8]);
        let slow = near();
        slow.record_drain(1 << 20, std::time::Duration::from_secs(1));
        let flags = row_flags(slow).await;
        assert_eq!(flags, vec![true; 8]);
        // Nothing known: the default level.
        assert_eq!(row_flags(Link::default()).await, vec![true; 8]);
    }

    /// A stream that had to wait for the transport records how fast it
    /// drained, for its later messages and the connection's next streams.
    #[tokio::test]
    async fn waiting_on_the_transport_measures_the_link() {
        let link = Link::with_rtt(std::time::Duration::from_micros(80));
        assert_eq!(link.estimate().drain_rate, None);
        row_flags(link.clone()).await;
        assert!(link.estimate().drain_rate.is_some());
    }

    /// Rows that compress to almost nothing still go out batch by batch,
    /// not all at the end of the statement.
    #[tokio::test]
    async fn compressible_rows_stream_batch_by_batch() {
        let (tx, mut rx) = mpsc::channel(64);
        let target = 64 << 10;
        let mut sink = StreamSink::new(Codec::Proto, Encoding::Zstd, 1024, target, tx);
        sink.fields(vec![pb::Field::default()]).await;
        let value = vec![b'x'; 1000];
        for batch in 1..=3 {
            for _ in 0..(target / 1000 + 1) {
                sink.row(&vec![Some(value.clone())]).await;
            }
            let mut sent = 0;
            while let Ok(chunk) = rx.try_recv() {
                sent += chunk.len();
            }
            assert!(sent > 0, "batch {batch} was held back");
            assert!(
                sent < target / 8,
                "batch {batch} was not compressed: {sent} bytes"
            );
        }
    }
}
