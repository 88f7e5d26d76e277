//! A bounds-checked cursor over a MySQL payload: the handshake's fields,
//! length-encoded integers and strings wherever the protocol has them.

/// A bounds-checked cursor over a payload; `None` means truncated.
pub(crate) struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self(bytes)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many bytes are left: what a caller subtracts to know how many
    /// a read took.
    pub(crate) fn remaining(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    pub(crate) fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn nul_str(&mut self) -> Option<&'a [u8]> {
        let end = self.0.iter().position(|&b| b == 0)?;
        let s = &self.0[..end];
        self.0 = &self.0[end + 1..];
        Some(s)
    }

    /// A NUL-terminated string, or the rest if the NUL is missing (some
    /// clients omit it on the last field).
    pub(crate) fn nul_str_or_rest(&mut self) -> &'a [u8] {
        match self.nul_str() {
            Some(s) => s,
            None => std::mem::take(&mut self.0),
        }
    }

    pub(crate) fn lenenc_int(&mut self) -> Option<u64> {
        match self.u8()? {
            n @ 0..=0xfa => Some(u64::from(n)),
            0xfc => self.u16().map(u64::from),
            0xfd => self
                .take(3)
                .map(|b| u64::from(b[0]) | u64::from(b[1]) << 8 | u64::from(b[2]) << 16),
            0xfe => self.take(8).map(|b| {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                u64::from_le_bytes(a)
            }),
            _ => None,
        }
    }

    pub(crate) fn lenenc_bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.lenenc_int()?).ok()?;
        self.take(len)
    }

    /// Connection attributes: a lenenc total length, then key/value pairs.
    /// The block's bytes as the client sent them (in its character set,
    /// not always UTF-8), unread: MariaDB keeps the block whole and reads
    /// its pairs only when it shows them, so pairs that do not parse
    /// refuse no login ([`attr_pairs`]). `None` when the length runs past
    /// the packet or exceeds [`MAX_CONNECT_ATTRS`] (MariaDB's "Bad
    /// handshake").
    pub(crate) fn attrs(&mut self) -> Option<&'a [u8]> {
        self.lenenc_bytes()
            .filter(|block| block.len() <= MAX_CONNECT_ATTRS)
    }
}

/// The longest connection-attribute block MariaDB takes
/// (`read_client_connect_attrs`: "impose an artificial length limit of
/// 64k"); a longer one refuses the login or `COM_CHANGE_USER`.
pub const MAX_CONNECT_ATTRS: usize = 65535;

/// The key/value pairs of a connection-attribute block, up to the first
/// that does not parse (as `performance_schema` shows them: the pairs
/// before it).
pub fn attr_pairs(block: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    let mut r = Reader(block);
    std::iter::from_fn(move || {
        if r.is_empty() {
            return None;
        }
        let key = r.lenenc_bytes()?;
        let value = r.lenenc_bytes()?;
        Some((key, value))
    })
}
