//go:build loud

package main

const word = "HELLO"
