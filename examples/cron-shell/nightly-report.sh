#!/bin/sh
# nightly-report.sh: the nightly job. Every host's cron starts it through
#
#   pgleader run --scope nightly-report --once-per 24h --wait 0 -- ./nightly-report.sh
#
# and pgleader runs it on one host per day: a host whose cron fires while another
# runs it, or after a run of the day completed, does not run it (and exits 0). A
# run that fails (non-zero) does not complete the day: the next host runs it.
#
# Its one write is fenced: it commits only if this host's term
# ($PGLEADER_EPOCH of $PGLEADER_SCOPE) is still the current one at COMMIT;
# otherwise PostgreSQL refuses it with SQLSTATE PLF01 and psql exits 3
# (ON_ERROR_STOP), so the job fails and writes nothing.
#
# Connection: DATABASE_URL, or the PG* variables when it is unset.
set -eu

# The work: what the report sums up. In life, minutes of queries.
# NIGHTLY_HOLD=FILE waits while FILE exists (a test keeps a run going with it
# while other hosts' cron fires); NIGHTLY_FAIL=1 fails here, as a job whose
# source was unreachable would: exit 1, nothing written.
while [ -n "${NIGHTLY_HOLD:-}" ] && [ -e "$NIGHTLY_HOLD" ]; do sleep 0.05; done
if [ "${NIGHTLY_FAIL:-0}" = 1 ]; then
  echo "nightly-report: source unreachable (NIGHTLY_FAIL=1)" >&2
  exit 1
fi

# The write, in one fenced transaction (results to /dev/null; errors on stderr).
psql "${DATABASE_URL:-}" -X -q -v ON_ERROR_STOP=1 -o /dev/null \
  -v scope="$PGLEADER_SCOPE" -v epoch="$PGLEADER_EPOCH" \
  -v node="$PGLEADER_NODE_ID" -v run_key="${PGLEADER_RUN_KEY:-}" <<'SQL'
BEGIN;
SELECT pgleader.fence(:'scope', :'epoch');
INSERT INTO nightly_reports (scope, run_key, epoch, node, sessions)
SELECT :'scope', :'run_key', :'epoch', :'node', count(*) FROM pg_stat_activity;
COMMIT;
SQL
echo "nightly-report: written by $PGLEADER_NODE_ID under epoch $PGLEADER_EPOCH ($PGLEADER_RUN_KEY)"
