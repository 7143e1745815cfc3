//go:build failpoints

package failpoint

// Compiled: this binary was built with -tags failpoints (a test build).
const Compiled = true
