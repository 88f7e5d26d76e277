//! The example file, and precedence: each key the file, the environment
//! and a flag can all set, in every combination of the three.

use super::*;

/// The documented example must always parse, with every key known.
#[test]
fn example_config_parses() {
    let text = include_str!("../../config.example.toml");
    let file = ConfigFile::parse(text).expect("config.example.toml parses");
    file.gateway
        .validate()
        .expect("config.example.toml is valid");
    file.sidecar
        .validate()
        .expect("config.example.toml's sidecar section is valid");
    assert_eq!(file.sidecar.auth.users.len(), 2);
    assert_eq!(
        file.sidecar.upstream.authority().unwrap(),
        ("gateway.example".to_string(), 8443)
    );
    // The admin and drain sections show their defaults.
    let defaults = ConfigFile::default();
    assert_eq!(file.sidecar.admin, defaults.sidecar.admin);
    assert_eq!(file.gateway.admin, defaults.gateway.admin);
    assert_eq!(file.sidecar.drain.period, defaults.sidecar.drain.period);
    assert_eq!(
        file.sidecar.drain.transaction_timeout,
        defaults.sidecar.drain.transaction_timeout
    );
    assert_eq!(file.gateway.drain.timeout, defaults.gateway.drain.timeout);
    let (shown, default) = (&file.gateway, &defaults.gateway);
    assert_eq!(shown.timeouts.tls_handshake, default.timeouts.tls_handshake);
    assert_eq!(
        shown.timeouts.request_headers,
        default.timeouts.request_headers
    );
    assert_eq!(shown.timeouts.request_body, default.timeouts.request_body);
    assert_eq!(
        shown.limits.max_streams_per_connection,
        default.limits.max_streams_per_connection
    );
    assert_eq!(
        shown.limits.max_pending_connections_per_peer,
        default.limits.max_pending_connections_per_peer
    );
}

/// Keys documented commented out (no default) parse once uncommented.
#[test]
fn commented_example_keys_parse() {
    let text = include_str!("../../config.example.toml")
        .replace("# tcp_congestion = ", "tcp_congestion = ")
        .replace("# quit_token = ", "quit_token = ");
    let file = ConfigFile::parse(&text).expect("config.example.toml parses uncommented");
    let name = |c: Option<crate::transport::tcp::TcpCongestion>| c.map(|c| c.to_string());
    assert_eq!(name(file.gateway.tcp_congestion).as_deref(), Some("bbr"));
    assert_eq!(
        name(file.sidecar.upstream.tcp_congestion).as_deref(),
        Some("bbr")
    );
    let token = |admin: &AdminConfig| admin.quit_token.clone().unwrap();
    assert!(token(&file.gateway.admin).file.is_some());
    assert!(token(&file.sidecar.admin).env.is_some());
    let bad = ConfigFile::parse("[gateway]\ntcp_congestion = \"BBR; x\"\n").unwrap_err();
    assert!(bad.to_string().contains("congestion"), "{bad}");
}

#[test]
fn unknown_keys_are_named() {
    let err = ConfigFile::parse("[gateway]\nlisten_on = \"x\"\n").unwrap_err();
    assert!(err.to_string().contains("listen_on"), "{err}");
}

/// Every key the example shows commented out is a key: uncommented, the
/// example still parses.
#[test]
fn every_commented_example_key_parses() {
    let mut uncommented = 0;
    let text: String = include_str!("../../config.example.toml")
        .lines()
        .map(|line| {
            let key = line
                .strip_prefix("# ")
                .and_then(|rest| rest.split_once(" = "))
                .map(|(key, _)| key);
            match key {
                Some(key) if key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') => {
                    uncommented += 1;
                    &line[2..]
                }
                _ => line,
            }
        })
        .map(|line| format!("{line}\n"))
        .collect();
    let file = ConfigFile::parse(&text).expect("config.example.toml parses uncommented");
    assert!(uncommented >= 15, "{uncommented} keys found commented out");
    assert!(file.gateway.sessions.signing_key.is_some());
    assert!(file.sidecar.upstream.server_name.is_some());
    assert_eq!(
        file.sidecar.upstream.tier().unwrap(),
        ["gateway.example:8443", "gateway-b.example:8443"]
    );
}

// === Precedence ===

/// Flags as the command line gives them.
#[derive(clap::Parser)]
struct Sidecar {
    #[command(flatten)]
    flags: SidecarFlags,
}

#[derive(clap::Parser)]
struct Gateway {
    #[command(flatten)]
    flags: GatewayFlags,
}

fn sidecar_flags(args: &[&str]) -> SidecarFlags {
    use clap::Parser;
    let argv = ["myquic"].iter().chain(args);
    Sidecar::try_parse_from(argv).expect("flags parse").flags
}

fn gateway_flags(args: &[&str]) -> GatewayFlags {
    use clap::Parser;
    let argv = ["myquic"].iter().chain(args);
    Gateway::try_parse_from(argv).expect("flags parse").flags
}

fn env(vars: &[(&str, &str)]) -> Env {
    vars.iter().copied().collect()
}

fn file(text: &str) -> File {
    File {
        path: "test.toml".into(),
        text: text.into(),
    }
}

/// One key that the file, the environment and a flag can all set.
struct Key<C> {
    /// Its flag, without `--`; the variable is `MYQUIC_<ROLE>_<FLAG>`.
    flag: &'static str,
    /// The file setting it (a section and the key).
    file: &'static str,
    /// The value the variable gives, then the flag.
    env: &'static str,
    arg: &'static str,
    /// The key as set, and how it reads from the default, the file, the
    /// environment and the flag.
    get: fn(&C) -> String,
    shown: [&'static str; 4],
}

const LAYERS: [&str; 3] = ["file", "env", "flag"];

/// Loads every key with each combination of file, environment and flag,
/// and checks that the highest layer given wins (none: the default).
fn check_precedence<F: Flags>(
    role: &str,
    keys: &[Key<F::Config>],
    parse: fn(&[&str]) -> F,
    all_flags: clap::Command,
) {
    for key in keys {
        let var = format!(
            "MYQUIC_{}_{}",
            role.to_uppercase(),
            key.flag.to_uppercase().replace('-', "_")
        );
        for given in 0..8u8 {
            let has = |layer: usize| given & (1 << layer) != 0;
            let text = has(0).then(|| file(key.file));
            let env = if has(1) {
                env(&[(&var, key.env)])
            } else {
                Env::default()
            };
            let flag = format!("--{}", key.flag);
            let args: &[&str] = if has(2) { &[&flag, key.arg] } else { &[] };
            let config = load(&parse(args), &env, text.as_ref()).expect("loads");
            let winner = (0..3).rev().find(|&l| has(l)).map_or(0, |l| l + 1);
            let layers: Vec<_> = (0..3).filter(|&l| has(l)).map(|l| LAYERS[l]).collect();
            assert_eq!(
                (key.get)(&config),
                key.shown[winner],
                "{role} --{} given by {layers:?}",
                key.flag
            );
        }
    }
    // Every flag is in the table, and documented with its variable.
    let example = include_str!("../../config.example.toml");
    for arg in all_flags.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        assert!(
            keys.iter().any(|k| k.flag == long),
            "--{long} is missing from the {role} precedence table"
        );
        let var = format!(
            "MYQUIC_{}_{}",
            role.to_uppercase(),
            long.to_uppercase().replace('-', "_")
        );
        assert!(
            example.contains(&format!("--{long}")),
            "--{long} undocumented"
        );
        assert!(example.contains(&var), "{var} undocumented");
    }
}

fn or_dash<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or("-".into(), |v| v.to_string())
}

fn path(value: &Option<std::path::PathBuf>) -> String {
    or_dash(value.as_ref().map(|p| p.display()))
}

fn secret_file(secret: Option<&Secret>) -> String {
    path(&secret.and_then(|s| s.file.clone()))
}

#[test]
fn sidecar_precedence() {
    use clap::Args;
    let keys: &[Key<SidecarConfig>] = &[
        Key {
            flag: "listen",
            file: "[sidecar]\nlisten = \"127.0.0.2:3306\"",
            env: "127.0.0.3:3306",
            arg: "127.0.0.4:3306",
            get: |c| c.listen.to_string(),
            shown: [
                "127.0.0.1:3306",
                "127.0.0.2:3306",
                "127.0.0.3:3306",
                "127.0.0.4:3306",
            ],
        },
        Key {
            flag: "socket",
            file: "[sidecar]\nsocket = \"/file.sock\"",
            env: "/env.sock",
            arg: "/flag.sock",
            get: |c| path(&c.socket),
            shown: ["-", "/file.sock", "/env.sock", "/flag.sock"],
        },
        Key {
            // A bool has two values: each layer sets the other one.
            flag: "local-infile",
            file: "[sidecar]\nlocal_infile = true",
            env: "false",
            arg: "true",
            get: |c| c.local_infile.to_string(),
            shown: ["false", "true", "false", "true"],
        },
        Key {
            flag: "upstream-url",
            file: "[sidecar.upstream]\nurl = \"https://file.example\"",
            env: "https://env.example",
            arg: "https://flag.example",
            get: |c| c.upstream.url.clone(),
            shown: [
                "",
                "https://file.example",
                "https://env.example",
                "https://flag.example",
            ],
        },
        Key {
            flag: "upstream-ca",
            file: "[sidecar.upstream]\nca = \"/file.pem\"",
            env: "/env.pem",
            arg: "/flag.pem",
            get: |c| path(&c.upstream.ca),
            shown: ["-", "/file.pem", "/env.pem", "/flag.pem"],
        },
        Key {
            flag: "upstream-server-name",
            file: "[sidecar.upstream]\nserver_name = \"file.example\"",
            env: "env.example",
            arg: "flag.example",
            get: |c| or_dash(c.upstream.server_name.as_ref()),
            shown: ["-", "file.example", "env.example", "flag.example"],
        },
        Key {
            flag: "upstream-username",
            file: "[sidecar.upstream]\nusername = \"file-user\"",
            env: "env-user",
            arg: "flag-user",
            get: |c| c.upstream.username.clone(),
            shown: ["", "file-user", "env-user", "flag-user"],
        },
        Key {
            flag: "upstream-password-file",
            file: "[sidecar.upstream]\npassword = { file = \"/file.pw\" }",
            env: "/env.pw",
            arg: "/flag.pw",
            get: |c| secret_file(Some(&c.upstream.password)),
            shown: ["-", "/file.pw", "/env.pw", "/flag.pw"],
        },
        Key {
            flag: "upstream-transport",
            file: "[sidecar.upstream]\ntransport = \"http2\"",
            env: "http3",
            arg: "auto",
            get: |c| format!("{:?}", c.upstream.transport),
            shown: ["Auto", "Http2", "Http3", "Auto"],
        },
        Key {
            flag: "upstream-compression",
            file: "[sidecar.upstream]\ncompression = [\"gzip\"]",
            env: "snappy, zstd",
            arg: "none",
            get: |c| c.upstream.compression.join(","),
            shown: ["zstd,s2,snappy", "gzip", "snappy,zstd", ""],
        },
        Key {
            flag: "upstream-congestion",
            file: "[sidecar.upstream]\ncongestion = \"cubic\"",
            env: "newreno",
            arg: "bbr",
            get: |c| c.upstream.congestion.to_string(),
            shown: ["bbr", "cubic", "newreno", "bbr"],
        },
        Key {
            flag: "upstream-tcp-congestion",
            file: "[sidecar.upstream]\ntcp_congestion = \"cubic\"",
            env: "reno",
            arg: "bbr",
            get: |c| or_dash(c.upstream.tcp_congestion),
            shown: ["-", "cubic", "reno", "bbr"],
        },
        Key {
            flag: "admin-listen",
            file: "[sidecar.admin]\nlisten = \"127.0.0.2:9901\"",
            env: "127.0.0.3:9901",
            arg: "0.0.0.0:9901",
            get: |c| c.admin.listen.to_string(),
            shown: [
                "127.0.0.1:9901",
                "127.0.0.2:9901",
                "127.0.0.3:9901",
                "0.0.0.0:9901",
            ],
        },
        Key {
            flag: "admin-quit-token-file",
            file: "[sidecar.admin]\nquit_token = { file = \"/file.token\" }",
            env: "/env.token",
            arg: "/flag.token",
            get: |c| secret_file(c.admin.quit_token.as_ref()),
            shown: ["-", "/file.token", "/env.token", "/flag.token"],
        },
    ];
    let all = SidecarFlags::augment_args(clap::Command::new("sidecar"));
    check_precedence("sidecar", keys, sidecar_flags, all);
}

#[test]
fn gateway_precedence() {
    use clap::Args;
    let keys: &[Key<GatewayConfig>] = &[
        Key {
            flag: "listen",
            file: "[gateway]\nlisten = \"127.0.0.2:443\"",
            env: "127.0.0.3:443",
            arg: "[::]:443",
            get: |c| c.listen.to_string(),
            shown: [
                "127.0.0.1:8443",
                "127.0.0.2:443",
                "127.0.0.3:443",
                "[::]:443",
            ],
        },
        Key {
            flag: "backend-address",
            file: "[gateway.backend]\naddress = \"file:3306\"",
            env: "env:3306",
            arg: "flag:3306",
            get: |c| or_dash(c.backend.address.as_ref()),
            shown: ["-", "file:3306", "env:3306", "flag:3306"],
        },
        Key {
            flag: "backend-socket",
            file: "[gateway.backend]\nsocket = \"/file.sock\"",
            env: "/env.sock",
            arg: "/flag.sock",
            get: |c| path(&c.backend.socket),
            shown: ["-", "/file.sock", "/env.sock", "/flag.sock"],
        },
        Key {
            flag: "backend-tls",
            file: "[gateway.backend]\ntls = \"disabled\"",
            env: "preferred",
            arg: "required",
            get: |c| or_dash(c.backend.tls.map(|t| format!("{t:?}"))),
            shown: ["-", "Disabled", "Preferred", "Required"],
        },
        Key {
            flag: "backend-tls-ca",
            file: "[gateway.backend]\ntls_ca = \"/file-ca.pem\"",
            env: "/env-ca.pem",
            arg: "/flag-ca.pem",
            get: |c| path(&c.backend.tls_ca),
            shown: ["-", "/file-ca.pem", "/env-ca.pem", "/flag-ca.pem"],
        },
        Key {
            flag: "backend-tls-server-name",
            file: "[gateway.backend]\ntls_server_name = \"file.db\"",
            env: "env.db",
            arg: "flag.db",
            get: |c| or_dash(c.backend.tls_server_name.as_ref()),
            shown: ["-", "file.db", "env.db", "flag.db"],
        },
        Key {
            flag: "backend-tls-client-cert",
            file: "[gateway.backend]\ntls_client_cert = \"/file-c.pem\"",
            env: "/env-c.pem",
            arg: "/flag-c.pem",
            get: |c| path(&c.backend.tls_client_cert),
            shown: ["-", "/file-c.pem", "/env-c.pem", "/flag-c.pem"],
        },
        Key {
            flag: "backend-tls-client-key",
            file: "[gateway.backend]\ntls_client_key = \"/file-k.pem\"",
            env: "/env-k.pem",
            arg: "/flag-k.pem",
            get: |c| path(&c.backend.tls_client_key),
            shown: ["-", "/file-k.pem", "/env-k.pem", "/flag-k.pem"],
        },
        Key {
            flag: "self-signed-cert-out",
            file: "[gateway.tls]\nself_signed_cert_out = \"/file.pem\"",
            env: "/env.pem",
            arg: "/flag.pem",
            get: |c| path(&c.tls.self_signed_cert_out),
            shown: ["-", "/file.pem", "/env.pem", "/flag.pem"],
        },
        Key {
            flag: "congestion",
            file: "[gateway]\ncongestion = \"newreno\"",
            env: "cubic",
            arg: "bbr",
            get: |c| c.congestion.to_string(),
            shown: ["bbr", "newreno", "cubic", "bbr"],
        },
        Key {
            flag: "tcp-congestion",
            file: "[gateway]\ntcp_congestion = \"reno\"",
            env: "cubic",
            arg: "bbr",
            get: |c| or_dash(c.tcp_congestion),
            shown: ["-", "reno", "cubic", "bbr"],
        },
        Key {
            flag: "admin-listen",
            file: "[gateway.admin]\nlisten = \"127.0.0.2:9902\"",
            env: "127.0.0.3:9902",
            arg: "0.0.0.0:9902",
            get: |c| c.admin.listen.to_string(),
            shown: [
                "127.0.0.1:9902",
                "127.0.0.2:9902",
                "127.0.0.3:9902",
                "0.0.0.0:9902",
            ],
        },
        Key {
            flag: "admin-quit-token-file",
            file: "[gateway.admin]\nquit_token = { file = \"/file.token\" }",
            env: "/env.token",
            arg: "/flag.token",
            get: |c| secret_file(c.admin.quit_token.as_ref()),
            shown: ["-", "/file.token", "/env.token", "/flag.token"],
        },
    ];
    let all = GatewayFlags::augment_args(clap::Command::new("gateway"));
    check_precedence("gateway", keys, gateway_flags, all);
}

/// Keys a flag sets together: a backend address named by a higher layer
/// replaces a lower one's socket; a development certificate replaces the
/// file's certificate and key.
#[test]
fn flags_that_set_several_keys() {
    let backend = |file_text: &str, vars: &[(&str, &str)], args: &[&str]| {
        let c = load(&gateway_flags(args), &env(vars), Some(&file(file_text))).unwrap();
        (path(&c.backend.socket), or_dash(c.backend.address))
    };
    let socket_file = "[gateway.backend]\nsocket = \"/file.sock\"";
    let address_env = [("MYQUIC_GATEWAY_BACKEND_ADDRESS", "env:3306")];
    assert_eq!(
        backend(socket_file, &address_env, &[]),
        ("-".into(), "env:3306".into())
    );
    let socket_env = [("MYQUIC_GATEWAY_BACKEND_SOCKET", "/env.sock")];
    assert_eq!(
        backend("", &socket_env, &["--backend-address", "flag:3306"]),
        ("-".into(), "flag:3306".into()),
        "the flag's address, not the environment's socket"
    );
    // Both in one layer: both kept, and the socket is used.
    assert_eq!(
        backend(
            "",
            &[],
            &["--backend-address", "a:1", "--backend-socket", "/s"]
        ),
        ("/s".into(), "a:1".into())
    );

    let files = "[gateway.tls]\ncert = \"/c.pem\"\nkey = \"/k.pem\"";
    let vars = [("MYQUIC_GATEWAY_SELF_SIGNED_CERT_OUT", "/dev.pem")];
    let c = load(&gateway_flags(&[]), &env(&vars), Some(&file(files))).unwrap();
    assert_eq!(path(&c.tls.self_signed_cert_out), "/dev.pem");
    assert!(c.tls.cert.is_none() && c.tls.key.is_none());
}

/// The `/quitquitquit` token: the file's, then the token itself from
/// `MYQUIC_<ROLE>_ADMIN_QUIT_TOKEN`, then a token file from the
/// environment or the flag.
#[test]
fn quit_token_sources() {
    let token = |vars: &[(&str, &str)], args: &[&str]| {
        let text = "[sidecar.admin]\nquit_token = { value = \"from-file\" }";
        let c = load(&sidecar_flags(args), &env(vars), Some(&file(text))).unwrap();
        let secret = c.admin.quit_token.expect("a token");
        match &secret.file {
            Some(path) => format!("file {}", path.display()),
            None => secret.resolve("quit_token").unwrap(),
        }
    };
    let itself = ("MYQUIC_SIDECAR_ADMIN_QUIT_TOKEN", "from-env");
    let in_file = ("MYQUIC_SIDECAR_ADMIN_QUIT_TOKEN_FILE", "/env.token");
    let flag = ["--admin-quit-token-file", "/flag.token"];
    assert_eq!(token(&[], &[]), "from-file");
    assert_eq!(token(&[itself], &[]), "from-env");
    assert_eq!(token(&[itself, in_file], &[]), "file /env.token");
    assert_eq!(token(&[itself, in_file], &flag), "file /flag.token");
    assert_eq!(token(&[itself], &flag), "file /flag.token");
    // The gateway's variable is the gateway's.
    let gateway = load(&gateway_flags(&[]), &env(&[itself]), None).unwrap();
    assert!(gateway.admin.quit_token.is_none());
    let vars = [("MYQUIC_GATEWAY_ADMIN_QUIT_TOKEN", "gw")];
    let gateway = load(&gateway_flags(&[]), &env(&vars), None).unwrap();
    let secret = gateway.admin.quit_token.unwrap();
    assert_eq!(secret.resolve("quit_token").unwrap(), "gw");
}

// === Secrets ===

#[test]
fn secrets_resolve_from_a_value_a_file_or_the_given_environment() {
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "from-file\r\n").unwrap();
    let vars = env(&[("API_PASSWORD", "from-env")]);
    let value = Secret {
        value: Some("inline".into()),
        ..Secret::default()
    };
    assert_eq!(value.resolve_in("k", &vars).unwrap(), "inline");
    assert_eq!(
        Secret::file(&pw).resolve_in("k", &vars).unwrap(),
        "from-file"
    );
    let from_env = Secret::env("API_PASSWORD");
    assert_eq!(from_env.resolve_in("k", &vars).unwrap(), "from-env");
    // Only the given environment: not the process's.
    assert!(std::env::var_os("PATH").is_some());
    let e = Secret::env("PATH").resolve_in("k", &vars).unwrap_err();
    assert_eq!(e.to_string(), "k: environment variable PATH is not set");
    let e = Secret::file(dir.path().join("absent"))
        .resolve_in("k", &vars)
        .unwrap_err();
    assert!(e.to_string().starts_with("k: reading "), "{e}");
    let both = Secret {
        value: Some("inline".into()),
        env: Some("API_PASSWORD".into()),
        ..Secret::default()
    };
    let e = both.resolve_in("k", &vars).unwrap_err();
    assert!(e.to_string().contains("exactly one"), "{e}");
    assert!(Secret::default().resolve_in("k", &vars).is_err());
}

/// `load` binds every `{ env = … }` secret of a role to the environment
/// it is given; what it cannot bind fails when used, naming the variable.
#[test]
fn load_binds_secrets_to_the_given_environment() {
    let sidecar = "[sidecar.upstream]\npassword = { env = \"API\" }\n\
                   [[sidecar.auth.users]]\nusername = \"app\"\npassword = { env = \"LOCAL\" }\n\
                   [sidecar.admin]\nquit_token = { env = \"QUIT\" }\n";
    let vars = env(&[("API", "api-pw"), ("LOCAL", "local-pw"), ("QUIT", "q")]);
    let c = load(&sidecar_flags(&[]), &vars, Some(&file(sidecar))).unwrap();
    assert_eq!(c.upstream.password.resolve("k").unwrap(), "api-pw");
    assert_eq!(c.auth.users[0].password.resolve("k").unwrap(), "local-pw");
    let quit = c.admin.quit_token.unwrap();
    assert_eq!(quit.resolve("k").unwrap(), "q");
    assert!(format!("{quit:?}").find('q').is_none(), "never printed");

    let gateway = "[[gateway.credentials]]\nusername = \"app\"\n\
                   password = { env = \"API\" }\nbackend_password = { env = \"DB\" }\n\
                   [gateway.sessions]\nsigning_key = { env = \"KEY\" }\n\
                   [gateway.admin]\nquit_token = { env = \"QUIT\" }\n";
    let vars = env(&[("API", "a"), ("DB", "b"), ("KEY", "k"), ("QUIT", "q")]);
    let c = load(&gateway_flags(&[]), &vars, Some(&file(gateway))).unwrap();
    let cred = &c.credentials[0];
    assert_eq!(cred.password.resolve("k").unwrap(), "a");
    let backend = cred.backend_password.as_ref().unwrap();
    assert_eq!(backend.resolve("k").unwrap(), "b");
    let key = c.sessions.signing_key.as_ref().unwrap();
    assert_eq!(key.resolve("k").unwrap(), "k");
    assert_eq!(c.admin.quit_token.unwrap().resolve("k").unwrap(), "q");

    // Unset: an error when the secret is used (at start), as before.
    let c = load(&gateway_flags(&[]), &Env::default(), Some(&file(gateway))).unwrap();
    let e = c.credentials[0]
        .password
        .resolve("gateway.credentials.password");
    assert_eq!(
        e.unwrap_err().to_string(),
        "gateway.credentials.password: environment variable API is not set"
    );
}

// === Errors ===

#[test]
fn errors_name_the_variable_flag_or_file() {
    let bad = env(&[("MYQUIC_SIDECAR_LISTEN", "localhost")]);
    let e = load(&sidecar_flags(&[]), &bad, None).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("MYQUIC_SIDECAR_LISTEN: \"localhost\""),
        "{e}"
    );
    let bad = env(&[("MYQUIC_SIDECAR_UPSTREAM_TRANSPORT", "h3")]);
    let e = load(&sidecar_flags(&[]), &bad, None).unwrap_err();
    assert!(e.to_string().contains("not auto, http3 or http2"), "{e}");
    // Another role's variables are not read.
    let other = env(&[("MYQUIC_GATEWAY_LISTEN", "nonsense")]);
    assert!(load(&sidecar_flags(&[]), &other, None).is_ok());
    // A flag's value is clap's to refuse.
    use clap::Parser;
    assert!(Sidecar::try_parse_from(["myquic", "--upstream-transport", "h3"]).is_err());
    let unknown = File {
        path: "/etc/myquic.toml".into(),
        text: "[sidecar]\nlisten_on = 1\n".into(),
    };
    let e = load(&sidecar_flags(&[]), &Env::default(), Some(&unknown)).unwrap_err();
    let e = e.to_string();
    assert!(
        e.starts_with("/etc/myquic.toml: ") && e.contains("listen_on"),
        "{e}"
    );
}

/// Each API login once: two with one name would leave one unreachable
/// (and which one, unsaid). The example maps two logins to two backend
/// accounts.
#[test]
fn gateway_credentials_are_listed_once() {
    let file = ConfigFile::parse(include_str!("../../config.example.toml")).unwrap();
    let mut gateway = file.gateway;
    let backends: Vec<_> = gateway
        .credentials
        .iter()
        .map(|c| &c.backend_user)
        .collect();
    assert_eq!(backends, [&Some("app".into()), &Some("reporting".into())]);
    let twice = gateway.credentials[1].clone();
    gateway.credentials.push(twice);
    let e = gateway.validate().unwrap_err().to_string();
    assert!(
        e.contains("gateway.credentials") && e.contains("\"reporting\" is listed twice"),
        "{e}"
    );
}
