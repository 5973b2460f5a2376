// Package protocol is the vocabulary the engine (election), the watchers
// (collector, exporter, tui) and clients in other languages must agree on: how a
// scope's advisory-lock key is derived, why terms end, the SQLSTATEs the schema
// raises and the NOTIFY channel and its events. It mirrors the schema contract of
// docs/design.md §5; the database (migrations/) is the authority, and this
// package's tests hold it to the SQL text. docs/protocol.md describes the whole
// SQL protocol for clients in other languages; TestProtocolDocMatchesSchema holds
// that page to the SQL too, and TestProtocolVersion to Version, the schema
// version the page describes.
//
// The package is a leaf: it imports nothing of this module, so a watcher can speak
// the protocol without linking the engine.
package protocol
