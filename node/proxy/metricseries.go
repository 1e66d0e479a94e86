package proxy

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/routing"
)

// A finished request touched up to nine metric children, each found with
// WithLabelValues: label values checked as UTF-8, hashed, and looked up
// under the vector's lock, every time. seriesCache finds them all with one
// lookup by what their labels are made of; each child is still made by
// WithLabelValues (the same object the vector holds, so scrapes and the
// exemplar gate see no difference), once, when a request first observes
// it, so no series appears earlier than it did.

// seriesKey is what every label of a request's metrics derives from.
type seriesKey struct {
	ep         routing.Endpoint
	model, dep string // as recorded: "" becomes "none" in the labels that need it
	status     int
}

// series holds the children of one seriesKey, each made on first use.
type series struct {
	requests, promptTok, complTok, cachedTok, writeTok lazy
	latency, upstream                                  lazy
	gDuration, gInput, gOutput, gTTFT, gTPOT           lazy
}

// lazy is one child of a vector (a counter or a histogram), looked up
// once. The vectors' own types keep the label slice on the stack: through
// an interface or a type parameter it escaped, 8 allocations per request.
type lazy struct {
	once sync.Once
	c    prometheus.Counter
	o    prometheus.Observer
}

func (l *lazy) counter(v *prometheus.CounterVec, labels ...string) prometheus.Counter {
	l.once.Do(func() { l.c = v.WithLabelValues(labels...) })
	return l.c
}

func (l *lazy) observer(v *prometheus.HistogramVec, labels ...string) prometheus.Observer {
	l.once.Do(func() { l.o = v.WithLabelValues(labels...) })
	return l.o
}

// maxCachedSeries bounds the cache: past it, it forgets every entry and
// starts again (routes and deployments renamed or removed do not pile up).
// The metric vectors themselves are bounded by the configured routes.
const maxCachedSeries = 4096

type seriesCache struct {
	m sync.Map // seriesKey -> *series
	n atomic.Int64
}

func (c *seriesCache) get(k seriesKey) *series {
	if s, ok := c.m.Load(k); ok {
		return s.(*series)
	}
	if c.n.Add(1) > maxCachedSeries {
		c.m.Clear()
		c.n.Store(1)
	}
	s, loaded := c.m.LoadOrStore(k, new(series))
	if loaded {
		c.n.Add(-1)
	}
	return s.(*series)
}
