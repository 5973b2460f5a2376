package pgsession_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgleader/pgleader/internal/pgsession"
)

func TestForms(t *testing.T) {
	var c pgconn.Config
	pgsession.Apply(&c)
	if c.RuntimeParams["search_path"] != pgsession.SearchPath {
		t.Errorf("Apply: search_path %q", c.RuntimeParams["search_path"])
	}
	pgsession.ApplyMigration(&c)
	if c.RuntimeParams["search_path"] != pgsession.MigrationSearchPath || strings.Contains(pgsession.MigrationSearchPath, "pgleader") {
		t.Errorf("ApplyMigration: search_path %q", c.RuntimeParams["search_path"])
	}
	if !strings.HasPrefix(pgsession.SearchPath, "pg_catalog,") || !strings.Contains(pgsession.SetLocalSQL, "'"+pgsession.SearchPath+"', true)") ||
		!strings.HasPrefix(pgsession.SetLocalSQL, "SELECT pg_catalog.set_config(") {
		t.Errorf("SearchPath %q, SetLocalSQL %q", pgsession.SearchPath, pgsession.SetLocalSQL)
	}
}
