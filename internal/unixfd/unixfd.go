// Package unixfd is the small set of descriptor-relative system calls the
// workspace walkers (the search tool) use, under the names of
// golang.org/x/sys/unix. On Unix each name is that package's; on Windows
// a descriptor is a handle and Openat is a handle-relative NtCreateFile
// of one component that refuses reparse points (package winat).
package unixfd
