// Package layout holds no code: its test is the table of what each
// host/internal package is for and may import, the map that
// docs/layout.md draws. A package's imports follow from its one audience
// (the operator's command line, the adapter subprocess, a worker's client,
// Prometheus, a registry); an import its row does not allow means code in
// the wrong package, to be moved rather than allowed.
package layout
