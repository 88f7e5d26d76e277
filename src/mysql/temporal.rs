//! DATE/DATETIME/TIMESTAMP and TIME values in their two MySQL forms: the
//! text the server writes (what psdb rows carry) and the binary protocol's
//! length-prefixed structs. Results go text → binary; prepared-statement
//! parameters go binary → text.

use bytes::{BufMut, BytesMut};

/// A DATE/DATETIME/TIMESTAMP value's parts; missing trailing parts are 0.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct DateTime {
    pub year: u16,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub micros: u32,
}

/// A TIME value's parts, days folded into unbounded hours (TIME spans
/// ±838 hours; the binary form can say more).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Time {
    pub negative: bool,
    pub hours: u64,
    pub minute: u8,
    pub second: u8,
    pub micros: u32,
}

impl DateTime {
    /// Parses `YYYY-MM-DD[ HH:MM:SS[.f…]]` as the server writes DATE,
    /// DATETIME and TIMESTAMP values (zero dates included).
    pub fn parse_text(text: &[u8]) -> Option<Self> {
        let (date, time) = match text.len() {
            10 => (text, None),
            n if n >= 19 && text[10] == b' ' => (&text[..10], Some(&text[11..])),
            _ => return None,
        };
        if date[4] != b'-' || date[7] != b'-' {
            return None;
        }
        let mut t = Self {
            year: digits(&date[..4])? as u16,
            month: digits(&date[5..7])? as u8,
            day: digits(&date[8..10])? as u8,
            ..Self::default()
        };
        if let Some(time) = time {
            let (hms, micros) = split_fraction(time)?;
            let (hour, minute, second) = parse_hms(hms)?;
            if hms.len() != 8 || hour > 23 {
                return None;
            }
            (t.hour, t.minute, t.second, t.micros) = (hour as u8, minute, second, micros);
        }
        (t.month <= 12 && t.day <= 31).then_some(t)
    }

    /// Whether a DATE's text has a zero month or day (`0000-00-00`,
    /// `2024-00-10`): no literal says it, and as a string it is refused
    /// where a zero DATE parameter is taken (a TIME column).
    pub fn is_zero_in_date(text: &[u8]) -> bool {
        Self::parse_text(text).is_some_and(|d| d.month == 0 || d.day == 0)
    }

    /// `YYYY-MM-DD`.
    pub fn date_text(&self) -> String {
        format!("{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }

    /// `YYYY-MM-DD HH:MM:SS[.ffffff]`.
    pub fn datetime_text(&self) -> String {
        let mut s = format!(
            "{} {:02}:{:02}:{:02}",
            self.date_text(),
            self.hour,
            self.minute,
            self.second
        );
        push_micros(&mut s, self.micros);
        s
    }

    /// Reads the binary form's body (after its length byte: 0, 4, 7 or 11
    /// bytes; other lengths are read as far as they go, like the server).
    pub fn from_binary(d: &[u8]) -> Self {
        let mut t = Self::default();
        if d.len() >= 4 {
            (t.year, t.month, t.day) = (u16::from_le_bytes([d[0], d[1]]), d[2], d[3]);
        }
        if d.len() >= 7 {
            (t.hour, t.minute, t.second) = (d[4], d[5], d[6]);
        }
        if d.len() >= 11 {
            t.micros = u32::from_le_bytes([d[7], d[8], d[9], d[10]]);
        }
        t
    }

    /// MySQL's minimal binary length: 0 when all zero, 4 with the date
    /// only, 7 with a time of day, 11 with microseconds
    /// (`Protocol_binary::store`).
    pub fn write_binary(&self, b: &mut BytesMut) {
        let len: u8 = if self.micros != 0 {
            11
        } else if self.hour != 0 || self.minute != 0 || self.second != 0 {
            7
        } else if self.year != 0 || self.month != 0 || self.day != 0 {
            4
        } else {
            0
        };
        b.put_u8(len);
        if len >= 4 {
            b.put_u16_le(self.year);
            b.put_u8(self.month);
            b.put_u8(self.day);
        }
        if len >= 7 {
            b.put_u8(self.hour);
            b.put_u8(self.minute);
            b.put_u8(self.second);
        }
        if len == 11 {
            b.put_u32_le(self.micros);
        }
    }
}

impl Time {
    /// Parses `[-]H…H:MM:SS[.f…]` as the server writes TIME values.
    pub fn parse_text(text: &[u8]) -> Option<Self> {
        let (negative, rest) = match text.strip_prefix(b"-") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (hms, micros) = split_fraction(rest)?;
        let (hours, minute, second) = parse_hms(hms)?;
        Some(Self {
            negative,
            hours: u64::from(hours),
            minute,
            second,
            micros,
        })
    }

    /// `[-]H:MM:SS[.ffffff]`.
    pub fn text(&self) -> String {
        let sign = if self.negative { "-" } else { "" };
        let mut s = format!("{sign}{}:{:02}:{:02}", self.hours, self.minute, self.second);
        push_micros(&mut s, self.micros);
        s
    }

    /// Reads the binary form's body (after its length byte: 0, 8 or 12
    /// bytes).
    pub fn from_binary(d: &[u8]) -> Self {
        let mut t = Self::default();
        if d.len() >= 8 {
            let days = u32::from_le_bytes([d[1], d[2], d[3], d[4]]);
            t.negative = d[0] != 0;
            t.hours = u64::from(days) * 24 + u64::from(d[5]);
            (t.minute, t.second) = (d[6], d[7]);
        }
        if d.len() >= 12 {
            t.micros = u32::from_le_bytes([d[8], d[9], d[10], d[11]]);
        }
        t
    }

    /// 0, 8 or 12 bytes of sign, days, hours, minutes, seconds and
    /// microseconds (`Protocol_binary::store_time`). Hours come from text
    /// of at most 9 digits, so the days fit in 32 bits.
    pub fn write_binary(&self, b: &mut BytesMut) {
        let len: u8 = if self.micros != 0 {
            12
        } else if self.hours != 0 || self.minute != 0 || self.second != 0 {
            8
        } else {
            0
        };
        b.put_u8(len);
        if len >= 8 {
            b.put_u8(u8::from(self.negative));
            b.put_u32_le((self.hours / 24) as u32);
            b.put_u8((self.hours % 24) as u8);
            b.put_u8(self.minute);
            b.put_u8(self.second);
        }
        if len == 12 {
            b.put_u32_le(self.micros);
        }
    }
}

fn push_micros(s: &mut String, micros: u32) {
    if micros != 0 {
        s.push_str(&format!(".{micros:06}"));
    }
}

/// `H…H:MM:SS` → (hours, minutes, seconds).
fn parse_hms(text: &[u8]) -> Option<(u32, u8, u8)> {
    let n = text.len();
    if n < 7 || text[n - 3] != b':' || text[n - 6] != b':' {
        return None;
    }
    let hours = digits(&text[..n - 6])?;
    let minute = digits(&text[n - 5..n - 3])?;
    let second = digits(&text[n - 2..])?;
    (minute < 60 && second < 60).then_some((hours, minute as u8, second as u8))
}

/// Splits off a `.f…` fraction (1 to 6 digits), returned in microseconds.
fn split_fraction(text: &[u8]) -> Option<(&[u8], u32)> {
    let Some(dot) = text.iter().position(|&c| c == b'.') else {
        return Some((text, 0));
    };
    let fraction = &text[dot + 1..];
    if fraction.is_empty() || fraction.len() > 6 {
        return None;
    }
    let scale = 10u32.pow(6 - fraction.len() as u32);
    Some((&text[..dot], digits(fraction)? * scale))
}

/// A run of 1 to 9 ASCII digits as a number (9 digits cannot overflow).
fn digits(text: &[u8]) -> Option<u32> {
    if text.is_empty() || text.len() > 9 {
        return None;
    }
    text.iter().try_fold(0u32, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
    })
}
