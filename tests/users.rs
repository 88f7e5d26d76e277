//! Each local account may run as its own backend identity (issue 12):
//! `[[sidecar.auth.users]]` with `upstream_username`/`upstream_password`
//! names a gateway credential, which the gateway maps to a backend
//! account. The same client (`mysql_async`) runs the same statements
//! directly against MariaDB and through sidecar → gateway, logged in as
//! the same account names and passwords, and what it sees is compared
//! step by step: `CURRENT_USER()`, the read-only account's privilege
//! error (1142), `COM_CHANGE_USER` between the two (state reset, an open
//! transaction rolled back), a login database one account may use and the
//! other may not (1044, also after the first has had it), and the
//! backend's own 1045 at connect while an account does not exist yet,
//! with a login database and without.

mod common;

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{ChangeUserOpts, Conn, OptsBuilder};
use tokio::net::UnixStream;

use myquic::config::LocalUser;
use myquic::gateway::Credential;

use common::raw_mysql::{Answer, RawClient};
use common::sidecar::{Chain, local_user};
use common::{LOCAL_PASSWORD, LOCAL_USER, MariaDb, Stack, secret};

/// A backend account, logged in to under the same name and password
/// directly and (as a local account of the sidecar) through it.
#[derive(Clone, Copy)]
struct Account {
    user: &'static str,
    password: &'static str,
    /// The gateway credential it runs under through the sidecar.
    api_user: &'static str,
}

/// May read `app`, nothing else.
const READER: Account = Account {
    user: "reporting",
    password: "reporting-pw",
    api_user: "api-reporting",
};

/// May write `app` and use `private`; no password, and created only after
/// the gateway has started (as a test suite creates its accounts).
const WRITER: Account = Account {
    user: "writer",
    password: "",
    api_user: "api-writer",
};

fn api_password(account: Account) -> String {
    format!("{}-secret", account.api_user)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Direct,
    Sidecar,
}

/// MariaDB with the reader and the tables; the gateway with the two
/// credentials (the writer's backend account not created yet); the
/// sidecar with the fixture's default account and the two of their own.
async fn chain() -> Chain {
    let db = MariaDb::start().await;
    let mut root = Conn::new(db.root_opts()).await.unwrap();
    root.query_drop(
        "CREATE USER reporting@localhost IDENTIFIED BY 'reporting-pw'; \
         GRANT SELECT ON app.* TO reporting@localhost; \
         CREATE DATABASE private; \
         CREATE TABLE app.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB; \
         INSERT INTO app.t VALUES (1, 0)",
    )
    .await
    .unwrap();
    root.disconnect().await.unwrap();
    let stack = Stack::start_on(db, |config| {
        for account in [READER, WRITER] {
            config.credentials.push(Credential {
                username: account.api_user.into(),
                password: secret(&api_password(account)),
                backend_user: Some(account.user.into()),
                backend_password: Some(secret(account.password)),
                database: None,
            });
        }
    })
    .await;
    let chain = Chain::launch_on(stack, |config| {
        config.auth.users = vec![
            local_user(LOCAL_USER, LOCAL_PASSWORD),
            own_account(READER),
            own_account(WRITER),
        ];
    })
    .await;
    // Compared with a direct MariaDB connection: the sidecar must greet
    // as the backend does, which it learns shortly after start.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !chain.sidecar.server_version().contains("MariaDB") {
        assert!(tokio::time::Instant::now() < deadline, "version learned");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    chain
}

fn own_account(account: Account) -> LocalUser {
    LocalUser {
        username: account.user.into(),
        password: secret(account.password),
        upstream_username: Some(account.api_user.into()),
        upstream_password: Some(secret(&api_password(account))),
    }
}

fn opts(chain: &Chain, target: Target, account: Account, db: Option<&str>) -> OptsBuilder {
    let base = match target {
        Target::Direct => OptsBuilder::from_opts(chain.stack.db.root_opts()),
        Target::Sidecar => chain.opts("", ""),
    };
    base.user(Some(account.user))
        .pass(Some(account.password))
        .db_name(db)
}

async fn connect(
    chain: &Chain,
    target: Target,
    account: Account,
    db: Option<&str>,
) -> Result<Conn, String> {
    let login = Conn::new(opts(chain, target, account, db));
    tokio::time::timeout(Duration::from_secs(10), login)
        .await
        .expect("login answered")
        .map_err(|e| describe(&e))
}

/// An error as the client sees it: number, SQLSTATE and message.
fn describe(e: &mysql_async::Error) -> String {
    match e {
        mysql_async::Error::Server(e) => format!("ERR {} ({}): {}", e.code, e.state, e.message),
        other => format!("client error: {other}"),
    }
}

/// A statement's rows, or its error.
async fn run(conn: &mut Conn, sql: &str) -> String {
    match conn.query::<mysql_async::Row, _>(sql).await {
        Ok(rows) => {
            // Whole values (the Debug of `Value` cuts bytes short).
            let cell = |v: mysql_async::Value| match v {
                mysql_async::Value::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
                other => format!("{other:?}"),
            };
            let rows: Vec<Vec<String>> = rows
                .into_iter()
                .map(|r| r.unwrap().into_iter().map(cell).collect())
                .collect();
            format!("{sql} -> {rows:?}")
        }
        Err(e) => format!("{sql} -> {}", describe(&e)),
    }
}

fn to(account: Account, db: &str) -> ChangeUserOpts {
    ChangeUserOpts::new()
        .with_user(Some(account.user.into()))
        .with_pass(Some(account.password.into()))
        .with_db_name(Some(db.into()))
}

/// Everything the test looks at, in order, against one target.
async fn observe(chain: &Chain, target: Target) -> Vec<String> {
    let mut seen = Vec::new();
    let mut reader = connect(chain, target, READER, Some("app")).await.unwrap();
    for sql in [
        "SELECT CURRENT_USER(), USER(), DATABASE()",
        "SELECT id, v FROM t",
        "INSERT INTO t VALUES (2, 0)",
        "UPDATE t SET v = v + 1",
        "SHOW GRANTS",
    ] {
        seen.push(run(&mut reader, sql).await);
    }
    let mut writer = connect(chain, target, WRITER, Some("app")).await.unwrap();
    for sql in [
        "SELECT CURRENT_USER(), USER(), DATABASE()",
        "UPDATE t SET v = v + 1",
        "SET @left_behind = 'writer'",
        "BEGIN",
        "UPDATE t SET v = v + 10 WHERE id = 1",
    ] {
        seen.push(run(&mut writer, sql).await);
    }
    // To the reader, in the middle of the writer's transaction: the
    // server rolls it back and resets the session.
    seen.push(format!(
        "change_user(reader): {:?}",
        writer
            .change_user(to(READER, "app"))
            .await
            .map_err(|e| describe(&e))
    ));
    for sql in [
        "SELECT CURRENT_USER(), @left_behind, DATABASE()",
        "UPDATE t SET v = v + 1",
    ] {
        seen.push(run(&mut writer, sql).await);
    }
    // The transaction's row lock is gone (directly at once; through the
    // sidecar once the old session is closed, under its own credential —
    // under another, the gateway would refuse it and the lock would stay
    // until the session's idle timeout, far past this wait).
    let mut root = Conn::new(chain.stack.db.root_opts()).await.unwrap();
    root.query_drop("SET SESSION innodb_lock_wait_timeout = 5")
        .await
        .unwrap();
    seen.push(run(&mut root, "UPDATE app.t SET v = v + 100 WHERE id = 1").await);
    seen.push(run(&mut root, "SELECT v FROM app.t WHERE id = 1").await);
    root.query_drop("UPDATE app.t SET v = 0").await.unwrap();
    root.disconnect().await.unwrap();
    // And back to the writer, whose rights return with it.
    seen.push(format!(
        "change_user(writer): {:?}",
        writer
            .change_user(to(WRITER, "app"))
            .await
            .map_err(|e| describe(&e))
    ));
    for sql in ["SELECT CURRENT_USER(), @left_behind", "UPDATE t SET v = 0"] {
        seen.push(run(&mut writer, sql).await);
    }
    // A login database only the writer may use: the writer's use of it
    // (which the sidecar remembers, to skip the check next time) does not
    // let the reader in.
    let mut private = connect(chain, target, WRITER, Some("private"))
        .await
        .unwrap();
    seen.push(run(&mut private, "SELECT DATABASE()").await);
    for _ in 0..2 {
        // Refused by the login's own answer, before any command (a
        // driver's first query would carry the refusal too, and make the
        // sidecar forget the database).
        seen.push(format!(
            "reader in private, raw: {:?}",
            raw_login(chain, target, READER, "private").await
        ));
        seen.push(format!(
            "reader in private: {:?}",
            connect(chain, target, READER, Some("private")).await.err()
        ));
    }
    seen
}

/// A login and nothing else, by a client that writes the packets itself
/// (into `db`, or none if it is empty): `None` if it was accepted, else
/// the refusal.
async fn raw_login(chain: &Chain, target: Target, account: Account, db: &str) -> Option<Answer> {
    let (user, password) = (account.user, account.password);
    let login = async {
        match target {
            Target::Direct => {
                let socket = UnixStream::connect(&chain.stack.db.socket).await.unwrap();
                RawClient::try_login(socket, user, password, db).await.err()
            }
            Target::Sidecar => {
                let tcp = chain.raw().await;
                RawClient::try_login(tcp, user, password, db).await.err()
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), login)
        .await
        .expect("login answered")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_account_runs_as_its_own_backend_account_as_directly() {
    let chain = chain().await;

    // The writer's backend account does not exist yet: the backend's own
    // refusal, at connect — in the login's answer itself, and so to a
    // driver — whether the login names a database or not (the sidecar
    // checks a credential it does not know to log in with the gateway
    // before the login's OK; the first login here names none).
    for db in [None, Some("app"), None] {
        let raw = raw_login(&chain, Target::Direct, WRITER, db.unwrap_or_default()).await;
        assert!(matches!(&raw, Some(Answer::Err(1045, _))), "{raw:?}");
        let via = raw_login(&chain, Target::Sidecar, WRITER, db.unwrap_or_default()).await;
        assert_eq!(via, raw, "raw login into {db:?}");
        let direct = connect(&chain, Target::Direct, WRITER, db).await;
        let via = connect(&chain, Target::Sidecar, WRITER, db).await;
        let (direct, via) = (direct.err(), via.err());
        assert!(
            direct
                .as_deref()
                .is_some_and(|e| e.starts_with("ERR 1045 (28000)")),
            "{direct:?}"
        );
        assert_eq!(
            via, direct,
            "the backend's 1045 before the account exists, into {db:?}"
        );
    }

    let mut root = Conn::new(chain.stack.db.root_opts()).await.unwrap();
    root.query_drop(
        "CREATE USER writer@localhost; \
         GRANT ALL ON app.* TO writer@localhost; \
         GRANT ALL ON private.* TO writer@localhost",
    )
    .await
    .unwrap();
    root.disconnect().await.unwrap();

    let direct = observe(&chain, Target::Direct).await;
    let via = observe(&chain, Target::Sidecar).await;
    for (d, v) in direct.iter().zip(&via) {
        assert_eq!(v, d, "through the sidecar / directly");
    }
    assert_eq!(via.len(), direct.len());
    // What the comparison rests on, so that it cannot pass by both sides
    // running as one account.
    let all = direct.join("\n");
    for expected in [
        "reporting@localhost",
        "writer@localhost",
        "ERR 1142 (42000): INSERT command denied to user 'reporting'@'localhost' for table `app`.`t`",
        "ERR 1044 (42000): Access denied for user 'reporting'@'localhost' to database 'private'",
    ] {
        assert!(all.contains(expected), "{expected} in:\n{all}");
    }

    // The fixture's account without a credential of its own runs under
    // the sidecar's.
    let mut app = chain.client().await;
    let user: String = app
        .query_first("SELECT CURRENT_USER()")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(user, "app@localhost");
}
