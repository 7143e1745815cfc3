#!/usr/bin/env python3
"""Where CreateOrder's time goes: the median waterfall of its traces.

Reads what orderd writes with ORDERD_TRACING=stdout (each span as JSON on
stderr, between its log lines) from stdin. For every trace rooted at a
CreateOrder server span it takes each child span's start and end relative
to the root's start, and prints the medians over the traces, a CQL span
named by its statement (orderd.cql.name).

  ORDERD_TRACING=stdout ORDERD_DELIVERY=false orderd serve 2> spans.log &
  orderload -concurrency 1 -intents 200 -duplicates 0 -conflicts 0 ...
  scripts/span-waterfall.py < spans.log
"""
import json
import statistics
import sys
from datetime import datetime, timezone


def seconds(stamp):
    """An RFC 3339 time with up to nanoseconds, as Unix seconds."""
    stamp = stamp.rstrip('Z')
    base, _, frac = stamp.partition('.')
    frac = frac.split('+')[0].split('-')[0]
    t = datetime.fromisoformat(base).replace(tzinfo=timezone.utc).timestamp()
    return t + (float('0.' + frac) if frac else 0.0)


def spans(text):
    """The span objects among the JSON values and other lines of text."""
    dec, i = json.JSONDecoder(), 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            nl = text.find('\n', i)
            i = len(text) if nl < 0 else nl + 1
            continue
        if isinstance(obj, dict) and 'SpanContext' in obj:
            yield obj


def label(span):
    for attr in span.get('Attributes') or []:
        if attr['Key'] == 'orderd.cql.name':
            return 'cql ' + attr['Value']['Value']
    return span['Name']


def is_root(span):
    parent = (span.get('Parent') or {}).get('SpanID', '')
    return span['Name'].endswith('/CreateOrder') and not parent.strip('0')


def main():
    traces = {}
    for span in spans(sys.stdin.read()):
        traces.setdefault(span['SpanContext']['TraceID'], []).append(span)
    rows, roots = {}, []
    for members in traces.values():
        root = next((s for s in members if is_root(s)), None)
        if root is None:
            continue
        t0 = seconds(root['StartTime'])
        roots.append((seconds(root['EndTime']) - t0) * 1000)
        seen = {}
        for s in members:
            if s is root:
                continue
            name = label(s)
            seen[name] = seen.get(name, 0) + 1
            key = name if seen[name] == 1 else f'{name} #{seen[name]}'
            start, end = seconds(s['StartTime']) - t0, seconds(s['EndTime']) - t0
            rows.setdefault(key, []).append((start * 1000, end * 1000))
    if not roots:
        sys.exit('no CreateOrder traces on stdin')
    roots.sort()
    print(f'{len(roots)} traces; server span median {statistics.median(roots):.2f} ms '
          f'(p10 {roots[len(roots) // 10]:.2f}, p90 {roots[len(roots) * 9 // 10]:.2f})')
    print('| span | in traces | start ms | end ms | duration ms |')
    print('|---|---|---|---|---|')
    for key, v in sorted(rows.items(), key=lambda kv: statistics.median(x[0] for x in kv[1])):
        start = statistics.median(x[0] for x in v)
        end = statistics.median(x[1] for x in v)
        dur = statistics.median(x[1] - x[0] for x in v)
        print(f'| {key} | {len(v)} | {start:.2f} | {end:.2f} | {dur:.2f} |')


if __name__ == '__main__':
    main()
