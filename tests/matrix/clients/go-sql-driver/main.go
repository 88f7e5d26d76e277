// Compatibility-matrix client for github.com/go-sql-driver/mysql (see
// tests/matrix/README.md for the contract): runs every check once against
// MQ_HOST:MQ_PORT and prints one JSON line per check.
//
// database/sql with arguments uses the driver's default server-side
// prepared statements (COM_STMT_PREPARE/EXECUTE, binary rows); without
// arguments it sends COM_QUERY (text rows). Both are exercised.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

const prefix = "gosql"

var (
	host     = os.Getenv("MQ_HOST")
	port     = os.Getenv("MQ_PORT")
	user     = os.Getenv("MQ_USER")
	password = os.Getenv("MQ_PASSWORD")
	database = os.Getenv("MQ_DATABASE")
	other    = os.Getenv("MQ_OTHER_DATABASE")
)

type answer = map[string]any

func emit(line map[string]any) {
	b, err := json.Marshal(line)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"check": line["check"], "error": err.Error()})
	}
	fmt.Println(string(b))
}

// check runs one check, turning a returned error or a panic into an
// "error" line so that one failure never hides the others.
func check(name string, f func() (any, error)) {
	defer func() {
		if r := recover(); r != nil {
			emit(map[string]any{"check": name, "error": fmt.Sprint("panic: ", r)})
		}
	}()
	start := time.Now()
	v, err := f()
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, time.Since(start).Round(time.Millisecond))
	var skip skipped
	switch {
	case errors.As(err, &skip):
		emit(map[string]any{"check": name, "skip": string(skip)})
	case err != nil:
		emit(map[string]any{"check": name, "error": err.Error()})
	default:
		emit(map[string]any{"check": name, "answer": v})
	}
}

type skipped string

func (s skipped) Error() string { return string(s) }

func dsn(params string) string {
	cfg := mysql.NewConfig()
	cfg.User = user
	cfg.Passwd = password
	cfg.Net = "tcp"
	cfg.Addr = host + ":" + port
	cfg.DBName = database
	// caching_sha2_password full authentication over plain TCP: the
	// driver asks the server for its RSA key by itself.
	s := cfg.FormatDSN()
	if params != "" {
		if strings.Contains(s, "?") {
			s += "&" + params
		} else {
			s += "?" + params
		}
	}
	return s
}

func open(params string) (*sql.DB, error) {
	db, err := sql.Open("mysql", dsn(params))
	if err != nil {
		return nil, err
	}
	return db, db.Ping()
}

// value renders a scanned value with its Go type, so that a driver
// returning []byte on one side and int64 on the other is a difference.
func value(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case []byte:
		return "[]byte:" + hex.EncodeToString(x)
	case float32:
		return "float32:" + strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return "float64:" + strconv.FormatFloat(x, 'g', -1, 64)
	case time.Time:
		return "time:" + x.Format(time.RFC3339Nano)
	default:
		return fmt.Sprintf("%T:%v", x, x)
	}
}

func columns(rows *sql.Rows) ([]any, error) {
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	out := []any{}
	for _, t := range types {
		c := answer{"name": t.Name(), "type": t.DatabaseTypeName(), "scan": fmt.Sprint(t.ScanType())}
		if n, ok := t.Length(); ok {
			c["length"] = n
		}
		if p, s, ok := t.DecimalSize(); ok {
			c["precision"], c["scale"] = p, s
		}
		if n, ok := t.Nullable(); ok {
			c["nullable"] = n
		}
		out = append(out, c)
	}
	return out, nil
}

// resultSet reads the current result set: columns and rows.
func resultSet(rows *sql.Rows) (answer, error) {
	cols, err := columns(rows)
	if err != nil {
		return nil, err
	}
	data := []any{}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]any, len(vals))
		for i, v := range vals {
			row[i] = value(v)
		}
		data = append(data, row)
	}
	return answer{"columns": cols, "rows": data}, rows.Err()
}

// allSets reads every result set of a query (CALL, multi-statements).
func allSets(rows *sql.Rows) ([]any, error) {
	defer rows.Close()
	sets := []any{}
	for {
		set, err := resultSet(rows)
		if err != nil {
			return nil, err
		}
		sets = append(sets, set)
		if !rows.NextResultSet() {
			break
		}
	}
	return sets, rows.Err()
}

func queryAll(q interface {
	Query(string, ...any) (*sql.Rows, error)
}, sqlText string, args ...any) ([]any, error) {
	rows, err := q.Query(sqlText, args...)
	if err != nil {
		return nil, err
	}
	return allSets(rows)
}

// mysqlError is the answer for an expected server error.
func mysqlError(err error) any {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return answer{"errno": me.Number, "sqlstate": string(me.SQLState[:]), "message": me.Message}
	}
	if err == nil {
		return "no error"
	}
	return "not a server error: " + err.Error()
}

func execAll(db *sql.DB, statements ...string) error {
	for _, s := range statements {
		if _, err := db.Exec(s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

const typesTable = `CREATE TABLE %s (
  id INT PRIMARY KEY,
  ti TINYINT, si SMALLINT, mi MEDIUMINT, i INT, bi BIGINT,
  tiu TINYINT UNSIGNED, siu SMALLINT UNSIGNED, miu MEDIUMINT UNSIGNED, iu INT UNSIGNED, biu BIGINT UNSIGNED,
  de DECIMAL(65,30), f FLOAT, d DOUBLE,
  dt DATE, dtm DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME, yr YEAR,
  c CHAR(10), vc VARCHAR(100), tx TEXT,
  bn BINARY(16), vb VARBINARY(300), bl BLOB,
  js JSON, en ENUM('a','b','c'), st SET('x','y','z'), bt BIT(64)
) CHARACTER SET utf8mb4`

func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func reversed(b []byte) []byte {
	r := make([]byte, len(b))
	for i := range b {
		r[i] = b[len(b)-1-i]
	}
	return r
}

const emoji = "héllo wörld 🐬🚀 日本"

func typesText(db *sql.DB) (any, error) {
	t := prefix + "_types_text"
	all := hex.EncodeToString(allBytes())
	rev := hex.EncodeToString(reversed(allBytes()))
	err := execAll(db, "DROP TABLE IF EXISTS "+t, fmt.Sprintf(typesTable, t),
		"INSERT INTO "+t+" VALUES (1, -128, -32768, -8388608, -2147483648, -9223372036854775808,"+
			" 0, 0, 0, 0, 0,"+
			" '-12345678901234567890123456789012345.123456789012345678901234567890', -3.5, -1.7976931348623157e308,"+
			" '1000-01-01', '1000-01-01 00:00:00.000000', '1970-01-02 00:00:01.000001', '-838:59:59', 1901,"+
			" 'a', '"+emoji+"', '"+strings.Repeat(emoji, 50)+"',"+
			" X'000102030405060708090a0b0c0d0e0f', X'"+all+"', X'"+all+"',"+
			" '{\"a\": [1, 2, {\"b\": null}], \"e\": \"🐬\"}', 'a', 'x,z', b'0')",
		"INSERT INTO "+t+" VALUES (2, 127, 32767, 8388607, 2147483647, 9223372036854775807,"+
			" 255, 65535, 16777215, 4294967295, 18446744073709551615,"+
			" '12345678901234567890123456789012345.123456789012345678901234567890', 3.14159, 2.718281828459045,"+
			" '9999-12-31', '9999-12-31 23:59:59.999999', '2030-06-15 12:34:56.789012', '838:59:59', 2155,"+
			" 'zz 🐬', '🐬', '',"+
			" X'ffffffffffffffffffffffffffffffff', X'"+rev+"', X'',"+
			" '[]', 'c', 'x,y,z', b'1111111111111111111111111111111111111111111111111111111111111111')",
		"INSERT INTO "+t+" (id) VALUES (3)")
	if err != nil {
		return nil, err
	}
	return queryAll(db, "SELECT * FROM "+t+" ORDER BY id")
}

func typesPrepared(db *sql.DB) (any, error) {
	t := prefix + "_types_prepared"
	if err := execAll(db, "DROP TABLE IF EXISTS "+t, fmt.Sprintf(typesTable, t)); err != nil {
		return nil, err
	}
	insert := "INSERT INTO " + t + " VALUES (?" + strings.Repeat(", ?", 28) + ")"
	d1 := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	dt1 := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	ts1 := time.Date(1970, 1, 2, 0, 0, 1, 1000, time.UTC)
	d2 := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	dt2 := time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	ts2 := time.Date(2030, 6, 15, 12, 34, 56, 789012000, time.UTC)
	rows := [][]any{
		{1, int8(-128), int16(-32768), int32(-8388608), int32(-2147483648), int64(-9223372036854775808),
			uint8(0), uint16(0), uint32(0), uint32(0), uint64(0),
			"-12345678901234567890123456789012345.123456789012345678901234567890", float32(-3.5), -1.7976931348623157e308,
			d1, dt1, ts1, "-838:59:59", 1901,
			"a", emoji, strings.Repeat(emoji, 50),
			[]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, allBytes(), allBytes(),
			`{"a": [1, 2, {"b": null}], "e": "🐬"}`, "a", "x,z", []byte{0, 0, 0, 0, 0, 0, 0, 0}},
		{2, int8(127), int16(32767), int32(8388607), int32(2147483647), int64(9223372036854775807),
			uint8(255), uint16(65535), uint32(16777215), uint32(4294967295), uint64(18446744073709551615),
			"12345678901234567890123456789012345.123456789012345678901234567890", float32(3.14159), 2.718281828459045,
			d2, dt2, ts2, "838:59:59", 2155,
			"zz 🐬", "🐬", "",
			[]byte{255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255}, reversed(allBytes()), []byte{},
			"[]", "c", "x,y,z", uint64(18446744073709551615)},
		{3, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
			nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil},
	}
	affected := []any{}
	for _, r := range rows {
		res, err := db.Exec(insert, r...)
		if err != nil {
			return nil, fmt.Errorf("insert %v: %w", r[0], err)
		}
		n, _ := res.RowsAffected()
		affected = append(affected, n)
	}
	// An argument makes database/sql prepare the SELECT: binary rows.
	sets, err := queryAll(db, "SELECT * FROM "+t+" WHERE id > ? ORDER BY id", 0)
	if err != nil {
		return nil, err
	}
	// Parameters echoed back without a table: their values only. (The
	// column types and names of a bare `?` differ by design through the
	// sidecar: psdb binds become SQL literals, as in Vitess.)
	echoRows, err := db.Query("SELECT ? AS p1, ? AS p2, ? AS p3, ? AS p4, ? AS p5, ? AS p6, ? AS p7, ? AS p8",
		int64(-1), uint64(18446744073709551615), 1.5, "🐬", []byte{0, 255}, nil, true, d2)
	if err != nil {
		return nil, err
	}
	defer echoRows.Close()
	echoSet, err := resultSet(echoRows)
	if err != nil {
		return nil, err
	}
	echo := echoSet["rows"]
	return answer{"affected": affected, "select": sets, "echo": echo}, nil
}

func transactions(db *sql.DB) (any, error) {
	t := prefix + "_tx"
	if err := execAll(db, "DROP TABLE IF EXISTS "+t, "CREATE TABLE "+t+" (id INT PRIMARY KEY, v VARCHAR(10))"); err != nil {
		return nil, err
	}
	count := func(q interface {
		QueryRow(string, ...any) *sql.Row
	}) (n int64) {
		_ = q.QueryRow("SELECT COUNT(*) FROM " + t).Scan(&n)
		return
	}
	out := answer{}
	tx, err := db.Begin()
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec("INSERT INTO "+t+" VALUES (?, ?)", 1, "commit"); err != nil {
		return nil, err
	}
	out["inside_commit_tx"] = count(tx)
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	out["after_commit"] = count(db)
	tx, err = db.Begin()
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec("INSERT INTO "+t+" VALUES (2, 'rollback')"); err != nil {
		return nil, err
	}
	out["inside_rollback_tx"] = count(tx)
	if err := tx.Rollback(); err != nil {
		return nil, err
	}
	out["after_rollback"] = count(db)
	// autocommit off on one connection: an insert is not visible to a
	// second connection until COMMIT.
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET autocommit = 0"); err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO "+t+" VALUES (3, 'manual')"); err != nil {
		return nil, err
	}
	var ac int64
	_ = conn.QueryRowContext(ctx, "SELECT @@autocommit").Scan(&ac)
	out["autocommit"] = ac
	out["other_connection_before_commit"] = count(db)
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return nil, err
	}
	out["other_connection_after_commit"] = count(db)
	if _, err := conn.ExecContext(ctx, "INSERT INTO "+t+" VALUES (4, 'undone')"); err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		return nil, err
	}
	_, err = conn.ExecContext(ctx, "SET autocommit = 1")
	out["after_manual_rollback"] = count(db)
	return out, err
}

func errorsCheck(db *sql.DB) (any, error) {
	t := prefix + "_errors"
	if err := execAll(db, "DROP TABLE IF EXISTS "+t, "CREATE TABLE "+t+" (id INT PRIMARY KEY)",
		"INSERT INTO "+t+" VALUES (1)"); err != nil {
		return nil, err
	}
	out := answer{}
	_, err := db.Exec("INSERT INTO " + t + " VALUES (1)")
	out["duplicate_text"] = mysqlError(err)
	_, err = db.Exec("INSERT INTO "+t+" VALUES (?)", 1)
	out["duplicate_prepared"] = mysqlError(err)
	_, err = db.Exec("SELEC 1")
	out["syntax"] = mysqlError(err)
	_, err = db.Query("SELECT * FROM "+prefix+"_no_such_table WHERE id = ?", 1)
	out["unknown_table_prepare"] = mysqlError(err)
	_, err = db.Exec("SELECT * FROM " + prefix + "_no_such_table")
	out["unknown_table_text"] = mysqlError(err)
	var n int64
	err = db.QueryRow("SELECT COUNT(*) FROM " + t).Scan(&n)
	out["still_works"] = n
	return out, err
}

func procedure(db *sql.DB) (any, error) {
	p := prefix + "_proc"
	if err := execAll(db, "DROP PROCEDURE IF EXISTS "+p,
		"CREATE PROCEDURE "+p+"(IN n INT) BEGIN SELECT n AS n, 'first' AS which; "+
			"SELECT n * 2 AS doubled, 'second' AS which UNION ALL SELECT n * 3, 'third'; END"); err != nil {
		return nil, err
	}
	text, err := queryAll(db, "CALL "+p+"(7)")
	if err != nil {
		return nil, err
	}
	prepared, err := queryAll(db, "CALL "+p+"(?)", 5)
	if err != nil {
		return nil, err
	}
	return answer{"text": text, "prepared": prepared}, nil
}

func multiStatement() (any, error) {
	db, err := open("multiStatements=true")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	t := prefix + "_multi"
	if _, err := db.Exec("DROP TABLE IF EXISTS " + t + "; CREATE TABLE " + t + " (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"); err != nil {
		return nil, err
	}
	res, err := db.Exec("INSERT INTO " + t + " (v) VALUES (1), (2); UPDATE " + t + " SET v = v + 10; DELETE FROM " + t + " WHERE id = 1")
	if err != nil {
		return nil, err
	}
	affected, _ := res.RowsAffected()
	sets, err := queryAll(db, "SELECT 1 AS one; SELECT 'two' AS two, 2.5 AS half; SELECT id, v FROM "+t+" ORDER BY id")
	if err != nil {
		return nil, err
	}
	// Without the option the server refuses a second statement.
	plain, err := open("")
	if err != nil {
		return nil, err
	}
	defer plain.Close()
	_, refused := plain.Exec("SELECT 1; SELECT 2")
	return answer{"exec_affected": affected, "query": sets, "without_option": mysqlError(refused)}, nil
}

func largeResult(db *sql.DB) (any, error) {
	n, err := strconv.Atoi(os.Getenv("MQ_BIG_ROWS"))
	if err != nil {
		return nil, fmt.Errorf("MQ_BIG_ROWS: %w", err)
	}
	t := prefix + "_big"
	// Ten digits cross-joined six times count to a million; the rows are
	// ~1 KB each.
	digits := "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4" +
		" UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	if err := execAll(db, "DROP TABLE IF EXISTS "+t, "CREATE TABLE "+t+" (id INT PRIMARY KEY, v VARCHAR(1000))",
		"INSERT INTO "+t+" SELECT n, REPEAT(CHAR(65 + n % 26), 1000) FROM (SELECT 1 + a.d + 10 * b.d + 100 * c.d"+
			" + 1000 * e.d + 10000 * f.d + 100000 * g.d AS n FROM "+digits+" a, "+digits+" b, "+digits+" c, "+
			digits+" e, "+digits+" f, "+digits+" g) x WHERE n <= "+strconv.Itoa(n)); err != nil {
		return nil, err
	}
	run := func(args ...any) (answer, error) {
		q := "SELECT id, v FROM " + t
		if len(args) > 0 {
			q += " WHERE id > ?"
		}
		q += " ORDER BY id"
		rows, err := db.Query(q, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		h := sha256.New()
		count := 0
		var id int64
		var v []byte
		for rows.Next() {
			if err := rows.Scan(&id, &v); err != nil {
				return nil, err
			}
			fmt.Fprintf(h, "%d:", id)
			h.Write(v)
			count++
		}
		return answer{"rows": count, "sha256": hex.EncodeToString(h.Sum(nil))}, rows.Err()
	}
	text, err := run()
	if err != nil {
		return nil, err
	}
	prepared, err := run(0)
	if err != nil {
		return nil, err
	}
	return answer{"text": text, "prepared": prepared}, nil
}

func lastInsertID(db *sql.DB) (any, error) {
	t := prefix + "_autoinc"
	if err := execAll(db, "DROP TABLE IF EXISTS "+t, "CREATE TABLE "+t+" (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT) AUTO_INCREMENT = 1000"); err != nil {
		return nil, err
	}
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	out := answer{}
	res, err := conn.ExecContext(ctx, "INSERT INTO "+t+" (v) VALUES (1)")
	if err != nil {
		return nil, err
	}
	out["text_insert_id"], _ = res.LastInsertId()
	res, err = conn.ExecContext(ctx, "INSERT INTO "+t+" (v) VALUES (?), (?), (?)", 2, 3, 4)
	if err != nil {
		return nil, err
	}
	out["prepared_multi_row_insert_id"], _ = res.LastInsertId()
	out["prepared_affected"], _ = res.RowsAffected()
	var id int64
	err = conn.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&id)
	out["select_last_insert_id"] = id
	return out, err
}

func switchDatabase(db *sql.DB) (any, error) {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	current := func() any {
		var s sql.NullString
		if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&s); err != nil {
			return err.Error()
		}
		return s.String
	}
	out := answer{"start": current()}
	if _, err := conn.ExecContext(ctx, "USE "+other); err != nil {
		return nil, err
	}
	out["after_use_other"] = current()
	if _, err := conn.ExecContext(ctx, "USE "+database); err != nil {
		return nil, err
	}
	out["after_use_back"] = current()
	_, err = conn.ExecContext(ctx, "USE "+prefix+"_no_such_database")
	out["unknown_database"] = mysqlError(err)
	out["after_failed_use"] = current()
	return out, nil
}

// poolResetPing: database/sql's pool with one connection. Returning a
// connection to the pool calls the driver's ResetSession (a liveness
// check, not COM_RESET_CONNECTION), so session state survives reuse.
func poolResetPing() (any, error) {
	db, err := open("")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	ctx := context.Background()
	out := answer{}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var first, second int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&first); err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, "SET @mq_pool_var = 42"); err != nil {
		return nil, err
	}
	out["ping_conn"] = fmt.Sprint(conn.PingContext(ctx))
	conn.Close()
	out["ping_db"] = fmt.Sprint(db.PingContext(ctx))
	conn, err = db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var v sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID(), @mq_pool_var").Scan(&second, &v); err != nil {
		return nil, err
	}
	out["same_connection_reused"] = first == second
	out["session_variable_after_reuse"] = value(v.Int64)
	stats := db.Stats()
	out["open_connections"] = stats.OpenConnections
	return out, nil
}

func tlsCheck() (any, error) {
	if os.Getenv("MQ_TLS") != "1" {
		return nil, skipped("MQ_TLS=0")
	}
	pem, err := os.ReadFile(os.Getenv("MQ_TLS_CA"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in MQ_TLS_CA")
	}
	// The handshake's outcome as the client saw it; the version and
	// cipher may legitimately differ between servers, so only "verified"
	// is answered.
	verified := false
	err = mysql.RegisterTLSConfig("custom", &tls.Config{
		RootCAs: pool,
		VerifyConnection: func(cs tls.ConnectionState) error {
			verified = len(cs.VerifiedChains) > 0
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	db, err := open("tls=custom")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var n int64
	var s string
	if err := db.QueryRow("SELECT ?, 'over tls'", 1).Scan(&n, &s); err != nil {
		return nil, err
	}
	return answer{"encrypted_and_verified": verified, "select": []any{n, s}}, nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "first-login" {
		firstLogins()
		return
	}
	db, err := open("")
	if err != nil {
		// Every check needs a connection; report it on each.
		check("connect", func() (any, error) { return nil, err })
		os.Exit(0)
	}
	defer db.Close()
	check("connect", func() (any, error) { return queryAll(db, "SELECT 1") })
	check("tls", tlsCheck)
	check("types_text", func() (any, error) { return typesText(db) })
	check("types_prepared", func() (any, error) { return typesPrepared(db) })
	check("transactions", func() (any, error) { return transactions(db) })
	check("errors", func() (any, error) { return errorsCheck(db) })
	check("procedure", func() (any, error) { return procedure(db) })
	check("multi_statement", multiStatement)
	check("large_result", func() (any, error) { return largeResult(db) })
	check("last_insert_id", func() (any, error) { return lastInsertID(db) })
	check("switch_database", func() (any, error) { return switchDatabase(db) })
	check("pool_reset_ping", poolResetPing)
	check("cursor", func() (any, error) {
		return nil, skipped("go-sql-driver/mysql has no server-side cursors (COM_STMT_FETCH)")
	})
}
