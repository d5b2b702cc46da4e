package fleet

import (
	"errors"
	"strconv"
	"strings"

	"github.com/outbound-go/outbound/observe"
)

// A message of the fleet's channel is one of:
//
//	<system> <version> <s> <ms left open>   a state changed (lua/breaker.lua writes it)
//	<system> pause <ms>                     the upstream paused the system
//	<system> force <open|closed|-> <ms>     an operator's override ("-": released)
//	hello <holder>                          a pod proved it may publish (ignored)
//
// Format writes it and parseMessage reads it, wherever the fleet sends or
// receives one; what it reads is input: the numbers' ranges are the
// reader's to check (readState, readPause).
type message struct {
	kind   messageKind
	system string // the system; for hello, the pod's holder name
	ver, s int64  // a state
	ms     int64  // a state's ms left open, a pause, an override's ms left
	force  observe.BreakerState
}

type messageKind uint8

const (
	stateMessage messageKind = iota + 1
	pauseMessage
	forceMessage
	helloMessage
)

// hello starts the message a pod publishes to prove it may publish
// (lua/check.lua).
const hello = "hello"

// released is the word of an override's release.
const released = "-"

// errMessage is the error of a message no pod could have written.
var errMessage = errors.New("fleet: a message of the wrong shape")

// Format is m as published.
func (m message) Format() string {
	n := func(x int64) string { return strconv.FormatInt(x, 10) }
	switch m.kind {
	case pauseMessage:
		return m.system + " pause " + n(m.ms)
	case forceMessage:
		state := string(m.force)
		if state == "" {
			state = released
		}
		return m.system + " force " + state + " " + n(m.ms)
	case helloMessage:
		return hello + " " + m.system
	}
	return m.system + " " + n(m.ver) + " " + n(m.s) + " " + n(m.ms)
}

// parseMessage reads a message of the channel, or fails with errMessage.
func parseMessage(payload string) (message, error) {
	w := strings.Split(payload, " ")
	for _, x := range w {
		if x == "" {
			return message{}, errMessage
		}
	}
	var m message
	var err error
	switch {
	case len(w) == 2 && w[0] == hello:
		return message{kind: helloMessage, system: w[1]}, nil
	case len(w) == 3 && w[1] == "pause":
		m = message{kind: pauseMessage, system: w[0]}
		m.ms, err = strconv.ParseInt(w[2], 10, 64)
	case len(w) == 4 && w[1] == "force":
		m = message{kind: forceMessage, system: w[0], force: observe.BreakerState(w[2])}
		switch w[2] {
		case released:
			m.force = ""
		case string(observe.BreakerOpen), string(observe.BreakerClosed):
		default:
			return message{}, errMessage
		}
		m.ms, err = strconv.ParseInt(w[3], 10, 64)
	case len(w) == 4:
		m = message{kind: stateMessage, system: w[0]}
		var err1, err2 error
		m.ver, err1 = strconv.ParseInt(w[1], 10, 64)
		m.s, err2 = strconv.ParseInt(w[2], 10, 64)
		m.ms, err = strconv.ParseInt(w[3], 10, 64)
		err = errors.Join(err1, err2, err)
	default:
		return message{}, errMessage
	}
	if err != nil || m.system == hello {
		return message{}, errMessage
	}
	return m, nil
}
