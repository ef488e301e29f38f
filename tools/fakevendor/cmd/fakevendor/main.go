// Command fakevendor serves the fake Anthropic, OpenAI and Gemini batch APIs
// of package fakevendor on a TCP address, for local stacks and containers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/tools/fakevendor"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fakevendor:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("fakevendor", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8089", "listen address")
	var o fakevendor.Options
	fs.StringVar(&o.APIKey, "api-key", os.Getenv("FAKEVENDOR_API_KEY"), "API key every request must carry (empty: any)")
	fs.IntVar(&o.PollsUntilEnded, "polls", 1, "status reads a batch needs before it finishes")
	fs.DurationVar(&o.Delay, "delay", 0, "minimum time from create to finished")
	outcome := fs.String("outcome", "complete", "how batches end: complete, expire, never, fail")
	fs.StringVar(&o.ErrorMarker, "error-marker", fakevendor.DefaultErrorMarker, "prompt substring that makes a request fail")
	fs.StringVar(&o.ErrorMessage, "error-message", "", "message of a failed request (default names the marker)")
	fs.BoolVar(&o.FailDeletes, "fail-deletes", false, "answer every delete with 500")
	if err := fs.Parse(args); err != nil {
		return err
	}
	outcomes := map[string]fakevendor.Outcome{
		"complete": fakevendor.OutcomeComplete, "expire": fakevendor.OutcomeExpire,
		"never": fakevendor.OutcomeNever, "fail": fakevendor.OutcomeFail,
	}
	oc, ok := outcomes[*outcome]
	if !ok {
		return fmt.Errorf("unknown -outcome %q", *outcome)
	}
	o.Outcome = oc

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: fakevendor.New(o), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		// Shutdown runs once ctx is cancelled: keep its values only.
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	slog.Info("fakevendor listening", "url", "http://"+ln.Addr().String())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
