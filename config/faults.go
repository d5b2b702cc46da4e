package config

import (
	"math"
	"reflect"
	"strconv"
	"strings"
)

// FaultsVar names the variable that allows fault injection at all:
// OUTBOUND_FAULTS=on. Unset, empty or "off", every fault setting
// (<P>_FAULT_ABORT_RATIO, _FAULT_ABORT_STATUS, _FAULT_DELAY,
// _FAULT_DELAY_RATIO) that is set, in the environment or in code, is a
// problem of [Load], so that a ConfigMap copied from staging to
// production cannot inject faults by accident.
const FaultsVar = "OUTBOUND_FAULTS"

// faultsOff is the rule of a fault setting set while injection is off.
const faultsOff = "fault injection is off: set " + FaultsVar + "=on to allow it"

// faultSettings are the Go names of the fault settings, in field order.
var faultSettings = [...]string{"FaultAbortRatio", "FaultAbortStatus", "FaultDelay", "FaultDelayRatio"}

// faultsVarProblem says what is wrong with OUTBOUND_FAULTS, if anything:
// it is "on", "off" or unset.
func faultsVarProblem(env map[string]string) []Problem {
	v, set := env[FaultsVar]
	if !set || v == "" || v == "on" || v == "off" {
		return nil
	}
	return []Problem{{Var: FaultsVar, Value: v, Source: FromEnv,
		Rule: "must be " + faultsShape}}
}

// faultGuard reports every fault setting of l that is set (by the
// environment or by code, or to a value other than the baseline) while
// OUTBOUND_FAULTS is not on.
func (l *Loaded) faultGuard() []Problem {
	if l.faultsOn {
		return nil
	}
	var probs []Problem
	cv, bv := reflect.ValueOf(l.Client), reflect.ValueOf(Baseline())
	for _, name := range faultSettings {
		f := fields().byGoName[name]
		// Set: by the environment or code, or edited before Revalidate.
		src := l.sources[f.index]
		if src == FromBaseline && !cv.Field(f.index).Equal(bv.Field(f.index)) {
			src = FromCode
		}
		if src != FromBaseline {
			probs = append(probs, Problem{System: l.Name, Var: l.Prefix + "_" + f.suffix,
				Value: l.shown(f), Source: src, Rule: faultsOff})
		}
	}
	return probs
}

// FaultsAllowed reports whether the environment [Load] read allowed
// fault injection (OUTBOUND_FAULTS=on).
func (l Loaded) FaultsAllowed() bool { return l.faultsOn }

// Faults describes, in one line, the faults these settings inject:
// "aborts 10% of attempts with 503; delays 50% of attempts by 2s". It is
// "" when they inject none (both ratios 0, or a delay of 0).
func (c Client) Faults() string {
	var parts []string
	if c.FaultAbortRatio > 0 {
		parts = append(parts, "aborts "+percent(c.FaultAbortRatio)+" of attempts with "+strconv.Itoa(c.FaultAbortStatus))
	}
	if c.FaultDelayRatio > 0 && c.FaultDelay > 0 {
		parts = append(parts, "delays "+percent(c.FaultDelayRatio)+" of attempts by "+formatDuration(c.FaultDelay))
	}
	return strings.Join(parts, "; ")
}

// percent renders a ratio as a percentage: 0.1 is "10%", 0.005 "0.5%".
func percent(r float64) string {
	return strconv.FormatFloat(math.Round(r*1e4)/100, 'f', -1, 64) + "%"
}
