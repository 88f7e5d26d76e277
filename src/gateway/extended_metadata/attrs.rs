//! Connection attributes on the relay's connections (see
//! `gateway::connect_attrs`): the relay asks for `CLIENT_CONNECT_ATTRS` in
//! the driver's handshake response, with an empty block (mysql_async sends
//! none), because MariaDB reads the attributes of a `COM_CHANGE_USER` only
//! on a connection that negotiated it; and it writes a session's block
//! into the driver's `COM_CHANGE_USER` when the gateway asks.

use super::wire::lenenc;

const CLIENT_CONNECT_ATTRS: u32 = 1 << 20;
const CLIENT_PLUGIN_AUTH: u32 = 1 << 19;
const CLIENT_PROTOCOL_41: u32 = 1 << 9;
pub const COM_CHANGE_USER: u8 = 0x11;

/// The attributes the gateway asked the next `COM_CHANGE_USER` of a
/// connection to carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identify {
    /// Length-encoded keys and values (not empty).
    pub block: bytes::Bytes,
    /// The collation MariaDB reads them in.
    pub collation: u16,
}

/// Asks for `CLIENT_CONNECT_ATTRS` in a handshake response `packet`
/// (header included) that did not, appending the empty block the flag
/// then requires: the connection shows no attributes, as without the
/// flag. `false` (left as it is) for a response that asked itself or is
/// not laid out as mysql_async writes it (protocol 41, ending with the
/// plugin name's NUL).
pub fn ask_connect_attrs(packet: &mut Vec<u8>) -> bool {
    let Some(caps) = packet.get(4..8) else {
        return false;
    };
    let caps = u32::from_le_bytes(caps.try_into().expect("4 bytes"));
    let laid_out = caps & CLIENT_PROTOCOL_41 != 0
        && caps & CLIENT_PLUGIN_AUTH != 0
        && packet.last() == Some(&0);
    let len = packet.len() - 4;
    if caps & CLIENT_CONNECT_ATTRS != 0 || !laid_out || len + 1 >= super::MAX_PAYLOAD {
        return false;
    }
    packet[4..8].copy_from_slice(&(caps | CLIENT_CONNECT_ATTRS).to_le_bytes());
    packet.push(0);
    let len = u32::try_from(len + 1).expect("under 16 MiB");
    packet[..3].copy_from_slice(&len.to_le_bytes()[..3]);
    true
}

/// The driver's `COM_CHANGE_USER` `payload` (as mysql_common writes it on
/// a connection with `CLIENT_PLUGIN_AUTH` and `CLIENT_CONNECT_ATTRS`:
/// user, length-prefixed auth data, database, collation, plugin, then the
/// attribute block) with `identify`'s block in place of its own, and its
/// collation — unless the database name is not ASCII, which the server
/// reads in that collation too: the driver's is kept then. `None`: not
/// laid out so (passed on as it is).
pub fn change_user(payload: &[u8], identify: &Identify) -> Option<Vec<u8>> {
    let nul = |from: usize| Some(from + memchr::memchr(0, payload.get(from..)?)? + 1);
    if payload.first() != Some(&COM_CHANGE_USER) {
        return None;
    }
    let user_end = nul(1)?;
    let auth_len = usize::from(*payload.get(user_end)?);
    let db_start = user_end + 1 + auth_len;
    let db_end = nul(db_start)?;
    let collation_at = db_end;
    let plugin_end = nul(collation_at + 2)?;
    // The rest is the driver's block, whole (empty: 0x00).
    let (block_len, size) = lenenc(payload.get(plugin_end..)?)?;
    if plugin_end + size + usize::try_from(block_len).ok()? != payload.len() {
        return None;
    }
    let collation = if payload[db_start..db_end].is_ascii() {
        identify.collation.to_le_bytes()
    } else {
        payload[collation_at..collation_at + 2].try_into().ok()?
    };
    let mut out = Vec::with_capacity(plugin_end + 9 + identify.block.len());
    out.extend_from_slice(&payload[..collation_at]);
    out.extend_from_slice(&collation);
    out.extend_from_slice(&payload[collation_at + 2..plugin_end]);
    put_lenenc(&mut out, identify.block.len() as u64);
    out.extend_from_slice(&identify.block);
    Some(out)
}

fn put_lenenc(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=0xfa => out.push(n as u8),
        0xfb..=0xffff => {
            out.push(0xfc);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xff_ffff => {
            out.push(0xfd);
            out.extend_from_slice(&n.to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xfe);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A COM_CHANGE_USER as mysql_common writes it (no attributes).
    fn driver_change_user(db: &[u8]) -> Vec<u8> {
        let mut p = vec![COM_CHANGE_USER];
        p.extend_from_slice(b"app\0");
        p.push(20);
        p.extend_from_slice(&[7; 20]);
        p.extend_from_slice(db);
        p.push(0);
        p.extend_from_slice(&45u16.to_le_bytes());
        p.extend_from_slice(b"mysql_native_password\0");
        p.push(0);
        p
    }

    fn identify(block: &[u8]) -> Identify {
        Identify {
            block: bytes::Bytes::copy_from_slice(block),
            collation: 8,
        }
    }

    #[test]
    fn the_sessions_block_and_collation_go_in_place_of_the_drivers() {
        let block = [b"\x01a\x011".as_slice(), &[0xfc, 0x2c, 0x01], &[b'v'; 300]].concat();
        let out = change_user(&driver_change_user(b"shop"), &identify(&block)).unwrap();
        let mut want = driver_change_user(b"shop");
        want.pop();
        let collation = want.len() - 2 - b"mysql_native_password\0".len();
        want[collation..collation + 2].copy_from_slice(&8u16.to_le_bytes());
        want.extend_from_slice(&[0xfc, block.len() as u8, (block.len() >> 8) as u8]);
        want.extend_from_slice(&block);
        assert_eq!(out, want);
        // A database named in UTF-8 keeps the driver's collation.
        let db = "café".as_bytes();
        let out = change_user(&driver_change_user(db), &identify(b"\x01a\x011")).unwrap();
        let mut want = driver_change_user(db);
        want.pop();
        want.extend_from_slice(b"\x04\x01a\x011");
        assert_eq!(out, want);
    }

    #[test]
    fn packets_laid_out_otherwise_are_left_alone() {
        let good = driver_change_user(b"");
        assert!(change_user(&good, &identify(b"\x01a\x01b")).is_some());
        for cut in 0..good.len() {
            assert_eq!(change_user(&good[..cut], &identify(b"x")), None, "{cut}");
        }
        let mut longer = good.clone();
        longer.push(1);
        assert_eq!(change_user(&longer, &identify(b"x")), None);
        let mut other = good;
        other[0] = 0x03;
        assert_eq!(change_user(&other, &identify(b"x")), None);
    }

    #[test]
    fn the_handshake_asks_for_attributes_with_an_empty_block() {
        let caps = CLIENT_PROTOCOL_41 | CLIENT_PLUGIN_AUTH;
        let mut payload = caps.to_le_bytes().to_vec();
        payload.extend_from_slice(&[0; 28]);
        payload.extend_from_slice(b"app\0\0mysql_native_password\0");
        let mut packet = (payload.len() as u32).to_le_bytes().to_vec();
        packet[3] = 1;
        packet.extend_from_slice(&payload);
        let mut asked = packet.clone();
        assert!(ask_connect_attrs(&mut asked));
        assert_eq!(asked.len(), packet.len() + 1);
        assert_eq!(asked[..3], ((payload.len() + 1) as u32).to_le_bytes()[..3]);
        assert_eq!(asked[3], 1);
        let caps_now = u32::from_le_bytes(asked[4..8].try_into().unwrap());
        assert_eq!(caps_now, caps | CLIENT_CONNECT_ATTRS);
        assert_eq!(asked.last(), Some(&0));
        // Asked already, or not ending with the plugin: as it is.
        assert!(!ask_connect_attrs(&mut asked));
        let mut odd = packet.clone();
        odd.push(b'x');
        assert!(!ask_connect_attrs(&mut odd));
        assert!(!ask_connect_attrs(&mut packet[..6].to_vec()));
    }
}
