// Package docker holds no code: its test loads compose.yaml with the
// Compose specification's own loader (compose-go, schema validation on) and
// checks what the file promises (README.md beside it). No Docker engine is
// needed.
package docker
