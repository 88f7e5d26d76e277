//! A future that is never cancelled halfway: polled where it is awaited
//! (on the caller's task, with no task to spawn and no hop between
//! threads), and, if dropped before it ends, finished in a task of its
//! own. For work a client's hang-up must not tear: a statement whose
//! session would be left mid-protocol.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

type Work = Pin<Box<dyn Future<Output = ()> + Send>>;

pub struct RunToEnd(Option<Work>);

impl RunToEnd {
    pub fn new(work: impl Future<Output = ()> + Send + 'static) -> Self {
        Self(Some(Box::pin(work)))
    }
}

impl Future for RunToEnd {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(work) = self.0.as_mut() else {
            return Poll::Ready(());
        };
        let done = work.as_mut().poll(cx);
        if done.is_ready() {
            self.0 = None;
        }
        done
    }
}

impl Drop for RunToEnd {
    fn drop(&mut self) {
        if let Some(work) = self.0.take() {
            // Outside a runtime (the process is exiting) there is nothing
            // left to finish it on.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(work);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    /// Dropped halfway, the work still ends; awaited, it runs in place.
    #[tokio::test]
    async fn dropped_work_still_ends() {
        let (go_tx, go_rx) = oneshot::channel::<()>();
        let (done_tx, done_rx) = oneshot::channel::<()>();
        let mut run = RunToEnd::new(async move {
            let _ = go_rx.await;
            let _ = done_tx.send(());
        });
        // Started here (pending on `go`), then dropped.
        assert!(futures_util::poll!(&mut run).is_pending());
        drop(run);
        go_tx.send(()).unwrap();
        done_rx.await.expect("the dropped work ran to its end");

        let (done_tx, mut done_rx) = oneshot::channel::<()>();
        RunToEnd::new(async move {
            let _ = done_tx.send(());
        })
        .await;
        assert!(done_rx.try_recv().is_ok(), "ran when awaited");
    }
}
