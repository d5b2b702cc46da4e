package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"slices"
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
	if l.tls.read {
		return slices.Clone(l.tls.warns)
	}
	_, warns, _ := checkTLSFiles(&l, nil, time.Now())
	return warns
}

// TLSFiles holds what [Load] read from a system's TLS files, so that
// registry builds the system's TLS settings from the very bytes Load
// checked instead of reading the files a second time. Later reads happen
// only when the files change (client certificate rotation).
//
// Printing a TLSFiles (%v, %+v, %#v, slog, JSON) shows sizes and names,
// never key material.
type TLSFiles struct {
	// CAPEM is the content of TLS_CA_FILE; nil when it is unset.
	CAPEM []byte
	// Cert is the client certificate and key of TLS_CERT_FILE and
	// TLS_KEY_FILE, parsed; nil when they are unset.
	Cert *tls.Certificate
	// CertInfo and KeyInfo describe the two files as they were read
	// (os.Stat, which follows links), to tell a later change.
	CertInfo, KeyInfo fs.FileInfo
}

// String says what the files hold, never the key.
func (f TLSFiles) String() string {
	cert := "none"
	if f.Cert != nil && f.Cert.Leaf != nil {
		cert = certName(f.Cert.Leaf)
	}
	return fmt.Sprintf("TLSFiles{CA: %d bytes, client certificate: %s}", len(f.CAPEM), cert)
}

// GoString is String.
func (f TLSFiles) GoString() string { return f.String() }

// LogValue is String.
func (f TLSFiles) LogValue() slog.Value { return slog.StringValue(f.String()) }

// MarshalJSON is String, as a JSON string.
func (f TLSFiles) MarshalJSON() ([]byte, error) { return json.Marshal(f.String()) }

// TLSFiles returns what Load read from the system's TLS files, and false
// when this Loaded was not made by Load, LoadCode or Revalidate (or its
// TLS settings were edited since): the caller must read the files itself.
func (l Loaded) TLSFiles() (TLSFiles, bool) {
	c := l.Client
	ok := l.tls.read && c.TLSCAFile == l.checked.TLSCAFile && c.TLSCertFile == l.checked.TLSCertFile && c.TLSKeyFile == l.checked.TLSKeyFile
	if !ok {
		return TLSFiles{}, false
	}
	return l.tls.files, true
}

// tlsState is what Load learnt from the TLS files of one system.
type tlsState struct {
	read  bool
	files TLSFiles
	warns []Problem
}

// checkTLSFiles checks the TLS files of a loaded system as of now:
// TLS_CA_FILE is a readable file holding at least one PEM certificate, and
// TLS_CERT_FILE and TLS_KEY_FILE are readable, parse as a pair whose key
// matches the certificate, and the certificate is valid at now. Settings
// named in skip (Go field names) did not parse and are not checked. probs
// make Load fail; warns (a certificate close to expiry) do not.
func checkTLSFiles(l *Loaded, skip map[string]bool, now time.Time) (probs, warns []Problem, files TLSFiles) {
	c := l.Client
	problem := func(suffix, value, rule string) Problem {
		return Problem{System: l.Name, Var: l.Prefix + "_" + suffix, Value: value, Source: l.SourceOf(suffix), Rule: rule}
	}

	if c.TLSCAFile != "" && !skip["TLSCAFile"] {
		pem, rule := checkCAFile(c.TLSCAFile)
		if rule != "" {
			probs = append(probs, problem("TLS_CA_FILE", c.TLSCAFile, rule))
		}
		files.CAPEM = pem
	}

	var (
		certPEM, keyPEM   []byte
		certInfo, keyInfo fs.FileInfo
		leaf              *x509.Certificate
		certOK, keyOK     bool
	)
	if c.TLSCertFile != "" && !skip["TLSCertFile"] {
		var rule string
		certPEM, certInfo, leaf, rule = readCertFile(c.TLSCertFile)
		if rule != "" {
			probs = append(probs, problem("TLS_CERT_FILE", c.TLSCertFile, rule))
		} else {
			certOK = true
		}
	}
	if c.TLSKeyFile != "" && !skip["TLSKeyFile"] {
		var rule string
		keyPEM, keyInfo, rule = readKeyFile(c.TLSKeyFile)
		if rule != "" {
			probs = append(probs, problem("TLS_KEY_FILE", c.TLSKeyFile, rule))
		} else {
			keyOK = true
		}
	}
	if certOK && keyOK {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			probs = append(probs, problem("TLS_KEY_FILE", c.TLSKeyFile, keyPairRule(err, l.Prefix)))
		} else {
			files.Cert, files.CertInfo, files.KeyInfo = &pair, certInfo, keyInfo
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
	return probs, warns, files
}

// readTLSFile reads a regular file of at most maxPEMFile bytes, and
// returns it with what os.Stat said of it just before. On failure it
// returns what is wrong in plain words.
func readTLSFile(path string) ([]byte, fs.FileInfo, string) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, fileErrRule(err)
	}
	switch {
	case fi.IsDir():
		return nil, nil, "is a directory, not a PEM file"
	case !fi.Mode().IsRegular():
		return nil, nil, "is not a regular file"
	case fi.Size() > maxPEMFile:
		return nil, nil, fmt.Sprintf("is %d bytes, too large for a PEM file (limit %d)", fi.Size(), maxPEMFile)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fileErrRule(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPEMFile+1))
	if err != nil {
		return nil, nil, fileErrRule(err)
	}
	if len(data) > maxPEMFile {
		return nil, nil, fmt.Sprintf("is larger than %d bytes, too large for a PEM file", maxPEMFile)
	}
	return data, fi, ""
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

// checkCAFile reads a CA bundle and says what is wrong with it, or "".
func checkCAFile(path string) ([]byte, string) {
	data, _, rule := readTLSFile(path)
	if rule != "" {
		return nil, rule
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
		return nil, "holds a private key, not a PEM certificate: a CA bundle holds only certificates"
	case certs == 0:
		return nil, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
	case bad > 0:
		return nil, fmt.Sprintf("%d of %d certificates do not parse (%v): fix or remove them", bad, certs, firstErr)
	}
	return data, ""
}

// readCertFile reads a client certificate chain; the first certificate is
// the leaf.
func readCertFile(path string) ([]byte, fs.FileInfo, *x509.Certificate, string) {
	data, fi, rule := readTLSFile(path)
	if rule != "" {
		return nil, nil, nil, rule
	}
	hasKey := false
	for _, b := range pemBlocks(data) {
		switch {
		case b.Type == "CERTIFICATE":
			leaf, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, nil, nil, "the certificate does not parse: " + err.Error()
			}
			return data, fi, leaf, ""
		case strings.Contains(b.Type, "PRIVATE KEY"):
			hasKey = true
		}
	}
	if hasKey {
		return nil, nil, nil, "holds a private key, not a certificate (are TLS_CERT_FILE and TLS_KEY_FILE swapped?)"
	}
	return nil, nil, nil, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
}

// readKeyFile reads a client private key.
func readKeyFile(path string) ([]byte, fs.FileInfo, string) {
	data, fi, rule := readTLSFile(path)
	if rule != "" {
		return nil, nil, rule
	}
	hasCert := false
	for _, b := range pemBlocks(data) {
		switch {
		case b.Type == "PRIVATE KEY" || strings.HasSuffix(b.Type, " PRIVATE KEY"):
			return data, fi, ""
		case b.Type == "CERTIFICATE":
			hasCert = true
		}
	}
	if hasCert {
		return nil, nil, "holds a certificate, not a private key (are TLS_CERT_FILE and TLS_KEY_FILE swapped?)"
	}
	return nil, nil, "holds no PEM private key (-----BEGIN PRIVATE KEY-----)"
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
