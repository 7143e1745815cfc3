package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// layer is a role a package plays; its place in the import order is set by
// mayImport, not by its value.
type layer string

const (
	vocabulary layer = "vocabulary" // the error vocabulary (fault): imports nothing of ours
	domain     layer = "domain"     // what an order is; knows no storage, transport or driver
	platform   layer = "platform"   // the driver seam and small primitives below the stores
	store      layer = "store"      // Cassandra-backed stores, the schema and the reconciler's scan
	app        layer = "app"        // the use cases: they join the stores
	adapter    layer = "adapter"    // gRPC in, Kafka out, metrics, caller identity, rate limits
	tool       layer = "tool"       // development, load, audit and test tooling
	api        layer = "api"        // the generated API (proto/, its own module)
	client     layer = "client"     // the client library (proto/client)
	command    layer = "command"    // binaries and the e2e suite: they wire everything
	deploy     layer = "deploy"     // the checks of the deployment artefacts
)

// layers maps a path, relative to the module, to its layer. A prefix names
// a directory and everything under it; the longest matching prefix wins.
// Every package of the module must match one.
var layers = []struct {
	prefix string
	layer  layer
}{
	{"internal/domain/fault", vocabulary},
	{"internal/domain", domain},
	{"internal/platform", platform},
	{"internal/stores", store},
	{"ledger", store},
	{"projection", store},
	{"reconciler", store},
	{"cql", store},
	{"internal/app", app},
	{"internal/adapters", adapter},
	{"internal/tools", tool},
	{"internal/layering", tool},
	{"proto/client", client},
	{"proto", api},
	{"cmd", command},
	{"e2e", command},
	{"deploy", deploy},
}

// mayImport says which layers a layer's non-test code may import. What is
// not listed is forbidden. Tools (devsetup, invariant, loadgen, ...) appear
// only under tool and command: cmd/orderd links devsetup and invariant for
// its dev-setup and verify subcommands, but no package it serves requests
// with may. Nothing may import command or deploy.
var mayImport = map[layer][]layer{
	vocabulary: nil,
	domain:     {vocabulary, domain},
	platform:   {vocabulary, platform},
	store:      {vocabulary, domain, platform, store},
	app:        {vocabulary, domain, platform, store, app},
	adapter:    {vocabulary, domain, platform, store, app, adapter, api},
	tool:       {vocabulary, domain, platform, store, app, adapter, api, client, tool},
	command:    {vocabulary, domain, platform, store, app, adapter, api, client, tool},
	api:        {api},
	client:     {api, client},
	deploy:     nil,
}

// testsMayNotImport is what test files (TestImports, XTestImports) may not
// import: a test is linked into no binary, so it may reach across layers
// (a workflow test decodes what the outbox published, an auth test makes
// certificates with devpki), but never into a binary or a deployment check.
var testsMayNotImport = []layer{command, deploy}

// pkg is what the checker reads of `go list -json`.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// violation is one forbidden import: from imports to (both relative to the
// module), and why that is forbidden.
type violation struct {
	from, to string
	why      string
}

func (v violation) String() string { return fmt.Sprintf("%s -> %s: %s", v.from, v.to, v.why) }

func layerOf(rel string) (layer, bool) {
	best, found := -1, layer("")
	for _, l := range layers {
		if (rel == l.prefix || strings.HasPrefix(rel, l.prefix+"/")) && len(l.prefix) > best {
			best, found = len(l.prefix), l.layer
		}
	}
	return found, best >= 0
}

// isTestSupport reports whether a path names a test-support package: a
// fake and its contract suite, by the convention <name>test
// (ledgertest, outboxtest, storetest, ...).
func isTestSupport(rel string) bool {
	last := rel[strings.LastIndex(rel, "/")+1:]
	return len(last) > len("test") && strings.HasSuffix(last, "test")
}

// check returns every import of pkgs against the tables, in the order of
// pkgs and their imports. module is the module path; imports outside it
// are not checked.
func check(module string, pkgs []pkg) []violation {
	rel := func(p string) (string, bool) {
		if p == module {
			return ".", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	var out []violation
	for _, p := range pkgs {
		from, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		fromLayer, ok := layerOf(from)
		if !ok {
			out = append(out, violation{from, from, "the package is in no layer (add its path to the layers table)"})
			continue
		}
		seen := map[string]bool{}
		visit := func(imp string, test bool) {
			to, ok := rel(imp)
			if !ok || to == from || seen[to] {
				return
			}
			toLayer, ok := layerOf(to)
			switch {
			case !ok:
				out = append(out, violation{from, to, "the imported package is in no layer (add its path to the layers table)"})
			case test && slices.Contains(testsMayNotImport, toLayer):
				out = append(out, violation{from, to, fmt.Sprintf("nothing imports layer %s, not even a test", toLayer)})
			case test:
			case !slices.Contains(mayImport[fromLayer], toLayer):
				out = append(out, violation{from, to, fmt.Sprintf("layer %s may not import layer %s", fromLayer, toLayer)})
			case isTestSupport(to) && !isTestSupport(from):
				out = append(out, violation{from, to, "only tests and other test-support packages import a test-support package"})
			default:
				return
			}
			seen[to] = true
		}
		for _, imp := range p.Imports {
			visit(imp, false)
		}
		for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
			visit(imp, true)
		}
	}
	return out
}

// buildTags are the tag sets the module is listed with: the release build
// and the failpoints build, whose files may import differently.
var buildTags = []string{"", "failpoints"}

func TestImportsFollowTheLayers(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the packages: %v", err)
	}
	gomod, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	modPath, err := exec.Command(goBin, "list", "-m", "-f", "{{.Path}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	module := strings.TrimSpace(string(modPath))
	reported := map[violation]bool{}
	for _, tags := range buildTags {
		pkgs := list(t, goBin, root, tags)
		if len(pkgs) < 10 {
			t.Fatalf("go list -tags=%q listed %d packages; expected the whole module", tags, len(pkgs))
		}
		for _, v := range check(module, pkgs) {
			if !reported[v] {
				reported[v] = true
				t.Errorf("forbidden import (build tags %q): %s", tags, v)
			}
		}
	}
}

func list(t *testing.T, goBin, root, tags string) []pkg {
	t.Helper()
	cmd := exec.Command(goBin, "list", "-deps=false", "-tags="+tags, "-json=ImportPath,Imports,TestImports,XTestImports", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", root, err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
}
