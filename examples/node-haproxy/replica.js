// replica.js: one replica of a submission manager in Node.js. Every replica
// accepts submissions over HTTP and stores them; only the leader executes them,
// each exactly once, in a transaction fenced with its term's epoch.
//
// A replica is two processes on one host:
//
//   node replica.js front
//       always up: POST /submit stores a submission (on any replica);
//       GET /whoami says which replica answered and what its local pgleader
//       API says (HAProxy sends clients to the leader's front).
//   pgleader run --scope submissions --listen 127.0.0.1:API -- node replica.js execute
//       runs only while this replica leads: executes what is pending, each in
//       BEGIN; SELECT pgleader.fence($PGLEADER_SCOPE, $PGLEADER_EPOCH); ...; COMMIT.
//
// Environment: DATABASE_URL (or the PG* variables); front: REPLICA (its name),
// LISTEN (HOST:PORT), PGLEADER_API (the local pgleader run's --listen address)
// and SCOPE (default submissions); execute: what pgleader run sets.
'use strict';

const http = require('node:http');
const { Client, Pool } = require('pg');

const FENCED_EXIT = 3;
const POLL_MS = Number(process.env.POLL_MS || 20); // how often the executor looks for work

const connection = process.env.DATABASE_URL ? { connectionString: process.env.DATABASE_URL } : {};

// ---- front: every replica ----

function front() {
  const replica = process.env.REPLICA || require('node:os').hostname();
  const scope = process.env.SCOPE || 'submissions';
  const [host, port] = splitHostPort(process.env.LISTEN || '127.0.0.1:8080');
  const pool = new Pool({ ...connection, max: 4 });

  const server = http.createServer(async (req, res) => {
    try {
      if (req.method === 'POST' && req.url === '/submit') {
        const payload = await body(req);
        const { rows } = await pool.query(
          'INSERT INTO submissions (payload, accepted_by) VALUES ($1, $2) RETURNING id', [payload, replica]);
        return reply(res, 200, { id: Number(rows[0].id), replica });
      }
      if (req.method === 'GET' && req.url === '/whoami') {
        return reply(res, 200, { replica, ...(await localLeader(scope)) });
      }
      reply(res, 404, { error: 'try POST /submit or GET /whoami' });
    } catch (err) {
      reply(res, 503, { error: err.message, replica });
    }
  });
  server.listen(Number(port), host, () => console.error(`front ${replica}: listening on ${host}:${port}`));
  const stop = () => server.close(() => pool.end().then(() => process.exit(0)));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

// localLeader asks this host's pgleader run whether it leads (its --listen API).
function localLeader(scope) {
  const api = process.env.PGLEADER_API;
  if (!api) return Promise.resolve({ leading: null });
  return new Promise((resolve) => {
    const req = http.get(`http://${api}/v1/leader/${encodeURIComponent(scope)}`, { timeout: 500 }, (res) => {
      body(res).then((b) => {
        const s = JSON.parse(b);
        resolve({ leading: res.statusCode === 200, epoch: s.epoch, leader: s.leader });
      }).catch(() => resolve({ leading: false }));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve({ leading: false })); // pgleader run is not there: not leading
  });
}

// ---- executor: the leader only, under pgleader run ----

class Fenced extends Error {}

// executeOne runs one submission in a transaction fenced by epoch: marked done
// (unless an earlier term did it) and its execution recorded. Throws Fenced
// when PostgreSQL refuses the epoch (PLF01): nothing of it is written.
async function executeOne(db, scope, epoch, node, id) {
  await db.query('BEGIN');
  try {
    await db.query('SELECT pgleader.fence($1, $2)', [scope, epoch]);
    const done = await db.query(
      `UPDATE submissions SET done_at = clock_timestamp(), done_epoch = $2, done_by = $3
        WHERE id = $1 AND done_at IS NULL`, [id, epoch, node]);
    if (done.rowCount === 1) {
      // The work itself would go here; this example records that it ran.
      await db.query('INSERT INTO executions (submission_id, epoch, node) VALUES ($1, $2, $3)', [id, epoch, node]);
    }
    await db.query('COMMIT');
  } catch (err) {
    await db.query('ROLLBACK').catch(() => {});
    if (err.code === 'PLF01') throw new Fenced(err.message);
    throw err;
  }
}

async function execute() {
  const scope = process.env.PGLEADER_SCOPE;
  const epoch = process.env.PGLEADER_EPOCH;
  const node = process.env.PGLEADER_NODE_ID;
  if (!scope || !epoch) throw new Error('run me under pgleader run: PGLEADER_SCOPE and PGLEADER_EPOCH are not set');
  const db = new Client(connection);
  await db.connect();
  let stopping = false;
  process.on('SIGTERM', () => { stopping = true; }); // pgleader run's drain: finish the transaction, exit 0
  console.error(`executor ${node}: leading ${scope} under epoch ${epoch}`);
  try {
    while (!stopping) {
      const { rows } = await db.query('SELECT id FROM submissions WHERE done_at IS NULL ORDER BY id LIMIT 100');
      for (const { id } of rows) {
        if (stopping) break;
        await executeOne(db, scope, epoch, node, id);
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
    return 0;
  } catch (err) {
    if (!(err instanceof Fenced)) throw err;
    // Report it outside the refused transaction, then stop: this term is over.
    await db.query('SELECT pgleader.fence_rejected($1, $2, $3, $4)', [scope, epoch, node, 'replica.js executor'])
      .catch((e) => console.error(`executor: could not report the fenced write: ${e.message}`));
    console.error(`executor ${node}: fenced (PLF01), epoch ${epoch} is stale; not writing again: ${err.message}`);
    return FENCED_EXIT;
  } finally {
    await db.end().catch(() => {});
  }
}

// ---- helpers ----

function body(stream) {
  return new Promise((resolve, reject) => {
    let b = '';
    stream.setEncoding('utf8');
    stream.on('data', (c) => { b += c; if (b.length > 65536) stream.destroy(new Error('body too large')); });
    stream.on('end', () => resolve(b));
    stream.on('error', reject);
  });
}

function reply(res, code, obj) {
  res.writeHead(code, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
  res.end(JSON.stringify(obj) + '\n');
}

function splitHostPort(s) {
  const i = s.lastIndexOf(':');
  return [s.slice(0, i), s.slice(i + 1)];
}

switch (process.argv[2]) {
  case 'front':
    front();
    break;
  case 'execute':
    execute().then((code) => process.exit(code), (err) => {
      console.error(`executor: ${err.stack || err}`);
      process.exit(1);
    });
    break;
  default:
    console.error('usage: node replica.js front | execute');
    process.exit(2);
}
