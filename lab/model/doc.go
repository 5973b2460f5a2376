// Package model checks pgleader's protocol with SPIN: a Promela model of lock
// mode (lock.pml) and of lease mode (lease.pml), three nodes and one scope
// each, with the SQL functions as inlines named after them and the engine's
// steps (gate, trust window, predecessor wait, heartbeats, releases) as the
// nodes' transitions, in discrete time (one tick stands for 500 ms; the
// engine's defaults are I = 1, T = 1, W = 3, L = 4 ticks).
//
// The faults: crash, freeze, termination of a session, database restart,
// promotion of a standby (with the epoch floor), handover; wake-ups are hints
// that may come at any moment or never. The properties: no two gates open at
// once (S5), epochs strictly increase (S1), no fenced write accepted after a
// write of a later epoch (S3), and, with time passing, a gate eventually open
// for good (liveness).
//
// Checks lists the runs: the models as they ship (every state within a fault
// budget; they must pass), mutations of the protocol (each must fail, with a
// counterexample; among them the protocol as it was before the fixes of the
// model's first findings), and what the model found in what ships (a
// counterexample each, with the proposed fix beside it). A counterexample is
// printed as a story in the protocol's words:
//
//	t=0 C claim_scopes: acquired epoch 1 (previous term 0 closed; guards to wait for: none)
//	t=0 C gate opens (epoch 1)
//	t=0 FAULT pg_terminate_backend(C's leadership session): its locks are free, C runs on
//	t=0 B claim_scopes: acquired epoch 2 (previous term 1 open; guards to wait for: C's )
//	...
//
// correspondence.txt ties the models to the SQL: every function they stand
// for, declared exactly as migrations/functions declares it; TestCorrespondence
// fails when one changes. docs/model.md says what is modelled and abstracted,
// the figures, and each counterexample.
//
// Running it needs spin and a C compiler (Debian: apt-get install spin gcc);
// go test ./lab/model/ skips without spin unless CI is set.
package model
