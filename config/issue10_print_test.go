package config_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"testing"

	"github.com/outbound-go/outbound/config"
)

// TestIssue10GoStringLoaded: %#v of a config.Loaded printed the raw
// BASE_URL with its password, because Loaded had no GoString (issue #10,
// item 7). Every exported type that holds settings is printed here with
// %v, %+v, %#v, slog (text and JSON) and encoding/json.
func TestIssue10GoStringLoaded(t *testing.T) {
	const base = "https://alice:pa55w0rd@payments.internal/v1?jwt=eyJhbGciOi"
	secrets := []string{"pa55w0rd", "alice", "eyJhbGciOi"}
	ls, err := config.LoadEnv(map[string]string{
		"PAYMENTS_BASE_URL":     base,
		"PAYMENTS_READ_TIMEOUT": "0",
	}, config.System{Name: "payments"})
	if err == nil {
		t.Fatal("no error")
	}
	key, err2 := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err2 != nil {
		t.Fatal(err2)
	}
	kb, err2 := key.Bytes()
	if err2 != nil {
		t.Fatal(err2)
	}
	d := new(big.Int).SetBytes(kb) // how %v prints the private scalar
	secrets = append(secrets, d.String(), d.Text(16))
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		t.Fatalf("err is %T", err)
	}
	values := map[string]any{
		"Client":   ls[0].Client,
		"*Client":  &ls[0].Client,
		"Loaded":   ls[0],
		"[]Loaded": ls,
		"System":   config.System{Name: "payments", Defaults: config.Client{BaseURL: base}},
		"Problem":  cerr.Problems[0],
		"*Error":   cerr,
		"[]Var":    ls[0].Vars(),
		"TLSFiles": config.TLSFiles{CAPEM: []byte("ca"), Cert: &tls.Certificate{PrivateKey: key}},
	}
	for name, v := range values {
		outs := map[string]string{
			"%v":  fmt.Sprintf("%v", v),
			"%+v": fmt.Sprintf("%+v", v),
			"%#v": fmt.Sprintf("%#v", v),
		}
		for _, h := range []struct {
			name string
			new  func(*bytes.Buffer) slog.Handler
		}{
			{"slog text", func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) }},
			{"slog json", func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) }},
		} {
			var buf bytes.Buffer
			slog.New(h.new(&buf)).Info("x", "v", v)
			outs[h.name] = buf.String()
		}
		js, err := json.Marshal(v)
		if err != nil {
			t.Errorf("%s: json.Marshal: %v", name, err)
		}
		outs["json"] = string(js)
		for how, s := range outs {
			assertNoSecrets(t, name+" "+how, s, secrets...)
		}
	}
}
