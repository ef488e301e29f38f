package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	"github.com/agentplane/agentplane/tools/agentctl/digest"
)

func addGatewayFlags(cmd *cobra.Command, f *gatewayFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "gateway", os.Getenv("AGENTPLANE_GATEWAY"), "realtime-gateway address host:port ($AGENTPLANE_GATEWAY)")
	fl.StringVar(&f.serviceAccount, "service-account", os.Getenv("AGENTPLANE_SERVICE_ACCOUNT"),
		"call as this ServiceAccount, [NAMESPACE/]NAME: a short-lived token for --audience is requested for it with your kubeconfig, "+
			"which needs create on serviceaccounts/token ($AGENTPLANE_SERVICE_ACCOUNT)")
	fl.StringVar(&f.audience, "audience", defaultAudience, "audience of the token requested for --service-account: the gateway's --token-audiences")
	fl.StringVar(&f.token, "token", os.Getenv("AGENTPLANE_TOKEN"), "bearer token sent as is, instead of --service-account ($AGENTPLANE_TOKEN)")
	fl.BoolVar(&f.tls, "tls", false, "connect with TLS, trusting the system roots (or --ca-file)")
	fl.StringVar(&f.caFile, "ca-file", "", "PEM CA certificates to trust for the gateway's certificate instead of the system roots (implies --tls)")
	fl.StringVar(&f.serverName, "tls-server-name", "", "name to check the gateway's certificate for, when --gateway is not it (a port-forward; implies --tls)")
	fl.BoolVar(&f.insecure, "insecure", false, "allow plaintext to a gateway that is not on loopback, sending the token unencrypted")
	// The flag's earlier name, still accepted.
	fl.BoolVar(&f.tls, "gateway-tls", false, "connect with TLS")
	_ = fl.MarkDeprecated("gateway-tls", "use --tls")
}

func newPromptCmd(g *globals) *cobra.Command {
	return newGatewayCmd(g, "prompt AGENT TEXT", "Send one prompt to a realtime Agent and stream its turn", 2,
		func(ctx context.Context, s *session, cmd *cobra.Command, args []string) error {
			return s.turn(ctx, args[1], cmd.OutOrStdout())
		})
}

func newChatCmd(g *globals) *cobra.Command {
	return newGatewayCmd(g, "chat AGENT", "Talk to a realtime Agent: one prompt per line of stdin, Ctrl-D closes the session", 1,
		func(ctx context.Context, s *session, cmd *cobra.Command, args []string) error {
			return s.chat(ctx, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
}

// newGatewayCmd is a command that talks to the session of the Agent named
// by its first argument: it dials the gateway, then calls do with a
// context that Ctrl-C cancels, and closes the connection after.
func newGatewayCmd(g *globals, use, short string, nargs int,
	do func(ctx context.Context, s *session, cmd *cobra.Command, args []string) error) *cobra.Command {
	f := &gatewayFlags{}
	cmd := &cobra.Command{
		Use:               use,
		Short:             short,
		Args:              cobra.ExactArgs(nargs),
		ValidArgsFunction: g.completeAgent,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.dialGateway(cmd.Context(), f, args[0])
			if err != nil {
				return err
			}
			defer s.close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			return do(ctx, s, cmd, args)
		},
	}
	addGatewayFlags(cmd, f)
	return cmd
}

// turn sends text and prints the turn's events as they come. A turn that
// ends in error, or a call the gateway refuses, is an error carrying the
// reason.
func (s *session) turn(ctx context.Context, text string, out io.Writer) error {
	stream, err := s.client.Prompt(ctx, &realtimev1.PromptRequest{Agent: s.ref, Text: text})
	if err != nil {
		return callErr(err)
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return &exitCodeError{code: exitError, msg: "the gateway ended the turn without a turn end"}
		}
		if err != nil {
			return callErr(err)
		}
		if ev := m.GetEvent(); ev != nil {
			if digest.Interesting(ev) {
				fmt.Fprintln(out, digest.Line(ev))
			}
			continue
		}
		te := m.GetTurnEnd()
		if te == nil {
			continue
		}
		if te.GetIsError() {
			msg := "turn ended in error: " + te.GetReason()
			if te.ExitCode != nil {
				msg += fmt.Sprintf(" (exit %d)", te.GetExitCode())
			}
			return &exitCodeError{code: exitError, msg: msg}
		}
		fmt.Fprintf(out, "%-11s session %s\n", "turn_end", te.GetSessionId())
		return nil
	}
}

// chat runs one turn per non-empty line of in; at the end of in it closes
// the session. A turn that fails is reported and the chat goes on; a
// refusal that no later line can change (unauthenticated, denied, no such
// Agent, session over) ends it.
func (s *session) chat(ctx context.Context, in io.Reader, out, errOut io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		err := s.turn(ctx, line, out)
		var ec *exitCodeError
		if err != nil && errors.As(err, &ec) && !ec.fatal {
			fmt.Fprintln(errOut, "agentctl:", ec.msg)
			continue
		}
		if err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	resp, err := s.client.Close(ctx, &realtimev1.CloseRequest{Agent: s.ref})
	if err != nil {
		return callErr(err)
	}
	fmt.Fprintf(out, "session %s closed after %d turns\n", resp.GetSessionId(), resp.GetTurns())
	return nil
}

// callErr turns a gateway status into the command's error: its code and
// message, marked fatal when another line of a chat cannot fare better
// (who the caller is, what they may do, or the Agent itself is the
// problem, rather than a busy session or a passing outage).
func callErr(err error) error {
	st := status.Convert(err)
	fatal := true
	switch st.Code() {
	case codes.InvalidArgument, codes.Unavailable, codes.Internal, codes.DeadlineExceeded:
		fatal = false
	case codes.FailedPrecondition:
		m := st.Message()
		fatal = strings.Contains(m, "the session has ended") || strings.Contains(m, "not a realtime run")
	}
	return &exitCodeError{code: exitError, msg: st.Code().String() + ": " + st.Message(), fatal: fatal}
}
