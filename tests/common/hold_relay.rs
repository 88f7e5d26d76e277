//! A TCP relay whose server-to-client direction can be held: what the
//! server sends meanwhile waits (unread, in the kernel's buffers) until it
//! is released, while the client's bytes still go through. For a response
//! head that does not come while its request runs — what a client must
//! not depend on to cancel it.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct HoldRelay {
    pub addr: SocketAddr,
    held: watch::Sender<bool>,
    accepting: JoinHandle<()>,
}

impl HoldRelay {
    /// Listens on a free loopback port, relaying each connection to `server`.
    pub async fn start(server: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (held, _) = watch::channel(false);
        let watch = held.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(upstream) = TcpStream::connect(server).await else {
                    continue;
                };
                tokio::spawn(relay(client, upstream, watch.subscribe()));
            }
        });
        Self {
            addr,
            held,
            accepting,
        }
    }

    /// From now on, what the server sends waits.
    pub fn hold(&self) {
        self.held.send_replace(true);
    }

    /// What waited goes on, and so does the rest.
    pub fn release(&self) {
        self.held.send_replace(false);
    }
}

impl Drop for HoldRelay {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

async fn relay(client: TcpStream, upstream: TcpStream, mut held: watch::Receiver<bool>) {
    let (mut client_in, mut client_out) = client.into_split();
    let (mut server_in, mut server_out) = upstream.into_split();
    let to_server = async move {
        let _ = tokio::io::copy(&mut client_in, &mut server_out).await;
        let _ = server_out.shutdown().await;
    };
    let to_client = async move {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            // Bytes read while held are written only once released.
            if held.wait_for(|held| !*held).await.is_err() {
                return;
            }
            let n = match server_in.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if held.wait_for(|held| !*held).await.is_err()
                || client_out.write_all(&buf[..n]).await.is_err()
            {
                return;
            }
        }
        let _ = client_out.shutdown().await;
    };
    tokio::join!(to_server, to_client);
}
