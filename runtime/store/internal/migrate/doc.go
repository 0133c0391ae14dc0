// Package migrate reads the numbered migrations a driver embeds
// (migrations/NNN_name.up.sql and NNN_name.down.sql). Applying them is the driver's
// job: each records what it applied in its own schema_migrations table.
//
// It imports only the standard library.
package migrate
