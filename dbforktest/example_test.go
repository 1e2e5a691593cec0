package dbforktest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/dbforktest"
)

// A test that gets its own clone of the golden dbfork.toml describes:
// the seed data is there, what the test writes is thrown away with it.
func testOrders(t *testing.T) {
	dsn := dbforktest.New(t, "../dbfork.toml")
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "insert into orders(item) values ('book')"); err != nil {
		t.Fatal(err)
	}
}

// Each test calls New (or Open, for the instance id and its environment)
// with the recipe's path; run them with `go test ./...` (in parallel with
// t.Parallel() or -p as you like). The daemon is found or started by the
// clients' rule, and the clone is removed when the test ends.
func Example() {
	_ = testOrders
}
