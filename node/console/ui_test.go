package console

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/raftstore"
)

// headlessChromium starts Debian's Chromium headless with a fresh profile
// and returns its tab, closed when the test ends. Without Chromium the
// test is skipped (failed in CI).
func headlessChromium(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed: the console UI tests need it")
		}
		t.Skip("chromium is not installed")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-background-networking", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	return ctx
}

// signInAndOut signs in on the login page with token, clicks Sign out and
// returns what the login page then says in its notice.
func signInAndOut(t *testing.T, ctx context.Context, base, token string) string {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#login-token")),
		chromedp.SendKeys(chromedp.CSS("#login-token"), token), chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#sign-out")), chromedp.Click(chromedp.CSS("#sign-out")),
		chromedp.WaitVisible(chromedp.CSS("#login-token"))); err != nil {
		t.Fatalf("sign in and out: %v", err)
	}
	// The login page is shown once the sign-out answered, with the notice.
	notice, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#login-notice")?.innerText ?? "no notice element"`))
	if err != nil {
		t.Fatalf("reading the login page's notice: %v", err)
	}
	return notice
}

// A sign-out some node had not applied yet, or one the cluster could not
// record, tells the user so on the login page, in the API's own words
// (the console showed nothing, as for a complete sign-out); a complete
// sign-out says nothing.
func TestSignOutShowsTheAPIsMessageWhenItIsNotInForceEverywhere(t *testing.T) {
	ctx := headlessChromium(t)
	lagging := startEnv(t, func(_ string, c *Config) { c.Admin = laggingAdmin{c.Admin} })
	notice := signInAndOut(t, ctx, lagging.url, lagging.tokens[raftstore.RoleOperator])
	if !strings.Contains(notice, "n3 had not applied it yet") || !strings.Contains(notice, "a copy of the cookie still opens there") {
		t.Fatalf("the login page after a sign-out n3 had not applied says %q", notice)
	}

	e := startEnv(t, nil)
	if notice = signInAndOut(t, ctx, e.url, e.tokens[raftstore.RoleOperator]); notice != "" {
		t.Fatalf("the login page after a sign-out in force everywhere says %q", notice)
	}
	e.store.SetProposeGate(func(cmd string) error {
		if cmd == "end_console_session" {
			return errors.New("node n2 does not support it yet")
		}
		return nil
	})
	t.Cleanup(func() { e.store.SetProposeGate(nil) })
	notice = signInAndOut(t, ctx, e.url, e.tokens[raftstore.RoleOperator])
	if !strings.Contains(notice, "could not be ended on the server") || !strings.Contains(notice, "does not support") {
		t.Fatalf("the login page after a sign-out the cluster could not record says %q", notice)
	}
}
