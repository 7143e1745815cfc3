//go:build !failpoints

package failpoint

// Compiled is false in a release build: no failpoint can be armed, so no
// setting can make a production process crash or fail on purpose.
const Compiled = false
