// Module release pins what `make release-sdk` and `make example` use:
// gorelease, which checks the sdk's Go API against its last sdk/v* tag, and
// golang.org/x/mod, whose zip package writes the sdk's module zip for the
// example's file GOPROXY (./sdkproxy). It stays outside go.work.
module github.com/vigilhq/vigil/tools/release

go 1.26.7

tool golang.org/x/exp/cmd/gorelease

require golang.org/x/mod v0.42.0

require (
	golang.org/x/exp v0.0.0-20261113113407-e3970619a1a4 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/tools v0.52.1-0.20261106145633-d407941a339a // indirect
)
