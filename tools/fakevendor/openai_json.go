package fakevendor

import "strings"

// openaiStatus maps the shared lifecycle to the Batch status; callers
// hold s.mu.
func (s *Server) openaiStatus(b *openaiBatch) string {
	switch {
	case len(b.invalid) > 0:
		return "failed"
	case !b.life.ended && b.life.canceled:
		return "cancelling"
	case !b.life.ended && b.life.polls == 0:
		return "validating"
	case !b.life.ended:
		return "in_progress"
	}
	return [...]string{endSucceeded: "completed", endCanceled: "cancelled", endExpired: "expired", endFailed: "failed"}[b.life.ending()]
}

// openaiJSON renders a Batch object; callers hold s.mu.
func (s *Server) openaiJSON(b *openaiBatch) map[string]any {
	status := s.openaiStatus(b)
	created := b.life.created.Unix()
	out := map[string]any{
		"id": b.id, "object": "batch", "endpoint": b.endpoint, "input_file_id": b.inputFile,
		"completion_window": "24h", "status": status, "created_at": created,
		"expires_at": created + 24*3600, "metadata": b.metadata,
		"output_file_id": nil, "error_file_id": nil, "errors": nil,
	}
	if len(b.lines) > 0 {
		out["model"] = b.lines[0].model
	}
	if b.life.polls > 0 && len(b.invalid) == 0 {
		out["in_progress_at"] = created
	}
	if b.life.canceled {
		out["cancelling_at"] = b.cancelAt.Unix()
	}
	total, done, failed := len(b.lines), 0, 0
	if b.life.ended {
		end := b.life.endedAt.Unix()
		switch status {
		case "completed":
			out["finalizing_at"], out["completed_at"] = end, end
		case "cancelled":
			out["cancelled_at"] = end
		case "expired":
			out["expired_at"] = end
		case "failed":
			out["failed_at"] = end
		}
		if b.outFile != "" {
			out["output_file_id"] = b.outFile
		}
		if b.errFile != "" {
			out["error_file_id"] = b.errFile
		}
		for _, l := range b.lines {
			switch {
			case status != "completed":
				if status != "failed" {
					failed++
				}
			case strings.Contains(l.prompt, b.life.marker):
				failed++
			default:
				done++
			}
		}
	}
	switch {
	case len(b.invalid) > 0:
		out["errors"] = map[string]any{"object": "list", "data": b.invalid}
	case status == "failed":
		out["errors"] = map[string]any{"object": "list", "data": []any{map[string]any{
			"code": "batch_failed", "message": "fakevendor: batch failure requested", "param": nil, "line": nil}}}
	}
	out["request_counts"] = map[string]any{"total": total, "completed": done, "failed": failed}
	return out
}
