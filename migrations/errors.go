package migrations

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// isUndefined reports a missing schema (3F000) or function (42883).
func isUndefined(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "3F000" || pe.Code == "42883")
}
