//go:build linux

package otlp

import (
	"context"
	"errors"
	"fmt"
)

// Outcome is what became of a profile.
type Outcome struct {
	Sent    bool   // the collector took it
	Spooled string // else the spool file it is kept in
	Reason  error  // why it was not sent (when spooled)
	Flushed int    // profiles from the spool delivered on the way
}

// Deliver sends body to the collector, and the spool's profiles first
// (one attempt each; a collector that does not take the first is not
// asked for the rest until this one is through). body is retried until
// ctx's deadline; if the collector still has not taken it, it goes to the
// spool (when there is one). A profile the collector rejects as bad is
// not kept. The error says why the profile is neither sent nor spooled.
func Deliver(ctx context.Context, s *Sender, sp *Spool, body []byte) (Outcome, error) {
	var out Outcome
	var flushErr error
	if sp != nil {
		out.Flushed, flushErr = sp.Flush(ctx, s.Once)
	}
	err := s.Send(ctx, body)
	if err == nil {
		out.Sent = true
		if sp != nil && flushErr != nil {
			// The collector was back by the time this one went: the
			// rest of the spool can follow.
			n, _ := sp.Flush(ctx, s.Once)
			out.Flushed += n
		}
		return out, nil
	}
	var e *Error
	if errors.As(err, &e) && e.Kind == Rejected {
		return out, fmt.Errorf("%v; the profile is not kept: the collector would reject it again", err)
	}
	if sp == nil {
		return out, fmt.Errorf("%v; give --spool DIR to keep profiles until the collector takes them", err)
	}
	path, perr := sp.Put(body)
	if perr != nil {
		return out, fmt.Errorf("%v; and it could not be spooled: %v", err, perr)
	}
	out.Spooled, out.Reason = path, err
	return out, nil
}
