package service

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// EnvName is the environment variable that backs a flag: the flag's name
// in upper case with dashes turned into underscores, so --batch-poll-seconds
// reads BATCH_POLL_SECONDS. It is the only rule; no flag has another name.
func EnvName(flagName string) string {
	return strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Flag describes one registered flag, for documentation and tests.
type Flag struct {
	// Name is the flag's name without dashes.
	Name string
	// Env is the environment variable that backs it.
	Env string
	// Default is the default value as the flag prints it.
	Default string
	// Usage says what the flag does.
	Usage string
	// Group names the part of the skeleton that registered the flag, or ""
	// for the service's own flags.
	Group string
}

// FlagSet is a flag.FlagSet whose flags fall back to the environment. A
// value on the command line wins over the environment, which wins over the
// default. A malformed environment value is an error naming the variable,
// never silently ignored.
type FlagSet struct {
	name    string
	fs      *flag.FlagSet
	getenv  func(string) string
	flags   []Flag
	group   string
	version bool
	checks  []func() error
}

// NewFlagSet returns an empty FlagSet for the named service. getenv is
// usually os.Getenv; tests pass a map's lookup.
func NewFlagSet(service string, getenv func(string) string) *FlagSet {
	if getenv == nil {
		getenv = os.Getenv
	}
	f := &FlagSet{name: service, fs: flag.NewFlagSet(service, flag.ContinueOnError), getenv: getenv}
	f.fs.SetOutput(io.Discard)
	f.fs.BoolVar(&f.version, "version", false, "print version information and exit")
	return f
}

// Name is the service the set belongs to.
func (f *FlagSet) Name() string { return f.name }

// Flags lists the registered flags in registration order (without
// --version and --help, which every binary has).
func (f *FlagSet) Flags() []Flag { return append([]Flag(nil), f.flags...) }

// Check adds a validation run after parsing, for rules that span flags
// or values a flag type cannot express (a positive count, say). Its error
// should name the flag.
func (f *FlagSet) Check(fn func() error) { f.checks = append(f.checks, fn) }

// inGroup registers the flags that fn adds under a group name.
func (f *FlagSet) inGroup(group string, fn func()) {
	prev := f.group
	f.group = group
	defer func() { f.group = prev }()
	fn()
}

// record notes a flag just defined on the underlying flag.FlagSet, with
// its variable and printed default, for docs and --help.
func (f *FlagSet) record(name string) {
	fl := f.fs.Lookup(name)
	f.flags = append(f.flags, Flag{Name: name, Env: EnvName(name), Default: fl.DefValue, Usage: fl.Usage, Group: f.group})
}

// define defines a flag of type T on the underlying flag.FlagSet with set
// (its method for T) and records it, as each typed ...Var method below does.
func define[T any](f *FlagSet, set func(p *T, name string, def T, usage string), p *T, name string, def T, usage string) {
	set(p, name, def, usage)
	f.record(name)
}

// StringVar registers a string flag.
func (f *FlagSet) StringVar(p *string, name, def, usage string) {
	define(f, f.fs.StringVar, p, name, def, usage)
}

// BoolVar registers a boolean flag; the flag and its variable accept what
// strconv.ParseBool accepts (1, t, true, 0, f, false, ...).
func (f *FlagSet) BoolVar(p *bool, name string, def bool, usage string) {
	define(f, f.fs.BoolVar, p, name, def, usage)
}

// IntVar registers an integer flag.
func (f *FlagSet) IntVar(p *int, name string, def int, usage string) {
	define(f, f.fs.IntVar, p, name, def, usage)
}

// Int64Var registers a 64-bit integer flag.
func (f *FlagSet) Int64Var(p *int64, name string, def int64, usage string) {
	define(f, f.fs.Int64Var, p, name, def, usage)
}

// Float64Var registers a floating-point flag.
func (f *FlagSet) Float64Var(p *float64, name string, def float64, usage string) {
	define(f, f.fs.Float64Var, p, name, def, usage)
}

// DurationVar registers a duration flag (time.ParseDuration syntax).
func (f *FlagSet) DurationVar(p *time.Duration, name string, def time.Duration, usage string) {
	define(f, f.fs.DurationVar, p, name, def, usage)
}

// Var registers a flag of a custom type.
func (f *FlagSet) Var(v flag.Value, name, usage string) {
	f.fs.Var(v, name, usage)
	f.record(name)
}

// ErrVersion is returned by Parse after it printed the version for
// --version; the caller exits 0.
var ErrVersion = errors.New("version printed")

// ErrHelp is returned by Parse after it printed usage for -h or --help;
// the caller exits 0.
var ErrHelp = flag.ErrHelp

// Parse reads args (without the program name), then the environment for
// each flag not given on the command line, then runs the checks. With
// --version it prints the build information to out and returns ErrVersion;
// with --help it prints the flags and their variables and returns ErrHelp.
func (f *FlagSet) Parse(args []string, out io.Writer) error {
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			f.PrintUsage(out)
			return ErrHelp
		}
		return err
	}
	if f.version {
		_, _ = fmt.Fprintln(out, Version().String(f.name))
		return ErrVersion
	}
	if f.fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", f.fs.Args())
	}
	given := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for _, fl := range f.flags {
		if given[fl.Name] {
			continue
		}
		v := f.getenv(fl.Env)
		if v == "" {
			continue
		}
		if err := f.fs.Set(fl.Name, v); err != nil {
			return fmt.Errorf("environment variable %s (flag --%s): %w", fl.Env, fl.Name, unwrapSetError(err))
		}
	}
	for _, check := range f.checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// unwrapSetError turns flag's "parse error" wording into the cause.
func unwrapSetError(err error) error {
	var ne *strconv.NumError
	if errors.As(err, &ne) {
		return fmt.Errorf("invalid value %q: %w", ne.Num, ne.Err)
	}
	return err
}

// PrintUsage writes every flag with its variable, default and usage.
func (f *FlagSet) PrintUsage(out io.Writer) {
	_, _ = fmt.Fprintf(out, "Usage of %s (every flag falls back to the environment variable shown):\n", f.name)
	for _, fl := range f.flags {
		def := ""
		if fl.Default != "" {
			def = fmt.Sprintf(" (default %s)", fl.Default)
		}
		_, _ = fmt.Fprintf(out, "  --%s  [%s]%s\n      %s\n", fl.Name, fl.Env, def, fl.Usage)
	}
	_, _ = fmt.Fprintf(out, "  --version\n      print version information and exit\n")
}

// ParseOrExit is Parse for main: it exits 0 after --version or --help and
// 2 with the error on stderr for a bad flag or variable.
func (f *FlagSet) ParseOrExit(args []string) {
	if code, done := ParseExit(f.Parse(args, os.Stdout), f.name, os.Stderr); done {
		os.Exit(code)
	}
}
