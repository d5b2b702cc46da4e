package registry_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/outbound-go/outbound/config"
	"github.com/outbound-go/outbound/registry"
)

// TestFromEnvRefusesAnEnvironmentWithoutSystems: with OUTBOUND_SYSTEMS
// unset and no system declared in code, FromEnv returned an empty
// registry and no error, and the quick start then called Do on a nil
// client. It is a configuration error now, naming the BASE_URL it found.
func TestFromEnvRefusesAnEnvironmentWithoutSystems(t *testing.T) {
	t.Setenv(config.SystemsVar, "")
	t.Setenv("INVENTORY_BASE_URL", "http://127.0.0.1:1")
	reg, err := registry.FromEnv()
	if reg != nil {
		reg.Close()
	}
	if !errors.Is(err, config.ErrInvalid) || reg != nil {
		t.Fatalf("FromEnv() = %v, %v; want nil and an error matching config.ErrInvalid", reg, err)
	}
	if !strings.Contains(err.Error(), "no system declared") || !strings.Contains(err.Error(), "INVENTORY_BASE_URL") {
		t.Errorf("err = %v, want it to say no system is declared and name INVENTORY_BASE_URL", err)
	}
}
