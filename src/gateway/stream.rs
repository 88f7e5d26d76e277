//! `StreamExecute` output: results cut into bounded messages, framed as
//! Connect envelopes and handed to the transport through a small channel,
//! so memory stays constant whatever the size of the result.

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::api::connect::{FLAG_COMPRESSED, end_stream, envelope};
use crate::api::pb;
use crate::api::{ApiError, Codec, Encoding};
use crate::translate::rows::row_size;

use super::backend::{Flow, ResultSink, Summary};
use super::rpc::encode_message;

pub struct StreamSink {
    codec: Codec,
    encoding: Encoding,
    compress_min: usize,
    /// Rows are batched until a message reaches about this size.
    target: usize,
    tx: mpsc::Sender<Bytes>,
    pending: Vec<pb::Row>,
    pending_bytes: usize,
    /// The client went away: the rest of the result is discarded.
    closed: bool,
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
            pending: Vec::new(),
            pending_bytes: 0,
            closed: false,
        }
    }

    /// Sends the rows batched so far as one message.
    pub async fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let rows = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
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
        if !self.closed {
            let _ = self.tx.send(end_stream(error.as_ref())).await;
        }
    }

    async fn send(&mut self, message: &pb::ExecuteResponse) {
        if self.closed {
            return;
        }
        let (payload, compressed) =
            encode_message(self.codec, self.encoding, self.compress_min, message);
        let flags = if compressed { FLAG_COMPRESSED } else { 0 };
        crate::admin::metrics::metrics()
            .gateway_bytes
            .with(&["sent"])
            .add(payload.len() as u64);
        if self.tx.send(envelope(flags, &payload)).await.is_err() {
            self.closed = true;
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
                ..Default::default()
            }),
            ..Default::default()
        };
        self.send(&message).await;
    }

    fn gone(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let tx = self.tx.clone();
        async move { tx.closed().await }
    }

    async fn row(&mut self, row: pb::Row) -> Flow {
        self.pending_bytes += row_size(&row);
        self.pending.push(row);
        if self.pending_bytes >= self.target {
            self.flush().await;
        }
        if self.closed {
            Flow::Discard
        } else {
            Flow::Continue
        }
    }
}
