// Command render-dashboard draws the Grafana dashboard (grafana/orderd.json)
// from a running orderd, without Grafana: it scrapes the targets' /metrics
// every second into a Prometheus TSDB in a directory of its own, evaluates
// every panel's queries over the window with Prometheus's PromQL engine
// (after expanding the dashboard's variables as Grafana would), lays the
// panels out on the dashboard's grid as SVG line charts in an HTML page,
// and screenshots the page with headless Chromium.
//
//	go run ./cmd/render-dashboard -target orderd-0=http://127.0.0.1:9090/metrics \
//	    -out ../../docs/dashboard.png -- go run ../../cmd/orderload ...
//
// With a command after the flags, it scrapes while the command runs (and
// -tail longer); without one, for -duration. -data keeps the samples, and
// -render-only draws again from them without scraping. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/prometheus/tsdb"

	"github.com/atlasmart/orderd/deploy/monitoring/dashboard"
)

type targetsFlag []target

type target struct{ instance, url string }

func (t *targetsFlag) String() string { return fmt.Sprint(*t) }

func (t *targetsFlag) Set(s string) error {
	name, url, ok := strings.Cut(s, "=")
	if !ok || name == "" || url == "" {
		return fmt.Errorf("target %q: want INSTANCE=URL", s)
	}
	*t = append(*t, target{instance: name, url: url})
	return nil
}

type config struct {
	dashboard    string
	targets      targetsFlag
	interval     time.Duration
	duration     time.Duration
	tail         time.Duration
	rateInterval time.Duration
	data         string
	renderOnly   bool
	html         string
	out          string
	chromium     string
	width        int
	command      []string
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "render-dashboard:", err)
		os.Exit(1)
	}
}

func run() error {
	var c config
	flag.StringVar(&c.dashboard, "dashboard", "grafana/orderd.json", "Grafana dashboard JSON")
	flag.Var(&c.targets, "target", "INSTANCE=URL of a /metrics endpoint to scrape (repeatable; default orderd=http://127.0.0.1:9090/metrics)")
	flag.DurationVar(&c.interval, "interval", time.Second, "scrape interval")
	flag.DurationVar(&c.duration, "duration", 2*time.Minute, "how long to scrape when no command is given")
	flag.DurationVar(&c.tail, "tail", 15*time.Second, "keep scraping this long after the command ends")
	flag.DurationVar(&c.rateInterval, "rate-interval", 20*time.Second, "the value of $__rate_interval")
	flag.StringVar(&c.data, "data", "", "TSDB directory to keep the samples in (default: a temporary directory, removed)")
	flag.BoolVar(&c.renderOnly, "render-only", false, "do not scrape: draw from the samples already in -data")
	flag.StringVar(&c.html, "html", "", "also keep the HTML page here")
	flag.StringVar(&c.out, "out", "dashboard.png", "PNG to write")
	flag.StringVar(&c.chromium, "chromium", "chromium", "headless Chromium binary")
	flag.IntVar(&c.width, "width", 1600, "page width in CSS pixels")
	flag.Parse()
	c.command = flag.Args()
	if len(c.targets) == 0 {
		c.targets = targetsFlag{{instance: "orderd", url: "http://127.0.0.1:9090/metrics"}}
	}
	if c.renderOnly && c.data == "" {
		return errors.New("-render-only needs -data")
	}

	d, err := dashboard.Load(c.dashboard)
	if err != nil {
		return err
	}
	dir := c.data
	if dir == "" {
		if dir, err = os.MkdirTemp("", "render-dashboard-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	opts := tsdb.DefaultOptions()
	opts.RetentionDuration = int64(7 * 24 * time.Hour / time.Millisecond)
	db, err := tsdb.Open(dir, slog.New(slog.DiscardHandler), nil, opts, nil)
	if err != nil {
		return fmt.Errorf("open tsdb in %s: %w", dir, err)
	}
	defer db.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !c.renderOnly {
		if err := scrapeWhile(ctx, db, c); err != nil {
			return err
		}
	}

	panels, start, end, err := evaluate(ctx, db, d, c.rateInterval)
	if err != nil {
		return err
	}
	instances, err := instancesIn(ctx, db)
	if err != nil {
		return err
	}
	page := renderHTML(d, panels, start, end, c.width, instances)
	htmlPath := c.html
	if htmlPath == "" {
		f, err := os.CreateTemp("", "render-dashboard-*.html")
		if err != nil {
			return err
		}
		f.Close()
		htmlPath = f.Name()
		defer os.Remove(htmlPath)
	}
	if err := os.WriteFile(htmlPath, []byte(page.html), 0o644); err != nil {
		return err
	}
	return screenshot(ctx, c, htmlPath, page.height)
}

// scrapeWhile scrapes every interval until the command exits (plus tail) or,
// with no command, for duration.
func scrapeWhile(ctx context.Context, db *tsdb.DB, c config) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newScraper(db, c.targets)
	done := make(chan error, 1)
	go func() { done <- s.loop(ctx, c.interval) }()

	var cmdErr error
	if len(c.command) > 0 {
		cmd := exec.CommandContext(ctx, c.command[0], c.command[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		fmt.Fprintf(os.Stderr, "render-dashboard: scraping %d targets while %s runs\n", len(c.targets), strings.Join(c.command, " "))
		cmdErr = cmd.Run()
		select {
		case <-time.After(c.tail):
		case <-ctx.Done():
		}
	} else {
		fmt.Fprintf(os.Stderr, "render-dashboard: scraping %d targets for %s\n", len(c.targets), c.duration)
		select {
		case <-time.After(c.duration):
		case <-ctx.Done():
		}
	}
	cancel()
	if err := <-done; err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "render-dashboard: %d scrapes, %d failed\n", s.scrapes, s.failures)
	if cmdErr != nil {
		// The load's own failures (a refused call) do not spoil the
		// picture; say so and draw it.
		fmt.Fprintf(os.Stderr, "render-dashboard: the command ended with %v\n", cmdErr)
	}
	if s.scrapes == s.failures {
		return errors.New("no scrape succeeded")
	}
	return nil
}

// screenshot renders the page with headless Chromium.
func screenshot(ctx context.Context, c config, htmlPath string, height int) error {
	abs, err := filepath.Abs(c.out)
	if err != nil {
		return err
	}
	htmlAbs, err := filepath.Abs(htmlPath)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--force-device-scale-factor=1", fmt.Sprintf("--window-size=%d,%d", c.width, height),
		"--screenshot="+abs, "file://"+htmlAbs)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", c.chromium, err, out)
	}
	fmt.Fprintf(os.Stderr, "render-dashboard: wrote %s (%dx%d)\n", c.out, c.width, height)
	return nil
}
