//go:build !loud

package main

const word = "hello"
