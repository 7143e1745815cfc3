// Package layering holds no code: its test (layering_test.go) lists every
// package of the module with `go list` and fails on any import that goes
// against the floor plan of docs/architecture.md. The plan is two tables in
// that file: which layer a package path belongs to, and which layers each
// layer may import. Moving packages to other directories changes the
// tables, not the checker.
package layering
