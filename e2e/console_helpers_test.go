package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// browser is a headless Debian Chromium driven through chromedp, with a
// fresh profile, pointed at one node's console.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string // http://host:port of the console
	shots string // where shot saves its screenshots
	errs  chan string
}

// chromiumPath finds Debian's chromium; in CI a missing one fails the test,
// elsewhere it skips.
func chromiumPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		msg := "CHROMIUM IS NOT INSTALLED: the console tests need it (apt-get install chromium, or run .ci/run)"
		fmt.Fprintln(os.Stderr, "!!! "+msg)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// newBrowser starts Chromium headless with the flags this machine needs
// (no background networking: the network is closed) and a 1280×800
// viewport; it is stopped when the test ends.
func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)), chromedp.UserDataDir(t.TempDir()), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 800))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, base: base, shots: screenshotDir(t), errs: make(chan string, 100)}
	b.do(chromedp.EmulateViewport(1280, 800))
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			select {
			case b.errs <- msg:
			default:
			}
		}
	}()
	return b
}

// do runs actions and fails the test on an error.
func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v%s", err, b.pageErrors())
	}
}

// eval evaluates a JavaScript expression and returns its value.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("browser: evaluating %s: %v%s", expr, err, b.pageErrors())
	}
	return v
}

// pageErrors drains the uncaught JavaScript exceptions seen so far.
func (b *browser) pageErrors() string {
	var out []string
	for {
		select {
		case e := <-b.errs:
			out = append(out, e)
		default:
			if len(out) == 0 {
				return ""
			}
			return "\npage exceptions:\n" + strings.Join(out, "\n")
		}
	}
}

// checkNoPageErrors fails the test if the page threw.
func (b *browser) checkNoPageErrors() {
	b.t.Helper()
	if e := b.pageErrors(); e != "" {
		b.t.Errorf("the console threw:%s", e)
	}
}

// open loads the console at a route (a full page load, so every page
// starts from a fresh render) and waits until the page rendered.
func (b *browser) open(route string) {
	b.t.Helper()
	b.do(chromedp.Navigate(fmt.Sprintf("%s/?t=%d#/%s", b.base, time.Now().UnixNano(), route)))
	page, _, _ := strings.Cut(route, "?")
	b.waitJS(fmt.Sprintf(`performance.getEntriesByName("rendered:%s").length > 0`, page), "the "+page+" page to render")
}

// waitJS polls a JavaScript predicate until it is true, for up to 30 s. A
// navigation while it polls (a redirect) ends the poll with an error (see
// navigatedAway): it polls again in the new page.
func (b *browser) waitJS(predicate, what string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for {
		_, err = chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](predicate, chromedp.WithPollingTimeout(max(time.Until(deadline), time.Millisecond))))
		if err == nil || b.ctx.Err() != nil || time.Now().After(deadline) || !navigatedAway(err) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		text := eval[string](b, `document.querySelector("#app")?.innerText?.slice(0, 2000) || ""`)
		b.t.Fatalf("waiting for %s: %v\npage text:\n%s%s", what, err, text, b.pageErrors())
	}
}

// navigatedAway reports whether err is a poll cut short by a navigation:
// the page's execution context went away ("context"), or Chromium says the
// inspected target navigated (-32000), as it does in the middle of a
// redirect chain such as single sign-on's.
func navigatedAway(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "context") || strings.Contains(msg, "navigated") || strings.Contains(msg, "(-32000)")
}

// waitText waits until the element matching css contains text.
func (b *browser) waitText(css, text string) {
	b.t.Helper()
	b.waitJS(fmt.Sprintf(`(document.querySelector(%q)?.innerText || "").includes(%q)`, css, text), fmt.Sprintf("%q in %s", text, css))
}

// text returns the visible text of the first element matching css.
func (b *browser) text(css string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`document.querySelector(%q)?.innerText || ""`, css))
}

// fill types value into the input matching css, replacing what was there.
func (b *browser) fill(css, value string) {
	b.t.Helper()
	b.do(chromedp.WaitVisible(chromedp.CSS(css)))
	b.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).value = ""`, css)))
	b.do(chromedp.SendKeys(chromedp.CSS(css), value))
}

// choose selects the option with value in the select matching css.
func (b *browser) choose(css, value string) {
	b.t.Helper()
	b.do(chromedp.WaitVisible(chromedp.CSS(css)))
	b.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
		`{ const s = document.querySelector(%q); s.value = %q; s.dispatchEvent(new Event("change", {bubbles: true})); }`, css, value)))
}

func (b *browser) click(css string) {
	b.t.Helper()
	b.do(chromedp.WaitVisible(chromedp.CSS(css)), chromedp.Click(chromedp.CSS(css)))
}

// login signs in on the login page with a token.
func (b *browser) login(token string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base + "/"))
	b.fill("#login-token", token)
	b.click("#login-submit")
	b.waitJS(`!!document.querySelector("#header-user")`, "the console after sign-in")
}

// screenshotDir is where the test saves its screenshots: docs/console when
// TOLLGATE_SCREENSHOTS=1 (to refresh the committed ones), else a temporary
// directory, so a normal run leaves the tree as it was.
func screenshotDir(t *testing.T) string {
	if os.Getenv("TOLLGATE_SCREENSHOTS") == "1" {
		return filepath.Join("..", "docs", "console")
	}
	return t.TempDir()
}

// shot saves a PNG screenshot of the viewport as name.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	b.do(chromedp.Evaluate[chromedp.Void](`document.activeElement?.blur(); window.scrollTo(0, 0)`))
	buf, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if len(buf) < 8 || string(buf[1:4]) != "PNG" {
		b.t.Fatalf("screenshot %s is not a PNG", name)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
