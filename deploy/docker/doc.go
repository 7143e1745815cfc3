// Package docker holds no code: its tests load compose.yaml, alone and with
// compose.host.yaml, with the Compose specification's own loader
// (compose-go, schema validation on) and check what the files and the
// repo-root Dockerfile promise (README.md beside them). No Docker engine is
// needed; smoke.sh runs the files for real where there is one.
package docker
