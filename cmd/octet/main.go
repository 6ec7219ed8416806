// Command octet is the octet coding-agent runtime: an LSP-style server for
// editors (octet lsp), a headless runner (octet exec), session inspection
// (octet sessions) and a self-contained demo (octet demo).
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: octet demo|version")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "demo":
		fmt.Println("octet demo: the end-to-end demo arrives with the server issue (#7).")
	case "version":
		fmt.Println("octet (development)")
	default:
		fmt.Fprintf(os.Stderr, "octet: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}
