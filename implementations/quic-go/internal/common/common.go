// Package common holds the bits shared by the interop server and client:
// reading the runner's environment, TLS key logging and qlog set-up.
package common

import (
	"fmt"
	"io"
	"log"
	"os"
	"strconv"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
)

// Getenv returns the value of an environment variable that must be set.
func Getenv(name string) string {
	v := os.Getenv(name)
	if v == "" {
		log.Fatalf("environment variable %s is not set", name)
	}
	return v
}

// ApplyParams translates the PARAM_* variables set by the runner into the
// knobs quic-go reads. It must run before the first UDP socket is created.
func ApplyParams() error {
	if v, ok := os.LookupEnv("PARAM_GSO"); ok && v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("PARAM_GSO: %w", err)
		}
		if !on {
			// read by quic-go (sys_conn_helper_linux.go) when it sets up the socket
			if err := os.Setenv("QUIC_GO_DISABLE_GSO", "true"); err != nil {
				return err
			}
			log.Printf("GSO disabled (QUIC_GO_DISABLE_GSO=true)")
		}
	}
	return nil
}

// KeyLog opens $SSLKEYLOGFILE for appending if it is set, else returns nil.
func KeyLog() (io.WriteCloser, error) {
	path := os.Getenv("SSLKEYLOGFILE")
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening key log file: %w", err)
	}
	return f, nil
}

// QUICConfig returns the QUIC configuration: quic-go's defaults, plus qlog
// output into $QLOGDIR when that is set.
func QUICConfig() *quic.Config {
	conf := &quic.Config{}
	if os.Getenv("QLOGDIR") != "" {
		// DefaultConnectionTracer writes <odcid>_<perspective>.sqlog into $QLOGDIR.
		conf.Tracer = qlog.DefaultConnectionTracer
	}
	return conf
}
