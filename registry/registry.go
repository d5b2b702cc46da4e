package registry

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/observe"
)

// Registry holds one [Client] per declared system. It is built once and
// never changes, so looking a client up takes no lock. A Registry is safe
// for concurrent use.
type Registry struct {
	clients map[string]*Client
	names   []string // declaration order
	closed  atomic.Bool
	opts    *options

	settings *settingsFile // OUTBOUND_CONFIG_FILE's watch; nil: none
	stopOnce sync.Once
}

// FromEnv declares the given systems plus those in OUTBOUND_SYSTEMS, loads
// and validates their settings from the environment, and builds one client
// per system. Any problem, of any field of any system, is reported in one
// error that matches config.ErrInvalid and lists them all (errors.As with
// *config.Error). Declaring no system at all is one of them: config.Load
// reports it, naming the <SYSTEM>_BASE_URL variables it found.
func FromEnv(systems ...config.System) (*Registry, error) {
	return FromEnvWith(systems)
}

// FromEnvWith is [FromEnv] with options given in code (observers, a
// logger, a transport wrapper).
//
// With OUTBOUND_CONFIG_FILE set, the file's variables are read over the
// environment, and the file is watched while the registry is open: a
// valid change applies while the service runs, an invalid one is refused
// whole ([Registry.Reload], [Registry.Settings]; docs/live-settings.md).
func FromEnvWith(systems []config.System, opts ...Option) (*Registry, error) {
	env := processEnv()
	if path := env[config.FileVar]; path != "" {
		return fromEnvWithFile(path, env, systems, opts)
	}
	loaded, err := config.LoadEnv(env, systems...)
	if err != nil {
		return nil, err
	}
	return New(loaded, opts...)
}

// New builds a registry from systems already loaded and validated by
// config.Load. A system that config.Load reported a problem for, or a
// config.Loaded built by hand, is refused ([config.Loaded.Valid]). With
// no system (config.Load refuses that), the registry is empty and every
// lookup fails with [ErrUnknownSystem].
func New(loaded []config.Loaded, opts ...Option) (*Registry, error) {
	var o options
	for _, opt := range opts {
		opt.apply(&o)
	}
	if o.logger != nil {
		o.observers = append(o.observers, newLogObserver(o.logger))
		for _, w := range config.Warnings(loaded) {
			o.logger.Warn("outbound config warning", "outbound.system", w.System, "outbound.warning", w.Error())
		}
	}
	r := &Registry{clients: make(map[string]*Client, len(loaded)), names: make([]string, 0, len(loaded)), opts: &o}
	var errs []error
	for _, l := range loaded {
		if !l.Valid() {
			errs = append(errs, fmt.Errorf("outbound %s: settings not validated: build them with config.Load and fix every problem it reports", l.Name))
			continue
		}
		if _, dup := r.clients[l.Name]; dup {
			errs = append(errs, fmt.Errorf("outbound %s: system declared twice", l.Name))
			continue
		}
		c, err := newClient(l, &o, &r.closed)
		if err != nil {
			errs = append(errs, fmt.Errorf("outbound %s: %w", l.Name, err))
			continue
		}
		r.clients[l.Name] = c
		r.names = append(r.names, l.Name)
	}
	if len(errs) > 0 {
		r.Close()
		return nil, errors.Join(errs...)
	}
	each(o.observers, func(w observe.StatusWatcher) { w.WatchStatus(r.Status) })
	return r, nil
}

// Client returns the client of the named system, or an error matching
// [ErrUnknownSystem] that lists the known names.
func (r *Registry) Client(name string) (*Client, error) {
	if c, ok := r.clients[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownSystem, name, strings.Join(r.names, ", "))
}

// MustClient is [Registry.Client] for wiring code that runs once at start:
// it panics on an unknown name.
func (r *Registry) MustClient(name string) *Client {
	c, err := r.Client(name)
	if err != nil {
		panic(err)
	}
	return c
}

// Names returns the systems' names in declaration order.
func (r *Registry) Names() []string {
	return append([]string(nil), r.names...)
}

// Close closes every client's idle connections. Calls made after Close
// fail at once with an error matching [ErrClosed]; calls in flight finish.
// Close is idempotent and always returns nil.
func (r *Registry) Close() error {
	r.closed.Store(true)
	r.stopSettings()
	for _, c := range r.clients {
		c.closeIdle()
	}
	return nil
}
