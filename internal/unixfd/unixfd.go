// Package unixfd is the small set of descriptor-relative system calls the
// workspace walkers (the search tool) use, under the names of
// golang.org/x/sys/unix. On Unix each name is that package's; on Windows,
// where the walkers' no-follow, descriptor-relative resolution is not
// built yet, every call fails with ErrUnsupported rather than follow a
// link.
package unixfd
