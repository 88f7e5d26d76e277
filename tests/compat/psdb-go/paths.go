package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"connectrpc.com/connect"
	"github.com/go-sql-driver/mysql"
	psdbv1alpha1 "github.com/planetscale/psdb/types/psdb/v1alpha1"
	"github.com/planetscale/psdb/types/psdb/v1alpha1/psdbv1alpha1connect"
	querypb "github.com/planetscale/vitess-types/gen/vitess/query/v21"
)

// outcome is what one statement did, in the form both paths give it.
type outcome struct {
	Columns  []string
	Rows     [][]*string // nil: NULL
	Affected uint64
	InsertID uint64
	Errno    int // 0: no error
	SQLState string
}

// path runs statements on one session (psdb) or connection (direct).
// `binds` are psdb bind variables v1, v2, … and the direct path's `?`
// arguments, in order.
type path interface {
	query(ctx context.Context, sql string, binds ...int64) (outcome, error)
	exec(ctx context.Context, sql string) (outcome, error)
}

// === psdb, through the gateway ===

type viaPsdb struct {
	client  psdbv1alpha1connect.DatabaseClient
	session *psdbv1alpha1.Session
}

func (p *viaPsdb) query(ctx context.Context, sql string, binds ...int64) (outcome, error) {
	vars := map[string]*querypb.BindVariable{}
	for i, v := range binds {
		vars[fmt.Sprintf("v%d", i+1)] = &querypb.BindVariable{
			Type: querypb.Type_INT64, Value: []byte(strconv.FormatInt(v, 10)),
		}
	}
	resp, err := p.client.Execute(ctx, connect.NewRequest(&psdbv1alpha1.ExecuteRequest{
		Session: p.session, Query: sql, BindVariables: vars,
	}))
	if err != nil {
		return outcome{}, err
	}
	// The session comes back with an error too (a failed statement does
	// not end a transaction), so it is kept first.
	if resp.Msg.Session != nil {
		p.session = resp.Msg.Session
	}
	if e := resp.Msg.Error; e != nil {
		return sqlError(e.Message)
	}
	return fromResult(resp.Msg.Result), nil
}

func (p *viaPsdb) exec(ctx context.Context, sql string) (outcome, error) {
	out, err := p.query(ctx, sql)
	out.Columns, out.Rows = nil, nil
	return out, err
}

var errnoPattern = regexp.MustCompile(`\(errno (\d+)\) \(sqlstate (\w{5})\)`)

// sqlError reads a psdb error message: `<text> (errno N) (sqlstate S)`.
func sqlError(message string) (outcome, error) {
	m := errnoPattern.FindStringSubmatch(message)
	if m == nil {
		return outcome{}, fmt.Errorf("an error without errno and sqlstate: %q", message)
	}
	errno, _ := strconv.Atoi(m[1])
	return outcome{Errno: errno, SQLState: m[2]}, nil
}

func fromResult(r *querypb.QueryResult) outcome {
	var out outcome
	if r == nil {
		return out
	}
	for _, f := range r.Fields {
		out.Columns = append(out.Columns, f.Name)
	}
	for _, row := range r.Rows {
		out.Rows = append(out.Rows, splitRow(row))
	}
	out.Affected, out.InsertID = r.RowsAffected, r.InsertId
	return out
}

// splitRow cuts a psdb row's values by its lengths (-1: NULL).
func splitRow(row *querypb.Row) []*string {
	cells := make([]*string, 0, len(row.Lengths))
	at := int64(0)
	for _, n := range row.Lengths {
		if n < 0 {
			cells = append(cells, nil)
			continue
		}
		v := string(row.Values[at : at+n])
		cells = append(cells, &v)
		at += n
	}
	return cells
}

// === go-sql-driver, directly to MariaDB ===

type direct struct{ conn *sql.Conn }

func (d *direct) query(ctx context.Context, q string, binds ...int64) (outcome, error) {
	args := make([]any, len(binds))
	for i, v := range binds {
		args[i] = v
	}
	rows, err := d.conn.QueryContext(ctx, q, args...)
	if err != nil {
		return mysqlError(err)
	}
	defer rows.Close()
	var out outcome
	if out.Columns, err = rows.Columns(); err != nil {
		return outcome{}, err
	}
	for rows.Next() {
		raw := make([]sql.RawBytes, len(out.Columns))
		dest := make([]any, len(raw))
		for i := range raw {
			dest[i] = &raw[i]
		}
		if err := rows.Scan(dest...); err != nil {
			return outcome{}, err
		}
		cells := make([]*string, len(raw))
		for i, b := range raw {
			if b != nil {
				v := string(b)
				cells[i] = &v
			}
		}
		out.Rows = append(out.Rows, cells)
	}
	if err := rows.Err(); err != nil {
		return mysqlError(err)
	}
	return out, nil
}

func (d *direct) exec(ctx context.Context, q string) (outcome, error) {
	res, err := d.conn.ExecContext(ctx, q)
	if err != nil {
		return mysqlError(err)
	}
	affected, _ := res.RowsAffected()
	id, _ := res.LastInsertId()
	return outcome{Affected: uint64(affected), InsertID: uint64(id)}, nil
}

func mysqlError(err error) (outcome, error) {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return outcome{Errno: int(my.Number), SQLState: string(my.SQLState[:])}, nil
	}
	return outcome{}, err
}
