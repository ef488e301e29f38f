package vendor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// openaiLine is one line of a batch output or error file. The SDK has no
// type for it, so only the fields used here are read.
type openaiLine struct {
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int `json:"status_code"`
		Body       struct {
			ID      string `json:"id"`
			Model   string `json:"model"`
			Created int64  `json:"created"`
			Choices []struct {
				FinishReason string `json:"finish_reason"`
				Message      struct {
					Content string `json:"content"`
					Refusal string `json:"refusal"`
				} `json:"message"`
			} `json:"choices"`
			Usage struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
			} `json:"usage"`
			Error *openaiErrBody `json:"error"`
		} `json:"body"`
	} `json:"response"`
	Error *openaiErrBody `json:"error"`
}

type openaiErrBody struct {
	Code    any    `json:"code"`
	Message string `json:"message"`
}

// findOpenAILine returns the line of ref's request, and reports whether
// the file holds lines of other ids (another run's). Lines that do not
// decode are skipped.
func findOpenAILine(data []byte, ref Ref) (line openaiLine, found, others bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), maxResultFile)
	for sc.Scan() {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var l openaiLine
		if json.Unmarshal(raw, &l) != nil {
			continue
		}
		if ref.Matches(l.CustomID) {
			return l, true, others
		}
		others = true
	}
	return openaiLine{}, false, others
}

// openaiLineOutcome maps a result line: a 2xx response is the answer, any
// other response or an error is the request's failure.
func openaiLineOutcome(status string, ref Ref, l openaiLine) Outcome {
	if r := l.Response; r != nil && r.StatusCode >= 200 && r.StatusCode < 300 && len(r.Body.Choices) > 0 {
		ch := r.Body.Choices[0]
		text := ch.Message.Content
		if text == "" && ch.Message.Refusal != "" {
			text = ch.Message.Refusal
		}
		var at time.Time
		if r.Body.Created > 0 {
			at = time.Unix(r.Body.Created, 0)
		}
		return succeeded(status, ref.CLI, respFor(ref, r.Body.Model, r.Body.ID, text, ch.FinishReason,
			r.Body.Usage.PromptTokens, r.Body.Usage.CompletionTokens, at))
	}
	msg := ""
	switch {
	case l.Response != nil && l.Response.Body.Error != nil:
		msg = l.Response.Body.Error.Message
	case l.Error != nil:
		msg = l.Error.Message
	}
	if msg == "" {
		code := 0
		if l.Response != nil {
			code = l.Response.StatusCode
		}
		msg = fmt.Sprintf("request failed (status %d)", code)
	}
	out := respFor(ref, "", "", "", "", 0, 0, time.Time{})
	out.ErrorMessage = "openai: " + msg
	return failedRequest(status, ref.CLI, out)
}
