package otel

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/outbound-go/outbound/observe"
)

// The spans' routes. The registry tells its observers which declared
// route (<P>_ROUTES) a call ran on in its events, which the metrics
// read; a span must name it before the call ends, and the events come
// too late for that. So the spans match a request to the routes
// themselves, as the registry does (docs/routes.md): with net/http's
// ServeMux, which the routes are declared in, against the method and the
// absolute path the request is sent with, a relative path joined to
// BASE_URL's. The routes are read from the registry's Status when it is
// built and again at each collection of the metrics, so a live change of
// the routes reaches the spans at the next collection.

// routeDecl is one declared route, as Status lists it.
type routeDecl struct{ name, match string }

// routeInfo is what the spans of a call on a declared route carry: its
// name (outbound.route) and the path of its pattern (url.template). It
// is the ServeMux handler of its pattern, never served.
type routeInfo struct{ name, template string }

func (*routeInfo) ServeHTTP(http.ResponseWriter, *http.Request) {}

// routeTable is a system's declared routes, as its spans match them.
type routeTable struct {
	decl []routeDecl
	base url.URL // BASE_URL, whose path a relative request path is joined to
	mux  *http.ServeMux
}

// newRouteTable returns the table of decl under base; nil without any
// route. A pattern ServeMux refuses (config checked them with ServeMux
// already) is left out.
func newRouteTable(base *url.URL, decl []routeDecl) *routeTable {
	if len(decl) == 0 {
		return nil
	}
	t := &routeTable{decl: decl, mux: http.NewServeMux()}
	if base != nil {
		t.base = *base
	}
	for _, d := range decl {
		template := d.match
		if i := strings.IndexAny(template, " \t"); i >= 0 {
			template = strings.TrimLeft(template[i:], " \t")
		}
		func() {
			defer func() { _ = recover() }() // Handle panics on a pattern it refuses
			t.mux.Handle(d.match, &routeInfo{name: d.name, template: template})
		}()
	}
	return t
}

// match returns the route req is sent on, or nil.
func (t *routeTable) match(req *http.Request) *routeInfo {
	if t == nil || req.URL == nil {
		return nil
	}
	m := http.Request{Method: req.Method, URL: req.URL}
	if m.Method == "" {
		m.Method = http.MethodGet
	}
	if req.URL.Host == "" {
		m.URL = t.resolve(req.URL)
	}
	h, _ := t.mux.Handler(&m)
	ri, _ := h.(*routeInfo)
	return ri
}

// resolve joins a relative request URL's path to BASE_URL's, as the
// registry sends it.
func (t *routeTable) resolve(rel *url.URL) *url.URL {
	u := url.URL{Path: strings.TrimSuffix(t.base.Path, "/") + "/" + strings.TrimPrefix(rel.Path, "/")}
	if rel.RawPath != "" || t.base.RawPath != "" {
		u.RawPath = strings.TrimSuffix(t.base.EscapedPath(), "/") + "/" + strings.TrimPrefix(rel.EscapedPath(), "/")
	}
	return &u
}

// learnStatus reads what the system's attributes depend on from its
// Status: BASE_URL's server (fixed at start; redacted in Status, but its
// host and port are no secret), and the declared routes whenever they
// changed.
func (s *system) learnStatus(st *observe.Status) {
	o := s.origin.Load()
	if o == nil || o.base == nil {
		for _, v := range st.Config {
			if base, err := url.Parse(v.Value); v.Setting == "BaseURL" && err == nil && base.Host != "" {
				o = newOrigin(base.Scheme, base.Host, base)
				s.origin.Store(o)
			}
		}
	}
	decl := make([]routeDecl, len(st.Routes))
	for i, r := range st.Routes {
		decl[i] = routeDecl{r.Name, r.Match}
	}
	if cur := s.routes.Load(); (cur == nil && len(decl) == 0) || (cur != nil && slices.Equal(cur.decl, decl)) {
		return
	}
	var base *url.URL
	if o != nil {
		base = o.base
	}
	s.routes.Store(newRouteTable(base, decl))
}
