// Compatibility-matrix client for Node's mysql2 (contract: see
// tests/matrix/README.md). `node matrix.mjs query` runs the data checks
// with query() (text protocol, parameters escaped client-side);
// `node matrix.mjs execute` with execute() (server-side prepared
// statements, binary rows). One JSON line per check on stdout.
import crypto from 'node:crypto';
import fs from 'node:fs';
import mysql from 'mysql2/promise';

const mode = process.argv[2];
if (mode !== 'query' && mode !== 'execute') {
  console.error('usage: node matrix.mjs query|execute');
  process.exit(64);
}
const prefix = `mysql2_${mode}`;
const env = process.env;
const base = {
  host: env.MQ_HOST,
  port: Number(env.MQ_PORT),
  user: env.MQ_USER,
  password: env.MQ_PASSWORD,
  database: env.MQ_DATABASE,
};

// The statement runner under test: query() or execute().
const run = (conn, sql, params) =>
  mode === 'execute' ? conn.execute(sql, params ?? []) : conn.query(sql, params ?? []);

class Skip extends Error {}

function emit(line) {
  process.stdout.write(JSON.stringify(line) + '\n');
}

async function check(name, f) {
  const start = Date.now();
  try {
    emit({ check: name, answer: await f() });
  } catch (e) {
    if (e instanceof Skip) emit({ check: name, skip: e.message });
    else emit({ check: name, error: String(e?.stack ?? e) });
  }
  console.error(`${name}: ${Date.now() - start} ms`);
}

// A value as mysql2 returned it, tagged with its JS type.
function value(v) {
  if (v === null || v === undefined) return null;
  if (Buffer.isBuffer(v)) return { buffer: v.toString('hex') };
  if (v instanceof Date) return { date: isNaN(v) ? 'Invalid Date' : v.toISOString() };
  if (typeof v === 'bigint') return { bigint: v.toString() };
  if (typeof v === 'number') return { number: Number.isFinite(v) ? v : String(v) };
  if (typeof v === 'object') return { json: v };
  return { [typeof v]: v };
}

function fieldInfo(f) {
  return {
    name: f.name,
    orgName: f.orgName,
    table: f.table,
    orgTable: f.orgTable,
    schema: f.schema,
    type: f.columnType,
    length: f.columnLength,
    flags: f.flags,
    decimals: f.decimals,
    charset: f.characterSet,
    encoding: f.encoding,
    typeName: f.type,
  };
}

// [rows, fields] → an answer; handles OK results (ResultSetHeader) and
// arrays of results (CALL, multi-statements).
function result(rows, fields) {
  if (Array.isArray(rows) && Array.isArray(fields) && rows.length === fields.length && fields.some((f) => f === undefined || Array.isArray(f))) {
    return rows.map((r, i) => result(r, fields[i]));
  }
  if (!Array.isArray(rows)) return ok(rows);
  return {
    fields: (fields ?? []).map(fieldInfo),
    rows: rows.map((r) => (Array.isArray(r) ? r : Object.values(r)).map(value)),
  };
}

function ok(h) {
  return {
    affectedRows: h.affectedRows,
    insertId: h.insertId,
    info: h.info,
    warningStatus: h.warningStatus,
    changedRows: h.changedRows,
  };
}

function mysqlError(e) {
  if (e && e.errno) return { errno: e.errno, sqlstate: e.sqlState, message: e.sqlMessage };
  throw e;
}

async function expectError(p) {
  try {
    await p;
    return 'no error';
  } catch (e) {
    return mysqlError(e);
  }
}

const allBytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
const reversed = Buffer.from(allBytes).reverse();
const emoji = 'héllo wörld 🐬🚀 日本';

const typesTable = (t) => `CREATE TABLE ${t} (
  id INT PRIMARY KEY,
  ti TINYINT, si SMALLINT, mi MEDIUMINT, i INT, bi BIGINT,
  tiu TINYINT UNSIGNED, siu SMALLINT UNSIGNED, miu MEDIUMINT UNSIGNED, iu INT UNSIGNED, biu BIGINT UNSIGNED,
  de DECIMAL(65,30), f FLOAT, d DOUBLE,
  dt DATE, dtm DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME, yr YEAR,
  c CHAR(10), vc VARCHAR(100), tx TEXT,
  bn BINARY(16), vb VARBINARY(300), bl BLOB,
  js JSON, en ENUM('a','b','c'), st SET('x','y','z'), bt BIT(64)
) CHARACTER SET utf8mb4`;

async function typesText(conn) {
  const t = `${prefix}_types_text`;
  await conn.query(`DROP TABLE IF EXISTS ${t}`);
  await conn.query(typesTable(t));
  const all = allBytes.toString('hex');
  const rev = reversed.toString('hex');
  await conn.query(`INSERT INTO ${t} VALUES (1, -128, -32768, -8388608, -2147483648, -9223372036854775808,
    0, 0, 0, 0, 0,
    '-12345678901234567890123456789012345.123456789012345678901234567890', -3.5, -1.7976931348623157e308,
    '1000-01-01', '1000-01-01 00:00:00.000000', '1970-01-02 00:00:01.000001', '-838:59:59', 1901,
    'a', '${emoji}', '${emoji.repeat(50)}',
    X'000102030405060708090a0b0c0d0e0f', X'${all}', X'${all}',
    '{"a": [1, 2, {"b": null}], "e": "🐬"}', 'a', 'x,z', b'0')`);
  await conn.query(`INSERT INTO ${t} VALUES (2, 127, 32767, 8388607, 2147483647, 9223372036854775807,
    255, 65535, 16777215, 4294967295, 18446744073709551615,
    '12345678901234567890123456789012345.123456789012345678901234567890', 3.14159, 2.718281828459045,
    '9999-12-31', '9999-12-31 23:59:59.999999', '2030-06-15 12:34:56.789012', '838:59:59', 2155,
    'zz 🐬', '🐬', '',
    X'ffffffffffffffffffffffffffffffff', X'${rev}', X'',
    '[]', 'c', 'x,y,z', b'1111111111111111111111111111111111111111111111111111111111111111')`);
  await conn.query(`INSERT INTO ${t} (id) VALUES (3)`);
  // Always the text protocol here; types_prepared covers execute().
  const [rows, fields] = await conn.query(`SELECT * FROM ${t} ORDER BY id`);
  const [strings, stringFields] = await conn.query({ sql: `SELECT * FROM ${t} ORDER BY id`, supportBigNumbers: true, bigNumberStrings: true, dateStrings: true });
  return { default: result(rows, fields), bigNumberStrings_dateStrings: result(strings, stringFields) };
}

async function typesPrepared(conn) {
  const t = `${prefix}_types_prepared`;
  await conn.query(`DROP TABLE IF EXISTS ${t}`);
  await conn.query(typesTable(t));
  const insert = `INSERT INTO ${t} VALUES (?${', ?'.repeat(28)})`;
  const rows = [
    [1, -128, -32768, -8388608, -2147483648, '-9223372036854775808',
      0, 0, 0, 0, 0,
      '-12345678901234567890123456789012345.123456789012345678901234567890', -3.5, -1.7976931348623157e308,
      '1000-01-01', '1000-01-01 00:00:00.000000', new Date(Date.UTC(1970, 0, 2, 0, 0, 1, 1)), '-838:59:59', 1901,
      'a', emoji, emoji.repeat(50),
      allBytes.subarray(0, 16), allBytes, allBytes,
      '{"a": [1, 2, {"b": null}], "e": "🐬"}', 'a', 'x,z', Buffer.alloc(8)],
    [2, 127, 32767, 8388607, 2147483647, '9223372036854775807',
      255, 65535, 16777215, 4294967295, '18446744073709551615',
      '12345678901234567890123456789012345.123456789012345678901234567890', 3.14159, 2.718281828459045,
      new Date(Date.UTC(9999, 11, 31)), '9999-12-31 23:59:59.999999', '2030-06-15 12:34:56.789012', '838:59:59', 2155,
      'zz 🐬', '🐬', '',
      Buffer.alloc(16, 0xff), reversed, Buffer.alloc(0),
      '[]', 'c', 'x,y,z', Buffer.alloc(8, 0xff)],
    [3, ...Array(28).fill(null)],
  ];
  const affected = [];
  for (const r of rows) {
    const [h] = await run(conn, insert, r);
    affected.push(ok(h));
  }
  const [sel, fields] = await run(conn, `SELECT * FROM ${t} WHERE id > ? ORDER BY id`, [0]);
  // Parameter values echoed back (column names/types of a bare `?` differ
  // by design through the sidecar: psdb binds become SQL literals).
  // (A Date is left out: bound server-side it comes back as a DATETIME
  // Date directly, as a string literal's VARCHAR through the sidecar.)
  const [echo] = await run(conn, 'SELECT ? AS p1, ? AS p2, ? AS p3, ? AS p4, ? AS p5, ? AS p6',
    [-1, 1.5, '🐬', Buffer.from([0, 255]), null, true]);
  return { affected, select: result(sel, fields), echo: echo.map((r) => Object.values(r).map(value)) };
}

async function transactions(conn, other) {
  const t = `${prefix}_tx`;
  await conn.query(`DROP TABLE IF EXISTS ${t}`);
  await conn.query(`CREATE TABLE ${t} (id INT PRIMARY KEY, v VARCHAR(10))`);
  const count = async (c) => (await c.query(`SELECT COUNT(*) AS n FROM ${t}`))[0][0].n;
  const out = {};
  await conn.beginTransaction();
  await run(conn, `INSERT INTO ${t} VALUES (?, ?)`, [1, 'commit']);
  out.other_connection_inside_tx = await count(other);
  await conn.commit();
  out.after_commit = await count(other);
  await conn.beginTransaction();
  await run(conn, `INSERT INTO ${t} VALUES (?, ?)`, [2, 'rollback']);
  out.inside_rollback_tx = await count(conn);
  await conn.rollback();
  out.after_rollback = await count(other);
  await conn.query('SET autocommit = 0');
  await run(conn, `INSERT INTO ${t} VALUES (?, ?)`, [3, 'manual']);
  out.autocommit = (await conn.query('SELECT @@autocommit AS a'))[0][0].a;
  out.other_connection_before_commit = await count(other);
  await conn.query('COMMIT');
  out.other_connection_after_commit = await count(other);
  await run(conn, `INSERT INTO ${t} VALUES (?, ?)`, [4, 'undone']);
  await conn.query('ROLLBACK');
  await conn.query('SET autocommit = 1');
  out.after_manual_rollback = await count(other);
  return out;
}

async function errors(conn) {
  const t = `${prefix}_errors`;
  await conn.query(`DROP TABLE IF EXISTS ${t}`);
  await conn.query(`CREATE TABLE ${t} (id INT PRIMARY KEY)`);
  await conn.query(`INSERT INTO ${t} VALUES (1)`);
  return {
    duplicate: await expectError(run(conn, `INSERT INTO ${t} VALUES (?)`, [1])),
    syntax: await expectError(run(conn, 'SELEC ?', [1])),
    unknown_table: await expectError(run(conn, `SELECT * FROM ${prefix}_no_such_table WHERE id = ?`, [1])),
    still_works: (await run(conn, `SELECT COUNT(*) AS n FROM ${t}`))[0][0].n,
  };
}

async function procedure(conn) {
  const p = `${prefix}_proc`;
  await conn.query(`DROP PROCEDURE IF EXISTS ${p}`);
  await conn.query(`CREATE PROCEDURE ${p}(IN n INT) BEGIN SELECT n AS n, 'first' AS which;
    SELECT n * 2 AS doubled, 'second' AS which UNION ALL SELECT n * 3, 'third'; END`);
  const [rows, fields] = await run(conn, `CALL ${p}(?)`, [7]);
  return result(rows, fields);
}

async function multiStatement() {
  const conn = await mysql.createConnection({ ...base, multipleStatements: true });
  try {
    const t = `${prefix}_multi`;
    // Multi-statements are a text-protocol feature: query() in both modes.
    await conn.query(`DROP TABLE IF EXISTS ${t}; CREATE TABLE ${t} (id INT AUTO_INCREMENT PRIMARY KEY, v INT)`);
    const [rows, fields] = await conn.query(`INSERT INTO ${t} (v) VALUES (1), (2); UPDATE ${t} SET v = v + 10;
      SELECT 'two' AS two, 2.5 AS half; SELECT id, v FROM ${t} ORDER BY id`);
    const plain = await mysql.createConnection(base);
    const refused = await expectError(plain.query('SELECT 1; SELECT 2'));
    await plain.end();
    return { results: result(rows, fields), without_option: { errno: refused.errno, sqlstate: refused.sqlstate } };
  } finally {
    await conn.end();
  }
}

async function largeResult(conn) {
  const n = Number(env.MQ_BIG_ROWS);
  const t = `${prefix}_big`;
  const digits = '(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)';
  await conn.query(`DROP TABLE IF EXISTS ${t}`);
  await conn.query(`CREATE TABLE ${t} (id INT PRIMARY KEY, v VARCHAR(1000))`);
  await conn.query(`INSERT INTO ${t} SELECT n, REPEAT(CHAR(65 + n % 26), 1000) FROM (SELECT 1 + a.d + 10 * b.d + 100 * c.d
    + 1000 * e.d + 10000 * f.d + 100000 * g.d AS n FROM ${digits} a, ${digits} b, ${digits} c, ${digits} e, ${digits} f, ${digits} g) x
    WHERE n <= ${n}`);
  const [rows] = await run(conn, `SELECT id, v FROM ${t} WHERE id > ? ORDER BY id`, [0]);
  const h = crypto.createHash('sha256');
  for (const r of rows) h.update(`${r.id}:`).update(r.v);
  // Streaming rows (the way big results are read without buffering).
  const streamed = crypto.createHash('sha256');
  let count = 0;
  await new Promise((resolve, reject) => {
    conn.connection.query(`SELECT id, v FROM ${t} ORDER BY id`).stream()
      .on('data', (r) => { streamed.update(`${r.id}:`).update(r.v); count++; })
      .on('end', resolve).on('error', reject);
  });
  return { rows: rows.length, sha256: h.digest('hex'), streamed_rows: count, streamed_sha256: streamed.digest('hex') };
}

async function lastInsertId(conn) {
  const t = `${prefix}_autoinc`;
  await conn.query(`DROP TABLE IF EXISTS ${t}`);
  await conn.query(`CREATE TABLE ${t} (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT) AUTO_INCREMENT = 1000`);
  const [one] = await run(conn, `INSERT INTO ${t} (v) VALUES (?)`, [1]);
  const [multi] = await run(conn, `INSERT INTO ${t} (v) VALUES (?), (?), (?)`, [2, 3, 4]);
  const [[last]] = await conn.query('SELECT LAST_INSERT_ID() AS id');
  return { single: ok(one), multi_row: ok(multi), select_last_insert_id: last.id };
}

async function switchDatabase(conn) {
  const current = async () => (await conn.query('SELECT DATABASE() AS db'))[0][0].db;
  const out = { start: await current() };
  await conn.query(`USE ${env.MQ_OTHER_DATABASE}`);
  out.after_use_other = await current();
  // mysql2's own API: COM_CHANGE_USER with a database.
  await conn.changeUser({ database: env.MQ_DATABASE });
  out.after_change_user_back = await current();
  out.unknown_database = await expectError(conn.query(`USE ${prefix}_no_such_database`));
  out.after_failed_use = await current();
  return out;
}

// The pool with one connection: without resetOnRelease a session variable
// survives reuse; with it (COM_RESET_CONNECTION on release) it is gone.
async function poolResetPing() {
  const out = {};
  for (const resetOnRelease of [false, true]) {
    const pool = mysql.createPool({ ...base, connectionLimit: 1, resetOnRelease });
    try {
      let conn = await pool.getConnection();
      // The connection id from the greeting, as the client knows it (the
      // sidecar's CONNECTION_ID() is its backend's, which a reset changes).
      const first = conn.threadId;
      await conn.query('SET @mq_pool_var = 42');
      await conn.ping();
      conn.release();
      conn = await pool.getConnection();
      const [[row]] = await conn.query('SELECT @mq_pool_var AS v');
      row.id = conn.threadId;
      await conn.ping();
      conn.release();
      out[`resetOnRelease_${resetOnRelease}`] = { same_connection_reused: row.id === first, session_variable_after_reuse: value(row.v) };
    } finally {
      await pool.end();
    }
  }
  return out;
}

async function tls() {
  if (env.MQ_TLS !== '1') throw new Skip('MQ_TLS=0');
  const conn = await mysql.createConnection({ ...base, ssl: { ca: fs.readFileSync(env.MQ_TLS_CA) } });
  try {
    // The client's own view: is the socket a verified TLS socket?
    const socket = conn.connection.stream;
    const [rows] = await run(conn, 'SELECT ? AS n, ? AS s', [1, 'over tls']);
    return { encrypted: Boolean(socket.encrypted), authorized: socket.authorized === true, select: rows.map((r) => Object.values(r).map(value)) };
  } finally {
    await conn.end();
  }
}

const conn = await mysql.createConnection(base);
const other = await mysql.createConnection(base);
await check('connect', async () => { const [r, f] = await run(conn, 'SELECT 1 AS one'); return result(r, f); });
await check('tls', tls);
await check('types_text', () => typesText(conn));
await check('types_prepared', () => typesPrepared(conn));
await check('transactions', () => transactions(conn, other));
await check('errors', () => errors(conn));
await check('procedure', () => procedure(conn));
await check('multi_statement', multiStatement);
await check('large_result', () => largeResult(conn));
await check('last_insert_id', () => lastInsertId(conn));
await check('switch_database', () => switchDatabase(conn));
await check('pool_reset_ping', poolResetPing);
await check('cursor', async () => { throw new Skip('mysql2 has no server-side cursors (COM_STMT_FETCH)'); });
await conn.end();
await other.end();
