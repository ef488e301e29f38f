// Command hello prints its build tag's word; TestBinary builds it.
package main

import "fmt"

func main() { fmt.Println(word) }
