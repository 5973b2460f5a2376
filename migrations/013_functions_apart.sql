-- pgleader schema, version 13: functions and views apart from the numbered files.
--
-- From this version the numbered files hold tables and data only. Every function,
-- trigger and view is one file under functions/ or views/, which `pgleader
-- migrate` applies after the numbered files whenever the file's checksum
-- differs from the one recorded in pgleader.applied_files (Flyway's repeatable
-- migrations). A function whose signature or meaning changes gets a new name;
-- the release that adds it keeps the old one for nodes of the release before
-- (README, "Upgrades").
--
-- The version-1 functions go: claim, try_claim, heartbeat, release and
-- unlock_held. No node of release 12 calls them (it claims with claim_batch,
-- heartbeats with node_heartbeat, releases with release_batch and unlocks with
-- unlock_held_many).

-- +goose Up
CREATE TABLE IF NOT EXISTS pgleader.applied_files (
    file       text PRIMARY KEY,          -- functions/NAME.sql or views/NAME.sql
    checksum   text NOT NULL,             -- hex sha256 of the file as applied
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    applied_by text NOT NULL DEFAULT session_user
);

DROP FUNCTION IF EXISTS pgleader.claim(text, bigint, text, text, bigint, integer, integer, integer, integer);
DROP FUNCTION IF EXISTS pgleader.try_claim(text, bigint, text, text, bigint, integer, integer, integer, integer);
DROP FUNCTION IF EXISTS pgleader.heartbeat(text, text[], bigint[], text[], text[]);
DROP FUNCTION IF EXISTS pgleader.release(text, bigint, text, text, integer);
DROP FUNCTION IF EXISTS pgleader.unlock_held(bigint);
