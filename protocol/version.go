package protocol

// Version is the version of the SQL protocol that docs/protocol.md describes:
// the schema version (pgleader.schema_version()) whose functions, SQLSTATEs,
// notifications and privileges the page documents, and so the least a client
// written against the page checks for at start. It moves with the schema when
// a migration changes what a client calls or sees, and stays when one changes
// nothing of that (an index, a view for watchers), so it is never above the
// schema version `pgleader migrate` installs (migrations.Latest). A release
// keeps every function of the previous protocol version for one release (the
// rolling-upgrade rule, README "Upgrades"). TestProtocolVersion holds the page
// to this constant.
const Version = 17
