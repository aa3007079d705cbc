package comm

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// TLS over "tls://" addresses as distributed does it
// (distributed/security.py Security._get_tls_context, comm/tcp.py
// TLSListener and TLSConnector): every peer presents a certificate signed
// by the cluster's CA, both ways (mutual TLS), and host names are not
// checked (clusters are addressed by IP). The TLS handshake runs in the
// connection's own goroutine, inside the dask handshake's deadline
// (distributed.comm.timeouts.connect), never in the accept loop.

// TLSSettings are one role's TLS configuration (distributed.comm.tls.*
// and the --tls-* flags): file paths, or PEM text when the value holds a
// newline, as Security accepts.
type TLSSettings struct {
	CAFile, Cert, Key string
	// MinVersion, MaxVersion: tls.VersionTLS12 or tls.VersionTLS13; 0 for
	// MinVersion means 1.2 (distributed's default), for MaxVersion none.
	MinVersion, MaxVersion uint16
	// Ciphers restricts TLS 1.2's suites (an OpenSSL cipher list, see
	// ParseCiphers); nil allows Go's defaults. TLS 1.3's suites are not
	// configurable, in OpenSSL's set_ciphers either.
	Ciphers []uint16
}

// TLSConfig is what a Listener and the dialing side need: the server and
// client halves of one role's configuration.
type TLSConfig struct {
	Server, Client *tls.Config
}

// NewTLSConfig loads the CA and the role's certificate and key and builds
// both halves. distributed needs the CA and the certificate for TLS
// (_get_tls_context returns None without them); so do we.
func NewTLSConfig(s TLSSettings) (*TLSConfig, error) {
	if s.CAFile == "" || s.Cert == "" {
		return nil, errors.New("TLS needs a CA file and a certificate (distributed.comm.tls.ca-file and .scheduler.cert, or --tls-ca-file and --tls-cert)")
	}
	caPEM, err := pemOrFile(s.CAFile)
	if err != nil {
		return nil, fmt.Errorf("TLS CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("TLS CA file %s: no PEM certificate in it", describePEM(s.CAFile))
	}
	certPEM, err := pemOrFile(s.Cert)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	keyPEM := certPEM // the key may be appended to the certificate file, as distributed allows
	if s.Key != "" {
		if keyPEM, err = pemOrFile(s.Key); err != nil {
			return nil, fmt.Errorf("TLS key: %w", err)
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", describePEM(s.Cert), describePEM(s.Key), err)
	}
	minV, maxV := s.MinVersion, s.MaxVersion
	if minV == 0 {
		minV = tls.VersionTLS12
	}
	if maxV != 0 && maxV < minV {
		return nil, fmt.Errorf("TLS max-version %s is below min-version %s", tls.VersionName(maxV), tls.VersionName(minV))
	}
	base := tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   minV,
		MaxVersion:   maxV,
		CipherSuites: s.Ciphers,
	}
	server := base.Clone()
	server.ClientCAs = pool
	server.ClientAuth = tls.RequireAndVerifyClientCert
	client := base.Clone()
	// check_hostname = False with CERT_REQUIRED: the chain must lead to
	// the CA, whatever names it carries. crypto/tls ties the two, so the
	// chain is verified here instead.
	client.InsecureSkipVerify = true
	client.VerifyConnection = func(cs tls.ConnectionState) error { return verifyChain(cs, pool) }
	return &TLSConfig{Server: server, Client: client}, nil
}

// verifyChain checks the server's certificate against the CA without a
// host name, as ssl with check_hostname=False does.
func verifyChain(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the server presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}

// pemOrFile is Security's convention: a value with a newline is the PEM
// itself ("Temporary (In-memory)"), otherwise a path.
func pemOrFile(v string) ([]byte, error) {
	if strings.Contains(v, "\n") {
		return []byte(v), nil
	}
	return os.ReadFile(v)
}

func describePEM(v string) string {
	if strings.Contains(v, "\n") {
		return "(in memory)"
	}
	return v
}

// TLSVersion reads distributed.comm.tls.min-version / max-version: 1.2 or
// 1.3 (numbers, as in the YAML); null is 0.
func TLSVersion(v any) (uint16, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case float64:
		switch x {
		case 1.2:
			return tls.VersionTLS12, nil
		case 1.3:
			return tls.VersionTLS13, nil
		}
	case string:
		switch strings.TrimSpace(x) {
		case "1.2":
			return tls.VersionTLS12, nil
		case "1.3":
			return tls.VersionTLS13, nil
		}
	}
	return 0, fmt.Errorf("%v is not supported, expected one of 1.2, 1.3 or null", v)
}

// openSSLCiphers maps OpenSSL's names of the TLS 1.2 suites Go implements
// to Go's, so that a cipher list written for distributed reads here.
var openSSLCiphers = map[string]uint16{
	"ECDHE-ECDSA-AES128-GCM-SHA256": tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-RSA-AES128-GCM-SHA256":   tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-ECDSA-AES256-GCM-SHA384": tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-RSA-AES256-GCM-SHA384":   tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-ECDSA-CHACHA20-POLY1305": tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-RSA-CHACHA20-POLY1305":   tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-ECDSA-AES128-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA,
	"ECDHE-RSA-AES128-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
	"ECDHE-ECDSA-AES256-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,
	"ECDHE-RSA-AES256-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA,
	"AES128-GCM-SHA256":             tls.TLS_RSA_WITH_AES_128_GCM_SHA256,
	"AES256-GCM-SHA384":             tls.TLS_RSA_WITH_AES_256_GCM_SHA384,
}

// ParseCiphers reads distributed.comm.tls.ciphers: a list of suite names
// separated by ':' (OpenSSL's separator), ',' or spaces, each an OpenSSL
// name ("ECDHE-RSA-AES128-GCM-SHA256") or Go's/IANA's
// ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"). OpenSSL's keywords and
// operators ("HIGH", "!aNULL", "@STRENGTH") have no Go equivalent: an
// error names them. TLS 1.3 suite names are accepted and ignored, as
// set_ciphers ignores them.
func ParseCiphers(list string) ([]uint16, error) {
	goNames := map[string]uint16{}
	for _, cs := range tls.CipherSuites() {
		goNames[cs.Name] = cs.ID
	}
	var out []uint16
	var bad []string
	for _, name := range strings.FieldsFunc(list, func(r rune) bool { return r == ':' || r == ',' || r == ' ' }) {
		if id, ok := openSSLCiphers[name]; ok {
			out = append(out, id)
		} else if id, ok := goNames[name]; ok {
			if tlsVersionOf(id) == tls.VersionTLS13 {
				continue
			}
			out = append(out, id)
		} else {
			bad = append(bad, name)
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("TLS ciphers %q: not suite names Go implements (OpenSSL keywords and operators are not supported; list suites by name)", bad)
	}
	if len(out) == 0 && list != "" && strings.TrimSpace(list) != "" {
		return nil, fmt.Errorf("TLS ciphers %q: no TLS 1.2 suite left", list)
	}
	return out, nil
}

func tlsVersionOf(id uint16) uint16 {
	for _, cs := range tls.CipherSuites() {
		if cs.ID == id {
			for _, v := range cs.SupportedVersions {
				if v == tls.VersionTLS13 && len(cs.SupportedVersions) == 1 {
					return tls.VersionTLS13
				}
			}
		}
	}
	return tls.VersionTLS12
}
