package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// none is what a table shows for an empty cell, as kubectl does, so
// every row has as many words as the header.
const none = "<none>"

// printObjects prints objs of kind k in the output format: a table
// ("" or "wide"), or JSON or YAML of the list of objects.
func printObjects(out io.Writer, k *kind, objs []client.Object, output string, withNS bool, now time.Time) error {
	sortObjects(objs)
	switch output {
	case "", "wide":
		return printTable(out, k, objs, output == "wide", withNS, now)
	case "json", "yaml":
		// The client leaves typed objects without apiVersion and kind; set
		// them so the output can be applied again.
		for _, o := range objs {
			o.GetObjectKind().SetGroupVersionKind(k.gvk)
		}
		if output == "json" {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			return enc.Encode(objs)
		}
		raw, err := yaml.Marshal(objs)
		if err != nil {
			return err
		}
		_, err = out.Write(raw)
		return err
	default:
		return &exitCodeError{code: exitUsage, msg: fmt.Sprintf("-o %q: want wide, json or yaml", output)}
	}
}

func sortObjects(objs []client.Object) {
	sort.SliceStable(objs, func(i, j int) bool {
		if objs[i].GetNamespace() != objs[j].GetNamespace() {
			return objs[i].GetNamespace() < objs[j].GetNamespace()
		}
		return objs[i].GetName() < objs[j].GetName()
	})
}

// printTable prints one row per object: NAMESPACE (withNS), NAME, then
// the kind's columns (the wide ones only when wide).
func printTable(out io.Writer, k *kind, objs []client.Object, wide, withNS bool, now time.Time) error {
	var cols []column
	for _, c := range k.columns {
		if wide || !c.wide {
			cols = append(cols, c)
		}
	}
	row := make([]string, 0, len(cols)+2)
	header := func() []string {
		row = row[:0]
		if withNS {
			row = append(row, "NAMESPACE")
		}
		row = append(row, "NAME")
		for _, c := range cols {
			row = append(row, c.header)
		}
		return row
	}
	tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header(), "\t"))
	for _, o := range objs {
		row = row[:0]
		if withNS {
			row = append(row, cell(o.GetNamespace()))
		}
		row = append(row, cell(o.GetName()))
		for _, c := range cols {
			row = append(row, cell(c.cell(o, now)))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// cell is a table cell: one line of inert text, <none> when empty.
func cell(s string) string {
	if s = clean(s); s == "" {
		return none
	}
	return s
}

// clean makes text from the cluster safe to print on a terminal. Object
// fields, condition and Event messages are written by controllers and run
// pods, not by the person reading them: an escape sequence in them could
// retitle the terminal, hide lines or rewrite what was printed before, and
// a bidirectional override could show text in another order than it is.
// Such characters are printed as Go escapes (\x1b, \u202e); line breaks
// and tabs become spaces so a value stays on its row.
func clean(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case r == utf8.RuneError && isInvalidAt(s, i):
			b.WriteRune(utf8.RuneError)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case isBidiControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isInvalidAt reports whether s holds an invalid UTF-8 byte at i (rather
// than an encoded U+FFFD).
func isInvalidAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size <= 1
}

// isBidiControl reports the Unicode bidirectional embedding, override and
// isolate controls (Unicode 15, UAX #9), plus the marks.
func isBidiControl(r rune) bool {
	return r == 0x200e || r == 0x200f || r == 0x061c ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// truncate keeps at most n runes of s, marking a cut with "…".
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// age renders how long ago t was, as kubectl does; <unknown> for no time.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
