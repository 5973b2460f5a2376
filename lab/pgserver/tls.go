package pgserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// writeTLS creates a throwaway CA and a server certificate for localhost and
// 127.0.0.1 signed by it: server.crt and server.key in the data directory (owned by
// the server's user, key mode 0600 as PostgreSQL demands) and ca.crt beside it.
func (s *Server) writeTLS() error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pgleader test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return err
	}
	files := []struct {
		path  string
		typ   string
		der   []byte
		mode  os.FileMode
		chown bool
	}{
		{filepath.Join(s.dataDir, "server.crt"), "CERTIFICATE", srvDER, 0o644, true},
		{filepath.Join(s.dataDir, "server.key"), "EC PRIVATE KEY", keyDER, 0o600, true},
		{s.CAFile(), "CERTIFICATE", caDER, 0o644, false},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), f.mode); err != nil {
			return fmt.Errorf("pgserver: %w", err)
		}
		if f.chown {
			if err := s.chown(f.path); err != nil {
				return err
			}
		}
	}
	return nil
}

// CAFile returns the path of the CA certificate that signed the server's
// certificate (Options.TLS), for sslrootcert.
func (s *Server) CAFile() string { return filepath.Join(s.dir, "ca.crt") }
