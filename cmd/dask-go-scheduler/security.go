package main

import (
	"crypto/tls"
	"fmt"

	"daskgo/comm"
	"daskgo/compat"
)

// security is what `dask scheduler` builds as its Security: the scheduler
// role's TLS (distributed.comm.tls.*, overridden by --tls-ca-file,
// --tls-cert, --tls-key) and whether plain TCP is refused. As
// Security.__init__ does, a null distributed.comm.require-encryption
// means "required exactly when TLS flags were given".
type security struct {
	tls               *comm.TLSConfig // nil: no TLS configured
	requireEncryption bool
	dashboard         *tls.Config // HTTPS on the dashboard address, or nil
}

func securityOf(o options, st compat.SchedulerSettings) (security, error) {
	var sec security
	s := st.TLS
	if o.tlsCA != "" {
		s.CAFile = o.tlsCA
	}
	if o.tlsCert != "" {
		s.Cert = o.tlsCert
	}
	if o.tlsKey != "" {
		s.Key = o.tlsKey
	}
	if st.RequireEncryption != nil {
		sec.requireEncryption = *st.RequireEncryption
	} else {
		sec.requireEncryption = o.tlsFlags()
	}
	if s.CAFile != "" || s.Cert != "" || s.Key != "" {
		cs, err := comm.ParseCiphers(s.Ciphers)
		if err != nil {
			return sec, fmt.Errorf("distributed.comm.tls.ciphers: %w", err)
		}
		minV, err := comm.TLSVersion(s.MinVersion)
		if err != nil {
			return sec, fmt.Errorf("distributed.comm.tls.min-version: %w", err)
		}
		maxV, err := comm.TLSVersion(s.MaxVersion)
		if err != nil {
			return sec, fmt.Errorf("distributed.comm.tls.max-version: %w", err)
		}
		if sec.tls, err = comm.NewTLSConfig(comm.TLSSettings{CAFile: s.CAFile, Cert: s.Cert, Key: s.Key,
			MinVersion: minV, MaxVersion: maxV, Ciphers: cs}); err != nil {
			return sec, err
		}
	}
	if d := st.DashboardTLS; d.Cert != "" {
		key := d.Key
		if key == "" {
			key = d.Cert
		}
		cert, err := tls.LoadX509KeyPair(d.Cert, key)
		if err != nil {
			return sec, fmt.Errorf("distributed.scheduler.dashboard.tls: %w", err)
		}
		// ca-file is loaded by distributed into a context that does not ask
		// for client certificates: plain HTTPS, as here.
		sec.dashboard = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return sec, nil
}
