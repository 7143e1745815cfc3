// Package order is the CreateOrder business command: what a valid command
// is, its canonical form and fingerprint, and the order it deterministically
// becomes. It knows nothing of storage or transport.
//
// Canonicalisation (the contract that decides which retries are "the same
// command"):
//   - request_id: a UUID in its 36-character form (8-4-4-4-12 hex digits),
//     not the nil UUID; compared as a UUID, so upper and lower case hex are
//     the same id. Braces, urn:uuid: and undashed forms are rejected.
//   - currency: an ISO 4217 code with minor units in the committed table
//     iso4217.go (list one as published 2026-01-01, funds such as CLF
//     included), case-insensitive ASCII ("eur" is "EUR"). Codes ISO gives no
//     minor unit (XAU, XDR, XTS, XXX) and codes not in that list (DEM, HRK)
//     are invalid. The minor units are ISO's, not a library's: only a commit
//     to the table changes them (TestISO4217Golden).
//   - total and unit prices: plain decimal strings; the amount is what counts,
//     so "77.7", "77.70" and "077.700" are the same amount. More decimal places
//     than the currency has minor units (after trailing zeros) is invalid, as
//     are signs, exponents, separators and whitespace. Stored and answered in
//     the currency's minor units ("77.70" EUR, "1200" JPY).
//   - customer_id and sku: opaque, compared byte for byte (no case folding,
//     no trimming: surrounding whitespace is invalid, not stripped).
//   - lines: a multiset; their order in the request does not matter (they are
//     sorted by sku, unit price, quantity). If any are given, the sum of
//     quantity × unit_price must equal total.
//
// The fingerprint is sha256 over a versioned canonical encoding
// ("sha256:v1:<hex>"). Changing the encoding means a new version prefix, so
// ledger rows written under an old version are still compared correctly.
package order
