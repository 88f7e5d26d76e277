// Compatibility check: the unmodified `@planetscale/database` npm package
// (database-js) against a running myquic psdb gateway.
//
//   MYQUIC_URL='https://user:pass@127.0.0.1:PORT' \
//   MYQUIC_BAD_URL='https://user:wrong@127.0.0.1:PORT' \
//   NODE_EXTRA_CA_CERTS=/path/to/ca.pem \
//   node tests/compat/planetscale.mjs
//
// Prints one line per check and finishes with `N passed, M failed`; exits 1
// if anything failed. See README.md in this folder.

import assert from 'node:assert/strict'
import { Client, DatabaseError, UnknownError, connect } from '@planetscale/database'

const url = process.env.MYQUIC_URL
if (!url) {
  console.error('MYQUIC_URL is not set (e.g. https://user:pass@127.0.0.1:PORT)')
  process.exit(2)
}
let badUrl = process.env.MYQUIC_BAD_URL
if (!badUrl) {
  // Same host and user, wrong password.
  const u = new URL(url)
  u.password = `wrong-${u.password || 'password'}`
  badUrl = u.toString()
}

const CHECK_TIMEOUT_MS = Number(process.env.MYQUIC_CHECK_TIMEOUT_MS || 20000)
const TABLE = 'compat_t'
const BLOB_BYTES = new Uint8Array([0x00, 0xff, 0x10, 0x27]) // NUL, 0xff, and a quote byte

const client = new Client({ url })

let passed = 0
let failed = 0

async function check(name, fn) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS)
  })
  try {
    await Promise.race([fn(), timeout])
    passed++
    console.log(`ok   ${name}`)
  } catch (err) {
    failed++
    console.log(`FAIL ${name}`)
    console.log(indent(describe(err)))
  } finally {
    clearTimeout(timer)
  }
}

function describe(err) {
  if (err instanceof DatabaseError) {
    const extra = err instanceof UnknownError ? ` context=${JSON.stringify(err.context)}` : ''
    return `${err.name} (status ${err.status}): ${err.message} body=${JSON.stringify(err.body)}${extra}`
  }
  if (err instanceof assert.AssertionError) return err.message
  return err?.stack || String(err)
}

function indent(text) {
  return text
    .split('\n')
    .map((l) => `     ${l}`)
    .join('\n')
}

// Asserts `promise` rejects with a database-js DatabaseError that came from an
// `error` object in a 200 response body (database-js then uses status 400).
async function rejectsWithSqlError(promise, errno, sqlstate) {
  let err
  try {
    await promise
  } catch (e) {
    err = e
  }
  assert.ok(err, `expected the statement to fail with MySQL error ${errno}, but it succeeded`)
  assert.ok(err instanceof DatabaseError, `expected a DatabaseError, got ${describe(err)}`)
  assert.ok(
    !(err instanceof UnknownError),
    `expected an SQL error in the response body, got an UnknownError (non-JSON or non-2xx reply): ${describe(err)}`
  )
  assert.equal(
    err.status,
    400,
    `database-js reports status 400 for errors carried in a 200 response body; got ${err.status} (gateway must reply HTTP 200 with {"error":...})`
  )
  assert.equal(typeof err.body, 'object', 'DatabaseError.body should be the response error object')
  assert.equal(err.body.message, err.message)
  assert.match(err.message, new RegExp(`\\b${errno}\\b`), `message should mention errno ${errno}: ${err.message}`)
  if (sqlstate) {
    assert.ok(err.message.includes(sqlstate), `message should mention sqlstate ${sqlstate}: ${err.message}`)
  }
  return err
}

async function countByName(name) {
  // A brand-new connection (null session) each time, i.e. outside any transaction.
  const res = await connect({ url }).execute(`SELECT COUNT(*) AS c FROM ${TABLE} WHERE name = ?`, [name])
  return Number(res.rows[0].c)
}

// ---------------------------------------------------------------------------

await check('select literals: int, utf8 string, NULL', async () => {
  const sql = "SELECT 1 AS one, 'héllo 🐬' AS s, NULL AS n"
  const res = await connect({ url }).execute(sql)
  assert.deepEqual(res.headers, ['one', 's', 'n'])
  // MariaDB 10.x types a small integer literal as LONG (-> INT32, cast with
  // parseInt to 1); MySQL 8 types it LONGLONG (-> INT64, kept as the string '1').
  const one = { INT32: 1, INT64: '1' }[res.types.one]
  assert.ok(one !== undefined, `types.one should be INT32 or INT64, got ${JSON.stringify(res.types.one)}`)
  assert.equal(res.types.s, 'VARCHAR', `types.s: ${JSON.stringify(res.types)}`)
  // NULL_TYPE is the proto3 default, so it is normally omitted and database-js fills in 'NULL'.
  assert.ok(['NULL', 'NULL_TYPE'].includes(res.types.n), `types.n: ${JSON.stringify(res.types)}`)
  assert.deepEqual(res.rows, [{ one, s: 'héllo 🐬', n: null }])
  assert.equal(res.size, 1)
  assert.equal(res.rowsAffected, 0)
  assert.equal(res.insertId, '0')
  assert.equal(res.statement, sql)
  assert.equal(typeof res.time, 'number')
  assert.ok(Number.isFinite(res.time) && res.time >= 0, `time should be a non-negative number of ms, got ${res.time}`)
})

await check(`create table ${TABLE}`, async () => {
  const conn = connect({ url })
  await conn.execute(`DROP TABLE IF EXISTS ${TABLE}`)
  const res = await conn.execute(
    `CREATE TABLE ${TABLE} (id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(50) UNIQUE, n INT, d DECIMAL(10,2), j JSON, b VARBINARY(8))`
  )
  assert.equal(res.rowsAffected, 0)
  assert.deepEqual(res.rows, [])
})

await check('insert with ? args: insertId and rowsAffected', async () => {
  const res = await connect({ url }).execute(`INSERT INTO ${TABLE} (name, n, d, j, b) VALUES (?, ?, ?, ?, ?)`, [
    'alice',
    7,
    '12.50',
    '{"a":1}',
    BLOB_BYTES
  ])
  assert.equal(res.insertId, '1', `insertId must be the string '1' (proto3 JSON uint64), got ${JSON.stringify(res.insertId)}`)
  assert.equal(res.rowsAffected, 1)
  assert.ok(res.statement.includes("x'00ff1027'"), `client-side interpolation: ${res.statement}`)
})

await check('read back: INT64, INT32, DECIMAL, JSON, VARBINARY casts', async () => {
  const res = await connect({ url }).execute(`SELECT id, name, n, d, j, b FROM ${TABLE} WHERE name = ?`, ['alice'])
  assert.equal(res.size, 1)
  const row = res.rows[0]
  const { types } = res
  assert.equal(types.id, 'INT64', `types: ${JSON.stringify(types)}`)
  assert.equal(types.n, 'INT32', `types: ${JSON.stringify(types)}`)
  assert.equal(types.d, 'DECIMAL', `types: ${JSON.stringify(types)}`)
  assert.equal(types.name, 'VARCHAR', `types: ${JSON.stringify(types)}`)
  assert.equal(types.b, 'VARBINARY', `types: ${JSON.stringify(types)}`)
  const bField = res.fields.find((f) => f.name === 'b')
  assert.equal(bField.charset, 63, `VARBINARY field must carry charset 63 so database-js returns bytes: ${JSON.stringify(bField)}`)
  assert.equal(row.id, '1')
  assert.equal(row.name, 'alice')
  assert.equal(row.n, 7)
  assert.equal(row.d, '12.50')
  // MariaDB's JSON is a LONGTEXT on the wire; the gateway finds its
  // json_valid check and types it JSON, which database-js parses.
  assert.equal(types.j, 'JSON', `types: ${JSON.stringify(types)}`)
  assert.deepEqual(row.j, { a: 1 }, `j: ${JSON.stringify(row.j)}`)
  assert.ok(row.b instanceof Uint8Array, `b should be a Uint8Array, got ${typeof row.b}: ${JSON.stringify(row.b)}`)
  assert.deepEqual(row.b, BLOB_BYTES)
})

await check('named :args substitution', async () => {
  const conn = connect({ url })
  const res = await conn.execute(`SELECT name, n FROM ${TABLE} WHERE name = :name AND n = :n`, { name: 'alice', n: 7 })
  assert.deepEqual(res.rows, [{ name: 'alice', n: 7 }])
  // Escaping round trip (database-js doubles ' and backslash-escapes " \ \n \r \t \0 \b \x1a).
  const txt = `it's "quoted" \\ back\nslash\ttab`
  const echo = await conn.execute('SELECT :txt AS txt', { txt })
  assert.equal(echo.rows[0].txt, txt)
})

await check('transaction commit (isolated until COMMIT, visible after)', async () => {
  const conn = connect({ url })
  const ret = await conn.transaction(async (tx) => {
    const ins = await tx.execute(`INSERT INTO ${TABLE} (name, n) VALUES (?, ?)`, ['bob', 2])
    assert.equal(ins.rowsAffected, 1)
    assert.equal(typeof ins.insertId, 'string', `insertId inside a transaction: ${JSON.stringify(ins.insertId)}`)
    const inside = await tx.execute(`SELECT n FROM ${TABLE} WHERE name = ?`, ['bob'])
    assert.deepEqual(inside.rows, [{ n: 2 }], 'the transaction should see its own insert')
    assert.equal(await countByName('bob'), 0, 'an uncommitted insert must not be visible from another session')
    return 'callback-result'
  })
  assert.equal(ret, 'callback-result', 'transaction() should resolve to the callback result')
  assert.equal(await countByName('bob'), 1, 'committed row should be visible from a fresh connection')
})

await check('transaction rollback (callback throws)', async () => {
  const conn = connect({ url })
  const boom = new Error('boom from transaction callback')
  await assert.rejects(
    conn.transaction(async (tx) => {
      await tx.execute(`INSERT INTO ${TABLE} (name, n) VALUES (?, ?)`, ['carol', 3])
      const inside = await tx.execute(`SELECT n FROM ${TABLE} WHERE name = ?`, ['carol'])
      assert.deepEqual(inside.rows, [{ n: 3 }])
      throw boom
    }),
    (err) => {
      assert.equal(err, boom, `the callback's error should propagate unchanged, got: ${describe(err)}`)
      return true
    }
  )
  assert.equal(await countByName('carol'), 0, 'rolled-back row must not be visible')
})

await check('SQL error inside a transaction keeps the transaction usable', async () => {
  const conn = connect({ url })
  await conn.transaction(async (tx) => {
    await tx.execute(`INSERT INTO ${TABLE} (name, n) VALUES (?, ?)`, ['dave', 4])
    await rejectsWithSqlError(tx.execute(`INSERT INTO ${TABLE} (name) VALUES (?)`, ['alice']), 1062, '23000')
    await tx.execute(`INSERT INTO ${TABLE} (name, n) VALUES (?, ?)`, ['erin', 5])
  })
  assert.equal(await countByName('dave'), 1, 'statement before the error should be committed')
  assert.equal(await countByName('erin'), 1, 'statement after the error should be committed')
})

await check('session reused across calls on one connection (SET @x)', async () => {
  const conn = client.connection()
  assert.equal(conn.session, null)
  await conn.execute('SET @x = 42')
  assert.ok(conn.session && typeof conn.session === 'object', 'the gateway must return a session object')
  const res = await conn.execute('SELECT @x AS x')
  assert.ok([42, '42'].includes(res.rows[0].x), `@x should be 42, got ${JSON.stringify(res.rows[0].x)}`)
  // Other sessions must not share the variable.
  const other = await client.execute('SELECT @x AS x')
  assert.equal(other.rows[0].x, null, 'a fresh session must not see another session\'s @x')
})

await check('duplicate key -> DatabaseError 1062 / 23000 / ALREADY_EXISTS', async () => {
  const err = await rejectsWithSqlError(
    connect({ url }).execute(`INSERT INTO ${TABLE} (name, n) VALUES (?, ?)`, ['alice', 9]),
    1062,
    '23000'
  )
  assert.equal(err.name, 'DatabaseError')
  assert.equal(err.body.code, 'ALREADY_EXISTS', `body: ${JSON.stringify(err.body)}`)
})

await check('syntax error -> 1064', async () => {
  await rejectsWithSqlError(connect({ url }).execute('SELEC 1'), 1064)
})

await check('unknown table -> 1146', async () => {
  await rejectsWithSqlError(connect({ url }).execute('SELECT * FROM compat_no_such_table'), 1146)
})

await check('wrong password -> DatabaseError status 401', async () => {
  let err
  try {
    await connect({ url: badUrl }).execute('SELECT 1')
  } catch (e) {
    err = e
  }
  assert.ok(err, 'SELECT 1 with a wrong password should be rejected')
  assert.ok(err instanceof DatabaseError, `expected a DatabaseError, got ${describe(err)}`)
  assert.equal(err.status, 401, describe(err))
  assert.ok(
    !(err instanceof UnknownError),
    `the 401 body should be JSON with an "error" object, database-js produced an UnknownError: ${describe(err)}`
  )
  assert.ok(err.message, 'error message should be non-empty')
})

await check(`drop table ${TABLE}`, async () => {
  await connect({ url }).execute(`DROP TABLE ${TABLE}`)
})

console.log(`${passed} passed, ${failed} failed`)
process.exit(failed === 0 ? 0 : 1)
