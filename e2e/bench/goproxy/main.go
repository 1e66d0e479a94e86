// Command goproxy is the harness's reference Go hop: the 20-line reverse
// proxy anyone would write with net/http/httputil, tuned only so that it
// keeps a connection per client and does not break streams.
package main

import (
	"flag"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	upstream := flag.String("upstream", "", "upstream base URL, e.g. http://127.0.0.1:4000")
	flag.Parse()
	u, err := url.Parse(*upstream)
	if err != nil || u.Host == "" {
		log.Fatalf("goproxy: -upstream %q is not a URL", *upstream)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 4096, DisableCompression: true}
	log.Fatal(http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex() // else Go 1.26 breaks some streams mid-way
		rp.ServeHTTP(w, r)
	})))
}
