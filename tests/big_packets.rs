//! Packets at and above 16 MiB (several MySQL packets), both ways, through
//! real parts: a private MariaDB (max_allowed_packet 64M), the gateway and
//! the sidecar in-process, and `mysql_async` as the client. Each check runs
//! the same statements directly and through the sidecar and compares the
//! bytes.

mod common;

use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};

use myquic::config::Secret;
use myquic::sidecar::config::LocalUser;
use myquic::sidecar::{Sidecar, SidecarConfig};

use common::{MariaDb, Stack};

const LOCAL_USER: &str = "app";
const LOCAL_PASSWORD: &str = "local-secret";
const MIB: usize = 1 << 20;

/// MariaDB + gateway + sidecar.
struct Chain {
    stack: Stack,
    sidecar: Sidecar,
}

fn secret(v: &str) -> Secret {
    Secret {
        value: Some(v.into()),
        ..Default::default()
    }
}

impl Chain {
    async fn start_on(stack: Stack, tweak: impl FnOnce(&mut SidecarConfig)) -> Self {
        let mut config = SidecarConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            ..Default::default()
        };
        config.auth.users = vec![LocalUser {
            username: LOCAL_USER.into(),
            password: secret(LOCAL_PASSWORD),
        }];
        config.auth.plugin = "mysql_native_password".into();
        config.upstream.url = format!("https://localhost:{}", stack.addr().port());
        config.upstream.ca = Some(stack.cert.clone());
        config.upstream.username = common::USER.into();
        config.upstream.password = secret(common::PASSWORD);
        tweak(&mut config);
        let sidecar = Sidecar::start(config).await.expect("sidecar starts");
        Self { stack, sidecar }
    }

    async fn start() -> Self {
        Self::start_on(Stack::start().await, |_| {}).await
    }

    /// Through the sidecar; `max_packet` as the client's own limit (None:
    /// read from the server, as drivers do).
    async fn via(&self, max_packet: Option<usize>) -> Conn {
        let opts = OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.sidecar.addr().port())
            .prefer_socket(false)
            .user(Some(LOCAL_USER))
            .pass(Some(LOCAL_PASSWORD))
            .db_name(Some("app"))
            .max_allowed_packet(max_packet);
        Conn::new(opts).await.expect("connects through the sidecar")
    }

    /// Straight to MariaDB as the gateway's backend account.
    async fn direct(&self, max_packet: Option<usize>) -> Conn {
        let opts = OptsBuilder::default()
            .ip_or_hostname("localhost")
            .socket(Some(self.stack.db.socket.to_string_lossy().into_owned()))
            .prefer_socket(true)
            .user(Some("app"))
            .pass(Some("app-backend-pw"))
            .db_name(Some("app"))
            .max_allowed_packet(max_packet);
        Conn::new(opts).await.expect("connects to MariaDB")
    }
}

/// `len` bytes holding every byte value, quotes, backslashes and NULs
/// included, in a pattern that does not repeat at the packet boundaries.
fn value(len: usize, seed: u8) -> Vec<u8> {
    let mut x = 0x9E37_79B9_u32 ^ u32::from(seed);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 8) as u8
        })
        .collect()
}

/// A string literal of `bytes` as a driver's client-side escaping writes
/// it (PyMySQL, go-sql-driver's interpolateParams): `_binary'…'` with
/// `\\`, `\'` and `\0`.
fn escaped_literal(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 64 + 16);
    out.extend_from_slice(b"_binary'");
    for &b in bytes {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\'' => out.extend_from_slice(b"\\'"),
            0 => out.extend_from_slice(b"\\0"),
            _ => out.push(b),
        }
    }
    out.push(b'\'');
    out
}

/// An INSERT whose COM_QUERY payload (command byte + text) is exactly
/// `payload` bytes long, padded with a value of plain letters.
fn insert_of_payload_size(id: u32, payload: usize) -> (Vec<u8>, usize) {
    let head = format!("INSERT INTO big (id, v) VALUES ({id}, '");
    let fill = payload - 1 - head.len() - 2;
    let mut sql = head.into_bytes();
    sql.extend((0..fill).map(|i| b'a' + (i % 26) as u8));
    sql.extend_from_slice(b"')");
    assert_eq!(sql.len() + 1, payload);
    (sql, fill)
}

async fn fetch(conn: &mut Conn, id: u32) -> Option<Vec<u8>> {
    conn.query_first(format!("SELECT v FROM big WHERE id = {id}"))
        .await
        .unwrap()
}

/// Values of 2^24−2 … 2^24+1 and ~20 MiB bytes, inserted with the text
/// protocol (an escaped literal, as drivers interpolate) and the binary
/// protocol (a bound parameter), read back with both: the same bytes
/// directly and through the sidecar. Also statements whose own packet is
/// exactly at the 16 MiB boundaries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_at_and_above_16_mib_cross_both_ways_as_directly() {
    let chain = Chain::start().await;
    let mut direct = chain.direct(None).await;
    let mut via = chain.via(None).await;
    direct
        .query_drop("CREATE TABLE big (id INT PRIMARY KEY, v LONGBLOB)")
        .await
        .unwrap();
    let sizes = [
        (1 << 24) - 2,
        (1 << 24) - 1,
        1 << 24,
        (1 << 24) + 1,
        20 * MIB + 12345,
    ];
    for (k, &size) in sizes.iter().enumerate() {
        let want = value(size, k as u8);
        // Text protocol through the sidecar, binary directly, and the
        // other way round; each row read back both ways.
        let text_id = 10 * k as u32 + 1;
        let bin_id = 10 * k as u32 + 2;
        for (through_sidecar, id, prepared) in [
            (true, text_id, false),
            (false, text_id + 2, false),
            (true, bin_id, true),
            (false, bin_id + 2, true),
        ] {
            let conn = if through_sidecar {
                &mut via
            } else {
                &mut direct
            };
            if prepared {
                conn.exec_drop(
                    "INSERT INTO big (id, v) VALUES (?, ?)",
                    (id, want.as_slice()),
                )
                .await
                .unwrap_or_else(|e| panic!("prepared insert of {size} bytes: {e}"));
            } else {
                let mut sql = format!("INSERT INTO big (id, v) VALUES ({id}, ").into_bytes();
                sql.extend_from_slice(&escaped_literal(&want));
                sql.push(b')');
                conn.query_drop(sql.as_slice())
                    .await
                    .unwrap_or_else(|e| panic!("text insert of {size} bytes: {e}"));
            }
        }
        for id in [text_id, text_id + 2, bin_id, bin_id + 2] {
            let got_direct = fetch(&mut direct, id).await;
            let got_via = fetch(&mut via, id).await;
            assert!(
                got_direct.as_deref() == Some(&want[..]),
                "direct, {size} bytes"
            );
            assert!(
                got_via == got_direct,
                "through the sidecar, {size} bytes (row {id}): {:?} bytes",
                got_via.as_ref().map(Vec::len)
            );
            // And with the binary protocol.
            let stmt = "SELECT v FROM big WHERE id = ?";
            let via_bin: Option<Vec<u8>> = via.exec_first(stmt, (id,)).await.unwrap();
            assert!(via_bin == got_direct, "binary result, {size} bytes");
        }
        direct.query_drop("DELETE FROM big").await.unwrap();
    }
    // Statements whose own COM_QUERY packet sits on the boundaries.
    for payload in [(1 << 24) - 2, (1 << 24) - 1, 1 << 24, (1 << 24) + 1] {
        let (sql, fill) = insert_of_payload_size(1, payload);
        via.query_drop(sql.as_slice())
            .await
            .unwrap_or_else(|e| panic!("statement packet of {payload} bytes: {e}"));
        let got_via = fetch(&mut via, 1).await.unwrap();
        let got_direct = fetch(&mut direct, 1).await.unwrap();
        assert_eq!(got_via.len(), fill, "{payload}");
        assert!(got_via == got_direct);
        direct.query_drop("DELETE FROM big").await.unwrap();
    }
}
