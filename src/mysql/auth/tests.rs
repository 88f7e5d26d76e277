//! The handshake state machine against mysql_common's client side.

use super::rsa_key::TEST_KEY as KEY;
use super::*;
use crate::mysql::packet::decode;
use bytes::Bytes;
use mysql_common::io::ParseBuf;
use mysql_common::packets::{
    AuthPlugin, AuthSwitchRequest, ComChangeUser, ComChangeUserMoreData, CommonOkPacket, ErrPacket,
    HandshakePacket, HandshakeResponse, OkPacketDeserializer, SslRequest,
};
use mysql_common::proto::MySerialize;
use mysql_common::scramble::{scramble_native, scramble_sha256};
use rsa::Pkcs1v15Encrypt;
use std::collections::HashMap;

const USERS: &[(&str, &str)] = &[("app", "s3cret"), ("nopw", ""), ("üser", "pässword")];

fn config(users: Option<&[(&str, &str)]>, plugin: Plugin, tls: bool) -> Arc<AuthConfig> {
    Arc::new(AuthConfig {
        server_version: "11.4.0-myquic".into(),
        users: users.map(|u| {
            u.iter()
                .map(|(u, p)| (u.to_string(), p.to_string()))
                .collect()
        }),
        default_plugin: plugin,
        tls_available: tls,
        cache: Arc::new(AuthCache::new()),
        rsa_key: Arc::clone(&KEY),
    })
}

fn client_caps() -> CapabilityFlags {
    CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_LONG_PASSWORD
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_TRANSACTIONS
        | CapabilityFlags::CLIENT_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | CapabilityFlags::CLIENT_DEPRECATE_EOF
        // Not offered by us: must not survive the intersection.
        | CapabilityFlags::CLIENT_COMPRESS
}

fn ser(x: &impl MySerialize) -> Vec<u8> {
    let mut buf = Vec::new();
    x.serialize(&mut buf);
    buf
}

fn packets(out: &mut Packets) -> Vec<Packet> {
    let mut buf = out.take();
    let mut v = Vec::new();
    while let Some(p) = decode(&mut buf, usize::MAX).expect("frame") {
        v.push(p);
    }
    assert!(buf.is_empty());
    v
}

/// Runs the greeting and parses it with mysql_common's client parser.
fn greet(hs: &mut Handshake) -> (HandshakePacket<'static>, Vec<u8>) {
    let mut out = Packets::default();
    hs.greeting(&mut out);
    let ps = packets(&mut out);
    assert_eq!(ps.len(), 1);
    assert_eq!(ps[0].seq, 0);
    let greeting: HandshakePacket = ParseBuf(&ps[0].payload).parse(()).expect("greeting");
    let nonce = greeting.nonce();
    (greeting.into_owned(), nonce)
}

fn feed(
    hs: &mut Handshake,
    seq: u8,
    payload: &[u8],
) -> (Result<Progress, AuthFailure>, Vec<Packet>) {
    let mut out = Packets::default();
    let r = hs.on_packet(
        &Packet {
            seq,
            payload: Bytes::copy_from_slice(payload),
        },
        &mut out,
    );
    (r, packets(&mut out))
}

fn response(
    user: &str,
    scramble: Option<Vec<u8>>,
    db: Option<&str>,
    plugin: Option<AuthPlugin<'static>>,
    attrs: Option<HashMap<String, String>>,
) -> Vec<u8> {
    ser(&HandshakeResponse::new(
        scramble,
        (8, 0, 36),
        Some(user.as_bytes().to_vec()),
        db.map(|d| d.as_bytes().to_vec()),
        plugin,
        client_caps(),
        attrs,
        16 << 20,
    ))
}

fn assert_ok(p: &Packet, seq: u8) {
    assert_eq!(p.seq, seq);
    let ok: OkPacketDeserializer<CommonOkPacket> = ParseBuf(&p.payload)
        .parse(client_caps())
        .expect("OK packet");
    let ok = ok.into_inner();
    assert_eq!(ok.affected_rows(), 0);
    assert_eq!(ok.status_flags(), StatusFlags::SERVER_STATUS_AUTOCOMMIT);
}

fn assert_err(p: &Packet, code: u16, state: &str, message_part: &str) {
    let err: ErrPacket = ParseBuf(&p.payload)
        .parse(client_caps())
        .expect("ERR packet");
    let err = err.server_error();
    assert_eq!(err.error_code(), code);
    assert_eq!(
        err.sql_state_ref()
            .map(|s| s.as_str().into_owned())
            .as_deref(),
        Some(state)
    );
    let msg = err.message_str();
    assert!(msg.contains(message_part), "{msg:?} lacks {message_part:?}");
}

fn done(r: Result<Progress, AuthFailure>) -> Authenticated {
    match r {
        Ok(Progress::Done(a)) => a,
        other => panic!("expected Done, got {other:?}"),
    }
}

/// A mysql_common client's RSA answer: (password + NUL) XOR nonce.
fn rsa_answer(pem: &[u8], password: &str, nonce: &[u8]) -> Vec<u8> {
    let mut pass = password.as_bytes().to_vec();
    pass.push(0);
    for (i, b) in pass.iter_mut().enumerate() {
        *b ^= nonce[i % nonce.len()];
    }
    mysql_common::crypto::encrypt(&pass, pem)
}

#[test]
fn greeting_parses_with_mysql_common() {
    let mut hs = Handshake::new(
        config(Some(USERS), Plugin::CachingSha2Password, false),
        42,
        false,
    );
    let (g, nonce) = greet(&mut hs);
    assert_eq!(g.protocol_version(), 10);
    assert_eq!(g.server_version_str(), "11.4.0-myquic");
    assert_eq!(g.server_version_parsed(), Some((11, 4, 0)));
    assert_eq!(g.connection_id(), 42);
    assert_eq!(g.capabilities(), server_capabilities());
    assert!(!g.capabilities().contains(CapabilityFlags::CLIENT_SSL));
    assert_eq!(g.default_collation(), 45);
    assert_eq!(g.status_flags(), StatusFlags::SERVER_STATUS_AUTOCOMMIT);
    assert_eq!(g.auth_plugin(), Some(AuthPlugin::CachingSha2Password));
    assert_eq!(nonce, hs.nonce);
    assert_eq!(
        g.scramble_2_ref().map(<[u8]>::len),
        Some(13),
        "12 bytes + NUL"
    );
    assert!(nonce.iter().all(|&b| b != 0 && b < 0x80 && b != b'$'));

    let mut tls = Handshake::new(config(None, Plugin::MysqlNativePassword, true), 7, false);
    let (g2, nonce2) = greet(&mut tls);
    assert!(g2.capabilities().contains(CapabilityFlags::CLIENT_SSL));
    assert_eq!(g2.auth_plugin(), Some(AuthPlugin::MysqlNativePassword));
    assert_ne!(nonce, nonce2, "every connection gets a fresh nonce");
}

#[test]
fn native_login_and_session_fields() {
    let mut hs = Handshake::new(
        config(Some(USERS), Plugin::MysqlNativePassword, false),
        1,
        false,
    );
    let (_, nonce) = greet(&mut hs);
    let scramble = scramble_native(&nonce, b"s3cret").map(|s| s.to_vec());
    let attrs = HashMap::from([
        ("_client_name".to_string(), "libmysql".to_string()),
        ("program_name".to_string(), "mysql".to_string()),
    ]);
    let payload = response(
        "app",
        scramble,
        Some("shop"),
        Some(AuthPlugin::MysqlNativePassword),
        Some(attrs.clone()),
    );
    let (r, ps) = feed(&mut hs, 1, &payload);
    let a = done(r);
    assert_eq!(ps.len(), 1);
    assert_ok(&ps[0], 2);
    assert_eq!(a.user, b"app");
    assert_eq!(a.database.as_deref(), Some(&b"shop"[..]));
    assert_eq!(a.plugin, Plugin::MysqlNativePassword);
    assert_eq!(a.charset, 45);
    assert_eq!(a.max_packet, 16 << 20);
    assert!(!a.secure);
    let bytes = |s: &String| s.as_bytes().to_vec();
    let sent: HashMap<_, _> = attrs.iter().map(|(k, v)| (bytes(k), bytes(v))).collect();
    let got: HashMap<_, _> = crate::mysql::reader::attr_pairs(&a.attrs)
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    assert_eq!(got, sent);
    let caps = a.capabilities;
    assert!(
        caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF | CapabilityFlags::CLIENT_PLUGIN_AUTH)
    );
    assert!(!caps.contains(CapabilityFlags::CLIENT_COMPRESS));
    assert!(
        !caps.contains(CapabilityFlags::CLIENT_MULTI_STATEMENTS),
        "client did not ask"
    );
    // The machine is done: more packets are a protocol error.
    let (r, ps) = feed(&mut hs, 3, b"x");
    assert!(matches!(r, Err(AuthFailure::BadHandshake(_))));
    assert_err(&ps[0], 1043, "08S01", "Bad handshake");
}

#[test]
fn native_wrong_password_unknown_user_and_empty_password() {
    let cfg = config(Some(USERS), Plugin::MysqlNativePassword, false);
    let attempt = |user: &str, password: &str| {
        let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
        let (_, nonce) = greet(&mut hs);
        let scramble = scramble_native(&nonce, password.as_bytes()).map(|s| s.to_vec());
        let payload = response(
            user,
            scramble,
            None,
            Some(AuthPlugin::MysqlNativePassword),
            None,
        );
        feed(&mut hs, 1, &payload)
    };
    let (r, ps) = attempt("app", "wrong");
    assert_eq!(
        r,
        Err(AuthFailure::AccessDenied {
            user: "app".into(),
            using_password: true
        })
    );
    assert_eq!(ps[0].seq, 2);
    assert_err(
        &ps[0],
        1045,
        "28000",
        "Access denied for user 'app'@'localhost' (using password: YES)",
    );
    let (r, ps) = attempt("ghost", "s3cret");
    assert!(matches!(r, Err(AuthFailure::AccessDenied { .. })));
    assert_err(
        &ps[0],
        1045,
        "28000",
        "'ghost'@'localhost' (using password: YES)",
    );
    let (_, ps) = attempt("app", "");
    assert_err(&ps[0], 1045, "28000", "(using password: NO)");
    done(attempt("nopw", "").0);
    assert!(attempt("nopw", "something").0.is_err());
    done(attempt("üser", "pässword").0);
}

#[test]
fn caching_sha2_full_auth_over_rsa_then_fast_path() {
    let cfg = config(Some(USERS), Plugin::CachingSha2Password, false);
    // First login: not cached ⇒ full authentication with the RSA key.
    let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
    let (_, nonce) = greet(&mut hs);
    let scramble = scramble_sha256(&nonce, b"s3cret").map(|s| s.to_vec());
    let payload = response(
        "app",
        scramble,
        None,
        Some(AuthPlugin::CachingSha2Password),
        None,
    );
    let (r, ps) = feed(&mut hs, 1, &payload);
    assert_eq!(r, Ok(Progress::Continue));
    assert_eq!((ps[0].seq, &ps[0].payload[..]), (2, &[1u8, 4][..]));
    let (r, ps) = feed(&mut hs, 3, &[2]);
    assert_eq!(r, Ok(Progress::Continue));
    assert_eq!(ps[0].seq, 4);
    assert_eq!(ps[0].payload[0], 1);
    let pem = &ps[0].payload[1..];
    assert!(pem.starts_with(b"-----BEGIN PUBLIC KEY-----"));
    let (r, ps) = feed(&mut hs, 5, &rsa_answer(pem, "s3cret", &nonce));
    let a = done(r);
    assert_eq!(a.plugin, Plugin::CachingSha2Password);
    assert_ok(&ps[0], 6);
    assert_eq!(cfg.cache.len(), 1);

    // Second login: cached ⇒ 01 03 and OK.
    let mut hs = Handshake::new(Arc::clone(&cfg), 2, false);
    let (_, nonce) = greet(&mut hs);
    let scramble = scramble_sha256(&nonce, b"s3cret").map(|s| s.to_vec());
    let payload = response(
        "app",
        scramble,
        None,
        Some(AuthPlugin::CachingSha2Password),
        None,
    );
    let (r, ps) = feed(&mut hs, 1, &payload);
    done(r);
    assert_eq!(ps.len(), 2);
    assert_eq!((ps[0].seq, &ps[0].payload[..]), (2, &[1u8, 3][..]));
    assert_ok(&ps[1], 3);

    // Cached, wrong scramble ⇒ denied at once (MySQL semantics).
    let mut hs = Handshake::new(Arc::clone(&cfg), 3, false);
    let (_, nonce) = greet(&mut hs);
    let scramble = scramble_sha256(&nonce, b"nope").map(|s| s.to_vec());
    let payload = response(
        "app",
        scramble,
        None,
        Some(AuthPlugin::CachingSha2Password),
        None,
    );
    let (r, ps) = feed(&mut hs, 1, &payload);
    assert!(matches!(r, Err(AuthFailure::AccessDenied { .. })));
    assert_err(&ps[0], 1045, "28000", "using password: YES");

    // A changed password invalidates the cache entry.
    let mut changed = (*cfg).clone();
    changed.users = Some(HashMap::from([("app".to_string(), "n3w".to_string())]));
    let mut hs = Handshake::new(Arc::new(changed), 4, false);
    let (_, nonce) = greet(&mut hs);
    let scramble = scramble_sha256(&nonce, b"n3w").map(|s| s.to_vec());
    let payload = response(
        "app",
        scramble,
        None,
        Some(AuthPlugin::CachingSha2Password),
        None,
    );
    let (_, ps) = feed(&mut hs, 1, &payload);
    assert_eq!(&ps[0].payload[..], &[1u8, 4][..]);
}

/// As MariaDB: CLIENT_MYSQL cleared and extended metadata offered in
/// the greeting's last reserved bytes; taken only from a client that
/// cleared CLIENT_MYSQL too, and only for a MariaDB version.
#[test]
fn mariadb_extended_metadata_is_negotiated() {
    use crate::mysql::MariadbCapabilities as Ext;
    let login = |version: &str, client_caps: CapabilityFlags, ext: Ext| {
        let mut cfg = (*config(Some(USERS), Plugin::MysqlNativePassword, false)).clone();
        cfg.server_version = version.into();
        let mut hs = Handshake::new(Arc::new(cfg), 1, false);
        let (g, nonce) = greet(&mut hs);
        let payload = ser(&HandshakeResponse::new(
            Some(scramble_native(&nonce, b"s3cret").unwrap().to_vec()),
            (10, 11, 0),
            Some(b"app".to_vec()),
            None::<Vec<u8>>,
            Some(AuthPlugin::MysqlNativePassword),
            client_caps,
            None,
            16 << 20,
        )
        .with_mariadb_ext_capabilities(ext));
        (g, done(feed(&mut hs, 1, &payload).0))
    };
    let mariadb = "5.5.5-10.11.19-MariaDB";
    let mariadb_client = client_caps() - CapabilityFlags::CLIENT_LONG_PASSWORD;
    let all = Ext::MARIADB_CLIENT_EXTENDED_METADATA | Ext::MARIADB_CLIENT_STMT_BULK_OPERATIONS;

    let (g, a) = login(mariadb, mariadb_client, all);
    assert!(
        !g.capabilities()
            .contains(CapabilityFlags::CLIENT_LONG_PASSWORD)
    );
    assert_eq!(
        g.mariadb_ext_capabilities(),
        Ext::MARIADB_CLIENT_EXTENDED_METADATA
    );
    assert_eq!(
        a.mariadb_capabilities,
        Ext::MARIADB_CLIENT_EXTENDED_METADATA
    );
    assert_eq!(a.column_style, ColumnStyle::MariadbExtended);

    // A client that kept CLIENT_MYSQL: those bytes are filler.
    let (_, a) = login(mariadb, client_caps(), all);
    assert_eq!(a.mariadb_capabilities, Ext::empty());
    assert_eq!(a.column_style, ColumnStyle::Mariadb);

    let (g, a) = login("8.0.36-myquic", mariadb_client, all);
    assert!(
        g.capabilities()
            .contains(CapabilityFlags::CLIENT_LONG_PASSWORD)
    );
    assert_eq!(g.mariadb_ext_capabilities(), Ext::empty());
    assert_eq!(a.mariadb_capabilities, Ext::empty());
    assert_eq!(a.column_style, ColumnStyle::Mysql);
}

/// Connector/J against a "5.5.5-…" (MariaDB) version: auth data
/// without the 0x01 prefix, RSA with PKCS#1 v1.5; other clients and
/// versions keep MySQL 8's shape.
#[test]
fn caching_sha2_for_connector_j_on_a_mariadb_version() {
    use rsa::pkcs8::DecodePublicKey;
    let mut mariadb = (*config(Some(USERS), Plugin::CachingSha2Password, false)).clone();
    mariadb.server_version = "5.5.5-10.11.19-MariaDB".into();
    let cfg = Arc::new(mariadb);
    let connector_j = || {
        Some(HashMap::from([(
            "_client_name".to_string(),
            "MySQL Connector/J".to_string(),
        )]))
    };
    let login = |hs: &mut Handshake, attrs| {
        let (_, nonce) = greet(hs);
        let scramble = scramble_sha256(&nonce, b"s3cret").map(|s| s.to_vec());
        let payload = response(
            "app",
            scramble,
            None,
            Some(AuthPlugin::CachingSha2Password),
            attrs,
        );
        (nonce, feed(hs, 1, &payload))
    };

    // Another client: MySQL 8's 01 04.
    let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
    let (_, (_, ps)) = login(&mut hs, None);
    assert_eq!(&ps[0].payload[..], &[1u8, 4][..]);

    // Connector/J: 04, then the bare PEM, then PKCS#1 v1.5.
    let mut hs = Handshake::new(Arc::clone(&cfg), 2, false);
    let (nonce, (r, ps)) = login(&mut hs, connector_j());
    assert_eq!(r, Ok(Progress::Continue));
    assert_eq!(&ps[0].payload[..], &[4u8][..]);
    let (_, ps) = feed(&mut hs, 3, &[2]);
    let pem = std::str::from_utf8(&ps[0].payload).unwrap();
    assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----"));
    let public = rsa::RsaPublicKey::from_public_key_pem(pem).unwrap();
    let mut pass = b"s3cret\0".to_vec();
    for (i, b) in pass.iter_mut().enumerate() {
        *b ^= nonce[i % nonce.len()];
    }
    let ciphertext = public
        .encrypt(&mut rsa::rand_core::OsRng, Pkcs1v15Encrypt, &pass)
        .unwrap();
    let (r, ps) = feed(&mut hs, 5, &ciphertext);
    done(r);
    assert_ok(&ps[0], 6);

    // Cached now: a bare 03, then OK.
    let mut hs = Handshake::new(Arc::clone(&cfg), 3, false);
    let (_, (r, ps)) = login(&mut hs, connector_j());
    done(r);
    assert_eq!(&ps[0].payload[..], &[3u8][..]);
    assert_ok(&ps[1], 3);
}

#[test]
fn caching_sha2_rsa_without_key_request_and_wrong_password() {
    let cfg = config(Some(USERS), Plugin::CachingSha2Password, false);
    let pem = KEY.public_pem().expect("key").as_bytes().to_vec();
    let login = |password: &str| {
        let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
        let (_, nonce) = greet(&mut hs);
        let scramble = scramble_sha256(&nonce, password.as_bytes()).map(|s| s.to_vec());
        let payload = response(
            "app",
            scramble,
            None,
            Some(AuthPlugin::CachingSha2Password),
            None,
        );
        assert_eq!(feed(&mut hs, 1, &payload).0, Ok(Progress::Continue));
        // The client already knows the key (--server-public-key-path).
        feed(&mut hs, 3, &rsa_answer(&pem, password, &nonce))
    };
    let (r, ps) = login("wrong");
    assert!(matches!(r, Err(AuthFailure::AccessDenied { .. })));
    assert_err(&ps[0], 1045, "28000", "'app'@'localhost'");
    assert!(cfg.cache.is_empty(), "a failure caches nothing");
    let (r, ps) = login("s3cret");
    done(r);
    assert_ok(&ps[0], 4);
    // Garbage of the right length is a failed decryption, not a panic.
    let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
    let (_, nonce) = greet(&mut hs);
    let scramble = scramble_sha256(&nonce, b"x").map(|s| s.to_vec());
    cfg.cache.clear();
    let payload = response(
        "app",
        scramble,
        None,
        Some(AuthPlugin::CachingSha2Password),
        None,
    );
    assert_eq!(feed(&mut hs, 1, &payload).0, Ok(Progress::Continue));
    let (r, _) = feed(&mut hs, 3, &[0x55; 256]);
    assert!(matches!(r, Err(AuthFailure::AccessDenied { .. })));
}

#[test]
fn caching_sha2_cleartext_only_on_secure_transports() {
    let cfg = config(Some(USERS), Plugin::CachingSha2Password, false);
    let start = |secure: bool| {
        let mut hs = Handshake::new(Arc::clone(&cfg), 1, secure);
        let (_, nonce) = greet(&mut hs);
        let scramble = scramble_sha256(&nonce, b"s3cret").map(|s| s.to_vec());
        let payload = response(
            "app",
            scramble,
            None,
            Some(AuthPlugin::CachingSha2Password),
            None,
        );
        let (_, ps) = feed(&mut hs, 1, &payload);
        assert_eq!(&ps[0].payload[..], &[1u8, 4][..]);
        hs
    };
    // Insecure TCP: refused, with a message that says what to do.
    let mut hs = start(false);
    let (r, ps) = feed(&mut hs, 3, b"s3cret\0");
    assert_eq!(
        r,
        Err(AuthFailure::InsecureCleartext { user: "app".into() })
    );
    assert_err(&ps[0], 1045, "28000", "secure connection");
    assert!(cfg.cache.is_empty());
    // Unix socket: accepted.
    let mut hs = start(true);
    let a = done(feed(&mut hs, 3, b"s3cret\0").0);
    assert!(a.secure);
    assert_eq!(cfg.cache.len(), 1);
    // Unix socket, wrong password.
    cfg.cache.clear();
    let mut hs = start(true);
    let (r, _) = feed(&mut hs, 3, b"s3cre\0");
    assert!(matches!(r, Err(AuthFailure::AccessDenied { .. })));
    // A key request is honoured even on a unix socket (some clients do
    // not count it as secure); a cleartext answer is then still
    // refused on TCP only.
    for secure in [true, false] {
        cfg.cache.clear();
        let mut hs = start(secure);
        let (r, ps) = feed(&mut hs, 3, &[2]);
        assert_eq!(r, Ok(Progress::Continue));
        assert!(ps[0].payload[1..].starts_with(b"-----BEGIN PUBLIC KEY-----"));
        let (r, _) = feed(&mut hs, 5, b"s3cret\0");
        assert_eq!(r.is_ok(), secure, "{r:?}");
        if !secure {
            assert!(matches!(r, Err(AuthFailure::InsecureCleartext { .. })));
        }
    }
}

#[test]
fn caching_sha2_unknown_user_looks_like_an_uncached_one() {
    let cfg = config(Some(USERS), Plugin::CachingSha2Password, false);
    let mut hs = Handshake::new(cfg, 1, true);
    let (_, nonce) = greet(&mut hs);
    let scramble = scramble_sha256(&nonce, b"s3cret").map(|s| s.to_vec());
    let payload = response(
        "ghost",
        scramble,
        None,
        Some(AuthPlugin::CachingSha2Password),
        None,
    );
    let (_, ps) = feed(&mut hs, 1, &payload);
    assert_eq!(&ps[0].payload[..], &[1u8, 4][..]);
    let (r, ps) = feed(&mut hs, 3, b"s3cret\0");
    assert!(matches!(r, Err(AuthFailure::AccessDenied { .. })));
    assert_err(
        &ps[0],
        1045,
        "28000",
        "'ghost'@'localhost' (using password: YES)",
    );
}

#[test]
fn caching_sha2_empty_passwords() {
    let cfg = config(Some(USERS), Plugin::CachingSha2Password, false);
    let login = |user: &str, scramble: Option<Vec<u8>>| {
        let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
        greet(&mut hs);
        let payload = response(
            user,
            scramble,
            None,
            Some(AuthPlugin::CachingSha2Password),
            None,
        );
        feed(&mut hs, 1, &payload)
    };
    let (r, ps) = login("nopw", None);
    done(r);
    assert_ok(&ps[0], 2);
    let (r, ps) = login("app", None);
    assert!(r.is_err());
    assert_err(&ps[0], 1045, "28000", "(using password: NO)");
    assert!(login("nopw", Some(vec![7; 32])).0.is_err());
    assert!(login("ghost", None).0.is_err());
}

#[test]
fn auth_switch_when_plugins_differ() {
    for (default, client_plugin) in [
        (Plugin::CachingSha2Password, AuthPlugin::MysqlNativePassword),
        (Plugin::MysqlNativePassword, AuthPlugin::CachingSha2Password),
        (Plugin::MysqlNativePassword, AuthPlugin::MysqlClearPassword),
        (Plugin::MysqlNativePassword, AuthPlugin::Ed25519),
        (
            Plugin::MysqlNativePassword,
            AuthPlugin::Other(b"".as_slice().into()),
        ),
    ] {
        let mut hs = Handshake::new(config(Some(USERS), default, false), 1, true);
        let (_, nonce) = greet(&mut hs);
        let payload = response(
            "app",
            Some(vec![1, 2, 3]),
            None,
            Some(client_plugin.clone()),
            None,
        );
        let (r, ps) = feed(&mut hs, 1, &payload);
        assert_eq!(r, Ok(Progress::Continue), "{client_plugin:?}");
        assert_eq!(ps[0].seq, 2);
        let switch: AuthSwitchRequest = ParseBuf(&ps[0].payload).parse(()).expect("switch");
        assert_eq!(switch.auth_plugin().as_bytes(), default.name().as_bytes());
        assert_eq!(switch.plugin_data(), &nonce[..]);
        let data = AuthPlugin::from_bytes(default.name().as_bytes())
            .gen_data(Some("s3cret"), switch.plugin_data())
            .expect("scramble");
        let (r, ps) = feed(&mut hs, 3, &data);
        match default {
            Plugin::MysqlNativePassword => {
                done(r);
                assert_ok(&ps[0], 4);
            }
            Plugin::CachingSha2Password => {
                assert_eq!(&ps[0].payload[..], &[1u8, 4][..]);
                assert_eq!(ps[0].seq, 4);
                done(feed(&mut hs, 5, b"s3cret\0").0);
            }
        }
    }
}

#[test]
fn client_without_plugin_auth_is_verified_as_native() {
    let mut hs = Handshake::new(
        config(Some(USERS), Plugin::CachingSha2Password, false),
        1,
        false,
    );
    let (_, nonce) = greet(&mut hs);
    let scramble = scramble_native(&nonce, b"s3cret").map(|s| s.to_vec());
    let payload = response("app", scramble, None, None, None);
    let (r, ps) = feed(&mut hs, 1, &payload);
    let a = done(r);
    assert_eq!(a.plugin, Plugin::MysqlNativePassword);
    assert!(!a.capabilities.contains(CapabilityFlags::CLIENT_PLUGIN_AUTH));
    assert_ok(&ps[0], 2);
}

#[test]
fn tls_upgrade_continues_the_sequence_and_counts_as_secure() {
    let cfg = config(Some(USERS), Plugin::CachingSha2Password, true);
    let mut hs = Handshake::new(Arc::clone(&cfg), 9, false);
    let (_, nonce) = greet(&mut hs);
    let caps = client_caps() | CapabilityFlags::CLIENT_SSL | CapabilityFlags::CLIENT_PLUGIN_AUTH;
    let ssl = ser(&SslRequest::new(caps, 16 << 20, 45));
    assert_eq!(ssl.len(), 32);
    let (r, ps) = feed(&mut hs, 1, &ssl);
    assert_eq!(r, Ok(Progress::StartTls));
    assert!(ps.is_empty());
    assert!(hs.is_secure());
    let scramble = scramble_sha256(&nonce, b"s3cret").map(|s| s.to_vec());
    let payload = ser(&HandshakeResponse::new(
        scramble,
        (8, 0, 36),
        Some(b"app".to_vec()),
        None::<Vec<u8>>,
        Some(AuthPlugin::CachingSha2Password),
        caps,
        None,
        16 << 20,
    ));
    let (r, ps) = feed(&mut hs, 2, &payload);
    assert_eq!(r, Ok(Progress::Continue));
    assert_eq!((ps[0].seq, &ps[0].payload[..]), (3, &[1u8, 4][..]));
    let (r, ps) = feed(&mut hs, 4, b"s3cret\0");
    let a = done(r);
    assert!(a.secure);
    assert!(a.capabilities.contains(CapabilityFlags::CLIENT_SSL));
    assert_ok(&ps[0], 5);
}

#[test]
fn ssl_request_without_tls_and_ssl_flag_without_request_are_bad_handshakes() {
    let mut hs = Handshake::new(config(None, Plugin::CachingSha2Password, false), 1, false);
    greet(&mut hs);
    let ssl = ser(&SslRequest::new(
        client_caps() | CapabilityFlags::CLIENT_SSL,
        1 << 24,
        45,
    ));
    let (r, ps) = feed(&mut hs, 1, &ssl);
    assert!(matches!(r, Err(AuthFailure::BadHandshake(_))));
    assert_err(&ps[0], 1043, "08S01", "Bad handshake");

    let mut hs = Handshake::new(config(None, Plugin::CachingSha2Password, true), 1, false);
    greet(&mut hs);
    let payload = ser(&HandshakeResponse::new(
        None::<Vec<u8>>,
        (8, 0, 36),
        Some(b"app".to_vec()),
        None::<Vec<u8>>,
        Some(AuthPlugin::CachingSha2Password),
        client_caps() | CapabilityFlags::CLIENT_SSL,
        None,
        16 << 20,
    ));
    assert!(matches!(
        feed(&mut hs, 1, &payload).0,
        Err(AuthFailure::BadHandshake(_))
    ));
}

#[test]
fn malformed_responses_are_bad_handshakes_never_panics() {
    let cfg = config(Some(USERS), Plugin::MysqlNativePassword, false);
    let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
    let (_, nonce) = greet(&mut hs);
    let attrs = HashMap::from([("k".to_string(), "v".repeat(300))]);
    let scramble = scramble_native(&nonce, b"s3cret").map(|s| s.to_vec());
    let full = response(
        "app",
        scramble,
        Some("db"),
        Some(AuthPlugin::MysqlNativePassword),
        Some(attrs),
    );
    for len in 0..full.len() {
        let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
        greet(&mut hs);
        let (r, ps) = feed(&mut hs, 1, &full[..len]);
        // Truncations inside the trailing NUL-or-rest fields may parse;
        // none may panic, and every failure carries an ERR packet.
        if let Err(e) = r {
            assert_eq!(ps.len(), 1, "{e}");
        }
    }
    let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
    greet(&mut hs);
    let (r, ps) = feed(&mut hs, 1, &full[..20]);
    assert!(matches!(r, Err(AuthFailure::BadHandshake(_))));
    assert_err(&ps[0], 1043, "08S01", "Bad handshake");
    // Pre-4.1 clients are refused.
    let mut old = full.clone();
    old[0] &= !0x0200u32.to_le_bytes()[0];
    old[1] &= !(CapabilityFlags::CLIENT_PROTOCOL_41.bits() >> 8) as u8;
    let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
    greet(&mut hs);
    assert!(matches!(
        feed(&mut hs, 1, &old).0,
        Err(AuthFailure::BadHandshake(_))
    ));
}

#[test]
fn out_of_order_and_out_of_place_packets() {
    let mut hs = Handshake::new(config(None, Plugin::MysqlNativePassword, false), 1, false);
    let (r, ps) = feed(&mut hs, 0, b"early");
    assert!(matches!(
        r,
        Err(AuthFailure::OutOfOrder { .. }) | Err(AuthFailure::BadHandshake(_))
    ));
    assert_eq!(ps.len(), 1);
    let mut hs = Handshake::new(config(None, Plugin::MysqlNativePassword, false), 1, false);
    greet(&mut hs);
    let (r, ps) = feed(&mut hs, 5, &response("x", None, None, None, None));
    assert_eq!(
        r,
        Err(AuthFailure::OutOfOrder {
            expected: 1,
            got: 5
        })
    );
    assert_err(&ps[0], 1156, "08S01", "out of order");
}

#[test]
fn open_mode_accepts_anyone_with_a_proper_exchange() {
    let cfg = config(None, Plugin::CachingSha2Password, false);
    let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
    let (_, nonce) = greet(&mut hs);
    let scramble = scramble_sha256(&nonce, b"whatever").map(|s| s.to_vec());
    let payload = response(
        "anyone",
        scramble,
        None,
        Some(AuthPlugin::CachingSha2Password),
        None,
    );
    let (r, ps) = feed(&mut hs, 1, &payload);
    assert_eq!(done(r).user, b"anyone");
    assert_eq!(&ps[0].payload[..], &[1u8, 3][..]);
    assert_ok(&ps[1], 3);
    // Empty password: OK straight away.
    let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
    greet(&mut hs);
    let payload = response(
        "anyone",
        None,
        None,
        Some(AuthPlugin::CachingSha2Password),
        None,
    );
    let (r, ps) = feed(&mut hs, 1, &payload);
    done(r);
    assert_ok(&ps[0], 2);
    // Native, after a switch.
    let mut hs = Handshake::new(config(None, Plugin::MysqlNativePassword, false), 1, false);
    greet(&mut hs);
    let payload = response(
        "a",
        Some(vec![1; 32]),
        None,
        Some(AuthPlugin::CachingSha2Password),
        None,
    );
    assert_eq!(feed(&mut hs, 1, &payload).0, Ok(Progress::Continue));
    done(feed(&mut hs, 3, &[9; 20]).0);
}

fn logged_in(cfg: &Arc<AuthConfig>) -> (Handshake, Vec<u8>) {
    let mut hs = Handshake::new(Arc::clone(cfg), 1, true);
    let (_, nonce) = greet(&mut hs);
    let plugin = AuthPlugin::from_bytes(cfg.default_plugin.name().as_bytes()).into_owned();
    let scramble = plugin.gen_data(Some("s3cret"), &nonce).map(|d| d.to_vec());
    // Announce attributes so that CLIENT_CONNECT_ATTRS is negotiated.
    let payload = response(
        "app",
        scramble,
        Some("shop"),
        Some(plugin),
        Some(HashMap::new()),
    );
    let (r, _) = feed(&mut hs, 1, &payload);
    if r == Ok(Progress::Continue) {
        done(feed(&mut hs, 3, b"s3cret\0").0);
    } else {
        done(r);
    }
    (hs, nonce)
}

fn change_user_body(user: &str, db: &str, charset: u16, attrs: bool) -> Vec<u8> {
    let more = ComChangeUserMoreData::new(charset)
        .with_auth_plugin(Some(AuthPlugin::MysqlNativePassword))
        .with_connect_attributes(
            attrs.then(|| HashMap::from([("a".to_string(), "b".to_string())])),
        );
    let cmd = ComChangeUser::new()
        .with_user(Some(user.as_bytes()))
        .with_database(Some(db.as_bytes()))
        .with_auth_plugin_data(Some(&[1u8; 20][..]))
        .with_more_data(Some(more));
    let bytes = ser(&cmd);
    assert_eq!(bytes[0], 0x11);
    bytes[1..].to_vec()
}

#[test]
fn change_user_switches_with_a_fresh_nonce() {
    for plugin in [Plugin::MysqlNativePassword, Plugin::CachingSha2Password] {
        let cfg = config(Some(USERS), plugin, false);
        let (mut hs, old_nonce) = logged_in(&cfg);
        let mut out = Packets::default();
        let body = change_user_body("üser", "other", 33, true);
        assert_eq!(hs.change_user(0, &body, &mut out), Ok(Progress::Continue));
        let ps = packets(&mut out);
        assert_eq!(ps[0].seq, 1);
        let switch: AuthSwitchRequest = ParseBuf(&ps[0].payload).parse(()).expect("switch");
        assert_eq!(switch.auth_plugin().as_bytes(), plugin.name().as_bytes());
        assert_ne!(switch.plugin_data(), &old_nonce[..]);
        let data = AuthPlugin::from_bytes(plugin.name().as_bytes())
            .gen_data(Some("pässword"), switch.plugin_data())
            .expect("scramble");
        let (r, ps) = feed(&mut hs, 2, &data);
        let r = if plugin == Plugin::CachingSha2Password {
            // Secure transport (unix socket): cleartext full auth.
            assert_eq!(&ps[0].payload[..], &[1u8, 4][..]);
            feed(&mut hs, 4, "pässword\0".as_bytes()).0
        } else {
            assert_ok(&ps[0], 3);
            r
        };
        let a = done(r);
        assert_eq!(a.user, "üser".as_bytes());
        assert_eq!(a.database.as_deref(), Some(&b"other"[..]));
        assert_eq!(a.charset, 33);
        assert_eq!(a.attrs, b"\x01a\x01b");
    }
}

#[test]
fn change_user_failures() {
    let cfg = config(Some(USERS), Plugin::MysqlNativePassword, false);
    let (mut hs, _) = logged_in(&cfg);
    let mut out = Packets::default();
    let body = change_user_body("app", "", 45, false);
    assert_eq!(hs.change_user(0, &body, &mut out), Ok(Progress::Continue));
    let switch = packets(&mut out).remove(0);
    let switch: AuthSwitchRequest = ParseBuf(&switch.payload).parse(()).expect("switch");
    let wrong = scramble_native(switch.plugin_data(), b"wrong").expect("scramble");
    let (r, ps) = feed(&mut hs, 2, &wrong);
    assert!(matches!(r, Err(AuthFailure::AccessDenied { .. })));
    assert_err(&ps[0], 1045, "28000", "'app'@'localhost'");
    assert_eq!(ps[0].seq, 3);

    // Truncated body.
    let (mut hs, _) = logged_in(&cfg);
    let mut out = Packets::default();
    let r = hs.change_user(0, b"app", &mut out);
    assert!(matches!(r, Err(AuthFailure::BadHandshake(_))));
    assert_err(&packets(&mut out)[0], 1043, "08S01", "Bad handshake");

    // Before login.
    let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
    greet(&mut hs);
    let mut out = Packets::default();
    assert!(hs.change_user(0, &body, &mut out).is_err());
}

#[test]
fn change_user_without_plugin_auth_verifies_native_on_the_old_nonce() {
    let cfg = config(Some(USERS), Plugin::CachingSha2Password, false);
    let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
    let (_, nonce) = greet(&mut hs);
    let scramble = scramble_native(&nonce, b"s3cret").map(|s| s.to_vec());
    done(feed(&mut hs, 1, &response("app", scramble, None, None, None)).0);
    let mut body = b"nopw\0".to_vec();
    body.push(0); // empty auth response (1-byte length)
    body.extend_from_slice(b"db2\0");
    let mut out = Packets::default();
    let a = done(hs.change_user(0, &body, &mut out));
    assert_eq!(
        (&a.user[..], a.database.as_deref()),
        (&b"nopw"[..], Some(&b"db2"[..]))
    );
    assert_eq!(a.charset, 45, "kept when the client sends none");
    assert_ok(&packets(&mut out)[0], 1);
    let mut body = b"app\0\x14".to_vec();
    body.extend_from_slice(&scramble_native(&nonce, b"s3cret").expect("scramble"));
    body.push(0);
    let mut out = Packets::default();
    assert_eq!(done(hs.change_user(0, &body, &mut out)).database, None);
}

/// Random and mangled login packets, fed as a hostile client would send
/// them (the rate and a long run: `MQ_FUZZ_ITERATIONS`): no input may
/// panic, and every reply is whole packets.
#[test]
fn random_login_packets_never_panic() {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    let n: u64 = std::env::var("MQ_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000);
    let mut rng = SmallRng::seed_from_u64(7);
    // A well-formed response to mangle.
    let valid = ser(&HandshakeResponse::new(
        Some(&[0u8; 20][..]),
        (5, 5, 5),
        Some(&b"app"[..]),
        Some(&b"db"[..]),
        Some(AuthPlugin::MysqlNativePassword),
        client_caps()
            | CapabilityFlags::CLIENT_CONNECT_WITH_DB
            | CapabilityFlags::CLIENT_CONNECT_ATTRS,
        None,
        1 << 24,
    ));
    for _ in 0..n {
        let plugin =
            [Plugin::MysqlNativePassword, Plugin::CachingSha2Password][rng.random_range(0..2)];
        let tls = rng.random_bool(0.5);
        let mut hs = Handshake::new(config(Some(USERS), plugin, tls), 1, rng.random_bool(0.5));
        let mut out = Packets::default();
        hs.greeting(&mut out);
        for seq in 1..rng.random_range(2u8..5) {
            let mut payload = if rng.random_bool(0.7) {
                valid.clone()
            } else {
                Vec::new()
            };
            // Flip, cut and append bytes.
            for _ in 0..rng.random_range(0..6) {
                if !payload.is_empty() {
                    let at = rng.random_range(0..payload.len());
                    payload[at] = rng.random();
                }
            }
            if rng.random_bool(0.3) {
                payload.truncate(rng.random_range(0..=payload.len()));
            }
            payload.extend((0..rng.random_range(0..8)).map(|_| rng.random::<u8>()));
            let packet = Packet {
                seq: if rng.random_ratio(1, 10) {
                    rng.random()
                } else {
                    seq
                },
                payload: Bytes::from(payload),
            };
            let mut out = Packets::default();
            let progress = hs.on_packet(&packet, &mut out);
            let mut buf = out.take();
            while decode(&mut buf, usize::MAX)
                .expect("whole packets")
                .is_some()
            {}
            assert!(buf.is_empty(), "a partial packet");
            if !matches!(progress, Ok(Progress::Continue)) {
                break;
            }
        }
    }
}

/// A name in the client's character set (latin1 `café` is 63 61 66 E9):
/// kept as its bytes, never decoded into another name. With a user list
/// (UTF-8) nobody has it: refused, quoting the bytes sent; in open mode it
/// logs in as exactly those bytes, distinct from a name that differs only
/// in bytes UTF-8 cannot read (KILL rights are by name).
#[test]
fn a_user_name_that_is_not_utf8_stays_its_bytes() {
    let login = |cfg: &Arc<AuthConfig>, user: &[u8]| {
        let mut hs = Handshake::new(Arc::clone(cfg), 1, false);
        let (_, nonce) = greet(&mut hs);
        let scramble = scramble_native(&nonce, b"s3cret").map(|s| s.to_vec());
        let payload = ser(&HandshakeResponse::new(
            scramble,
            (8, 0, 36),
            Some(user.to_vec()),
            None::<Vec<u8>>,
            Some(AuthPlugin::MysqlNativePassword),
            client_caps(),
            None,
            16 << 20,
        ));
        feed(&mut hs, 1, &payload)
    };
    let users = config(Some(USERS), Plugin::MysqlNativePassword, false);
    let (r, ps) = login(&users, b"caf\xe9");
    assert_eq!(
        r,
        Err(AuthFailure::AccessDenied {
            user: b"caf\xe9".to_vec(),
            using_password: true
        })
    );
    let err: ErrPacket = ParseBuf(&ps[0].payload).parse(client_caps()).unwrap();
    assert_eq!(
        err.server_error().message_ref(),
        b"Access denied for user 'caf\xe9'@'localhost' (using password: YES)"
    );
    let open = config(None, Plugin::MysqlNativePassword, false);
    let first = done(login(&open, b"caf\xe9").0).user;
    let second = done(login(&open, b"caf\xe8").0).user;
    assert_eq!(first, b"caf\xe9");
    assert_ne!(first, second);
}

/// The attribute block is kept as the client wrote it, pairs that do not
/// parse included (MariaDB logs such a client in and shows what it can
/// read); a block over MariaDB's 64 KiB, or one running past the packet,
/// is a bad handshake, as there.
#[test]
fn attribute_blocks_are_kept_raw_and_bounded() {
    let cfg = config(Some(USERS), Plugin::MysqlNativePassword, false);
    let with_block = |nonce: &[u8], block: &[u8]| {
        let scramble = scramble_native(nonce, b"s3cret").map(|s| s.to_vec());
        let mut p = response(
            "app",
            scramble,
            Some("db"),
            Some(AuthPlugin::MysqlNativePassword),
            None,
        );
        let caps = u32::from_le_bytes(p[..4].try_into().unwrap())
            | CapabilityFlags::CLIENT_CONNECT_ATTRS.bits();
        p[..4].copy_from_slice(&caps.to_le_bytes());
        p.extend_from_slice(block);
        p
    };
    // A value longer than what is left of the block.
    let odd = b"\x09\x01k\x01v\x01j\x09sh";
    let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
    let (_, nonce) = greet(&mut hs);
    let a = done(feed(&mut hs, 1, &with_block(&nonce, odd)).0);
    assert_eq!(a.attrs, &odd[1..]);
    let pairs: Vec<_> = crate::mysql::reader::attr_pairs(&a.attrs).collect();
    assert_eq!(pairs, vec![(&b"k"[..], &b"v"[..])]);
    // 65,535 bytes are taken, one more is not.
    for (len, ok) in [(65_535usize, true), (65_536, false)] {
        let mut block = vec![0xfd];
        block.extend_from_slice(&(len as u32).to_le_bytes()[..3]);
        block.resize(4 + len, b'x');
        let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
        let (_, nonce) = greet(&mut hs);
        let (r, ps) = feed(&mut hs, 1, &with_block(&nonce, &block));
        assert_eq!(r.is_ok(), ok, "{len}");
        if !ok {
            assert_err(&ps[0], 1043, "08S01", "Bad handshake");
        }
    }
    // A block longer than the packet.
    let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
    let (_, nonce) = greet(&mut hs);
    let (r, _) = feed(&mut hs, 1, &with_block(&nonce, b"\x09\x01k\x01v"));
    assert!(matches!(r, Err(AuthFailure::BadHandshake(_))));
}
