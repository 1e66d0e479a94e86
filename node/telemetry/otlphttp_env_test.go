package telemetry

import (
	"strings"
	"testing"
)

// An endpoint that does not parse is reported (the node logs it) without
// the endpoint itself: its user info may be a password.
func TestHTTPExporterBadEndpointErrorShowsNoCredentials(t *testing.T) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		for _, ep := range []string{"https://user:s3cret@collector:4318/%zz", "https://user:s3cret@collector:port/"} {
			_, err := httpConfigFrom(mapEnv(map[string]string{name: ep}), nil)
			if err == nil {
				t.Fatalf("%s=%s: no error", name, ep)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s=%s: error %q shows the password", name, ep, err)
			}
		}
	}
}
