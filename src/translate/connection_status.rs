//! The status variables that describe the client's own connection.
//!
//! A server answers `SHOW STATUS LIKE 'Ssl_cipher'` (and the same rows of
//! `information_schema.SESSION_STATUS`/`GLOBAL_STATUS` and
//! `performance_schema`'s status tables) from the connection that asks:
//! the TLS session between that client and the server. Through the
//! sidecar the backend answers for the gateway's backend connection (a
//! unix socket: no TLS), which says nothing of the client's connection —
//! a client that checks its connection is encrypted (go-sql-driver's own
//! `TestTLS` does) would be told it is not. So the sidecar writes these
//! rows' values itself, from its TLS session with the client, in the
//! formats MariaDB uses (OpenSSL's names), and leaves every other row as
//! the server's.

use std::borrow::Cow;

use crate::api::pb;
use crate::api::row_view::RowView;

/// What the sidecar's TLS toward its clients offers: the same for every
/// connection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OfferedTls {
    /// Every cipher suite it accepts, OpenSSL's names joined by `:`
    /// (`Ssl_cipher_list`, as `SSL_get_cipher_list` lists them).
    pub cipher_list: String,
    /// Its certificate's validity, as OpenSSL prints it
    /// (`Nov 28 12:53:48 2026 GMT`).
    pub not_before: String,
    pub not_after: String,
    /// How long a session can be resumed, in seconds
    /// (`Ssl_default_timeout`).
    pub session_lifetime: u32,
}

/// What one client's TLS session is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NegotiatedTls {
    /// OpenSSL's name of the suite (`TLS_AES_256_GCM_SHA384`).
    pub cipher: &'static str,
    /// `TLSv1.3`, `TLSv1.2`.
    pub version: &'static str,
    /// The session was resumed (`Ssl_sessions_reused`).
    pub resumed: bool,
}

/// The values of a connection's own status variables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectionStatus {
    tls: Option<(NegotiatedTls, OfferedTls)>,
}

/// `SSL_get_verify_depth` of a server that sets none: OpenSSL's −1.
const DEFAULT_VERIFY_DEPTH: &str = "18446744073709551615";

impl ConnectionStatus {
    /// A connection without TLS.
    pub fn plain() -> Self {
        Self { tls: None }
    }

    pub fn tls(negotiated: NegotiatedTls, offered: OfferedTls) -> Self {
        Self {
            tls: Some((negotiated, offered)),
        }
    }

    /// The value of status variable `name` (any case) if it describes
    /// the connection itself; `None` for every other variable.
    pub fn value(&self, name: &[u8]) -> Option<Cow<'_, [u8]>> {
        let name = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
        let tls = self.tls.as_ref();
        let text: Cow<'_, str> = match name.as_str() {
            "ssl_cipher" => tls.map_or("", |(n, _)| n.cipher).into(),
            "ssl_version" => tls.map_or("", |(n, _)| n.version).into(),
            "ssl_cipher_list" => tls.map_or("", |(_, o)| o.cipher_list.as_str()).into(),
            "ssl_server_not_before" => tls.map_or("", |(_, o)| o.not_before.as_str()).into(),
            "ssl_server_not_after" => tls.map_or("", |(_, o)| o.not_after.as_str()).into(),
            "ssl_default_timeout" => tls
                .map_or(0, |(_, o)| o.session_lifetime)
                .to_string()
                .into(),
            "ssl_sessions_reused" => if tls.is_some_and(|(n, _)| n.resumed) {
                "1"
            } else {
                "0"
            }
            .into(),
            // The sidecar asks no client for a certificate: OpenSSL's
            // SSL_VERIFY_NONE, and its default depth.
            "ssl_verify_mode" => "0".into(),
            "ssl_verify_depth" => tls.map_or("0", |_| DEFAULT_VERIFY_DEPTH).into(),
            _ => return None,
        };
        Some(match text {
            Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        })
    }
}

/// Where a result set holds status variables: the columns of their names
/// and of their values, both of one status table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusColumns {
    pub name: usize,
    pub value: usize,
}

impl StatusColumns {
    /// The status columns of a result set, if it reads a status table
    /// (`SHOW [GLOBAL|SESSION] STATUS` reads `information_schema`'s).
    /// Both columns must come from the same table as the server names
    /// them, so a join of two never pairs one's names with the other's
    /// values.
    pub fn of(fields: &[pb::Field]) -> Option<Self> {
        let find = |org_name: &str| {
            fields.iter().position(|f| {
                is_status_table(f) && f.org_name.eq_ignore_ascii_case(org_name.as_bytes())
            })
        };
        let name = find("VARIABLE_NAME")?;
        let value = find("VARIABLE_VALUE")?;
        let (a, b) = (&fields[name], &fields[value]);
        (a.table == b.table && a.org_table == b.org_table && a.database == b.database)
            .then_some(Self { name, value })
    }
}

fn is_status_table(field: &pb::Field) -> bool {
    let database = &field.database[..];
    let table = &field.org_table[..];
    (database.eq_ignore_ascii_case(b"information_schema")
        || database.eq_ignore_ascii_case(b"performance_schema"))
        && (table.eq_ignore_ascii_case(b"SESSION_STATUS")
            || table.eq_ignore_ascii_case(b"GLOBAL_STATUS"))
}

/// A time as OpenSSL's `ASN1_TIME_print` writes it: `Nov  5 09:03:07
/// 2026 GMT` (the day padded with a space).
pub fn openssl_time(unix_seconds: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = unix_seconds.div_euclid(86_400);
    let secs = unix_seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{} {:>2} {:02}:{:02}:{:02} {} GMT",
        MONTHS[(month - 1) as usize],
        day,
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        year
    )
}

/// The proleptic Gregorian date of a count of days since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `row` with the value of a connection's own variable replaced by the
/// connection's; `None` when the row is another variable's (or not
/// well formed: it is written, and refused, as it came).
pub fn rewritten_row(
    row: &RowView,
    columns: StatusColumns,
    status: &ConnectionStatus,
) -> Option<RowView> {
    let cells: Vec<Option<&[u8]>> = row.cells()?.collect();
    let name = (*cells.get(columns.name)?)?;
    let ours = status.value(name)?;
    cells.get(columns.value)?;
    let mut values = Vec::with_capacity(row.values().len() + ours.len());
    let mut lengths = Vec::with_capacity(cells.len());
    for (i, cell) in cells.iter().enumerate() {
        let cell = if i == columns.value {
            Some(&ours[..])
        } else {
            *cell
        };
        match cell {
            Some(bytes) => {
                values.extend_from_slice(bytes);
                lengths.push(bytes.len() as i64);
            }
            None => lengths.push(-1),
        }
    }
    Some(RowView::from(&pb::Row {
        lengths,
        values: values.into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(database: &str, table: &str, org_table: &str, org_name: &str) -> pb::Field {
        pb::Field {
            name: org_name.to_string().into(),
            database: database.to_string().into(),
            table: table.to_string().into(),
            org_table: org_table.to_string().into(),
            org_name: org_name.to_string().into(),
            ..Default::default()
        }
    }

    #[test]
    fn show_status_and_the_status_tables_are_found() {
        let show = [
            field(
                "information_schema",
                "SESSION_STATUS",
                "SESSION_STATUS",
                "VARIABLE_NAME",
            ),
            field(
                "information_schema",
                "SESSION_STATUS",
                "SESSION_STATUS",
                "VARIABLE_VALUE",
            ),
        ];
        assert_eq!(
            StatusColumns::of(&show),
            Some(StatusColumns { name: 0, value: 1 })
        );
        let swapped = [
            field("performance_schema", "s", "global_status", "variable_value"),
            field("performance_schema", "s", "global_status", "variable_name"),
        ];
        assert_eq!(
            StatusColumns::of(&swapped),
            Some(StatusColumns { name: 1, value: 0 })
        );
    }

    #[test]
    fn other_tables_and_joins_are_left_alone() {
        let variables = [
            field(
                "information_schema",
                "SESSION_VARIABLES",
                "SESSION_VARIABLES",
                "VARIABLE_NAME",
            ),
            field(
                "information_schema",
                "SESSION_VARIABLES",
                "SESSION_VARIABLES",
                "VARIABLE_VALUE",
            ),
        ];
        assert_eq!(StatusColumns::of(&variables), None);
        let join = [
            field("information_schema", "a", "SESSION_STATUS", "VARIABLE_NAME"),
            field("information_schema", "b", "GLOBAL_STATUS", "VARIABLE_VALUE"),
        ];
        assert_eq!(StatusColumns::of(&join), None);
        let values_only = [field(
            "information_schema",
            "s",
            "SESSION_STATUS",
            "VARIABLE_VALUE",
        )];
        assert_eq!(StatusColumns::of(&values_only), None);
    }

    #[test]
    fn a_plain_connection_says_what_a_server_says_of_one() {
        let status = ConnectionStatus::plain();
        for (name, value) in [
            ("Ssl_cipher", ""),
            ("SSL_CIPHER_LIST", ""),
            ("Ssl_version", ""),
            ("Ssl_server_not_after", ""),
            ("Ssl_server_not_before", ""),
            ("Ssl_default_timeout", "0"),
            ("Ssl_sessions_reused", "0"),
            ("Ssl_verify_depth", "0"),
            ("Ssl_verify_mode", "0"),
        ] {
            assert_eq!(
                status.value(name.as_bytes()).as_deref(),
                Some(value.as_bytes()),
                "{name}"
            );
        }
        // Server-wide counters stay the server's.
        for name in [
            "Ssl_accepts",
            "Ssl_ctx_verify_depth",
            "Uptime",
            "Ssl_cipher\0",
        ] {
            assert_eq!(status.value(name.as_bytes()), None, "{name}");
        }
    }

    #[test]
    fn a_tls_connection_says_its_session() {
        let status = ConnectionStatus::tls(
            NegotiatedTls {
                cipher: "TLS_AES_256_GCM_SHA384",
                version: "TLSv1.3",
                resumed: true,
            },
            OfferedTls {
                cipher_list: "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256".into(),
                not_before: "Nov 25 12:53:48 2026 GMT".into(),
                not_after: "Nov 28 12:53:48 2026 GMT".into(),
                session_lifetime: 86_400,
            },
        );
        let value = |name: &str| {
            String::from_utf8(status.value(name.as_bytes()).unwrap().into_owned()).unwrap()
        };
        assert_eq!(value("Ssl_cipher"), "TLS_AES_256_GCM_SHA384");
        assert_eq!(value("ssl_version"), "TLSv1.3");
        assert_eq!(
            value("Ssl_cipher_list"),
            "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256"
        );
        assert_eq!(value("Ssl_server_not_after"), "Nov 28 12:53:48 2026 GMT");
        assert_eq!(value("Ssl_default_timeout"), "86400");
        assert_eq!(value("Ssl_sessions_reused"), "1");
        assert_eq!(value("Ssl_verify_depth"), DEFAULT_VERIFY_DEPTH);
    }

    #[test]
    fn times_print_as_openssl_prints_them() {
        assert_eq!(openssl_time(0), "Jan  1 00:00:00 1970 GMT");
        // 2026-11-28T12:53:48Z
        assert_eq!(openssl_time(1_795_870_428), "Nov 28 12:53:48 2026 GMT");
        // 2024-02-29T23:59:59Z: a leap day.
        assert_eq!(openssl_time(1_709_251_199), "Feb 29 23:59:59 2024 GMT");
    }
}
