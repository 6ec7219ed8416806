# Versions CI and releases pin, sourced by .ci/depcheck and .ci/release.
# All come from the Go module proxy.

# The toolchain releases are built with, and whose standard library the
# vulnerability check scans: the go command fetches it (GOTOOLCHAIN).
GO_TOOLCHAIN=go1.26.10
# The licence checker, which also collects the notices releases ship.
GO_LICENSES=github.com/google/go-licenses@v1.6.0
GOVULNCHECK=golang.org/x/vuln/cmd/govulncheck@v1.10.0
# The vulnerability reports (data/osv of the Go vulnerability database's
# own module): the check knows exactly the reports of this version.
VULNDB=golang.org/x/vulndb@v0.0.0-20261105234957-e22db6528018
