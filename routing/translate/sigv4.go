package translate

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// This file implements AWS Signature Version 4 for request headers, as
// specified in the IAM User Guide ("Create a signed AWS API request") and
// checked against AWS's published test suite (see sigv4_test.go).
//
// Canonical URI: for every service except S3 the canonical URI is the
// URI-encoding of the path as it goes on the wire, which is itself
// already escaped. A Bedrock model id such as "anthropic.claude-v2:1" is
// sent as ".../anthropic.claude-v2%3A1/..." and signed as
// ".../anthropic.claude-v2%253A1/..." — the "double encoding" botocore and
// the other SDKs apply. Paths are not dot-segment normalised; the paths
// this gateway signs never contain "." or ".." segments.

const (
	sigV4Algorithm  = "AWS4-HMAC-SHA256"
	sigV4TimeFormat = "20060102T150405Z"
)

// SignV4 signs req with AWS Signature Version 4 for the given region and
// service at time now. body is the exact request body (nil for none); its
// SHA-256 is the payload hash.
//
// SignV4 sets X-Amz-Date, X-Amz-Security-Token (when sessionToken is not
// empty; removed otherwise) and Authorization. The signed headers are
// host, x-amz-date, content-type when the request has one and
// x-amz-security-token when a session token is given. Headers a proxy may
// rewrite (User-Agent, Accept-Encoding, ...) are deliberately left
// unsigned.
func SignV4(req *http.Request, body []byte, accessKey, secretKey, sessionToken, region, service string, now time.Time) {
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	amzDate := now.UTC().Format(sigV4TimeFormat)
	req.Header.Set("X-Amz-Date", amzDate)
	signed := []string{"host", "x-amz-date"}
	if req.Header.Get("Content-Type") != "" {
		signed = append(signed, "content-type")
	}
	if sessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", sessionToken)
		signed = append(signed, "x-amz-security-token")
	} else {
		req.Header.Del("X-Amz-Security-Token")
	}
	sum := sha256.Sum256(body)
	p := sigV4Compute(req, hex.EncodeToString(sum[:]), signed, secretKey, region, service, amzDate)
	req.Header.Set("Authorization", sigV4Algorithm+" Credential="+accessKey+"/"+p.scope+
		", SignedHeaders="+p.signedHeaders+", Signature="+p.signature)
}

// sigV4Parts are the intermediate products of a signature, kept apart so
// that tests can compare each with the published test suite.
type sigV4Parts struct {
	canonicalRequest string
	signedHeaders    string
	scope            string
	stringToSign     string
	signature        string
}

// sigV4Compute signs req's method, path, query, the named headers (lower
// case; "host" is taken from req.Host or the URL) and payloadHash.
func sigV4Compute(req *http.Request, payloadHash string, headerNames []string, secretKey, region, service, amzDate string) sigV4Parts {
	names := make([]string, len(headerNames))
	for i, n := range headerNames {
		names[i] = strings.ToLower(n)
	}
	sort.Strings(names)

	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	path := req.URL.EscapedPath()
	if path == "" {
		path = "/"
	}

	var cr strings.Builder
	cr.WriteString(method)
	cr.WriteByte('\n')
	cr.WriteString(sigV4Escape(path, true))
	cr.WriteByte('\n')
	cr.WriteString(sigV4CanonicalQuery(req.URL.RawQuery))
	cr.WriteByte('\n')
	for _, n := range names {
		cr.WriteString(n)
		cr.WriteByte(':')
		cr.WriteString(sigV4HeaderValue(req, n))
		cr.WriteByte('\n')
	}
	cr.WriteByte('\n')
	signedHeaders := strings.Join(names, ";")
	cr.WriteString(signedHeaders)
	cr.WriteByte('\n')
	cr.WriteString(payloadHash)
	canonical := cr.String()

	date := amzDate
	if len(date) > 8 {
		date = date[:8]
	}
	scope := date + "/" + region + "/" + service + "/aws4_request"
	crHash := sha256.Sum256([]byte(canonical))
	sts := sigV4Algorithm + "\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(crHash[:])

	key := sigV4SigningKey(secretKey, date, region, service)
	return sigV4Parts{
		canonicalRequest: canonical,
		signedHeaders:    signedHeaders,
		scope:            scope,
		stringToSign:     sts,
		signature:        hex.EncodeToString(sigV4HMAC(key, sts)),
	}
}

// sigV4SigningKey derives the signing key: HMAC chains of the date,
// region, service and "aws4_request", keyed first by "AWS4"+secret.
func sigV4SigningKey(secretKey, date, region, service string) []byte {
	k := sigV4HMAC([]byte("AWS4"+secretKey), date)
	k = sigV4HMAC(k, region)
	k = sigV4HMAC(k, service)
	return sigV4HMAC(k, "aws4_request")
}

func sigV4HMAC(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	_, _ = m.Write([]byte(data))
	return m.Sum(nil)
}

// sigV4HeaderValue returns the canonical value of header name: the
// values trimmed, inner runs of spaces collapsed, joined by commas.
func sigV4HeaderValue(req *http.Request, name string) string {
	if name == "host" {
		h := req.Host
		if h == "" {
			h = req.URL.Host
		}
		return strings.TrimSpace(h)
	}
	vals := req.Header.Values(name)
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = strings.Join(strings.Fields(v), " ")
	}
	return strings.Join(out, ",")
}

// sigV4CanonicalQuery sorts the query parameters by name then value,
// each URI-encoded with only the unreserved characters left bare.
func sigV4CanonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	type pair struct{ k, v string }
	var pairs []pair
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		pairs = append(pairs, pair{sigV4Escape(sigV4Unescape(k), false), sigV4Escape(sigV4Unescape(v), false)})
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].k != pairs[j].k {
			return pairs[i].k < pairs[j].k
		}
		return pairs[i].v < pairs[j].v
	})
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

func sigV4Unescape(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

// sigV4Escape URI-encodes s the way SigV4 requires: every byte except the
// unreserved characters A-Z a-z 0-9 - _ . ~ becomes %XX (upper-case hex);
// '/' is kept when keepSlash is set. It also escapes a Bedrock model id
// into a single URL path segment.
func sigV4Escape(s string, keepSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~', c == '/' && keepSlash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}
