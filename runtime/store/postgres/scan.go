package postgres

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/toolgen/toolgen/runtime/store"
)

// decodeInvocation reads the current row of invocationColumns.
//
// It reads the row's wire bytes rather than calling rows.Scan: pgx plans the scan of
// every column anew for every statement, and the plans, the wrappers of nullable
// destinations and the boxed locals cost about 50 allocations per row, on the hot
// path of every call. The columns have five types, whose wire forms under pgx's
// default exec mode (cached prepared statements: int, bool and timestamptz in binary,
// text and json as text) are decoded here; any other form (a DSN that sets
// default_query_exec_mode=simple_protocol gets text throughout) goes through the
// connection's type map.
func decodeInvocation(rows pgx.Rows) (*store.Invocation, error) {
	r := rowReader{m: rows.Conn().TypeMap(), fds: rows.FieldDescriptions(), vals: rows.RawValues()}
	// The fields in column order: the calls of a composite literal run left to right.
	inv := &store.Invocation{
		ID: r.integer(), Key: r.text(), Tenant: r.text(), Principal: r.text(), SessionID: r.text(), RunID: r.text(),
		Step: int(r.integer()), CallID: r.text(), Tool: r.text(), ToolVersion: int(r.integer()), ToolSHA256: r.text(),
		Idempotency: r.text(), IdempotentWhen: r.nullBool(), Args: r.json(), ArgsHash: r.text(),
		OriginTrust: r.text(), ArgumentTrust: r.text(), Mode: r.text(), Decision: r.text(),
		Status: store.Status(r.text()), ReasonCode: r.text(), Outcome: r.json(),
		EffectSentAt: r.nullTimestamp(), EarlierEffectSentAt: r.nullTimestamp(), WatermarkMissing: r.bool(),
		LeaseOwner: r.text(), LeaseExpiresAt: r.nullTimestamp(), Attempt: int(r.integer()), SuspendedAt: r.nullTimestamp(),
		ResumeToken: r.text(), Resolution: r.text(), ResolvedBy: r.text(), ResolvedAt: r.nullTimestamp(),
		CreatedAt: r.timestamp(), UpdatedAt: r.timestamp(), Workspace: r.text(),
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return inv, nil
}

// rowReader decodes the columns of one row in order. The first error sticks: later
// reads return zero values, and done reports it.
type rowReader struct {
	m    *pgtype.Map
	fds  []pgconn.FieldDescription
	vals [][]byte
	col  int // the next column
	err  error
}

// next returns the next column's bytes (nil for NULL) and description.
func (r *rowReader) next() ([]byte, *pgconn.FieldDescription) {
	i := r.col
	r.col++
	if r.err != nil || i >= len(r.vals) || i >= len(r.fds) {
		if r.err == nil {
			r.err = fmt.Errorf("postgres: row has %d columns, want more", len(r.vals))
		}
		return nil, nil
	}
	return r.vals[i], &r.fds[i]
}

func (r *rowReader) done() error {
	if r.err == nil && r.col != len(r.vals) {
		r.err = fmt.Errorf("postgres: row has %d columns, want %d", len(r.vals), r.col)
	}
	return r.err
}

// text reads a text column; NULL reads as "". The binary form of text is its text.
func (r *rowReader) text() string {
	v, fd := r.next()
	if fd == nil {
		return ""
	}
	if fd.DataTypeOID == pgtype.TextOID {
		return string(v)
	}
	if p := scanAs[*string](r, fd, v); p != nil {
		return *p
	}
	return ""
}

// json reads a json column (the same bytes in both forms), copied: pgx reuses the
// row's buffer. NULL reads as nil.
func (r *rowReader) json() []byte {
	v, fd := r.next()
	if fd == nil {
		return nil
	}
	if fd.DataTypeOID == pgtype.JSONOID {
		return bytes.Clone(v)
	}
	return scanAs[[]byte](r, fd, v)
}

func (r *rowReader) integer() int64 {
	v, fd := r.next()
	if fd == nil {
		return 0
	}
	if fd.Format == pgtype.BinaryFormatCode {
		switch {
		case fd.DataTypeOID == pgtype.Int8OID && len(v) == 8:
			return int64(binary.BigEndian.Uint64(v))
		case fd.DataTypeOID == pgtype.Int4OID && len(v) == 4:
			return int64(int32(binary.BigEndian.Uint32(v)))
		}
	}
	return scanAs[int64](r, fd, v)
}

func (r *rowReader) bool() bool {
	v, fd := r.next()
	if fd == nil {
		return false
	}
	if fd.Format == pgtype.BinaryFormatCode && fd.DataTypeOID == pgtype.BoolOID && len(v) == 1 {
		return v[0] != 0
	}
	return scanAs[bool](r, fd, v)
}

func (r *rowReader) nullBool() *bool {
	if r.err == nil && r.col < len(r.vals) && r.vals[r.col] == nil {
		r.col++
		return nil
	}
	b := r.bool()
	return &b
}

// y2k is PostgreSQL's epoch, in microseconds since the Unix epoch.
const y2k = 946_684_800_000_000

// timestamp reads a timestamptz column, in UTC.
func (r *rowReader) timestamp() time.Time {
	v, fd := r.next()
	if fd == nil {
		return time.Time{}
	}
	if fd.Format == pgtype.BinaryFormatCode && fd.DataTypeOID == pgtype.TimestamptzOID && len(v) == 8 {
		// microseconds since y2k; ±infinity (the extreme values) takes the slow path,
		// which refuses it
		if us := int64(binary.BigEndian.Uint64(v)); us != math.MaxInt64 && us != math.MinInt64 {
			return time.UnixMicro(y2k + us).UTC()
		}
	}
	return scanAs[time.Time](r, fd, v).UTC()
}

func (r *rowReader) nullTimestamp() *time.Time {
	if r.err == nil && r.col < len(r.vals) && r.vals[r.col] == nil {
		r.col++
		return nil
	}
	t := r.timestamp()
	return &t
}

// scanAs decodes a column of a form the fast paths do not know through the
// connection's type map.
func scanAs[T any](r *rowReader, fd *pgconn.FieldDescription, v []byte) T {
	var x T
	if err := r.m.Scan(fd.DataTypeOID, fd.Format, v, &x); err != nil && r.err == nil {
		r.err = fmt.Errorf("postgres: column %s: %w", fd.Name, err)
	}
	return x
}
