package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strings"
	"time"
)

// fileDoc states, for the reference, what each kind of TLS file (the file
// tag of its field) must be; checkTLSFiles checks it.
var fileDoc = map[string]string{
	"ca":   "readable PEM file with at least one certificate",
	"cert": "readable PEM certificate, valid now",
	"key":  "readable PEM private key of the certificate",
}

// CertExpiryWarning is how close to its expiry (NotAfter) a client
// certificate makes [Loaded.Warnings] warn.
const CertExpiryWarning = 14 * 24 * time.Hour

// maxPEMFile bounds how much of a TLS file is read: a CA bundle is a few
// hundred KiB at most, and a path to something endless (a device, a pipe)
// must not hang Load.
const maxPEMFile = 16 << 20

// Warnings returns what is not wrong yet but soon will be, as of now: a
// client certificate (TLS_CERT_FILE) that expires within
// [CertExpiryWarning]. Warnings never make [Load] fail; `outbound check`
// prints them next to the problems. Files that cannot be read or parsed
// give no warning here: [Load] reports them as problems.
func (l Loaded) Warnings() []Problem {
	_, warns := checkTLSFiles(&l, nil, time.Now())
	return warns
}

// checkTLSFiles checks the TLS files of a loaded system as of now:
// TLS_CA_FILE is a readable file holding at least one PEM certificate, and
// TLS_CERT_FILE and TLS_KEY_FILE are readable, parse as a pair whose key
// matches the certificate, and the certificate is valid at now. Settings
// named in skip (Go field names) did not parse and are not checked. probs
// make Load fail; warns (a certificate close to expiry) do not.
func checkTLSFiles(l *Loaded, skip map[string]bool, now time.Time) (probs, warns []Problem) {
	c := l.Client
	problem := func(suffix, value, rule string) Problem {
		return Problem{System: l.Name, Var: l.Prefix + "_" + suffix, Value: value, Source: l.SourceOf(suffix), Rule: rule}
	}

	if c.TLSCAFile != "" && !skip["TLSCAFile"] {
		if rule := checkCAFile(c.TLSCAFile); rule != "" {
			probs = append(probs, problem("TLS_CA_FILE", c.TLSCAFile, rule))
		}
	}

	var (
		certPEM, keyPEM []byte
		leaf            *x509.Certificate
		certOK, keyOK   bool
	)
	if c.TLSCertFile != "" && !skip["TLSCertFile"] {
		var rule string
		certPEM, leaf, rule = readCertFile(c.TLSCertFile)
		if rule != "" {
			probs = append(probs, problem("TLS_CERT_FILE", c.TLSCertFile, rule))
		} else {
			certOK = true
		}
	}
	if c.TLSKeyFile != "" && !skip["TLSKeyFile"] {
		var rule string
		keyPEM, rule = readKeyFile(c.TLSKeyFile)
		if rule != "" {
			probs = append(probs, problem("TLS_KEY_FILE", c.TLSKeyFile, rule))
		} else {
			keyOK = true
		}
	}
	if certOK && keyOK {
		if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
			probs = append(probs, problem("TLS_KEY_FILE", c.TLSKeyFile, keyPairRule(err, l.Prefix)))
		}
	}
	if certOK {
		switch {
		case now.Before(leaf.NotBefore):
			probs = append(probs, problem("TLS_CERT_FILE", c.TLSCertFile,
				fmt.Sprintf("certificate %s is not valid before %s (NotBefore): check the certificate and the clock",
					certName(leaf), formatDate(leaf.NotBefore))))
		case now.After(leaf.NotAfter):
			probs = append(probs, problem("TLS_CERT_FILE", c.TLSCertFile,
				fmt.Sprintf("certificate %s expired on %s (NotAfter): renew it",
					certName(leaf), formatDate(leaf.NotAfter))))
		case leaf.NotAfter.Sub(now) <= CertExpiryWarning:
			warns = append(warns, problem("TLS_CERT_FILE", c.TLSCertFile,
				fmt.Sprintf("certificate %s expires on %s (NotAfter, %s): renew it",
					certName(leaf), formatDate(leaf.NotAfter), inTime(leaf.NotAfter.Sub(now)))))
		}
	}
	return probs, warns
}

// readTLSFile reads a regular file of at most maxPEMFile bytes. On failure
// it returns what is wrong in plain words.
func readTLSFile(path string) ([]byte, string) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fileErrRule(err)
	}
	switch {
	case fi.IsDir():
		return nil, "is a directory, not a PEM file"
	case !fi.Mode().IsRegular():
		return nil, "is not a regular file"
	case fi.Size() > maxPEMFile:
		return nil, fmt.Sprintf("is %d bytes, too large for a PEM file (limit %d)", fi.Size(), maxPEMFile)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fileErrRule(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPEMFile+1))
	if err != nil {
		return nil, fileErrRule(err)
	}
	if len(data) > maxPEMFile {
		return nil, fmt.Sprintf("is larger than %d bytes, too large for a PEM file", maxPEMFile)
	}
	return data, ""
}

func fileErrRule(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "file does not exist"
	case errors.Is(err, fs.ErrPermission):
		return "file is not readable (permission denied)"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return "cannot read the file: " + err.Error()
}

// pemBlocks returns the PEM blocks of data, skipping text between them.
func pemBlocks(data []byte) []*pem.Block {
	var out []*pem.Block
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		out = append(out, b)
	}
}

// checkCAFile says what is wrong with a CA bundle, or "".
func checkCAFile(path string) string {
	data, rule := readTLSFile(path)
	if rule != "" {
		return rule
	}
	var certs, bad int
	var firstErr error
	hasKey := false
	for _, b := range pemBlocks(data) {
		switch {
		case b.Type == "CERTIFICATE":
			certs++
			if _, err := x509.ParseCertificate(b.Bytes); err != nil {
				bad++
				if firstErr == nil {
					firstErr = fmt.Errorf("certificate %d: %w", certs, err)
				}
			}
		case strings.Contains(b.Type, "PRIVATE KEY"):
			hasKey = true
		}
	}
	switch {
	case certs == 0 && hasKey:
		return "holds a private key, not a PEM certificate: a CA bundle holds only certificates"
	case certs == 0:
		return "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
	case bad > 0:
		return fmt.Sprintf("%d of %d certificates do not parse (%v): fix or remove them", bad, certs, firstErr)
	}
	return ""
}

// readCertFile reads a client certificate chain; the first certificate is
// the leaf.
func readCertFile(path string) ([]byte, *x509.Certificate, string) {
	data, rule := readTLSFile(path)
	if rule != "" {
		return nil, nil, rule
	}
	hasKey := false
	for _, b := range pemBlocks(data) {
		switch {
		case b.Type == "CERTIFICATE":
			leaf, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, nil, "the certificate does not parse: " + err.Error()
			}
			return data, leaf, ""
		case strings.Contains(b.Type, "PRIVATE KEY"):
			hasKey = true
		}
	}
	if hasKey {
		return nil, nil, "holds a private key, not a certificate (are TLS_CERT_FILE and TLS_KEY_FILE swapped?)"
	}
	return nil, nil, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
}

// readKeyFile reads a client private key.
func readKeyFile(path string) ([]byte, string) {
	data, rule := readTLSFile(path)
	if rule != "" {
		return nil, rule
	}
	hasCert := false
	for _, b := range pemBlocks(data) {
		switch {
		case b.Type == "PRIVATE KEY" || strings.HasSuffix(b.Type, " PRIVATE KEY"):
			return data, ""
		case b.Type == "CERTIFICATE":
			hasCert = true
		}
	}
	if hasCert {
		return nil, "holds a certificate, not a private key (are TLS_CERT_FILE and TLS_KEY_FILE swapped?)"
	}
	return nil, "holds no PEM private key (-----BEGIN PRIVATE KEY-----)"
}

// keyPairRule turns tls.X509KeyPair's error into a rule on TLS_KEY_FILE.
// Its messages hold no key material.
func keyPairRule(err error, prefix string) string {
	msg := strings.TrimPrefix(err.Error(), "tls: ")
	if strings.Contains(msg, "does not match") {
		return "must be the private key of the certificate in " + prefix + "_TLS_CERT_FILE: the key does not match the certificate"
	}
	return "the private key does not parse with the certificate: " + msg
}

// certName names a certificate in a message: its subject CN, else its
// serial number.
func certName(c *x509.Certificate) string {
	if c.Subject.CommonName != "" {
		return fmt.Sprintf("%q", c.Subject.CommonName)
	}
	return "serial " + c.SerialNumber.String()
}

func formatDate(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// inTime says how far away d is, in days when it is more than two.
func inTime(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("in %d days", int(math.Round(d.Hours()/24)))
	}
	return "in " + formatDuration(d.Round(time.Minute))
}
