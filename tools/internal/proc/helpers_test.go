package proc

import (
	"bytes"
	"strconv"
	"time"
)

func indexNUL(b []byte) int {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return i
	}
	return len(b)
}

func itoa(n int) string { return strconv.Itoa(n) }

func containsZombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

func sleep() { time.Sleep(10 * time.Millisecond) }
