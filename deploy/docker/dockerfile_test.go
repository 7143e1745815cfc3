// Package docker holds the checks of the container image's Dockerfile and of
// compose.yaml; it has no code of its own.
package docker

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
)

// dockerfileInstructions reads the repo-root Dockerfile as instructions
// (continuation lines joined, comments dropped).
func dockerfileInstructions(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cont := strings.HasSuffix(line, "\\")
		cur.WriteString(strings.TrimSuffix(line, "\\"))
		cur.WriteString(" ")
		if !cont {
			out = append(out, strings.Join(strings.Fields(cur.String()), " "))
			cur.Reset()
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	pinnedImage = regexp.MustCompile(`^\S+:\S+@sha256:[0-9a-f]{64}$`)
	fromLine    = regexp.MustCompile(`^FROM (--platform=\S+ )?(\S+)( AS \S+)?$`)
	argRef      = regexp.MustCompile(`^\$\{?(\w+)\}?$`)
)

// The image's promises: base images pinned by digest (the FROM lines name
// build arguments, so that a machine without a registry can pass images
// it built, and those arguments' defaults carry the pins), a numeric
// non-root user (Kubernetes' runAsNonRoot can only verify a number), and
// listeners on every interface, the health port among them.
func TestDockerfileImagePromises(t *testing.T) {
	var froms, users []string
	env := map[string]string{}
	args := map[string]string{} // the ARGs declared before the first FROM, with their defaults
	for _, in := range dockerfileInstructions(t) {
		word, rest, _ := strings.Cut(in, " ")
		switch strings.ToUpper(word) {
		case "ARG":
			if len(froms) == 0 {
				k, v, _ := strings.Cut(rest, "=")
				args[k] = v
			}
		case "FROM":
			froms = append(froms, in)
		case "USER":
			users = append(users, rest)
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		}
	}
	if len(froms) < 2 {
		t.Fatalf("want a build stage and a runtime stage, got %q", froms)
	}
	for _, from := range froms {
		m := fromLine.FindStringSubmatch(from)
		if m == nil {
			t.Errorf("%q: cannot read the base image", from)
			continue
		}
		image := m[2]
		if ref := argRef.FindStringSubmatch(image); ref != nil {
			def, ok := args[ref[1]]
			if !ok {
				t.Errorf("%q: %s is not an ARG declared before the first FROM", from, ref[1])
				continue
			}
			image = def
		}
		if !pinnedImage.MatchString(image) {
			t.Errorf("%q: base image %q is not pinned by tag@sha256 digest", from, image)
		}
	}
	if len(users) == 0 || users[len(users)-1] != "65532:65532" {
		t.Errorf("USER = %q, want the runtime stage to end as 65532:65532 (distroless nonroot, numeric)", users)
	}
	for k, want := range map[string]string{
		"ORDERD_GRPC_ADDR":    "0.0.0.0:8080",
		"ORDERD_HEALTH_ADDR":  "0.0.0.0:8081",
		"ORDERD_METRICS_ADDR": "0.0.0.0:9090",
	} {
		if env[k] != want {
			t.Errorf("ENV %s = %q, want %q", k, env[k], want)
		}
	}
}

// The image checks itself with orderd's own healthcheck command (the
// runtime has no shell or probe binary), and carries the OCI annotations
// registries and scanners read, each from a build argument that
// images/build.sh sets.
func TestDockerfileHealthcheckAndLabels(t *testing.T) {
	var healthchecks []string
	labels := map[string]string{}
	for _, in := range dockerfileInstructions(t) {
		word, rest, _ := strings.Cut(in, " ")
		switch strings.ToUpper(word) {
		case "HEALTHCHECK":
			healthchecks = append(healthchecks, rest)
		case "LABEL":
			for _, m := range regexp.MustCompile(`(\S+)="([^"]*)"`).FindAllStringSubmatch(rest, -1) {
				labels[m[1]] = m[2]
			}
		}
	}
	if len(healthchecks) != 1 || !strings.HasSuffix(healthchecks[0], `CMD ["/orderd", "healthcheck", "-timeout", "4s"]`) {
		t.Errorf("HEALTHCHECK = %q, want one, running /orderd healthcheck", healthchecks)
	}
	for key, arg := range map[string]string{
		"source": "${SOURCE}", "version": "${VERSION}", "revision": "${REVISION}",
		"created": "${CREATED}", "licenses": "${LICENSES}", "title": "orderd",
	} {
		if got := labels["org.opencontainers.image."+key]; got != arg {
			t.Errorf("LABEL org.opencontainers.image.%s = %q, want %q", key, got, arg)
		}
	}
	script, err := os.ReadFile("images/build.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{"VERSION", "REVISION", "CREATED", "SOURCE"} {
		if !strings.Contains(string(script), "--build-arg "+arg+"=") {
			t.Errorf("images/build.sh does not pass --build-arg %s", arg)
		}
	}
}
