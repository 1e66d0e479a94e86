package translate

import (
	"bytes"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The expected values below are AWS's published Signature Version 4 test
// suite (the "aws-sig-v4-test-suite" of the AWS General Reference, also
// shipped as awslabs/aws-c-auth tests/aws-signing-test-suite) and
// botocore's tests/unit/auth/aws4_testsuite. They are copied from those
// files, not produced by this code.

const (
	sigV4SuiteAccessKey = "AKIDEXAMPLE"
	sigV4SuiteSecretKey = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	sigV4SuiteToken     = "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="
	sigV4EmptySHA256    = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// sigV4SuiteTime is 20150830T123600Z, the date of the 2015 test suite.
var sigV4SuiteTime = time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)

func TestSignV4PublishedSuite(t *testing.T) {
	cases := []struct {
		name        string
		method, url string
		contentType string
		body        string
		token       string
		// From the suite's .creq, .sts (last line) and .authz files;
		// empty when the suite case is only checked by its .authz.
		creq, stsHash string
		authz         string
	}{
		{
			name: "get-vanilla", method: "GET", url: "https://example.amazonaws.com/",
			creq: "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n" + sigV4EmptySHA256,
			authz: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, " +
				"SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
		},
		{
			name: "get-vanilla-query-order-key-case", method: "GET", url: "https://example.amazonaws.com/?Param2=value2&Param1=value1",
			creq: "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n" + sigV4EmptySHA256,
			authz: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, " +
				"SignedHeaders=host;x-amz-date, Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
		},
		{
			name: "post-vanilla", method: "POST", url: "https://example.amazonaws.com/",
			authz: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, " +
				"SignedHeaders=host;x-amz-date, Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
		},
		{
			name: "post-x-www-form-urlencoded", method: "POST", url: "https://example.amazonaws.com/",
			contentType: "application/x-www-form-urlencoded", body: "Param1=value1",
			creq: "POST\n/\n\ncontent-type:application/x-www-form-urlencoded\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n" +
				"content-type;host;x-amz-date\n9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
			stsHash: "42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281",
			authz: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, " +
				"SignedHeaders=content-type;host;x-amz-date, Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
		},
		{
			name: "post-sts-token/post-sts-header-before", method: "POST", url: "https://example.amazonaws.com/",
			token:   sigV4SuiteToken,
			stsHash: "c237e1b440d4c63c32ca95b5b99481081cb7b13c7e40434868e71567c1a882f6",
			authz: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, " +
				"SignedHeaders=host;x-amz-date;x-amz-security-token, Signature=85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			req, err := http.NewRequest(tc.method, tc.url, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			// A zone other than UTC: the signer must convert.
			now := sigV4SuiteTime.In(time.FixedZone("UTC+5", 5*3600))
			SignV4(req, body, sigV4SuiteAccessKey, sigV4SuiteSecretKey, tc.token, "us-east-1", "service", now)

			if got := req.Header.Get("Authorization"); got != tc.authz {
				t.Errorf("Authorization\n got %s\nwant %s", got, tc.authz)
			}
			if got := req.Header.Get("X-Amz-Date"); got != "20150830T123600Z" {
				t.Errorf("X-Amz-Date = %q", got)
			}
			if got := req.Header.Get("X-Amz-Security-Token"); got != tc.token {
				t.Errorf("X-Amz-Security-Token = %q, want %q", got, tc.token)
			}

			// The intermediate products, where the suite publishes them.
			names := []string{"host", "x-amz-date"}
			if tc.contentType != "" {
				names = append(names, "content-type")
			}
			if tc.token != "" {
				names = append(names, "x-amz-security-token")
			}
			payload := sigV4EmptySHA256
			if tc.body != "" {
				payload = "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e"
			}
			p := sigV4Compute(req, payload, names, sigV4SuiteSecretKey, "us-east-1", "service", "20150830T123600Z")
			if tc.creq != "" && p.canonicalRequest != tc.creq {
				t.Errorf("canonical request\n got %q\nwant %q", p.canonicalRequest, tc.creq)
			}
			if tc.stsHash != "" {
				want := "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n" + tc.stsHash
				if p.stringToSign != want {
					t.Errorf("string to sign\n got %q\nwant %q", p.stringToSign, want)
				}
			}
		})
	}
}

// botocore's suite signs paths that are already percent-encoded and
// expects them encoded a second time — the rule for every service but
// S3, and the one that makes Bedrock model ids with ':' work. These cases
// sign the Date header rather than X-Amz-Date, so they drive the signing
// core directly.
func TestSigV4DoubleEncodesPathsLikeBotocore(t *testing.T) {
	cases := []struct {
		name, url          string
		creq, stsHash, sig string
	}{
		{
			name: "get-utf8", url: "http://host.foo.com/%E1%88%B4",
			creq:    "GET\n/%25E1%2588%25B4\n\ndate:Mon, 09 Sep 2011 23:36:00 GMT\nhost:host.foo.com\n\ndate;host\n" + sigV4EmptySHA256,
			stsHash: "47f4456c465167f4db3490a68903fe057412e6e030de38f71d9006467eb4922a",
			sig:     "57b1eb3df3b16a8479c0097b66c0b261cfd65b829419a3f2c3d05319722490b8",
		},
		{
			name: "get-space", url: "http://host.foo.com/%20/foo",
			creq:    "GET\n/%2520/foo\n\ndate:Mon, 09 Sep 2011 23:36:00 GMT\nhost:host.foo.com\n\ndate;host\n" + sigV4EmptySHA256,
			stsHash: "35975885599128f8963ce9be7219598b2b5a344321bae304529556c891e9e6ba",
			sig:     "2be9e587d1ee1f0fd02128724b86b4358ba3630d39f493b6e06610a19a50779e",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Date", "Mon, 09 Sep 2011 23:36:00 GMT")
			p := sigV4Compute(req, sigV4EmptySHA256, []string{"host", "date"}, sigV4SuiteSecretKey, "us-east-1", "host", "20110909T233600Z")
			if p.canonicalRequest != tc.creq {
				t.Errorf("canonical request\n got %q\nwant %q", p.canonicalRequest, tc.creq)
			}
			if want := "AWS4-HMAC-SHA256\n20110909T233600Z\n20110909/us-east-1/host/aws4_request\n" + tc.stsHash; p.stringToSign != want {
				t.Errorf("string to sign\n got %q\nwant %q", p.stringToSign, want)
			}
			if p.signature != tc.sig {
				t.Errorf("signature %s, want %s", p.signature, tc.sig)
			}
			if p.signedHeaders != "date;host" {
				t.Errorf("signed headers %q", p.signedHeaders)
			}
		})
	}
}

// The signing-key derivation example of the AWS General Reference
// ("Examples of how to derive a signing key for Signature Version 4").
func TestSigV4SigningKeyPublishedExample(t *testing.T) {
	got := hex.EncodeToString(sigV4SigningKey(sigV4SuiteSecretKey, "20120215", "us-east-1", "iam"))
	if want := "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"; got != want {
		t.Fatalf("signing key %s, want %s", got, want)
	}
}

func TestSigV4BedrockModelPath(t *testing.T) {
	model := "anthropic.claude-3-5-sonnet-20240620-v1:0"
	u := "https://bedrock-runtime.us-east-1.amazonaws.com/model/" + sigV4Escape(model, false) + "/converse"
	req, err := http.NewRequest("POST", u, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if got := req.URL.EscapedPath(); got != "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse" {
		t.Fatalf("wire path %q", got)
	}
	p := sigV4Compute(req, sigV4EmptySHA256, []string{"host", "x-amz-date", "content-type"}, sigV4SuiteSecretKey, "us-east-1", "bedrock", "20150830T123600Z")
	if line := strings.Split(p.canonicalRequest, "\n")[1]; line != "/model/anthropic.claude-3-5-sonnet-20240620-v1%253A0/converse" {
		t.Errorf("canonical URI %q, want the colon encoded twice", line)
	}

	// An inference-profile ARN is one path segment: its '/' and ':' are
	// escaped on the wire.
	arn := "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-haiku-20240307-v1:0"
	if got, want := sigV4Escape(arn, false), "arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-3-haiku-20240307-v1%3A0"; got != want {
		t.Errorf("escaped ARN %q, want %q", got, want)
	}
}

func TestSigV4CanonicalQueryAndHeaders(t *testing.T) {
	if got, want := sigV4CanonicalQuery("b=2&a=x%20y&a=1&c&d=%7E~!"), "a=1&a=x%20y&b=2&c=&d=~~%21"; got != want {
		t.Errorf("canonical query %q, want %q", got, want)
	}
	req, _ := http.NewRequest("GET", "https://example.amazonaws.com/", nil)
	req.Header.Add("My-Header", "  a   b  ")
	req.Header.Add("My-Header", "c")
	if got := sigV4HeaderValue(req, "my-header"); got != "a b,c" {
		t.Errorf("header value %q", got)
	}
	// A stale token from an earlier signing is removed when none is given.
	req.Header.Set("X-Amz-Security-Token", "old")
	SignV4(req, nil, sigV4SuiteAccessKey, sigV4SuiteSecretKey, "", "us-east-1", "service", sigV4SuiteTime)
	if req.Header.Get("X-Amz-Security-Token") != "" {
		t.Error("stale session token kept")
	}
	if !strings.Contains(req.Header.Get("Authorization"), "SignedHeaders=host;x-amz-date,") {
		t.Errorf("Authorization %q", req.Header.Get("Authorization"))
	}
}
