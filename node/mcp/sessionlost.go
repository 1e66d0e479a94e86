package mcp

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// An upstream that restarted, or evicted the gateway's session, answers
// the session's requests with 404 (as the specification says) or, from
// some servers, 400, with or without a JSON-RPC error body. Either way the
// server refused the request before it reached a tool, so the call can go
// again, once, on a new session: a 404 says so at once (refusalTransport
// answers it sessionLostError), any other refusal of a request in a
// session is followed by a ping, and a refused ping says the same.

// codeSessionLost is the code of the error refusalTransport answers a
// request of a session with when the upstream answered it 404.
const codeSessionLost = -32012

func sessionLostError(server string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: codeSessionLost,
		Message: fmt.Sprintf("MCP server %s no longer knows the gateway's session (HTTP 404 Not Found).", server)}
}

// refusalCode returns codeUpstreamRefused or codeSessionLost if err is
// such a refusal, else 0.
func refusalCode(err error) int64 {
	for _, code := range []int64{codeUpstreamRefused, codeSessionLost} {
		if isCode(err, code) {
			return code
		}
	}
	return 0
}

// pingCheck is one ping of a session after a refusal, shared by the calls
// refused meanwhile.
type pingCheck struct {
	sess    *sdk.ClientSession
	done    chan struct{}
	refused bool // the server refused the ping at the HTTP level too
}

// recover is called after the upstream refused a request on sess (lost:
// with a 404, which says the server forgot the session). It returns the
// session to send the request again on, or nil when the refusal was the
// request's own (the ping went through), the server is failing (the ping
// failed otherwise: sess is failed and cooled) or no new session could be
// opened. A sessionless upstream has no session to lose, and its protocol
// has no ping.
func (u *upstream) recover(ctx context.Context, sess *sdk.ClientSession, lost bool) *sdk.ClientSession {
	if r := sess.InitializeResult(); r == nil || r.ProtocolVersion >= statelessVersion {
		return nil
	}
	if !lost && !u.pingRefused(ctx, sess) {
		return nil
	}
	return u.reopen(ctx, sess)
}

// pingRefused pings sess (one ping at a time per session, its answer
// shared) and reports whether the upstream refused it at the HTTP level.
// A ping that fails otherwise fails sess.
func (u *upstream) pingRefused(ctx context.Context, sess *sdk.ClientSession) bool {
	u.mu.Lock()
	p := u.ping
	if p == nil || p.sess != sess {
		p = &pingCheck{sess: sess, done: make(chan struct{})}
		u.ping = p
		go func() {
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), u.g.cfg.ConnectTimeout)
			err := sess.Ping(pctx, nil)
			cancel()
			p.refused = refusalCode(err) != 0
			if err != nil && !p.refused {
				u.fail(sess, "ping after a refused request: "+err.Error())
			}
			u.mu.Lock()
			if u.ping == p {
				u.ping = nil
			}
			u.mu.Unlock()
			close(p.done)
		}()
	}
	u.mu.Unlock()
	select {
	case <-p.done:
		return p.refused
	case <-ctx.Done():
		return false
	}
}

// reopen replaces old, a session the server lost, with a new one at once
// (no cooldown: the server answers) and returns it, or nil if it could
// not be opened (the upstream then cools down as after any failed dial).
// Calls that find old lost meanwhile wait for the same new session. A
// server that lost the new session too before it answered a request on it
// (within a cooldown) cannot keep one (a balancer that is not sticky):
// old is failed and cools instead, or every call would cost a dial.
func (u *upstream) reopen(ctx context.Context, old *sdk.ClientSession) *sdk.ClientSession {
	u.mu.Lock()
	if u.sess == old && !u.closed {
		now := u.g.now()
		if u.fresh.Load() == old && now.Sub(u.reopenedAt) < u.g.cfg.Cooldown {
			u.mu.Unlock()
			u.fail(old, "lost its new session before answering on it")
			return nil
		}
		u.sess, u.state, u.dialing, u.reopenedAt = nil, stateConnecting, true, now
		done, stop, runCtx := make(chan struct{}), u.stop, u.runCtx
		u.reopened = done
		u.g.log.Info("mcp upstream lost its session; opening a new one", "server", u.name)
		go func() {
			go func() { _ = old.Close(); stop() }()
			u.connect(runCtx)
			u.mu.Lock()
			u.fresh.Store(u.sess) // before done: the calls waiting use it after
			u.mu.Unlock()
			close(done)
		}()
	}
	u.mu.Unlock()
	if sess, _ := u.sessionAfterReopen(ctx); sess != old {
		return sess
	}
	return nil
}

// isCode reports whether err carries a JSON-RPC error with code.
func isCode(err error, code int64) bool {
	var w *jsonrpc.Error
	return errors.As(err, &w) && w.Code == code
}

// sessionAfterReopen is session, after waiting for a reopen under way.
func (u *upstream) sessionAfterReopen(ctx context.Context) (*sdk.ClientSession, string) {
	u.mu.Lock()
	done := u.reopened
	u.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	return u.session()
}

// answered notes that sess answered a request: a session the upstream
// then loses is reopened at once again.
func (u *upstream) answered(sess *sdk.ClientSession) {
	if u.fresh.Load() == sess {
		u.fresh.CompareAndSwap(sess, nil)
	}
}
