//! The benchmark's tables and rows, generated from a fixed seed so every
//! run (and the driver subprocess) sees exactly the same bytes.
//!
//! `medium`: 250 rows × 2 columns, ≈50 KB. `large`: 10,000 rows × 11
//! columns, ≈27.5 MB, shaped like an application table (ids, names,
//! e-mail addresses, timestamps, amounts, a status word and a long
//! free-text column) so that it compresses about as well as real data —
//! roughly 2× with a fast compressor, not 10× like repeated filler.

pub const MEDIUM_ROWS: usize = 250;
pub const LARGE_ROWS: usize = 10_000;
/// Rows per statement of the large bulk INSERT.
pub const LARGE_INSERT_ROWS: usize = 2_000;

pub const SCHEMA: &str = "
CREATE TABLE medium (id INT PRIMARY KEY, body VARCHAR(255) NOT NULL);
CREATE TABLE medium_ins (id INT NOT NULL, body VARCHAR(255) NOT NULL);
CREATE TABLE large (
  id INT PRIMARY KEY, uuid CHAR(36) NOT NULL, name VARCHAR(64) NOT NULL,
  email VARCHAR(128) NOT NULL, created DATETIME NOT NULL, amount DECIMAL(12,2) NOT NULL,
  status VARCHAR(16) NOT NULL, counter INT NOT NULL, score DOUBLE NOT NULL,
  flags TINYINT NOT NULL, description TEXT NOT NULL);
CREATE TABLE large_ins LIKE large;
ALTER TABLE large_ins DROP PRIMARY KEY;
";

const LARGE_COLUMNS: &str =
    "id, uuid, name, email, created, amount, status, counter, score, flags, description";

const WORDS: &[&str] = &[
    "order",
    "customer",
    "shipment",
    "invoice",
    "payment",
    "refund",
    "account",
    "balance",
    "delivery",
    "warehouse",
    "product",
    "catalog",
    "discount",
    "coupon",
    "return",
    "review",
    "rating",
    "address",
    "street",
    "city",
    "country",
    "postal",
    "express",
    "standard",
    "priority",
    "pending",
    "confirmed",
    "cancelled",
    "processing",
    "delayed",
    "arrived",
    "package",
    "carrier",
    "tracking",
    "number",
    "weight",
    "volume",
    "price",
    "tax",
    "total",
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "for",
    "with",
    "on",
    "was",
    "is",
    "by",
    "from",
];
const STATUSES: &[&str] = &["new", "paid", "shipped", "delivered", "returned", "void"];

/// splitmix64: tiny, seedable, good enough to make text look varied.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn word(&mut self) -> &'static str {
        WORDS[self.below(WORDS.len() as u64) as usize]
    }
    fn hex(&mut self, len: usize) -> String {
        let mut s = String::with_capacity(len);
        while s.len() < len {
            s.push_str(&format!("{:016x}", self.next()));
        }
        s.truncate(len);
        s
    }
}

/// Words with a random token now and then, up to `len` bytes.
fn text(rng: &mut Rng, len: usize) -> String {
    let mut s = String::with_capacity(len + 16);
    while s.len() < len {
        if !s.is_empty() {
            s.push(' ');
        }
        if rng.below(4) == 0 {
            let token = rng.hex(8);
            s.push_str(&token);
        } else {
            s.push_str(rng.word());
        }
    }
    s.truncate(len);
    s
}

/// SQL values of one medium row, `(id, 'body')`.
fn medium_row(rng: &mut Rng, id: usize) -> String {
    format!("({id}, '{}')", text(rng, 190))
}

/// SQL values of one large row.
fn large_row(rng: &mut Rng, id: usize) -> String {
    let first = rng.word();
    let last = rng.word();
    let uuid = rng.hex(32);
    format!(
        "({id}, '{}-{}-{}-{}-{}', '{first} {last}', '{first}.{last}{}@example.com', \
         '2024-{:02}-{:02} {:02}:{:02}:{:02}', {}.{:02}, '{}', {}, {}, {}, '{}')",
        &uuid[0..8],
        &uuid[8..12],
        &uuid[12..16],
        &uuid[16..20],
        &uuid[20..32],
        rng.below(1000),
        1 + rng.below(12),
        1 + rng.below(28),
        rng.below(24),
        rng.below(60),
        rng.below(60),
        rng.below(100_000),
        rng.below(100),
        STATUSES[rng.below(STATUSES.len() as u64) as usize],
        rng.below(1_000_000),
        rng.below(1_000_000) as f64 / 997.0,
        rng.below(8),
        text(rng, 2_600),
    )
}

/// `INSERT INTO table VALUES …` for rows `ids` of the medium data set.
pub fn medium_insert(table: &str) -> String {
    let mut rng = Rng(1);
    let rows: Vec<String> = (0..MEDIUM_ROWS).map(|i| medium_row(&mut rng, i)).collect();
    format!("INSERT INTO {table} (id, body) VALUES {}", rows.join(","))
}

/// The large data set as statements of `per_statement` rows each.
pub fn large_inserts(table: &str, per_statement: usize) -> Vec<String> {
    let mut rng = Rng(2);
    let rows: Vec<String> = (0..LARGE_ROWS).map(|i| large_row(&mut rng, i)).collect();
    rows.chunks(per_statement)
        .map(|chunk| {
            format!(
                "INSERT INTO {table} ({LARGE_COLUMNS}) VALUES {}",
                chunk.join(",")
            )
        })
        .collect()
}
