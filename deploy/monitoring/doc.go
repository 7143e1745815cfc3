// Package monitoring checks orderd's monitoring artefacts: the alert rules
// (orderd.rules.yml), their promtool rule tests (tests/), the runbooks they
// link to (docs/runbooks.md) and the Grafana dashboard (grafana/orderd.json).
package monitoring
