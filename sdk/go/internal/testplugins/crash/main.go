// Command crash is a plugin that dies before its handshake (the host must skip it).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "crash: giving up before serving")
	os.Exit(1)
}
