//! The few MySQL protocol structures the relay reads or changes: the
//! server's greeting, the client's handshake response, a column
//! definition, and the extended type info MariaDB puts in it.

/// `CLIENT_LONG_PASSWORD`, which MariaDB calls `CLIENT_MYSQL`: a server
/// (or client) that clears it has MariaDB's extended capabilities in the
/// greeting's (handshake response's) last four reserved bytes.
const CLIENT_MYSQL: u32 = 1;
const CLIENT_PROTOCOL_41: u32 = 1 << 9;
const CLIENT_SSL: u32 = 1 << 11;
const CLIENT_COMPRESS: u32 = 1 << 5;
const CLIENT_DEPRECATE_EOF: u32 = 1 << 24;
/// `MARIADB_CLIENT_EXTENDED_METADATA` (MariaDB ≥ 10.5).
const MARIADB_EXTENDED_METADATA: u32 = 1 << 3;
/// `MARIADB_CLIENT_CACHE_METADATA`: a binary result's column count is
/// followed by a byte saying whether the definitions follow.
const MARIADB_CACHE_METADATA: u32 = 1 << 4;
/// Where a handshake response keeps MariaDB's extended capabilities.
const RESPONSE_MARIADB_CAPS: std::ops::Range<usize> = 28..32;

/// Extended type info entry kinds (MariaDB's `enum_field_metadata_type`).
#[cfg(test)]
const DATA_TYPE_NAME: u8 = 0;
const FORMAT_NAME: u8 = 1;

/// What the relay needs of the server's greeting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Greeting {
    /// The server's thread id: what `Conn::id()` says on the gateway.
    pub connection_id: u32,
    /// A MariaDB server that can send extended metadata.
    pub offers_extended: bool,
}

/// Reads a Handshake v10 greeting (`None`: something else, e.g. an ERR).
pub fn greeting(p: &[u8]) -> Option<Greeting> {
    if p.first() != Some(&10) {
        return None;
    }
    let version_end = 1 + memchr::memchr(0, &p[1..])?;
    let mut at = version_end + 1;
    let connection_id = u32::from_le_bytes(p.get(at..at + 4)?.try_into().ok()?);
    at += 4 + 8 + 1;
    let low = u16::from_le_bytes(p.get(at..at + 2)?.try_into().ok()?);
    at += 2 + 1 + 2;
    let high = u16::from_le_bytes(p.get(at..at + 2)?.try_into().ok()?);
    at += 2 + 1 + 6;
    let caps = u32::from(low) | u32::from(high) << 16;
    let mariadb = p
        .get(at..at + 4)
        .map_or(0, |b| u32::from_le_bytes(b.try_into().expect("4 bytes")));
    Some(Greeting {
        connection_id,
        offers_extended: caps & CLIENT_MYSQL == 0
            && caps & CLIENT_PROTOCOL_41 != 0
            && mariadb & MARIADB_EXTENDED_METADATA != 0,
    })
}

/// How the connection's results are framed, from the client's handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framing {
    /// No EOF after column definitions; results end with an OK (0xfe).
    pub deprecate_eof: bool,
    /// Binary results say whether their column definitions follow.
    pub cache_metadata: bool,
}

/// Asks for extended metadata in the client's handshake response, in
/// place. `None` when the relay cannot follow the connection (TLS or
/// compression would hide its packets; a client speaking MySQL's
/// capabilities has nowhere to ask): it is then left as it is.
pub fn ask_extended(response: &mut [u8]) -> Option<Framing> {
    let caps = u32::from_le_bytes(response.get(0..4)?.try_into().ok()?);
    let mariadb_bytes = response.get_mut(RESPONSE_MARIADB_CAPS)?;
    if caps & (CLIENT_SSL | CLIENT_COMPRESS | CLIENT_MYSQL) != 0 || caps & CLIENT_PROTOCOL_41 == 0 {
        return None;
    }
    let mariadb = u32::from_le_bytes((&*mariadb_bytes).try_into().ok()?);
    mariadb_bytes.copy_from_slice(&(mariadb | MARIADB_EXTENDED_METADATA).to_le_bytes());
    Some(Framing {
        deprecate_eof: caps & CLIENT_DEPRECATE_EOF != 0,
        cache_metadata: mariadb & MARIADB_CACHE_METADATA != 0,
    })
}

/// A length-encoded integer at the start of `p`: its value and size.
pub fn lenenc(p: &[u8]) -> Option<(u64, usize)> {
    let le = |n: usize| {
        let mut v = [0u8; 8];
        v[..n].copy_from_slice(p.get(1..1 + n)?);
        Some((u64::from_le_bytes(v), 1 + n))
    };
    match *p.first()? {
        n @ 0..=0xfa => Some((u64::from(n), 1)),
        0xfc => le(2),
        0xfd => le(3),
        0xfe => le(8),
        _ => None,
    }
}

/// A column definition split at its extended type info: the definition
/// as a client without extended metadata gets it, and the info (the
/// length-encoded string's content, often empty).
pub fn split_definition(def: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    // catalog, schema, table, org_table, name, org_name
    let mut at = 0;
    for _ in 0..6 {
        let (len, size) = lenenc(def.get(at..)?)?;
        at = at
            .checked_add(size)?
            .checked_add(usize::try_from(len).ok()?)?;
    }
    let (len, size) = lenenc(def.get(at..)?)?;
    let info_start = at + size;
    let info_end = info_start.checked_add(usize::try_from(len).ok()?)?;
    let info = def.get(info_start..info_end)?;
    // The fixed fields must follow: 0x0c and 12 bytes.
    if def.get(info_end) != Some(&0x0c) || def.len() < info_end + 13 {
        return None;
    }
    let mut plain = Vec::with_capacity(def.len() - (info_end - at));
    plain.extend_from_slice(&def[..at]);
    plain.extend_from_slice(&def[info_end..]);
    Some((plain, info))
}

/// The entries of extended type info: (kind, value).
fn entries(info: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    let mut rest = info;
    std::iter::from_fn(move || {
        let (&kind, after) = rest.split_first()?;
        let (len, size) = lenenc(after)?;
        let end = size.checked_add(usize::try_from(len).ok()?)?;
        let value = after.get(size..end)?;
        rest = &after[end..];
        Some((kind, value))
    })
}

/// Whether the info says `format=json`.
pub fn is_json(info: &[u8]) -> bool {
    entries(info).any(|(kind, value)| kind == FORMAT_NAME && value == b"json")
}

/// The data type name the info gives (`inet6`, `uuid`, `point`, …).
#[cfg(test)]
pub fn data_type_name(info: &[u8]) -> Option<&[u8]> {
    entries(info).find_map(|(kind, value)| (kind == DATA_TYPE_NAME).then_some(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A column definition with `info` as its extended type info.
    fn definition(info: &[u8]) -> Vec<u8> {
        let mut d = Vec::new();
        for name in [&b"def"[..], b"test", b"t", b"t", b"j", b"j"] {
            d.push(name.len() as u8);
            d.extend_from_slice(name);
        }
        d.push(info.len() as u8);
        d.extend_from_slice(info);
        d.extend_from_slice(&[
            0x0c, 0xe0, 0, 0xff, 0xff, 0xff, 0xff, 0xfc, 0x90, 0, 0, 0, 0,
        ]);
        d
    }

    #[test]
    fn extended_info_is_split_out() {
        let info = b"\x01\x04json";
        let with_info = definition(info);
        let (plain, got) = split_definition(&with_info).unwrap();
        assert_eq!(got, info);
        assert_eq!(plain, split_definition(&definition(b"")).unwrap().0);
        assert!(is_json(got));
        assert_eq!(data_type_name(got), None);
        assert_eq!(data_type_name(b"\x00\x05inet6"), Some(&b"inet6"[..]));
        assert!(!is_json(b"\x00\x05inet6"));
    }

    #[test]
    fn malformed_definitions_are_refused() {
        let full = definition(b"\x01\x04json");
        for end in 0..full.len() {
            assert_eq!(split_definition(&full[..end]), None, "{end}");
        }
        // An info string that runs past the packet, and garbage info.
        assert_eq!(
            split_definition(&definition(b"\x01\x09js")).map(|s| s.1.len()),
            Some(4)
        );
        assert!(!is_json(b"\x01\x09js"));
    }

    #[test]
    fn the_handshake_response_asks_for_extended_metadata() {
        let mut response = vec![0u8; 40];
        let caps = CLIENT_PROTOCOL_41 | CLIENT_DEPRECATE_EOF;
        response[..4].copy_from_slice(&caps.to_le_bytes());
        response[28] = MARIADB_CACHE_METADATA as u8;
        let framing = ask_extended(&mut response).unwrap();
        assert!(framing.deprecate_eof && framing.cache_metadata);
        assert_eq!(
            response[28],
            (MARIADB_CACHE_METADATA | MARIADB_EXTENDED_METADATA) as u8
        );
        for refused in [CLIENT_SSL, CLIENT_COMPRESS, CLIENT_MYSQL] {
            let mut r = vec![0u8; 40];
            r[..4].copy_from_slice(&(caps | refused).to_le_bytes());
            assert_eq!(ask_extended(&mut r), None);
            assert_eq!(r[28], 0);
        }
        assert_eq!(ask_extended(&mut [0u8; 20]), None);
    }

    /// A Handshake v10 greeting with capabilities `caps` and MariaDB's
    /// `mariadb`.
    fn hello(caps: u32, mariadb: u32) -> Vec<u8> {
        let mut g = vec![10];
        g.extend_from_slice(b"5.5.5-10.11.6-MariaDB\0");
        g.extend_from_slice(&77u32.to_le_bytes());
        g.extend_from_slice(&[1; 8]);
        g.push(0);
        g.extend_from_slice(&(caps as u16).to_le_bytes());
        g.push(45);
        g.extend_from_slice(&2u16.to_le_bytes());
        g.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
        g.push(21);
        g.extend_from_slice(&[0; 6]);
        g.extend_from_slice(&mariadb.to_le_bytes());
        g.extend_from_slice(&[2; 12]);
        g.push(0);
        g.extend_from_slice(b"mysql_native_password\0");
        g
    }

    #[test]
    fn the_greeting_says_whether_extended_metadata_is_offered() {
        let caps = CLIENT_PROTOCOL_41 | CLIENT_DEPRECATE_EOF;
        let offered = greeting(&hello(caps, MARIADB_EXTENDED_METADATA)).unwrap();
        assert_eq!(offered.connection_id, 77);
        assert!(offered.offers_extended);
        // MySQL's capabilities (CLIENT_MYSQL set), or not among MariaDB's.
        assert!(
            !greeting(&hello(caps | CLIENT_MYSQL, MARIADB_EXTENDED_METADATA))
                .unwrap()
                .offers_extended
        );
        assert!(
            !greeting(&hello(caps, MARIADB_CACHE_METADATA))
                .unwrap()
                .offers_extended
        );
        // An ERR instead of a greeting, and a cut one.
        assert_eq!(greeting(b"\xff\x10\x04Too many connections"), None);
        let full = hello(caps, MARIADB_EXTENDED_METADATA);
        for end in 0..40 {
            assert_eq!(greeting(&full[..end]), None, "{end}");
        }
    }

    #[test]
    fn lenenc_integers() {
        assert_eq!(lenenc(&[0xfa]), Some((250, 1)));
        assert_eq!(lenenc(&[0xfc, 1, 1]), Some((257, 3)));
        assert_eq!(lenenc(&[0xfd, 0, 0, 1]), Some((65536, 4)));
        assert_eq!(lenenc(&[0xfe, 0, 0, 0, 0, 0, 0, 0, 1]), Some((1 << 56, 9)));
        assert_eq!(lenenc(&[0xfb]), None);
        assert_eq!(lenenc(&[0xfc, 1]), None);
    }
}
