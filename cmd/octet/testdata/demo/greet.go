// Command greet prints a greeting.
package main

import "fmt"

func main() {
	fmt.Println(greeting("world"))
}

// greeting returns the greeting for name.
func greeting(name string) string {
	return "Helo, " + name + "!"
}
