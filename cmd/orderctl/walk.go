package main

import (
	"context"
	"fmt"
)

// pageFunc reads the page at token: its items and the next token ("" at
// the end).
type pageFunc[T any] func(ctx context.Context, token string) ([]T, string, error)

// walk reads one page from token, or with all every page to the end, each
// call under --timeout, with a progress bar of pages read and items found.
// It returns the items and the token after the last page read ("" at the
// end of the listing).
func walk[T any](ctx context.Context, a *app, all bool, token, what string, page pageFunc[T]) ([]T, string, error) {
	bar := progress(noProgress{})
	if all {
		bar = a.newProgress(-1, what)
		defer func() { _ = bar.Finish() }()
	}
	var items []T
	for pages := 1; ; pages++ {
		cctx, cancel := a.perCall(ctx)
		got, next, err := page(cctx, token)
		cancel()
		if err != nil {
			return nil, "", err
		}
		items, token = append(items, got...), next
		bar.Describe(fmt.Sprintf("%s: %d pages, %d found", what, pages, len(items)))
		_ = bar.Add(1)
		if !all || token == "" {
			return items, token, nil
		}
	}
}

// nextPage tells a person how to read on (a script finds the token in the
// --json document).
func (a *app) nextPage(token string) {
	if token != "" && !a.json {
		fmt.Fprintf(a.stderr, "next_page_token: %s (read on with --page-token %s, or all of it with --all)\n", token, token)
	}
}
